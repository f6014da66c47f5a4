"""Pooling: max_pool, avg_pool, adaptive_avg/max_pool and lp_pool in 1, 2 and 3 dims.

Max pools return the argmax as a flat index into each input plane (torch's `indices`); their
gradient scatters by it (`max_pool_backward`), whose own gradient gathers by it again, so
every order is exact. Average pools are a window sum (linear, its adjoint a col2im) times a
constant divisor; adaptive average pools are one small matrix per spatial dim.

>>> import flowgrad as flow
>>> import flowgrad.nn.functional as F
>>> F.max_pool2d(flow.arange(16.0).reshape(1, 1, 4, 4), 2)
tensor([[[[ 5.,  7.],
          [13., 15.]]]])
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ..autograd.grad_mode import is_grad_enabled
from ..device import new_array
from ..errors import check_kernel_dtype
from ..tensor import Tensor
from .activation import relu
from .conv import col2im, ntuple, pad_array, tap_slices, windows
from .halfprec import HALF, in_float32
from .kept import kept
from .layout import in_suggested_order, suggested_format, suggested_order
from .registry import op
from .rules import has_nan, tied_to_input
from .scan import with_rule_indices
from .shape import relaid

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
           "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_pool1d_with_indices",
           "max_pool2d_with_indices"]


def _flat_index(xp, positions, size):
    """Per-dim integer positions (broadcastable) -> flat index into a plane of `size`."""
    idx = 0
    for pos, s in zip(positions, size):
        idx = idx * s + pos
    return xp.asarray(idx, dtype=xp.int64)


def _hi_pads(size, out, ksize, stride, padding, dilation):
    """(lo, hi) padding so every window of `out` fits (ceil_mode windows overhang)."""
    return tuple((p, max(0, (o - 1) * s + d * (k - 1) + 1 - n - p))
                 for n, o, k, s, p, d in zip(size, out, ksize, stride, padding, dilation))


# ---- max pooling: values + argmax, gradient by scatter -----------------------------------------
def _disjoint(ksize, stride, padding, dilation):
    """True when no two windows share an input position (and none reads padding)."""
    return not any(padding) and all(s >= d * (k - 1) + 1 for k, s, d in
                                    zip(ksize, stride, dilation))


def _max_pool_tiles(xp, x, ksize, out):
    """max_pool for windows that tile the input (stride == kernel, no padding or dilation).

    One transposing copy puts each kernel tap's values in its own contiguous plane, so the
    max and the argmax run on long contiguous rows instead of strided views with short inner
    loops (4x faster on LeNet's and the digits CNN's 2x2 pools). Returns None when the
    result holds a NaN: the general tap loop then reproduces torch's NaN-wins rule."""
    lead, size, nd = x.shape[:2], x.shape[2:], len(ksize)
    x = x[(Ellipsis,) + tuple(slice(0, o * k) for o, k in zip(out, ksize))]
    x = x.reshape(lead + sum(((o, k) for o, k in zip(out, ksize)), ()))
    perm = tuple(3 + 2 * i for i in range(nd)) + (0, 1) + tuple(2 + 2 * i for i in range(nd))
    taps = xp.ascontiguousarray(x.transpose(perm)).reshape((math.prod(ksize),) + lead
                                                           + tuple(out))
    vals = taps.max(axis=0)
    if has_nan(xp, vals):
        return None
    offsets, origin = _tile_offsets(size, tuple(ksize), tuple(out))
    if len(offsets) > 256:  # (a tap number past uint8)
        first = xp.argmax(taps == vals, axis=0)
    else:
        # torch keeps the first tap that reaches the max: its number is ne0 * (1 + ne1 * (1 +
        # ... ne_(n-2))), ne_t "tap t is below the max", read inside out in uint8 (the bool
        # arrays' own bytes: no casting loop), then each number's offset looked up once
        first = xp.zeros(vals.shape, xp.uint8) if len(offsets) == 1 else None
        for t in range(len(offsets) - 2, -1, -1):
            below = (taps[t] != vals).view(xp.uint8)
            if first is None:
                first = below
            else:
                first += 1
                xp.multiply(first, below, out=first)
    return vals, xp.add(xp.asarray(origin), xp.asarray(offsets).take(first),
                        out=xp.empty(vals.shape, xp.int64))


