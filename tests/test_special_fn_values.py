"""The gamma family, i1/i1e, igamma, zeta and polar at their special inputs (nan, +-inf, +-0,
poles, subnormals) against torch in float64: values, first and second derivatives. Where torch
is not the reference (its kernel's artifact, documented in each test) the expected value is
the mathematical one, checked by its limit or by float64 finite differences."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import flowgrad as flow

INF, NAN = math.inf, math.nan


def _derivatives(m, fn, values, order=2):
    """fn(x) and its first `order` derivatives (of the sum) at `values`, in float64."""
    x = m.tensor(values, dtype=m.float64, requires_grad=True)
    y = fn(m, x)
    out = [y.detach().numpy()]
    g = y
    for k in range(order):
        (g,) = m.autograd.grad(g.sum(), x, create_graph=k + 1 < order)
        out.append(g.detach().numpy())
    return out


def _close(got, want, rtol=1e-12, atol=1e-300, what="", zero_sign=True):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    # the same sign of infinities (and of zeros, unless zero_sign=False)
    signed = ~np.isnan(want) & (zero_sign | (want != 0))
    assert (np.signbit(got) == np.signbit(want))[signed].all(), what


# ---- i1, i1e ---------------------------------------------------------------------------------
# 0, subnormal, below torch's eps cut, the series' range and its edge (0.1), the closed form
I1_POINTS = [0.0, -0.0, 1e-320, -1e-320, 1e-17, -1e-17, 1e-8, -1e-4, 0.05, 0.0999999, 0.1,
             -0.1000001, 0.5, 1.0, -3.0, 20.0]
I1 = {"i1": lambda m, x: m.special.i1(x), "i1e": lambda m, x: m.special.i1e(x)}


@pytest.mark.parametrize("name", list(I1))
def test_i1_value_and_first_derivative_match_torch(name):
    ours = _derivatives(flow, I1[name], I1_POINTS, order=1)
    theirs = _derivatives(torch, I1[name], I1_POINTS, order=1)
    _close(ours[0], theirs[0], rtol=1e-14, what="value")
    # torch's gradient is exactly 1/2 for |x| <= eps; the closed form near it is 1e-16 off.
    # At 20 (the last point) flowgrad's i1e' is the Hankel expansion's, within an ulp of the
    # truth; torch's closed form cancels (46 ulps there)
    closed = slice(None) if name == "i1" else slice(None, -1)
    _close(ours[1][closed], theirs[1][closed], rtol=1e-14, what="first derivative")


def test_i1_second_derivative():
    """i1''(x) = 3x/8 + 5x^3/96 + ..., odd: torch's is 0 for |x| <= eps (its cut) and 0 at
    1e-8 (cancellation); flowgrad's series is exact near 0, the closed form beyond 0.1."""
    x = np.array(I1_POINTS)
    ours = _derivatives(flow, I1["i1"], I1_POINTS)[2]
    theirs = _derivatives(torch, I1["i1"], I1_POINTS)[2]
    near = np.abs(x) < 1e-3  # (torch's closed form is 3e-8 off at 1e-4)
    series = 3 * x[near] / 8 + 5 * x[near] ** 3 / 96
    _close(ours[near], series, rtol=1e-14, what="series", zero_sign=False)
    _close(ours[~near], theirs[~near], rtol=1e-9, what="closed form")


def test_i1e_second_derivative():
    """i1e = e^-|x| i1 has a kink in its derivative at 0: i1e''(x) -> -sign(x) (1 - 15|x|/8)
    beside 0, 0 at 0 itself (the sign(0) = 0 subgradient, torch's value there); torch gives 0
    for 0 < |x| <= eps (its cut), flowgrad the one-sided value."""
    x = np.array(I1_POINTS)
    ours = _derivatives(flow, I1["i1e"], I1_POINTS)[2]
    theirs = _derivatives(torch, I1["i1e"], I1_POINTS)[2]
    zero = x == 0
    _close(ours[zero], np.zeros(zero.sum()), what="at 0")
    near = (np.abs(x) < 1e-7) & ~zero
    _close(ours[near], -np.sign(x[near]) * (1 - 15 * np.abs(x[near]) / 8), rtol=1e-15)
    far = np.abs(x) >= 1e-4
    _close(ours[far], theirs[far], rtol=1e-9, what="away from 0")


@pytest.mark.parametrize("name", list(I1))
def test_i1_derivatives_continuous_across_the_series_edge(name):
    h = 1e-9
    below, above = (_derivatives(flow, I1[name], [s * 0.1 - h, s * 0.1 + h])
                    for s in (1.0, -1.0))
    for k in (1, 2):
        np.testing.assert_allclose(below[k][0], below[k][1], rtol=1e-7)
        np.testing.assert_allclose(above[k][0], above[k][1], rtol=1e-7)


def test_i1_gradient_at_nan_is_nan():
    # torch's cut (|x| > eps is False for nan) gives 1/2 at a nan input; nan stays nan here,
    # as for the other ops in test_special_values_vs_torch's KNOWN
    for name in I1:
        assert np.isnan(_derivatives(flow, I1[name], [NAN], order=1)[1]).all()


