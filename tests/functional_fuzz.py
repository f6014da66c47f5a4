"""Differential fuzzing of nn.functional's non-spatial, non-loss ops over their argument space.

Every activation with its parameters (alpha, beta, threshold, lambd, slopes, min/max, prelu
weight shapes, rrelu in eval mode, glu's dim) and its inplace forms (F.relu(x, inplace=True)
and F.relu_), softmax/log_softmax/softmin (dim, dtype), gumbel_softmax's deterministic parts,
normalize, the normalizations (layer/group/instance/batch/local response/rms: training or
eval, momentum, running statistics or None, weight/bias or None, use_input_stats), embedding
(padding_idx, max_norm and its renorm of the weight, scale_grad_by_freq, norm_type),
embedding_bag (modes, offsets, per_sample_weights, include_last_offset, padding_idx), one_hot,
the distances (pairwise_distance, cosine_similarity, pdist, cdist), the channel/pixel
shuffles, the dropouts at p=0, p=1 and in eval, affine_grid and linear/bilinear. Inputs are
float64 (a quarter float32), 0-d, empty and non-contiguous, with values drawn at the ops'
kinks and thresholds. Each case must give torch's raise/no-raise and exception type, the same
value, the same gradients of every floating input and parameter for a random upstream
gradient, and the same state afterwards (the input of an inplace op, running statistics, an
embedding's weight after max_norm).

    .venv/bin/python tests/functional_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/functional_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np

RTOL, RTOL32 = 1e-9, 2e-5  # of the array's scale: float64, float32 cases


def x_spec(shape, specials=(), scale=1.0, grad=True, kind="normal", nc=False, dtype=None):
    """A floating input: `specials` are mixed into its values (the op's kinks); `dtype` when
    not the case's."""
    return dict(kind=kind, shape=tuple(shape), specials=tuple(specials), scale=scale,
                grad=grad, nc=nc, dtype=dtype)


def _param(r, shape, mixed=False, **kw):
    """A weight: sometimes non-contiguous; `mixed`: rarely of another dtype than the input
    (not drawn for the normalizations and embeddings: there flowgrad checks the dtypes before
    torch's other checks, a momentum's type, an empty batch's shortcut, and a float16
    embedding's max_norm renorm rounds in float16 in torch, in float64 once in flowgrad)."""
    return x_spec(shape, nc=_nc(r), dtype="float16" if mixed and r.random() < 0.05 else None,
                  **kw)


def i_spec(shape, lo, hi, dtype="int64"):
    """An integer input drawn from [lo, hi)."""
    return dict(kind="int", shape=tuple(shape), lo=lo, hi=hi, dtype=dtype)


def _shape(r, lo=0, hi=4, max_size=5):
    return tuple(r.randint(0 if r.random() < 0.1 else 1, max_size)
                 for _ in range(r.randint(lo, hi)))


def _nc(r):
    return r.random() < 0.25


# name: (its kwargs drawn from r, the kinks of those kwargs, whether it takes inplace=)
def _alpha(r):
    return {"alpha": r.choice([1.0, 0.5, 2.0, 0.0, -0.5])} if r.random() < 0.7 else {}


def _softplus(r):
    return {"beta": r.choice([1.0, 2.0, 0.5, -1.0]), "threshold": r.choice([20.0, 1.0, 0.5])}


def _hardtanh(r):
    lo = r.choice([-1.0, -2.0, 0.5, 0.0])
    return {"min_val": lo, "max_val": r.choice([lo + 1.5, 1.0, lo, lo - 0.5, lo - 0.5])}


def _threshold(r):
    return {"threshold": r.choice([0.0, 0.5, -1.0]), "value": r.choice([0.0, -2.0, 7.0])}


def _lambd(r):
    return {"lambd": r.choice([0.5, 0.0, 1.5, -0.5])} if r.random() < 0.8 else {}


def _rrelu(r):
    lo = r.choice([1 / 8, 0.1, 0.5])
    up = r.choice([1 / 3, lo, 0.9, lo / 2])
    # (training draws each slope from U(lower, upper): deterministic only when they are equal)
    return {"lower": lo, "upper": up, "training": up == lo and r.random() < 0.6}


ACTIVATIONS = {
    "relu": (lambda r: {}, lambda kw: [0.0], True),
    "relu6": (lambda r: {}, lambda kw: [0.0, 6.0], True),
    "elu": (_alpha, lambda kw: [0.0], True),
    "selu": (lambda r: {}, lambda kw: [0.0], True),
    "celu": (_alpha, lambda kw: [0.0], True),
    "gelu": (lambda r: {"approximate": r.choice(["none", "tanh", "tanh", "sigmoid"])}
             if r.random() < 0.7 else {},
             lambda kw: [0.0], False),
    "silu": (lambda r: {}, lambda kw: [0.0], True),
    "mish": (lambda r: {}, lambda kw: [0.0], True),
    "softplus": (lambda r: _softplus(r) if r.random() < 0.8 else {},
                 lambda kw: [kw.get("threshold", 20.0) / kw.get("beta", 1.0)], False),
    "hardtanh": (lambda r: _hardtanh(r) if r.random() < 0.8 else {},
                 lambda kw: [kw.get("min_val", -1.0), kw.get("max_val", 1.0)], True),
    "hardsigmoid": (lambda r: {}, lambda kw: [-3.0, 3.0], True),
    "hardswish": (lambda r: {}, lambda kw: [-3.0, 3.0, 0.0], True),
    "leaky_relu": (lambda r: {"negative_slope": r.choice([0.01, 0.2, -0.5, 1.5, 0.0])}
                   if r.random() < 0.7 else {}, lambda kw: [0.0], True),
    "rrelu": (lambda r: _rrelu(r) if r.random() < 0.8 else {}, lambda kw: [0.0], True),
    "threshold": (_threshold, lambda kw: [kw["threshold"]], True),
    "logsigmoid": (lambda r: {}, lambda kw: [0.0], False),
    "softsign": (lambda r: {}, lambda kw: [0.0], False),
    "tanhshrink": (lambda r: {}, lambda kw: [0.0], False),
    "softshrink": (_lambd, lambda kw: [kw.get("lambd", 0.5), -kw.get("lambd", 0.5)], False),
    "hardshrink": (_lambd, lambda kw: [kw.get("lambd", 0.5), -kw.get("lambd", 0.5)], False),
    "sigmoid": (lambda r: {}, lambda kw: [0.0], False),
    "tanh": (lambda r: {}, lambda kw: [0.0], False),
}
# the trailing-underscore spellings torch.nn.functional has
UNDERSCORE = ("relu", "elu", "selu", "celu", "leaky_relu", "hardtanh", "threshold", "rrelu")


def _activation(r):
    name = r.choice(sorted(ACTIVATIONS))
    kwargs_of, kinks, has_inplace = ACTIVATIONS[name]
    kw = kwargs_of(r)
    shape = _shape(r)
    x = x_spec(shape, kinks(kw), scale=r.choice([1.0, 3.0]), nc=_nc(r))
    if r.random() < 0.08:  # an integer input (no gradient)
        x = i_spec(shape, -4, 5)
    inplace = None
    if has_inplace and r.random() < 0.35:
        inplace = "underscore" if name in UNDERSCORE and r.random() < 0.4 else "flag"
        inplace += r.choice(["", "", "", " on leaf", " on view"])
    if name == "threshold":  # positional in torch
        return dict(fn=name, args=[x, kw["threshold"], kw["value"]], kwargs={}, inplace=inplace)
    return dict(fn=name, args=[x], kwargs=kw, inplace=inplace)


def _prelu(r):
    c = r.choice([1, 3, 4])
    shape = r.choice([(2, c), (2, c, 3), (c,), (), (0, c, 2), (2, c, 2, 2)])
    wshape = r.choice([(1,), (c,), (c,), (), (2,)])
    return dict(fn="prelu", args=[x_spec(shape, [0.0], nc=_nc(r)), _param(r, wshape, True)],
                kwargs={})


def _glu(r):
    shape = tuple(r.choice([2, 4, 3, 0, 6]) for _ in range(r.randint(0, 3)))
    kw = {"dim": r.randint(-len(shape) - 1, len(shape))} if r.random() < 0.7 else {}
    return dict(fn="glu", args=[x_spec(shape, nc=_nc(r))], kwargs=kw)


def _softmax(r):
    name = r.choice(["softmax", "log_softmax", "softmin"])
    shape = _shape(r)
    kw = {"dim": r.randint(-len(shape) - 1, max(len(shape), 1))}
    if r.random() < 0.1:
        del kw["dim"]  # (torch's legacy implicit dim, with a warning)
    if r.random() < 0.2:
        kw["dtype"] = "float64"
    x = x_spec(shape, [0.0, 1e30, -1e30] if r.random() < 0.1 else [], scale=r.choice([1, 30]),
               nc=_nc(r))
    return dict(fn=name, args=[x], kwargs=kw)


def _gumbel(r):
    shape = _shape(r, 1, 3)
    kw = {"tau": r.choice([1.0, 0.5, 2.0]), "hard": r.random() < 0.5,
          "dim": r.randint(-len(shape), max(len(shape) - 1, 0))}
    return dict(fn="gumbel_softmax", args=[x_spec(shape)], kwargs=kw, post="gumbel")


def _normalize(r):
    shape = _shape(r)
    kw = {"p": r.choice([2.0, 1.0, float("inf"), 0.5, 3.0, 0.0, -1.0]),
          "dim": r.randint(-len(shape) - 1, max(len(shape), 1)),
          "eps": r.choice([1e-12, 0.5, 0.0])}
    return dict(fn="normalize", args=[x_spec(shape, [0.0], nc=_nc(r))], kwargs=kw)


def _affine_param(r, shape, p=0.7):
    """A weight/bias of `shape` or None."""
    return _param(r, shape) if r.random() < p else None


def _layer_norm(r):
    shape = _shape(r, 1, 4)
    k = r.randint(0, len(shape))
    ns = list(shape[len(shape) - k:])
    if r.random() < 0.1:
        ns = [n + 1 for n in ns] or [2]  # wrong shape
    name = r.choice(["layer_norm", "rms_norm"])
    kw = {"weight": _affine_param(r, ns), "bias": _affine_param(r, ns) if name == "layer_norm"
          else None, "eps": r.choice([1e-5, 0.1] if np.prod(ns) > 2 else [0.1])
          if name == "layer_norm" else
          r.choice([None, 1e-5, 0.5])}
    if name == "rms_norm":
        del kw["bias"]
    return dict(fn=name, args=[x_spec(shape, nc=_nc(r)), ns], kwargs=kw)


def _group_norm(r):
    g = r.choice([1, 2, 3])
    c = g * r.choice([1, 2]) + (1 if r.random() < 0.1 else 0)
    shape = (r.choice([0, 1, 2, 3]), c) + _shape(r, 0, 2, 4)
    # (a group of one or two values has a variance of rounding errors: with a small eps its
    # float32 gradients are those errors times 1 / sqrt(eps), not compared)
    small = c // g * np.prod(shape[2:]) <= 2
    kw = {"weight": _affine_param(r, (c,)), "bias": _affine_param(r, (c,)),
          "eps": 0.3 if small else r.choice([1e-5, 0.3])}
    return dict(fn="group_norm", args=[x_spec(shape, nc=_nc(r)), g], kwargs=kw)


def _stats(r, c):
    """(running_mean, running_var) specs or None."""
    if r.random() < 0.3:
        return None, None
    return x_spec((c,), grad=False), x_spec((c,), grad=False, kind="positive")


def _batch_norm(r):
    c = r.choice([1, 2, 3])
    shape = (r.choice([1, 2, 3, 0]), c) + _shape(r, 0, 2, 4)
    if r.random() < 0.05:
        shape = (c,)
    mean, var = _stats(r, c)
    kw = {"weight": _affine_param(r, (c,)), "bias": _affine_param(r, (c,)),
          "training": r.random() < 0.6 or mean is None,
          "momentum": r.choice([0.1, 0.5, 1.0, None]),
          "eps": r.choice([1e-5, 0.2])}
    return dict(fn="batch_norm", args=[x_spec(shape, nc=_nc(r)), mean, var], kwargs=kw,
                state=["args1", "args2"])


def _instance_norm(r):
    c = r.choice([1, 2, 3])
    shape = (r.choice([1, 2, 0]), c) + _shape(r, 1, 3, 4)
    mean, var = _stats(r, c)
    kw = {"running_mean": mean, "running_var": var, "weight": _affine_param(r, (c,)),
          "bias": _affine_param(r, (c,)), "use_input_stats": r.random() < 0.6 or mean is None,
          "momentum": r.choice([0.1, 0.7, 0.7, None]), "eps": r.choice([1e-5, 0.2])}
    return dict(fn="instance_norm", args=[x_spec(shape, nc=_nc(r))], kwargs=kw,
                state=["running_mean", "running_var"])


def _lrn(r):
    shape = (r.choice([1, 2]), r.choice([1, 3, 5])) + _shape(r, 0, 3, 4)
    kw = {"alpha": r.choice([1e-4, 0.5]), "beta": r.choice([0.75, 1.0, 0.0]),
          "k": r.choice([1.0, 2.0])}
    return dict(fn="local_response_norm", args=[x_spec(shape), r.choice([1, 2, 3, 6])],
                kwargs=kw)


def _embedding(r):
    v, d = r.choice([1, 4, 7]), r.choice([1, 3])
    idx = i_spec(_shape(r, 0, 3, 4), 0, v, "int32" if r.random() < 0.1 else "int64")
    if r.random() < 0.05:
        idx = i_spec(idx["shape"], -1, v + 1)
    kw = {}
    if r.random() < 0.4:
        kw["padding_idx"] = r.randint(-v - (1 if r.random() < 0.1 else 0), v - 1)
    if r.random() < 0.4:
        kw["max_norm"] = r.choice([1.0, 0.5, 2.0])
        kw["norm_type"] = r.choice([2.0, 1.0, 3.0, float("inf")])
    if r.random() < 0.4:
        kw["scale_grad_by_freq"] = True
    return dict(fn="embedding", args=[idx, _param(r, (v, d), scale=1.5)], kwargs=kw,
                state=["args1"])


def _embedding_bag(r):
    v, d = r.choice([1, 4, 7]), r.choice([1, 3])
    mode = r.choice(["sum", "mean", "max"])
    kw = {"mode": mode}
    if r.random() < 0.5:
        idx = i_spec((r.choice([0, 1, 3]), r.choice([0, 2, 3])), 0, v)
        n = None
    else:
        n = r.choice([0, 1, 4, 7])
        idx = i_spec((n,), 0, v)
        nb = r.randint(1, 4)
        kw["offsets"] = ("offsets", n, nb)
        kw["include_last_offset"] = r.random() < 0.3
    if mode == "sum" and r.random() < 0.4 or r.random() < 0.05:
        kw["per_sample_weights"] = _param(r, idx["shape"])
    if r.random() < 0.3:
        kw["padding_idx"] = r.randint(-v, v - 1)
    if r.random() < 0.2:
        kw["max_norm"] = r.choice([1.0, 0.5])
    return dict(fn="embedding_bag", args=[idx, _param(r, (v, d), scale=1.5)], kwargs=kw,
                state=["args1"])


def _one_hot(r):
    shape = _shape(r, 0, 3, 4)
    c = r.choice([1, 3, 5])
    lo = -1 if r.random() < 0.05 else 0
    return dict(fn="one_hot", args=[i_spec(shape, lo, c, "int64" if r.random() < 0.9 else
                                           "int32")],
                kwargs={"num_classes": r.choice([-1, -1, c, c + 2, c - 1])})


def _distance(r):
    name = r.choice(["pairwise_distance", "cosine_similarity", "pdist", "cdist"])
    d = r.choice([1, 3, 4])
    if name == "pdist":
        n = r.choice([0, 1, 2, 4])
        # (torch 2.13's backward of pdist over 0 rows is a segmentation fault)
        return dict(fn=name, args=[x_spec((n, d), [0.0], nc=_nc(r), grad=n > 0)],
                    kwargs={"p": r.choice([2.0, 1.0, 0.0, float("inf"), 0.5, 3.0])})
    if name == "cdist":
        batch = r.choice([(), (2,), (0,), (1, 2)])
        sa = batch + (r.choice([0, 1, 3]), d)
        sb = (r.choice([(), (1,)]) if batch else ()) + (r.choice([1, 2, 26]), d)
        kw = {"p": r.choice([2.0, 1.0, 0.0, float("inf"), 0.5, 3.0])}
        if r.random() < 0.5:
            kw["compute_mode"] = r.choice(["use_mm_for_euclid_dist_if_necessary",
                                           "use_mm_for_euclid_dist",
                                           "donot_use_mm_for_euclid_dist"])
        return dict(fn=name, args=[x_spec(sa, nc=_nc(r)), x_spec(sb)], kwargs=kw)
    sa = (r.choice([1, 3, 0]), d)
    sb = r.choice([sa, (1, d), (d,), sa[:1] + (1,)])
    if r.random() < 0.5:
        sa, sb = sb, sa
    if name == "pairwise_distance":
        kw = {"p": r.choice([2.0, 1.0, 0.0, float("inf"), 3.0]),
              "eps": r.choice([1e-6, 0.0, 0.5]), "keepdim": r.random() < 0.4}
    else:
        kw = {"dim": r.choice([1, -1, 0]), "eps": r.choice([1e-8, 0.5])}
    return dict(fn=name, args=[x_spec(sa, [0.0], nc=_nc(r)), x_spec(sb, [0.0])], kwargs=kw)


def _shuffle(r):
    name = r.choice(["pixel_shuffle", "pixel_unshuffle", "channel_shuffle"])
    f = r.choice([1, 2, 3])
    if name == "pixel_shuffle":
        c = f * f * r.choice([1, 2]) + (1 if r.random() < 0.1 else 0)
        shape = r.choice([(), (2,)]) + (c, r.choice([1, 2]), r.choice([0, 3]))
    elif name == "pixel_unshuffle":
        shape = r.choice([(), (2,)]) + (r.choice([1, 2]), f * r.choice([1, 2]), f * 2)
    else:
        shape = (r.choice([1, 2]), f * r.choice([1, 2])) + _shape(r, 0, 2, 3)
    return dict(fn=name, args=[x_spec(shape, nc=_nc(r)), f], kwargs={})


def _dropout(r):
    name = r.choice(["dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d",
                     "dropout2d", "dropout3d"])
    kw = {"p": r.choice([0.0, 1.0, 0.5, 1.5, -0.1]), "training": r.random() < 0.6}
    if kw["training"] and kw["p"] == 0.5:
        kw["training"] = False  # (a random mask: only the deterministic cases)
    shape = _shape(r, 0, 5, 3)
    inplace = r.random() < 0.3
    return dict(fn=name, args=[x_spec(shape, nc=_nc(r))], kwargs=kw,
                inplace=r.choice(["flag", "flag", "flag on leaf", "flag on view"]) if inplace
                else None)


def _affine_grid(r):
    nd = r.choice([2, 3])
    n = r.choice([1, 2, 0])
    theta = (n, nd, nd + 1) if r.random() < 0.95 else (n, nd + 1, nd + 1)
    size = [n, r.choice([1, 3])] + [r.choice([1, 2, 4]) for _ in range(nd)]
    if r.random() < 0.05:
        size = size[:-1]
    kw = {"align_corners": r.choice([True, False])}
    return dict(fn="affine_grid", args=[x_spec(theta), size], kwargs=kw)


def _linear(r):
    fi, fo = r.choice([1, 3, 4]), r.choice([1, 2, 5])
    batch = _shape(r, 0, 3, 3)
    if r.random() < 0.5:
        shape = batch + (fi,) if r.random() < 0.95 else batch + (fi + 1,)
        w = r.choice([(fo, fi), (fo, fi), (fi,)])
        b = r.choice([None, (fo,), (), (1,)]) if len(w) == 2 else r.choice([None, ()])
        return dict(fn="linear", args=[x_spec(shape, nc=_nc(r)), _param(r, w, True),
                                       None if b is None else _param(r, b, True)], kwargs={})
    f2 = r.choice([1, 2])
    b = r.choice([None, (fo,)])
    return dict(fn="bilinear", args=[x_spec(batch + (fi,), nc=_nc(r)), x_spec(batch + (f2,)),
                                     x_spec((fo, fi, f2)), None if b is None else x_spec(b)],
                kwargs={})


FAMILIES = [_activation] * 6 + [_prelu, _glu, _softmax, _softmax, _gumbel, _normalize,
                                _layer_norm, _group_norm, _batch_norm, _batch_norm,
                                _instance_norm, _lrn, _embedding, _embedding, _embedding_bag,
                                _embedding_bag, _one_hot, _distance, _distance, _shuffle,
                                _dropout, _affine_grid, _linear]


def generate(seed):
    r = random.Random(seed)
    case = r.choice(FAMILIES)(r)
    case["seed"] = seed
    case["dtype"] = "float32" if r.random() < 0.25 else "float64"
    return case


def _make(m, rng, spec, dtype, leaves):
    """The tensor of `spec` (its requires-grad leaf appended to `leaves`)."""
    if spec["kind"] == "int":
        return m.tensor(rng.integers(spec["lo"], spec["hi"], spec["shape"]),
                        dtype=getattr(m, spec["dtype"]))
    shape = spec["shape"]
    nc = spec["nc"] and len(shape) > 0
    full = shape[:-1] + (2 * shape[-1],) if nc else shape
    a = rng.standard_normal(full) * spec["scale"]
    if spec["kind"] == "positive":
        a = np.abs(a) + 0.1
    if spec["specials"] and a.size:
        pick = rng.random(full) < 0.3
        a = np.where(pick, rng.choice(np.array(spec["specials"], float), full), a)
    leaf = m.tensor(a.astype(spec["dtype"] or dtype), requires_grad=spec["grad"])
    if spec["grad"]:
        leaves.append(leaf)
    return leaf[..., ::2] if nc else leaf


def _offsets(m, rng, n, nb, include_last):
    cuts = np.sort(rng.integers(0, n + 1, nb - 1)) if n else np.zeros(nb - 1, np.int64)
    off = np.concatenate([[0], cuts] + ([[n]] if include_last else []))
    return m.tensor(off.astype(np.int64))


def _run(m, case):
    """[value, the gradient of each floating leaf, the state afterwards] under module `m`."""
    rng = np.random.default_rng(case["seed"])
    dtype, leaves = case["dtype"], []

    def build(v):
        if isinstance(v, dict):
            return _make(m, rng, v, dtype, leaves)
        if isinstance(v, tuple) and v and v[0] == "offsets":
            return _offsets(m, rng, v[1], v[2], case["kwargs"].get("include_last_offset"))
        return v

    args = [build(a) for a in case["args"]]
    kwargs = {k: build(v) for k, v in case["kwargs"].items()}
    if "dtype" in kwargs:
        kwargs["dtype"] = getattr(m, kwargs["dtype"])
    fn = getattr(m.nn.functional, case["fn"], None) or getattr(m, case["fn"])  # (torch.cdist)
    x = args[0] if case["args"] and isinstance(case["args"][0], dict) else None
    inplace, base = case.get("inplace"), None
    if inplace is not None:
        # on a copy, on the input (a leaf or a view of one: torch refuses if it requires
        # grad), or on a view of a copy (which the op must write through)
        if "on leaf" not in inplace:
            x = base = args[0] * 1
            if "on view" in inplace and x.dim():
                x = base.transpose(0, -1)[..., :]
            args[0] = x
        if inplace.startswith("flag"):
            kwargs["inplace"] = True
        else:
            fn = getattr(m.nn.functional, case["fn"] + "_")
    before = None if x is None else x.detach().numpy().copy()
    if case.get("post") == "gumbel":
        m.manual_seed(case["seed"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(*args, **kwargs)
        if case.get("post") == "gumbel":
            out = _gumbel_facts(m, out, kwargs)
        if leaves and out.requires_grad:
            up = m.tensor(np.random.default_rng(case["seed"] + 1).standard_normal(
                tuple(out.shape)))
            grads = m.autograd.grad((out * up).sum(), leaves, allow_unused=True)
        else:
            grads = [None] * len(leaves)
    state = []
    if x is not None:  # the input afterwards, and whether the result is it
        state.append(x.detach().numpy() if inplace else
                     np.asarray(np.array_equal(x.detach().numpy(), before, equal_nan=True)))
        state.append(np.asarray(out is x))
    if base is not None:
        state.append(base.detach().numpy())
    for name in case.get("state", []):
        t = args[int(name[4:])] if name.startswith("args") else kwargs[name]
        state.append(None if t is None else t.detach().numpy().copy())
    return [out.detach().numpy()] + [None if g is None else g.numpy() for g in grads] + state


def _gumbel_facts(m, out, kwargs):
    """What gumbel_softmax's output must satisfy whatever its noise: sums of 1 along dim and,
    when hard, one 1 per slice (its gradient is that of the soft sample: not compared)."""
    dim = kwargs["dim"]
    facts = [out.sum(dim).detach()]
    if kwargs["hard"]:
        facts.append(((out == 1).sum(dim) + (out == 0).sum(dim)).double())
    return m.stack([f.double() for f in facts]) if facts[0].dim() else m.stack(facts)


def _outcome(m, case):
    """(the results, None) or (None, the exception's type)."""
    try:
        return _run(m, case), None
    except fuzz_common.TORCH_REFUSALS + (ZeroDivisionError, AssertionError) as e:
        return None, type(e)


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case (raise/no-raise and the exception's
    type, then every array), else a message."""
    import torch

    import flowgrad as flow
    case = case or generate(seed)
    want, torch_error = _outcome(torch, case)
    try:
        got, error = _outcome(flow, case)
    except Exception as e:
        return f"flowgrad raised {type(e).__name__}: {e}"
    if torch_error is not None or error is not None:
        if torch_error is error:
            return None
        return f"torch raised {getattr(torch_error, '__name__', None)}, flowgrad " \
               f"{getattr(error, '__name__', None)}"
    if len(want) != len(got):
        return f"{len(got)} results, torch {len(want)}"
    names = ["value"] + [f"result {i}" for i in range(1, len(got))]
    # an integer input's float result is float32 whatever the case's dtype: float32's rtol
    float32 = any(w is not None and w.dtype == np.float32 for w in want)
    rtol = RTOL if case["dtype"] == "float64" and not float32 else RTOL32
    return fuzz_common.first_difference(list(zip(names, got, want)), rtol)


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
