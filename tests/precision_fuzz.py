"""Differential fuzzing of float32 ACCURACY against torch's.

The other fuzzers compare flowgrad with torch to a tolerance, which hides a float32 formula
10-100x less accurate than torch's (layer_norm's weight gradient as rstd @ (dy x) -
(mean rstd) @ dy cancelled when a row's mean is large beside its spread). Here each case runs
an op (its value and the gradients of every float input, for a fixed random upstream
gradient) in float32 in flowgrad and in torch, and in float64 in torch, the reference truth,
on the same float32-rounded inputs. An array's error is max |x32 - x64| / max |x64| (a
position where the truth is finite but the float32 result is not counts as an infinite
error); a case is flagged when flowgrad's error exceeds FACTOR x torch's error + ULPS float32
ulps. The inputs provoke cancellation and overflow: offsets large beside the spread (c + s *
noise, c / s up to 1e4), magnitudes from 1e-30 to 1e30, near-equal values, long rows (up to
4096) and rows or dims of one element, logits far apart, probabilities near 0 and 1.

Families: var/std/var_mean/std_mean, mean/sum/cumsum/logcumsumexp, norms (vector_norm,
matrix_norm, normalize, renorm), softmax/log_softmax/logsumexp/softmin, the losses
(cross_entropy with label smoothing, weights and probability targets, nll, bce,
bce_with_logits, kl_div, poisson_nll, gaussian_nll, huber, smooth_l1, cosine_embedding and the
margin losses), layer_norm/group_norm/batch_norm/instance_norm/rms_norm (train mode),
cdist/pdist/cosine_similarity/pairwise_distance, the smooth elementwise functions
(logaddexp, log1p, expm1, hypot, atan2, sigmoid, logsigmoid, softplus, silu, gelu, mish, elu),
linear/matmul/addmm/baddbmm, var of complex, cov/corrcoef.

    .venv/bin/python tests/precision_fuzz.py --seeds 0:300     # summary
    .venv/bin/python tests/precision_fuzz.py --show 17         # one case: errors, reproducer
"""
from __future__ import annotations

import math
import random
import warnings

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

