"""Fused gradient kernels of activation.py that follow torch's kernels at special values:
the elu family's `elu_grad` (torch's elu_backward, and its elu_double_backward as the rule)
and the hard/soft shrink op whose gradient passes only where x < -lambd or x > lambd (so
0 at a nan x, as torch's vectorized kernel and its forward-mode formula).

>>> import flowgrad as flow
>>> x = flow.tensor([float("nan"), 2.0], requires_grad=True)
>>> flow.nn.functional.hardshrink(x).backward(flow.ones(2)); x.grad
tensor([0., 1.])
"""
from __future__ import annotations

from ..autograd import grad_mode
from ..device import constant
from ..errors import check_kernel_dtype
from .elementwise import where
from .halfprec import in_float32
from .registry import op
from .rules import tied


@op("elu_grad", jvp="diagonal", save="inputs")
def _elu_grad(xp, x, dy, *, alpha, scale, input_scale):
    # torch's elu_backward (is_result=False): dy * scale for x > 0, else
    # dy * input_scale * alpha * scale * exp(x * input_scale); a nan x gives nan, as torch's
    # vectorized kernel (min(x, 0): no overflow on the branch not taken)
    neg = dy * input_scale * (alpha * scale) * xp.exp(xp.minimum(x, 0) * input_scale)
    return xp.where(x > 0, dy * scale, neg).astype(dy.dtype, copy=False)


@_elu_grad.grad
def elu_grad_backward(ctx, ddx):
    x, dy = ctx.inputs
    attrs = {"alpha": ctx.alpha, "scale": ctx.scale, "input_scale": ctx.input_scale}
    need = ctx.needs_input_grad
    # torch's elu_double_backward: elu_backward(ddx * dy * input_scale) * (x < 0), the mask
    # multiplied as torch's (0 at x == 0 and x == +inf, nan at a nan x)
    dx = _elu_grad(x, ddx * dy * ctx.input_scale, **attrs) * (x < 0) if need[0] else None
    return dx, (_elu_grad(x, ddx, **attrs) if need[1] else None)


@op("shrink", jvp="diagonal", save="inputs")
@in_float32  # half precision: x - lambd in float32 (lambd unrounded), as torch
def _shrink(xp, x, *, lambd, soft):
    inner = (x >= -lambd) & (x <= lambd)  # (a nan x is outside: its value stays nan)
    out = xp.where(x > 0, x - lambd, x + lambd) if soft else x
    return xp.where(inner, constant(xp, 0, x.dtype), out).astype(x.dtype, copy=False)


@_shrink.grad
def shrink_backward(ctx, dy):
    x = ctx.inputs[0]  # torch's hardshrink/softshrink_backward: dy where x < -l or x > l
    return tied(where((x > ctx.lambd) | (x < -ctx.lambd), dy, 0.0), x)


# F.threshold of a floating input: torch's node (ThresholdBackward0) saves the input, so a write
# to it after the op fails the backward (a where of a comparison saves the mask alone)
@op("threshold", jvp="diagonal", save="inputs")
@in_float32  # half precision: compared in float32 (the threshold unrounded), as torch
def _threshold_kept(xp, x, *, th, value):
    return xp.where(x <= th, constant(xp, value, x.dtype), x)  # (a nan x stays)


@_threshold_kept.grad
def threshold_backward(ctx, dy):
    x = ctx.inputs[0]  # torch's threshold_backward: dy where x > th (and at a nan x), else 0,
    wide = x.float() if x.element_size() == 2 else x  # compared in float32 for half precision
    return tied(where(wide <= ctx.th, 0.0, dy), x)


def check_silu_input(input):
    """Refuse what torch's silu refuses: ints and bools (no kernel), and a complex input that
    would record a gradient (torch computes complex silu forward only: its derivative formula
    is not written for complex, so autograd raises)."""
    check_kernel_dtype(input, "silu_cpu", "fVc")
    if input.is_complex() and input.requires_grad and grad_mode.is_grad_enabled():
        raise RuntimeError("silu does not support automatic differentiation for outputs with "
                           "complex dtype.")