@functools.lru_cache(maxsize=64)
def _tile_offsets(size, ksize, out):
    """For windows tiling a plane of `size`: each tap's flat offset within its window (int64,
    row-major) and each window's origin (a read-only (out) int64 array), made once per
    shape (their Python-level set-up was a tenth of a LeNet pool)."""
    plane = np.cumprod((1,) + tuple(size[:0:-1]))[::-1]
    offsets = np.array([int(np.dot(tap, plane)) for tap in
                        itertools.product(*(range(k) for k in ksize))], np.int64)
    origin = _flat_index(np, [g * k for g, k in zip(np.ix_(*(np.arange(o) for o in out)),
                                                      ksize)], size)
    offsets.flags.writeable = origin.flags.writeable = False
    return offsets, origin


def _first_inside_tap(xp, size, out, ksize, stride, padding, dilation):
    """Per output position: the (row-major) number of its window's first tap inside the
    input, and whether it has one (a window over padding only has none)."""
    first, inside = 0, True
    for n, o, k, s, p, d, g in zip(size, out, ksize, stride, padding, dilation,
                                   xp.ix_(*(xp.arange(o) for o in out))):
        pos = g[..., None] * s - p + xp.arange(k) * d  # (the dim's outputs, its taps)
        ok = (pos >= 0) & (pos < n)
        first, inside = first * k + ok.argmax(-1), inside & ok.any(-1)
    return first, inside


# the max pools save their input, as torch's: their rule ties the gradient to it under
# create_graph (rules.tied_to_input), so a second differentiation w.r.t. the input gives
# zeros; a plain backward does not read it, but checks it (torch's backward refuses an input
# written in place since)
@op("max_pool", n_out=2, save="inputs")
def _max_pool(xp, x, *, ksize, stride, padding, dilation, out_shape, return_indices=False,
              order=None):
    vals, idx = _max_pool_arrays(xp, x, ksize, stride, padding, dilation, out_shape)
    if order is not None:  # (torch's channels_last result: layout.suggested_order)
        vals, idx = in_suggested_order(xp, vals, order), in_suggested_order(xp, idx, order)
    return with_rule_indices(vals, idx, return_indices)


def _max_pool_arrays(xp, x, ksize, stride, padding, dilation, out_shape):
    out = out_shape
    size = x.shape[2:]
    if x.size == 0:  # an empty batch
        shape = x.shape[:2] + tuple(out)
        return xp.empty(shape, x.dtype), xp.empty(shape, xp.int64)
    if tuple(stride) == tuple(ksize) and _disjoint(ksize, stride, padding, dilation) and \
            all(o * k <= n for o, k, n in zip(out, ksize, size)):
        res = _max_pool_tiles(xp, x, ksize, out)
        if res is not None:
            return res
    pads = _hi_pads(size, out, ksize, stride, padding, dilation)
    low = xp.iinfo(x.dtype).min if x.dtype.kind in "iu" else -xp.inf  # (torch's lowest())
    xpad = pad_array(xp, x, pads, low)
    # one pass per kernel tap over strided views (no window copy, no argmax over a short
    # axis); torch's CPU rule: a tap wins if it is greater, or NaN
    vals = arg = None
    for t, tap in enumerate(itertools.product(*(range(k) for k in ksize))):
        v = xpad[(Ellipsis,) + tap_slices(tap, stride, dilation, out)]
        if vals is None:
            vals, arg = v.copy(), xp.zeros(v.shape, xp.int64)
            continue
        win = (v > vals) | (v != v)
        xp.copyto(vals, v, where=win)
        xp.copyto(arg, t, where=win)
    if any(lo or hi for lo, hi in pads):
        # where no input value beat the padding (all lowest(), or -inf), torch keeps the
        # window's first tap inside the input, not the padding tap the loop started on
        tied = vals == low
        if tied.any():
            first, inside = _first_inside_tap(xp, size, out, ksize, stride, padding, dilation)
            xp.copyto(arg, first, where=tied & inside)
    # flat index = window origin + tap offset, both linear in the per-dim positions
    plane = xp.cumprod((1,) + tuple(size[:0:-1]))[::-1]  # row-major strides of the plane
    origin = _flat_index(xp, [g * s - p for g, s, p in
                              zip(xp.ix_(*(xp.arange(o) for o in out)), stride, padding)], size)
    offsets = xp.array([sum(k * d * st for k, d, st in zip(tap, dilation, plane)) for tap in
                        itertools.product(*(range(k) for k in ksize))], xp.int64)
    return vals, origin + offsets[arg]


