"""Convolutions: conv1d/2d/3d and conv_transpose1d/2d/3d, by im2col and one GEMM (or, for 2-D
layers with few channels, by row GEMMs against a banded kernel matrix).

Three bilinear ops close under differentiation, so every derivative order is a convolution:
`conv(x, w)`, its adjoint in x `conv_transpose(z, w)` (col2im of W^T z), and its adjoint in w
`conv_weight(x, dy)` (the GEMM of dy with im2col(x)). Each one's rule calls the other two.
`conv` also takes the layer's bias (as linear does): the banded path adds it inside its GEMM,
and its gradient is one reduction of dy.

>>> import flowgrad as flow
>>> import flowgrad.nn.functional as F
>>> x = flow.randn(1, 3, 8, 8, requires_grad=True)
>>> F.conv2d(x, flow.randn(4, 3, 3, 3), padding="same").shape
flowgrad.Size([1, 4, 8, 8])
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .. import blas
from ..tensor import Tensor
from .complex import conj
from .halfprec import in_float32
from .layout import in_format, suggested_format
from .normalization import _channel_row, _rows_of
from .pad import _pad_constant
from .registry import op
from .rules import all_finite

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"]


# ---- array helpers shared with pooling and fold/unfold ---------------------------------
def out_size(size, k, s, pad, d):
    """Sliding-window count along one dim for padding pad=(lo, hi)."""
    return (size + pad[0] + pad[1] - d * (k - 1) - 1) // s + 1


def pad_array(xp, x, pads, value=0.0):
    """Pad the trailing len(pads) dims of x by (lo, hi) pairs (hi may be negative: crop)."""
    if not any(lo or hi for lo, hi in pads):
        return x
    nd = len(pads)
    lead = x.shape[:x.ndim - nd]
    shape = lead + tuple(s + lo + max(hi, 0) for s, (lo, hi) in zip(x.shape[x.ndim - nd:], pads))
    out = xp.full(shape, value, dtype=x.dtype)
    out[(Ellipsis,) + tuple(slice(lo, lo + s) for s, (lo, _) in
                            zip(x.shape[x.ndim - nd:], pads))] = x
    return out


def windows(xp, x, ksize, stride, dilation, out):
    """Read-only view (*lead, *out, *ksize) of the windows of x's trailing len(ksize) dims."""
    nd = len(ksize)
    lead = x.ndim - nd
    st = x.strides
    shape = x.shape[:lead] + tuple(out) + tuple(ksize)
    strides = (st[:lead] + tuple(st[lead + i] * stride[i] for i in range(nd))
               + tuple(st[lead + i] * dilation[i] for i in range(nd)))
    return xp.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)


def tap_slices(tap, stride, dilation, out):
    """The strided slice of the padded input that kernel tap `tap` reads for every output."""
    return tuple(slice(k * d, k * d + s * (o - 1) + 1, s)
                 for k, s, d, o in zip(tap, stride, dilation, out))


def col2im(xp, cols, size, ksize, stride, padding, dilation):
    """Adjoint of windows(): cols (N, C, *ksize, *out) summed into (N, C, *size).

    Loops over kernel taps only; each tap adds one strided slab for all positions at once."""
    nd = len(ksize)
    out = cols.shape[2 + nd:]
    need = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out, stride, ksize, dilation)]
    padded = tuple(max(n, sz + lo + hi) for n, sz, (lo, hi) in zip(need, size, padding))
    buf = xp.zeros(cols.shape[:2] + padded, dtype=cols.dtype)
    for tap in itertools.product(*(range(k) for k in ksize)):
        buf[(Ellipsis,) + tap_slices(tap, stride, dilation, out)] += cols[(slice(None),) * 2
                                                                          + tap]
    return buf[(Ellipsis,) + tuple(slice(lo, lo + sz) for sz, (lo, _) in zip(size, padding))]


def _channels_last_padded(xp, x, padding):
    """(N, C, *S) -> zero-padded (N, *P, C) in one copy."""
    size = x.shape[2:]
    out = xp.zeros((x.shape[0],) + tuple(s + lo + max(hi, 0) for s, (lo, hi) in
                                        zip(size, padding)) + (x.shape[1],), dtype=x.dtype)
    inner = tuple(slice(lo, lo + s) for s, (lo, _) in zip(size, padding))
    out[(slice(None),) + inner] = xp.moveaxis(x, 1, -1)
    return out


