"""Special functions beyond erf: the gamma family (lgamma, digamma, polygamma, mvlgamma, igamma),
Bessel functions, the normal distribution (ndtr, ndtri, log_ndtr), erfcx, xlog1py, zeta, sinc,
entr. Kernels call SciPy's special-function ufuncs (`scipy.special`, or CuPy's twin on a CuPy
device) in float64 and cast back: their algorithms are the reference ones (Cephes, Boost,
AMOS) and writing twenty of them again would only add bugs. Gradients follow torch's
derivatives.yaml; where torch has none (the Bessel functions of torch.special, airy_ai) the op
is not differentiable, as there.

>>> import flowgrad as flow
>>> flow.lgamma(flow.tensor([1.0, 5.0]))
tensor([0.0000, 3.1781])
"""
from __future__ import annotations

import functools
import math

from ..dtypes import complex128, float64
from ..errors import int_arg, tensor_operand
from ..tensor import Tensor, tensor_method
from .creation import arange
from .elementwise import (
    _float_of,
    _inplace_binary,
    _promote_pair,
    abs,
    cos,
    exp,
    log,
    sign,
    where,
)
from .halfprec import HALF
from .math import log1p
from .registry import op
from .rules import _grad_mul, unary
from .special import _exp_neg_square, _scipy_special, scipy_call

__all__ = ["lgamma", "digamma", "polygamma", "mvlgamma", "i0", "igamma", "igammac", "sinc"]

_SQRT_2PI = math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _scipy(name):
    """The kernel scipy.special.<name> of one array, for a `unary` row."""
    return lambda xp, x: scipy_call(xp, name, x)


def _in_float64(derivative):
    """`derivative(x, ...)` computed in float64 (complex128) for a narrower x, cast back to
    x's dtype: for a closed form that cancels, or whose steps overflow the dtype."""
    @functools.wraps(derivative)
    def wide(x, *rest):
        if x.element_size() >= (16 if x.is_complex() else 8):
            return derivative(x, *rest)
        to = complex128 if x.is_complex() else float64
        return derivative(x.to(to), *(t.to(to) for t in rest)).to(x.dtype)
    return wide


def _safe(x):
    """x with its zeros replaced by ones: for a rule's x in a denominator, the x == 0 entries
    are then set by a `where`, and no nan reaches either branch's gradient."""
    return where(x == 0, 1.0, x)


# ---- the gamma family ------------------------------------------------------------------------
# polygamma(n, x) for x < 0 by the reflection formula, psi(1 - x) - psi(x) = pi cot(pi x)
# differentiated n times: SciPy's polygamma, Cephes' zeta(n + 1, x), sums about |x| terms
# there (trigamma(-1.4e12), the second derivative of lgamma, never returned; torch's zeta for
# n >= 2 neither) and lost up to 8e8 ulps for even n near half-integers (2.8e4 at -64.5)
@functools.cache
def _cot_derivative(n):
    """The coefficients (lowest first) of P_n, cot^(n)(u) = P_n(cot u): P_0(c) = c,
    P_(k+1)(c) = -(1 + c^2) P_k'(c)."""
    p = (0, 1)
    for _ in range(n):
        dp = [k * p[k] for k in range(1, len(p))] + [0, 0]
        p = tuple(-dp[i] - (dp[i - 2] if i >= 2 else 0) for i in range(len(dp)))
    return p


def _polygamma_reflected(xp, x, n):
    """polygamma(n, x) = (-1)^n polygamma(n, 1 - x) - pi^(n+1) P_n(cot(pi x)), in float64;
    cot(pi x) from r = x - round(x), exact, so the phase is kept; the poles (integer x) and -inf
    give (-1)^(n+1) inf, as SciPy's."""
    x = x.astype(xp.float64)
    r = x - xp.round(x)
    with xp.errstate(all="ignore"):
        # cot(pi r) = tan(pi (1/2 - |r|)) sgn(r) for |r| >= 1/4, 1/2 - |r| exact: 0 at 1/2
        c = xp.where(xp.abs(r) < 0.25, 1.0 / xp.tan(math.pi * r),
                     xp.sign(r) * xp.tan(math.pi * (0.5 - xp.abs(r))))
        acc = xp.zeros_like(c)
        for coef in _cot_derivative(n)[::-1]:
            acc = acc * c + float(coef)
        out = (-1) ** n * _scipy_special(xp.__name__).polygamma(n, 1.0 - x) \
            - math.pi ** (n + 1) * acc
    return xp.where((r == 0) | xp.isinf(x), (-1) ** (n + 1) * xp.inf, out)