@op("max_pool_backward", jvp="linear", save="inputs[1]")  # the rule gathers by the indices
def _max_pool_backward(xp, dy, idx, *, shape, unique=False):
    nc, plane = shape[0] * shape[1], math.prod(shape[2:])
    if nc == 0:  # an empty batch
        return xp.zeros(shape, dy.dtype)
    flat = idx.reshape(nc, -1)
    weights = dy.ravel()
    if not unique and flat.size and flat.min() < 0:
        # a window over padding only (ceil_mode, dilation) read no input: its max is -inf and
        # its index negative; its gradient goes nowhere (torch writes it out of bounds).
        # (Disjoint windows read no padding: the check is skipped on that hot path.)
        read = (flat >= 0).ravel()
        flat, weights = xp.maximum(flat, 0), xp.where(read, weights, 0)
    flat = flat + (xp.arange(nc) * plane)[:, None]
    if unique:  # disjoint windows: no index repeats, so a scatter needs no sum
        dx = xp.zeros(nc * plane, dy.dtype)
        dx[flat.ravel()] = weights
        return dx.reshape(shape)
    dx = xp.bincount(flat.ravel(), weights=weights, minlength=nc * plane)
    return dx.astype(dy.dtype).reshape(shape)


@op("max_pool_gather", jvp="linear", save="inputs[1]")
def _max_pool_gather(xp, x, idx):
    n, c = x.shape[:2]
    if idx.size == 0:  # an empty batch
        return xp.zeros(idx.shape, x.dtype)
    flat = idx.reshape(n, c, -1)
    if flat.min() < 0:  # windows over padding only (see max_pool_backward): they read nothing
        got = xp.take_along_axis(x.reshape(n, c, -1), xp.maximum(flat, 0), -1)
        return xp.where(flat >= 0, got, 0).astype(x.dtype, copy=False).reshape(idx.shape)
    return xp.take_along_axis(x.reshape(n, c, -1), flat, -1).reshape(idx.shape)


def _max_rule(ctx, dy, _):
    return tied_to_input(_max_pool_backward(dy, ctx.aux[0], shape=ctx.input_shapes[0]), ctx)


@_max_pool.grad
def max_pool_backward(ctx, dy, _):
    dx = _max_pool_backward(dy, ctx.aux[0], shape=ctx.input_shapes[0],
                            unique=_disjoint(ctx.ksize, ctx.stride, ctx.padding, ctx.dilation))
    return tied_to_input(dx, ctx)


@_max_pool_backward.grad
def max_pool_backward_backward(ctx, g):
    return _max_pool_gather(g, ctx.inputs[1]), None



@_max_pool_gather.grad
def max_pool_gather_backward(ctx, g):
    return _max_pool_backward(g, ctx.inputs[1], shape=ctx.input_shapes[0]), None



