"""Differential fuzzing of nn modules over their constructor options, against torch.

Norm layers (BatchNorm1d/2d/3d with momentum None or not, affine, track_running_stats, train
and eval; InstanceNorm with running stats; GroupNorm; LayerNorm without weight or bias;
RMSNorm; LocalResponseNorm), embeddings (padding_idx, max_norm, norm_type,
scale_grad_by_freq; EmbeddingBag sum/mean/max with offsets, per_sample_weights,
include_last_offset, padding_idx), recurrent layers (RNN tanh/relu, LSTM with proj_size, GRU;
layers, bidirectional, batch_first, bias, unbatched input, a given initial state), Linear and
Bilinear without bias, PReLU with one or many parameters, Softmax2d, CosineSimilarity,
PairwiseDistance, Fold/Unfold, ChannelShuffle, Flatten/Unflatten. Each module is built in
both frameworks with the same parameters (copied from torch's), run for two training steps
(forward, backward of a random projection, an SGD step) in float64, and must give the same
outputs, input and parameter gradients, parameters and buffers after every step.

    .venv/bin/python tests/module_fuzz.py --seeds 0:1000     # summary
    .venv/bin/python tests/module_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np
import torch

RTOL = 1e-9


def _norm(r):
    kind = r.choice(["bn", "bn", "in", "gn", "ln", "rms", "lrn"])
    n, c = r.choice([2, 3, 4]), r.choice([1, 2, 4])
    if kind == "bn":
        nd = r.choice([1, 1, 2, 3])
        cls = f"BatchNorm{nd}d"
        shape = (n, c) + tuple(r.randint(1, 3) for _ in range(nd - 1 if nd > 1 else
                                                                 r.choice([0, 1])))
        if nd > 1:
            shape = (n, c) + tuple(r.randint(1, 3) for _ in range(nd))
        kw = dict(eps=r.choice([1e-5, 1e-3]), momentum=r.choice([0.1, None, 0.5]),
                  affine=r.random() < 0.7, track_running_stats=r.random() < 0.8)
        return dict(cls=cls, args=(c,), kwargs=kw, shape=shape, train=r.random() < 0.7)
    if kind == "in":
        nd = r.choice([1, 2])
        shape = (n, c) + tuple(r.randint(2, 4) for _ in range(nd))
        kw = dict(affine=r.random() < 0.5, track_running_stats=r.random() < 0.5,
                  momentum=r.choice([0.1, 0.3]))
        return dict(cls=f"InstanceNorm{nd}d", args=(c,), kwargs=kw, shape=shape,
                    train=r.random() < 0.7)
    if kind == "gn":
        groups = r.choice([g for g in (1, 2, 4) if (2 * c) % g == 0])
        return dict(cls="GroupNorm", args=(groups, 2 * c), shape=(n, 2 * c, r.randint(1, 4)),
                    kwargs=dict(affine=r.random() < 0.6, eps=r.choice([1e-5, 1e-2])))
    if kind == "ln":
        tail = tuple(r.randint(1, 4) for _ in range(r.randint(1, 2)))
        kw = dict(elementwise_affine=r.random() < 0.7, bias=r.random() < 0.7)
        return dict(cls="LayerNorm", args=(tail,), kwargs=kw, shape=(n, 2) + tail)
    if kind == "rms":
        tail = (r.randint(2, 5),)
        kw = dict(eps=r.choice([None, 1e-6, 0.1]), elementwise_affine=r.random() < 0.7)
        return dict(cls="RMSNorm", args=(tail,), kwargs=kw, shape=(n, 3) + tail)
    return dict(cls="LocalResponseNorm", args=(r.choice([1, 2, 3]),),
                kwargs=dict(alpha=r.choice([1e-4, 0.1]), beta=0.75, k=r.choice([1.0, 2.0])),
                shape=(n, 5, r.randint(1, 4)))


def _embedding(r):
    num, dim = r.randint(3, 7), r.randint(1, 4)
    if r.random() < 0.5:
        kw = dict(padding_idx=r.choice([None, 0, -1, 2]),
                  scale_grad_by_freq=r.random() < 0.4)
        if r.random() < 0.4:
            kw.update(max_norm=r.choice([0.5, 1.0]), norm_type=r.choice([2.0, 1.0]))
        return dict(cls="Embedding", args=(num, dim), kwargs=kw, index=(r.randint(1, 3),
                                                                        r.randint(1, 5)),
                    num=num)
    mode = r.choice(["sum", "mean", "max"])
    kw = dict(mode=mode, include_last_offset=r.random() < 0.3,
              padding_idx=r.choice([None, None, 1]))
    if r.random() < 0.3:
        kw.update(max_norm=1.0)
    per_sample = mode == "sum" and r.random() < 0.4
    return dict(cls="EmbeddingBag", args=(num, dim), kwargs=kw, bag=r.randint(4, 9), num=num,
                per_sample=per_sample)


def _recurrent(r):
    cls = r.choice(["RNN", "LSTM", "GRU"])
    hidden, inp = r.randint(1, 4), r.randint(1, 3)
    kw = dict(num_layers=r.choice([1, 2]), bidirectional=r.random() < 0.4,
              batch_first=r.random() < 0.5, bias=r.random() < 0.8)
    if cls == "RNN":
        kw["nonlinearity"] = r.choice(["tanh", "relu"])
    if cls == "LSTM" and r.random() < 0.3 and hidden > 1:
        kw["proj_size"] = r.randint(1, hidden - 1)
    unbatched = r.random() < 0.2
    seq, n = r.randint(1, 4), r.randint(1, 3)
    shape = (seq, inp) if unbatched else ((n, seq, inp) if kw["batch_first"] else (seq, n, inp))
    return dict(cls=cls, args=(inp, hidden), kwargs=kw, shape=shape,
                initial_state=r.random() < 0.4, unbatched=unbatched, batch=n)


def _misc(r):
    which = r.choice(["Linear", "Bilinear", "PReLU", "Softmax2d", "CosineSimilarity",
                      "PairwiseDistance", "Unfold", "ChannelShuffle", "Unflatten",
                      "Hardtanh", "Threshold", "GLU", "LogSoftmax", "Softmin"])
    n = r.randint(1, 3)
    if which == "Linear":
        return dict(cls=which, args=(3, 2), kwargs=dict(bias=r.random() < 0.5), shape=(n, 3))
    if which == "Bilinear":
        return dict(cls=which, args=(2, 3, 2), kwargs=dict(bias=r.random() < 0.5),
                    shape=(n, 2), shape2=(n, 3))
    if which == "PReLU":
        k = r.choice([1, 3])
        return dict(cls=which, args=(), kwargs=dict(num_parameters=k, init=0.2),
                    shape=(n, 3, 2))
    if which == "Softmax2d":
        return dict(cls=which, args=(), kwargs={}, shape=(n, 3, 2, 2))
    if which in ("CosineSimilarity", "PairwiseDistance"):
        kw = dict(dim=1, eps=r.choice([1e-8, 1e-2])) if which == "CosineSimilarity" else \
            dict(p=r.choice([1.0, 2.0, 3.0]), eps=1e-6, keepdim=r.random() < 0.5)
        return dict(cls=which, args=(), kwargs=kw, shape=(n, 4), shape2=(n, 4))
    if which == "Unfold":
        return dict(cls=which, args=(), kwargs=dict(kernel_size=2, dilation=r.choice([1, 2]),
                                                   padding=r.choice([0, 1]), stride=1),
                    shape=(n, 2, 4, 4))
    if which == "ChannelShuffle":
        return dict(cls=which, args=(2,), kwargs={}, shape=(n, 4, 2))
    if which == "Unflatten":
        return dict(cls=which, args=(1, (2, 3)), kwargs={}, shape=(n, 6))
    if which == "Hardtanh":
        return dict(cls=which, args=(), kwargs=dict(min_val=-0.5, max_val=0.7), shape=(n, 5))
    if which == "Threshold":
        return dict(cls=which, args=(0.1, -2.0), kwargs={}, shape=(n, 5))
    if which == "GLU":
        return dict(cls=which, args=(), kwargs=dict(dim=r.choice([-1, 1])), shape=(n, 4, 4))
    return dict(cls=which, args=(), kwargs=dict(dim=r.choice([-1, 0, 1])), shape=(n, 4))


def generate(seed):
    r = random.Random(seed)
    case = r.choice([_norm, _norm, _embedding, _recurrent, _recurrent, _misc])(r)
    case["seed"] = seed
    return case


def _inputs(m, case, rng):
    """Input tensors (and extra call arguments) of the case under module `m`."""
    if case["cls"] == "Embedding":
        idx = rng.integers(0, case["num"], case["index"])
        return [m.tensor(idx)], []
    if case["cls"] == "EmbeddingBag":
        idx = rng.integers(0, case["num"], case["bag"])
        cuts = np.sort(rng.choice(np.arange(1, case["bag"]), 2, replace=False))
        offsets = np.concatenate([[0], cuts])
        if case["kwargs"].get("include_last_offset"):
            offsets = np.concatenate([offsets, [case["bag"]]])
        extra = [m.tensor(offsets)]
        if case.get("per_sample"):
            extra.append(m.tensor(rng.uniform(0.5, 2.0, case["bag"]), requires_grad=True))
        return [m.tensor(idx)], extra
    x = m.tensor(rng.standard_normal(case["shape"]), requires_grad=True)
    if "shape2" in case:
        return [x, m.tensor(rng.standard_normal(case["shape2"]), requires_grad=True)], []
    if case.get("initial_state"):
        kw = case["kwargs"]
        d = 2 if kw["bidirectional"] else 1
        layers = kw["num_layers"] * d
        out_h = kw.get("proj_size") or case["args"][1]
        hshape = (layers, out_h) if case["unbatched"] else (layers, case["batch"], out_h)
        h = m.tensor(rng.standard_normal(hshape), requires_grad=True)
        if case["cls"] == "LSTM":
            cshape = hshape[:-1] + (case["args"][1],)
            c = m.tensor(rng.standard_normal(cshape), requires_grad=True)
            return [x], [(h, c)]
        return [x], [h]
    return [x], []


def _run(m, case, params):
    """Outputs, gradients, parameters and buffers after each of two steps, under `m`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        layer = getattr(m.nn, case["cls"])(*case["args"], **case["kwargs"]).double()
        if params is not None:
            with m.no_grad():
                for name, p in layer.named_parameters():
                    p.copy_(m.tensor(params[name]))
        if not case.get("train", True):
            layer.eval()
        opt = m.optim.SGD(layer.parameters(), lr=0.1) if list(layer.parameters()) else None
        rng = np.random.default_rng(case["seed"])
        history = []
        for _ in range(2):
            inputs, extra = _inputs(m, case, rng)
            out = layer(*inputs, *extra)
            outs = list(out) if isinstance(out, tuple) else [out]
            flat = []
            for o in outs:
                flat.extend(o if isinstance(o, tuple) else [o])
            total = sum((o * m.tensor(rng.standard_normal(tuple(o.shape)))).sum()
                        for o in flat if o.dtype.is_floating_point)
            leaves = [t for t in inputs + [e for e in extra if hasattr(e, "requires_grad")]
                      if t.dtype.is_floating_point]
            for e in extra:
                if isinstance(e, tuple):
                    leaves.extend(e)
            if opt is not None:
                opt.zero_grad()
            if total.requires_grad:
                grads = m.autograd.grad(total, leaves, retain_graph=True, allow_unused=True) \
                    if leaves else []
                total.backward()
            else:
                grads = []
            if opt is not None:
                opt.step()
            history.append(dict(
                outputs=[o.detach().numpy().copy() for o in flat],
                grads=[None if g is None else g.numpy().copy() for g in grads],
                params={k: v.detach().numpy().copy() for k, v in layer.named_parameters()},
                buffers={k: np.asarray(v.numpy(), float).copy()
                         for k, v in layer.named_buffers()}))
        return history, {k: v.detach().numpy().copy() for k, v in layer.named_parameters()}


