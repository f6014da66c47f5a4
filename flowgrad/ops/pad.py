"""F.pad: constant, reflect, replicate and circular padding of the trailing dims.

Negative pads crop first (a view). Constant padding is one op whose gradient slices the
output gradient; the other modes gather from the input with one index per padded dim
(built by `np.pad` on `arange`), so their gradients sum the copies back through that index.

>>> import flowgrad as flow
>>> import flowgrad.nn.functional as F
>>> F.pad(flow.tensor([[1.0, 2.0, 3.0]]), (2, 1), mode="reflect")
tensor([[3., 2., 1., 2., 3., 2.]])
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..device import new_array
from ..tensor import Tensor
from .gather import _gather_kept
from .layout import in_suggested_order, suggested_order
from .registry import op
from .shape import relaid

__all__ = ["pad"]

_MODES = ("constant", "reflect", "replicate", "circular")


@op("pad_constant")
def _pad_constant(xp, x, *, pads, value, order=None):
    # C order, as torch allocates it, or the channels_last `order` the input suggests
    return in_suggested_order(xp, xp.pad(x, pads, mode="constant", constant_values=value),
                              order)


@_pad_constant.grad
def pad_constant_backward(ctx, dy):
    shape = ctx.input_shapes[0]
    return dy[tuple(slice(lo, lo + n) for (lo, _), n in zip(ctx.pads, shape))]


def _check_value_fits(input, value):
    """torch's check that the fill value converts to the input's dtype without overflow (an
    integer dtype truncates 1.7 to 1, but refuses -1 for uint8, 255.5 or nan)."""
    dt = input._data.dtype
    if value is None or dt == np.bool_ or dt.kind not in "iufV":  # (V: bfloat16)
        return
    v = float(value)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        bad = not math.isfinite(v) or v < info.min or v > info.max
    else:
        bad = math.isfinite(v) and abs(v) > _dt.finfo(_dt.from_numpy_dtype(dt)).max
    if bad:
        raise RuntimeError(f"pad(): value {value!r} cannot be converted to type {dt.name} "
                           f"without overflow; pass a value in the dtype's range")


def _check(input, pad, mode, value, complex_value=False):
    if mode not in _MODES:
        raise NotImplementedError(f"pad(): Unrecognised padding mode {mode}; use one of "
                                  f"{tuple(_MODES)}")
    if len(pad) % 2:
        raise RuntimeError(f"pad(): Padding length must be divisible by 2, got pad={pad}")
    nd = input._data.ndim
    if len(pad) // 2 > nd:
        raise RuntimeError(f"pad(): Padding length should be less than or equal to two times "
                           f"the input dimension but got padding length {len(pad)} and input "
                           f"of dimension {nd}")
    if mode == "constant":
        if isinstance(value, complex) and not complex_value:  # (NumPy drops its imag)
            raise TypeError(f"pad(): argument 'value' must be float, not complex ({value!r})")
        return
    if input._data.dtype == np.bool_ and mode != "circular":
        raise NotImplementedError(f"pad(): {mode} padding is not implemented for bool tensors "
                                  f"(as torch's); pad a .to(torch.uint8) copy")
    if value is not None and value != 0:
        raise RuntimeError(f'pad(): Padding mode "{mode}" doesn\'t take in value argument')
    k = len(pad) // 2
    if k not in (1, 2, 3) or nd not in (k + 1, k + 2):
        raise NotImplementedError(
            f"pad(): Padding size {len(pad)} is not supported for {nd}D input tensor (shape "
            f"{tuple(input.shape)}). Supported combinations for non-constant padding: 2D or "
            f"3D input with padding size 2, 3D or 4D with 4, 4D or 5D with 6")


def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad)//2 dims: pad = (left of last dim, right of last dim, left of the
    dim before, ...). Negative pads crop.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.pad(flow.tensor([[1.0, 2.0]]), (1, 2))
    tensor([[0., 1., 2., 0., 0.]])
    >>> F.pad(flow.ones(1, 1, 2, 2), (1, 1, 1, 1)).shape
    flowgrad.Size([1, 1, 4, 4])
    """
    return padded(input, pad, mode, value)