FACTOR = 8.0  # flowgrad may be this many times less accurate than torch ...
ULPS = 4.0  # ... plus this many float32 ulps of the array's scale
EPS32 = float(np.finfo(np.float32).eps)
# a case's dtype: its machine epsilon (half_precision_fuzz.py runs float16 and bfloat16)
EPS = {"float32": EPS32, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
TINY = 1e-37  # the scale of an array whose truth is all zeros


# ---- inputs --------------------------------------------------------------------------------
def _inp(shape, kind, grad=True, **p):
    """An input: its shape, how its values are drawn (see _draw) and their parameters."""
    return dict(shape=tuple(shape), kind=kind, grad=grad, p=p)


def _kind(r, kinds=("offset", "offset", "normal", "wide", "near")):
    """A value distribution with its parameters, as (kind, params)."""
    kind = r.choice(kinds)
    s = 10.0 ** r.uniform(-3, 3)
    if kind == "offset":
        return kind, dict(c=r.choice([-1, 1]) * s * 10.0 ** r.uniform(0, 4), s=s)
    if kind == "near":
        return kind, dict(c=r.choice([-1, 1]) * s, s=s * 10.0 ** r.uniform(-7, -4))
    if kind == "wide":
        lo = r.uniform(-30, 10)
        return kind, dict(lo=lo, hi=min(30.0, lo + r.uniform(0, 40)))
    return "offset", dict(c=0.0, s=s)


def _val(r, shape, grad=True, kinds=("offset", "offset", "normal", "wide", "near")):
    kind, p = _kind(r, kinds)
    return _inp(shape, kind, grad, **p)


def _draw(rng, spec):
    """The float64 values of an input spec, rounded to float32 (complex: complex64)."""
    shape, kind, p = spec["shape"], spec["kind"], spec["p"]
    if kind == "offset":
        a = p["c"] + p["s"] * rng.standard_normal(shape)
    elif kind == "near":
        a = p["c"] + p["s"] * rng.integers(-3, 4, shape)
    elif kind == "wide":
        a = rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(p["lo"], p["hi"], shape)
    elif kind == "logits":
        a = p["s"] * rng.standard_normal(shape) + p.get("c", 0.0)
    elif kind == "prob":  # near 0 and 1
        a = 1.0 / (1.0 + np.exp(-p["s"] * rng.standard_normal(shape)))
        a = np.clip(a, 1e-7, 1 - 6e-8)
    elif kind == "simplex":  # rows of probabilities (dim 1), some near one-hot
        z = p["s"] * rng.standard_normal(shape)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        a = e / e.sum(axis=1, keepdims=True)
    elif kind == "positive":
        a = p.get("c", 1.0) * np.exp(p["s"] * rng.standard_normal(shape))
    elif kind == "classes":
        return rng.integers(0, p["n"], shape)
    elif kind == "signs":
        return rng.choice([-1.0, 1.0], shape).astype(np.float32).astype(np.float64)
    elif kind == "complex":
        a = p["c"] + p["s"] * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
        return a.astype(np.complex64).astype(np.complex128)
    else:
        raise ValueError(kind)
    with np.errstate(over="ignore"):
        return a.astype(np.float32).astype(np.float64)


def _rows(r, nd=2):
    """A shape whose last dim is a row of 1 to 4096 elements (fewer rows for long rows)."""
    n = r.choice([1, 1, 2, 3, 5, 16, 64, 257, 1000, 4096])
    lead = [r.choice([1, 1, 2, 3, 4]) for _ in range(nd - 1)]
    if n >= 1000:
        lead = [1] * (nd - 1) if r.random() < 0.5 else lead[:1] + [1] * (nd - 2)
    return tuple(lead) + (n,)


def _dim(r, nd):
    return r.randrange(-nd, nd) if nd else None


# ---- the ops: name -> (generator of (inputs, options), run(m, tensors, options)) -------------
OPS = {}
MORE_OPS = {}  # ops only half_precision_fuzz draws (so this script's seeds keep their cases)


def op(name, gen):
    def register(fn):
        OPS[name] = (gen, fn)
        return fn
    return register


def F(m):
    return m.nn.functional


def g_reduce(r):
    shape = _rows(r, r.choice([1, 2, 2, 3]))
    nd = len(shape)
    form = r.choice(["last", "int", "tuple", "none"])
    dim = {"last": -1, "int": _dim(r, nd), "none": None,
           "tuple": tuple(sorted(r.sample(range(nd), r.randint(1, nd))))}[form]
    return [_val(r, shape)], dict(dim=dim, keepdim=r.random() < 0.3,
                                  correction=r.choice([0, 1, 1, 2]))


for _name in ("var", "std", "var_mean", "std_mean"):
    op(_name, g_reduce)(lambda m, xs, o, _name=_name: getattr(m, _name)(
        xs[0], dim=o["dim"], correction=o["correction"], keepdim=o["keepdim"]))


@op("mean", g_reduce)
def _(m, xs, o):
    return m.mean(xs[0], dim=o["dim"], keepdim=o["keepdim"])


@op("sum", g_reduce)
def _(m, xs, o):
    return m.sum(xs[0], dim=o["dim"], keepdim=o["keepdim"])


def g_scan(r):
    shape = _rows(r, r.choice([1, 2]))
    return [_val(r, shape, kinds=("offset", "normal", "wide", "near"))], \
        dict(dim=_dim(r, len(shape)))


@op("cumsum", g_scan)
def _(m, xs, o):
    return m.cumsum(xs[0], o["dim"])


@op("logcumsumexp", g_scan)
def _(m, xs, o):
    return m.logcumsumexp(xs[0], o["dim"])


def g_logits(r):
    shape = _rows(r, r.choice([1, 2, 3]))
    kind, p = r.choice([("logits", dict(s=10.0 ** r.uniform(-1, 3))), _kind(r)])
    return [_inp(shape, kind, **p)], dict(dim=_dim(r, len(shape)))


for _name in ("softmax", "log_softmax", "softmin"):
    op(_name, g_logits)(lambda m, xs, o, _name=_name: getattr(F(m), _name)(xs[0], o["dim"]))


@op("logsumexp", g_logits)
def _(m, xs, o):
    return m.logsumexp(xs[0], o["dim"])


def g_vector_norm(r):
    (x,), o = g_reduce(r)
    o["ord"] = r.choice([2, 2, 1, 3, 0.5, float("inf"), -float("inf"), -1])
    return [x], o


@op("vector_norm", g_vector_norm)
def _(m, xs, o):
    return m.linalg.vector_norm(xs[0], o["ord"], dim=o["dim"], keepdim=o["keepdim"])


def g_matrix_norm(r):
    shape = (r.choice([1, 2]), r.choice([1, 2, 5, 64]), r.choice([1, 3, 64, 300]))
    return [_val(r, shape)], dict(ord=r.choice(["fro", "fro", 1, float("inf")]))


@op("matrix_norm", g_matrix_norm)
def _(m, xs, o):
    return m.linalg.matrix_norm(xs[0], o["ord"])


def g_normalize(r):
    (x,), o = g_vector_norm(r)
    if o["ord"] in (0.5, -1, -float("inf")):
        o["ord"] = 2
    o["dim"] = _dim(r, len(x["shape"]))
    o["maxnorm"] = 10.0 ** r.uniform(-3, 3)
    return [x], o


@op("normalize", g_normalize)
def _(m, xs, o):
    return F(m).normalize(xs[0], o["ord"], o["dim"])


@op("renorm", g_normalize)
def _(m, xs, o):
    if xs[0].dim() < 2:
        return m.renorm(xs[0].reshape(1, -1), o["ord"], 0, o["maxnorm"])
    return m.renorm(xs[0], o["ord"], o["dim"], o["maxnorm"])


# ---- losses ---------------------------------------------------------------------------------
def _reduction(r):
    return r.choice(["mean", "sum", "none"])


def g_cross_entropy(r):
    n, c = r.choice([1, 2, 8, 64]), r.choice([1, 2, 3, 10, 1000])
    kind, p = r.choice([("logits", dict(s=10.0 ** r.uniform(-1, 3))), _kind(r)])
    ins = [_inp((n, c), kind, **p)]
    o = dict(reduction=_reduction(r), smoothing=r.choice([0.0, 0.0, 0.1, 0.9]),
             weight=r.random() < 0.3, probs=r.random() < 0.3)
    ins.append(_inp((n, c), "simplex", s=10.0 ** r.uniform(-1, 2)) if o["probs"]
               else _inp((n,), "classes", False, n=c))
    if o["weight"]:
        ins.append(_inp((c,), "positive", False, s=1.0))  # (torch: no gradient)
    return ins, o


@op("cross_entropy", g_cross_entropy)
def _(m, xs, o):
    return F(m).cross_entropy(xs[0], xs[1], weight=xs[2] if o["weight"] else None,
                              reduction=o["reduction"], label_smoothing=o["smoothing"])


@op("nll_loss", g_cross_entropy)
def _(m, xs, o):
    if o["probs"]:
        return F(m).kl_div(F(m).log_softmax(xs[0], 1), xs[1], reduction="batchmean")
    return F(m).nll_loss(F(m).log_softmax(xs[0], 1), xs[1],
                         weight=xs[2] if o["weight"] else None, reduction=o["reduction"])


def g_bce(r):
    shape = _rows(r, r.choice([1, 2]))
    s = 10.0 ** r.uniform(0, 1.5)
    return [_inp(shape, "prob", s=s), _inp(shape, "prob", r.random() < 0.5, s=s)], \
        dict(reduction=_reduction(r))


@op("binary_cross_entropy", g_bce)
def _(m, xs, o):
    return F(m).binary_cross_entropy(xs[0], xs[1], reduction=o["reduction"])


def g_bce_logits(r):
    shape = _rows(r, r.choice([1, 2]))
    ins = [_inp(shape, "logits", s=10.0 ** r.uniform(-1, 3)),
           _inp(shape, "prob", r.random() < 0.5, s=10.0 ** r.uniform(0, 1.5))]
    o = dict(reduction=_reduction(r), pos_weight=r.random() < 0.4)
    if o["pos_weight"]:
        ins.append(_inp(shape[-1:], "positive", False, s=1.0))  # (torch: no gradient)
    return ins, o


@op("binary_cross_entropy_with_logits", g_bce_logits)
def _(m, xs, o):
    return F(m).binary_cross_entropy_with_logits(
        xs[0], xs[1], pos_weight=xs[2] if o["pos_weight"] else None, reduction=o["reduction"])


def g_kl_div(r):
    shape = _rows(r, 2)
    log_target = r.random() < 0.5
    ins = [_inp(shape, "logits", s=10.0 ** r.uniform(-1, 2), c=-10.0 ** r.uniform(0, 1.5)),
           _inp(shape, "logits", s=10.0 ** r.uniform(-1, 1.5), c=-10.0 ** r.uniform(0, 1.5))
           if log_target else _inp(shape, "prob", s=10.0 ** r.uniform(0, 1.5))]
    return ins, dict(reduction=r.choice(["mean", "sum", "none", "batchmean"]),
                     log_target=log_target)


@op("kl_div", g_kl_div)
def _(m, xs, o):
    return F(m).kl_div(xs[0], xs[1], reduction=o["reduction"], log_target=o["log_target"])


def g_poisson(r):
    shape = _rows(r, 2)
    log_input = r.random() < 0.5
    x = _inp(shape, "logits", s=10.0 ** r.uniform(-1, 1.3)) if log_input else \
        _inp(shape, "positive", s=10.0 ** r.uniform(-1, 0.7))
    return [x, _inp(shape, "positive", r.random() < 0.5, s=1.0, c=10.0 ** r.uniform(-2, 3))], \
        dict(log_input=log_input, full=r.random() < 0.5, reduction=_reduction(r))


@op("poisson_nll_loss", g_poisson)
def _(m, xs, o):
    return F(m).poisson_nll_loss(xs[0], xs[1], log_input=o["log_input"], full=o["full"],
                                 reduction=o["reduction"])


def g_gaussian(r):
    shape = _rows(r, 2)
    x = _val(r, shape, kinds=("offset", "near"))
    t = dict(x, grad=r.random() < 0.5, p=dict(x["p"], c=x["p"]["c"] + x["p"]["s"]))
    var = _inp(shape if r.random() < 0.7 else shape[:-1] + (1,), "positive",
               s=10.0 ** r.uniform(-1, 0.7), c=10.0 ** r.uniform(-4, 4))
    return [x, t, var], dict(full=r.random() < 0.5, reduction=_reduction(r))


@op("gaussian_nll_loss", g_gaussian)
def _(m, xs, o):
    return F(m).gaussian_nll_loss(xs[0], xs[1], xs[2], full=o["full"], reduction=o["reduction"])


def g_pair(r):
    shape = _rows(r, r.choice([1, 2]))
    x = _val(r, shape, kinds=("offset", "offset", "near", "normal"))
    t = dict(x, grad=r.random() < 0.5, p=dict(x["p"], c=x["p"]["c"] * r.choice([1, 1, -1])))
    return [x, t], dict(reduction=_reduction(r), delta=10.0 ** r.uniform(-3, 3))


for _name in ("huber_loss", "smooth_l1_loss", "mse_loss", "l1_loss"):
    def _regression(m, xs, o, _name=_name):
        kw = {"huber_loss": dict(delta=o["delta"]), "smooth_l1_loss": dict(beta=o["delta"])}
        return getattr(F(m), _name)(xs[0], xs[1], reduction=o["reduction"],
                                    **kw.get(_name, {}))
    op(_name, g_pair)(_regression)


def g_cosine_embedding(r):
    n, d = r.choice([1, 3, 16]), r.choice([1, 2, 5, 300, 4096])
    x = _val(r, (n, d))
    return [x, dict(x, p=dict(x["p"])), _inp((n,), "signs", False)], \
        dict(reduction=_reduction(r), margin=r.choice([0.0, 0.5, -0.5]))


@op("cosine_embedding_loss", g_cosine_embedding)
def _(m, xs, o):
    return F(m).cosine_embedding_loss(xs[0], xs[1], xs[2], margin=o["margin"],
                                      reduction=o["reduction"])


def g_margin(r):
    (x, t), o = g_pair(r)
    o["margin"] = r.choice([0.0, 1.0, 10.0 ** r.uniform(-3, 3)])
    return [x, t, _inp(x["shape"], "signs", False)], o


@op("margin_ranking_loss", g_margin)
def _(m, xs, o):
    return F(m).margin_ranking_loss(xs[0], xs[1], xs[2], margin=o["margin"],
                                    reduction=o["reduction"])


@op("soft_margin_loss", g_margin)
def _(m, xs, o):
    return F(m).soft_margin_loss(xs[0], xs[2], reduction=o["reduction"])


def _soft_margin_truth(m, xs, o):
    # torch's float64 log(1 + exp(-y x)) overflows above x = 709 (inf where the loss is
    # finite): the truth is softplus(-y x)
    v = F(m).softplus(-xs[2] * xs[0])
    return {"mean": v.mean(), "sum": v.sum(), "none": v}[o["reduction"]]


def _gelu_truth(m, xs, o):
    # torch's float64 0.5 x (1 + erf(x / sqrt 2)) cancels to -0 below x = -8.3 (-2.7e-20 at
    # -9.4); the truth is 0.5 x erfc(-x / sqrt 2) (tanh form: x sigmoid(2 u))
    x = xs[0]
    if o["approximate"] == "tanh":
        return x * m.sigmoid(2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))
    return 0.5 * x * m.special.erfc(-x / math.sqrt(2))


