"""Special and transcendental functions over wide value ranges (tails, poles, zeros, large
orders) in torch and in flowgrad: values and first (and second) derivatives within each
function's bound of torch's, or closer to mpmath's: see tests/special_fuzz.py. Then one test
per error the sweep found, each against mpmath's value."""
from __future__ import annotations

import math

import fuzz_common
import mpmath as mp
import numpy as np
import pytest
import special_fuzz as sf
import torch

import flowgrad as flow


@pytest.mark.parametrize("seed", range(300))
def test_special_function_case_matches_torch_or_the_truth(seed):
    verdict = sf.check(seed)
    assert verdict is None, f"{sf.Case(seed).describe()}\n{verdict}"


@pytest.mark.slow
def test_many_special_function_cases_match_torch_or_the_truth():
    fuzz_common.assert_seeds_agree(sf.check, range(300, 6000))


def test_every_function_is_drawn_and_every_known_entry_names_one():
    drawn = {sf.Case(seed).name for seed in range(300)}
    assert drawn == set(sf.FUNCS)
    assert set(sf.KNOWN) <= set(sf.FUNCS)


def test_polygamma1_and_digamma_draw_no_x_whose_torch_derivative_never_returns():
    # torch's polygamma(2, -2.7e14) sums ~|x| terms and never returns: the sweep hung there
    for seed in (8002885, 8004843):  # polygamma1; digamma, whose second derivative it is
        x = sf.Case(seed).arrays[0]
        assert not ((x < -1e6) & (x > -2.0 ** 53) & (x != np.round(x))).any()


def _ulps(got, true, dtype):
    return abs(float(got) - float(true)) / (float(np.finfo(dtype).eps) * abs(float(true)))


@pytest.mark.parametrize("x", [0.7, 1.5, 2.9, 9.418928242342151, 20.957803435724728, -0.9])
def test_erfc_float64_keeps_its_relative_precision(x):
    # 1 - erf(x) for x < 3 lost up to 5e4 ulps (2.9), exp(-x * x) x^2 ulps beyond (100 at 21)
    got = flow.special.erfc(flow.tensor([x], dtype=flow.float64)).item()
    assert _ulps(got, mp.erfc(mp.mpf(x)), np.float64) <= 4


def test_erfinv_near_one_by_the_precise_erfc():
    y = 1 - 2.0 ** -20
    got = flow.erfinv(flow.tensor([y], dtype=flow.float64)).item()
    assert _ulps(got, mp.erfinv(mp.mpf(y)), np.float64) <= 4


@pytest.mark.parametrize("x", [0.9999965700280841, 1.0001, 0.99, 1.99, 2.0001, 1.1])
def test_lgamma_near_its_zeros_keeps_its_relative_precision(x):
    # SciPy's gammaln has only absolute precision by 1 and 2: 2e5 ulps at 1 - 3.4e-6
    got = flow.lgamma(flow.tensor([x], dtype=flow.float64)).item()
    assert _ulps(got, mp.log(mp.gamma(mp.mpf(x))), np.float64) <= 4


@pytest.mark.parametrize("x", [-2.735033735965665, -2.4570247382208006, -3.95, -5.9986,
                               -7.999975197095821, -4.0394])
def test_lgamma_near_its_negative_zeros_keeps_its_relative_precision(x):
    # gammaln's reflection cancels there: 43 ulps at -2.735 (special_fuzz seed 10900601)
    got = flow.lgamma(flow.tensor([x], dtype=flow.float64)).item()
    assert _ulps(got, mp.log(abs(mp.gamma(mp.mpf(x)))), np.float64) <= 8


@pytest.mark.parametrize("x", [-0.9999999, -2.9999, -7.999975197095821, -19.99999,
                               -6.664501014896938])
def test_digamma_near_negative_poles_keeps_the_phase(x):
    # SciPy's psi (as torch's digamma) reflected with pi x rounded: 3e6 ulps at -0.9999999
    for fn in (flow.digamma, lambda t: flow.polygamma(0, t)):
        got = fn(flow.tensor([x], dtype=flow.float64)).item()
        assert _ulps(got, mp.digamma(mp.mpf(x)), np.float64) <= 8


