"""Unary math: exp2, expm1, log2/log10/log1p, trigonometric and hyperbolic functions and their
inverses, erf/erfc/erfinv, logit, and rounding (floor, ceil, round, trunc, frac).

Integer and bool inputs promote to the default float dtype, as torch's float-valued ops do;
rounding keeps integer dtypes. Each op is one `unary` (or `step`) row of ops/rules.py; rows
whose factor can be inf or nan (log2 at 0, asin at 1, ...) are `masked=True`, so a `where`
branch not taken gets a zero gradient.

>>> import flowgrad as flow
>>> flow.log1p(flow.tensor([0.0, 1e-10]))
tensor([0.0000e+00, 1.0000e-10])
"""
from __future__ import annotations

import math

from ..errors import check_kernel_dtype, checked_number
from ..tensor import Tensor, tensor_method
from . import special
from .elementwise import _float_of, _inplace_binary, exp, reciprocal, rsqrt, sqrt, where
from .halfprec import HALF, in_float32
from .registry import op
from .rules import step, unary

__all__ = [
    "exp2", "expm1", "log2", "log10", "log1p", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh",
    "erf", "erfc", "erfinv", "logit", "floor", "ceil", "round", "trunc", "fix", "frac",
]

_LN2, _LN10 = math.log(2.0), math.log(10.0)


# ---- exponentials and logarithms -------------------------------------------------------------
_exp2 = unary("exp2", lambda xp, x: xp.exp2(x), d_of_y=lambda y: y, scale=_LN2, complex=True)


def _expm1_kernel(xp, x):
    """expm1; float32 computed in float64 and rounded once. NumPy's float32 expm1 is an ulp
    off for one value in nine (torch's for one in 500), and the gradient y + 1 keeps that ulp
    of 1: at x = -7.9 (y + 1 = 3.7e-4) it was 1.6e-4 off, torch's 0.7e-4 (special_fuzz seed
    9401684); rounded from float64, the two agree."""
    if x.dtype.char == "f":
        return xp.expm1(x.astype(xp.float64)).astype(xp.float32)
    return xp.expm1(x)


_expm1 = unary("expm1", _expm1_kernel, d_of_y=lambda y: y + 1.0, complex=True)
_log2 = unary("log2", lambda xp, x: xp.log2(x), d_of_x=lambda x: x * _LN2, divide=True,
              masked=True, complex=True)
_log10 = unary("log10", lambda xp, x: xp.log10(x), d_of_x=lambda x: x * _LN10, divide=True,
               masked=True, complex=True)
_log1p = unary("log1p", lambda xp, x: xp.log1p(x), d_of_x=lambda x: x + 1.0, divide=True,
               masked=True, complex=True)

# ---- trigonometric -------------------------------------------------------------------------
_tan = unary("tan", lambda xp, x: xp.tan(x), d_of_y=lambda y: y * y + 1.0, complex=True)
# (the slopes as torch's rules write them, so half precision rounds where torch's does:
# grad * rsqrt(1 - x^2), not grad / sqrt(1 - x^2))
_asin = unary("asin", lambda xp, x: xp.arcsin(x), d_of_x=lambda x: rsqrt(1.0 - x * x),
              masked=True, complex=True)
_acos = unary("acos", lambda xp, x: xp.arccos(x), d_of_x=lambda x: rsqrt(1.0 - x * x),
              masked=True, scale=-1.0, complex=True)
_atan = unary("atan", lambda xp, x: xp.arctan(x), d_of_x=lambda x: x * x + 1.0, divide=True,
              complex=True)

# ---- hyperbolic ------------------------------------------------------------------------------
_sinh = unary("sinh", lambda xp, x: xp.sinh(x), d_of_x=lambda x: cosh(x), complex=True)
_cosh = unary("cosh", lambda xp, x: xp.cosh(x), d_of_x=lambda x: sinh(x), complex=True)
_asinh = unary("asinh", lambda xp, x: xp.arcsinh(x), d_of_x=lambda x: rsqrt(x * x + 1.0),
               complex=True)
# for complex x the principal branch's derivative, 1 / (sqrt(x - 1) sqrt(x + 1)): it differs
# in sign from 1 / sqrt(x^2 - 1) over half the plane; for real x torch's 1 / sqrt(x^2 - 1),
# finite where acosh itself is nan (x < -1)
_acosh = unary("acosh", lambda xp, x: xp.arccosh(x),
               d_of_x=lambda x: reciprocal(sqrt(x - 1.0) * sqrt(x + 1.0)) if x.is_complex()
               else rsqrt(x * x - 1.0), masked=True, complex=True)