# where torch's float64 is itself wrong: the truth computed by another formula (torch, float64)
TRUTH = {"soft_margin_loss": _soft_margin_truth, "gelu": _gelu_truth}


@op("hinge_embedding_loss", g_margin)
def _(m, xs, o):
    return F(m).hinge_embedding_loss(xs[0], xs[2], margin=o["margin"], reduction=o["reduction"])


def g_multi_margin(r):
    ins, o = g_cross_entropy(r)
    o["p"], o["margin"] = r.choice([1, 2]), r.choice([1.0, 10.0 ** r.uniform(-3, 3)])
    if o["probs"]:
        ins[1] = _inp(ins[1]["shape"], "prob", False, s=10.0)
    return ins, o


@op("multi_margin_loss", g_multi_margin)
def _(m, xs, o):
    if o["probs"]:
        return F(m).multilabel_soft_margin_loss(xs[0], xs[1], reduction=o["reduction"])
    return F(m).multi_margin_loss(xs[0], xs[1], p=o["p"], margin=o["margin"],
                                  weight=xs[2] if o["weight"] else None,
                                  reduction=o["reduction"])


def g_triplet(r):
    n, d = r.choice([1, 3, 16]), r.choice([1, 2, 5, 300, 4096])
    x = _val(r, (n, d), kinds=("offset", "near", "normal"))
    return [x, dict(x, p=dict(x["p"])), dict(x, p=dict(x["p"]))], \
        dict(reduction=_reduction(r), margin=r.choice([1.0, 10.0 ** r.uniform(-3, 3)]),
             p=r.choice([1, 2, 2, 3]), swap=r.random() < 0.3)