# ---- argument checking shared by the pools -------------------------------------------------
def _pool_input(input, nd, name, kernel=None, ints=False):
    """`input` batched, and whether it was; refused as torch where its kernel (named
    `kernel`) has no loop for its dtype: float only, or also the integers `ints` allows
    (True: every int dtype, as torch's max pools; "int64": that one, as its average pools)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): expected a Tensor input, got {type(input).__name__}")
    rank = input._data.ndim
    if rank not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}: non-empty {nd + 1}D or {nd + 2}D (batch mode) tensor "
                           f"expected for input, but got input of size {list(input.shape)}")
    if 0 in input._data.shape[rank - nd - 1:]:  # as torch: only a batch may be empty
        raise RuntimeError(f"{name}: Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with "
                           f"optional 0 dim batch size for input, but got input of size "
                           f"{list(input.shape)}")
    dtype = input._data.dtype
    if not (ints is True and dtype.kind in "iu" or ints == "int64" and dtype == np.int64):
        check_kernel_dtype(input, kernel or name)  # (floats pass)
    return (input.unsqueeze(0), False) if rank == nd + 1 else (input, True)


def _pool_out(size, k, s, p, d, ceil_mode):
    """torch's pooling_output_shape: a ceil_mode window must start inside input + left pad."""
    span = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    o = span // s + 1
    if ceil_mode and (o - 1) * s >= size + p:
        o -= 1
    return o


def _pool_args(x, kernel_size, stride, padding, dilation, ceil_mode, nd, name):
    ksize = ntuple(kernel_size, nd, "kernel_size", name)
    stride = ksize if stride is None or (isinstance(stride, (list, tuple)) and not stride) \
        else ntuple(stride, nd, "stride", name)
    padding = ntuple(padding, nd, "padding", name)
    dilation = ntuple(dilation, nd, "dilation", name)
    if any(k <= 0 for k in ksize):
        raise RuntimeError(f"{name}: kernel_size must be greater than zero, but got {ksize}")
    if any(s <= 0 for s in stride):
        raise RuntimeError(f"{name}: stride should not be zero (got stride={stride})")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"{name}: dilation must be greater than zero, but got {dilation}")
    for k, p, d in zip(ksize, padding, dilation):
        if p < 0 or p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(f"{name}: pad should be at most half of effective kernel size, "
                               f"but got pad={p}, kernel_size={k} and dilation={d}")
    size = x.shape[2:]
    out = tuple(_pool_out(n, k, s, p, d, ceil_mode)
                for n, k, s, p, d in zip(size, ksize, stride, padding, dilation))
    if any(o < 1 for o in out):
        raise RuntimeError(f"{name}: Given input size: ({'x'.join(map(str, x.shape[1:]))}). "
                           f"Calculated output size: ({'x'.join(map(str, (x.shape[1],) + out))})"
                           f". Output size is too small")
    return ksize, stride, padding, dilation, out


def _pool_order(input, nd, as_2d=True):
    """The dims, fastest first, of the channels_last result torch's CPU pooling gives a
    batched `input` whose strides suggest that format (layout.suggested_order; 1-d pooling
    runs the 2-d kernel on (N, C, 1, L) where `as_2d`; 3-d average and adaptive pooling have
    no such kernel: pass as_2d=False for them), else None (C order)."""
    if not as_2d or not isinstance(input, Tensor) or input.ndim != nd + 2:
        return None
    return suggested_order(input._data, pooled_1d=nd == 1)


