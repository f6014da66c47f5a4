"""Training utilities used as torch users use them (module state dicts, optimizer state,
data), compared with torch in the same process."""
from __future__ import annotations

import numpy as np
import pytest

import flowgrad as flow

torch = pytest.importorskip("torch")


def _renaming_module(lib):
    """A module whose `_load_from_state_dict` renames an old key before calling super, the
    usual way torch code migrates old checkpoints."""
    class Renaming(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = lib.nn.Parameter(lib.ones(2))

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                                  missing_keys, unexpected_keys, error_msgs):
            if prefix + "old_w" in state_dict:
                state_dict[prefix + "w"] = state_dict.pop(prefix + "old_w")
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                          missing_keys, unexpected_keys, error_msgs)
    return Renaming


@pytest.mark.parametrize("strict", [True, False])
def test_load_from_state_dict_override_renames_keys(strict):
    results = []
    for lib in (torch, flow):
        m = lib.nn.Sequential(lib.nn.Linear(2, 2), _renaming_module(lib)())
        sd = {k: v for k, v in m.state_dict().items() if not k.endswith("w")}
        sd["1.old_w"] = lib.tensor([3.0, 4.0])
        keys = m.load_state_dict(sd, strict=strict)
        results.append((m[1].w.detach().numpy().copy(), keys.missing_keys,
                        keys.unexpected_keys, "1.old_w" in sd))
    (tw, tmiss, tunexp, tkept), (fw, fmiss, funexp, fkept) = results
    np.testing.assert_array_equal(fw, tw)
    assert (fmiss, funexp, fkept) == (tmiss, tunexp, tkept)


def test_load_from_state_dict_override_reports_missing_keys():
    errors = []
    for lib in (torch, flow):
        class Reporting(lib.nn.Linear):
            def _load_from_state_dict(self, state_dict, prefix, *args):
                args[2].append(prefix + "needed")  # missing_keys
                super()._load_from_state_dict(state_dict, prefix, *args)
        m = Reporting(2, 2)
        keys = m.load_state_dict(m.state_dict(), strict=False)
        errors.append(keys.missing_keys)
        with pytest.raises(RuntimeError, match="needed"):
            m.load_state_dict(m.state_dict())
    assert errors[0] == errors[1] == ["needed"]


def test_load_pre_hook_gets_strict_true_as_torch():
    seen = []
    for lib in (torch, flow):
        m = lib.nn.Linear(2, 2)
        m.register_load_state_dict_pre_hook(lambda mod, sd, prefix, meta, strict, *rest:
                                            seen.append(strict))
        m.load_state_dict(m.state_dict(), strict=False)
    assert seen == [True, True]


def _train_with_shared_state(lib, opt_name, kw):
    """Two optimizers, the second loaded from the first's state_dict() in memory, both
    stepping on: torch's load keeps the given tensors (no copy), so they share state."""
    p = lib.nn.Parameter(lib.linspace(-1.5, 1.5, 6).reshape(2, 3))
    opt = getattr(lib.optim, opt_name)([p], **kw)
    for _ in range(2):
        opt.zero_grad()
        (p.sin() * p).sum().backward()
        opt.step()
    p2 = lib.nn.Parameter(p.detach().clone())
    opt2 = getattr(lib.optim, opt_name)([p2], **kw)
    opt2.load_state_dict(opt.state_dict())
    for _ in range(3):
        for param, o in ((p, opt), (p2, opt2)):
            o.zero_grad()
            (param.sin() * param).sum().backward()
            o.step()
    state = {k: (v.detach().numpy().copy() if hasattr(v, "numpy") else v)
             for k, v in opt2.state_dict()["state"][0].items()}
    return p.detach().numpy().copy(), p2.detach().numpy().copy(), state