def _gemm_cols(xp, x, ksize, stride, padding, dilation, groups, out):
    """im2col of x (N, C, *S) as a (groups, N * prod(out), prod(k) * C/groups) matrix stack.

    Channels go last (one transposing copy of x first) so the window copy moves contiguous
    runs of C and the GEMM's long dimension N * prod(out) is its row count: OpenBLAS is
    several times faster in that orientation than with a short M and a long K."""
    n, c = x.shape[:2]
    nd = len(ksize)
    xl = _channels_last_padded(xp, x, padding)  # (N, *P, C)
    st = xl.strides
    shape = (n,) + tuple(out) + tuple(ksize) + (groups, c // groups)
    strides = ((st[0],) + tuple(st[1 + i] * stride[i] for i in range(nd))
               + tuple(st[1 + i] * dilation[i] for i in range(nd)) + (st[-1] * (c // groups),
                                                                       st[-1]))
    win = xp.lib.stride_tricks.as_strided(xl, shape, strides, writeable=False)
    if groups > 1:
        win = xp.moveaxis(win, 1 + 2 * nd, 0)  # (g, N, *out, *k, Cg)
    return xp.ascontiguousarray(win).reshape(groups, n * math.prod(out), -1)


def _cols_channel_major(xp, x, ksize, stride, padding, dilation, groups, out):
    """im2col as (groups, C/groups * prod(k), N * prod(out)): for inputs with few channels,
    where a channels-last copy would move runs of only one or two values."""
    n, c = x.shape[:2]
    nd = len(ksize)
    win = windows(xp, pad_array(xp, x, padding), ksize, stride, dilation, out)
    perm = (1,) + tuple(range(2 + nd, 2 + 2 * nd)) + (0,) + tuple(range(2, 2 + nd))
    cols = xp.ascontiguousarray(win.transpose(perm))  # (C, *k, N, *out): rows of outputs
    return cols.reshape(groups, -1, n * math.prod(out))


def _weight_matrix(xp, w, groups):
    """(O, Cg, *k) -> (groups, prod(k) * Cg, O/groups), matching _gemm_cols' columns."""
    o, cg = w.shape[:2]
    wl = xp.moveaxis(w, 1, -1).reshape(groups, o // groups, -1)
    return wl.transpose(0, 2, 1)


def _to_groups(xp, y, groups):
    """(N, O, *sp) -> (groups, N * prod(sp), O/groups), the GEMM layout."""
    n, o = y.shape[:2]
    yl = y.reshape(n, groups, o // groups, -1).transpose(1, 0, 3, 2)
    return xp.ascontiguousarray(yl).reshape(groups, -1, o // groups)


def _from_groups(xp, y, n, sp):
    """(groups, N * prod(sp), O/groups) -> (N, O, *sp)."""
    g, _, og = y.shape
    yl = y.reshape(g, n, -1, og).transpose(1, 0, 3, 2)
    return xp.ascontiguousarray(yl).reshape((n, g * og) + tuple(sp))


# The input gradient of a unit-stride conv runs as a convolution when the input has at least
# this many channels per group (the GEMM's width); below it the col2im path measured faster.
_CONV_DX_MIN_CHANNELS = 16




def _channel_major(cg, out):
    """im2col layout choice: the window copy's contiguous run is Cg values channels-last and
    an output row channel-major; pick the longer (measured on LeNet's and ResNet's layers)."""
    return cg * 4 <= out[-1]


def _conv_transpose_batch_last(xp, z, w, stride, padding, dilation, groups, size):
    """conv_transpose by GEMM then col2im, with the batch as the innermost axis of both the
    GEMM's columns and col2im's buffer: each kernel tap's slab then moves runs of
    (out-width x batch) values (unit stride) or of batch values, not of one output row."""
    n, o = z.shape[:2]
    ksize, sp = w.shape[2:], z.shape[2:]
    cg, og = w.shape[1], o // groups
    zt = xp.ascontiguousarray(xp.moveaxis(z.reshape((n, groups, og) + sp), 0, -1))
    wt = w.reshape(groups, og, -1).transpose(0, 2, 1)  # (g, Cg*K, Og)
    cols = xp.matmul(wt, zt.reshape(groups, og, -1)).reshape((groups * cg,) + ksize + sp + (n,))
    need = [(q - 1) * s + (k - 1) * d + 1 for q, s, k, d in zip(sp, stride, ksize, dilation)]
    grid = tuple(max(m, sz + lo + hi) for m, sz, (lo, hi) in zip(need, size, padding))
    buf = xp.zeros((groups * cg,) + grid + (n,), dtype=cols.dtype)
    for tap in itertools.product(*(range(k) for k in ksize)):
        buf[(slice(None),) + tap_slices(tap, stride, dilation, sp)] += cols[(slice(None),) + tap]
    buf = buf[(slice(None),) + tuple(slice(lo, lo + sz) for sz, (lo, _) in zip(size, padding))]
    return xp.ascontiguousarray(xp.moveaxis(buf, -1, 0))


# ---- small 2-D convolutions: row GEMMs against a banded kernel matrix -------------------
# im2col copies each input value KH * KW times, and with few channels in and out (LeNet's
# layers) its GEMM is bound by reading that copy. There each tile of t outputs of an output row
# is instead one GEMM row: the (C, KH, t + KW - 1) input values it reads (runs of a whole tile
# row) against a banded matrix holding the kernel at each of the t shifts. The copy is about
# KW times smaller; the GEMM multiplies (t + KW - 1) / KW times more zeros than im2col's.
_BAND_MAX_TAPS = 160  # C * KH * KW; above it (or above _BAND_MAX_OUT) im2col's GEMM is
_BAND_MAX_OUT = 32  # compute-bound and the band's extra products cost more than its copy saves
# and below this kernel width im2col copies each value too few times (9 for 3x3) to lose to
# the band's (t + KW - 1) / KW times more products: measured with MKL, 3x3 kernels ran 1.2-1.8x
# faster by im2col (digits CNN, CIFAR-like layers), 5x5 ones 1.1-1.4x faster banded (LeNet)
_BAND_MIN_WIDTH = 5


def _band_tile(c, o, ksize, out, stride, dilation, groups):
    """Output-tile width t of the banded path for this convolution, or 0 for im2col."""
    if len(ksize) != 2 or groups != 1 or any(s != 1 for s in stride) or \
            any(d != 1 for d in dilation) or c * ksize[0] * ksize[1] > _BAND_MAX_TAPS or \
            o > _BAND_MAX_OUT or ksize[1] < _BAND_MIN_WIDTH:
        return 0
    if out[1] <= 16:
        return out[1]
    return next((t for t in range(16, 5, -1) if out[1] % t == 0), 0)


def _band_diagonals(xp, band, c, kh, kw, t, kh_outer):
    """The (C, KH, KW, O, t) view of a banded matrix (rows (C, KH, t + KW - 1) or, if kh_outer,
    (KH, C, t + KW - 1); columns (O, t)) whose [c, i, q, o, j] is row (c, i, j + q), column
    (o, j): where w[o, c, i, q] sits for output shift j."""
    wi = t + kw - 1
    five = band.reshape(((kh, c) if kh_outer else (c, kh)) + (wi, -1, t))
    sc, si = five.strides[:2][::-1] if kh_outer else five.strides[:2]
    sw, so, sj = five.strides[2:]
    o = five.shape[3]
    return xp.lib.stride_tricks.as_strided(five, (c, kh, kw, o, t), (sc, si, sw, so, sw + sj),
                                           writeable=True)


def _band_matrix(xp, w, t, kh_outer=False):
    o, c, kh, kw = w.shape
    band = xp.zeros(((kh, c) if kh_outer else (c, kh)) + (t + kw - 1, o * t), w.dtype)
    _band_diagonals(xp, band, c, kh, kw, t, kh_outer)[...] = w.transpose(1, 2, 3, 0)[..., None]
    return band.reshape(-1, o * t)


def _band_rows(xp, x, ksize, out, t, ones=False):
    """(N * OH * OW/t, C * KH * (t + KW - 1)): the input each output tile reads, one copy;
    `ones`: with a last column of ones, so a bias row of the banded matrix adds the bias."""
    (kh, kw), (oh, ow), s = ksize, out, x.strides
    shape = (x.shape[0], oh, ow // t, x.shape[1], kh, t + kw - 1)
    win = xp.lib.stride_tricks.as_strided(x, shape, (s[0], s[2], s[3] * t, s[1], s[2], s[3]),
                                          writeable=False)
    k = x.shape[1] * kh * (t + kw - 1)
    if not ones:
        return xp.ascontiguousarray(win).reshape(-1, k)
    rows = xp.empty((math.prod(shape[:3]), k + 1), x.dtype)
    rows[:, k] = 1
    rows[:, :k].reshape(shape)[...] = win  # (a view: the row stride is k + 1)
    return rows


def _band_out_rows(xp, y, t):
    """(N, O, OH, OW) -> (N * OH * OW/t, O * t), the banded GEMM's output layout."""
    n, o, oh, ow = y.shape
    tiles = y.reshape(n, o, oh, ow // t, t).transpose(0, 2, 3, 1, 4)
    return xp.ascontiguousarray(tiles).reshape(-1, o * t)


def _conv_band(xp, x, w, padding, out, t, bias=None):
    n, o = x.shape[0], w.shape[0]
    rows = _band_rows(xp, pad_array(xp, x, padding), w.shape[2:], out, t, bias is not None)
    band = _band_matrix(xp, w, t)
    if bias is not None:  # the ones column of rows meets this row: the bias, added by the GEMM
        band = xp.concatenate([band, xp.repeat(bias.astype(band.dtype), t)[None]])
    y = xp.matmul(rows, band).reshape(n, out[0], out[1] // t, o, t)
    return xp.ascontiguousarray(y.transpose(0, 3, 1, 2, 4)).reshape((n, o) + tuple(out)), rows


def _conv_weight_band(xp, x, dy, rows, padding, ksize, t):
    if rows is None:
        rows = _band_rows(xp, pad_array(xp, x, padding), ksize, dy.shape[2:], t)
    grad = xp.matmul(rows.T, _band_out_rows(xp, dy, t))  # (C * KH * (t + KW - 1), O * t)
    grad = grad[:x.shape[1] * ksize[0] * (t + ksize[1] - 1)]  # (less the forward's ones row)
    diagonals = _band_diagonals(xp, grad, x.shape[1], *ksize, t, False)
    return xp.ascontiguousarray(diagonals.sum(-1).transpose(3, 0, 1, 2))  # .grad: (O, C, k)


def _conv_transpose_band(xp, z, w, padding, size, t):
    """The banded path's adjoint: per kernel row, a GEMM gives each tile's (C, t + KW - 1)
    input values, added into an (N, H, C, W) buffer as one slab (runs of OH rows, one tile)."""
    n, o, oh, ow = z.shape
    c, (kh, kw) = w.shape[1], w.shape[2:]
    wi = t + kw - 1
    band = _band_matrix(xp, w, t, kh_outer=True).reshape(kh, c * wi, o * t)
    cols = xp.matmul(_band_out_rows(xp, z, t), band.transpose(0, 2, 1))  # (KH, rows, C * wi)
    cols = cols.reshape(kh, n, oh, ow // t, c, wi)
    (lo_h, _), (lo_w, _) = padding
    grid = (max(oh + kh - 1, size[0] + lo_h), max(ow + kw - 1, size[1] + lo_w))
    buf = xp.zeros((n, grid[0], c, grid[1]), z.dtype)
    for i in range(kh):
        for tile in range(ow // t):
            buf[:, i:i + oh, :, tile * t:tile * t + wi] += cols[i, :, :, tile]
    buf = buf[:, lo_h:lo_h + size[0], :, lo_w:lo_w + size[1]]
    return xp.ascontiguousarray(buf.transpose(0, 2, 1, 3))


# ---- the three ops -----------------------------------------------------------------------
@op("conv", save="inputs[0, 1]", complex=True)  # (forward mode: ops/jvp_rules.py, linear's rule)
@in_float32
def _conv(xp, x, w, *bias, stride, padding, dilation, groups, out_shape=None):
    """im2col (or banded) GEMM; `bias` (optional, (O,)) is added to each output channel."""
    y, cols = _conv_arrays(xp, x, w, bias[0] if bias else None, stride, padding, dilation,
                           groups, out_shape)
    rank = _result_format(x, w)
    return (in_format(xp, y, rank) if rank else y), cols


def _result_format(x, w):
    """The memory format of torch's CPU convolution result (a rank of ops/layout.py): 4-d,
    channels_last where the input's or the weight's strides suggest it; 5-d, channels_last_3d
    so for oneDNN's float32 (a half input computes in it here; torch's other 3-d kernels are
    row-major); else C order (0)."""
    if x.ndim not in (4, 5) or x.flags.c_contiguous and w.flags.c_contiguous:
        return 0
    rank = suggested_format(x) or suggested_format(w)
    return 0 if rank == 5 and x.dtype != np.float32 else rank


def _conv_arrays(xp, x, w, bias, stride, padding, dilation, groups, out_shape):
    ksize = w.shape[2:]
    out = out_shape
    if out is None:
        out = tuple(out_size(s, k, st, p, d) for s, k, st, p, d in
                    zip(x.shape[2:], ksize, stride, padding, dilation))
    n, o = x.shape[0], w.shape[0]
    if n == 0:  # an empty batch: an empty output (and no columns for the weight gradient)
        return xp.zeros((0, o) + tuple(out), x.dtype), xp.zeros((groups, 0, 0), x.dtype)
    # (the banded path is for real floats only: complex and integer inputs take im2col's)
    t = _band_tile(x.shape[1], o, ksize, out, stride, dilation, groups) \
        if x.dtype.kind == "f" else 0
    if t and all(q == out_size(s, k, 1, p, 1) for q, s, k, p in
                 zip(out, x.shape[2:], ksize, padding)) and all_finite(xp, x):
        # (an out_shape the input fills; a finite x: the band's zeros times an inf are nan)
        return _conv_band(xp, x, w, padding, out, t, bias)  # rows, not im2col's cols, go along
    if _channel_major(w.shape[1], out):
        cols = _cols_channel_major(xp, x, ksize, stride, padding, dilation, groups, out)
        y = xp.matmul(w.reshape(groups, o // groups, -1), cols)  # (g, Og, N*L)
        y = xp.ascontiguousarray(y.reshape(o, n, -1).transpose(1, 0, 2))
    else:
        cols = _gemm_cols(xp, x, ksize, stride, padding, dilation, groups, out)
        y = _from_groups(xp, xp.matmul(cols, _weight_matrix(xp, w, groups)), n, tuple(out))
    if bias is not None:  # y is the GEMM's fresh array: in place, the bias as one row of
        # O * prod(out), as batch norm's per-channel passes (see normalization._rows_of)
        y = y.reshape((n, o) + tuple(out))
        rows = _rows_of(y)
        xp.add(rows, _channel_row(xp, bias, y), out=rows)
    # cols goes along as an aux output: the weight gradient reuses it instead of redoing it
    return y.reshape((n, o) + tuple(out)), cols


@op("conv_transpose", jvp="multilinear", save="inputs", complex=True)
@in_float32
def _conv_transpose(xp, z, w, *, stride, padding, dilation, groups, size):
    y = _conv_transpose_arrays(xp, z, w, stride, padding, dilation, groups, size)
    rank = _result_format(z, w)
    return in_format(xp, y, rank) if rank else y


def _conv_transpose_arrays(xp, z, w, stride, padding, dilation, groups, size):
    n, o = z.shape[:2]
    ksize, sp = w.shape[2:], z.shape[2:]
    nd = len(ksize)
    cg, og = w.shape[1], o // groups
    if n == 0:  # an empty batch
        return xp.zeros((0, groups * cg) + tuple(size), z.dtype)
    t = _band_tile(cg, o, ksize, sp, stride, dilation, groups) if z.dtype.kind == "f" else 0
    if t and all_finite(xp, z):  # (the band's zeros times an inf in z would be nan)
        return _conv_transpose_band(xp, z, w, padding, size, t)
    reach = [d * (k - 1) for d, k in zip(dilation, ksize)]
    if cg < _CONV_DX_MIN_CHANNELS and 5 * cg * math.prod(ksize) > og * sp[-1]:
        # many taps and channels against short output rows: the batch-innermost col2im's
        # one transposing copy of z (~3 ns a value) beats per-row adds (~15 ns a row)
        return _conv_transpose_batch_last(xp, z, w, stride, padding, dilation, groups, size)
    if _shifted_ok(z, w, stride, padding, dilation, groups, size) and all_finite(xp, w):
        return _conv_transpose_shifted(xp, z, w, padding, size)
    if cg >= _CONV_DX_MIN_CHANNELS and all(s == 1 for s in stride) and \
            all(r >= lo for r, (lo, _) in zip(reach, padding)):
        # unit stride and enough channels for a well-shaped GEMM: a plain convolution of z
        # with the flipped, transposed kernel; its im2col copy beats col2im's per-tap adds
        wf = w.reshape((groups, og, cg) + ksize).swapaxes(1, 2).reshape((groups * cg, og)
                                                                        + ksize)
        wf = wf[(Ellipsis,) + (slice(None, None, -1),) * nd]
        pads = tuple((r - lo, max(0, sz + lo - q)) for r, (lo, _), sz, q in
                     zip(reach, padding, size, sp))
        return _conv.kernel(xp, z, wf, stride=stride, padding=pads, dilation=dilation,
                            groups=groups, out_shape=tuple(size))[0]
    # cols^T = W^T z in (C, *k, N, *sp) order: each tap's slab then has the output row as
    # its contiguous inner run, and col2im adds it into a (C, N, *size) buffer
    zt = xp.ascontiguousarray(z.reshape(n, groups, og, -1).transpose(1, 2, 0, 3))
    wt = w.reshape(groups, og, -1).transpose(0, 2, 1)  # (g, Cg*K, Og)
    cols = xp.matmul(wt, zt.reshape(groups, og, -1)).reshape((groups * cg,) + ksize + (n,) + sp)
    cols = xp.moveaxis(cols, 1 + nd, 1)  # (C, N, *k, *sp) view
    buf = col2im(xp, cols, size, ksize, stride, padding, dilation)  # (C, N, *size)
    return xp.ascontiguousarray(xp.moveaxis(buf, 0, 1))



def _shifted_ok(z, w, stride, padding, dilation, groups, size):
    """The input gradient of a unit-stride 2-D conv with enough channels, float32/64 NumPy
    arrays with MKL's GEMM: `_conv_transpose_shifted`."""
    return (type(z) is np.ndarray and blas.BACKEND == "mkl" and len(stride) == 2
            and groups == 1 and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and _CONV_DX_MIN_CHANNELS <= min(w.shape[:2]) and max(w.shape[:2]) <= 64
            and z.dtype in _SHIFTED_DTYPES
            and w.dtype == z.dtype and all(lo >= 0 and hi >= 0 for lo, hi in padding)
            and all(lo + s <= q + k - 1 for (lo, _), s, q, k in
                    zip(padding, size, z.shape[2:], w.shape[2:])))


_SHIFTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _conv_transpose_shifted(xp, z, w, padding, size):
    """dx of y = conv(x, w) (unit stride, 2-D) with no im2col: on each image's padded grid
    (Hp x Wp, flattened), the input position of output p through tap (a, b) is p + a * Wp + b,
    so each tap's contribution, z's rows times w[:, :, a, b], is one GEMM accumulated (beta = 1)
    onto a shifted run of rows of one channels-last buffer. The grid's rows past the outputs
    are zeros in z (hence the caller's finite-w check). Measured against the im2col path
    (up to 64 channels; 128 -> 128 was 6% slower): the digits CNN's 32 -> 64 3x3 layer 1.53 ->
    1.36 ms, a 32x32 image's 21.3 -> 8.3 ms, a 56x56 one's 19.4 -> 11.6 ms."""
    n, o, ho, wo = z.shape
    c, (kh, kw) = w.shape[1], w.shape[2:]
    hp, wp = ho + kh - 1, wo + kw - 1
    rows = n * hp * wp
    grid = xp.zeros((n, hp, wp, o), z.dtype)
    grid[:, :ho, :wo] = z.transpose(0, 2, 3, 1)
    grid = grid.reshape(rows, o)
    out = xp.zeros((rows + (kh - 1) * wp + kw - 1, c), z.dtype)
    for a in range(kh):
        for b in range(kw):
            shift = a * wp + b
            if not blas.matmul_add(grid, xp.ascontiguousarray(w[:, :, a, b]),
                                   out[shift:shift + rows]):
                out[shift:shift + rows] += grid @ w[:, :, a, b]
    (lo_h, _), (lo_w, _) = padding
    out = out[:rows].reshape(n, hp, wp, c)[:, lo_h:lo_h + size[0], lo_w:lo_w + size[1]]
    return xp.ascontiguousarray(out.transpose(0, 3, 1, 2))


@op("conv_weight", save="inputs[0, 1]", complex=True)  # not the optional cols (unread)
@in_float32
def _conv_weight(xp, x, dy, *cols, stride, padding, dilation, groups, ksize):
    """The weight gradient; `cols` (optional) is conv's aux output, im2col(x), reused."""
    cols = cols[0] if cols else None
    cg = x.shape[1] // groups
    n, o = dy.shape[:2]
    if n == 0:  # an empty batch: a sum of no terms
        return xp.zeros((o, cg) + tuple(ksize), dy.dtype)
    t = _band_tile(cg, o, ksize, dy.shape[2:], stride, dilation, groups) \
        if x.dtype.kind == "f" else 0
    if t:  # the forward's aux is the banded path's rows (2-D) when it took that path too
        rows = cols if cols is not None and cols.ndim == 2 else None
        return _conv_weight_band(xp, x, dy, rows, padding, ksize, t)
    if _channel_major(cg, dy.shape[2:]):
        if cols is None:
            cols = _cols_channel_major(xp, x, ksize, stride, padding, dilation, groups,
                                       dy.shape[2:])
        dyg = xp.ascontiguousarray(dy.reshape(n, o, -1).transpose(1, 0, 2))
        # (g, K, N*L) @ (g, N*L, Og), transposed: OpenBLAS runs this orientation of the long-K
        # product faster (0.54 against 0.71 ms on LeNet's first layer)
        dw = xp.matmul(cols, dyg.reshape(groups, o // groups, -1).transpose(0, 2, 1))
        dw = dw.transpose(0, 2, 1)
        return dw.reshape((o, cg) + tuple(ksize))
    if cols is None:
        cols = _gemm_cols(xp, x, ksize, stride, padding, dilation, groups, dy.shape[2:])
    dw = xp.matmul(cols.transpose(0, 2, 1), _to_groups(xp, dy, groups))  # (g, K*Cg, Og)
    dw = dw.reshape((groups,) + tuple(ksize) + (cg, -1))
    dw = xp.moveaxis(xp.moveaxis(dw, -1, 1), -1, 2)  # (g, Og, Cg, *k)
    return xp.ascontiguousarray(dw).reshape((dy.shape[1], cg) + tuple(ksize))


def _attrs(ctx):
    return dict(stride=ctx.stride, padding=ctx.padding, dilation=ctx.dilation,
                groups=ctx.groups)


# Complex inputs: each op is bilinear and holomorphic in both arguments, so torch's conjugate
# Wirtinger gradient in one argument is the real rule with the other argument conjugated (conj
# is the identity on real tensors, as in matmul's rule).
@_conv.grad
def conv_backward(ctx, dy):
    x, w = ctx.inputs[:2]
    need, a = ctx.needs_input_grad, _attrs(ctx)
    dx = _conv_transpose(dy, conj(w), size=ctx.input_shapes[0][2:], **a) if need[0] else None
    dw = None
    if need[1]:
        xc = conj(x)  # the forward's im2col(x) (aux) serves only where x is its own conjugate
        aux = (ctx.aux or ()) if xc is x else ()
        dw = _conv_weight(xc, dy, *aux, ksize=ctx.input_shapes[1][2:], **a)
    if len(need) == 2:
        return dx, dw
    return dx, dw, (dy.sum((0,) + tuple(range(2, dy.ndim))) if need[2] else None)


@_conv_transpose.grad
def conv_transpose_backward(ctx, dy):
    z, w = ctx.inputs
    need, a = ctx.needs_input_grad, _attrs(ctx)
    dz = _conv(dy, conj(w), out_shape=ctx.input_shapes[0][2:], **a) if need[0] else None
    dw = _conv_weight(dy, conj(z), ksize=ctx.input_shapes[1][2:], **a) if need[1] else None
    return dz, dw


@_conv_weight.grad
def conv_weight_backward(ctx, dw):
    x, dy = ctx.inputs[:2]
    need, a = ctx.needs_input_grad, _attrs(ctx)
    dx = _conv_transpose(conj(dy), dw, size=ctx.input_shapes[0][2:], **a) if need[0] else None
    ddy = _conv(conj(x), dw, out_shape=ctx.input_shapes[1][2:], **a) if need[1] else None
    return (dx, ddy) + (None,) * (len(need) - 2)  # cols: im2col(x), reached through x


# ---- argument checking -------------------------------------------------------------------
def ntuple(value, n, name, op_name):
    """int or sequence -> tuple of n ints (torch's _ntuple), with a clear error."""
    if isinstance(value, (int, np.integer)) or isinstance(value, Tensor) and not value.shape:
        return (int(value),) * n  # (a 0-d integer tensor too: torch takes it by __index__)
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise RuntimeError(f"{op_name}: expected {name} to be a single int or a tuple of {n} "
                           f"ints, but got {name}={value}")
    return value


def _dims_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _same_dtype(x, w, name, bias=None):
    if not isinstance(x, Tensor) or not isinstance(w, Tensor):
        raise TypeError(f"{name}(): expected input and weight to be Tensors, got "
                        f"{type(x).__name__} and {type(w).__name__}")
    if w.dtype != x.dtype:
        raise RuntimeError(f"{name}(): Input type ({x.dtype}) and weight type ({w.dtype}) "
                           f"should be the same; convert one with .to()")
    if isinstance(bias, Tensor) and bias.dtype != x.dtype:
        raise RuntimeError(f"{name}(): Input type ({x.dtype}) and bias type ({bias.dtype}) "
                           f"should be the same; convert one with .to()")


# torch's CPU kernels by dtype: floating and complex ones everywhere; of the integer dtypes,
# int64 everywhere, the others (but the unsigned wider than 8 bits) in undilated convolutions
# only, and bool nowhere. Each refusal names torch's kernel that lacks the dtype.
_TORCH_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short",
                "int32": "Int", "int64": "Long", "uint16": "UInt16", "uint32": "UInt32",
                "uint64": "UInt64"}
_CONV_INTS = frozenset(("uint8", "int8", "int16", "int32", "int64"))


def _check_kernel_dtype(x, ksize, stride, pads, dilation, transposed):
    """Raise torch's NotImplementedError for an integer or bool dtype that its CPU kernel for
    this convolution lacks (an empty batch runs no kernel: torch returns it for any dtype)."""
    dt = x._data.dtype
    if dt.kind not in "biu" or dt.name == "int64" or x.shape[0] == 0:
        return
    nd = len(ksize)
    if transposed:
        kernel = f"slow_conv_transpose{max(nd, 2)}d_out_cpu"
    elif any(d != 1 for d in dilation):
        kernel = "slow_conv_dilated<>"
    elif dt.name in _CONV_INTS:
        return
    elif nd < 3:
        kernel = "slow_conv2d_cpu"
    elif all(k == 1 for k in ksize) and all(s == 1 for s in stride) and \
            not any(lo or hi for lo, hi in pads):
        kernel = "slow_conv3d_cpu"
    else:
        kernel = "compute_columns3d"
    raise NotImplementedError(f"\"{kernel}\" not implemented for "
                              f"'{_TORCH_NAMES.get(dt.name, dt.name)}' (as torch); convert the "
                              f"input and weight with .float() or .long()")


def _batched(input, nd, name):
    rank = input._data.ndim
    if rank not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"{name}, but got input of size: {_dims_str(input.shape)}")
    return (input.unsqueeze(0), False) if rank == nd + 1 else (input, True)


def _check_common(stride, dilation, groups, padding):
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")


def _check_bias(bias, n_out, w):
    if bias is not None and (bias._data.ndim != 1 or bias.shape[0] != n_out):
        raise RuntimeError(f"Given weight of size {_dims_str(w.shape)}, expected bias to be "
                           f"1-dimensional with {n_out} elements, but got bias of size "
                           f"{_dims_str(bias.shape)} instead")


def _add_bias(y, bias, nd):
    if bias is None:
        return y
    return y + bias.to(y.dtype).reshape((1, -1) + (1,) * nd)


def _convnd(input, weight, bias, stride, padding, dilation, groups, nd):
    name = f"conv{nd}d"
    _same_dtype(input, weight, name, bias)
    x, batched = _batched(input, nd, name)
    if weight._data.ndim != nd + 2:
        raise RuntimeError(f"{name}: expected weight to be {nd + 2}-dimensional (out_channels, "
                           f"in_channels/groups, *kernel_size), but got weight of size "
                           f"{_dims_str(weight.shape)}")
    stride = ntuple(stride, nd, "stride", name)
    dilation = ntuple(dilation, nd, "dilation", name)
    ksize = weight.shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            # torch pads the odd leftover on the right
            total = [d * (k - 1) for d, k in zip(dilation, ksize)]
            pads = tuple((t // 2, t - t // 2) for t in total)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'; expected 'valid' or "
                               f"'same' ({name})")
        flat_pad = (0,)
    else:
        flat_pad = ntuple(padding, nd, "padding", name)
        pads = tuple((p, p) for p in flat_pad)
    _check_common(stride, dilation, groups, flat_pad)
    c_out = weight.shape[0]
    if c_out < groups:  # torch's check; a weight without output channels has nothing to give
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {_dims_str(weight.shape)} "
                           f"instead")
    if x.shape[1] == 0:
        raise RuntimeError(f"{name}: the input {_dims_str(x.shape)} has no channels; a "
                           f"convolution needs at least one")
    if c_out % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{_dims_str(weight.shape)}] "
                           f"instead")
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {_dims_str(weight.shape)}, "
                           f"expected input{_dims_str(x.shape)} to have "
                           f"{weight.shape[1] * groups} channels, but got {x.shape[1]} channels "
                           f"instead")
    _check_bias(bias, c_out, weight)
    padded = [s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads)]
    eff = [d * (k - 1) + 1 for d, k in zip(dilation, ksize)]
    if any(p < e for p, e in zip(padded, eff)):
        raise RuntimeError(f"{name}: Calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, eff))}). Kernel size can't be greater than "
                           f"actual input size")
    if x._data.dtype.kind in "biu":
        _check_kernel_dtype(x, ksize, stride, pads, dilation, False)
    if any(lo != hi for lo, hi in pads):
        # as torch: an even 'same' kernel's odd leftover is padded (on the right) first, so
        # the convolution saves that copy, and writing the caller's input in place is legal
        x = _pad_constant(x, pads=((0, 0), (0, 0)) + tuple((0, hi - lo) for lo, hi in pads),
                          value=0)
        pads = tuple((lo, lo) for lo, _ in pads)
    extra = () if bias is None else (bias if bias.dtype == x.dtype else bias.to(x.dtype),)
    y = _conv(x, weight, *extra, stride=stride, padding=pads, dilation=dilation, groups=groups)
    return y if batched else y.squeeze(0)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation) over (N, C, L) or (C, L) input.

    >>> import flowgrad as flow
    >>> flow.conv1d(flow.tensor([[[1.0, 2.0, 3.0, 4.0]]]), flow.tensor([[[1.0, -1.0]]]))
    tensor([[[-1., -1., -1.]]])
    """
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution over (N, C, H, W) or (C, H, W); padding may be 'same' or 'valid'.

    >>> import flowgrad as flow
    >>> flow.conv2d(flow.ones(1, 1, 3, 3), flow.ones(1, 1, 2, 2)).shape
    flowgrad.Size([1, 1, 2, 2])
    """
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 2)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W)."""
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 3)


def _conv_transposend(input, weight, bias, stride, padding, output_padding, groups, dilation,
                      nd):
    name = f"conv_transpose{nd}d"
    # torch's 1-d and 2-d kernels add a real bias of any dtype to a floating result (cast to
    # it); its 3-d one and complex inputs insist on one dtype
    loose = nd < 3 and isinstance(bias, Tensor) and isinstance(input, Tensor) and \
        input._data.dtype.kind in "fV" and bias._data.dtype.kind in "biufV"
    _same_dtype(input, weight, name, None if loose else bias)
    x, batched = _batched(input, nd, name)
    if weight._data.ndim != nd + 2:
        raise RuntimeError(f"{name}: expected weight to be {nd + 2}-dimensional (in_channels, "
                           f"out_channels/groups, *kernel_size), but got weight of size "
                           f"{_dims_str(weight.shape)}")
    stride = ntuple(stride, nd, "stride", name)
    dilation = ntuple(dilation, nd, "dilation", name)
    padding = ntuple(padding, nd, "padding", name)
    output_padding = ntuple(output_padding, nd, "output_padding", name)
    _check_common(stride, dilation, groups, padding)
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)) or \
            any(op < 0 for op in output_padding):
        raise RuntimeError(f"{name}: output padding must be smaller than either stride or "
                           f"dilation, but got output_padding={output_padding}, "
                           f"stride={stride}, dilation={dilation}")
    c_in = weight.shape[0]
    if c_in % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{_dims_str(weight.shape)}] "
                           f"instead")
    if x.shape[1] != c_in:
        raise RuntimeError(f"Given transposed=1, weight of size {_dims_str(weight.shape)}, "
                           f"expected input{_dims_str(x.shape)} to have {c_in} channels, but "
                           f"got {x.shape[1]} channels instead")
    ksize = weight.shape[2:]
    size = tuple((z - 1) * s - 2 * p + d * (k - 1) + op + 1 for z, s, p, d, k, op in
                 zip(x.shape[2:], stride, padding, dilation, ksize, output_padding))
    if any(s <= 0 for s in size):
        raise RuntimeError(f"{name}: Given input size per channel {tuple(x.shape[2:])}, the "
                           f"calculated output size {size} is too small")
    _check_bias(bias, weight.shape[1] * groups, weight)
    if x._data.dtype.kind in "biu":
        _check_kernel_dtype(x, ksize, stride, (), dilation, True)
    y = _conv_transpose(x, weight, stride=stride, padding=tuple((p, p) for p in padding),
                        dilation=dilation, groups=groups, size=size)
    y = _add_bias(y, bias, nd)
    return y if batched else y.squeeze(0)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-D transposed convolution; weight is (in_channels, out_channels/groups, k)."""
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 1)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-D transposed convolution (the gradient of conv2d in its input)."""
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 2)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-D transposed convolution."""
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups,
                             dilation, 3)
