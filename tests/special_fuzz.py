"""Differential fuzzing of special and transcendental functions over wide value ranges.

Each case draws one function and a batch of inputs from a distribution that reaches its tails
and hard regions: log-uniform magnitudes from the dtype's tiny to its huge (1e-300..1e300 in
float64) of both signs, values near its poles, zeros and branch points, large orders n; in
float64 or float32. flowgrad's values must be within the function's bound of torch's: `ulps`
of the result (a few, for a kernel of the same algorithm family; more where the function's
condition number is large, stated in the table) plus `atol` (for functions that oscillate
through zeros, where a relative bound means nothing: the absolute error of a good kernel is
ulps of the function's envelope). Where they disagree mpmath decides: flowgrad passes if it is
within the bound of the true value or closer to it than torch; only a flowgrad error is a
difference. First gradients (second where flowgrad has them) are checked the same way, the
true derivative by mpmath.diff.

    .venv/bin/python tests/special_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/special_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import math
import random
import warnings

import fuzz_common
import mpmath as mp
import numpy as np

BATCH = 12
mp.mp.dps = 40


# ---- input distributions -------------------------------------------------------------------
def wide(rng, dtype, n, sign=True, lo=None, hi=None):
    """log-uniform magnitudes over the dtype's whole range (both signs unless sign=False)."""
    fi = np.finfo(dtype)
    lo = np.log10(float(fi.tiny)) if lo is None else lo
    hi = np.log10(float(fi.max)) - 0.01 if hi is None else hi
    x = 10.0 ** rng.uniform(lo, hi, n)
    if sign:
        x *= rng.choice([-1.0, 1.0], n)
    return x


def near(rng, points, n, spread=1e-3):
    """values at and around the given points, relative offsets log-uniform down to 1e-16."""
    p = rng.choice(np.asarray(points, float), n)
    off = 10.0 ** rng.uniform(-16, np.log10(spread), n) * rng.choice([-1.0, 1.0, 0.0], n)
    return p + off * np.maximum(1.0, np.abs(p))


def mix(*parts):
    """a sampler drawing each element from one of `parts` (samplers of (rng, dtype, n))."""
    def draw(rng, dtype, n):
        which = rng.integers(len(parts), size=n)
        out = np.empty(n)
        for i, part in enumerate(parts):
            k = int((which == i).sum())
            if k:
                out[which == i] = part(rng, dtype, k)
        return out
    return draw


def W(sign=True, lo=None, hi=None):
    return lambda rng, dtype, n: wide(rng, dtype, n, sign, lo, hi)


def U(a, b):
    return lambda rng, dtype, n: rng.uniform(a, b, n)


def N(*points, spread=1e-3):
    return lambda rng, dtype, n: near(rng, points, n, spread)


def Int(a, b):  # integers
    return lambda rng, dtype, n: rng.integers(a, b, n).astype(float)


# ---- the functions -------------------------------------------------------------------------
class F:
    """One function: `call(m, *tensors)`, samplers for each argument, the mpmath reference of
    one element, the bound (`ulps` of the result plus `atol`), the gradients checked (0, 1 or
    2: first and second) of the first `grad_args` arguments, the dtypes."""

    def __init__(self, call, samplers, ref, ulps=4, atol=0.0, grad=1, grad_args=1,
                 dtypes=("float64", "float32"), grad_ulps=None, grad_atol=0.0, deriv=None,
                 grad_scale=None, grad2_scale=None, why=""):
        self.call, self.samplers, self.ref = call, samplers, ref
        self.ulps, self.atol, self.grad, self.grad_args = ulps, atol, grad, grad_args
        self.dtypes, self.why = dtypes, why
        self.grad_ulps = grad_ulps or (None if callable(ulps) else 8 * ulps)
        # grad_atol: an absolute bound (in units of eps) for a derivative that torch's formula
        # gets by cancellation of terms of size ~1 (its error is ulps of those terms)
        self.grad_atol = grad_atol
        # ulps may be a function of an element's arguments; grad_scale(*args): the size of
        # those terms where it is not ~1 (1/h for hypot's second derivatives at tiny h), the
        # unit of grad_atol there
        self.grad_scale = grad_scale
        self.grad2_scale = grad2_scale  # (the second derivatives' own, where they differ)
        # deriv(order, x): the exact derivative, where mpmath.diff would straddle a pole
        self.deriv = deriv


def sp(name):
    return lambda m, *a: getattr(m.special, name)(*a)


def top(name):
    return lambda m, *a: getattr(m, name)(*a)


def _mpf(v):
    return mp.mpf(float(v))


def _i(n, x, scaled=False):
    v = mp.besseli(n, x)
    return v * mp.exp(-abs(x)) if scaled else v


