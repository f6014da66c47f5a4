"""LBFGS, Rprop, ASGD, SparseAdam, Adafactor and optim.swa_utils against torch: the same
parameters after several steps on the same losses."""
import numpy as np
import pytest
import torch

import flowgrad as flow

SHAPES = [(4, 3), (3,), (2, 3, 2)]


def _params(fw, dtype):
    rng = np.random.default_rng(0)
    return [fw.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in SHAPES]


def _loss(fw, ps):
    a, b, c = ps
    return (a.tanh() ** 2).sum() + ((b - 0.5) ** 4).sum() + (c * c.sin()).sum() \
        + (a.sum() * b.sum()) ** 2


def _run(fw, make, steps, dtype=np.float64, sparse_rows=False):
    ps = _params(fw, dtype)
    opt = make(fw, ps)
    for _ in range(steps):
        opt.zero_grad()
        _loss(fw, ps).backward()
        if sparse_rows:  # only some rows touched: what SparseAdam is for
            for p in ps:
                p.grad[1:2] = 0
            for p in ps:  # (SparseAdam takes sparse gradients only, as torch's)
                p.grad = p.grad.to_sparse(1) if p.dim() > 1 else p.grad.to_sparse()
        opt.step()
    return [p.detach().numpy() for p in ps]


CASES = [
    ("rprop", lambda m, ps: m.optim.Rprop(ps, lr=0.05)),
    ("rprop_maximize", lambda m, ps: m.optim.Rprop(ps, lr=0.01, etas=(0.3, 1.5),
                                                   step_sizes=(1e-3, 0.2), maximize=True)),
    ("asgd", lambda m, ps: m.optim.ASGD(ps, lr=0.05, t0=3, weight_decay=0.1)),
    ("adafactor", lambda m, ps: m.optim.Adafactor(ps, lr=0.05)),
    ("adafactor_wd", lambda m, ps: m.optim.Adafactor(ps, lr=0.05, weight_decay=0.1, d=1.5,
                                                     beta2_decay=-0.5)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_optimizer_steps_match_torch(case):
    _, make = case
    for a, b in zip(_run(flow, make, 8), _run(torch, make, 8)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def test_sparse_adam_matches_torch_on_touched_rows():
    make = lambda m, ps: m.optim.SparseAdam(ps[:1] + ps[2:], lr=0.05)  # noqa: E731
    ours = _run(flow, make, 6, sparse_rows=True)
    theirs = _run(torch, make, 6, sparse_rows=True)
    for i in (0, 2):
        np.testing.assert_allclose(ours[i], theirs[i], rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_matches_torch(line_search):
    def fit(fw):
        ps = _params(fw, np.float64)
        opt = fw.optim.LBFGS(ps, lr=0.5 if line_search is None else 1, max_iter=15,
                             history_size=5, line_search_fn=line_search)
        losses = []

        def closure():
            opt.zero_grad()
            loss = _loss(fw, ps)
            loss.backward()
            return loss
        for _ in range(3):
            losses.append(float(opt.step(closure).detach()))
        return losses, [p.detach().numpy() for p in ps], opt.state[ps[0]]["func_evals"]
    (lo, po, eo), (lt, pt, et) = fit(flow), fit(torch)
    np.testing.assert_allclose(lo, lt, rtol=1e-7)
    assert eo == et
    for a, b in zip(po, pt):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_lbfgs_rejects_groups_and_unknown_line_search():
    w = flow.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="per-parameter options"):
        flow.optim.LBFGS([{"params": [w]}, {"params": [flow.zeros(1, requires_grad=True)]}])
    with pytest.raises(ValueError, match="strong_wolfe"):
        flow.optim.LBFGS([w], line_search_fn="armijo")


def _swa_run(fw, use_buffers, avg):
    fw.manual_seed(0)
    rng = np.random.default_rng(0)
    model = fw.nn.Sequential(fw.nn.Linear(3, 4), fw.nn.BatchNorm1d(4), fw.nn.Linear(4, 1))
    init = np.random.default_rng(5)
    with fw.no_grad():
        for p in model.parameters():
            p.copy_(fw.tensor(init.standard_normal(tuple(p.shape)).astype(np.float32)))
    fns = {"swa": {}, "ema": {"multi_avg_fn": fw.optim.swa_utils.get_ema_multi_avg_fn(0.9)},
           "ema_fn": {"avg_fn": fw.optim.swa_utils.get_ema_avg_fn(0.8)}}
    swa = fw.optim.swa_utils.AveragedModel(model, use_buffers=use_buffers, **fns[avg])
    opt = fw.optim.SGD(model.parameters(), lr=0.1)
    sched = fw.optim.swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=3)
    lrs = []
    data = [fw.tensor(rng.standard_normal((8, 3)).astype(np.float32)) for _ in range(4)]
    for x in data:
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
        swa.update_parameters(model)
    fw.optim.swa_utils.update_bn(data, swa)
    return lrs, [t.detach().numpy() for t in swa.state_dict().values()]


@pytest.mark.parametrize("use_buffers,avg", [(False, "swa"), (True, "ema"),
                                             (False, "ema_fn")])
def test_swa_utils_match_torch(use_buffers, avg):
    (lo, so), (lt, st) = _swa_run(flow, use_buffers, avg), _swa_run(torch, use_buffers, avg)
    np.testing.assert_allclose(lo, lt, rtol=1e-12)
    assert len(so) == len(st)
    for a, b in zip(so, st):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_bad_hyperparameters_raise_like_torch():
    w = [flow.zeros(2, requires_grad=True)]
    with pytest.raises(ValueError, match="Invalid eta values"):
        flow.optim.Rprop(w, etas=(1.5, 1.2))
    with pytest.raises(ValueError, match="beta2_decay should be <= 0"):
        flow.optim.Adafactor(w, beta2_decay=0.5)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        flow.optim.SparseAdam(w, lr=0.0)
    with pytest.raises(ValueError, match="anneal_strategy"):
        flow.optim.swa_utils.SWALR(flow.optim.SGD(w, lr=0.1), 0.01, anneal_strategy="exp")