@op("triplet_margin_loss", g_triplet)
def _(m, xs, o):
    return F(m).triplet_margin_loss(xs[0], xs[1], xs[2], margin=o["margin"], p=o["p"],
                                    swap=o["swap"], reduction=o["reduction"])


# ---- normalizations (train mode) ------------------------------------------------------------
def g_norm(r, channels_first=True):
    n, c = r.choice([1, 2, 4]), r.choice([1, 2, 4, 6])
    spatial = r.choice([(), (1,), (7,), (300,), (3, 5), (1, 1), (64, 64)])
    if n * c * math.prod(spatial) > 40000:
        n, c = 1, 2
    shape = (n, c) + spatial
    return [_val(r, shape, kinds=("offset", "offset", "near", "normal")),
            _inp((c,), "offset", r.random() < 0.8, c=1.0, s=0.5),
            _inp((c,), "offset", r.random() < 0.8, c=0.0, s=1.0)], \
        dict(groups=r.choice([g for g in (1, 2, c) if c % g == 0]), affine=r.random() < 0.8,
             eps=r.choice([1e-5, 1e-12, 1e-3]))


def _affine(xs, o):
    return (xs[1], xs[2]) if o["affine"] else (None, None)


@op("batch_norm", g_norm)
def _(m, xs, o):
    if xs[0].shape[0] * math.prod(xs[0].shape[2:]) == 1:
        return F(m).layer_norm(xs[0], xs[0].shape[1:], eps=o["eps"])
    return F(m).batch_norm(xs[0], None, None, *_affine(xs, o), training=True, eps=o["eps"])