@op("polygamma", jvp="diagonal", save="inputs", layout="elementwise")
def _polygamma(xp, x, *, n):
    if n == 0:
        return _digamma_kernel(xp, x)
    neg = x < 0
    out = scipy_call(xp, "polygamma", xp.full(x.shape, n, dtype=x.dtype),
                     xp.where(neg, xp.ones((), x.dtype), x))
    if neg.any():
        out[neg] = _polygamma_reflected(xp, x[neg], n).astype(out.dtype)
    if 2 <= n <= 40 and out.dtype == xp.float64 and (x > _ZETA_ASYMPTOTIC).any():
        # SciPy's (-1)^(n+1) n! zeta(n + 1, x) lacks _zeta_third_term (< float32's ulp)
        out = out + (-1) ** (n + 1) * math.factorial(n) * _zeta_third_term(
            xp, xp.full((), n + 1.0), x)
    if n == 1:  # nan at -inf, as torch: trigamma swings between ~pi^2 and its poles there
        out = xp.where(x == -xp.inf, xp.full((), xp.nan, out.dtype), out)
    # n >= 2 at +inf: +-0, the limit ((-1)^(n+1) (n-1)! / x^n); torch's nan there is its
    # zeta kernel's inf / inf (torch's own trigamma gives the limit, 0)
    return out


@functools.cache
def _lgamma_near_one():
    """The Taylor coefficients of lgamma(1 + e): -euler_gamma, then (-1)^k zeta(k) / k."""
    import scipy.special
    return (-0.5772156649015329,) + tuple((-1) ** k * float(scipy.special.zeta(k)) / k
                                          for k in range(2, 28))


def _lgamma_zeros(xp, x):
    """lgamma(x) for |x - 1| < 0.2 or |x - 2| < 0.2 in float64 by lgamma(1 + e)'s series
    (and lgamma(2 + e) = lgamma(1 + e) + log1p(e)): near its zeros gammaln keeps only
    absolute precision (2e5 ulps at 1 - 3e-6, 4e3 at 2.0001)."""
    x = x.astype(xp.float64)
    e = xp.where(x > 1.5, x - 2.0, x - 1.0)  # exact
    coefs = _lgamma_near_one()
    acc = xp.full_like(e, coefs[-1])
    for c in coefs[-2::-1]:
        acc = acc * e + c
    acc = acc * e + 0.0  # (+0 at 1, not -euler_gamma * 0 = -0)
    return xp.where(x > 1.5, acc + xp.log1p(e), acc)


# lgamma's zeros below -2 as double-doubles (hi, lo; mpmath), two in each (-n - 1, -n) to
# n = 7; further ones lie within 2.5e-5 of the poles
_NEG_ZEROS = (
    (-2.4570247382208006, -3.7075610815513266e-17), (-2.7476826467274127, 9.055340329338315e-17),
    (-3.14358088834998, -2.1818179852331714e-16), (-3.955294284858598, -1.999428391746348e-17),
    (-4.039361839740537, 2.1143995503980602e-16), (-4.991544640560048, 1.5174411760571722e-16),
    (-5.0082181683225935, -4.3926353491015815e-17), (-5.998607480080875, -3.311862478893795e-16),
    (-6.001385294453155, 6.415847287933042e-17), (-6.999801507890638, 1.0550130037400023e-17),
    (-7.000198333407325, 2.504354173632409e-16), (-7.999975197095821, -5.261737128572354e-17))


@functools.cache
def _lgamma_neg_zero_series(i):
    """(hi, radius, window, coefficients) of lgamma(hi + d) = sum_k b_k d^k about the hi of
    zero i: b_0 = lgamma(hi) ~ -lo psi(hi) - lo^2 psi'(hi) / 2, b_k = polygamma(k - 1, hi) / k!
    scaled by radius^k (radius = |hi - nearest integer|, so the terms stay in range); for
    |d| < window radius, wider (more terms) where the pole is far enough for polygamma to
    stay finite."""
    import numpy as np
    hi, lo = _NEG_ZEROS[i]
    radius = math.fabs(hi - math.floor(hi + 0.5))
    window, terms = (0.6, 75) if radius > 0.01 else (0.35, 40)
    at = np.array([hi])
    psi = float(_polygamma_reflected(np, at, 0)[0])  # (SciPy's psi: 3e-12 off at -7.99998)
    coefs = [-lo * psi - lo * lo / 2 * float(_polygamma_reflected(np, at, 1)[0]), psi * radius]
    coefs += [float(_polygamma_reflected(np, at, k - 1)[0]) * radius ** k / math.factorial(k)
              for k in range(2, terms + 1)]
    return hi, radius, window, tuple(coefs)


