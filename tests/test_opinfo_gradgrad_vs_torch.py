"""Second derivatives against torch's: every OpInfo with supports_gradgrad (opinfo_gradgrad.py
does the work), and a table of non-smooth points (ties, zeros, bounds, thresholds) where the
derivatives take a convention.

A finding fails the test unless KNOWN explains it (a pattern and the reason); an entry that no
longer matches anything fails too. `unused:` notes (None where the other side gives exact
zeros) are not findings.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import opinfo_gradgrad  # noqa: E402
import torch  # noqa: E402
from opinfo_vs_torch import assert_explained, full_name, op_db  # noqa: E402

import flowgrad as flow  # noqa: E402

_LCE = ("torch's chunked linear_cross_entropy documents no higher-order autograd: its first "
        "gradient is a constant, so torch's second derivatives are None (or raise, "
        "reduction='none'); flowgrad's equal torch's unchunked ones")
_NAN = ("torch's double backward of a masked division (masked_fill(norm == 0, 0) after grad / "
        "norm) gives 0 * inf = nan; flowgrad's first gradient is exactly 0 there, and so is "
        "its derivative")
KNOWN: dict[str, tuple[str, str]] = {
    "nn.functional.linear_cross_entropy.chunked": (
        r"gradgrad\[\d\]: (torch None|values differ)", _LCE),
    "nn.functional.linear_cross_entropy.chunked_none": (r"grad raise: torch RuntimeError", _LCE),
    "as_strided_scatter": (r"grad\[0\]: values differ", "torch 2.13's input gradient is the "
                           "complement of the right one (test_opinfo_vs_torch.py's KNOWN)"),
    "linalg.norm.subgradients_at_zero": (r"gradgrad\[\d\]: values differ .* torch \(?nan", _NAN),
}
# every sample (slow): more of the same, and float32 weights
KNOWN_ALL: dict[str, tuple[str, str]] = {
    "native_layer_norm": (r"gradgrad raise: torch RuntimeError\(\"Expected a proper Tensor",
                          "torch's double backward with weight=None and bias given fails on "
                          "an undefined tensor; flowgrad's works"),
    "linalg.norm": (r"gradgrad\[1\]: values differ .* torch nan", _NAN + " (an empty vector)"),
    "nn.functional.scaled_dot_product_attention": (
        r"gradgrad raise: torch RuntimeError\('derivative for aten::_scaled_dot_product_flash",
        "torch's CPU flash-attention backward has no derivative; flowgrad's math path has one"),
    "cov": (r"gradgrad\[0\]: values differ", "float32 aweights: float32 rounding (rel. 1e-7) "
            "of the weights' products, in different places"),
}
# samples rounded to halves (slow): ties, zeros and bounds
_TIES = ("ties: torch's index among equal values is its partial sort's choice (flowgrad picks "
         "another), and the gradient goes to the index picked")
KNOWN_ROUNDED: dict[str, tuple[str, str]] = {
    "kthvalue": (r"grad\[0\]: values differ", _TIES),
    "topk": (r"grad\[0\]: values differ", _TIES),
    "scatter_reduce.amax": (
        r"grad\[1\]: values differ", "a torch bug: with include_self=False torch still counts "
        "self among the tied maxima (it splits src's gradient with a value that does not take "
        "part): src [2, 1, 1] into self [2, 0, 0] at [0, 1, 1] gives d out[0]/d src[0] = 0.5 "
        "in torch, 1 in flowgrad (and finite differences)"),
    "scatter_reduce.amin": (r"grad\[1\]: values differ", "as scatter_reduce.amax"),
    "nn.functional.normalize": (r"gradgrad\[0\]: values differ .* torch nan", _NAN + " (p < 1 "
                                "at zero entries)"),
    "logit": (r"gradgrad\[0\]: values differ .* torch nan", "x outside [eps, 1 - eps] at 0 or "
              "1: the first gradient is 0 there; torch's double backward computes 0 / 0"),
    "addcdiv": (r"gradgrad\[2\]: values differ .* torch nan, flowgrad -?inf",
                "a zero divisor: u * v / t2**2 with t2 = 0 is inf; torch nan"),
    "digamma": (r"grad\[0\]: values differ", "trigamma at exact poles: inf, torch a finite "
                "number from sin(pi x) rounding (test_opinfo_vs_torch.py's KNOWN_REFERENCE)"),
    "lgamma": (r"gradgrad\[0\]: values differ", "as digamma (lgamma's second derivative)"),
}

DB = [info for info in op_db() if opinfo_gradgrad.candidate(info)]


def _check(info, known, first, rounded=False, stale_check=True, dtype=torch.float64):
    findings = opinfo_gradgrad.probe(info, first=first, rounded=rounded, dtype=dtype)
    if findings and findings[0][2] == "missing":
        pytest.skip("not in flowgrad")
    assert_explained(full_name(info), findings, known, stale_check, notes=("skip", "unused"))


@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_gradgrad_vs_torch(info):
    """The first sample of each OpInfo."""
    _check(info, KNOWN, first=1)


# the slow tiers' sample counts (CPU: every sample of every OpInfo is ~10 minutes; these few
# OpInfos are most of it, grid_sampler_3d's 3-d double backward alone 40 s)
MANY, HEAVY = 8, frozenset(("grid_sampler_3d", "nn.functional.max_pool2d", "lu_solve",
                            "max_pool2d_with_indices_backward", "nn.functional.max_pool1d"))


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_gradgrad_more_samples_vs_torch(info):
    """The first MANY samples (1 of the heavy OpInfos: the default test has it)."""
    if full_name(info) in HEAVY:
        pytest.skip("heavy: its first sample runs in the default test")
    _check(info, {**KNOWN, **KNOWN_ALL}, first=MANY, stale_check=False)


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_gradgrad_rounded_vs_torch(info):
    """The first samples with their inputs rounded to halves: ties, zeros, bounds."""
    known = {**KNOWN, **KNOWN_ALL}
    for name, (pattern, reason) in KNOWN_ROUNDED.items():
        if name in known:
            pattern, reason = f"{known[name][0]}|{pattern}", f"{known[name][1]}; {reason}"
        known[name] = (pattern, reason)
    first = 1 if full_name(info) in HEAVY else opinfo_gradgrad.FIRST
    _check(info, known, first=first, rounded=True, stale_check=False)


COMPLEX = [info for info in op_db() if opinfo_gradgrad.candidate(info, torch.complex128)]


@pytest.mark.slow
@pytest.mark.parametrize("info", COMPLEX, ids=[full_name(info) for info in COMPLEX])
def test_opinfo_gradgrad_complex_vs_torch(info):
    """complex128 samples (complex v and u), the first of each OpInfo."""
    _check(info, KNOWN, first=1, stale_check=False, dtype=torch.complex128)


# ---- non-smooth points -----------------------------------------------------------------------
# (name, f(module, *inputs), inputs): each input a float64 leaf; v and u fixed random
NONSMOOTH = [
    ("abs", lambda m, x: m.abs(x), [[-1.0, 0.0, 2.0, 0.0]]),
    ("relu", lambda m, x: m.relu(x), [[-1.0, 0.0, 2.0]]),
    ("leaky_relu", lambda m, x: m.nn.functional.leaky_relu(x, 0.1), [[-1.0, 0.0, 2.0]]),
    ("hardtanh", lambda m, x: m.nn.functional.hardtanh(x), [[-1.0, 0.0, 1.0, 2.0, -2.0]]),
    ("relu6", lambda m, x: m.nn.functional.relu6(x), [[-1.0, 0.0, 6.0, 7.0]]),
    ("clamp", lambda m, x: m.clamp(x, -1.0, 1.0), [[-1.0, 0.0, 1.0, 2.0]]),
    ("clamp_tensor", lambda m, x, lo, hi: m.clamp(x, lo, hi),
     [[-1.0, 0.0, 1.0, 2.0, 1.0], [-1.0, 0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 1.0, 1.0, 1.0]]),
    ("clamp_min_tensor", lambda m, x, lo: m.clamp_min(x, lo), [[-1.0, 0.0, 1.0], [-1.0, 0.0, 2.0]]),
    ("clamp_square", lambda m, x: m.clamp(x * x, 1.0, 4.0), [[1.0, -2.0, 0.5, 3.0]]),
    ("max", lambda m, x: m.max(x * x), [[1.0, -3.0, 3.0, 2.0]]),
    ("min", lambda m, x: m.min(x * x), [[1.0, -1.0, 3.0, 2.0]]),
    ("amax", lambda m, x: m.amax(x * x, dim=1), [[[1.0, -3.0, 3.0], [2.0, 2.0, 0.0]]]),
    ("amin", lambda m, x: m.amin(x * x, dim=0), [[[1.0, -3.0, 3.0], [-1.0, 2.0, 0.0]]]),
    ("max_dim", lambda m, x: m.max(x * x, dim=1)[0], [[[1.0, -3.0, 3.0], [2.0, 2.0, 0.0]]]),
    ("maximum", lambda m, a, b: m.maximum(a * a, b * b), [[1.0, 2.0, -3.0], [1.0, -2.0, 1.0]]),
    ("minimum", lambda m, a, b: m.minimum(a * a, b * b), [[1.0, 2.0, -3.0], [1.0, -2.0, 1.0]]),
    ("fmax", lambda m, a, b: m.fmax(a * a, b * b), [[1.0, 2.0, -3.0], [1.0, -2.0, 1.0]]),
    ("sort", lambda m, x: m.sort(x * x)[0], [[1.0, -1.0, 3.0, 2.0]]),
    ("median", lambda m, x: m.median(x * x), [[1.0, -1.0, 3.0]]),
    ("cummax", lambda m, x: m.cummax(x * x, 0)[0], [[1.0, -1.0, 3.0, -3.0]]),
    ("max_pool1d", lambda m, x: m.nn.functional.max_pool1d(x * x, 2), [[[[1.0, -1.0, 2.0, 2.0]]]]),
    ("vector_norm_inf", lambda m, x: m.linalg.vector_norm(x, float("inf")), [[-2.0, 1.0, 2.0]]),
    ("hardshrink", lambda m, x: m.nn.functional.hardshrink(x, 0.5), [[-0.5, 0.5, 0.0, 1.0]]),
    ("softshrink", lambda m, x: m.nn.functional.softshrink(x, 0.5), [[-0.5, 0.5, 0.0, 1.0]]),
    ("threshold", lambda m, x: m.nn.functional.threshold(x, 0.5, -2.0), [[-0.5, 0.5, 1.0]]),
    ("elu", lambda m, x: m.nn.functional.elu(x, 0.5), [[-0.5, 0.0, 1.0]]),
    ("celu", lambda m, x: m.nn.functional.celu(x, 2.0), [[-0.5, 0.0, 1.0]]),
    ("hardswish", lambda m, x: m.nn.functional.hardswish(x), [[-3.0, 3.0, 0.0, 4.0]]),
    ("softplus_threshold", lambda m, x: m.nn.functional.softplus(x, 1.0, 1.0), [[1.0, 0.5, 2.0]]),
    ("softplus_beta", lambda m, x: m.nn.functional.softplus(x, 2.0, 2.0), [[1.0, 0.5, 2.0]]),
    ("smooth_l1", lambda m, a, b: m.nn.functional.smooth_l1_loss(a, b),
     [[0.0, 1.0, 2.0], [1.0, 0.0, 0.0]]),
    ("huber", lambda m, a, b: m.nn.functional.huber_loss(a, b), [[0.0, 1.0, 2.0], [1.0, 0.0, 0.0]]),
    ("l1", lambda m, a, b: m.nn.functional.l1_loss(a, b), [[0.0, 1.0], [0.0, 0.0]]),
    ("prod_one_zero", lambda m, x: m.prod(x), [[0.0, 2.0, 3.0]]),
    ("prod_two_zeros", lambda m, x: m.prod(x), [[0.0, 2.0, 0.0]]),
    ("cumprod_zero", lambda m, x: m.cumprod(x, 0), [[2.0, 0.0, 3.0, 0.0]]),
    ("det_rank1", lambda m, a: m.linalg.det(a), [[[1.0, 1.0], [1.0, 1.0]]]),
    ("prelu", lambda m, x, w: m.nn.functional.prelu(x, w), [[-1.0, 0.0, 2.0], [0.25]]),
    ("norm_zero", lambda m, x: m.linalg.vector_norm(x), [[0.0, 0.0]]),
    ("dist_equal", lambda m, a, b: m.dist(a, b), [[1.0, 2.0], [1.0, 2.0]]),
    ("std_constant", lambda m, x: m.std(x), [[1.0, 1.0, 1.0]]),
]
KNOWN_NONSMOOTH = {
    "prelu": "a torch bug at x = 0: its first backward takes the w * v side (x > 0 is false), "
             "its double backward differentiates the v side (self >= 0): d g/d v there is 1 "
             "in torch, w (its own first gradient's slope) in flowgrad",
    "norm_zero": _NAN,
    "dist_equal": _NAN,
    "std_constant": _NAN,
}


def _hess(m, f, inputs):
    """(g, which g require grad, grad(g, inputs + v, u)) with v and u from a fixed NumPy seed."""
    rng = np.random.default_rng(1)
    xs = [m.tensor(np.array(x, dtype=np.float64), requires_grad=True) for x in inputs]
    y = f(m, *xs)
    vs = [m.tensor(rng.standard_normal(tuple(y.shape)), requires_grad=True)]
    g = m.autograd.grad([y], xs, vs, create_graph=True, allow_unused=True)
    pick = [gi for gi in g if gi is not None and gi.requires_grad]
    live = [gi is not None and gi.requires_grad for gi in g]
    if not pick:
        return g, live, []
    us = [m.tensor(rng.standard_normal(tuple(p.shape))) for p in pick]
    return g, live, m.autograd.grad(pick, xs + vs, us, allow_unused=True)


def _values(grads):
    return [None if g is None else np.zeros(tuple(g.shape)) if isinstance(
        g, torch.Tensor) and g._is_zerotensor() else g.detach().numpy() for g in grads]


def _differ(expected, actual):
    """The first index whose values differ (None entries as zeros), or None."""
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e is None and a is None:
            continue
        e = np.zeros_like(a) if e is None else e
        a = np.zeros_like(e) if a is None else a
        if not np.allclose(a, np.broadcast_to(e, a.shape), rtol=1e-10, atol=1e-12,
                           equal_nan=True):
            return i, e, a
    return None


@pytest.mark.parametrize("case", NONSMOOTH, ids=[c[0] for c in NONSMOOTH])
def test_nonsmooth_gradgrad_vs_torch(case):
    name, f, inputs = case
    t_g, t_live, t_gg = _hess(torch, f, inputs)
    f_g, f_live, f_gg = _hess(flow, f, inputs)
    found = _differ(_values(t_g), _values(f_g))
    if found is None:
        assert t_live == f_live, f"first gradients that require grad: {t_live} vs {f_live}"
        found = _differ(_values(t_gg), _values(f_gg))
    if name in KNOWN_NONSMOOTH:
        assert found is not None, f"{name}: agrees with torch now: remove it from KNOWN_NONSMOOTH"
        return
    assert found is None, f"{name}: entry {found[0]}: torch {found[1]}, flowgrad {found[2]}"


def test_sinc_second_derivative_at_zero():
    """sinc''(0) = -pi^2 / 3 (torch's double backward gives nan there: 0 / 0 under its mask);
    flowgrad's first-derivative rule was a constant 0 at x = 0, so its second derivative was 0.
    Away from 0 both agree with torch."""
    x = flow.tensor([0.0, 0.5, -1.25], dtype=flow.float64, requires_grad=True)
    g, = flow.autograd.grad(flow.sinc(x).sum(), x, create_graph=True)
    h, = flow.autograd.grad(g.sum(), x)
    xt = torch.tensor([0.0, 0.5, -1.25], dtype=torch.float64, requires_grad=True)
    gt, = torch.autograd.grad(torch.sinc(xt).sum(), xt, create_graph=True)
    ht, = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-12, atol=1e-15)
    assert math.isclose(h.numpy()[0], -math.pi ** 2 / 3, rel_tol=1e-12)
    np.testing.assert_allclose(h.numpy()[1:], ht.numpy()[1:], rtol=1e-12)