@op("instance_norm", g_norm)
def _(m, xs, o):
    if xs[0].dim() == 2 or math.prod(xs[0].shape[2:]) == 1:
        return F(m).group_norm(xs[0], 1, *_affine(xs, o), eps=o["eps"])
    return F(m).instance_norm(xs[0], weight=_affine(xs, o)[0], bias=_affine(xs, o)[1],
                              eps=o["eps"])


@op("group_norm", g_norm)
def _(m, xs, o):
    return F(m).group_norm(xs[0], o["groups"], *_affine(xs, o), eps=o["eps"])


def g_layer_norm(r):
    shape = _rows(r, r.choice([1, 2, 3]))
    k = r.choice([1, 1, 2]) if len(shape) > 1 else 1
    return [_val(r, shape, kinds=("offset", "offset", "near", "normal", "wide")),
            _inp(shape[-k:], "offset", r.random() < 0.8, c=1.0, s=0.5),
            _inp(shape[-k:], "offset", r.random() < 0.8, c=0.0, s=1.0)], \
        dict(k=k, affine=r.random() < 0.8, eps=r.choice([1e-5, 1e-12, 1e-3]))


@op("layer_norm", g_layer_norm)
def _(m, xs, o):
    return F(m).layer_norm(xs[0], xs[0].shape[-o["k"]:], *_affine(xs, o), eps=o["eps"])


@op("rms_norm", g_layer_norm)
def _(m, xs, o):
    return F(m).rms_norm(xs[0], xs[0].shape[-o["k"]:], _affine(xs, o)[0],
                         eps=o["eps"] if o["eps"] != 1e-5 else None)