def _lgamma_negative_zeros(xp, x, out):
    """out with lgamma near its zeros below -2 by Taylor series about each (|d| < 0.35 to 0.6
    of the distance to the pole): gammaln's reflection there cancels terms ~lgamma(1 - x), 40 ulps
    at -2.735 (C's lgamma, torch's, keeps relative precision)."""
    for i in range(len(_NEG_ZEROS)):
        hi, radius, window, coefs = _lgamma_neg_zero_series(i)
        near = xp.abs(x - hi) < window * radius
        if near.any():
            t = (xp.where(near, x, hi).astype(xp.float64) - hi) / radius  # x - hi exact
            acc = xp.full_like(t, coefs[-1])
            for c in coefs[-2:0:-1]:
                acc = acc * t + c
            out = xp.where(near, (acc * t + coefs[0]).astype(out.dtype), out)
    return out


def _lgamma_kernel(xp, x):
    """log|Gamma(x)|: SciPy's gammaln, but +inf at -inf (C99's lgamma, as torch; gammaln
    gives -inf), -log|x| for |x| < 1e-30, where gammaln's 1/x overflows (inf at 1e-320;
    the next term, -0.577 x, is below float64's precision there), and a series near the
    zeros 1 and 2 (_lgamma_zeros)."""
    out = scipy_call(xp, "gammaln", x)
    near = (xp.abs(x - 1.0) < 0.2) | (xp.abs(x - 2.0) < 0.2)
    if near.any():
        out = xp.where(near, _lgamma_zeros(xp, xp.where(near, x, 1.0)).astype(out.dtype), out)
    if ((x < -2.0) & (x > -8.0)).any():
        out = _lgamma_negative_zeros(xp, x, out)
    with xp.errstate(all="ignore"):
        tiny = -xp.log(xp.abs(x)).astype(out.dtype, copy=False)
    out = xp.where(xp.abs(x) < 1e-30, tiny, out)
    return xp.where(x == -xp.inf, xp.full((), xp.inf, out.dtype), out)


# digamma's zeros as double-doubles (hi, lo; mpmath), one in each (-n - 1, -n) to n = 39
_DIGAMMA_ZEROS = (
    (-0.5040830082644554, -8.15428206243813e-18), (-1.5734984731623904, -1.574185691077347e-17),
    (-2.6107208684441447, 9.881960746978353e-17), (-3.635293366436901, 5.454396163173039e-17),
    (-4.653237761743142, -2.5492686201468193e-16), (-5.6671624415568855, -3.2153051074948335e-18),
    (-6.678418213073427, 3.470798723495241e-16), (-7.687788325031626, -1.351562494643672e-16),
    (-8.695764163816401, -3.2859903716289447e-16), (-9.702672540001863, -3.2563178405401477e-16),
    (-10.708740838254144, -6.287211750540301e-16), (-11.714133061228955, 8.598250154343834e-16),
    (-12.718971025749207, -4.752312432106917e-16), (-13.723347457363827, 4.528278691518058e-16),
    (-14.727334416018529, -3.6618399963139786e-17), (-15.730988906332882, 1.0551956373365842e-16),
    (-16.734356723955734, -1.2039501631800144e-15), (-17.73747515997759, -5.125776230727235e-16),
    (-18.7403749447801, 7.757330874026816e-16), (-19.74308167259022, 6.505672516695227e-16),
    (-20.745616863607527, 9.370177952348924e-16), (-21.74799876820113, -1.2246233990931817e-15),
    (-22.75024298430606, -1.1268600266054163e-15), (-23.752362937385183, 8.157017519280734e-16),
    (-24.75437025782297, -1.316906917865066e-15), (-25.756275080771037, 1.3077979683180938e-15),
    (-26.758086286661367, 1.1334337131725835e-15), (-27.759811695826706, -1.120148225799811e-16),
    (-28.761458227264864, -1.5405711086887488e-15), (-29.763032029127462, -4.657204559411395e-16),
    (-30.76453858671817, -1.0553524434167124e-15), (-31.765982812458248, -6.70609301293155e-16),
    (-32.76736912128526, -1.304649438968616e-15), (-33.768701494202546, -1.5457983717077358e-15),
    (-34.76998353212671, -1.2295381171373804e-15), (-35.77121850174271, -2.0583108230405618e-15),
    (-36.772409374736625, -1.653219262181563e-15), (-37.77355886151158, 9.499881135840653e-16),
    (-38.77466944028412, -3.0750024084944574e-15), (-39.775743382293676, 2.8004009607584453e-15),
)