def _k(n, x, scaled=False):
    if x < 0:
        return mp.nan
    if x == 0:
        return mp.inf
    v = mp.besselk(n, x)
    return v * mp.exp(x) if scaled else v


def _y(n, x):
    if x < 0:
        return mp.nan
    if x == 0:
        return -mp.inf
    return mp.bessely(n, x)


def _lgamma(x):
    if x <= 0 and x == mp.floor(x):
        return mp.inf
    return mp.re(mp.loggamma(x)) if x > 0 else mp.log(abs(mp.gamma(x)))


def _reflected(n, x):
    """polygamma(n, x) for x << 0 by reflection: mpmath's own does not return for x ~ -1e12."""
    cot_n = mp.diff(mp.cot, mp.pi * x, n) if n else mp.cot(mp.pi * x)
    return (-1) ** n * mp.polygamma(n, 1 - x) - mp.pi ** (n + 1) * cot_n


def _digamma(x):
    if x <= 0 and x == mp.floor(x):
        return mp.nan
    return _reflected(0, x) if x < -64 else mp.digamma(x)


def _polygamma(n):
    def ref(x):
        if x <= 0 and x == mp.floor(x):  # a pole: +inf from both sides for odd n
            return mp.inf if n % 2 else mp.nan
        return _reflected(n, x) if x < -64 else mp.polygamma(n, x)
    return ref


def _gamma_deriv(first):
    """deriv of digamma (first = 1) or lgamma (first = 0): polygamma(first + order - 1)."""
    return lambda order, x: _polygamma(first + order - 1)(x) if first + order > 1 \
        else _digamma(x)


def _erfcx_deriv(order, x):
    """erfcx'(x) = 2x erfcx(x) - 2/sqrt(pi); past 1e8 its asymptotic -(1 - 3/(2x^2)) /
    (sqrt(pi) x^2), where mpmath's erfc of a huge x overflows (seed 5000385, x = 1.2e308)."""
    if order > 1:
        return None
    if x > 1e8:
        return -(1 - 1.5 / (x * x)) / (mp.sqrt(mp.pi) * x * x)
    return 2 * x * mp.exp(x * x) * mp.erfc(x) - 2 / mp.sqrt(mp.pi)


def _gammainc_ulps(a, x):
    return 256 + 8 * abs(a)


def _recurrence(first, step):
    """the mpmath reference of an orthogonal polynomial p_n(x), by its recurrence in 40
    digits."""
    def ref(x, n):
        n = int(n)
        if n < 0:
            return mp.mpf(0)
        prev, cur = mp.mpf(1), first(x)
        if n == 0:
            return prev
        for k in range(1, n):
            prev, cur = cur, step(x, prev, cur, k)
        return cur
    return ref


def _shift(ref):
    return lambda x, n: ref(2 * x - 1, n)


def _CHEB_STEP(x, p, q, k):
    return 2 * x * q - p


_POLY = {
    "chebyshev_polynomial_t": _recurrence(lambda x: x, _CHEB_STEP),
    "chebyshev_polynomial_u": _recurrence(lambda x: 2 * x, _CHEB_STEP),
    "chebyshev_polynomial_v": _recurrence(lambda x: 2 * x - 1, _CHEB_STEP),
    "chebyshev_polynomial_w": _recurrence(lambda x: 2 * x + 1, _CHEB_STEP),
    "hermite_polynomial_h": _recurrence(lambda x: 2 * x, lambda x, p, q, k: 2 * x * q - 2 * k * p),
    "hermite_polynomial_he": _recurrence(lambda x: x, lambda x, p, q, k: x * q - k * p),
    "laguerre_polynomial_l": _recurrence(lambda x: 1 - x, lambda x, p, q, k:
                                         ((2 * k + 1 - x) * q - k * p) / (k + 1)),
    "legendre_polynomial_p": _recurrence(lambda x: x, lambda x, p, q, k:
                                         ((2 * k + 1) * x * q - k * p) / (k + 1)),
}

ANY = W()
POS = W(sign=False)


def _torch_returns(dist):
    """`dist` with its non-integer x in (-2^53, -1e6) scaled by 1e-10: torch's polygamma(n >= 2,
    x), polygamma1's derivative and digamma's second, sums ~|x| terms there (2 s at -1e8; at
    -2.7e14 it does not return: seeds 8002885, 8004843). The same draws, so other cases are
    unchanged."""
    def draw(rng, dtype, n):
        x = dist(rng, dtype, n)
        slow = (x < -1e6) & (x > -2.0 ** 53) & (x != np.round(x))
        return np.where(slow, x * 1e-10, x)
    return draw


def _logit_ref(eps):
    def ref(x):
        x = min(max(x, eps), 1 - eps) if eps is not None else x
        return mp.log(x / (1 - x)) if 0 <= x <= 1 else mp.nan
    return ref