def padded(input, pad, mode, value, complex_value=False):
    """F.pad's work; `complex_value`: a complex fill is taken (torch.constant_pad_nd's)."""
    pad = tuple(int(p) for p in pad)
    _check(input, pad, mode, value, complex_value)
    nd = input._data.ndim
    k = len(pad) // 2
    pairs = [(0, 0)] * (nd - k) + [(pad[2 * i], pad[2 * i + 1]) for i in range(k)][::-1]
    shape = input._data.shape
    order = suggested_order(input._data)  # (torch's kernels keep channels_last)
    if mode == "constant":
        for d, ((lo, hi), n) in enumerate(zip(pairs, shape)):
            if lo < -n or n + min(lo, 0) + min(hi, 0) < 0:
                raise RuntimeError(f"pad(): negative padding ({lo}, {hi}) removes more than the "
                                   f"{n} elements of dimension {d} of input {list(shape)}")
        if any(lo < 0 or hi < 0 for lo, hi in pairs):
            input = input[tuple(slice(-min(lo, 0), n + min(hi, 0)) for (lo, hi), n in
                                zip(pairs, shape))]
            pairs = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
        if not any(lo or hi for lo, hi in pairs):
            return input.clone()  # a new tensor, as torch's: never the input itself
        _check_value_fits(input, value)  # (only a fill checks it, as torch's)
        return _pad_constant(input, pads=tuple(pairs), value=0 if value is None else value,
                             order=order)
    if mode != "circular" and 0 in shape[max(nd - k - 1, 0):]:
        raise RuntimeError(f"pad(): {mode} padding needs non-empty dimensions (apart from the "
                           f"batch), got input {list(shape)}")
    if (mode == "replicate" or mode == "reflect" and (input._data.size or k == 1)) and all(
            n + lo + hi < 1 for (lo, hi), n in zip(pairs[nd - k:], shape[nd - k:])):
        # (torch's check: one padded dimension may come out empty, not all of them)
        raise RuntimeError(f"pad(): input {list(shape)} is too small for {mode} padding "
                           f"{pad}: every padded dimension would come out empty")
    if not any(lo or hi for lo, hi in pairs):
        return input.clone()
    if mode == "replicate" or mode == "reflect" and k <= 2:
        return relaid(_pad_indexed_float32(input, pairs, mode), order)
    return relaid(_pad_indexed(input, pairs, mode), order if mode == "reflect" else None)


def _pad_indexed_float32(input, pairs, mode):
    """_pad_indexed for the kernels torch's autocast runs in float32 (replication pads,
    1-d and 2-d reflection pads): amp/policy.py lists it among the float32 composites."""
    return _pad_indexed(input, pairs, mode)


def _pad_indexed(input, pairs, mode):
    """reflect/replicate/circular padding as one gather (pairs: (lo, hi) per dim)."""
    nd = input._data.ndim
    shape = input._data.shape
    # reflect/replicate: output position o reads input position o - lo, mapped back into
    # [0, n) (negative pads crop), as torch's kernels; one gather over the padded trailing dims
    first = next(d for d, p in enumerate(pairs) if p != (0, 0))
    m = nd - first
    sel = [slice(None)] * first
    for d in range(first, nd):
        lo, hi = pairs[d]
        n = shape[d]
        out = n + lo + hi
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"pad(): Padding size should be less than the corresponding "
                               f"input dimension, but got: padding ({lo}, {hi}) at dimension "
                               f"{d} of input {list(shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError(f"pad(): Padding value causes wrapping around more than once "
                               f"(padding ({lo}, {hi}) at dimension {d} of size {n})")
        if n == 0 and (lo or hi) or out < 0:
            raise RuntimeError(f"pad(): input dimension {d} of size {n} is too small for "
                               f"padding ({lo}, {hi}): the {mode}-padded size would be {out}")
        if mode == "circular":
            # the negative pads crop first, and the positive ones wrap around what is left
            start, core = max(-lo, 0), n - max(-lo, 0) - max(-hi, 0)
            if core < 0 or out and core < max(lo, hi, 1):
                raise RuntimeError(f"pad(): circular padding ({lo}, {hi}) of dimension {d} "
                                   f"(size {n}) wraps around the {max(core, 0)} elements its "
                                   f"negative padding leaves more than once")
            pos = (np.arange(out) - max(lo, 0)) % max(core, 1) + start
        else:
            pos = np.arange(out) - lo
            if mode == "reflect":
                pos = np.abs(pos)
                pos = np.where(pos > n - 1, 2 * (n - 1) - pos, pos)
            else:
                pos = np.clip(pos, 0, n - 1)
        # outer-product index over the trailing dims: one gather for all of them
        j = d - first
        pos = pos.reshape((1,) * j + (-1,) + (1,) * (m - j - 1))
        sel.append(pos)
    if mode == "circular":  # (torch's is a composite of slices: it saves no input)
        return input[tuple(Tensor._wrap(new_array(input._data, p)) if not isinstance(p, slice)
                           else p for p in sel)].contiguous()  # (NumPy's gather: C order)
    # torch's reflection and replication pads save their input: one flat gather that keeps it
    # (a write to it after the pad fails the backward, as torch's)
    lead = math.prod(shape[:first])
    flat = np.zeros((1,) * m, np.int64)
    for d, pos in zip(range(first, nd), sel[first:]):
        flat = flat * shape[d] + pos
    flat = np.arange(lead).reshape((lead,) + (1,) * m) * math.prod(shape[first:]) + flat
    flat = Tensor._wrap(new_array(input._data, flat.reshape(shape[:first] + flat.shape[1:])))
    return _gather_kept(input, flat)