def _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd):
    name = f"max_pool{nd}d"
    # torch's max_pool1d without indices runs its own kernel, float only; the others take ints
    kernel = "max_pool1d_impl" if nd == 1 and not return_indices else f"max_pool{max(nd, 2)}d"
    x, batched = _pool_input(input, nd, name, kernel, ints=kernel != "max_pool1d_impl")
    if nd == 3 and not batched and suggested_format(input._data) == 4:
        raise RuntimeError(f"max_pool3d: Unsupported memory format. Supports only "
                           f"ChannelsLast3d, Contiguous (an unbatched {tuple(input.shape)} "
                           f"input laid out as channels_last, as torch); pass "
                           f"input.contiguous()")
    ksize, stride, padding, dilation, out = _pool_args(x, kernel_size, stride, padding,
                                                       dilation, ceil_mode, nd, name)
    # torch's max_pool1d runs its own (row-major) kernel unless indices or a gradient are
    # wanted: then the 2-d one on (N, C, 1, L)
    order = _pool_order(input, nd, nd > 1 or return_indices or (
        input.requires_grad and is_grad_enabled()))
    y, idx = _max_pool(x, ksize=ksize, stride=stride, padding=padding, dilation=dilation,
                       out_shape=out, return_indices=return_indices, order=order)
    if not batched:
        y, idx = y.squeeze(0), idx.squeeze(0)
    return (y, idx) if return_indices else y


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-D max pooling over (N, C, L) or (C, L); indices are positions along L."""
    return _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices, 1)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-D max pooling; with return_indices, also each max's flat index into its H*W plane.

    >>> import flowgrad as flow
    >>> flow.nn.functional.max_pool2d(flow.ones(1, 1, 4, 4), 2).shape
    flowgrad.Size([1, 1, 2, 2])
    """
    return _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices, 2)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-D max pooling over (N, C, D, H, W) or (C, D, H, W)."""
    return _max_poolnd(input, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices, 3)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """max_pool1d returning (output, indices) (torch.nn.functional.max_pool1d_with_indices)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """max_pool2d returning (output, indices) (torch.nn.functional.max_pool2d_with_indices)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


# ---- average pooling: window sum / divisor -------------------------------------------------
# (its input saved, as the max pools', and tied to under create_graph only)
@op("window_sum", jvp="linear", save="inputs")
@in_float32  # a half-precision input accumulates in float32, as torch
def _window_sum(xp, x, *, ksize, stride, padding, out_shape):
    out = out_shape
    nd = len(ksize)
    win = windows(xp, pad_array(xp, x, padding), ksize, stride, (1,) * nd, out)
    return xp.add.reduce(win, axis=tuple(range(-nd, 0)))  # not win.sum: see reduce._sum


@op("window_sum_adjoint", jvp="linear")
@in_float32  # a half-precision input accumulates in float32, as torch
def _window_sum_adjoint(xp, dy, *, ksize, stride, padding, size):
    nd = len(ksize)
    cols = xp.broadcast_to(dy[(slice(None),) * 2 + (None,) * nd],
                           dy.shape[:2] + tuple(ksize) + dy.shape[2:])
    return xp.ascontiguousarray(col2im(xp, cols, size, ksize, stride, padding, (1,) * nd))


@_window_sum.grad
def window_sum_backward(ctx, dy):
    dx = _window_sum_adjoint(dy, ksize=ctx.ksize, stride=ctx.stride, padding=ctx.padding,
                             size=ctx.input_shapes[0][2:])
    return tied_to_input(dx, ctx)


@_window_sum_adjoint.grad
def window_sum_adjoint_backward(ctx, g):
    return _window_sum(g, ksize=ctx.ksize, stride=ctx.stride, padding=ctx.padding,
                       out_shape=ctx.input_shapes[0][2:])


def _avg_divisor(size, out, ksize, stride, padding, count_include_pad):
    """Per-output window counts, separable over dims (torch's pool_size / clipped size)."""
    div = np.ones((), np.float64)
    for n, o, k, s, p in zip(size, out, ksize, stride, padding):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        cnt = end - start if count_include_pad else np.minimum(end, n) - np.maximum(start, 0)
        div = np.multiply.outer(div, np.maximum(cnt, 1))  # an all-pad window sums to 0
    return div


def _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override, nd):
    name = f"avg_pool{nd}d"
    kernel = "avg_pool3d_out_frame" if nd == 3 else "avg_pool2d"  # torch's, int64 beside floats
    x, batched = _pool_input(input, nd, name, kernel, ints="int64")
    if nd == 3 and x._data.dtype in HALF:  # torch's 3-d kernel has no half precision
        check_kernel_dtype(x, kernel, kinds="")
    ksize, stride, padding, _, out = _pool_args(x, kernel_size, stride, padding, 1, ceil_mode,
                                                nd, name)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError(f"{name}: divisor must be not zero")
    size = x.shape[2:]
    pads = _hi_pads(size, out, ksize, stride, padding, (1,) * nd)
    y = _window_sum(x, ksize=ksize, stride=stride, padding=pads, out_shape=out)
    if x._data.dtype.kind == "i":  # int64: torch's integer sum / divisor, truncated to 0
        div = divisor_override if divisor_override is not None else Tensor._wrap(new_array(
            x._data, _avg_divisor(size, out, ksize, stride, padding, count_include_pad),
            np.int64))
        y = y.div(div, rounding_mode="trunc")
    elif divisor_override is not None:
        y = y / float(divisor_override)
    else:
        div = _avg_divisor(size, out, ksize, stride, padding, count_include_pad)
        y = y * Tensor._wrap(new_array(x._data, 1.0 / div, x._data.dtype))
    # (torch's result: contiguous, or channels_last where the input suggests it)
    return relaid((y if batched else y.squeeze(0)).contiguous(), _pool_order(input, nd, nd < 3))


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-D average pooling over (N, C, L) or (C, L)."""
    return _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None,
                       1)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-D average pooling; count_include_pad counts zero padding in each window's divisor.

    >>> import flowgrad as flow
    >>> flow.nn.functional.avg_pool2d(flow.ones(1, 1, 4, 4), 2, padding=1,
    ...                               count_include_pad=False).sum().item()
    9.0
    """
    return _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override, 2)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """3-D average pooling."""
    if isinstance(input, Tensor) and input._data.ndim >= 3:
        k = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * 3
        size = tuple(input._data.shape[-3:])
        if any(n < int(kk) for n, kk in zip(size, k)):  # torch's 3-d check, padding or not
            raise RuntimeError(f"avg_pool3d: input image (T: {size[0]} H: {size[1]} W: "
                               f"{size[2]}) smaller than kernel size {tuple(k)}")
    return _avg_poolnd(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override, 3)