# ---- lgamma, digamma, polygamma --------------------------------------------------------------
GAMMA_POINTS = [INF, -INF, 0.0, -0.0, 1e-320, -1e-320, 1e-40, -1.0, -2.0, -3.5, 0.5, 1.0, 30.0]


def test_lgamma_matches_torch_at_special_points():
    """lgamma(-inf) = +inf (C99's lgamma; SciPy's gammaln gives -inf) and -log|x| at
    subnormal x (gammaln overflows to inf there)."""
    ours = _derivatives(flow, lambda m, x: m.lgamma(x), GAMMA_POINTS, order=1)
    theirs = _derivatives(torch, lambda m, x: m.lgamma(x), GAMMA_POINTS, order=1)
    _close(ours[0], theirs[0], rtol=1e-14, what="value")
    _close(ours[1], theirs[1], rtol=1e-14, what="digamma")


def test_trigamma_nan_at_minus_infinity():
    """trigamma(x) ~ pi^2 / sin^2(pi x) as x -> -inf: no limit, nan as torch (SciPy: inf);
    so digamma's gradient and lgamma's second derivative are nan there too."""
    assert np.isnan(flow.polygamma(1, flow.tensor([-INF], dtype=flow.float64)).numpy()).all()
    for fn in (lambda m, x: m.digamma(x), lambda m, x: m.lgamma(x)):
        ours = _derivatives(flow, fn, [-INF, 2.0])
        theirs = _derivatives(torch, fn, [-INF, 2.0])
        _close(ours[-1], theirs[-1], rtol=1e-9)


def test_polygamma_at_infinities():
    """+inf: the limit (-1)^(n+1) 0 for n >= 1 (torch: 0 for n = 1, nan for n >= 2, its zeta
    kernel's inf/inf); -inf: nan for n <= 1, +-inf for n >= 2 as torch."""
    x = flow.tensor([INF, -INF], dtype=flow.float64)
    t = torch.tensor([INF, -INF], dtype=torch.float64)
    for n in range(5):
        ours, theirs = flow.polygamma(n, x).numpy(), torch.polygamma(n, t).numpy()
        _close(ours[1:], theirs[1:], what=f"n={n} at -inf")
        if n <= 1:
            _close(ours[:1], theirs[:1], what=f"n={n} at +inf")
        else:
            assert ours[0] == 0 and np.signbit(ours[0]) == (n % 2 == 0), n


def test_trigamma_infinite_at_the_poles():
    """trigamma has a double pole (+inf from both sides) at 0, -1, -2, ...: flowgrad gives inf,
    torch a finite 1e27..1e32 from sin(pi x) rounded (listed in test_special_values_vs_torch);
    near, not at, a pole both agree (torch loses digits far out: 3e-6 at -501 - 1e-9)."""
    poles = flow.tensor([0.0, -1.0, -501.0, -1e20], dtype=flow.float64)
    assert np.isposinf(flow.polygamma(1, poles).numpy()).all()
    near = [-1.0 + 1e-6, -10.0 - 1e-7, -3.5]
    _close(flow.polygamma(1, flow.tensor(near, dtype=flow.float64)).numpy(),
           torch.polygamma(1, torch.tensor(near, dtype=torch.float64)).numpy(), rtol=1e-6)


# ---- mvlgamma --------------------------------------------------------------------------------
MV_POINTS = [INF, -INF, NAN, 0.0, -0.0, -1.0, -1.5, 0.3, 0.5, 1.0, 1.2, 1.5, 2.0, 2.5, -3.3]


@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_mvlgamma_outside_its_domain_as_torch(p):
    """torch 2.13 no longer refuses x <= (p-1)/2: the formula's value (inf at the poles, -0
    counts as +0 in its last term), and its gradient (sum of digammas)."""
    fn = lambda m, x: m.mvlgamma(x, p)  # noqa: E731
    ours = _derivatives(flow, fn, MV_POINTS, order=1)
    theirs = _derivatives(torch, fn, MV_POINTS, order=1)
    _close(ours[0], theirs[0], rtol=1e-13, what="value")
    _close(ours[1], theirs[1], rtol=1e-12, what="gradient")
    ints = [1, 0, -2]
    np.testing.assert_allclose(flow.mvlgamma(flow.tensor(ints), p).numpy(),
                               torch.mvlgamma(torch.tensor(ints), p).numpy(), rtol=1e-6)


# ---- igamma, igammac, zeta -------------------------------------------------------------------
GRID = [0.0, -0.0, 1e-300, 0.5, 1.0, 3.0, 1e20, INF, -1.0, -INF, NAN]