def _polys():
    out = {}
    for name, ref in _POLY.items():
        # |x| <= 1 for the Chebyshev family, where the recurrence is stable; larger x and
        # degrees for the rest: their values are bounded by ~n * their envelope, so the
        # bound is ulps of the envelope (atol, relative to the largest |p_n| drawn: see
        # _bound)
        xs = mix(U(-1, 1), N(-1, 1, 0), U(-3, 3)) if "cheb" in name or "legendre" in name \
            else mix(U(-5, 5), U(-30, 30), N(0))
        out[name] = F(sp(name), [xs, Int(-2, 60)], ref, ulps=4096, atol=64, grad=0,
                      why="three-term recurrence: error grows ~n ulps of the envelope, ~n^2 "
                          "near x = +-1 (T_n'(1) = n^2: both ~1000 ulps at T_49(-1.00006))")
    for kind in "tuvw":
        ref = _POLY[f"chebyshev_polynomial_{kind}"]
        out[f"shifted_chebyshev_polynomial_{kind}"] = F(
            sp(f"shifted_chebyshev_polynomial_{kind}"), [mix(U(0, 1), N(0, 1, 0.5)), Int(-2, 60)],
            _shift(ref), ulps=4096, atol=64, grad=0, why="as the unshifted, 2x - 1 rounded once")
    return out