@functools.cache
def _digamma_zero_series(n):
    """(hi, radius, coefficients) of psi(hi + d) = sum_k c_k (d / radius)^k about the hi of
    the zero in (-n - 1, -n): c_0 = psi(hi) ~ -lo psi'(hi), c_k = polygamma(k, hi) radius^k /
    k!, radius = hi's distance to its nearest pole (the series' radius of convergence)."""
    import numpy as np
    hi, lo = _DIGAMMA_ZEROS[n]
    radius = math.fabs(hi - math.floor(hi + 0.5))
    at = np.array([hi])
    coefs = [float(_polygamma_reflected(np, at, k)[0]) * radius ** k / math.factorial(k)
             for k in range(1, 41)]
    return hi, radius, (-lo * coefs[0] / radius,) + tuple(coefs)


def _digamma_negative_zeros(xp, x, out):
    """out with digamma within 0.35 radius of its zeros above -40 by the series about each:
    the reflection psi(1 - x) - pi cot(pi x) cancels there (27 ulps at -3.6303, where
    torch's is 10; special_fuzz seed 11601552)."""
    for n in xp.unique(xp.floor(x[(x < -0.25) & (x > -40.0)])).tolist():
        hi, radius, coefs = _digamma_zero_series(-int(n) - 1)
        near = xp.abs(x - hi) < 0.35 * radius
        if near.any():
            t = (xp.where(near, x, hi).astype(xp.float64) - hi) / radius
            acc = xp.full_like(t, coefs[-1])
            for c in coefs[-2:0:-1]:
                acc = acc * t + c
            out = xp.where(near, (acc * t + coefs[0]).astype(out.dtype), out)
    return out


def _digamma_kernel(xp, x):
    """SciPy's psi, but below -1/4 (off the poles) flowgrad's reflection with the exact phase:
    psi's (and torch's) lose it near the poles (3e6 ulps at -0.9999999, 6e4 at -19.99999);
    near the zeros above -40 a series about each (_digamma_negative_zeros)."""
    out = scipy_call(xp, "psi", x)
    neg = (x < -0.25) & (x != xp.floor(x))  # (the pole at 0: -1/x, as SciPy's)
    if neg.any():
        out = xp.where(neg, _polygamma_reflected(xp, xp.where(neg, x, -0.5), 0).astype(
            out.dtype), out)
        out = _digamma_negative_zeros(xp, x, out)
    return out


_digamma = unary("digamma", _digamma_kernel, d_of_x=lambda x: _polygamma(x, n=1))
_lgamma = unary("lgamma", _lgamma_kernel, d_of_x=_digamma)


@_polygamma.grad
def polygamma_backward(ctx, dy):
    return dy * _polygamma(ctx.inputs[0], n=ctx.n + 1)


def _not_implemented(what):
    raise NotImplementedError(f"the derivative for '{what}' is not implemented (as in torch); "
                              f"pass that argument as a tensor that does not require grad")


@op("igamma", save="inputs", layout="elementwise")
def _igamma(xp, a, x):
    return scipy_call(xp, "gammainc", a, x)


@op("igammac", save="inputs", layout="elementwise")
def _igammac(xp, a, x):
    return scipy_call(xp, "gammaincc", a, x)


def _igamma_density(ctx, name):
    """d/dx P(a, x) = x^(a-1) e^-x / Gamma(a); torch has no derivative in a."""
    a, x = ctx.inputs
    if ctx.needs_input_grad[0]:
        _not_implemented(f"{name}: input")
    return exp((a - 1.0) * log(x) - x - _lgamma(a))


@_igamma.grad
def igamma_backward(ctx, dy):
    return None, dy * _igamma_density(ctx, "igamma")


@_igammac.grad
def igammac_backward(ctx, dy):
    return None, -dy * _igamma_density(ctx, "igammac")


@tensor_method()
def lgamma(input):
    """log|Gamma(input)|.

    >>> import flowgrad as flow
    >>> flow.lgamma(flow.tensor([0.5]))
    tensor([0.5724])
    """
    return _lgamma(_float_of(input))


@tensor_method()
def digamma(input):
    """The logarithmic derivative of Gamma: lgamma'(input); -inf at 0, as torch.

    >>> import flowgrad as flow
    >>> flow.digamma(flow.tensor([1.0]))
    tensor([-0.5772])
    """
    return _digamma(_float_of(input))


def polygamma(n, input):
    """The n-th derivative of digamma (n >= 0).

    >>> import flowgrad as flow
    >>> flow.polygamma(1, flow.tensor([1.0]))
    tensor([1.6449])
    """
    n = _polygamma_args(n, input)
    if n < 0:
        raise RuntimeError(f"polygamma(n, x): n must be a non-negative integer, got {n!r}")
    return _polygamma(_float_of(input), n=n)


def _polygamma_args(n, input):
    """n as torch's argument parser reads it (before out='s checks: `parse_args`): an int,
    else its TypeError (a float, a tensor of more elements)."""
    return int_arg(n, "polygamma", "n", 1)


