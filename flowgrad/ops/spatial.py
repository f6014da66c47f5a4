"""Spatial ops: unfold/fold (im2col and its adjoint), pixel_shuffle, interpolate,
grid_sample and affine_grid.

unfold and fold are each other's adjoint, so each one's rule is the other. interpolate is
separable and linear: one small (out, in) matrix per spatial dim applied by matmul, so its
gradient (the transposed matrices) and every higher order come from matmul's rule.
grid_sample gathers the corner pixels by index and blends them with weights computed from
the grid by flowgrad ops, so it is differentiable in both arguments to any order.

>>> import flowgrad as flow
>>> import flowgrad.nn.functional as F
>>> F.interpolate(flow.ones(1, 1, 2, 2), scale_factor=2, mode="bilinear").shape
flowgrad.Size([1, 1, 4, 4])
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .._warn import warn
from ..device import new_array
from ..dtypes import float64, uint8
from ..errors import check_kernel_dtype
from ..tensor import Tensor
from ..typed_tensors import contiguous_format
from .conv import col2im, ntuple, out_size, pad_array, windows
from .elementwise import where
from .halfprec import opmath
from .kept import kept
from .layout import suggested_order
from .pool import _adaptive_avg, _along
from .pool_more import antialias_matrix
from .ranges import arange, fma64
from .registry import op
from .shape import relaid

__all__ = ["unfold", "fold", "pixel_shuffle", "pixel_unshuffle", "interpolate", "upsample",
           "grid_sample", "affine_grid"]


# ---- unfold / fold -------------------------------------------------------------------------
@op("unfold", jvp="linear", complex=True)  # (its rule moves dy, real weights)
def _unfold(xp, x, *, ksize, stride, padding, dilation):
    n, c = x.shape[:2]
    nd = len(ksize)
    out = tuple(out_size(s, k, st, p, d) for s, k, st, p, d in
                zip(x.shape[2:], ksize, stride, padding, dilation))
    win = windows(xp, pad_array(xp, x, padding), ksize, stride, dilation, out)
    perm = (0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd))
    # math.prod(out), not -1: an empty batch has no elements to infer it from; a copy even
    # where the windows lie in x's order (a 1 x 1 kernel): the result is x's memory else
    return win.transpose(perm).copy().reshape(n, c * math.prod(ksize), math.prod(out))


@op("fold", jvp="linear", complex=True)  # (its rule moves dy, real weights)
def _fold(xp, cols, *, ksize, stride, padding, dilation, size):
    n, ck = cols.shape[:2]
    out = tuple(out_size(s, k, st, p, d) for s, k, st, p, d in
                zip(size, ksize, stride, padding, dilation))
    c = cols.reshape((n, ck // math.prod(ksize)) + tuple(ksize) + out)
    return xp.ascontiguousarray(col2im(xp, c, size, ksize, stride, padding, dilation))


@_unfold.grad
def unfold_backward(ctx, dy):
    return _fold(dy, ksize=ctx.ksize, stride=ctx.stride, padding=ctx.padding,
                 dilation=ctx.dilation, size=ctx.input_shapes[0][2:])


@_fold.grad
def fold_backward(ctx, g):
    return _unfold(g, ksize=ctx.ksize, stride=ctx.stride, padding=ctx.padding,
                   dilation=ctx.dilation)


def _window_args(kernel_size, dilation, padding, stride, name):
    ksize = ntuple(kernel_size, 2, "kernel_size", name)
    dilation = ntuple(dilation, 2, "dilation", name)
    padding = ntuple(padding, 2, "padding", name)
    stride = ntuple(stride, 2, "stride", name)
    for label, vals, least in (("kernel_size", ksize, 1), ("dilation", dilation, 1),
                               ("stride", stride, 1), ("padding", padding, 0)):
        if any(v < least for v in vals):
            raise RuntimeError(f"{name}: expected {label} to be "
                               f"{'positive' if least else 'non-negative'}, but got "
                               f"{label}={vals}")
    return ksize, dilation, padding, stride


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding blocks: (N, C, H, W) -> (N, C * kh * kw, L), torch's im2col.

    >>> import flowgrad as flow
    >>> flow.nn.functional.unfold(flow.ones(1, 2, 3, 3), 2).shape
    flowgrad.Size([1, 8, 4])
    """
    ksize, dilation, padding, stride = _window_args(kernel_size, dilation, padding, stride,
                                                    "unfold")
    check_kernel_dtype(input, "im2col_out_cpu", kinds="fVcb")
    rank = input._data.ndim
    if rank not in (3, 4):
        raise RuntimeError(f"unfold: Input Error: Only 3D or 4D input Tensors are supported "
                           f"(got {rank}D)")
    x = input if rank == 4 else input.unsqueeze(0)
    out = [out_size(s, k, st, (p, p), d) for s, k, st, p, d in
           zip(x.shape[2:], ksize, stride, padding, dilation)]
    if any(o < 1 for o in out):
        raise RuntimeError(f"unfold: Given input with spatial size {tuple(x.shape[2:])}, "
                           f"kernel_size={ksize}, dilation={dilation}, padding={padding}, "
                           f"calculated shape of the array of sliding blocks as {tuple(out)}, "
                           f"but its components must be at least one.")
    y = _unfold(x, ksize=ksize, stride=stride, padding=tuple((p, p) for p in padding),
                dilation=dilation)
    return y if rank == 4 else y.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum sliding blocks back into an image: (N, C * kh * kw, L) -> (N, C, *output_size).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.fold(F.unfold(flow.ones(1, 1, 3, 3), 2), (3, 3), 2)
    tensor([[[[1., 2., 1.],
              [2., 4., 2.],
              [1., 2., 1.]]]])
    """
    ksize, dilation, padding, stride = _window_args(kernel_size, dilation, padding, stride,
                                                    "fold")
    size = ntuple(output_size, 2, "output_size", "fold")
    check_kernel_dtype(input, "col2im_out_cpu", kinds="fVcb")
    rank = input._data.ndim
    if rank not in (2, 3):
        raise RuntimeError(f"fold: Input Error: Only unbatched (2D) or batched (3D) input "
                           f"Tensors are supported (got {rank}D)")
    x = input if rank == 3 else input.unsqueeze(0)
    kprod = math.prod(ksize)
    if x.shape[1] % kprod:
        raise RuntimeError(f"fold: Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={x.shape[1]} and "
                           f"kernel_size={ksize}.")
    out = [out_size(s, k, st, (p, p), d) for s, k, st, p, d in
           zip(size, ksize, stride, padding, dilation)]
    if any(o < 1 for o in out) or x.shape[2] != math.prod(out):
        raise RuntimeError(f"fold: Given output_size={size}, kernel_size={ksize}, dilation="
                           f"{dilation}, padding={padding}, stride={stride}, expected size of "
                           f"input's dimension 2 to match the calculated number of sliding "
                           f"blocks {out[0]} * {out[1]} = {math.prod(out)}, but got "
                           f"input.size(2)={x.shape[2]}.")
    y = _fold(x, ksize=ksize, stride=stride, padding=tuple((p, p) for p in padding),
              dilation=dilation, size=size)
    return y if rank == 3 else y.squeeze(0)


# ---- pixel shuffle -------------------------------------------------------------------------
def _fresh(shuffled):
    """The shuffled elements in new row-major memory, as torch allocates pixel_(un)shuffle's
    result: never a view of the input (a factor of 1, or sizes that leave the reshape a
    view, gave one: a write to the result changed the input), nor in the input's layout."""
    return shuffled.clone(memory_format=contiguous_format)