FUNCS = {
    "erf": F(sp("erf"), [mix(ANY, U(-6, 6))], mp.erf, grad=2, why="erf's condition <= 1"),
    "erfc": F(sp("erfc"), [mix(ANY, U(-6, 28))], mp.erfc, ulps=8, grad=2,
              why="erfc's relative condition grows ~2x^2 in the tail: 8 ulps to x = 27"),
    "erfcx": F(sp("erfcx"), [mix(ANY, U(-26, 30))],
               lambda x: mp.exp(x * x) * mp.erfc(x), ulps=8, grad_atol=4, deriv=_erfcx_deriv,
               why="exp(x^2) erfc(x): relative condition ~2x^2 for x < 0; torch's derivative "
                   "2x erfcx(x) - 2/sqrt(pi) cancels terms ~1.13 to ~1/x^2"),
    "erfinv": F(sp("erfinv"), [mix(U(-1, 1), N(-1, 1, 0), W(lo=-300, hi=0))], mp.erfinv,
                ulps=8, why="condition ~1/(1 - |y|) ... |y| near 1 is rounding of y itself"),
    "ndtr": F(sp("ndtr"), [mix(ANY, U(-38, 9))], mp.ncdf, ulps=8, why="as erfc"),
    "ndtri": F(sp("ndtri"), [mix(U(0, 1), W(sign=False, hi=0), N(0.5, 1, 0))],
               lambda p: mp.sqrt(2) * mp.erfinv(2 * p - 1) if 0 < p < 1 else
               (mp.inf if p == 1 else -mp.inf if p == 0 else mp.nan), ulps=8,
               grad_ulps=lambda p: 64 + 16 * abs(math.log(p)) if 0 < p < 1 else 64,
               why="condition ~1/|log p| small; 8 ulps as torch's rational fits; the "
                   "derivative sqrt(2 pi) exp(y^2 / 2) multiplies y's error by y^2 ~ -2 log p "
                   "(seed 5012693: 140 ulps at p = 1e-81, torch's 120)"),
    "log_ndtr": F(sp("log_ndtr"), [mix(ANY, U(-40, 10))],
                  # (log1p of the upper tail for x > 0: at 40 digits ncdf(14.8) is 1 and the
                  # log of it 0, where log_ndtr is -6.65e-50)
                  lambda x: mp.log1p(-mp.ncdf(-x)) if x > 0 else mp.log(mp.ncdf(x)), ulps=8,
                  deriv=lambda order, x: None if order > 1 else mp.npdf(x) / mp.ncdf(x)
                  if x > -1e6 else -x - 1 / x,  # (mpmath's ncdf underflows to 0 out there)
                  why="as erfc"),
    "i0": F(top("i0"), [mix(ANY, U(-720, 720))], lambda x: _i(0, x), ulps=8,
            why="Cephes' Chebyshev fits: a few ulps; exp(|x|) amplifies x's rounding"),
    "i0e": F(sp("i0e"), [mix(ANY, U(-50, 50))], lambda x: _i(0, x, True), ulps=8,
             grad_atol=4, why="i0e' = i1e - sgn(x) i0e: terms up to 1 cancel below |x| = 20"),
    "i1": F(sp("i1"), [mix(ANY, U(-720, 720))], lambda x: _i(1, x), ulps=8, grad=2,
            grad_atol=4, grad2_scale=lambda x: 1 + 1 / abs(x),
            why="i1' = i0 - i1/x cancels for the second derivative, i1 - i0/x + 2 i1/x^2, "
                "whose terms are ~1/|x| below 1 (seed 5003918: 170 float32 ulps at -0.1, "
                "torch's 130)"),
    "i1e": F(sp("i1e"), [mix(ANY, U(-50, 50))], lambda x: _i(1, x, True), ulps=8, grad=2,
             grad_atol=4, why="i1e' = i0e - i1e (sgn x + 1/x): terms ~1/sqrt(x) cancel"),
    "bessel_j0": F(sp("bessel_j0"), [mix(ANY, U(-40, 40), N(2.404825557695773))],
                   lambda x: mp.besselj(0, x), ulps=8, atol=8, grad=0,
                   why="oscillates through zeros: ulps of the envelope ~1/sqrt(x)"),
    "bessel_j1": F(sp("bessel_j1"), [mix(ANY, U(-40, 40), N(3.8317059702075125))],
                   lambda x: mp.besselj(1, x), ulps=8, atol=8, grad=0),
    "bessel_y0": F(sp("bessel_y0"), [mix(POS, U(0, 40), N(0.8935769662791675))],
                   lambda x: _y(0, x), ulps=8, atol=8, grad=0),
    "bessel_y1": F(sp("bessel_y1"), [mix(POS, U(0, 40), N(2.197141326031017))],
                   lambda x: _y(1, x), ulps=8, atol=8, grad=0),
    "modified_bessel_i0": F(sp("modified_bessel_i0"), [mix(ANY, U(-720, 720))],
                            lambda x: _i(0, x), ulps=8, grad=0),
    "modified_bessel_i1": F(sp("modified_bessel_i1"), [mix(ANY, U(-720, 720))],
                            lambda x: _i(1, x), ulps=8, grad=0),
    "modified_bessel_k0": F(sp("modified_bessel_k0"), [mix(ANY, U(0, 750))],
                            lambda x: _k(0, x), ulps=8, grad=0),
    "modified_bessel_k1": F(sp("modified_bessel_k1"), [mix(ANY, U(0, 750))],
                            lambda x: _k(1, x), ulps=8, grad=0),
    "scaled_modified_bessel_k0": F(sp("scaled_modified_bessel_k0"), [mix(ANY, U(0, 50))],
                                   lambda x: _k(0, x, True), ulps=8, grad=0),
    "scaled_modified_bessel_k1": F(sp("scaled_modified_bessel_k1"), [mix(ANY, U(0, 50))],
                                   lambda x: _k(1, x, True), ulps=8, grad=0),
    "spherical_bessel_j0": F(sp("spherical_bessel_j0"), [mix(ANY, U(-40, 40), N(0))],
                             lambda x: mp.sin(x) / x if x else mp.mpf(1), ulps=4, atol=4,
                             grad=0),
    "airy_ai": F(sp("airy_ai"), [mix(U(-40, 110), W(hi=3))], mp.airyai, ulps=16, atol=16,
                 grad=0, why="oscillates for x < 0 with envelope |x|^-1/4"),
    "digamma": F(top("digamma"), [mix(_torch_returns(ANY), U(-20, 20),
                                      N(-3, -2, -1, 0, 1.4616321449683622))],
                 _digamma, ulps=8, atol=0, grad=2, deriv=_gamma_deriv(1),
                 why="near its zero at 1.4616 and near poles the condition is large: "
                     "mpmath decides"),
    "lgamma": F(top("lgamma"), [mix(ANY, U(-20, 20), N(1, 2, -1, -2, -3))], _lgamma, ulps=16,
                grad=2, deriv=_gamma_deriv(0),
                why="SciPy's gammaln (Cephes) is ~10 ulps in [0.7, 1.8]; zeros at 1, 2"),
    "polygamma1": F(lambda m, x: m.special.polygamma(1, x), [mix(_torch_returns(ANY),
                                                                 U(-10, 10))],
                    _polygamma(1), ulps=16, grad=1, deriv=_gamma_deriv(2)),
    "polygamma3": F(lambda m, x: m.special.polygamma(3, x),
                    [mix(W(sign=False), U(-10, 10), U(-1000, 0))], _polygamma(3), ulps=16,
                    grad=1, deriv=_gamma_deriv(4),
                    why="negatives from [-1000, 0) only: torch's zeta sums ~|x| terms there "
                        "(polygamma(3, -1.45e15) does not return; flowgrad reflects)"),
    "polygamma7": F(lambda m, x: m.special.polygamma(7, x), [mix(W(sign=False), U(0.01, 10))],
                    _polygamma(7), ulps=16, grad=1, deriv=_gamma_deriv(8)),
    "multigammaln": F(lambda m, x: m.special.multigammaln(x, 3),
                      [mix(U(1.0001, 20), W(sign=False, lo=0.1))],
                      lambda x: sum(_lgamma(x - mp.mpf(j) / 2) for j in range(3)) +
                      mp.mpf(3) / 2 * mp.log(mp.pi), ulps=8, grad=2),
    "gammainc": F(sp("gammainc"), [mix(W(sign=False, lo=-10, hi=4), U(0.1, 50)),
                                   mix(W(sign=False, lo=-10, hi=4), U(0, 60))],
                  lambda a, x: mp.gammainc(a, 0, x, regularized=True), ulps=_gammainc_ulps,
                  atol=0, grad=0, why="Temme's/continued-fraction kernels lose ~a ulps for "
                  "large a (both: 85 and 44 ulps at a = 37, x = 10.8; 1000 at a = 282)"),
    "gammaincc": F(sp("gammaincc"), [mix(W(sign=False, lo=-10, hi=4), U(0.1, 50)),
                                     mix(W(sign=False, lo=-10, hi=4), U(0, 60))],
                   lambda a, x: mp.gammainc(a, x, mp.inf, regularized=True),
                   ulps=_gammainc_ulps, grad=0),
    "zeta": F(sp("zeta"), [mix(U(1, 40), W(sign=False, lo=0, hi=3)),
                           mix(U(0.01, 10), W(sign=False, lo=-3, hi=10))],
              lambda s, q: mp.zeta(s, q) if s > 1 and q > 0 else None, ulps=16, grad=0),
    "entr": F(sp("entr"), [mix(ANY, U(0, 2))],
              lambda x: -x * mp.log(x) if x > 0 else (mp.mpf(0) if x == 0 else -mp.inf),
              ulps=4, grad=2, grad_atol=4,
              why="entr' = -(1 + log x) cancels near 1/e: ulps of log x (seed 5003691)"),
    "sinc": F(sp("sinc"), [mix(ANY, U(-10, 10), N(0, 1, 2, -3))],
              lambda x: mp.sinpi(x) / (mp.pi * x) if x else mp.mpf(1), ulps=8, atol=4,
              grad=2, grad_atol=4,
              why="pi x rounds: ulps of x's size near the zeros; sinc'' = -pi^2 sinc - 2 "
                  "sinc'/x cancels terms ~1 between them (seed 5012190)"),
    "logit": F(lambda m, x: m.special.logit(x), [mix(U(0, 1), N(0, 1, 0.5), W(hi=0))],
               _logit_ref(None), ulps=16, grad=2,
               why="1/(x(1-x)) near 0 and 1; torch's float32 log(p / (1 - p)) cancels near 1/2"),
    "logit_eps": F(lambda m, x: m.special.logit(x, eps=1e-6), [mix(U(0, 1), N(0, 1), ANY)],
                   _logit_ref(1e-6), ulps=16, grad=2),
    "expit": F(sp("expit"), [mix(ANY, U(-750, 40))], lambda x: 1 / (1 + mp.exp(-x)), grad=2,
               grad_atol=2, why="s(1 - s)(1 - 2s), its second derivative, cancels near 0"),
    "sigmoid": F(top("sigmoid"), [mix(ANY, U(-750, 40))], lambda x: 1 / (1 + mp.exp(-x)),
                 grad=2, grad_atol=2, why="as expit"),
    "xlogy": F(sp("xlogy"), [mix(ANY, N(0)), mix(POS, N(0, 1))],
               lambda x, y: mp.mpf(0) if x == 0 else x * mp.log(y) if y >= 0 else mp.nan,
               grad=1, grad_args=2, why="x log y: log's condition 1/|log y| near y = 1"),
    "xlog1py": F(sp("xlog1py"), [mix(ANY, N(0)), mix(W(), N(-1, 0))],
                 lambda x, y: mp.mpf(0) if x == 0 else x * mp.log1p(y) if y >= -1 else mp.nan,
                 grad=1, grad_args=2),
    "log1p": F(top("log1p"), [mix(W(), N(-1, 0))],
               lambda x: mp.log1p(x) if x >= -1 else mp.nan, grad=2),
    "expm1": F(top("expm1"), [mix(W(hi=3), U(-40, 710), N(0))], mp.expm1, ulps=4, grad=2,
               why="condition |x| only for large x, x's own rounding"),
    "exp2": F(sp("exp2"), [mix(W(hi=3.01), U(-1075, 1024))], lambda x: mp.mpf(2) ** x,
              ulps=4, grad=2),
    "atanh": F(top("atanh"), [mix(U(-1, 1), N(-1, 1, 0), W(hi=1))],
               lambda x: mp.atanh(x) if abs(x) <= 1 else mp.nan, grad=2),
    "asinh": F(top("asinh"), [ANY], mp.asinh, grad=2),
    "acosh": F(top("acosh"), [mix(W(sign=False, lo=0), N(1))],
               lambda x: mp.acosh(x) if x >= 1 else mp.nan, grad=2),
    "lgamma_big": F(top("lgamma"), [W(sign=False, lo=1)], _lgamma, ulps=8, grad=2,
                    deriv=_gamma_deriv(0)),
    "mvlgamma": F(lambda m, x: m.mvlgamma(x, 2), [mix(U(0.5001, 30), W(sign=False, lo=0))],
                  lambda x: _lgamma(x) + _lgamma(x - mp.mpf(1) / 2) + mp.log(mp.pi) / 2,
                  ulps=8, grad=2),
    "logaddexp": F(top("logaddexp"), [mix(ANY, U(-800, 800)), mix(ANY, U(-800, 800))],
                   lambda a, b: mp.log(mp.exp(a) + mp.exp(b)), grad=2, grad_args=2,
                   grad_atol=4, why="the summed second derivatives are 0 (f(a + t, b + t) = "
                                    "f + t), left by cancellation of s(1 - s) terms"),
    "logaddexp2": F(top("logaddexp2"), [mix(ANY, U(-1100, 1100)), mix(ANY, U(-1100, 1100))],
                    lambda a, b: mp.log(mp.mpf(2) ** a + mp.mpf(2) ** b, 2), grad=2,
                    grad_args=2, grad_atol=4, why="as logaddexp"),
    "hypot": F(top("hypot"), [ANY, ANY], lambda a, b: mp.sqrt(a * a + b * b), grad=2,
               grad_args=2, grad_atol=4, grad_scale=lambda a, b: 1 / math.hypot(a, b),
               why="second derivatives (b^2 - ab)/h^3 cancel: 1/h - (b/h)^2/h"),
    "atan2": F(top("atan2"), [ANY, ANY], mp.atan2, grad=2, grad_args=2, grad_atol=4,
               why="second derivatives (a^2 - b^2 +- 2ab)/r^4 cancel"),
    "copysign": F(top("copysign"), [ANY, ANY], lambda a, b: abs(a) if b >= 0 else -abs(a),
                  ulps=0, grad=1, grad_args=2),
    "fmod": F(top("fmod"), [ANY, ANY], lambda a, b: math.fmod(a, b) if b else mp.nan, ulps=0,
              grad=1, grad_args=1, why="exact in floating point (C's fmod: Python's)"),
    "remainder": F(top("remainder"), [mix(ANY, U(-10, 10)), mix(ANY, U(-10, 10))],
                   lambda a, b: float(a) % float(b) if b else mp.nan, ulps=1, grad=1,
                   grad_args=1, why="exact but for the sign fix-up, a + b, rounded once"),
    "nextafter": F(top("nextafter"), [ANY, ANY], None, ulps=0, grad=0),
    "ldexp": F(top("ldexp"), [ANY, Int(-1100, 1100)], lambda x, e: x * mp.mpf(2) ** int(e),
               ulps=0, grad=1, why="exact (or one rounding into subnormals)"),
    "frexp_mantissa": F(lambda m, x: m.frexp(x)[0], [ANY], None, ulps=0, grad=0),
    "frexp_exponent": F(lambda m, x: m.frexp(x)[1], [ANY], None, ulps=0, grad=0),
    "logsumexp": F(lambda m, x: m.logsumexp(x.reshape(3, 4), 1),
                   [mix(ANY, U(-800, 800), N(700, -700))], None, ulps=8, grad=2, grad_atol=4,
                   why="a sum of 4 rounded terms"),
    "softmax": F(lambda m, x: m.softmax(x.reshape(3, 4), 1), [mix(ANY, U(-800, 800))], None,
                 ulps=8, grad=2, grad_atol=4),
    "log_softmax": F(lambda m, x: m.log_softmax(x.reshape(3, 4), 1), [mix(ANY, U(-800, 800))],
                     None, ulps=8, grad=2, grad_atol=8,
                     why="the second derivatives, 0, are s (4 - 4 sum(s)): terms of 4 cancel"),
    **_polys(),
}