def _mvlgamma_args(input, p):
    """p as torch's argument parser reads it (see _polygamma_args); a bool input refused as
    torch's mvlgamma refuses it."""
    p = int_arg(p, "mvlgamma", "p", 2)
    data = getattr(input, "_data", None)
    if data is not None and data.dtype.kind == "b":
        raise RuntimeError("mvlgamma: The input tensor may not be a boolean tensor; convert it "
                           "with .float() first")
    return p


polygamma.parse_args = _polygamma_args


@tensor_method()
def mvlgamma(input, p):
    """The multivariate log-gamma function of dimension p:
    sum_i lgamma(input - i/2) + p(p-1)/4 log(pi), i = 0..p-1. Defined for input > (p-1)/2;
    elsewhere the same formula (inf at the poles, nan at -inf's gradient), as torch 2.13,
    which no longer checks the domain.

    >>> import flowgrad as flow
    >>> flow.mvlgamma(flow.tensor([2.5]), p=2)
    tensor([0.8570])
    """
    p = _mvlgamma_args(input, p)
    x = _float_of(input)
    if p < 1:
        raise RuntimeError(f"mvlgamma: p has to be greater than or equal to 1, got {p!r}")
    # torch's steps -(p-1)/2, ..., -1/2, +0 (not -0: at x = -0 the last term is lgamma(+0),
    # whose gradient is digamma(+0) = -inf), summed in torch's order
    steps = arange(-(p - 1) / 2, 0.5, 0.5, dtype=x.dtype)
    return lgamma(x.unsqueeze(-1) + steps).sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


mvlgamma.parse_args = _mvlgamma_args


@tensor_method()
@tensor_operand()
def igamma(input, other):
    """The regularized lower incomplete gamma function P(input, other); differentiable in
    `other` only, as torch.

    >>> import flowgrad as flow
    >>> flow.igamma(flow.tensor([1.0]), flow.tensor([1.0]))
    tensor([0.6321])
    """
    _floating_kernel_only("igamma", input, other)
    return _igamma(*_promote_pair(input, other, "igamma", floating=True))


def _floating_kernel_only(name, input, other):
    """torch computes igamma/igammac in the operands' promoted dtype, and has no integer or
    bool kernel: refused where neither operand is floating (one floating operand makes the
    result floating)."""
    tensors = [t for t in (input, other) if isinstance(t, Tensor)]
    if tensors and not any(t.is_floating_point() or t.is_complex() for t in tensors):
        raise NotImplementedError(f'"{name}_cpu" not implemented for '
                                  f'{" and ".join(sorted({str(t.dtype) for t in tensors}))}; '
                                  f"convert the operands to a floating dtype")


@tensor_method()
@tensor_operand()
def igammac(input, other):
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P(input, other).

    >>> import flowgrad as flow
    >>> flow.igammac(flow.tensor([1.0]), flow.tensor([1.0]))
    tensor([0.3679])
    """
    _floating_kernel_only("igammac", input, other)
    return _igammac(*_promote_pair(input, other, "igammac", floating=True))


# ---- erfcx, the normal distribution ----------------------------------------------------------
_erfcx = unary("erfcx", _scipy("erfcx"), d_of_xy=lambda x, y: x * y * 2.0 - _TWO_OVER_SQRT_PI)
def _ndtr_kernel(xp, x):
    if x.dtype in HALF:  # torch's (1 + erf(x / sqrt(2))) * 0.5, each step rounded to x's dtype
        t = (x.astype(xp.float32) * xp.float32(1.0 / math.sqrt(2.0))).astype(x.dtype)
        e = scipy_call(xp, "erf", t.astype(xp.float32)).astype(x.dtype)
        return (x.dtype.type(1) + e) * x.dtype.type(0.5)
    return scipy_call(xp, "ndtr", x)


_ndtr = unary("ndtr", _ndtr_kernel, d_of_x=lambda x: exp(x * x * -0.5), scale=1.0 / _SQRT_2PI)
_ndtri = unary("ndtri", _scipy("ndtri"), d_of_y=lambda y: exp(y * y * 0.5), scale=_SQRT_2PI)
@_in_float64  # float32's 2 / erfcx(2e38) overflowed, where phi / Phi ~ -x is 3e38
def _log_ndtr_derivative(x, y):
    """phi(x) / Phi(x): for x < 0 sqrt(2 / pi) / erfcx(-x / sqrt 2) (Phi = exp(-x^2/2)
    erfcx(-x/sqrt 2) / 2), as torch's exp(-x^2/2 - y) / sqrt(2 pi) elsewhere; that form
    cancels x^2/2 against -y for x << 0 (290 float32 ulps at -39)."""
    neg = x < 0
    tail = _erfcx(where(neg, x, -1.0) * (-1.0 / math.sqrt(2.0))).reciprocal() \
        * math.sqrt(2.0 / math.pi)
    return where(neg, tail, exp(x * x * -0.5 - y) * (1.0 / _SQRT_2PI))


def _log_ndtr_kernel(xp, x):
    """SciPy's log_ndtr, but log1p(-Q(x)) for x > 1, Q(x) = exp(-x^2/2) erfcx(x/sqrt 2) / 2
    with x^2 unrounded: SciPy's log(ndtr(x)) and -ndtr(-x) were up to 50 ulps off there."""
    out = scipy_call(xp, "log_ndtr", x)
    big = x > 1.0
    if big.any():
        a = xp.minimum(x[big].astype(xp.float64), 40.0)  # Q underflows from 38.5 on
        q = _exp_neg_square(xp, a, 0.5) * scipy_call(xp, "erfcx", a * (1.0 / math.sqrt(2.0)))
        out[big] = xp.log1p(q * -0.5).astype(out.dtype)
    return out