def _close(a, b):
    if a is None or b is None:
        return a is None and b is None
    if a.shape != b.shape:
        return False
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    a, b = np.nan_to_num(a), np.nan_to_num(b)
    return bool(np.abs(a - b).max(initial=0.0) <= RTOL * max(1.0, np.abs(b).max(initial=0.0)))


def check(seed, case=None):
    """None when flowgrad's module trains as torch's, else a message."""
    case = case or generate(seed)
    try:  # torch's initial parameters, copied into both (None: torch refuses the options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            ref = getattr(torch.nn, case["cls"])(*case["args"], **case["kwargs"]).double()
        params = {k: v.detach().numpy().copy() for k, v in ref.named_parameters()}
    except fuzz_common.TORCH_REFUSALS:
        params = None
    both = fuzz_common.run_both(lambda m, c: _run(m, c, params)[0], case)
    if not isinstance(both, tuple):
        return both
    want, got = both
    for step, (g, w) in enumerate(zip(got, want)):
        for key in ("outputs", "grads"):
            if len(g[key]) != len(w[key]):
                return f"step {step}: {len(g[key])} {key}, torch {len(w[key])}"
            for i, (a, b) in enumerate(zip(g[key], w[key])):
                if not _close(a, b):
                    return f"step {step}: {key} {i} differs: flowgrad {a!r}, torch {b!r}"
        for key in ("params", "buffers"):
            if sorted(g[key]) != sorted(w[key]):
                return f"step {step}: {key} {sorted(g[key])}, torch {sorted(w[key])}"
            for name in w[key]:
                if not _close(g[key][name], w[key][name]):
                    return (f"step {step}: {key[:-1]} {name} differs: flowgrad "
                            f"{g[key][name]!r}, torch {w[key][name]!r}")
    return None


def main():
    fuzz_common.main(__doc__, generate, check, seeds="0:300")


if __name__ == "__main__":
    main()
