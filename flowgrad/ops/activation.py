"""Activations and softmax: relu (the seed's example) and its relatives, the elu family,
softplus, the hard* and *shrink functions, prelu, glu, logsigmoid, softmax/softmin; gelu
has its own file (gelu.py) and is re-exported here.

Smooth activations with a cheap composition (softsign, tanhshrink) are composed from
primitives and need no rule; ones that must stay finite, that branch, or whose composed rule
would turn an inf upstream gradient into nan (elu, softplus, logsigmoid, hardtanh, hardswish,
silu, mish, softmax) are fused ops with their own rule.

relu follows the seed to the letter: the forward saves only its output y, and the rule calls
the `relu_grad` op, whose kernel is `dx = dy if y > 0 else 0`.

>>> import flowgrad as flow
>>> x = flow.tensor([-1.0, 2.0], requires_grad=True)
>>> flow.relu(x).backward(flow.ones(2)); x.grad
tensor([0., 1.])
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes as _dt
from ..argument_errors import number_arg
from ..autograd.inplace import run_inplace
from ..device import constant, undispatched
from ..errors import check_kernel_dtype as _check_kernel_dtype
from ..errors import check_same_dtype, checked_number, fill_scalar
from ..random import numpy_generator, resolve
from ..tensor import Tensor, _wrap_dim, tensor_method
from .activation_rules import _elu_grad, _shrink, _threshold_kept, check_silu_input
from .elementwise import sigmoid, tanh, where
from .gelu import _gelu, _gelu_grad, gelu  # noqa: F401 (re-exported: its own file)
from .halfprec import HALF, in_float32, opmath, rounded_to, upcast
from .registry import op
from .rules import _SMALL, masked_product, tied, unary
from .softmax import (  # noqa: F401 - re-exported: the softmax family has its own file
    _log_softmax,
    _row_sums,
    _safe_softmax,
    _safe_softmax_op,
    _softmax,
    log_softmax,
    row_max,
    softmax,
    softmin,
)


def _no_bool(input, name):
    if input._data.dtype.kind == "b":
        raise RuntimeError(f"Boolean inputs not supported for {name} (input of shape "
                           f"{tuple(input.shape)}); convert it with .float() first")

__all__ = [
    "relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish", "softplus",
    "softsign", "hardtanh", "hardsigmoid", "hardswish", "hardshrink", "softshrink", "tanhshrink",
    "threshold", "prelu", "glu", "logsigmoid", "softmax", "log_softmax", "softmin",
    "relu_", "elu_", "selu_", "celu_", "leaky_relu_", "hardtanh_", "threshold_",
    "rrelu", "rrelu_", "_safe_softmax",
]


# ---- relu, as in the seed --------------------------------------------------------------------
@op("relu", jvp="diagonal", save="outputs")
def _relu(xp, x):
    return xp.maximum(x, constant(xp, 0, x.dtype))  # (a 0-d zero: 0.2 us less than a Python 0)


@_relu.grad
def relu_backward(ctx, dy):
    return _relu_grad(ctx.out, dy)


@op("relu_grad", jvp="diagonal", save="inputs")
def _relu_grad(xp, y, dy):
    # a multiply by the mask (~10x faster than xp.where in NumPy), redone with where only
    # when dy is inf/nan at some y <= 0: torch gives 0 there, not 0 * inf = nan. A nan y
    # passes dy, as torch's (y <= 0 ? 0 : dy). Small arrays: one where (masked_product's)
    blocked = y <= constant(xp, 0, y.dtype)  # (a Python 0: three times as long on 100 values)
    if blocked.size <= _SMALL and dy.size <= _SMALL:
        return undispatched(xp, "where")(blocked, constant(xp, 0, dy.dtype), dy)
    return masked_product(xp, ~blocked, dy)


@_relu_grad.grad
def relu_grad_backward(ctx, ddx):
    y, _ = ctx.inputs
    return None, _relu_grad(y, ddx)  # piecewise linear: no gradient through the mask


def relu(input, inplace=False):
    """max(x, 0).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.relu(flow.tensor([-1.0, 0.0, 2.0]))
    tensor([0., 0., 2.])
    """
    if input._data.dtype.kind == "b":
        _no_bool(input, "relu")
    if inplace:
        return run_inplace("relu_", _relu, input)
    return _relu(input)


@op("leaky_relu", jvp="diagonal", save="inputs")
@in_float32  # half precision: x * slope in float32 (the slope unrounded), as torch
def _leaky_relu(xp, x, *, slope):
    return xp.where(x > 0, x, x * slope).astype(x.dtype, copy=False)


@_leaky_relu.grad
def leaky_relu_backward(ctx, dy):
    x = ctx.inputs[0]
    # torch's x > 0 ? grad : grad * slope (half precision: the product in float32, the slope
    # unrounded; a slope mask (x > 0) * (1 - slope) + slope rounded both, even where x > 0)
    return tied(where(x > 0, dy, dy * ctx.slope), x)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x for x > 0, negative_slope * x otherwise.

    >>> import flowgrad as flow
    >>> flow.nn.functional.leaky_relu(flow.tensor([-2.0, 3.0]), 0.1)
    tensor([-0.2000,  3.0000])
    """
    _check_kernel_dtype(input, "leaky_relu_cpu")
    negative_slope = number_arg(negative_slope, "leaky_relu", "negative_slope", 2)
    if isinstance(negative_slope, complex):  # torch casts it to input's dtype
        negative_slope = fill_scalar("leaky_relu", negative_slope, input._data.dtype)
    else:  # read in the float torch computes in: 1e300 does not fit a float32 kernel
        negative_slope = checked_number("leaky_relu", negative_slope,
                                        opmath(input._data.dtype), "negative_slope")
    if inplace:
        return run_inplace("leaky_relu_", leaky_relu, input, negative_slope)
    return _leaky_relu(input, slope=negative_slope)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False, *,
          generator=None):
    """Randomized leaky ReLU: in training each x <= 0 is scaled by its own slope drawn
    uniformly from [lower, upper] (from `generator`, or flowgrad.random's default one); in
    eval the slope is (lower + upper) / 2, as torch. torch.rrelu's fifth positional argument
    is the generator (F.rrelu's is inplace): a generator passed there is taken as one.

    >>> import flowgrad as flow
    >>> flow.nn.functional.rrelu(flow.tensor([-2.0, 3.0]), 0.1, 0.3)
    tensor([-0.4000,  3.0000])
    """
    if inplace is not None and not isinstance(inplace, (bool, int)):
        generator, inplace = inplace, False  # torch.rrelu(input, lower, upper, training, gen)
    if lower > upper:
        raise RuntimeError(f"rrelu: lower bound should be less than or equal to the upper "
                           f"bound (got lower={lower}, upper={upper})")
    _check_kernel_dtype(input, "leaky_relu_cpu")  # (torch's rrelu runs leaky_relu's kernel)
    lower = checked_number("rrelu", lower, opmath(input._data.dtype), "lower")
    upper = checked_number("rrelu", upper, opmath(input._data.dtype), "upper")
    if not training:  # (torch's result is C-ordered: its output is allocated so)
        out = leaky_relu(input, (lower + upper) / 2, inplace)
        return out if inplace else out.contiguous()

    gen = resolve(generator)
    if inplace:
        return run_inplace("rrelu_", lambda x: _rrelu(x, lower=lower, upper=upper,
                                                      generator=gen), input)
    return _rrelu(input, lower=lower, upper=upper, generator=gen)