# ---- distances ------------------------------------------------------------------------------
def g_dist(r):
    b, p, q = r.choice([1, 2]), r.choice([1, 2, 7, 64]), r.choice([1, 3, 64])
    d = r.choice([1, 2, 3, 16, 300, 1000])
    x = _val(r, (b, p, d), kinds=("offset", "offset", "near", "normal", "wide"))
    y = dict(x, shape=(b, q, d), p=dict(x["p"]))
    return [x, y], dict(p=r.choice([2.0, 2.0, 1.0, 3.0, 0.5, float("inf")]),
                        mode=r.choice(["use_mm_for_euclid_dist_if_necessary",
                                       "donot_use_mm_for_euclid_dist"]))


@op("cdist", g_dist)
def _(m, xs, o):
    return m.cdist(xs[0], xs[1], o["p"], compute_mode=o["mode"])


@op("pdist", g_dist)
def _(m, xs, o):
    return F(m).pdist(xs[0][0], o["p"])


@op("pairwise_distance", g_dist)
def _(m, xs, o):
    return F(m).pairwise_distance(xs[0], xs[1][:, :1], o["p"])


@op("cosine_similarity", g_dist)
def _(m, xs, o):
    return F(m).cosine_similarity(xs[0], xs[1][:, :1], dim=-1)


# ---- elementwise ----------------------------------------------------------------------------
def g_unary(r):
    shape = (r.choice([1, 7, 300]),)
    kind, p = r.choice([("logits", dict(s=10.0 ** r.uniform(-8, 2))),
                        ("logits", dict(s=10.0 ** r.uniform(-1, 2))), _kind(r)])
    return [_inp(shape, kind, **p)], dict(beta=r.choice([1.0, 1.0, 0.5, 10.0]),
                                          threshold=r.choice([20.0, 5.0]),
                                          approximate=r.choice(["none", "tanh"]),
                                          alpha=r.choice([1.0, 0.3]))


UNARY = {
    "log1p": lambda m, x, o: m.log1p(x.abs() * 0.99 - 0.5 if x.abs().max() < 1 else x.abs()),
    "expm1": lambda m, x, o: m.expm1(x.clamp(-80, 80)),
    "sigmoid": lambda m, x, o: m.sigmoid(x),
    "logsigmoid": lambda m, x, o: F(m).logsigmoid(x),
    "softplus": lambda m, x, o: F(m).softplus(x, o["beta"], o["threshold"]),
    "silu": lambda m, x, o: F(m).silu(x),
    "gelu": lambda m, x, o: F(m).gelu(x, approximate=o["approximate"]),
    "mish": lambda m, x, o: F(m).mish(x),
    "elu": lambda m, x, o: F(m).elu(x, o["alpha"]),
    "selu": lambda m, x, o: F(m).selu(x),
    "celu": lambda m, x, o: F(m).celu(x, o["alpha"]),
    "tanh": lambda m, x, o: m.tanh(x),
    "log_sigmoid_neg": lambda m, x, o: F(m).logsigmoid(-x),
}
for _name, _f in UNARY.items():
    op(_name, g_unary)(lambda m, xs, o, _f=_f: _f(m, xs[0], o))


def g_binary(r):
    (x,), o = g_unary(r)
    y = dict(x, p=dict(x["p"]))
    if r.random() < 0.3 and "s" in x["p"]:
        y["p"]["s"] = x["p"]["s"] * 10.0 ** r.uniform(-3, 3)
    return [x, y], o


BINARY = {"logaddexp": lambda m, x, y: m.logaddexp(x, y),
          "logaddexp2": lambda m, x, y: m.logaddexp2(x, y),
          "hypot": lambda m, x, y: m.hypot(x, y),
          "atan2": lambda m, x, y: m.atan2(x, y)}
for _name, _f in BINARY.items():
    op(_name, g_binary)(lambda m, xs, o, _f=_f: _f(m, xs[0], xs[1]))


# ---- products -------------------------------------------------------------------------------
def g_product(r):
    b, n, k, p = r.choice([1, 2]), r.choice([1, 3, 64]), r.choice([1, 2, 64, 1000, 4096]), \
        r.choice([1, 5, 64])
    kinds = ("offset", "offset", "normal", "near")
    return [_val(r, (b, n, k), kinds=kinds), _val(r, (b, k, p), kinds=kinds),
            _val(r, (b, n, p), kinds=kinds)], \
        dict(alpha=r.choice([1.0, 0.5, -2.0]), beta=r.choice([1.0, 0.0, 0.3]))


@op("matmul", g_product)
def _(m, xs, o):
    return m.matmul(xs[0], xs[1])


