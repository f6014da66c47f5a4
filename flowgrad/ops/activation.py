"""Activations and softmax: relu (the seed's example), gelu, softplus, silu, leaky_relu,
softmax, log_softmax.

relu follows the seed to the letter: the forward saves only its output y, and the rule calls
the `relu_grad` op, whose kernel is `dx = dy if y > 0 else 0`.

>>> import flowgrad as flow
>>> x = flow.tensor([-1.0, 2.0], requires_grad=True)
>>> flow.relu(x).backward(flow.ones(2)); x.grad
tensor([0., 1.])
"""
from __future__ import annotations

import math

from ..tensor import Tensor, _wrap_dim, tensor_method
from .registry import op

__all__ = ["relu", "gelu", "softplus", "silu", "leaky_relu", "softmax", "log_softmax"]


# ---- relu, as in the seed --------------------------------------------------------------------
@op("relu", save="outputs")
def _relu(xp, x):
    return xp.maximum(x, 0)


@_relu.grad
def _(ctx, dy):
    return _relu_grad(ctx.out, dy)


@op("relu_grad", save="inputs")
def _relu_grad(xp, y, dy):
    return xp.where(y > 0, dy, 0).astype(dy.dtype, copy=False)


@_relu_grad.grad
def _(ctx, ddx):
    y, _ = ctx.inputs
    return None, _relu_grad(y, ddx)  # piecewise linear: no gradient through the mask


@tensor_method()
def relu(input, inplace=False):
    """max(x, 0)."""
    return _relu(input)


@op("leaky_relu", save="inputs")
def _leaky_relu(xp, x, *, slope):
    return xp.where(x > 0, x, x * slope).astype(x.dtype, copy=False)


@_leaky_relu.grad
def _(ctx, dy):
    x = ctx.inputs[0]
    w = Tensor._wrap((x._data > 0).astype(dy._data.dtype) * (1 - ctx.slope) + ctx.slope)
    return dy * w


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x for x > 0, negative_slope * x otherwise."""
    return _leaky_relu(input, slope=negative_slope)


# ---- gelu --------------------------------------------------------------------------------------
@op("gelu", save="inputs")
def _gelu(xp, x, *, approximate):
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
        return 0.5 * x * (1 + xp.tanh(inner))
    from .special import erf

    return 0.5 * x * (1 + erf(xp, x / math.sqrt(2)))


@_gelu.grad
def _(ctx, dy):
    x = ctx.inputs[0]
    if ctx.approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        t = (k * (x + x * x * x * 0.044715)).tanh()
        dinner = k * (1 + x * x * (3 * 0.044715))
        return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * dinner)
    cdf = _gelu_cdf(x)
    pdf = (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))
    return dy * (cdf + x * pdf)


@op("normal_cdf", save="inputs")
def _gelu_cdf(xp, x):
    from .special import erf

    return 0.5 * (1 + erf(xp, x / math.sqrt(2)))


@_gelu_cdf.grad
def _(ctx, dy):
    x = ctx.inputs[0]
    return dy * (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))


@tensor_method()
def gelu(input, approximate="none"):
    """x * Phi(x) (exact, with erf) or its tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _gelu(input, approximate=approximate)


# ---- softplus and silu -------------------------------------------------------------------
@op("softplus", save="inputs")
def _softplus(xp, x, *, beta, threshold):
    bx = x * beta
    # logaddexp(0, bx) = log(1 + exp(bx)) without overflow for large bx
    return xp.where(bx > threshold, x, xp.logaddexp(0, bx) / beta).astype(x.dtype, copy=False)


@_softplus.grad
def _(ctx, dy):
    x = ctx.inputs[0]
    bx = x * ctx.beta
    keep = Tensor._wrap((bx._data > ctx.threshold))
    from .elementwise import where

    return where(keep, dy, dy * bx.sigmoid())


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above `threshold`."""
    return _softplus(input, beta=beta, threshold=threshold)


def silu(input, inplace=False):
    """x * sigmoid(x)."""
    return input * input.sigmoid()


# ---- softmax family (fused: one kernel, one rule) -----------------------------------------
@op("softmax", save="outputs")
def _softmax(xp, x, *, dim):
    e = xp.exp(x - x.max(axis=dim, keepdims=True))
    e /= e.sum(axis=dim, keepdims=True)
    return e


@_softmax.grad
def _(ctx, dy):
    y = ctx.out
    return y * (dy - (dy * y).sum(ctx.dim, keepdim=True))


@op("log_softmax", save="outputs")
def _log_softmax(xp, x, *, dim):
    shifted = x - x.max(axis=dim, keepdims=True)
    shifted -= xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))
    return shifted


@_log_softmax.grad
def _(ctx, dy):
    return dy - ctx.out.exp() * dy.sum(ctx.dim, keepdim=True)


def _softmax_dim(input, dim, dtype, name):
    if dtype is not None:
        input = input.to(dtype)
    if input._data.dtype.kind not in "fV":
        input = input.float()
    if dim is None:
        dim = 0 if input._data.ndim in (0, 1, 3) else 1  # torch's legacy implicit choice
    return input, _wrap_dim(dim, input._data.ndim, name)


@tensor_method()
def softmax(input, dim=None, dtype=None):
    """exp(x) / sum(exp(x)) along dim, computed stably."""
    input, d = _softmax_dim(input, dim, dtype, "softmax")
    return _softmax(input, dim=d)


@tensor_method()
def log_softmax(input, dim=None, dtype=None):
    """log(softmax(x)) along dim, stable for large |x|."""
    input, d = _softmax_dim(input, dim, dtype, "log_softmax")
    return _log_softmax(input, dim=d)