# torch's artifacts, not copied: {function: [(output index from, predicate of an element's
# arguments, reason)]}; an element they match is not compared from that output on
KNOWN = {
    "logit": [(2, lambda t, x: x < 0 or x > 1,
               "second derivative outside [0, 1]: torch's nan only where 1/(x(1-x))^2 "
               "overflows (inf * 0 through its where; -0.0 at x = -0.5), flowgrad's 0 is "
               "the flat nan branch's")],
    "atan2": [(3, lambda t, a, b: not 0 < t(a) * t(a) + t(b) * t(b) < np.inf,
               "second derivative where a^2 + b^2 under/overflows: both frameworks' first "
               "derivative is the masked 0 there, torch's second is inf * 0 = nan")],
    "sinc": [(1, lambda t, x: abs(x) * np.finfo(t).eps > 1,
              "derivative at |x| past 1/eps, an integer: both compute cos/sin of the rounded "
              "pi x (the phase is lost), torch's pi x^2 overflows to a 0; the true +-1/x is "
              "neither's")],
    "airy_ai": [(0, lambda t, x: x < -2.09,
                 "the oscillating side: SciPy's Cephes airy keeps ~1e-14 absolute there (its "
                 "phase 2/3 |x|^1.5 rounded), torch ~1e-16; flowgrad does not write its own")],
}