def pixel_shuffle(input, upscale_factor):
    """(*, C * r**2, H, W) -> (*, C, H * r, W * r): channels become sub-pixel positions."""
    r = int(upscale_factor)
    if input._data.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input._data.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    nl = len(lead)
    y = input.reshape(*lead, c // (r * r), r, r, h, w)
    perm = tuple(range(nl)) + tuple(nl + i for i in (0, 3, 1, 4, 2))
    return relaid(_fresh(y.permute(*perm)).view(*lead, c // (r * r), h * r, w * r),
                  suggested_order(input._data))  # (torch's channels_last kernel)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r**2, H, W), the inverse of pixel_shuffle."""
    r = int(downscale_factor)
    if input._data.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input._data.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    for label, size, pos in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {label} to be divisible by "
                               f"downscale_factor, but input.size({pos})={size} is not "
                               f"divisible by {r}")
    nl = len(lead)
    y = input.reshape(*lead, c, h // r, r, w // r, r)
    perm = tuple(range(nl)) + tuple(nl + i for i in (0, 2, 4, 1, 3))
    return relaid(_fresh(y.permute(*perm)).view(*lead, c * r * r, h // r, w // r),
                  suggested_order(input._data))


# ---- interpolate: one (out, in) matrix per spatial dim -----------------------------------------
_MODES = "nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact"
_RANK = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}


def _cubic(t, a=-0.75):
    """Keys' cubic convolution weights for taps -1, 0, 1, 2 at fraction t (torch's A), in t's
    dtype and in torch's order of operations."""
    a = t.dtype.type(a)

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    back = 1 - t
    return [far(t + 1), near(t), near(back), far(back + 1)]


def _source_index(n_in, n_out, align_corners, scale, cubic, opmath):
    """torch's area_pixel_compute_source_index for each output position, in the kernel's
    opmath type (float32 for float32 and half inputs: computing it in float64 put float32
    results ~4e-5 relative off torch's on images of a few hundred pixels); its
    scale * (i + 0.5) - 0.5 is one fused multiply-add (exact products in float64)."""
    dst = np.arange(n_out)
    if align_corners:
        step = opmath(n_in - 1) / opmath(n_out - 1) if n_out > 1 else opmath(0)
        return step * dst.astype(opmath)
    step = opmath(1.0 / scale) if scale else opmath(n_in) / opmath(n_out)
    if opmath is np.float32:
        src = (np.float64(step) * (dst + 0.5) - 0.5).astype(np.float32)
    else:
        src = fma64(step / 2, 2 * dst + 1, -0.5)  # (step / 2 and 2i + 1: exact)
    return src if cubic else np.maximum(src, opmath(0))


def _interp_matrix(n_in, n_out, mode, align_corners, scale, opmath=np.float64):
    """The (n_out, n_in) matrix of one dim's interpolation, by torch's index rules and in its
    arithmetic (`opmath`)."""
    dst = np.arange(n_out, dtype=np.float64)
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    if mode in ("nearest", "nearest-exact"):
        # torch computes nearest indices in float32
        s = np.float32(1.0 / scale if scale else n_in / n_out)
        off = np.float32(0.5 if mode == "nearest-exact" else 0.0)
        src = np.floor((dst.astype(np.float32) + off) * s).astype(np.int64)
        m[rows, np.minimum(src, n_in - 1)] = 1.0
        return m
    src = _source_index(n_in, n_out, align_corners, scale, mode == "bicubic", opmath)
    # torch's guard_index_and_lambda: the index below, at most the last; t clamped to [0, 1]
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    t = np.clip(src - i0.astype(opmath), opmath(0), opmath(1))
    if mode == "bicubic":
        for off, w in zip((-1, 0, 1, 2), _cubic(t)):
            np.add.at(m, (rows, np.clip(i0 + off, 0, n_in - 1)), w)
        return m
    i1 = np.minimum(i0 + 1, n_in - 1)
    np.add.at(m, (rows, i0), 1 - t)
    np.add.at(m, (rows, i1), t)
    return m


def _dim_matrix(n_in, n_out, mode, align_corners, scale, antialias, nd, opmath=np.float64):
    """One dim's (n_out, n_in) matrix, with torch's shortcuts that ignore the scale: a dim of
    unchanged size is copied by the (bi/tri)linear and antialiased kernels and by 2-D
    nearest, which also maps output i to input i // 2 when the size doubles (so a
    scale_factor of 1.25 on a size of 2 copies, not repeats row 0)."""
    copies = antialias or mode in ("linear", "bilinear", "trilinear") or \
        mode == "nearest" and nd == 2
    if n_in == n_out and copies:
        return np.eye(n_in)
    if mode == "nearest" and nd == 2 and n_out == 2 * n_in:
        m = np.zeros((n_out, n_in))
        m[np.arange(n_out), np.arange(n_out) // 2] = 1.0
        return m
    if antialias:
        return antialias_matrix(n_in, n_out, mode, align_corners, scale)
    return _interp_matrix(n_in, n_out, mode, align_corners, scale, opmath)


# ---- uint8 bilinear / bicubic: torch's integer kernels (Pillow-SIMD's), emulated exactly ------
def _keys_cubic(x, a):
    x = abs(x)
    if x < 1.0:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2.0:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def _uint8_dim_weights(n_in, n_out, mode, align_corners, scale, antialias):
    """One dim's int16 weights of torch's uint8 resize: the (n_out, n_in) integer matrix and
    its precision (bits). Double weights as torch's compute_index_ranges_weights (antialias:
    the filter stretched and normalised; else the plain taps, those past an edge folded onto
    it), then scaled by 2**precision and rounded half away from zero."""
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale and scale > 0 else n_in / n_out
    cubic = mode == "bicubic"
    taps = 4 if cubic else 2
    a = -0.5 if antialias else -0.75

    def filt(x):
        return _keys_cubic(x, a) if cubic else max(1.0 - abs(x), 0.0)

    rows, wt_max = [], 0.0
    for i in range(n_out):
        if antialias:
            support = taps * 0.5 * s if s >= 1.0 else taps * 0.5
            width = int(math.ceil(support)) * 2 + 1
            center = s * (i + 0.5)
            inv = 1.0 / s if s >= 1.0 else 1.0
            lo = max(int(center - support + 0.5), 0)
            size = min(max(min(int(center + support + 0.5), n_in) - lo, 0), width)
            w = [filt((j + lo - center + 0.5) * inv) for j in range(size)]
            total = sum(w)
            if total != 0.0:
                w = [v / total for v in w]
                wt_max = max([wt_max] + w)
        else:
            src = s * i if align_corners else s * (i + 0.5) - 0.5
            if not align_corners and not cubic and src < 0:
                src = 0.0
            idx = min(int(math.floor(src)), n_in - 1)
            lam = min(max(src - idx, 0.0), 1.0)
            half = taps // 2
            unbound = idx - half + 1
            lo = max(unbound, 0)
            size = min(max(min(idx + half + 1, n_in) - lo, 0), taps)
            w, k = [0.0] * (taps + 1), 0
            for j in range(taps):
                if unbound + j <= 0:
                    k = 0
                elif unbound + j >= n_in - 1:
                    k = size - 1
                w[k] += filt(j + 1 - half - lam)
                wt_max = max(wt_max, w[k])
                k += 1
            w = w[:size]
        rows.append((lo, w))
    precision = 0
    while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    m = np.zeros((n_out, n_in), np.int64)
    for i, (lo, w) in enumerate(rows):
        for j, v in enumerate(w):
            v *= 1 << precision
            m[i, lo + j] = int(-0.5 + v) if v < 0 else int(0.5 + v)  # (C's truncation)
    return m, precision


@op("interpolate_uint8", differentiable=False)
def _resize_uint8(xp, x, *mats, dims, precisions):
    """Resize uint8 (N, C, H, W) along `dims` (W first, then H, as torch's), each pass in
    integers: sum(w * pixel) + 2**(p - 1), shifted right by p, saturated to [0, 255]."""
    y = x.astype(xp.int64)
    for m, d, p in zip(mats, dims, precisions):
        y = xp.moveaxis(xp.moveaxis(y, d, -1) @ m.T, -1, d)
        y = xp.clip((y + (1 << (p - 1))) >> p, 0, 255)
    return y.astype(xp.uint8)


def _interpolate_uint8(input, out, mode, align_corners, scales, antialias):
    mats, dims, precisions = [], [], []
    for d in (3, 2):  # torch's horizontal pass first; a dim of unchanged size is copied
        n, o = input.shape[d], out[d - 2]
        if n != o:
            m, p = _uint8_dim_weights(n, o, mode, bool(align_corners), scales[d - 2],
                                      antialias)
            mats.append(Tensor._wrap(new_array(input._data, m)))
            dims.append(d)
            precisions.append(p)
    if not mats:
        return input.clone()
    return _resize_uint8(input, *mats, dims=tuple(dims), precisions=tuple(precisions))


def _size_int(o, listed):
    """One output size as torch reads it: an int, a NumPy integer or a one-element integer
    tensor (a list's items must not be floating; a bool tensor is no int)."""
    if isinstance(o, Tensor):
        kind = o._data.dtype.kind
        if listed and kind in "fV":
            raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, int] "
                            f"or Tuple[int, int, int], but got size with types {[type(o)]}")
        if o.numel() == 1 and kind == "b":
            raise RuntimeError("interpolate: a bool tensor is not an integer size "
                               "(Expected scalar.isIntegral(false) to be true)")
        if o.numel() == 1 and kind in "iu":
            return int(o.item())
    elif isinstance(o, (int, np.integer)) and not isinstance(o, (bool, np.bool_)):
        return int(o)
    elif listed and not isinstance(o, (int, np.integer)):
        raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                        f"Tuple[int, int, int], but got size with types {[type(o)]}")
    what = (f"a {o.dtype} tensor of shape {tuple(o.shape)}" if isinstance(o, Tensor)
            else type(o).__name__)
    raise TypeError(f"interpolate(): size must be an int, a tuple of ints or one-element "
                    f"integer tensors, but got {what}")