def _grid(fn_name):
    a, b = (np.array(v) for v in zip(*itertools.product(GRID, GRID)))
    fn = {"zeta": lambda m: m.special.zeta}.get(fn_name, lambda m: getattr(m, fn_name))
    ours = fn(flow)(flow.tensor(a), flow.tensor(b)).numpy()
    theirs = fn(torch)(torch.tensor(a), torch.tensor(b)).numpy()
    return a, b, ours, theirs


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_igamma_boundaries(name):
    """Equal to torch on every pair of special values but those with a nan input, where torch's
    boundary checks (a == inf before x's nan, x == 0 or x == inf before a's nan) give 0 or 1:
    flowgrad keeps nan."""
    a, b, ours, theirs = _grid(name)
    with_nan = np.isnan(a) | np.isnan(b)
    _close(ours[~with_nan], theirs[~with_nan], rtol=1e-13)
    assert np.isnan(ours[with_nan]).all()


def test_zeta_boundaries():
    """Equal to torch but where each term (k + q)^-x underflows to 0 (q = inf, or x and q
    huge): the sum is 0, torch's Euler-Maclaurin kernel gives nan (inf/inf)."""
    a, b, ours, theirs = _grid("zeta")
    vanishing = ((b == INF) & (a > 1)) | ((a >= 1e20) & (b >= 1e20))
    _close(ours[~vanishing], theirs[~vanishing], rtol=1e-13)
    assert (ours[vanishing] == 0).all()
    assert np.isnan(theirs[vanishing]).all()  # (if torch changes, drop the exception)


# ---- polar -----------------------------------------------------------------------------------
def test_polar_gradients_are_the_derivative():
    """d/d abs of abs e^(i angle) is e^(i angle) at every abs; torch uses result.sgn(), which
    flips it for abs < 0 and zeroes it at abs = 0 (outside its documented domain abs >= 0).
    Both gradients against float64 central differences, and against torch for abs > 0."""
    a = np.array([-2.0, -0.5, 0.0, -0.0, 1.5, 3.0])
    th = np.array([0.3, -1.2, 0.7, 2.0, 1.0, -2.5])
    cot = np.array([0.4 - 0.9j, 1.1 + 0.2j, -0.3 + 0.5j, 0.8 + 0.8j, -1 + 0.1j, 0.2 - 0.7j])

    def loss(a, th):
        return np.real(np.sum(np.conj(cot) * a * np.exp(1j * th)))

    h, eye = 1e-6, np.eye(len(a))
    fd_a = [(loss(a + h * e, th) - loss(a - h * e, th)) / (2 * h) for e in eye]
    fd_t = [(loss(a, th + h * e) - loss(a, th - h * e)) / (2 * h) for e in eye]
    grads = {}
    for m in (flow, torch):
        x = m.tensor(a, requires_grad=True)
        t = m.tensor(th, requires_grad=True)
        grads[m] = [g.numpy() for g in m.autograd.grad(m.polar(x, t), (x, t), m.tensor(cot))]
    np.testing.assert_allclose(grads[flow][0], fd_a, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(grads[flow][1], fd_t, rtol=1e-8, atol=1e-9)
    positive = a > 0
    np.testing.assert_allclose(grads[flow][0][positive], grads[torch][0][positive], rtol=1e-14)
    np.testing.assert_allclose(grads[flow][1], grads[torch][1], rtol=1e-14)


def test_spherical_bessel_j0_and_airy_ai_at_the_ends():
    """sin(x)/x is 0 at +-inf (torch's limit; it was nan), and Ai(x) past SciPy's range
    (x ~ 1e4, where SciPy gives nan) has underflowed to 0, as torch gives; Ai(+inf) is nan
    in both."""
    x = [float("inf"), -float("inf"), 0.0, 1e300, 1e10, 300.0, 3.0, -3.0]
    for name in ("spherical_bessel_j0", "airy_ai"):
        want = getattr(torch.special, name)(torch.tensor(x, dtype=torch.float64)).numpy()
        got = getattr(flow.special, name)(flow.tensor(x, dtype=flow.float64)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-12, equal_nan=True,
                                   err_msg=name)


def test_zeta_past_q_1e8_keeps_the_asymptotic_series_third_term():
    # SciPy's two-term series for q > 1e8 was 20 ulps off at x = 35.5 (special_fuzz seed
    # 8002528); q - 1 stays on SciPy's Euler-Maclaurin sum, equal to torch's
    x = np.array([35.52888987034044, 38.0, 2.0, 35.52888987034044])
    q = np.array([168832019.05364525, 1.5e8, 1e9, 9.9e7])
    want = [2.381969716830818e-286, 8.249388262797746e-305, 1.0000000005e-09,
            2.4066358532028876e-278]  # (mpmath's)
    got = flow.special.zeta(flow.tensor(x), flow.tensor(q)).numpy()
    _close(got, np.array(want), rtol=4e-16, atol=0)
    assert flow.special.zeta(flow.tensor([INF]), flow.tensor([1e9])).item() == 0.0
    # polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x), SciPy's the same series (9e-15 at n = 36)
    got = [flow.special.polygamma(n, flow.tensor([v], dtype=flow.float64)).item()
           for n, v in ((36, 1.1e8), (20, 1.5e8))]
    _close(np.array(got), np.array([-3.3426896274094875e-250, -3.6582170458637565e-147]),
           rtol=4e-16, atol=0)