# ---- running and comparing ------------------------------------------------------------------
class Case:
    def __init__(self, seed):
        r = random.Random(seed)
        rng = np.random.default_rng(seed)
        self.name = r.choice(sorted(FUNCS))
        self.f = FUNCS[self.name]
        self.dtype = r.choice(self.f.dtypes)
        self.arrays = []
        for draw in self.f.samplers:
            a = draw(rng, self.dtype, BATCH)
            if draw is not self.f.samplers[0] and self.name == "ldexp":
                a = a.astype(np.int64)
            else:
                a = a.astype(self.dtype)
            self.arrays.append(a)

    def describe(self):
        return f"{self.name} {self.dtype} " + " ".join(repr(a.tolist()) for a in self.arrays)


def _run(m, case):
    """[value, first gradients..., second gradients...] under module `m`."""
    f = case.f
    ts = []
    for i, a in enumerate(case.arrays):
        need = f.grad > 0 and i < f.grad_args and a.dtype.kind == "f"
        ts.append(m.tensor(a.copy(), requires_grad=need))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = f.call(m, *ts)
        res = [out.detach().numpy()]
        leaves = [t for t in ts if t.requires_grad]
        if not leaves:
            return res
        firsts = m.autograd.grad(out.sum(), leaves, create_graph=f.grad > 1)
        res += [g.detach().numpy() for g in firsts]
        if f.grad > 1:
            seconds = m.autograd.grad(sum(g.sum() for g in firsts), leaves, allow_unused=True)
            res += [None if g is None else g.detach().numpy() for g in seconds]
    return res