def _scale_float(s):
    """One scale factor as torch reads it: a Python or NumPy number (tensors are refused)."""
    if isinstance(s, (int, float, np.integer, np.floating)):
        return s
    what = (f"a {s.dtype} tensor of shape {tuple(s.shape)}" if isinstance(s, Tensor)
            else type(s).__name__)
    raise TypeError(f"interpolate(): scale_factor must be a float or a tuple of floats, but "
                    f"got {what}")


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize by nearest, (bi/tri)linear, bicubic or area interpolation, as torch's.

    >>> import flowgrad as flow
    >>> flow.nn.functional.interpolate(flow.ones(1, 1, 3), size=5, mode="linear").shape
    flowgrad.Size([1, 1, 5])
    """
    rank = input._data.ndim
    if mode not in _MODES.split(" | ") or rank not in (3, 4, 5):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {rank}D) for the modes: {_MODES} (got {mode})")
    if mode in _RANK and rank != _RANK[mode]:
        raise NotImplementedError(f"Got {rank}D input, but {mode} mode needs {_RANK[mode]}D "
                                  f"input")
    if align_corners is not None and mode not in _RANK:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias and (mode not in ("bilinear", "bicubic") or rank != 4):
        raise ValueError("Anti-alias option is restricted to bilinear and bicubic modes and "
                         "requires a 4-D tensor as input")
    if antialias and input._data.dtype.name in ("float16", "bfloat16"):
        raise NotImplementedError(f"interpolate: antialias is not implemented for "
                                  f"{input.dtype} (as torch's CPU kernels); convert the input "
                                  f"with .float()")
    nd = rank - 2
    spatial = tuple(input.shape[2:])
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    if size is not None and recompute_scale_factor:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    scales = (None,) * nd
    if size is not None:
        out = tuple(size) if isinstance(size, (list, tuple)) else (size,) * nd
        if len(out) != nd:
            raise ValueError(f"Input and output must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(spatial)} and output size of {list(out)}. Please provide "
                             f"input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                             f"(o1, o2, ...,oK) format.")
        out = tuple(_size_int(o, isinstance(size, (list, tuple))) for o in out)
    else:
        sf = tuple(scale_factor) if isinstance(scale_factor, (list, tuple)) \
            else (scale_factor,) * nd
        if len(sf) != nd:
            raise ValueError(f"Input and scale_factor must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(spatial)} and scale_factor of shape {list(sf)}. Please "
                             f"provide input tensor in (N, C, d1, d2, ...,dK) format and "
                             f"scale_factor in (s1, s2, ...,sK) format.")
        sf = tuple(_scale_float(s) for s in sf)
        out = tuple(int(math.floor(float(n) * float(s))) for n, s in zip(spatial, sf))
        if not recompute_scale_factor:
            scales = tuple(float(s) for s in sf)
    if any(o <= 0 for o in out) and not (mode == "area" and all(o >= 0 for o in out)):
        # (area is adaptive average pooling, which allows an empty output, as torch's)
        raise RuntimeError(f"interpolate: input {list(input.shape)} and output size "
                           f"{list(out)} should be greater than 0")
    if input._data.dtype == np.uint8 and mode in ("nearest", "nearest-exact"):
        # torch's nearest kernels take uint8 (a copy of elements: exact through float64)
        return interpolate(input.to(float64), size, scale_factor, mode, align_corners,
                           recompute_scale_factor, antialias).to(uint8)
    if input._data.dtype == np.uint8 and mode in ("bilinear", "bicubic"):
        return _interpolate_uint8(input, out, mode, align_corners, scales, antialias)
    if input._data.dtype.kind not in "fV":
        raise NotImplementedError(f"interpolate: expected a floating point input, got "
                                  f"{input.dtype} (uint8 is taken by nearest, bilinear and "
                                  f"bicubic only); convert it with .float()")
    if mode == "area":
        return _adaptive_avg(input, out, nd)
    real = opmath(input._data.dtype).type  # torch's
    mats = [Tensor._wrap(new_array(input._data, _dim_matrix(n, o, mode, bool(align_corners), s,
                                                            antialias, nd, real),
                                   input._data.dtype)) for n, o, s in zip(spatial, out, scales)]
    # torch's 2-d and 3-d kernels keep a channels_last input's format (the 1-d ones do not)
    return relaid(_along(input, mats), suggested_order(input._data) if nd > 1 else None)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of interpolate, kept as torch keeps it (and warns of, as torch)."""
    warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.")
    return interpolate(input, size, scale_factor, mode, align_corners)