@op("linear", g_product)
def _(m, xs, o):
    return F(m).linear(xs[0], xs[1][0].T, xs[2][0, 0])


@op("addmm", g_product)
def _(m, xs, o):
    return m.addmm(xs[2][0], xs[0][0], xs[1][0], beta=o["beta"], alpha=o["alpha"])


@op("baddbmm", g_product)
def _(m, xs, o):
    return m.baddbmm(xs[2], xs[0], xs[1], beta=o["beta"], alpha=o["alpha"])


# ---- statistics -----------------------------------------------------------------------------
def g_complex_var(r):
    (x,), o = g_reduce(r)
    if x["kind"] not in ("offset",):
        x = _val(r, x["shape"], kinds=("offset",))
    x["kind"] = "complex"
    return [x], o


@op("var_complex", g_complex_var)
def _(m, xs, o):
    return m.var(xs[0], dim=o["dim"], correction=o["correction"], keepdim=o["keepdim"])


def g_cov(r):
    shape = (r.choice([1, 2, 3, 8]), r.choice([1, 2, 5, 64, 1000]))
    return [_val(r, shape, kinds=("offset", "offset", "near", "normal"))], \
        dict(correction=r.choice([0, 1, 1, 2]))


@op("cov", g_cov)
def _(m, xs, o):
    return m.cov(xs[0], correction=o["correction"])


@op("corrcoef", g_cov)
def _(m, xs, o):
    return m.corrcoef(xs[0])


# ---- running a case -------------------------------------------------------------------------
class Case:
    def __init__(self, seed, name, inputs, opts, dtype="float32"):
        self.seed, self.name, self.inputs, self.opts = seed, name, inputs, opts
        self.dtype = dtype  # the precision compared (the truth is float64)

    def describe(self):
        def spec(i, s):
            p = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in s["p"].items())
            return f"x{i}{list(s['shape'])} {s['kind']}({p}){'' if s['grad'] else ' no grad'}"
        opts = ", ".join(f"{k}={v!r}" for k, v in self.opts.items())
        where = "precision_fuzz.py" if self.dtype == "float32" else \
            f"half_precision_fuzz.py --dtype {self.dtype}"
        return (f"{self.name}({'; '.join(spec(i, s) for i, s in enumerate(self.inputs))}; "
                f"{opts})  [tests/{where} --show {self.seed}]")

    __repr__ = describe

    def reproducer(self):
        """Python that rebuilds the case (run from tests/): its inputs come from `.arrays()`
        and `run(torch or flowgrad, case, case.dtype or "float64")` gives its value and
        gradients."""
        dtype = "" if self.dtype == "float32" else f", {self.dtype!r}"
        where = "import half_precision_fuzz; " if dtype else ""  # (its MORE_OPS)
        return (f"{where}import precision_fuzz as pf; case = pf.Case({self.seed}, "
                f"{self.name!r}, {self.inputs!r}, {self.opts!r}{dtype}); print(pf.errors(case))")

    def arrays(self):
        rng = np.random.default_rng(self.seed)
        return [rounded(_draw(rng, s), self.dtype) for s in self.inputs]


def rounded(a, dtype):
    """Real float64 values `a` rounded to `dtype` (float32 already: _draw), as float64."""
    if dtype == "float32" or a.dtype != np.float64:
        return a
    return torch.from_numpy(a).to(getattr(torch, dtype)).double().numpy()


def generate(seed, dtype="float32"):
    r = random.Random(seed)
    name = r.choice(sorted(OPS))
    inputs, opts = OPS[name][0](r)
    return Case(seed, name, inputs, opts, dtype)