@op("rrelu", jvp="diagonal", n_out=1)
def _rrelu(xp, x, *, lower, upper, generator):
    """x * slope, slope 1 where x > 0 and drawn from U[lower, upper] (from `generator`, a
    flowgrad Generator) elsewhere; the slopes are an aux output for the rule."""
    slope = xp.asarray(numpy_generator(generator).uniform(lower, upper, x.shape))  # host draw
    noise = ((x > 0) + (x <= 0) * slope).astype(x.dtype, copy=False)
    return x * noise, noise


@_rrelu.grad
def rrelu_backward(ctx, dy):
    return dy * ctx.aux[0]  # the drawn slopes are constants: the gradient is the slope


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """In-place rrelu."""
    return rrelu(input, lower, upper, training, inplace=True, generator=generator)


# ---- hardtanh and relu6: clamp whose gradient is 0 on the boundary, as torch ---------------
@op("hardtanh", jvp="diagonal", save="inputs")
def _hardtanh(xp, x, *, lo, hi):
    return xp.clip(x, lo, hi).astype(x.dtype, copy=False)


@_hardtanh.grad
def hardtanh_backward(ctx, dy):
    lo, hi = ctx.lo, ctx.hi
    x = ctx.inputs[0]
    return tied(where((x > lo) & (x < hi), dy, 0.0), x)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """Clamp to [min_val, max_val]."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val cannot be greater than max_val (got min_val="
                         f"{min_val}, max_val={max_val})")
    return _clamped(input, min_val, max_val, inplace)


def _clamped(input, min_val, max_val, inplace):
    """hardtanh after F.hardtanh's own check (torch's hardtanh_ has none: crossed limits give
    max_val everywhere, with a zero gradient)."""
    limits = []
    for position, value in enumerate((min_val, max_val), 2):
        if isinstance(value, Tensor) and value._data.ndim == 0:  # (a number, as torch's)
            value = value.item()
        elif isinstance(value, np.bool_):  # (not a numbers.Number; torch reads it as a float)
            value = _dt.scalar_value(value)
        if not isinstance(value, numbers.Number):
            arg = "min_val" if position == 2 else "max_val"
            raise TypeError(f"hardtanh(): argument '{arg}' (position {position}) must be Number, "
                            f"not {type(value).__name__}")
        limits.append(value)
    min_val, max_val = limits
    _no_bool(input, "hardtanh")
    if input._data.dtype.kind == "u" and (min_val < 0 or max_val < 0):
        raise RuntimeError(f"cannot do hardtanh on an unsigned type with negative limits (input "
                           f"{input.dtype}, limits {min_val}, {max_val})")
    # torch casts the limits to the input's dtype (nan into an integer, or 70000 into half,
    # raises)
    min_val = checked_number("hardtanh", min_val, input._data.dtype, "min_val")
    max_val = checked_number("hardtanh", max_val, input._data.dtype, "max_val")
    if inplace:
        return run_inplace("hardtanh_", lambda x: _hardtanh(x, lo=min_val, hi=max_val), input)
    return _hardtanh(input, lo=min_val, hi=max_val)


def relu6(input, inplace=False):
    """min(max(x, 0), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


# torch's hardsigmoid_backward multiplies by the float literal 1.0f / 6.0f in every dtype: in
# float64 its gradient is 0.1666666716337204, not 1 / 6
_ONE_SIXTH_F32 = float(np.float32(1.0 / 6.0))


@op("hardsigmoid", jvp="diagonal", save="inputs")
def _hardsigmoid(xp, x):
    return xp.clip(x + 3, 0, 6) / 6  # divided, as torch's kernel (not times 1 / 6: 1 ulp off)


@_hardsigmoid.grad
def hardsigmoid_backward(ctx, dy):
    x = ctx.inputs[0]
    return where((x > -3) & (x < 3), dy * _ONE_SIXTH_F32, 0.0)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6: a piecewise-linear sigmoid."""
    _check_kernel_dtype(input, "hardsigmoid_cpu")
    if inplace:
        return run_inplace("hardsigmoid_", hardsigmoid, input)
    if input._data.dtype in HALF:  # in float32, rounded once, as torch (x + 3 would round)
        return hardsigmoid(input.float()).to(input.dtype)
    return _hardsigmoid(input)


@op("hardswish", jvp="diagonal", save="inputs")
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _hardswish(xp, x):
    return (x * xp.clip(x + 3, 0, 6) / 6).astype(x.dtype, copy=False)


@_hardswish.grad
def hardswish_backward(ctx, dy):
    # torch's piecewise rule: exactly 0 below -3 (even for an inf dy), dy above 3
    x = ctx.inputs[0]
    if x.dtype.np in HALF:  # torch's kernel: in float32, rounded once
        return hardswish_backward_of(x.float(), dy.float()).to(dy.dtype)
    return hardswish_backward_of(x, dy)


def hardswish_backward_of(x, dy):
    mid = where(x < 3, dy * (x * (1.0 / 3.0) + 0.5), dy)
    return where(~(x <= -3), mid, 0.0)  # nan x: dy, as torch


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6."""
    _check_kernel_dtype(input, "hardswish_cpu")
    if inplace:
        return run_inplace("hardswish_", hardswish, input)
    return _hardswish(input)


# ---- elu, selu, celu: one fused op -----------------------------------------------------------
@op("elu", jvp="diagonal", save="inputs")
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _elu(xp, x, *, alpha, scale, input_scale, grad_scale, celu=False):  # (celu: the node's name)
    # expm1 on min(x, 0) only: the positive side never overflows
    neg = xp.expm1(xp.minimum(x, 0) * input_scale) * alpha
    return (xp.where(x > 0, x, neg) * scale).astype(x.dtype, copy=False)


@_elu.grad
def elu_backward(ctx, dy):  # one fused kernel, torch's elu_backward (activation_rules.py)
    return _elu_grad(ctx.inputs[0], dy, alpha=ctx.alpha, scale=ctx.scale,
                     input_scale=ctx.grad_scale)


def _elu_call(name, input, inplace, **attrs):
    _check_kernel_dtype(input, "elu_cpu")
    for arg in ("alpha", "scale", "input_scale"):  # read in the float torch computes in
        attrs[arg] = float(checked_number(name, attrs[arg], opmath(input._data.dtype), arg))
    attrs.setdefault("grad_scale", attrs["input_scale"])  # (celu's: 1 / float32(alpha))
    if inplace:
        return run_inplace(name + "_", lambda x: _elu(x, **attrs), input)
    return _elu(input, **attrs)


def elu(input, alpha=1.0, inplace=False):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    return _elu_call("elu", input, inplace, alpha=alpha, scale=1.0, input_scale=1.0)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalising constants."""
    return _elu_call("selu", input, inplace, alpha=_SELU_ALPHA, scale=_SELU_SCALE,
                     input_scale=1.0)


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise RuntimeError("celu: ZeroDivisionError: alpha must not be 0 (it divides x)")
    return _elu_call("celu", input, inplace, alpha=alpha, scale=1.0, input_scale=1.0
                     / alpha, grad_scale=1.0 / float(np.float32(alpha)), celu=True)  # (torch's)


def relu_(input):
    """relu, in place."""
    return relu(input, inplace=True)


def elu_(input, alpha=1.0, scale=1.0, input_scale=1.0):
    """elu, in place; scale and input_scale as torch's elu_: scale * elu(input_scale * x)
    with alpha applied to the negative side."""
    return _elu_call("elu", input, True, alpha=alpha, scale=scale, input_scale=input_scale)


def selu_(input):
    """selu, in place."""
    return selu(input, True)


def celu_(input, alpha=1.0):
    """celu, in place."""
    return celu(input, alpha, True)


def leaky_relu_(input, negative_slope=0.01):
    """leaky_relu, in place."""
    return leaky_relu(input, negative_slope, True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """hardtanh, in place."""
    return _clamped(input, min_val, max_val, True)


# ---- softplus and silu -------------------------------------------------------------------
@op("softplus", jvp="diagonal", save="inputs")
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _softplus(xp, x, *, beta, threshold):
    bx = x * beta
    # logaddexp(0, bx) = log(1 + exp(bx)) without overflow for large bx
    return xp.where(bx > threshold, x, xp.logaddexp(0, bx) / beta).astype(x.dtype, copy=False)


@_softplus.grad
def softplus_backward(ctx, dy):
    # half precision in float32, rounded once, as torch's (a rounded x * beta moved the slope)
    low, (x, dy) = upcast(ctx.inputs[0], dy)
    bx = x * ctx.beta
    # at bx == threshold the slope is sigmoid(bx), but its own derivative is torch's 0 (its
    # double backward takes the linear side there): that entry's bx enters as a constant
    at = bx == ctx.threshold
    g = where(bx > ctx.threshold, dy, dy * where(at, bx.detach(), bx).sigmoid())
    return g if low is None else g.to(low)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above `threshold`; finite for any x.

    >>> import flowgrad as flow
    >>> flow.nn.functional.softplus(flow.tensor([-1.0, 0.0, 30.0]))
    tensor([ 0.3133,  0.6931, 30.0000])
    """
    _check_kernel_dtype(input, "softplus_cpu")
    checked_number("softplus", beta, opmath(input._data.dtype), "beta")
    checked_number("softplus", threshold, opmath(input._data.dtype), "threshold")
    return _softplus(input, beta=beta, threshold=threshold)


def _as_float(xp, x):
    """x in a dtype NumPy's ufuncs compute well (bfloat16 in float32)."""
    return x.astype(xp.float32) if x.dtype.kind == "V" else x


def _sigmoid_of(xp, x):
    """1 / (1 + exp(-x)), as torch's silu/mish kernels (exp(-x) may overflow to inf: 0)."""
    with xp.errstate(over="ignore"):  # out=: an array for a 0-d x too (NumPy gives a scalar)
        e = xp.exp(-x, out=xp.empty_like(x))
    e += 1
    return xp.reciprocal(e, out=e)


# silu and mish: one op each with a one-pass rule (torch's formulas), so an inf upstream
# gradient gives +-inf, not the nan of 0 * inf that the composed rules gave
@op("silu", jvp="diagonal", save="inputs", complex=True,
    layout="elementwise")  # (complex: forward only, as torch)
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _silu(xp, x):
    s = _sigmoid_of(xp, _as_float(xp, x))
    return (x * s).astype(x.dtype, copy=False), s.astype(x.dtype, copy=False)  # s: aux


@_silu.grad
def silu_backward(ctx, dy):
    x, s = ctx.inputs[0], ctx.aux[0]
    if x.dtype.np in HALF:  # torch's sigmoid in float32: float16's s (2.9e-6 at -12.7) is
        s = sigmoid(x.float())  # subnormal, 2% off, and so was the gradient
    return _silu_grad(x, s, dy)


@op("silu_grad", jvp="diagonal", save="inputs")
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _silu_grad(xp, x, s, dy):
    # torch's silu_backward: dy * s * (1 + x * (1 - s)), s = sigmoid(x)
    r = xp.subtract(1, s, out=xp.empty_like(s))  # an array for a 0-d s too, for out=r
    r *= x
    r += 1
    r *= s
    if r.dtype == dy.dtype and dy.shape == r.shape:  # (under vmap dy alone may be batched)
        return xp.multiply(dy, r, out=r)
    return (dy * r).astype(dy.dtype, copy=False)


@_silu_grad.grad
def silu_grad_backward(ctx, ddx):
    x, s, dy = ctx.inputs
    need = ctx.needs_input_grad
    dx = None
    if need[0]:  # silu''(x) = s (1 - s) (2 + x (1 - 2 s)), s a function of x again
        sx = sigmoid(x)
        dx = ddx * dy * (sx * (1 - sx) * (x * (1 - sx * 2) + 2))
    return dx, None, (_silu_grad(x, s, ddx) if need[2] else None)


def silu(input, inplace=False):
    """x * sigmoid(x).

    >>> import flowgrad as flow
    >>> flow.nn.functional.silu(flow.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.2689,  0.0000,  0.7311])
    """
    check_silu_input(input)
    if inplace:
        return run_inplace("silu_", silu, input)
    return _silu(input)


@op("mish", jvp="diagonal", save="inputs", layout="elementwise")
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _mish(xp, x):
    xf = _as_float(xp, x)
    with xp.errstate(over="ignore"):  # out=: an array for a 0-d x too (NumPy gives a scalar)
        t = xp.exp(xf, out=xp.empty_like(xf))  # inf past ~88 (float32): log1p, tanh give inf, 1
    xp.log1p(t, out=t)
    xp.tanh(t, out=t)
    return (xf * t).astype(x.dtype, copy=False), t.astype(x.dtype, copy=False)  # t: aux


@_mish.grad
def mish_backward(ctx, dy):
    x, t = ctx.inputs[0], ctx.aux[0]
    if x.dtype.np in HALF:  # torch's t in float32, as silu's sigmoid: float16's 1 - t^2
        t = tanh(softplus(x.float()))  # is 0 from x = 4 on (a float32 t's is not)
    return _mish_grad(x, t, dy)


@op("mish_grad", jvp="diagonal", save="inputs")
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _mish_grad(xp, x, t, dy):
    # torch's mish_backward: dy * (t + x * s * (1 - t^2)), t = tanh(softplus(x))
    xf, tf = _as_float(xp, x), _as_float(xp, t)
    r = xp.multiply(tf, tf, out=xp.empty_like(tf))  # an array for a 0-d t too, for out=r
    xp.subtract(1, r, out=r)
    r *= _sigmoid_of(xp, xf)
    r *= xf
    r += tf
    return (dy * r).astype(dy.dtype, copy=False)


@_mish_grad.grad
def mish_grad_backward(ctx, ddx):
    x, t, dy = ctx.inputs
    need = ctx.needs_input_grad
    dx = None
    if need[0]:  # mish''(x) = s (1 - t^2) (2 + x (1 - s - 2 t s)), t and s functions of x
        s, tx = sigmoid(x), tanh(softplus(x))
        dx = ddx * dy * (s * (1 - tx * tx) * (x * (1 - s - tx * s * 2) + 2))
    return dx, None, (_mish_grad(x, t, ddx) if need[2] else None)


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    _check_kernel_dtype(input, "mish_cpu")
    if inplace:
        return run_inplace("mish_", mish, input)
    return _mish(input)


def softsign(input):
    """x / (1 + |x|)."""
    _check_kernel_dtype(input, "abs_cpu", "fVciu")
    return input / (input.abs() + 1.0)


def tanhshrink(input):
    """x - tanh(x)."""
    return input - tanh(input)


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0."""
    _check_kernel_dtype(input, "hardshrink_cpu")
    checked_number("hardshrink", lambd, input._data.dtype, "lambd")  # (torch casts it)
    if input._data.dtype in HALF:  # torch's kernel compares in the input's dtype: lambd
        lambd = rounded_to(input._data, lambd)  # rounded there (0.3 is float16 0.30005)
    return _shrink(input, lambd=lambd, soft=False)  # (nan stays nan; its gradient is 0)


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    _check_kernel_dtype(input, "softshrink_check")  # (first: an integer input, any lambd)
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambda must be greater or equal to 0, but found to be "
                           f"{lambd}.")
    high = float(_dt.finfo(input.dtype).max)
    if lambd > high:
        raise RuntimeError(f"softshrink: lambda must be in range [0, {high:g}] for input dtype "
                           f"{input.dtype.name}, but found {lambd}")
    # one fused op: the gradient is dy only where x < -lambd or x > lambd (0 at nan, as torch)
    return _shrink(input, lambd=lambd, soft=True)


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value."""
    _check_kernel_dtype(input, "threshold_cpu", "fViu")
    threshold = number_arg(threshold, "threshold", "threshold", 2)
    value = number_arg(value, "threshold", "value", 3)
    if inplace:
        return run_inplace("threshold_", lambda x: _threshold(x, threshold, value), input)
    return _threshold(input, threshold, value)


_thresholded = threshold  # (threshold_'s parameter of that name hides the function)


def _threshold(input, th, value):
    if isinstance(value, complex):
        value = fill_scalar("threshold", value, input._data.dtype)
    dt = input._data.dtype  # torch reads the threshold in the float it computes in (or the
    # integer dtype: nan raises) and casts value to the input's dtype (70000 into half raises)
    checked_number("threshold", th, dt if dt.kind in "iu" else opmath(dt), "threshold")
    if dt.kind in "iu" and isinstance(th, float):  # (torch's cast: -1.5 is -1)
        th = math.trunc(th)
    checked_number("threshold", value, dt, "value")
    if dt.kind in "iu" and not isinstance(value, Tensor):
        value = input.new_full((), value)  # torch casts value to the input's integer dtype
    if dt.kind in "fV" and isinstance(value, (int, float)) and isinstance(th, (int, float)):
        return _threshold_kept(input, th=float(th), value=float(value))
    return where(~(input <= th), input, value)  # nan stays nan, as torch


def threshold_(input, threshold, value):
    """threshold, in place."""
    return _thresholded(input, threshold, value, True)


@tensor_method()
def prelu(input, weight):
    """max(0, x) + weight * min(0, x), weight per channel (dim 1) or a single one."""
    check_same_dtype("prelu", input, weight=weight)
    _check_kernel_dtype(input, "prelu_cpu", "fVc")  # (torch's kernel: no integer dtypes)
    if weight._data.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight._data.ndim} (shape {tuple(weight._data.shape)})")
    channels = input._data.shape[1] if input._data.ndim >= 2 else 1
    if weight._data.size != 1 and weight._data.size != channels:
        raise RuntimeError(
            f"prelu: Mismatch of parameter numbers and input channel size. Found parameter "
            f"numbers = {weight._data.size} and channel size = {channels}; pass a weight of "
            f"1 or {channels} elements")
    if weight._data.size == 1:
        w = weight.reshape(())
    else:
        w = weight.reshape((channels,) + (1,) * (input._data.ndim - 2))
    return _prelu(input, w)