# ---- adaptive pools ------------------------------------------------------------------------
def _adaptive_bounds(n, o):
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)  # floor(i*n/o), ceil((i+1)*n/o)


def _adaptive_args(input, output_size, nd, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): expected a Tensor input, got {type(input).__name__}")
    rank = input._data.ndim
    if nd > 1 and isinstance(output_size, (tuple, list)) and rank <= len(output_size):
        # (torch's Python check, before its kernel's: it fills None sizes from the input's)
        raise ValueError(f"{name}(): Input dimension should be at least "
                         f"{len(output_size) + 1}, got a {rank}-D input of shape "
                         f"{tuple(input.shape)} for output_size {tuple(output_size)}")
    if rank not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got "
                           f"{list(input.shape)}")
    x, batched = (input.unsqueeze(0), False) if rank == nd + 1 else (input, True)
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size,) * nd
    output_size = tuple(output_size)
    if len(output_size) != nd:
        raise RuntimeError(f"{name}(): output_size must be {nd} ints, got {output_size}")
    out = tuple(n if o is None else int(o) for n, o in zip(x.shape[2:], output_size))
    if any(o < 0 for o in out) or any(n == 0 for n in x.shape[2:]):
        raise RuntimeError(f"{name}(): expected non-empty input and non-negative output_size, "
                           f"got input {list(input.shape)} and output_size {out}")
    return x, batched, out