# ---- grid_sample / affine_grid --------------------------------------------------------------
def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) * ((size - 1) / 2)
    return ((coord + 1) * size - 1) / 2


def _reflect(c, twice_low, twice_high):
    """torch's reflect_coordinates on a float tensor (slope +-1; the fold count is a
    constant, as torch's)."""
    if twice_low == twice_high:
        return c * 0
    lo, span = twice_low / 2, (twice_high - twice_low) / 2
    d = (c - lo).abs()
    flips = (d / span).floor().detach()
    extra = d - flips * span
    return where(flips.remainder(2) == 0, extra + lo, (span + lo) - extra)


def _pad_coord(c, size, padding_mode, align_corners):
    """Apply torch's border/reflection padding to float source coordinates."""
    if padding_mode == "zeros":
        return c
    if padding_mode == "reflection":
        c = (_reflect(c, 0, 2 * (size - 1)) if align_corners
             else _reflect(c, -1, 2 * size - 1))
    # torch's clip: the borders count as outside, so a coordinate on one (0 or size - 1, as
    # grid = +-1 with align_corners) gets a zero gradient, not clamp's pass-through
    inside = (c > 0) & (c < size - 1)
    return where(inside, c, c.detach().clamp(0, size - 1))


def _cubic_weights(t):
    """torch's cubic convolution coefficients (A = -0.75) for the 4 taps around t in [0, 1)."""
    a = -0.75

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample input (N, C, H, W) at grid (N, Ho, Wo, 2) locations in [-1, 1] (x, then y),
    or input (N, C, D, H, W) at grid (N, Do, Ho, Wo, 3) (bilinear here means trilinear).

    >>> import flowgrad as flow
    >>> x = flow.arange(4.0).reshape(1, 1, 2, 2)
    >>> flow.nn.functional.grid_sample(x, flow.zeros(1, 1, 1, 2), align_corners=True)
    tensor([[[[1.5000]]]])
    """
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        _warn_align_corners()
    nd = input._data.ndim - 2
    if nd not in (2, 3) or grid._data.ndim != nd + 2:
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with the same "
                           f"number of dimensions, but got input with sizes "
                           f"{list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != nd:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {nd} in last "
                           f"dimension, but got grid with sizes {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {list(input.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    check_kernel_dtype(input, "grid_sampler3d_cpu" if nd == 3 else
                       "grid_sampler_2d_cpu_kernel_impl")
    if grid.dtype != input.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have the same dtype, "
                           f"but input has {input.dtype} and grid has {grid.dtype}")
    if mode == "bicubic" and nd != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    n, sizes = input.shape[0], tuple(input.shape[2:])  # (D,) H, W
    dtype = input.dtype
    # grid's last dim is (x, y(, z)): reversed, it lines up with sizes
    coords = [_unnormalize(grid[..., nd - 1 - k], sizes[k], align_corners) for k in range(nd)]
    # (N * prod(sizes), C): one row per pixel, so each tap is one index_select of all channels
    pixels = input.permute(0, *range(2, nd + 2), 1).reshape(-1, input.shape[1])
    strides = [math.prod(sizes[k + 1:]) for k in range(nd)]
    batch = arange(n, device=input.device).reshape((n,) + (1,) * nd) * math.prod(sizes)

    def tap(idx):
        """Pixels at integer positions (int64 tensors, one per spatial dim), zero outside;
        (N, C, ...)."""
        inside, flat = None, batch
        for i, size, stride in zip(idx, sizes, strides):
            ok = (i >= 0) & (i < size)
            inside = ok if inside is None else inside & ok
            flat = flat + i.clamp(0, size - 1) * stride
        v = pixels.index_select(0, flat.reshape(-1)).reshape(*flat.shape, -1)
        return v.permute(0, nd + 1, *range(1, nd + 1)) * inside.unsqueeze(1).to(dtype)

    if mode == "bicubic":
        # the taps' positions are padded (constants); the grid's gradient comes from the
        # cubic weights of the fractional parts, as torch's
        base = [c.detach().floor() for c in coords]
        ws = [_cubic_weights((c - b).unsqueeze(1)) for c, b in zip(coords, base)]
        pos = [[_pad_coord(b + (k - 1), s, padding_mode, align_corners).long()
                for k in range(4)] for b, s in zip(base, sizes)]
        out = 0
        for j in range(4):
            for i in range(4):
                out = out + tap((pos[0][j], pos[1][i])) * (ws[0][j] * ws[1][i])
        return _sampled(out, input, grid)  # (the taps are channels-last; torch's is not)
    coords = [_pad_coord(c, s, padding_mode, align_corners) for c, s in zip(coords, sizes)]
    if mode == "nearest":
        # round half to even, as torch's nearbyint; torch gives grid a zero gradient here
        out = tap([c.detach().round().long() for c in coords])
        # (zeros laid out as grid, as torch's: a dense gradient, not an expanded zero)
        return _sampled(out + ((grid * 0.0).sum() if grid.requires_grad else 0.0), input, grid)
    low = [c.detach().floor() for c in coords]
    frac = [(c - lo).unsqueeze(1) for c, lo in zip(coords, low)]
    low = [lo.long() for lo in low]
    out = 0
    for corner in itertools.product((0, 1), repeat=nd):
        w = 1
        for up, f in zip(corner, frac):
            w = w * (f if up else 1 - f)
        out = out + tap([lo + up for lo, up in zip(low, corner)]) * w
    return _sampled(out, input, grid)


def _sampled(out, input, grid):
    """grid_sample's result, C-contiguous, through a node that saves input and grid as
    torch's GridSampler node (a write to either after the op fails the backward)."""
    y = kept(out, input, grid, node=f"GridSampler{grid._data.ndim - 2}DBackward0", order="C")
    return out.contiguous() if y is out else y