_log_ndtr = unary("log_ndtr", _log_ndtr_kernel, d_of_xy=_log_ndtr_derivative)


# ---- modified Bessel functions of the first kind (torch.i0, torch.special.i0e/i1/i1e) --------
_i0 = unary("i0", _scipy("i0"), d_of_x=lambda x: _i1(x), layout="elementwise")


# For |x| >= _IE_LARGE the e-scaled derivatives i0e' = i1e - sgn(x) i0e and
# i1e' = i0e - i1e (sgn x + 1/x) cancel terms ~1/sqrt(2 pi |x|) to a result ~1/|x| smaller
# (1% off in float32 at 8e4, 2|x| ulps in float64); their Hankel expansions instead,
# I_nu(x) e^-x ~ (2 pi x)^-1/2 sum_k (-1)^k a_k(nu) / x^k, subtracted term by term: 36 terms
# reach float64 precision from |x| = 20
_IE_LARGE = 20.0


def _hankel(nu, k):
    num = math.prod(4 * nu * nu - (2 * j - 1) ** 2 for j in range(1, k + 1))
    return (-1) ** k * num / (math.factorial(k) * 8 ** k)


_I0E_D = tuple(_hankel(1, k) - _hankel(0, k) for k in range(36))
_I1E_D = tuple(_hankel(0, k) - _hankel(1, k) - (_hankel(1, k - 1) if k else 0.0)
               for k in range(36))


def _ie_split(x):
    """(large, |x| with the others replaced by _IE_LARGE): each `where` branch stays finite."""
    large = abs(x) >= _IE_LARGE
    return large, where(large, abs(x), _IE_LARGE)


def _i0e_derivative(x, y):
    large, ax = _ie_split(x)
    far = sign(x) * _series(_I0E_D, ax.reciprocal()) * (ax * (2.0 * math.pi)).rsqrt()
    return where(large, far, _i1e(x) - sign(x) * y)


_i0e = unary("i0e", _scipy("i0e"), d_of_xy=_i0e_derivative)

# i1(x) = x Q(x^2), i1'(x) = P(x^2): their power series, used for |x| < _I1_SMALL, where
# i0(x) - i1(x)/x cancels (0/0 at 0, 0 or 1 instead of 1/2 at subnormal x) and its own
# derivative, for the second, cancels as 1/x^2 (16 instead of ~0 at 1e-17); six terms reach
# float64 precision up to 0.1, where the closed form's second derivative loses only ~1e-14
_I1_SMALL = 0.1
_I1_Q = tuple(1 / (2 * 4 ** k * math.factorial(k) * math.factorial(k + 1)) for k in range(6))
_I1_P = tuple((2 * k + 1) * c for k, c in enumerate(_I1_Q))


def _series(coefs, t):
    """sum_k coefs[k] t^k by Horner's rule, with flowgrad ops."""
    acc = t * coefs[-1] + coefs[-2]
    for c in coefs[-3::-1]:
        acc = acc * t + c
    return acc


def _i1_split(x):
    """(small, x with the small entries replaced by 1, x^2 with the others replaced by 0):
    each branch of the `where` sees only finite values, so no nan reaches either gradient."""
    small = abs(x) < _I1_SMALL
    return small, where(small, 1.0, x), where(small, x, 0.0).square()


def _i1_derivative(x, y):
    """i1'(x) = i0(x) - i1(x)/x; 1/2 + 3x^2/16 + ... near 0 (torch: 1/2 for |x| <= eps,
    and at nan, where this gives nan)."""
    small, big, t = _i1_split(x)
    return where(small, _series(_I1_P, t), _i0(big) - y / big)