def _along(x, mats):
    """Contract each spatial dim i of x (N, C, *S) with matrix mats[i] (O_i, S_i)."""
    lead = x.shape[:2]
    for i, m in enumerate(mats):
        shp = tuple(x.shape)
        before, after = math.prod(shp[2:2 + i]), math.prod(shp[3 + i:])
        y = x.reshape(lead[0] * lead[1] * before, shp[2 + i], after)
        x = (m @ y).reshape(shp[:2 + i] + (m.shape[0],) + shp[3 + i:])
    return x


def _adaptive_avg(input, output_size, nd):
    # (integers would truncate the window weights 1/k to 0: torch refuses them too)
    check_kernel_dtype(input, "adaptive_avg_pool3d_cpu" if nd == 3 else "adaptive_avg_pool2d")
    ones = output_size == 1 or isinstance(output_size, (tuple, list)) and \
        len(output_size) == nd and all(o == 1 for o in output_size)
    if nd > 1 and ones and isinstance(input, Tensor) and input._data.ndim >= nd and \
            input._data.ndim not in (nd + 1, nd + 2):
        # torch's adaptive_avg_pool2d/3d to size 1: a mean over the last nd dims, any rank
        if input._data.dtype in HALF:  # (in float32, rounded once)
            return input.float().mean(tuple(range(-nd, 0)), keepdim=True).to(input.dtype)
        return input.mean(tuple(range(-nd, 0)), keepdim=True)
    if input._data.dtype in HALF:  # summed in float32, rounded once, as torch's
        y = _adaptive_avg_values(input.float(), output_size, nd).to(input.dtype)
    else:
        y = _adaptive_avg_values(input, output_size, nd)
    # torch's node saves the input, but for an output of size 1 (1-d too): a mean there
    return y if ones else kept(y, input, node=f"AdaptiveAvgPool{max(nd, 2)}DBackward0")


def _adaptive_avg_values(input, output_size, nd):
    x, batched, out = _adaptive_args(input, output_size, nd, f"adaptive_avg_pool{nd}d")
    mats = []
    for n, o in zip(x.shape[2:], out):
        start, end = _adaptive_bounds(n, o)
        cols = np.arange(n)
        m = ((cols >= start[:, None]) & (cols < end[:, None])) / (end - start)[:, None]
        mats.append(Tensor._wrap(new_array(x._data, m, x._data.dtype)))
    y = _along(x, mats)
    return relaid(y if batched else y.squeeze(0), _pool_order(input, nd, nd < 3))


