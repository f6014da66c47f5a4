"""Unary math: exp2, expm1, log2/log10/log1p, trigonometric and hyperbolic functions and their
inverses, erf/erfc/erfinv, logit, and rounding (floor, ceil, round, trunc, frac).

Integer and bool inputs promote to the default float dtype, as torch's float-valued ops do;
rounding keeps integer dtypes. Rules whose factor can be inf or nan (log2 at 0, asin at 1,
...) use the masked `_grad_div`, so a `where` branch not taken gets a zero gradient.

>>> import flowgrad as flow
>>> flow.log1p(flow.tensor([0.0, 1e-10]))
tensor([0.0000e+00, 1.0000e-10])
"""
from __future__ import annotations

import math

from ..tensor import Tensor, tensor_method
from . import special
from .elementwise import (
    _float_of,
    _grad_div,
    _inplace_binary,
    _zero_grad,
    clamp,
    exp,
    log,
    sqrt,
)
from .registry import op

__all__ = [
    "exp2", "expm1", "log2", "log10", "log1p", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh",
    "erf", "erfc", "erfinv", "logit", "floor", "ceil", "round", "trunc", "fix", "frac",
]

_LN2, _LN10 = math.log(2.0), math.log(10.0)


# ---- exponentials and logarithms -------------------------------------------------------------
@op("exp2", save="outputs")
def _exp2(xp, x):
    return xp.exp2(x)


@_exp2.grad
def exp2_backward(ctx, dy):
    return dy * ctx.out * _LN2


@op("expm1", save="outputs")
def _expm1(xp, x):
    return xp.expm1(x)


@_expm1.grad
def expm1_backward(ctx, dy):
    return dy * (ctx.out + 1.0)


@op("log2", save="inputs")
def _log2(xp, x):
    return xp.log2(x)


@_log2.grad
def log2_backward(ctx, dy):
    return _grad_div(dy, ctx.inputs[0] * _LN2)


@op("log10", save="inputs")
def _log10(xp, x):
    return xp.log10(x)


@_log10.grad
def log10_backward(ctx, dy):
    return _grad_div(dy, ctx.inputs[0] * _LN10)


@op("log1p", save="inputs")
def _log1p(xp, x):
    return xp.log1p(x)


@_log1p.grad
def log1p_backward(ctx, dy):
    return _grad_div(dy, ctx.inputs[0] + 1.0)


# ---- trigonometric -------------------------------------------------------------------------
@op("tan", save="outputs")
def _tan(xp, x):
    return xp.tan(x)


@_tan.grad
def tan_backward(ctx, dy):
    y = ctx.out
    return dy * (y * y + 1.0)


@op("asin", save="inputs")
def _asin(xp, x):
    return xp.arcsin(x)


@_asin.grad
def asin_backward(ctx, dy):
    x = ctx.inputs[0]
    return _grad_div(dy, sqrt(1.0 - x * x))


@op("acos", save="inputs")
def _acos(xp, x):
    return xp.arccos(x)


@_acos.grad
def acos_backward(ctx, dy):
    x = ctx.inputs[0]
    return -_grad_div(dy, sqrt(1.0 - x * x))


@op("atan", save="inputs")
def _atan(xp, x):
    return xp.arctan(x)


@_atan.grad
def atan_backward(ctx, dy):
    x = ctx.inputs[0]
    return dy / (x * x + 1.0)


# ---- hyperbolic ------------------------------------------------------------------------------
@op("sinh", save="inputs")
def _sinh(xp, x):
    return xp.sinh(x)


@_sinh.grad
def sinh_backward(ctx, dy):
    return dy * cosh(ctx.inputs[0])


@op("cosh", save="inputs")
def _cosh(xp, x):
    return xp.cosh(x)


@_cosh.grad
def cosh_backward(ctx, dy):
    return dy * sinh(ctx.inputs[0])


@op("asinh", save="inputs")
def _asinh(xp, x):
    return xp.arcsinh(x)


@_asinh.grad
def asinh_backward(ctx, dy):
    x = ctx.inputs[0]
    return dy / sqrt(x * x + 1.0)


@op("acosh", save="inputs")
def _acosh(xp, x):
    return xp.arccosh(x)


@_acosh.grad
def acosh_backward(ctx, dy):
    x = ctx.inputs[0]
    return _grad_div(dy, sqrt(x * x - 1.0))


@op("atanh", save="inputs")
def _atanh(xp, x):
    return xp.arctanh(x)


@_atanh.grad
def atanh_backward(ctx, dy):
    x = ctx.inputs[0]
    return _grad_div(dy, 1.0 - x * x)


# ---- error function ------------------------------------------------------------------------
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


@op("erf", save="inputs")
def _erf(xp, x):
    return special.erf(xp, x)


@_erf.grad
def erf_backward(ctx, dy):
    x = ctx.inputs[0]
    return dy * exp(x * x * -1.0) * _TWO_OVER_SQRT_PI


@op("erfc", save="inputs")
def _erfc(xp, x):
    return special.erfc(xp, x)


@_erfc.grad
def erfc_backward(ctx, dy):
    x = ctx.inputs[0]
    return dy * exp(x * x * -1.0) * -_TWO_OVER_SQRT_PI


@op("erfinv", save="outputs")
def _erfinv(xp, x):
    return special.erfinv(xp, x)


@_erfinv.grad
def erfinv_backward(ctx, dy):
    y = ctx.out
    return dy * exp(y * y) * (math.sqrt(math.pi) / 2.0)


# ---- rounding: step functions, zero gradient (as torch) --------------------------------------
def _rounding(name, fn):
    k = op(name)(fn)
    k.grad(lambda ctx, dy: _zero_grad(dy))
    return k


_floor = _rounding("floor", lambda xp, x: xp.floor(x))
_ceil = _rounding("ceil", lambda xp, x: xp.ceil(x))
_trunc = _rounding("trunc", lambda xp, x: xp.trunc(x))
_round = _rounding("round", lambda xp, x, decimals=0: xp.round(x, decimals).astype(
    x.dtype, copy=False))


def _keep_ints(k, input, **attrs):
    if input._data.dtype.kind in "iub":
        return Tensor._wrap(input._data.copy())  # integers are already whole
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
        return _keep_ints(_round, input, decimals=decimals)
    return _keep_ints(_round, input)


def frac(input):
    """input - trunc(input): the fractional part, with the sign of input."""
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
    p = _float_of(input)
    if eps is not None:
        p = clamp(p, eps, 1.0 - eps)
    return log(p) - log1p(-p)


# ---- Tensor methods and in-place variants --------------------------------------------------
for _name in __all__:
    tensor_method(_name)(globals()[_name])
for _name in ("exp2", "expm1", "log2", "log10", "log1p", "tan", "asin", "acos", "atan", "sinh",
              "cosh", "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan", "arcsinh",
              "arccosh", "arctanh", "erf", "erfc", "erfinv", "logit", "floor", "ceil", "round",
              "trunc", "fix", "frac"):
    setattr(Tensor, _name + "_", _inplace_binary(_name + "_", globals()[_name]))