def run(m, case, dtype, truth=False):
    """[each output, the gradient of each float input that requires grad] as float64 (or
    complex128) arrays, the op run in `dtype` ("float64" or the case's) in module `m` (torch
    or flowgrad); `truth`: by the op's TRUTH formula where it has one."""
    real = getattr(m, dtype)
    cplx = m.complex128 if dtype == "float64" else m.complex64
    xs, leaves = [], []
    for spec, a in zip(case.inputs, case.arrays()):
        if spec["kind"] == "classes":
            xs.append(m.tensor(a, dtype=m.int64))
            continue
        t = m.tensor(a, dtype=cplx if a.dtype.kind == "c" else real)
        if spec["grad"]:
            t.requires_grad_(True)
            leaves.append(t)
        xs.append(t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = TRUTH.get(case.name) if truth else None
        outs = (fn or (OPS.get(case.name) or MORE_OPS[case.name])[1])(m, xs, case.opts)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        rng = np.random.default_rng(case.seed + 1)
        ups = [rounded(rng.standard_normal(tuple(o.shape)).astype(np.float32).astype(
            np.float64), case.dtype) for o in outs]
        loss = sum((o * m.tensor(u, dtype=o.dtype)).sum() for o, u in zip(outs, ups))
        grads = m.autograd.grad(loss, leaves, allow_unused=True) if leaves else []

    def wide(t):
        t = t.detach()
        if t.dtype in (m.float16, m.bfloat16):
            t = t.float()
        return t.numpy().astype(np.complex128 if t.is_complex() else np.float64)
    return [wide(o) for o in outs] + [None if g is None else wide(g) for g in grads]


def error(a, truth, fallback=TINY):
    """max |a - truth| / max |truth| over the positions where the truth is finite (inf where
    a misses a finite truth or an infinity or nan of it); None where there is no truth. An
    all-zero truth is measured against `fallback`, the scale of its kin (see errors)."""
    if truth is None:
        return None if a is None or not np.any(a) else math.inf
    if a is None:
        a = np.zeros_like(truth)
    fin = np.isfinite(truth)
    with np.errstate(invalid="ignore"):
        if not np.all(np.isfinite(a[fin])) or not np.all(
                (a[~fin] == truth[~fin]) | (np.isnan(a[~fin]) & np.isnan(truth[~fin]))):
            return math.inf
    if not fin.any():
        return 0.0
    scale = float(np.abs(truth[fin]).max()) or fallback
    return float(np.abs(a[fin] - truth[fin]).max()) / scale


def errors(case):
    """[(what, flowgrad's error, torch's error)] for each output and gradient, or a string
    when one framework raises and the other does not (None when both raise)."""
    try:
        want = run(torch, case, "float64", truth=True)
        theirs = run(torch, case, case.dtype)
    except fuzz_common.TORCH_REFUSALS as e:
        want = e
    try:
        got = run(flow, case, case.dtype)
    except Exception as e:
        return None if isinstance(want, Exception) else f"flowgrad raised {type(e).__name__}: {e}"
    if isinstance(want, Exception):
        return f"torch raised {type(want).__name__}: {want}; flowgrad ran"
    nout = len(want) - sum(s["grad"] and s["kind"] != "classes" for s in case.inputs)
    names = [f"output {i}" for i in range(nout)] + \
        [f"gradient {i}" for i in range(len(want) - nout)]
    # an array whose truth is all zeros (a gradient that cancels exactly) is measured against
    # the largest truth of the case's other gradients (outputs: outputs'), its natural scale:
    # one rounding of terms of that size is not a finding
    def kin_scale(i):
        kin = [w for j, w in enumerate(want) if (j < nout) == (i < nout) and w is not None]
        return max([float(np.abs(w[np.isfinite(w)]).max(initial=0.0)) for w in kin] +
                   [TINY])
    return [(what, error(g, w, kin_scale(i)), error(t, w, kin_scale(i)))
            for i, (what, g, t, w) in enumerate(zip(names, got, theirs, want))]


def worst(errs, dtype="float32", ulps=ULPS):
    """The (what, flowgrad's error, torch's error) flagged worst (largest ratio), or None.
    An array torch gets wholly wrong (error >= 1: no digit right) is not compared."""
    eps = EPS[dtype]
    bad = [(what, e, t) for what, e, t in errs
           if e is not None and e > FACTOR * (t or 0.0) + ulps * eps and (t or 0.0) < 1.0]
    return max(bad, key=lambda w: w[1] / (w[2] + eps), default=None)


def check(seed, case=None, ulps=ULPS):
    """None when flowgrad's result and gradients (float32, or the case's dtype) are as
    accurate as torch's (to FACTOR and `ulps`), else a message naming the worst array and
    both errors."""
    case = case or generate(seed)
    errs = errors(case)
    if errs is None or isinstance(errs, str):
        return errs
    w = worst(errs, case.dtype, ulps)
    return None if w is None else (f"{w[0]}: flowgrad's {case.dtype} error {w[1]:.3g}, "
                                   f"torch's {w[2]:.3g} (against float64)")


def show(seed, case=None):
    case = case or generate(seed)
    errs = errors(case)
    lines = [case.describe(), "  " + case.reproducer()]
    if isinstance(errs, list):
        lines += [f"  {what}: flowgrad {e if e is None else f'{e:.3g}'}, "
                  f"torch {t if t is None else f'{t:.3g}'}" for what, e, t in errs]
    return "\n".join(lines)


if __name__ == "__main__":
    fuzz_common.main(__doc__, show, check, seeds="0:300")