def adaptive_avg_pool1d(input, output_size):
    """Average pooling to a fixed output length, windows [floor(i*L/o), ceil((i+1)*L/o))."""
    return _adaptive_avg(input, output_size, 1)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed (H, W) output (an entry may be None: keep that size).

    >>> import flowgrad as flow
    >>> flow.nn.functional.adaptive_avg_pool2d(flow.ones(1, 2, 5, 7), 1).shape
    flowgrad.Size([1, 2, 1, 1])
    """
    return _adaptive_avg(input, output_size, 2)


def adaptive_avg_pool3d(input, output_size):
    """Average pooling over (N, C, D, H, W) to a fixed `output_size`."""
    return _adaptive_avg(input, output_size, 3)


@op("adaptive_max_pool", n_out=2, save="inputs")
def _adaptive_max_pool(xp, x, *, out_shape, return_indices=False, order=None):
    vals, idx = _adaptive_max_arrays(xp, x, out_shape)
    if order is not None:  # (torch's channels_last result: layout.suggested_order)
        vals, idx = in_suggested_order(xp, vals, order), in_suggested_order(xp, idx, order)
    return with_rule_indices(vals, idx, return_indices)


def _adaptive_max_arrays(xp, x, out_shape):
    out = out_shape
    nd = len(out)
    size = x.shape[2:]
    if x.size == 0:  # an empty batch
        return xp.empty(x.shape[:2] + out, x.dtype), xp.empty(x.shape[:2] + out, xp.int64)
    index, kmax = [], []
    for i, (n, o) in enumerate(zip(size, out)):
        start, end = _adaptive_bounds(n, o)
        k = int((end - start).max())
        # pad short windows by repeating their last element: a repeat doesn't change the max
        ix = xp.minimum(start[:, None] + xp.arange(k), (end - 1)[:, None])
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = o, k
        index.append(ix.reshape(shape))
        kmax.append(k)
    win = x[(slice(None), slice(None)) + tuple(index)]  # (N, C, *out, *k)
    flat = win.reshape(win.shape[:2 + nd] + (-1,))
    am = flat.argmax(-1)
    vals = xp.take_along_axis(flat, am[..., None], -1)[..., 0]
    if vals.dtype.kind in "fV" and xp.isnan(vals).any():  # torch's loop: each NaN wins anew
        nan = xp.isnan(flat)
        am = xp.where(nan.any(-1), flat.shape[-1] - 1 - nan[..., ::-1].argmax(-1), am)
    taps = xp.unravel_index(am, kmax)
    grid = xp.ix_(*(xp.arange(o) for o in out))
    positions = [ix.reshape(ix.shape[i], -1)[g, t] for i, (ix, g, t) in
                 enumerate(zip(index, grid, taps))]
    return vals, _flat_index(xp, positions, size)


_adaptive_max_pool.grad(_max_rule)


def _adaptive_max(input, output_size, return_indices, nd):
    name = f"adaptive_max_pool{nd}d"
    check_kernel_dtype(input, "adaptive_max_pool3d_cpu" if nd == 3 else "adaptive_max_pool2d")
    x, batched, out = _adaptive_args(input, output_size, nd, name)
    if any(o == 0 for o in out):
        raise RuntimeError(f"{name}(): output_size must be positive, got {out}")
    y, idx = _adaptive_max_pool(x, out_shape=out, return_indices=return_indices,
                                order=_pool_order(input, nd, nd < 3))
    if not batched:
        y, idx = y.squeeze(0), idx.squeeze(0)
    return (y, idx) if return_indices else y


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling to a fixed output length."""
    return _adaptive_max(input, output_size, return_indices, 1)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to a fixed (H, W) output; indices are flat positions in each H*W plane.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.adaptive_max_pool2d(flow.arange(16.0).reshape(1, 1, 4, 4), 2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    return _adaptive_max(input, output_size, return_indices, 2)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max pooling over (N, C, D, H, W) to a fixed `output_size`; with return_indices also the
    argmaxes."""
    return _adaptive_max(input, output_size, return_indices, 3)


# ---- power-average pooling -----------------------------------------------------------------
def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, nd):
    ksize = ntuple(kernel_size, nd, "kernel_size", f"lp_pool{nd}d")
    if isinstance(norm_type, (int, float)) and math.isinf(norm_type):
        # torch: p = inf is max pooling of |x|, p = -inf the min of |x| (x ** inf is 0 or inf)
        max_pool = (max_pool1d, max_pool2d, max_pool3d)[nd - 1]
        if norm_type > 0:
            return max_pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        return -max_pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    pool = (avg_pool1d, avg_pool2d, avg_pool3d)[nd - 1]
    out = pool(input ** norm_type, kernel_size, stride, 0, ceil_mode)
    # torch's formula exactly, so its gradient (sign * relu guard) matches too
    return ((out.sign() * relu(out.abs())) * float(math.prod(ksize))) ** (1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling: (sum of x**p over each window) ** (1/p)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """2-D power-average pooling: (sum of x**p over each window) ** (1/p)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """3-D power-average pooling: (sum of x**p over each window) ** (1/p).

    >>> import flowgrad as flow
    >>> flow.nn.functional.lp_pool3d(flow.ones(1, 1, 2, 2, 2), 2, 2).flatten()
    tensor([2.8284])
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)