def _base_coords(steps, align_corners):
    if steps <= 1:
        return np.zeros(max(steps, 1))
    r = np.linspace(-1.0, 1.0, steps)
    return r if align_corners else r * (steps - 1) / steps


def _warn_align_corners():
    """torch's warning when align_corners is left out (its default changed in torch 1.3)."""
    warn("Default grid_sample and affine_grid behavior has changed to align_corners=False "
         "since 1.3.0. Please specify align_corners=True if the old behavior is desired. See "
         "the documentation of grid_sample for details.")


def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) for grid_sample from affine matrices theta (N, 2, 3);
    or (N, D, H, W, 3) from (N, 3, 4) for a 5-D size."""
    if align_corners is None:
        _warn_align_corners()
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    nd = len(size) - 2
    if theta._data.ndim != 3 or tuple(theta.shape[1:]) != (nd, nd + 1) or \
            theta.shape[0] != size[0]:
        raise ValueError(f"Expected a batch of {nd}D affine matrices of shape "
                         f"Nx{nd}x{nd + 1} for size {size}. Got {theta.shape}.")
    if theta._data.dtype.kind not in "fV":
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    # torch's check, of the batch and channels too, skipped (its elif) when align_corners and
    # a spatial size is 1
    if not (align_corners and min(size[2:]) == 1) and min(size) <= 0:
        raise ValueError(f"affine_grid: expected non-zero, positive output size, got {size}")
    spatial = size[2:]
    axes = [_base_coords(s, align_corners) for s in reversed(spatial)]  # x, y(, z)
    mesh = np.meshgrid(*axes[::-1], indexing="ij")[::-1]  # each (D,) H, W
    base = np.stack(list(mesh) + [np.ones(spatial)], axis=-1).reshape(-1, nd + 1)
    base = Tensor._wrap(new_array(theta._data, base, theta._data.dtype))
    grid = base @ theta.transpose(1, 2)  # (N, prod(spatial), nd)
    return grid.reshape(size[0], *spatial, nd)