@pytest.mark.parametrize("x", [-3.6303030039544737, -0.5040830082644554, -1.58, -3.6394461220249,
                               -12.73, -39.775])
def test_digamma_near_its_negative_zeros_keeps_its_relative_precision(x):
    # the reflection psi(1 - x) - pi cot(pi x) cancels there: 27 ulps at -3.6303 (torch 10;
    # special_fuzz seed 11601552), 26 at -3.6394
    for fn in (flow.digamma, lambda t: flow.polygamma(0, t)):
        got = fn(flow.tensor([x], dtype=flow.float64)).item()
        assert _ulps(got, mp.digamma(mp.mpf(x)), np.float64) <= 4


def test_lgamma_is_plus_zero_at_one_and_two():
    for dtype in (flow.float64, flow.float32):
        out = flow.lgamma(flow.tensor([1.0, 2.0], dtype=dtype)).numpy()
        assert (out == 0).all() and not np.signbit(out).any()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("x", [1e-30, -1e-10, 3e-5, 0.0])
def test_sinc_second_derivative_near_zero_is_minus_pi_squared_over_three(dtype, x):
    # (cos(pi x) - sinc(x)) / x is exactly 0 at tiny x: its derivative gave -pi^2 there
    t = flow.tensor([x], dtype=getattr(flow, dtype), requires_grad=True)
    g, = flow.autograd.grad(flow.special.sinc(t).sum(), t, create_graph=True)
    h, = flow.autograd.grad(g.sum(), t)
    true = mp.diff(lambda u: mp.sinpi(u) / (mp.pi * u) if u else mp.mpf(1), mp.mpf(x), 2)
    assert abs(h.item() - float(true)) <= 4 * np.finfo(dtype).eps * abs(float(true))


def test_float32_polynomials_do_not_overflow_on_the_way_to_a_finite_value():
    # H_42(5.68) = -5.6e37 fits float32, its recurrence's 2 x H_41 does not
    x, n = np.float32(5.684503555297852), 42
    got = flow.special.hermite_polynomial_h(flow.tensor([x]), flow.tensor([float(n)])).item()
    want = torch.special.hermite_polynomial_h(torch.tensor([x]), torch.tensor([float(n)]))
    assert math.isfinite(got)
    assert _ulps(got, mp.hermite(n, mp.mpf(float(x))), np.float32) <= 4
    assert _ulps(got, want.item(), np.float32) <= 4


@pytest.mark.parametrize("eps", [None, 1e-6])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("p", [0.4999944112098464, 0.4940834667628472, 0.5068333148956299,
                               0.26, 0.74, 0.4987841248512268, 0.5000001])
def test_logit_near_one_half_keeps_its_relative_precision(dtype, p, eps):
    # log(p) - log1p(-p) cancelled: 7800 ulps at 0.4999944 in float64, in float32 85 at
    # 0.49878 (special_fuzz seed 5001210, logit(eps=1e-6)) and ~1000 nearer 1/2
    p = float(np.array(p, dtype))
    got = flow.special.logit(flow.tensor([p], dtype=getattr(flow, dtype)), eps=eps).item()
    assert _ulps(got, mp.log(mp.mpf(p) / (1 - mp.mpf(p))), dtype) <= 4


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("x", [-39.208213806152344, -30.0, -8.0, -1.5, 0.5])
def test_log_ndtr_derivative_in_the_left_tail(dtype, x):
    # exp(-x^2/2 - log_ndtr(x)) cancels x^2/2 against -log_ndtr: 290 float32 ulps at -39
    t = flow.tensor([x], dtype=getattr(flow, dtype), requires_grad=True)
    g, = flow.autograd.grad(flow.special.log_ndtr(t).sum(), t)
    xm = mp.mpf(x)
    assert _ulps(g.item(), mp.npdf(xm) / mp.ncdf(xm), dtype) <= 4


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("x", [-64.5, -10.5, -0.3, -1000.7, -1389432305427.5376])
def test_polygamma_of_negative_x_by_reflection(n, x):
    # SciPy's zeta(n + 1, x) summed ~|x| terms (no return at -1.4e12) and lost 3e4 (n = 2)
    # to 8e8 (n = 4) ulps near half-integers; mpmath's own polygamma hangs there too
    got = flow.polygamma(n, flow.tensor([x], dtype=flow.float64)).item()
    assert _ulps(got, sf._reflected(n, mp.mpf(x)), np.float64) <= 8


