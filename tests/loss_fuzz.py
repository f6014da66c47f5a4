"""Differential fuzzing of the losses over their argument space, against torch.

Every loss of torch.nn.functional is drawn with its options: reduction (none, mean, sum),
class weights, ignore_index (also on every target), label smoothing, probability targets,
pos_weight, margins, p and eps, beta/delta, log_input/full, swap, the target's dtype and shape
(0-d targets, K-dimensional inputs, empty batches). Each case runs in float64 (a quarter in
float32) in both frameworks and must give the same raise/no-raise, the same value (nan where
torch gives nan) and the same gradients of every floating input for a random upstream
gradient.

    .venv/bin/python tests/loss_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/loss_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np

RTOL, RTOL32 = 1e-9, 2e-5  # of the array's scale


def _reduction(r):
    return r.choice(["none", "mean", "sum"])


def _classification(r):
    """cross_entropy / nll_loss over (N, C, d...) with weights, ignore_index, smoothing."""
    name = r.choice(["cross_entropy", "cross_entropy", "nll_loss"])
    n, c = r.choice([0, 1, 3, 5]), r.choice([1, 2, 4])
    extra = r.choice([(), (), (3,), (2, 2)])
    no_batch = not extra and r.random() < 0.15
    shape = (c,) if no_batch else (n, c) + extra
    tshape = () if no_batch else (n,) + extra
    kw = {"reduction": _reduction(r)}
    if r.random() < 0.4:
        kw["weight"] = ("weight", (c,))
    ignore = None
    if r.random() < 0.4:
        ignore = r.choice([-100, 0, c - 1, -1])
        kw["ignore_index"] = ignore
    probs = name == "cross_entropy" and r.random() < 0.25
    if name == "cross_entropy" and r.random() < 0.4:
        kw["label_smoothing"] = r.choice([0.1, 0.5])
    target = ("probs", shape) if probs else ("classes", tshape, c, ignore)
    inputs = [("logits" if name == "cross_entropy" else "logprobs", shape), target]
    return dict(fn=name, inputs=inputs, kwargs=kw)


def _regression(r):
    name = r.choice(["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss",
                     "binary_cross_entropy", "binary_cross_entropy_with_logits",
                     "poisson_nll_loss", "gaussian_nll_loss", "kl_div",
                     "multilabel_soft_margin_loss", "hinge_embedding_loss"])
    shape = r.choice([(), (4,), (3, 2), (0, 3), (2, 3, 2)])
    kw = {"reduction": _reduction(r)}
    x, t = ("normal", shape), ("normal", shape)
    extra = []
    if name == "smooth_l1_loss":
        kw["beta"] = r.choice([1.0, 0.5, 0.0])
    elif name == "huber_loss":
        kw["delta"] = r.choice([1.0, 0.3, 2.0])
    elif name == "soft_margin_loss":
        t = ("signs", shape)
    elif name == "hinge_embedding_loss":
        t = ("signs", shape)
        kw["margin"] = r.choice([1.0, 0.5])
    elif name == "binary_cross_entropy":
        x, t = ("unit", shape), ("unit", shape)
        if r.random() < 0.3:
            kw["weight"] = ("positive", shape)
    elif name == "binary_cross_entropy_with_logits":
        t = ("unit", shape)
        if r.random() < 0.3:
            kw["weight"] = ("positive", shape)
        if r.random() < 0.3 and shape:
            kw["pos_weight"] = ("positive", shape[-1:])
    elif name == "poisson_nll_loss":
        kw["log_input"] = r.random() < 0.5
        kw["full"] = r.random() < 0.5
        x = ("normal", shape) if kw["log_input"] else ("positive", shape)
        t = ("counts", shape)
    elif name == "gaussian_nll_loss":
        extra = [("positive", shape)]
        kw["full"] = r.random() < 0.5
        kw["eps"] = r.choice([1e-6, 0.1])
    elif name == "kl_div":
        kw["reduction"] = r.choice(["none", "mean", "sum", "batchmean"])
        kw["log_target"] = r.random() < 0.5
        x = ("logprob_like", shape)
        t = ("normal", shape) if kw["log_target"] else ("unit", shape)
    elif name == "multilabel_soft_margin_loss":
        shape = r.choice([(3, 4), (1, 2), (0, 3)])
        x, t = ("normal", shape), ("binary", shape)
        if r.random() < 0.3:
            kw["weight"] = ("positive", shape[-1:])
    return dict(fn=name, inputs=[x, t] + extra, kwargs=kw)


def _pairs(r):
    name = r.choice(["margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss",
                     "multi_margin_loss", "multilabel_margin_loss"])
    kw = {"reduction": _reduction(r)}
    n, d = r.choice([0, 1, 3]), r.choice([2, 4])
    if name in ("multi_margin_loss", "multilabel_margin_loss"):
        # (not an empty batch: torch 2.13 returns its uninitialised output there, 1e-310 or
        # 1e13; flowgrad gives nan for the mean and 0 for the sum, as the other losses)
        n = max(n, 1)
    if name == "margin_ranking_loss":
        kw["margin"] = r.choice([0.0, 0.5])
        inputs = [("normal", (n,)), ("normal", (n,)), ("signs", (n,))]
    elif name == "cosine_embedding_loss":
        kw["margin"] = r.choice([0.0, 0.3])
        inputs = [("normal", (n, d)), ("normal", (n, d)), ("signs", (n,))]
    elif name == "triplet_margin_loss":
        kw.update(margin=r.choice([1.0, 0.2]), p=r.choice([1.0, 2.0, 3.0]),
                  eps=r.choice([1e-6, 1e-3]), swap=r.random() < 0.4)
        inputs = [("normal", (n, d))] * 3
    elif name == "multi_margin_loss":
        kw.update(p=r.choice([1, 2]), margin=r.choice([1.0, 0.5]))
        if r.random() < 0.3:
            kw["weight"] = ("positive", (d,))
        inputs = [("normal", (n, d)), ("classes", (n,), d, None)]
    else:
        inputs = [("normal", (n, d)), ("multilabel", (n, d))]
    return dict(fn=name, inputs=inputs, kwargs=kw)


def generate(seed):
    r = random.Random(seed)
    case = r.choice([_classification, _classification, _regression, _regression, _pairs])(r)
    case["seed"] = seed
    case["dtype"] = "float32" if r.random() < 0.25 else "float64"
    return case


def _array(rng, spec, dtype):
    """(array, differentiable) for an input spec."""
    kind, shape = spec[0], spec[1]
    if kind == "classes":
        c, ignore = spec[2], spec[3]
        t = rng.integers(0, c, shape) if c else np.zeros(shape, np.int64)
        if ignore is not None and np.ndim(t) and rng.random() < 0.5:
            t = np.where(rng.random(shape) < 0.3, ignore, t)
        return np.asarray(t, np.int64), False
    if kind == "multilabel":  # class indices then -1 padding, per row
        n, d = shape
        t = -np.ones(shape, np.int64)
        for i in range(n):
            k = rng.integers(0, d + 1)
            t[i, :k] = rng.permutation(d)[:k]
        return t, False
    if kind == "signs":
        return rng.choice([-1.0, 1.0], shape).astype(dtype), False
    if kind == "binary":
        return (rng.random(shape) < 0.5).astype(dtype), False
    if kind == "counts":
        return rng.integers(0, 5, shape).astype(dtype), False
    if kind == "weight":
        return rng.uniform(0.2, 2.0, shape).astype(dtype), False
    if kind == "probs":
        p = rng.random(shape) + 0.05
        return (p / p.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)).astype(dtype), True
    if kind == "unit":
        return rng.uniform(0.05, 0.95, shape).astype(dtype), True
    if kind == "positive":
        return rng.uniform(0.2, 2.0, shape).astype(dtype), True
    if kind == "logprobs":
        x = rng.standard_normal(shape)
        ax = 1 if len(shape) > 1 else 0
        x = x - np.log(np.exp(x).sum(axis=ax, keepdims=True)) if x.size else x
        return x.astype(dtype), True
    if kind == "logprob_like":
        return np.log(rng.uniform(0.05, 0.95, shape)).astype(dtype), True
    return rng.standard_normal(shape).astype(dtype), True  # normal, logits


def _run(m, case):
    rng = np.random.default_rng(case["seed"])
    dtype = case["dtype"]
    tensors, grads_of = [], []
    for spec in case["inputs"]:
        a, diff = _array(rng, spec, dtype)
        t = m.tensor(a, requires_grad=diff)
        tensors.append(t)
        if diff:
            grads_of.append(t)
    kwargs = {}
    for k, v in case["kwargs"].items():
        if isinstance(v, tuple) and v and isinstance(v[0], str):
            a, _ = _array(rng, v, dtype)
            v = m.tensor(a)
        kwargs[k] = v
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = getattr(m.nn.functional, case["fn"])(*tensors, **kwargs)
        up = m.tensor(np.random.default_rng(case["seed"] + 1).standard_normal(
            tuple(out.shape)).astype(dtype))
        if grads_of and out.requires_grad:
            gs = m.autograd.grad((out * up).sum(), grads_of, allow_unused=True)
        else:
            gs = [None] * len(grads_of)
    return [out.detach().numpy()] + [None if g is None else g.numpy() for g in gs]


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    rtol = RTOL if case["dtype"] == "float64" else RTOL32
    return fuzz_common.check_value_and_gradients(_run, case, rtol)


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