def _to_float(v, dtype):
    """an mpmath value rounded to the dtype (None when undefined)."""
    if v is None:
        return None
    if isinstance(v, mp.mpc):
        if abs(mp.im(v)) > 0:
            return np.nan
        v = mp.re(v)
    with np.errstate(all="ignore"):
        return np.array(float(v)).astype(dtype)[()]


def _partial(f, args, orders):
    """the partial derivative of f at args of the given orders by mpmath.diff, each argument
    stepped relative to its own size (an absolute step is either lost against 1e143 or
    crosses 0 beside 1e-63), in 60 digits."""
    scale = [abs(a) if a else mp.mpf(1) for a in args]
    # digits enough for f's change over a step of 1e-15 relative to f itself, near 0 where
    # f ~ f(0) + f'(0) x (sinc at 1e-208 changes it by 1e-416)
    tiny = min([s for s in scale] + [mp.mpf(1)])
    with mp.workdps(60 + min(1300, int(-2 * mp.log10(tiny)))):
        def g(*t):
            return f(*(a + s * u for a, s, u in zip(args, scale, t)))
        d = mp.diff(g, [mp.mpf(0)] * len(args), orders, h=mp.mpf("1e-15"))
    for s, k in zip(scale, orders):
        d /= s ** k
    return d


def _true_value(case, j, which):
    """the true value (which 0) or derivative of element j by mpmath, in the dtype; None
    where mpmath has none. The outputs after the value are the first derivatives in each
    differentiable argument, then the second: for argument k the sum over i of the
    d^2 f / dx_k dx_i (the gradient of the summed first gradients)."""
    f = case.f
    if f.ref is None:
        return None
    args = [_mpf(a[j]) for a in case.arrays]
    if any(not mp.isfinite(a) for a in args):
        return None
    nargs = min(f.grad_args, len(args))
    k, order = (which - 1, 1) if which <= nargs else (which - 1 - nargs, 2)
    try:
        if which == 0:
            return _to_float(f.ref(*args), case.dtype)
        if f.deriv is not None:
            return _to_float(f.deriv(order, args[0]), case.dtype)
        unit = [int(i == k) for i in range(len(args))]
        if order == 1:
            return _to_float(_partial(f.ref, args, unit), case.dtype)
        total = sum(_partial(f.ref, args, [u + int(i == m) for m, u in enumerate(unit)])
                    for i in range(nargs))
        return _to_float(total, case.dtype)
    except (ValueError, ZeroDivisionError, TypeError, OverflowError):
        return None