def _i1e_derivative(x, y):
    """i1e'(x) = i0e(x) - i1e(x) (sgn x + 1/x); e^-|x| (i1'(x) - |x| i1(x)/x) near 0."""
    small, big, t = _i1_split(x)
    near = exp(-abs(x)) * (_series(_I1_P, t) - abs(x) * _series(_I1_Q, t))
    large, ax = _ie_split(x)
    far = _series(_I1E_D, ax.reciprocal()) * (ax * (2.0 * math.pi)).rsqrt()
    return where(small, near, where(large, far, _i0e(big) - y * (sign(big) + 1.0 / big)))


_i1 = unary("i1", _scipy("i1"), d_of_xy=_i1_derivative)
_i1e = unary("i1e", _scipy("i1e"), d_of_xy=_i1e_derivative)


@tensor_method()
def i0(input):
    """The modified Bessel function of the first kind, order 0.

    >>> import flowgrad as flow
    >>> flow.i0(flow.tensor([0.0, 1.0]))
    tensor([1.0000, 1.2661])
    """
    return _i0(_float_of(input))


# ---- xlog1py, zeta, sinc, entr ---------------------------------------------------------------
@op("xlog1py", jvp="diagonal", save="inputs", layout="elementwise")
def _xlog1py(xp, x, y):
    if x.dtype in HALF:  # torch's x * log1p(y) in x's dtype: log1p rounded, then the product
        with xp.errstate(divide="ignore", invalid="ignore"):
            r = x * xp.log1p(y.astype(xp.float32)).astype(y.dtype)
        return xp.where((x == 0) & ~xp.isnan(y), xp.zeros((), x.dtype), r)
    return scipy_call(xp, "xlog1py", x, y)


@_xlog1py.grad
def xlog1py_backward(ctx, dy):
    x, y = ctx.inputs
    need = ctx.needs_input_grad
    # log1p(y), also at x == 0; 0 only where x == 0 and y <= -1, as torch
    dx = _grad_mul(dy, where((x == 0) & (y <= -1.0), 0.0, log1p(y))) if need[0] else None
    # x / (1 + y), also 0/0 = nan at (0, -1) as torch (0 where dy is 0: an untaken where branch)
    return dx, (_grad_mul(dy, x / (y + 1.0)) if need[1] else None)


# SciPy's zeta for q > 1e8 keeps two terms of the asymptotic series (DLMF 25.11.43), off by
# x(x - 1) / (12 q^2) of the value (20 ulps at x = 35.5, q = 1.7e8); its third term,
# x q^(-x-1) / 12, gives torch's values (the fourth is below an ulp there)
_ZETA_ASYMPTOTIC = 1e8


def _zeta_third_term(xp, x, q):
    """float64 x q^(-x-1) / 12 where q > 1e8 (and x is finite), else 0."""
    x64, q64 = x.astype(xp.float64, copy=False), q.astype(xp.float64, copy=False)
    with xp.errstate(all="ignore"):
        return xp.where((q64 > _ZETA_ASYMPTOTIC) & (x64 < xp.inf),
                        x64 * q64 ** (-x64 - 1.0) / 12.0, 0.0)


@op("zeta", save="inputs", layout="elementwise")
def _zeta(xp, x, q):
    if not (q > _ZETA_ASYMPTOTIC).any():
        return scipy_call(xp, "zeta", x, q)
    x64 = x.astype(xp.float64, copy=False)
    return (scipy_call(xp, "zeta", x64, q) + _zeta_third_term(xp, x64, q)).astype(
        x.dtype, copy=False)


@_zeta.grad
def zeta_backward(ctx, dy):
    x, q = ctx.inputs
    if ctx.needs_input_grad[0]:
        _not_implemented("zeta")
    return None, dy * -x * _zeta(x + 1.0, q)


def _sinc_kernel(xp, x):
    # float16/bfloat16 in float32, rounded once, as torch's opmath (pi * 1 in float16 is not
    # pi's float32, and sin of it is 3e-4 rather than ~0)
    wide = x.astype(xp.float32) if x.dtype.kind in "fV" and x.dtype.itemsize < 4 else x
    with xp.errstate(all="ignore"):
        return xp.sinc(wide).astype(x.dtype, copy=False)


# sinc'(x) = x S(x^2) near 0, S's coefficients (-1)^k 2k pi^2k / (2k+1)!, k >= 1: nine terms
# reach float64 precision up to |x| = 0.1, where (cos(pi x) - sinc(x)) / x cancels (exactly
# 0 at tiny x, so its derivative, sinc'', was -pi^2 there rather than -pi^2/3)
_SINC_SMALL = 0.1
_SINC_D = tuple((-1) ** k * 2 * k * math.pi ** (2 * k) / math.factorial(2 * k + 1)
                for k in range(1, 10))