_atanh = unary("atanh", lambda xp, x: xp.arctanh(x), d_of_x=lambda x: 1.0 - x * x,
               divide=True, masked=True, complex=True)

# ---- error function ------------------------------------------------------------------------
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
# (torch's order: the constant times exp(-x^2) first, then times grad)
_erf = unary("erf", lambda xp, x: special.erf(xp, x),
             d_of_x=lambda x: exp(x * x * -1.0) * _TWO_OVER_SQRT_PI, layout="elementwise")
_erfc = unary("erfc", lambda xp, x: special.erfc(xp, x),
              d_of_x=lambda x: exp(x * x * -1.0) * -_TWO_OVER_SQRT_PI, layout="elementwise")


def _erfinv_slope(x):
    """exp(erfinv(x)^2), from the input with erfinv recomputed (as torch's rule): a write to
    the output leaves the backward valid."""
    y = _erfinv(x)
    return exp(y * y) * (math.sqrt(math.pi) / 2.0)


_erfinv = unary("erfinv", lambda xp, x: special.erfinv(xp, x), d_of_x=_erfinv_slope,
                layout="elementwise")

# ---- rounding: step functions, zero gradient (as torch) --------------------------------------
_floor = step("floor", lambda xp, x: xp.floor(x))
_ceil = step("ceil", lambda xp, x: xp.ceil(x))
_trunc = step("trunc", lambda xp, x: xp.trunc(x))
# (half precision with decimals: x * 10 ** d, its rint and the division in float32, rounded
# once, as torch's; in half, x * 10 would round first: 2.936 to 2.900 where torch has 2.900)
@in_float32
def _round_kernel(xp, x, *, decimals=0):
    return xp.round(x, decimals).astype(x.dtype, copy=False)


_round = step("round", _round_kernel)


def _keep_ints(k, input, **attrs):
    check_kernel_dtype(input, f"{k.name}_vml_cpu", "fVciu")  # bool: refused, as torch
    if input._data.dtype.kind in "iu":
        return input.clone()  # integers are already whole (an op: a graph traces it)
    return k(input, **attrs)


def floor(input):
    """Round down to a whole number (integer dtypes are returned as they are).

    >>> import flowgrad as flow
    >>> flow.floor(flow.tensor([-1.5, 1.5]))
    tensor([-2.,  1.])
    """
    return _keep_ints(_floor, input)


def ceil(input):
    """Round up to a whole number."""
    return _keep_ints(_ceil, input)


def trunc(input):
    """Round toward zero."""
    return _keep_ints(_trunc, input)


def round(input, *, decimals=0):
    """Round half to even, to `decimals` places.

    >>> import flowgrad as flow
    >>> flow.round(flow.tensor([0.5, 1.5, 2.25]), decimals=0)
    tensor([0., 2., 2.])
    """
    if decimals:
        if isinstance(input, Tensor) and input._data.dtype.kind in "biu":
            raise NotImplementedError(f"round(): decimals={decimals} is not implemented for "
                                      f"integer dtype {input.dtype} (as torch's "
                                      f"\"round_decimals_cpu\"); convert to float first")
        return _keep_ints(_round, input, decimals=decimals)
    return _keep_ints(_round, input)


def frac(input):
    """input - trunc(input): the fractional part, with the sign of input."""
    check_kernel_dtype(input, "frac_cpu")
    return input - trunc(input)


fix = trunc


# ---- float-valued unary functions: int and bool inputs promote ---------------------------
def _floating(k, name, doc):
    def public(input):
        return k(_float_of(input))
    public.__name__ = name
    public.__doc__ = doc
    return public


exp2 = _floating(_exp2, "exp2", "2 ** input.")
expm1 = _floating(_expm1, "expm1", "exp(input) - 1, accurate near 0.")
log2 = _floating(_log2, "log2", "Base-2 logarithm.")
log10 = _floating(_log10, "log10", "Base-10 logarithm.")
log1p = _floating(_log1p, "log1p", "log(1 + input), accurate near 0.")
tan = _floating(_tan, "tan", "Tangent.")
asin = _floating(_asin, "asin", "Inverse sine; nan outside [-1, 1].")
acos = _floating(_acos, "acos", "Inverse cosine; nan outside [-1, 1].")
atan = _floating(_atan, "atan", "Inverse tangent.")
sinh = _floating(_sinh, "sinh", "Hyperbolic sine.")
cosh = _floating(_cosh, "cosh", "Hyperbolic cosine.")
asinh = _floating(_asinh, "asinh", "Inverse hyperbolic sine.")
acosh = _floating(_acosh, "acosh", "Inverse hyperbolic cosine; nan below 1.")
atanh = _floating(_atanh, "atanh", "Inverse hyperbolic tangent; nan outside [-1, 1].")
erf = _floating(_erf, "erf", "The error function.")
erfc = _floating(_erfc, "erfc", "1 - erf(input), accurate for large input.")
erfinv = _floating(_erfinv, "erfinv", "Inverse of erf on (-1, 1).")
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh


def logit(input, eps=None):
    """log(p / (1 - p)); with eps, p is first clamped to [eps, 1 - eps] (zero grad outside).

    >>> import flowgrad as flow
    >>> flow.logit(flow.tensor([0.5]))
    tensor([0.])
    """
    eps = _logit_args(input, eps)
    p = _float_of(input)
    if eps is not None and eps != eps:  # (torch clamps nothing for a nan eps)
        eps = None
    checked_number("logit", eps, p._data.dtype, "eps")  # (torch casts it: 1e300 raises)
    return _logit_bounded(p, None if eps is None else _logit_bounds(p._data.dtype, eps))


def _logit_args(input, eps=None):
    """eps as torch's argument parser reads it (before out='s checks: `parse_args`): a
    number or None, or a 0-d tensor that needs no grad; else its TypeError."""
    if isinstance(eps, Tensor):
        if eps._data.ndim or eps.requires_grad:
            raise TypeError("logit(): argument 'eps' (position 2) must be float, not Tensor")
        return eps.item()
    return eps


logit.parse_args = _logit_args


def _logit_bounds(dtype, eps):
    # torch's lo = eps and hi = 1 - eps in the tensor's dtype (1 - 1e-6 is 1 in float16)
    t = dtype.type
    return float(t(eps)), float(t(1) - t(eps))


def _logit_bounded(p, bounds):
    return _logit(p, bounds=bounds)


@op("logit", jvp="diagonal", save="inputs")
def _logit(xp, p, *, bounds):
    if bounds is not None:  # torch's x < lo ? lo : (x > hi ? hi : x), even when lo > hi
        lo, hi = (xp.asarray(b, p.dtype) for b in bounds)
        p = xp.where(p < lo, lo, xp.where(p > hi, hi, p))
    with xp.errstate(divide="ignore", invalid="ignore"):
        if p.dtype in HALF:  # torch's log(x / (1 - x)), each step rounded to x's dtype
            return xp.log((p / (p.dtype.type(1) - p)).astype(xp.float32)).astype(p.dtype)
        # log(p) - log1p(-p) cancels near 1/2 (float64: 7800 ulps at 0.4999944; float32: 85
        # at 0.49878, 1000 nearer 1/2, where torch's log(p / (1 - p)) loses more); there
        # log1p((2p - 1) / (1 - p)), 2p - 1 exact and 1 - p (nearly) so on [1/4, 3/4]: ~3 ulps
        mid = (p >= 0.25) & (p <= 0.75)
        half = xp.log1p((2 * xp.where(mid, p, 0.5) - 1) / (1 - xp.where(mid, p, 0.5)))
        return xp.where(mid, half, xp.log(p) - xp.log1p(-p)).astype(p.dtype, copy=False)


@_logit.grad
def logit_backward(ctx, dy):
    # torch's (infinitely_differentiable_)logit_backward: dy / (x (1 - x)) on [0, 1] (on
    # [eps, 1 - eps] with eps), else nan (0 with eps): the clamp's flat sides and log's
    # domain are not differentiated through
    x, bounds = ctx.inputs[0], ctx.bounds
    lo, hi, outside = (0.0, 1.0, math.nan) if bounds is None else (*bounds, 0.0)
    return where((x >= lo) & (x <= hi), dy / (x * (1.0 - x)), outside)


# ---- Tensor methods and in-place variants --------------------------------------------------
for _name in __all__:
    tensor_method(_name)(globals()[_name])
for _name in ("exp2", "expm1", "log2", "log10", "log1p", "tan", "asin", "acos", "atan", "sinh",
              "cosh", "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan", "arcsinh",
              "arccosh", "arctanh", "erf", "erfc", "erfinv", "logit", "floor", "ceil", "round",
              "trunc", "fix", "frac"):
    setattr(Tensor, _name + "_", _inplace_binary(_name + "_", globals()[_name]))