@pytest.mark.parametrize("opt_name,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.05, amsgrad=True)),
    ("AdamW", dict(lr=0.05)), ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1)), ("Rprop", dict(lr=0.01)), ("NAdam", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, t0=1)), ("Adadelta", dict(lr=1.0)),
])
def test_optimizer_load_state_dict_keeps_the_given_tensors(opt_name, kw):
    tp, tp2, tstate = _train_with_shared_state(torch, opt_name, kw)
    fp, fp2, fstate = _train_with_shared_state(flow, opt_name, kw)
    np.testing.assert_allclose(fp, tp, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fp2, tp2, rtol=1e-5, atol=1e-6)
    assert sorted(fstate) == sorted(tstate)
    for k in tstate:
        np.testing.assert_allclose(np.asarray(fstate[k], np.float64),
                                   np.asarray(tstate[k], np.float64), rtol=1e-5, atol=1e-6)


def test_optimizer_restoring_an_in_memory_checkpoint_twice_as_torch():
    """`best = deepcopy(opt.state_dict())`, restored twice: torch's first restore steps
    `best`'s own tensors on, so the second restore starts from the moved state."""
    import copy
    results = []
    for lib in (torch, flow):
        p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 0.5]))
        opt = lib.optim.Adam([p], lr=0.1)

        def steps(n):
            for _ in range(n):
                opt.zero_grad()
                (p ** 4).sum().backward()
                opt.step()
        steps(2)
        best = copy.deepcopy(opt.state_dict())
        for _ in range(2):
            opt.load_state_dict(best)
            steps(2)
        results.append((p.detach().numpy().copy(),
                        best["state"][0]["exp_avg"].numpy().copy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5)


def test_load_state_dict_assign_keeps_given_buffers_and_parameters():
    seen = []
    for lib in (torch, flow):
        m = lib.nn.BatchNorm1d(2)
        rm = lib.tensor([1.0, 2.0])
        w = lib.nn.Parameter(lib.tensor([3.0, 4.0]), requires_grad=False)
        b = lib.zeros(2, dtype=lib.float64)
        m.load_state_dict({"weight": w, "bias": b, "running_mean": rm,
                           "running_var": lib.ones(2), "num_batches_tracked": lib.tensor(5)},
                          assign=True)
        seen.append((m.running_mean is rm, m.weight is w, m.weight.requires_grad,
                     m.bias is b, str(m.bias.dtype).split(".")[-1], m.bias.requires_grad))
    assert seen[1] == seen[0]


def _orders(lib):
    data = lib.utils.data
    ds = data.TensorDataset(lib.arange(10))
    g = lib.Generator().manual_seed(3)
    loader = data.DataLoader(ds, batch_size=4, shuffle=True, generator=g)
    out = {"loader_gen": [b[0].tolist() for epoch in range(2) for b in loader]}
    lib.manual_seed(5)
    out["loader_global"] = [b[0].tolist() for b in data.DataLoader(ds, batch_size=4,
                                                                     shuffle=True)]
    out["randperm_after"] = lib.randperm(6).tolist()
    for name, make in [
            ("random", lambda g: data.RandomSampler(range(10), generator=g)),
            ("random_n", lambda g: data.RandomSampler(range(10), num_samples=25, generator=g)),
            ("random_repl", lambda g: data.RandomSampler(range(7), replacement=True,
                                                         num_samples=40, generator=g)),
            ("subset", lambda g: data.SubsetRandomSampler([5, 7, 9, 11], generator=g))]:
        out[name] = list(make(lib.Generator().manual_seed(11)))
    out["split"] = [list(s.indices) for s in data.random_split(
        range(10), [0.3, 0.3, 0.4], generator=lib.Generator().manual_seed(3))]
    lib.manual_seed(2 ** 40 + 7)
    out["split_global"] = [list(s.indices) for s in data.random_split(range(9), [4, 5])]
    out["subset_global"] = list(data.SubsetRandomSampler([1, 2, 3, 4]))
    return out


def test_seeded_shuffle_orders_are_torchs():
    """torch's CPU stream (MT19937) drives randperm and the samplers: a seeded DataLoader,
    sampler or random_split gives torch's order."""
    assert _orders(flow) == _orders(torch)


def test_rng_state_round_trip_restores_the_shuffle_order():
    flow.manual_seed(1)
    state = flow.get_rng_state()
    first = flow.randperm(20).tolist(), flow.rand(3).tolist()
    flow.set_rng_state(state)
    assert (flow.randperm(20).tolist(), flow.rand(3).tolist()) == first
    with flow.random.fork_rng():
        flow.randperm(5)
    after = flow.randperm(8).tolist()
    flow.set_rng_state(state)
    flow.randperm(20), flow.rand(3)
    assert flow.randperm(8).tolist() == after


def _weighted_draws(lib):
    data = lib.utils.data
    w = [0.1, 0.9, 0.4, 0.7, 0.0, 1e-3]
    out = {"sampler": list(data.WeightedRandomSampler(w, 40, generator=lib.Generator()
                                                        .manual_seed(3)))}
    lib.manual_seed(8)
    out["sampler_global"] = list(data.WeightedRandomSampler(w, 9))
    for dtype in ("float32", "float64"):
        probs = lib.tensor([[0.1, 0.9, 0.4], [1.0, 0.0, 3.0]], dtype=getattr(lib, dtype))
        out[dtype] = lib.multinomial(probs, 12, replacement=True).tolist()
    return out


def test_weighted_sampling_with_replacement_draws_torchs_indices():
    assert _weighted_draws(flow) == _weighted_draws(torch)


@pytest.mark.parametrize("foreach", [None, True, False])
def test_clip_grad_value_refuses_complex_gradients_as_torch(foreach):
    for lib in (torch, flow):
        p = lib.nn.Parameter(lib.ones(2, dtype=lib.complex64))
        p.grad = lib.tensor([1 + 1j, -2j])
        with pytest.raises(NotImplementedError, match="complex"):
            lib.nn.utils.clip_grad_value_([p], 1.0, foreach=foreach)


def test_loaded_views_report_their_storage_offsets_as_torch():
    import io
    seen = []
    for lib in (torch, flow):
        base = lib.arange(12.0).reshape(3, 4)
        buf = io.BytesIO()
        lib.save({"base": base, "col": base[:, 2], "corner": base[1:, 1:], "t": base.t()}, buf)
        buf.seek(0)
        o = lib.load(buf)
        o["base"][1, 2] = 100.0  # still views of one storage
        seen.append({k: (v.storage_offset(), v.stride(), v.tolist()) for k, v in o.items()})
    assert seen[1] == seen[0]


class _Augmenting:
    """A dataset drawing from NumPy's and Python's global streams, as augmentations do."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        import random
        return int(np.random.randint(0, 10 ** 9)), random.randrange(10 ** 9)


def _worker_draws(lib):
    np.random.seed(0)
    g = lib.Generator().manual_seed(5)
    loader = lib.utils.data.DataLoader(_Augmenting(), batch_size=2, num_workers=2,
                                       generator=g)
    return [[x.tolist() for x in batch] for batch in loader]


def test_dataloader_workers_seed_numpy_as_torch():
    """Each worker seeds NumPy's global stream from the base seed and its id (torch's
    _generate_state): forked workers drew the same numbers, one worker's repeating the
    other's."""
    draws = _worker_draws(flow)
    assert draws == _worker_draws(torch)
    assert len({x for batch in draws for x in batch[0]}) == 8


def test_load_from_state_dict_override_may_claim_keys_after_super():
    """An override reading its own extra key after super() removes it from the unexpected
    keys torch's base method reported; the load then passes strict."""
    seen = []
    for lib in (torch, flow):
        class Claiming(lib.nn.Linear):
            def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs):
                super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                              missing_keys, unexpected_keys, error_msgs)
                key = prefix + "scale"
                if key in state_dict:
                    self.scale = float(state_dict[key])
                    unexpected_keys.remove(key)
        m = lib.nn.Sequential(Claiming(2, 2))
        sd = dict(m.state_dict())
        sd["0.scale"] = lib.tensor(3.0)
        sd["stray"] = lib.tensor(1.0)
        sd["0.weight.x"] = lib.tensor(1.0)
        keys = m.load_state_dict(sd, strict=False)
        del sd["stray"], sd["0.weight.x"]
        m.load_state_dict(sd)
        seen.append((keys.missing_keys, keys.unexpected_keys, m[0].scale))
    assert seen[1] == seen[0]