@_in_float64  # sinc'' subtracts pi sin(pi x) from 2 sinc'(x): 60 float32 ulps at -0.65
def _sinc_derivative(x):
    small = abs(x) < _SINC_SMALL
    xs, xt = where(small, 1.0, x), where(small, x, 0.0)  # each branch sees finite values only
    return where(small, xt * _series(_SINC_D, xt.square()),
                 (cos(xs * math.pi) - _sinc(xs)) / xs)


def _entr_kernel(xp, x):
    with xp.errstate(all="ignore"):
        r = -x * xp.log(x)
    r = xp.where(x == 0, xp.zeros((), x.dtype), r)
    return xp.where(x < 0, xp.full((), -xp.inf, x.dtype), r)


_sinc = unary("sinc", _sinc_kernel, d_of_x=_sinc_derivative, complex=True)
_entr = unary("entr", _entr_kernel, d_of_x=lambda x: -(log(x) + 1.0))


@tensor_method()
def sinc(input):
    """The normalized sinc: sin(pi x) / (pi x), and 1 at 0.

    >>> import flowgrad as flow
    >>> flow.sinc(flow.tensor([0.0, 0.5]))
    tensor([1.0000, 0.6366])
    """
    return _sinc(_float_of(input))


# ---- torch.special's Bessel and Airy functions: no gradient in torch ------------------------
# SciPy's Cephes kernels agree with mpmath to ~1e-15 in float64; torch's own bessel_j0/j1/y0/y1
# and airy_ai are off by up to ~1e-6 between |x| ~ 2.5 and ~25 (j0(5.4215): 2e-7 absolute), so
# the differences there are torch's, not to be copied (tests/test_reduce_opinfo_fixes.py)
_NO_GRAD = {"bessel_j0": "j0", "bessel_j1": "j1", "bessel_y0": "y0", "bessel_y1": "y1",
            "modified_bessel_i0": "i0", "modified_bessel_i1": "i1", "modified_bessel_k0": "k0",
            "modified_bessel_k1": "k1", "scaled_modified_bessel_k0": "k0e",
            "scaled_modified_bessel_k1": "k1e"}
NO_GRAD_OPS = {name: unary(name, _scipy(sname), differentiable=False)
               for name, sname in _NO_GRAD.items()}


@op("spherical_bessel_j0", differentiable=False)
def _spherical_bessel_j0(xp, x):
    zero, inf = x == 0, xp.isinf(x)
    safe = xp.where(zero | inf, xp.ones((), x.dtype), x)
    # sin(x)/x -> 1 at 0 and 0 at +-inf (torch's limits; sin(inf) would give nan)
    y = xp.where(zero, xp.ones((), x.dtype), xp.sin(safe) / safe)
    return xp.where(inf, xp.zeros((), x.dtype), y)


@op("airy_ai", differentiable=False)
def _airy_ai(xp, x):
    fn = _scipy_special(xp.__name__).airy
    with xp.errstate(all="ignore"):
        y = fn(x.astype(xp.float64, copy=False))[0]
    # SciPy gives nan past x ~ 1e4; Ai has underflowed to 0 from x ~ 105 on (+inf: nan, as
    # torch's)
    return xp.where((x > 200) & xp.isfinite(x), 0.0, y).astype(x.dtype, copy=False)


NO_GRAD_OPS["spherical_bessel_j0"] = _spherical_bessel_j0
NO_GRAD_OPS["airy_ai"] = _airy_ai

# the ops torch.special names without a top-level twin, for flowgrad.special
SPECIAL_OPS = {"erfcx": _erfcx, "ndtr": _ndtr, "ndtri": _ndtri, "log_ndtr": _log_ndtr,
               "i0e": _i0e, "i1": _i1, "i1e": _i1e, "entr": _entr}


def xlog1py(input, other):
    """input * log1p(other), and 0 where input == 0 (unless other is nan)."""
    return _xlog1py(*_promote_pair(input, other, "xlog1py", floating=True))


def zeta(input, other):
    """The Hurwitz zeta function sum_k (k + other)^-input; differentiable in `other` only."""
    return _zeta(*_promote_pair(input, other, "zeta", floating=True))


# ---- Tensor methods and in-place variants ----------------------------------------------------
def _polygamma_method(self, n):
    """x.polygamma(n) is torch.polygamma(n, x)."""
    return polygamma(n, self)


Tensor.polygamma = _polygamma_method
for _name in ("lgamma", "digamma", "i0", "sinc", "igamma", "igammac", "mvlgamma", "polygamma"):
    setattr(Tensor, _name + "_", _inplace_binary(_name + "_", getattr(Tensor, _name)))
