"""torch.fake_quantize_per_tensor_affine and torch.fake_quantize_per_channel_affine:
quantization-aware training's round trip through an integer grid,
x -> (clamp(round(x / scale) + zero_point, quant_min, quant_max) - zero_point) * scale,
whose gradient passes dy where the rounded value lies in [quant_min, quant_max] and is 0
outside (the straight-through estimator); scale and zero_point get none, as in torch.

The arithmetic is torch's CPU kernels': x is multiplied by the float32 1 / scale, rounded
half to even; the per-tensor product (q - zero_point) * scale is taken in float32, the
per-channel one in the input's dtype (in float32 for half inputs), so float64 programs give
torch's numbers to the bit.

>>> import flowgrad as flow
>>> flow.fake_quantize_per_tensor_affine(flow.tensor([0.26, 9.0]), 0.25, 0, -8, 7)
tensor([0.2500, 1.7500])
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..errors import expect_tensor
from ..tensor import Tensor
from .creation import scalar_tensor
from .elementwise import where
from .registry import op
from .rules import tied

__all__ = ["fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine"]


def _grid(xp, x, scale, zero_point, qmin, qmax):
    """(the wide dtype, the clamped grid values q, the unclamped ones' in-range mask)."""
    wide = xp.promote_types(x.dtype, xp.float32)
    inv = (xp.asarray(1, xp.float32) / xp.asarray(scale, xp.float32)).astype(wide)
    zp = xp.asarray(zero_point)
    if zp.dtype.kind in "fV":  # float zero points (bfloat16: V) are added before rounding
        q = xp.rint(x.astype(wide) * inv + zp.astype(wide))
    else:
        q = xp.rint(x.astype(wide) * inv) + zp.astype(wide)
    return wide, xp.clip(q, qmin, qmax), (q >= qmin) & (q <= qmax)


@op("fake_quantize", save="inputs")
def _fake_quantize(xp, x, scale, zero_point, *, qmin, qmax, per_tensor):
    wide, q, _ = _grid(xp, x, scale, zero_point, qmin, qmax)
    scale32 = xp.asarray(scale, xp.float32)
    if per_tensor:  # torch: (int64 q - zero_point) * float scale, a float32 product
        out = (q - zero_point.astype(wide)).astype(xp.float32) * scale32
    else:
        out = (q - zero_point.astype(wide)) * scale32.astype(wide)
    return out.astype(x.dtype, copy=False)


@_fake_quantize.grad
def fake_quantize_backward(ctx, dy):
    x, scale, zero_point = ctx.inputs
    inside = _fake_quantize_mask(x, scale, zero_point, qmin=ctx.qmin, qmax=ctx.qmax)
    return tied(where(inside, dy, 0.0), x), None, None


@op("fake_quantize_mask", differentiable=False)
def _fake_quantize_mask(xp, x, scale, zero_point, *, qmin, qmax):
    return _grid(xp, x, scale, zero_point, qmin, qmax)[2]


def _check_input(input, name):
    expect_tensor(name, input, "input")
    if not input.dtype.is_floating_point or input.dtype.itemsize < 2:
        raise NotImplementedError(f"{name}: input must be a float16, bfloat16, float32 or "
                                  f"float64 tensor, got {input.dtype}")


def _check_range(name, quant_min, quant_max):
    if quant_min > quant_max:
        raise RuntimeError(f"{name}: `quant_min` should be less than or equal to `quant_max` "
                           f"(got {quant_min} > {quant_max})")


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):
    """input rounded to the grid scale * (k - zero_point), k in [quant_min, quant_max];
    the gradient passes where the rounded k is in range. scale and zero_point are numbers
    or one-element tensors."""
    name = "fake_quantize_per_tensor_affine"
    _check_input(input, name)
    _check_range(name, quant_min, quant_max)
    scale = float(scale) if isinstance(scale, Tensor) else scale
    zero_point = int(zero_point) if isinstance(zero_point, Tensor) else zero_point
    if not quant_min <= zero_point <= quant_max:
        raise RuntimeError(f"{name}: `zero_point` must be between `quant_min` and `quant_max` "
                           f"(got {zero_point} outside [{quant_min}, {quant_max}])")
    return _fake_quantize(input, scalar_tensor(scale, dtype=_dt.float32, device=input.device),
                          scalar_tensor(zero_point, dtype=_dt.int64, device=input.device),
                          qmin=int(quant_min), qmax=int(quant_max), per_tensor=True)


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):
    """As fake_quantize_per_tensor_affine with one scale and zero point per index of `axis`:
    scale a float32 tensor, zero_point an int32 (added after rounding) or float32/float16
    one (added before), both of input.shape[axis] elements."""
    name = "fake_quantize_per_channel_affine"
    _check_input(input, name)
    expect_tensor(name, scale, "scale", 2)
    expect_tensor(name, zero_point, "zero_point", 3)
    if scale.dtype not in (_dt.float32, _dt.bfloat16):
        raise RuntimeError(f"{name}: Scale must be Float or BFloat16, found {scale.dtype} "
                           f"(pass scale.float())")
    if zero_point.dtype not in (_dt.int32, _dt.float32, _dt.float16):
        raise RuntimeError(f"{name}: Zero-point must be Int32, Float or Half, found "
                           f"{zero_point.dtype} (pass zero_point.int())")
    if scale.dim() != 1 or zero_point.dim() != 1:
        raise RuntimeError(f"{name}: scale and zero-point must be 1-d, got shapes "
                           f"{tuple(scale.shape)} and {tuple(zero_point.shape)}")
    if scale.shape != zero_point.shape:
        raise RuntimeError(f"{name}: scale and zero-point need to have the same dimensions "
                           f"(got {tuple(scale.shape)} and {tuple(zero_point.shape)})")
    if not 0 <= axis < input.dim():  # (torch takes no negative axis here)
        raise RuntimeError(f"{name}: `axis` must be between 0 and number of dimensions of "
                           f"input (got axis={axis} for {input.dim()}-d input)")
    if scale.shape[0] != input.shape[axis]:
        raise RuntimeError(f"{name}: dimensions of scale and zero-point are not consistent "
                           f"with input tensor (scale has {scale.shape[0]} elements, input "
                           f"dim {axis} has {input.shape[axis]})")
    _check_range(name, quant_min, quant_max)
    if zero_point.dtype == _dt.int32 and bool(((zero_point < quant_min)
                                               | (zero_point > quant_max)).any()):
        raise RuntimeError(f"{name}: `zero_point` must be between `quant_min` and `quant_max` "
                           f"(got a zero point outside [{quant_min}, {quant_max}])")
    shape = [1] * input.dim()
    shape[axis] = -1
    return _fake_quantize(input, scale.detach().reshape(shape),
                          zero_point.detach().reshape(shape), qmin=int(quant_min),
                          qmax=int(quant_max), per_tensor=False)