def _bound(case, ulps, atol, values, envelope):
    """the allowed error at `values`: ulps of each, atol ulps of the envelope, and ulps of
    the smallest subnormal (a subnormal result has only absolute precision)."""
    fi = np.finfo(case.dtype)
    eps, sub = float(fi.eps), float(fi.smallest_subnormal)
    return ulps * eps * np.abs(values) + atol * eps * envelope + np.maximum(ulps, 1) * sub


def _bad(case, got, want, ulps, atol, which):
    """(indices where flowgrad's `got` is outside the bound of torch's `want`, envelope)."""
    with np.errstate(all="ignore"):
        same_special = (np.isnan(got) & np.isnan(want)) | (got == want)
        finite = np.isfinite(got) & np.isfinite(want)
        envelope = np.max(np.abs(want[np.isfinite(want)]), initial=1.0) if atol else 0.0
        if which:  # a derivative's atol: absolute, in units of grad_scale's terms
            second = which > min(case.f.grad_args, len(case.arrays))
            scale = case.f.grad2_scale if second and case.f.grad2_scale else case.f.grad_scale
            envelope = 1.0 if scale is None else _per_element(case, scale)
        err = np.abs(got.astype(float) - want.astype(float))
        ok = same_special | finite & (err <= _bound(case, ulps, atol, want.astype(float),
                                                    envelope))
    return np.flatnonzero(~ok), envelope


def _per_element(case, fn):
    """fn of each element's arguments (the arguments' shape, raveled; 1 where they are not
    finite or all 0)."""
    cols = zip(*(arr.ravel().tolist() for arr in case.arrays))
    with np.errstate(all="ignore"):
        out = np.array([fn(*args) if all(map(math.isfinite, args)) and any(args) else 1.0
                        for args in cols])
    return np.where(np.isfinite(out), out, 1.0)


def _at(bound, j):
    """element j of a per-element bound (or the scalar bound)."""
    return np.ravel(bound)[j % np.size(bound)]


def _known(case, j, which):
    args = [case.arrays[i].ravel()[j] for i in range(len(case.arrays))]
    t = np.dtype(case.dtype).type
    with np.errstate(all="ignore"):
        return any(which >= start and pred(t, *args)
               for start, pred, _ in KNOWN.get(case.name, ()))


def check(seed):
    """None when flowgrad's values and gradients agree with torch's (or are closer to the
    truth), else a message."""
    case = Case(seed)
    both = fuzz_common.run_both(_run, case)
    if not isinstance(both, tuple):
        return both
    want, got = both
    if len(want) != len(got):
        return f"{len(got)} outputs, torch {len(want)}"
    f = case.f
    for which, (a, b) in enumerate(zip(got, want)):
        what = "value" if which == 0 else f"derivative {which}"
        if a is None or b is None:
            if (a is None) != (b is None):
                return f"{what}: flowgrad {a is not None}, torch {b is not None}"
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{what}: flowgrad {a.dtype}{a.shape}, torch {b.dtype}{b.shape}"
        if a.dtype.kind != "f":
            if not np.array_equal(a, b):
                return f"{what} differs: flowgrad {a.tolist()}, torch {b.tolist()}"
            continue
        ulps, atol = (f.ulps, f.atol) if which == 0 else (f.grad_ulps, f.grad_atol)
        if callable(ulps):
            ulps = _per_element(case, ulps)
        bad, envelope = _bad(case, a.ravel(), b.ravel(), ulps, atol, which)
        for j in bad:
            x, y = a.ravel()[j], b.ravel()[j]
            if a.shape == case.arrays[0].shape and _known(case, j, which):
                continue
            true = _true_value(case, j, which) if a.shape == case.arrays[0].shape else None
            if true is not None:
                with np.errstate(all="ignore"):
                    if np.isnan(true) and np.isnan(x) or true == x:
                        continue
                    ex, et = abs(float(x) - float(true)), abs(float(y) - float(true))
                    if np.isfinite(ex) and (ex <= et or ex <= _bound(
                            case, _at(ulps, j), atol, float(true), _at(envelope, j))):
                        continue
            at = [float(arr.ravel()[j]) for arr in case.arrays] \
                if a.shape == case.arrays[0].shape else j
            return (f"{what} at {at}: flowgrad {x!r}, torch {y!r}, mpmath "
                    f"{true!r}")
    return None


def main():
    fuzz_common.main(__doc__, lambda seed: Case(seed).describe(), check, seeds="0:500")


if __name__ == "__main__":
    main()