# an op of its own for torch's two conventions at x == 0: its reverse rule gives w (x > 0
# passes dy), its forward rule (jvp_rules) the tangent itself (x >= 0 passes it)
@op("prelu", save="inputs")
@in_float32
def _prelu(xp, x, w):
    return xp.where(x > 0, x, x * w).astype(x.dtype, copy=False)


@_prelu.grad
def prelu_backward(ctx, dy):
    x, w = ctx.inputs
    need = ctx.needs_input_grad
    positive = x > 0
    dx = where(positive, dy, dy * w) if need[0] else None
    dw = where(positive, dy * 0, dy * x) if need[1] else None
    return dx, dw


def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the two halves of input along dim."""
    if input._data.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    _check_kernel_dtype(input, "glu_cpu")
    d = _wrap_dim(dim, input._data.ndim, "glu")
    n = input._data.shape[d]
    if n % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {d} is size {n}")
    if input._data.dtype in HALF:  # in float32, rounded once, as torch's kernel (in half a
        # tiny sigmoid would round to 0 first)
        return glu(input.float(), d).to(input.dtype)
    return input.narrow(d, 0, n // 2) * sigmoid(input.narrow(d, n // 2, n // 2))


# log(1 / (1 + exp(-x))), no overflow
_logsigmoid = unary("logsigmoid", lambda xp, x: -xp.logaddexp(xp.zeros((), x.dtype), -x),
                    d_of_x=lambda x: sigmoid(-x), layout="contiguous")  # (torch's is C-ordered)


def logsigmoid(input):
    """log(sigmoid(x)), finite for any x."""
    _check_kernel_dtype(input, "log_sigmoid_cpu")
    return _logsigmoid(input)


tensor_method("relu_")(relu_)
tensor_method("hardshrink")(hardshrink)