@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma_at_negative_integers_and_minus_inf_keeps_its_poles(n):
    got = flow.polygamma(n, flow.tensor([-3.0, -2.6e229, -math.inf], dtype=flow.float64)).tolist()
    pole = math.inf if n % 2 else -math.inf
    assert got[:2] == [pole, pole]
    assert math.isnan(got[2]) if n == 1 else got[2] == pole


@pytest.mark.parametrize("name,nu", [("i0e", 0), ("i1e", 1)])
@pytest.mark.parametrize("dtype,x", [("float32", 83994.0), ("float32", -25.0),
                                     ("float64", 1e5), ("float64", -3000.5)])
def test_scaled_bessel_derivative_for_large_x_by_its_expansion(name, nu, dtype, x):
    # i1e - sgn(x) i0e cancels terms ~1/sqrt(2 pi x) to one ~1/x smaller: 1% off in float32
    t = flow.tensor([x], dtype=getattr(flow, dtype), requires_grad=True)
    getattr(flow.special, name)(t).sum().backward()
    true = mp.diff(lambda z: mp.besseli(nu, z) * mp.exp(-abs(z)), mp.mpf(x))
    assert _ulps(t.grad.item(), true, np.dtype(dtype)) <= 4


def test_sinc_second_derivative_in_float32_without_cancellation():
    t = flow.tensor([-0.6546288132667542], requires_grad=True)
    g, = flow.autograd.grad(flow.sinc(t).sum(), t, create_graph=True)
    g2, = flow.autograd.grad(g.sum(), t)
    true = mp.diff(lambda z: mp.sinpi(z) / (mp.pi * z), mp.mpf(-0.6546288132667542), 2)
    assert _ulps(g2.item(), true, np.float32) <= 4


@pytest.mark.parametrize("x", [1.5, 3.0, 5.0, 6.1, 8.440348548133763, 10.0, 30.0])
def test_log_ndtr_float64_above_one_keeps_its_relative_precision(x):
    # SciPy's log(ndtr(x)) below 6 and -ndtr(-x) above were up to 50 ulps off
    got = flow.special.log_ndtr(flow.tensor([x], dtype=flow.float64)).item()
    assert _ulps(got, mp.log1p(-mp.ncdf(-mp.mpf(x))), np.float64) <= 4


def test_log_ndtr_gradient_near_float32_max_does_not_overflow():
    # phi / Phi ~ -x: 2 / erfcx(-x / sqrt 2) overflowed float32 before the 1/sqrt(2 pi)
    t = flow.tensor([-3.0182215194615804e38, -1e4], requires_grad=True)
    flow.special.log_ndtr(t).sum().backward()
    assert np.allclose(t.grad.numpy(), [3.0182215194615804e38, 1e4], rtol=1e-6)


def test_float32_expm1_is_rounded_once_and_its_gradient_keeps_torchs_precision():
    # special_fuzz seed 9401684: NumPy's float32 expm1(-7.9122) was an ulp off torch's
    # correctly rounded -0.9996338, and the gradient y + 1 kept that ulp of 1 (1.6e-4 off)
    x = np.float32(-7.912229061126709)
    want = mp.expm1(mp.mpf(float(x)))
    t = flow.tensor([x], requires_grad=True)
    y = t.expm1()
    y.backward(flow.ones(1))
    assert y.item() == float(np.float32(want))
    assert t.grad.item() == torch.tensor([x]).expm1().item() + 1
    assert abs(t.grad.item() - float(mp.exp(mp.mpf(float(x))))) < 3e-8


def test_the_log_ndtr_reference_keeps_the_upper_tail():
    # special_fuzz seed 9407384: mpmath's log(ncdf(14.8)) at 40 digits was 0, so flowgrad's
    # -6.652098695809248e-50 (1 ulp off) was flagged against torch's (9 ulps off)
    x = 14.806472153846109
    assert sf.FUNCS["log_ndtr"].ref(mp.mpf(x)) < 0
    assert sf.check(9407384) is None
