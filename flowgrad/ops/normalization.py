"""Normalisation layers' functional forms: batch_norm, instance_norm, layer_norm, group_norm,
rms_norm, local_response_norm, normalize.

batch/instance/layer/group norm share one fused primitive, `norm_affine`: mean and variance
over `axes`, normalise, then scale and shift, in one kernel. Its rule runs a fused NumPy
backward (`norm_affine_backward`) for a plain backward; under create_graph it writes the same
formula with flowgrad ops, so higher derivatives come out by construction.

>>> import flowgrad as flow
>>> x = flow.tensor([[1.0, 3.0]])
>>> flow.nn.functional.layer_norm(x, (2,))
tensor([[-1.0000,  1.0000]])
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..autograd import grad_mode
from ..errors import check_norm_params
from ..tensor import Tensor
from .halfprec import HALF, in_float32
from .layout import in_suggested_order, suggested_order

# (re-exported: the functional forms of this family)
from .normalize import _as_float, dist_norm, local_response_norm, normalize  # noqa: F401
from .reduce import mean_array
from .registry import op
from .shape import relaid
from .special import chunk_elements
from .summation import row_sums

__all__ = ["batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm",
           "local_response_norm", "normalize"]


# ---- the fused primitive ---------------------------------------------------------------------
def _per_channel(x, axes):
    """Batch norm's reduction (every dim but 1) on a float32/float64 array: the fast path."""
    return x.ndim >= 2 and x.dtype.kind == "f" and x.dtype.itemsize >= 4 and \
        tuple(axes) == (0,) + tuple(range(2, x.ndim))


def _channel_sum(xp, a, b=None):
    """Per-channel sum of a (or a * b) over every dim but 1, as float64 of shape (1, C, 1..).

    Each (sample, channel) row is summed by one BLAS gemv, then the N row sums in float64
    (torch accumulates batch statistics in double on CPU): several times faster than NumPy's
    reduction over non-adjacent axes, whose inner loop is one spatial row."""
    n, c = a.shape[:2]
    a3 = a.reshape(n, c, -1)
    if b is not None:
        a3 = a3 * b.reshape(n, c, -1)
    rows = xp.matmul(a3, xp.ones(a3.shape[2], a.dtype))
    return xp.add.reduce(rows, axis=0, dtype=xp.float64).reshape((1, c) + (1,) * (a.ndim - 2))


def _channel_stats(xp, x):
    """Batch mean and biased variance per channel (float64), in two passes as torch does;
    the mean corrected by its residuals' (see `_deviations`)."""
    count = x.size // x.shape[1]
    # the mean rounded to x's dtype, and the residuals' mean r about it: hi + r is the mean
    # to twice x's precision (x - hi is exact near the mean), xc - r the deviations to x's;
    # channels whose mean is within their spread of 0 (mean^2 <= var) have nothing to correct
    mean = (_channel_sum(xp, x) / count).astype(x.dtype)
    xc = _rows_of(x) - _channel_row(xp, mean, x)
    var = _channel_sum(xp, xc.reshape(x.shape), xc.reshape(x.shape)) / count
    if x.dtype == xp.float64 or xp.all(mean * mean <= var):
        return mean.astype(xp.float64), var
    r = _channel_sum(xp, xc.reshape(x.shape)) / count
    xc -= _channel_row(xp, r, x)
    return mean + r, _channel_sum(xp, xc.reshape(x.shape), xc.reshape(x.shape)) / count


def _split(xp, mean, dtype, rstd=None):
    """A float64 mean as float values hi + lo (lo None for a float64 input, and where lo
    moves no deviation by half an ulp of the spread 1 / rstd)."""
    hi = mean.astype(dtype)
    if dtype == mean.dtype:
        return hi, None
    lo = (mean - hi).astype(dtype)
    if rstd is not None and xp.all(xp.abs(lo) * rstd.reshape(lo.shape) <= _EPS32 / 2):
        return hi, None
    return hi, lo


def _deviations(xp, rows, mean, like=None, rstd=None):
    """rows - mean for a float64 mean of float32 rows, to float32's precision: x - hi is exact
    near the mean (Sterbenz), then - lo. x - float32(mean) carries the mean's rounding, c / s
    ulps of the spread s of values about c (rows at 300 +- 0.02: 2.9e-5 off where torch is
    1.5e-6). `like`: rows is `_rows_of(like)` and mean per channel."""
    hi, lo = _split(xp, mean, rows.dtype, rstd)
    row = (lambda v: _channel_row(xp, v, like)) if like is not None else (lambda v: v)
    d = rows - row(hi)
    if lo is not None:
        d -= row(lo)
    return d


def _rows_of(a):
    """(N, C, *S) viewed as (N, C * prod(S)): per-channel values then broadcast as one row of
    C * prod(S) (`_channel_row`), not as (1, C, 1, ..), whose broadcast runs NumPy's inner loop
    over one spatial plane at a time (the passes of batch norm ran 25-30% faster so)."""
    return a.reshape(a.shape[0], a.size // a.shape[0] if a.shape[0] else math.prod(a.shape[1:]))


def _channel_row(xp, v, like):
    """A per-channel value v (1, C, 1, ..) as the row that `_rows_of(like)` broadcasts."""
    return xp.repeat(v.reshape(-1).astype(like.dtype), math.prod(like.shape[2:]))


@op("batch_stats", n_out=2, differentiable=False)
@in_float32  # a half-precision input accumulates in float32, as torch
def _batch_stats(xp, x, *, axes):
    """Mean and biased variance over `axes` (keepdims), in float64 as torch on CPU."""
    if _per_channel(x, axes):
        return _channel_stats(xp, x)
    data = x.astype(xp.float64)
    return data.mean(axis=axes, keepdims=True), data.var(axis=axes, keepdims=True)


def _rows_path(x, axes, wb):
    """Layer norm's reduction (the trailing dims) of a non-empty float32/float64 array, with
    weight and bias (if any) of the normalised shape: the row-chunked fast path."""
    k = len(axes)
    return x.dtype.kind == "f" and x.dtype.itemsize >= 4 and x.size > 0 and k > 0 and \
        tuple(axes) == tuple(range(x.ndim - k, x.ndim)) and \
        all(t.shape == x.shape[x.ndim - k:] and t.dtype == x.dtype for t in wb)


def _block_rows(x, n):
    """Rows per block of about special.CHUNK elements: each block's passes then run in the
    core's cache (one pass over a (2048, 128) float32 array from memory costs 2.5 times one
    from cache)."""
    return max(1, chunk_elements(x) // n)


def _row_blocks(m, rows):
    return ((r, min(r + rows, m)) for r in range(0, m, rows))


_EPS32 = float(np.finfo(np.float32).eps)

# rows up to this long multiply by the weight (add the bias) as a block-sized tile of copies
# of it: NumPy's broadcast of an (n,) row runs its inner loop once per row (a (256, 128)
# block: 7.6 us against 3.4 for the tile, made once per call)
_TILE_MAX_ROW = 512


def _column_tile(xp, v, rows):
    """v (n,) repeated as a (rows, n) array for the blocks' same-shape passes, or as one row
    (1, n) where its rows are long enough to broadcast as fast: either way a block of r rows
    reads `tile[:r]`."""
    if v.shape[0] > _TILE_MAX_ROW or rows < 2:
        return v[None]
    tile = xp.empty((rows, v.shape[0]), v.dtype)
    tile[...] = v
    return tile


class _Outer:
    """Outer products u v^T of a block's per-row column u and a fixed row v, by a GEMM of
    inner size 2 (v padded by a zero row; exact: one product per value): NumPy's broadcast
    of a column runs its inner loop once per short row, as slow as two same-shape passes
    (a (256, 128) block: 8.8 us against 4 for the GEMM, and 4 for a same-shape product);
    inner size 1 takes a slow road of OpenBLAS's (38 us)."""

    def __init__(self, xp, v, rows):
        self.left = xp.zeros((rows, 2), v.dtype)
        self.right = xp.zeros((2, v.shape[0]), v.dtype)
        self.right[0] = v
        self.out = xp.empty((rows, v.shape[0]), v.dtype)

    def __call__(self, xp, u):
        r = u.shape[0]
        self.left[:r, 0] = u
        return xp.matmul(self.left[:r], self.right, out=self.out[:r])


def _sum_squares(xp, y):
    """Each row's sum of squares by BLAS gemvs of the squares (`row_sums`, blocks of 128
    columns): within a few ulps, as torch's cascaded moments (einsum's one running float32 sum
    was 2.9e-6 off over 1000 values: layer_norm's output 36x torch's error, precision_fuzz
    seeds 9402986, 9405512; one gemv along a row of 4096, 9e-6: seed 11126793). As fast as
    the einsum on (2048, 128) float32, 8% faster on longer rows (the temporary of squares was
    thought to cost more: it does not)."""
    sq = xp.multiply(y, y)
    return row_sums(xp, sq)


def _rows_forward(xp, x, k, w, b, eps):
    """Normalise the rows of x viewed as (m, n): row sums by BLAS gemv (several times faster
    than NumPy's reduction along a short last axis), two passes for the variance as before,
    the statistics over the whole array at once (per-block calls cost more than the cache
    saves: a (2048, 128) array, 234 us against 284); then, on row blocks in cache, y = xc *
    (rstd w^T) + b, the scale an `_Outer` product."""
    n = math.prod(x.shape[x.ndim - k:])
    m = x.size // n
    x2 = x.reshape(m, n)
    ones = xp.ones(n, x.dtype)
    mean = row_sums(xp, x2)
    mean /= n
    y = xp.subtract(x2, mean[:, None])
    rstd = _sum_squares(xp, y)
    rstd /= n
    if x.dtype != xp.float64 and not xp.all(mean * mean <= rstd):  # (rstd: the variance)
        # the residual mean r: x - mean is exact near the mean, so y - r are the deviations
        # to float32's precision and mean + r (float64, for the backward) the mean to twice
        # it; y alone carried the mean's rounding (see `_deviations`). Taken off the rows
        # only where it moves them by more than half an ulp of their spread. Rows whose
        # mean is within their spread of 0 (most: activations about 0) skip all of it
        r = row_sums(xp, y)
        r /= n
        mean = mean.astype(xp.float64) + r
        if not xp.all(r * r <= rstd * (_EPS32 / 2) ** 2):
            y -= r[:, None]
            rstd = _sum_squares(xp, y)
            rstd /= n
    rstd += eps
    xp.sqrt(rstd, out=rstd)
    xp.divide(1, rstd, out=rstd)
    rows = min(m, _block_rows(x, n))
    outer = _Outer(xp, w.reshape(n) if w is not None else ones, rows)
    b2 = _column_tile(xp, b.reshape(n), rows) if b is not None else None
    for r0, r1 in _row_blocks(m, rows):
        xc = y[r0:r1]
        xc *= outer(xp, rstd[r0:r1])
        if b2 is not None:
            xc += b2[:r1 - r0]
    stat_shape = x.shape[:x.ndim - k] + (1,) * k
    return y.reshape(x.shape), mean.reshape(stat_shape), rstd.reshape(stat_shape)


def _block_sums(xp, v, a, rows):
    """v @ a (a (m,) vector times an (m, n) matrix) as the sum of its blocks of `rows` rows'
    products, by one batched gemv: closer to a float64 sum than one gemv over all m rows (a
    layer norm's weight gradient over 2048 rows: 2e-5 off against 7e-5)."""
    m, n = a.shape
    full = m // rows * rows
    total = xp.matmul(v[:full].reshape(-1, 1, rows), a[:full].reshape(-1, rows, n)).sum(
        axis=(0, 1))
    if full < m:
        total += xp.matmul(v[full:], a[full:])
    return total


def _rows_backward(xp, x, mean, rstd, dy, w, k, need_w, need_b):
    """Layer norm's backward on row blocks in cache, in centred form: with g = dy * w,
    xc = x - mean and ds = sum(g xc) per row, dx = rstd g + b xc + c for per-row b = -ds
    rstd^3 / n and c = -mean(rstd g). Every sum is a BLAS gemv; dw and db come out reduced to
    the normalised shape. torch's b = (sum(g) mean - sum(g x)) rstd^3 / n and b x + c cancel
    where the mean is large beside the spread (a row of one value, eps 1e-12: dx 0.06 where
    it is 0), as dw = rstd @ (dy x) - (mean rstd) @ dy did (2e-4 where it is 0); xc is taken
    from the float64 mean (see `_deviations`)."""
    shape = x.shape[x.ndim - k:]
    n = math.prod(shape)
    m = x.size // n
    x2, dy2, rs = x.reshape(m, n), dy.reshape(m, n), rstd.reshape(m)
    hi, lo = _split(xp, mean.reshape(m), x.dtype, rs)
    ones = xp.ones(n, x.dtype)
    w2 = w.reshape(n) if w is not None else ones
    dx = xp.empty((m, n), x.dtype)
    rows = min(m, _block_rows(x, n))
    dw = xp.zeros(n, x.dtype) if need_w else xp.zeros((0,), x.dtype)
    db = _block_sums(xp, xp.ones(m, x.dtype), dy2, rows) if need_b else xp.zeros((0,), x.dtype)
    buf, buf2 = xp.empty((rows, n), x.dtype), xp.empty((rows, n), x.dtype)
    outer = _Outer(xp, w2, rows)  # rstd w^T
    tiny = float(np.finfo(x.dtype).tiny)
    for r0, r1 in _row_blocks(m, rows):
        g, q, p = dx[r0:r1], buf[:r1 - r0], buf2[:r1 - r0]
        xp.subtract(x2[r0:r1], hi[r0:r1, None], out=q)
        if lo is not None:
            q -= lo[r0:r1, None]
        xp.multiply(q, dy2[r0:r1], out=p)  # dy xc
        if need_w:
            dw += xp.matmul(rs[r0:r1], p)
        r = rs[r0:r1]
        b = xp.matmul(p, w2) * r * r / -n  # (-ds rstd^2 / n, left to right: no underflow)
        xp.multiply(dy2[r0:r1], outer(xp, r), out=g)
        c = row_sums(xp, g) / -n  # (a row of one value: c = -g exactly)
        rb = r * b
        if xp.all(xp.isfinite(rb) & ((xp.abs(rb) >= tiny) | (b == 0))):
            q *= rb[:, None]
        else:  # rstd^3 under- or overflows (|x| ~ 1e22: 1e-66): (xc rstd) b
            q *= r[:, None]
            q *= b[:, None]
        g += q
        g += c[:, None]
        bad = ~(xp.isfinite(b) & xp.isfinite(c))
        if bad.any():
            _nonfinite_rows(xp, g, bad, x2[r0:r1], dy2[r0:r1], w2, hi[r0:r1], r, n)
    return dx.reshape(x.shape), dw.reshape(shape) if need_w else dw, \
        db.reshape(shape) if need_b else db


def _nonfinite_rows(xp, g, bad, x, dy, w, mean, rstd, n):
    """The rows of dx whose sums are not finite (an inf or nan in dy) in torch's uncentred
    form, (sum(g) mean - sum(g x)) rstd^3 / n x + c: the nan and infinities land where
    torch's do (its inf - inf; the centred form gives signed infinities there)."""
    rows = xp.nonzero(bad)[0]
    with xp.errstate(invalid="ignore", over="ignore"):
        gw, xr, mu, r = dy[rows] * w, x[rows], mean[rows], rstd[rows]
        ds, sb = (gw * xr).sum(1), gw.sum(1)
        b = (sb * mu - ds) * (r * r * r) / n
        c = -b * mu - sb * r / n
        g[rows] = gw * r[:, None] + b[:, None] * xr + c[:, None]


def _float32(xp, a):
    return a.astype(xp.float32) if a.dtype in HALF else a


# the rule reads x and the weight (input 1), never the bias nor the statistics: only those
# two are saved, as torch's batch/group norm, so a bias written in place stays legal
@op("norm_affine", save="inputs[0, 1]")
def _norm_affine(xp, x, *wb_stats, axes, eps, has_w, has_b, has_stats=False, order=None):
    # C order, as torch allocates them; batch norm's y in `order` where given (channels_last:
    # layout.suggested_order)
    y, mean, rstd = _norm_affine_arrays(xp, x, *wb_stats, axes=axes, eps=eps, has_w=has_w,
                                        has_b=has_b, has_stats=has_stats)
    return (in_suggested_order(xp, y, order), xp.ascontiguousarray(mean),
            xp.ascontiguousarray(rstd))


def _norm_affine_arrays(xp, x, *wb_stats, axes, eps, has_w, has_b, has_stats):
    if x.dtype in HALF:
        # normalised in float32 with the weight and bias as given (the input's dtype or
        # float32: torch's mixed precision) and rounded once; the statistics the rule reads
        # stay float32, as torch's (rounded, a mean of 3 with a spread of 0.05 lost a quarter
        # of the spread, and the gradients most of their digits)
        y, mean, rstd = _normalize(xp, x.astype(xp.float32), *(_float32(xp, a) for a in wb_stats),
                                   axes=axes, eps=eps, has_w=has_w, has_b=has_b,
                                   has_stats=has_stats)
        return y.astype(x.dtype), mean, rstd
    return _normalize(xp, x, *wb_stats, axes=axes, eps=eps, has_w=has_w, has_b=has_b,
                      has_stats=has_stats)


def _normalize(xp, x, *wb_stats, axes, eps, has_w, has_b, has_stats):
    wb = wb_stats[:has_w + has_b]
    if has_stats or _per_channel(x, axes):
        # batch norm: float64 statistics (batch_norm hands in the ones it already computed
        # for the running averages, as inputs), then y = (x - hi) * alpha + beta with
        # beta = b - lo * alpha, the mean hi + lo (see `_deviations`); x * alpha + b -
        # mean * alpha cancelled, c / s ulps off for channels at c +- s (c / s = 350: 1.5e-5
        # where torch is 6e-7). The float64 mean is kept for the backward
        mean, var = wb_stats[-2:] if has_stats else _channel_stats(xp, x)
        rstd = 1.0 / xp.sqrt(var + eps)
        alpha = rstd * wb[0] if has_w else rstd
        bias = wb[1 if has_w else 0] if has_b else 0.0
        if xp.all(xp.abs(mean * alpha) <= 1.0):  # (little to cancel: torch's two passes)
            y = _rows_of(x) * _channel_row(xp, alpha, x)
            y += _channel_row(xp, bias - mean * alpha, x)
            return y.reshape(x.shape), mean, rstd.astype(x.dtype)
        hi, lo = _split(xp, mean, x.dtype)
        y = _rows_of(x) - _channel_row(xp, hi, x)
        y *= _channel_row(xp, alpha, x)
        y += _channel_row(xp, bias - (0.0 if lo is None else lo) * alpha, x)
        return y.reshape(x.shape), mean, rstd.astype(x.dtype)
    if _rows_path(x, axes, wb):
        return _rows_forward(xp, x, len(axes), wb[0] if has_w else None,
                             wb[-1] if has_b else None, eps)
    # mean_array, not x.mean: an inf - inf there warns from NumPy's code (see reduce._sum)
    mean = mean_array(xp, x, axes, True)
    xc = x - mean
    if x.dtype != xp.float64:  # the residual mean, as the rows path's
        r = mean_array(xp, xc, axes, True)
        xc -= r
        mean = mean.astype(xp.float64) + r
    var = mean_array(xp, xc * xc, axes, True)
    rstd = (1.0 / xp.sqrt(var + eps)).astype(x.dtype, copy=False)
    y = xc * rstd
    if has_w:
        y *= wb[0]
    if has_b:
        y += wb[1 if has_w else 0]
    return y, mean, rstd  # mean and rstd: aux outputs kept for the rule


@_norm_affine.grad
def norm_affine_backward(ctx, dy):
    saved = ctx.inputs
    x, w = saved[0], saved[1] if ctx.has_w else None
    need = ctx.needs_input_grad
    need_w = bool(ctx.has_w and need[1])
    need_b = bool(ctx.has_b and need[1 + ctx.has_w])
    axes = ctx.axes
    if not grad_mode.is_grad_enabled():  # plain backward: one fused NumPy pass
        mean, rstd = ctx.aux
        args = (x, mean, rstd, dy) + ((w,) if w is not None else ())
        # dw and db come back reduced when the weight and bias have the normalised shape
        trailing = tuple(ctx.input_shapes[0][-len(axes):]) if axes else None
        wb_shapes = ctx.input_shapes[1:1 + ctx.has_w + ctx.has_b]
        dx, dw, db = _norm_affine_backward(*args, axes=axes, need_w=need_w, need_b=need_b,
                                           trailing_wb=all(tuple(s) == trailing
                                                           for s in wb_shapes))
    else:  # create_graph: the same formula in flowgrad ops, differentiable in x and w
        low = x.dtype if x.dtype.name in ("bfloat16", "float16") else None
        if low is not None:  # (in float32, as the kernels)
            x, dy, w = x.float(), dy.float(), None if w is None else w.float()
        mean = x.mean(axes, keepdim=True)
        xc = x - mean
        rstd = ((xc * xc).mean(axes, keepdim=True) + ctx.eps).rsqrt()
        xhat = xc * rstd
        g = dy * w if w is not None else dy
        dx = rstd * (g - g.mean(axes, keepdim=True) - xhat * (g * xhat).mean(axes, keepdim=True))
        dx = dx if low is None else dx.to(low)
        dw = dy * xhat if need_w else None
        db = dy
    if ctx.has_w or ctx.has_b:  # (a half input's dw and db come in float32)
        params = saved[1].dtype
        dw = dw if dw is None or dw.dtype == params else dw.to(params)
        db = db if db is None or db.dtype == params else db.to(params)
    grads = [dx if need[0] else None]
    if ctx.has_w:
        grads.append(dw if need_w else None)
    if ctx.has_b:
        grads.append(db if need_b else None)
    if ctx.has_stats:
        grads += [None, None]
    return tuple(grads)


@op("norm_affine_backward", n_out=3, differentiable=False)
def _norm_affine_backward(xp, x, mean, rstd, dy, *w, axes, need_w, need_b,
                          trailing_wb=False):
    """dx (x's dtype), dw and db; a half-precision x is differentiated in float32, its dw and
    db left float32 (the rule gives them the parameters' dtype)."""
    if x.dtype in HALF:
        dx, dw, db = _normalize_backward(
            xp, x.astype(xp.float32), *(_float32(xp, a) for a in (mean, rstd, dy, *w)),
            axes=axes, need_w=need_w, need_b=need_b, trailing_wb=trailing_wb)
        return dx.astype(x.dtype), dw, db
    return _normalize_backward(xp, x, mean, rstd, dy, *w, axes=axes, need_w=need_w,
                               need_b=need_b, trailing_wb=trailing_wb)


def _normalize_backward(xp, x, mean, rstd, dy, *w, axes, need_w, need_b, trailing_wb):
    empty = xp.zeros((0,), x.dtype)
    if _per_channel(x, axes) and dy.dtype == x.dtype and (not w or w[0].shape == mean.shape):
        # batch norm: two per-channel sums (torch's sum_dy and dotp), then one affine pass
        # dx = dy * a + xc * b + c; dw and db come out already reduced to the channel shape
        count = x.size // x.shape[1]
        xc = _deviations(xp, _rows_of(x), mean, x, rstd)
        sdy, dotp = _channel_sum(xp, dy), _channel_sum(xp, dy, xc.reshape(x.shape))
        r = rstd.astype(xp.float64)
        k = r * w[0] if w else r
        dx = _rows_of(dy) * _channel_row(xp, k, x)
        xc *= _channel_row(xp, -k * r * r * dotp / count, x)
        dx += xc
        dx += _channel_row(xp, -k * sdy / count, x)
        dx = dx.reshape(x.shape)
        return (dx, ((dotp * r).astype(x.dtype) if need_w else empty),
                (sdy.astype(x.dtype) if need_b else empty))
    if trailing_wb and _rows_path(x, axes, w) and dy.dtype == x.dtype:
        return _rows_backward(xp, x, mean, rstd, dy, w[0] if w else None, len(axes), need_w,
                              need_b)
    xhat = _deviations(xp, x, mean, rstd=rstd) * rstd
    g = dy * w[0] if w else dy
    dx = rstd * (g - mean_array(xp, g, axes, True) - xhat * mean_array(xp, g * xhat, axes, True))
    # dw/db come back in x's shape; the engine sums them down to the parameter's shape
    return dx, (dy * xhat if need_w else empty), (dy if need_b else empty)


def _param(t, size, shape, name, what):
    """Check a per-channel parameter (weight, bias, running stat) and view it as `shape`."""
    if t is None:
        return None
    if tuple(t.shape) != tuple(size):
        raise RuntimeError(f"{name}: expected {what} of shape {tuple(size)}, got "
                           f"{tuple(t.shape)}")
    return t.reshape(shape) if tuple(shape) != tuple(size) else t


def _affine_normalize(x, axes, eps, w, b, stats=None, order=None):
    wb = tuple(t for t in (w, b) if t is not None)
    if any(t._data.dtype != x._data.dtype for t in wb) and x._data.dtype not in HALF:
        wb = tuple(t.to(x.dtype) for t in wb)  # (float32 ones beside a half input stay)
    return _norm_affine(x, *wb, *(stats or ()), axes=axes, eps=float(eps), has_w=w is not None,
                        has_b=b is not None, has_stats=stats is not None, order=order)


# ---- batch_norm and instance_norm ---------------------------------------------------------
@op("running_update", differentiable=False)
def _running_update(xp, running, stat, *factor, momentum, scale):
    """(1 - momentum) * running + momentum * scale * stat, in running's dtype; `factor`, when
    given, is the momentum as a 0-d array (BatchNorm(momentum=None): 1 / batches seen, so a
    compiled graph reads each call's), used as the Python float it holds."""
    if factor:
        momentum = float(factor[0])
    return ((1 - momentum) * running + momentum * (stat * scale).astype(running.dtype)
            ).astype(running.dtype, copy=False)


def _update_running(running, stat, momentum, scale=1.0):
    """running <- (1 - momentum) * running + momentum * scale * stat: the one path by which
    batch and instance norm write their running statistics (an op computes the new value,
    a copy_ under no_grad writes it into the buffer and bumps its version)."""
    factor = (momentum,) if isinstance(momentum, Tensor) else ()
    new = _running_update(running, stat.reshape(tuple(running.shape)), *factor,
                          momentum=0.0 if factor else momentum, scale=scale)
    with grad_mode.no_grad():
        running.copy_(new)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise each channel (dim 1) over the batch and spatial dims.

    Training: batch statistics; running_mean/running_var (if given) are updated in place with
    `momentum` and the unbiased batch variance, as torch does. Eval: the running statistics.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[1.0], [3.0]])
    >>> flow.nn.functional.batch_norm(x, None, None, training=True)
    tensor([[-1.0000],
            [ 1.0000]])
    """
    if training and eps <= 0.0:  # (torch's F.batch_norm checks; torch.batch_norm takes any)
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    if training and (running_mean is None) != (running_var is None):
        raise ValueError("batch_norm: running_mean and running_var must either both be None "
                         "or neither be None (training updates them together)")
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def _check_momentum(name, momentum):
    """A number, as torch's float argument (None is the modules' cumulative average, which
    they compute themselves; a Tensor is theirs: 1 / batches seen)."""
    if not isinstance(momentum, (numbers.Real, Tensor)):
        raise TypeError(f"{name}(): argument 'momentum' must be float, not "
                        f"{type(momentum).__name__} (the modules' momentum=None, a cumulative "
                        f"average, is theirs, not the function's)")


def _refuse_differentiable_stats(running_mean, running_var):
    """torch's native_batch_norm has no derivative for its running statistics: one that
    requires grad while grad mode is on is refused, in training and in eval (instance_norm's
    too, which runs it)."""
    if grad_mode.is_grad_enabled():
        for t, what in ((running_mean, "running_mean"), (running_var, "running_var")):
            if isinstance(t, Tensor) and t.requires_grad:
                raise RuntimeError(f"The function 'native_batch_norm' is not differentiable "
                                   f"with respect to argument '{what}'. This input cannot have "
                                   f"requires_grad True; pass it detached")


def _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps):
    x = _as_float(input, "batch_norm")
    check_norm_params("batch_norm", x, weight=weight, bias=bias, running_mean=running_mean,
                      running_var=running_var)
    if x._data.ndim < 2:
        raise ValueError(f"batch_norm: expected 2D or more input (N, C, ...), got input of "
                         f"shape {tuple(x.shape)}")
    c = x._data.shape[1]
    bshape = (1, c) + (1,) * (x._data.ndim - 2)
    w = _param(weight, (c,), bshape, "batch_norm", "weight")
    b = _param(bias, (c,), bshape, "batch_norm", "bias")
    for t, what in ((running_mean, "running_mean"), (running_var, "running_var")):
        _param(t, (c,), (c,), "batch_norm", what)
    axes = (0,) + tuple(range(2, x._data.ndim))
    if training:
        count = x._data.size // c if c else 0
        if count == 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input size {tuple(x.shape)}")
        _check_momentum("batch_norm", momentum)  # (after that check, as torch's)
        _refuse_differentiable_stats(running_mean, running_var)
        if count == 0:  # an empty batch: an empty output, the running statistics untouched
            y = x * 1.0 if w is None else x * w  # (torch's; weight and bias get zero grads)
            return y if b is None else y + b
        tracked = running_mean is not None or running_var is not None
        stats = None
        if tracked or _per_channel(x._data, axes):  # one set of float64 stats for both uses
            stats = _batch_stats(x, axes=axes)
        # the running statistics first, as torch's op updates them before it saves what its
        # backward reads: a checkpoint's recomputation, stopping once those are saved again,
        # updates them again, as torch's does
        if running_mean is not None:
            _update_running(running_mean, stats[0], momentum)
        if running_var is not None:
            _update_running(running_var, stats[1], momentum, count / (count - 1))
        return _affine_normalize(x, axes, eps, w, b,
                                 stats if _per_channel(x._data, axes) else None,
                                 order=suggested_order(x._data))
    _check_momentum("batch_norm", momentum)
    _refuse_differentiable_stats(running_mean, running_var)
    if running_mean is None or running_var is None:
        raise RuntimeError("batch_norm: running_mean and running_var must be defined in "
                           "evaluation mode (training=False)")
    # a bfloat16/float16 input is normalised in float32 and rounded once, as torch's opmath
    half = x._data.dtype in HALF
    xc = x.float() if half else x
    rm = running_mean.reshape(bshape).to(xc.dtype)
    rv = running_var.reshape(bshape).to(xc.dtype)
    y = (xc - rm) * (rv + eps).rsqrt()
    if w is not None:
        y = y * w.to(xc.dtype)
    if b is not None:
        y = y + b.to(xc.dtype)
    # (C-ordered as torch's output, whatever the layout of a strided input, or channels_last
    # where its strides suggest it)
    return relaid((y.to(x.dtype) if half else y).contiguous(), suggested_order(x._data))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each (sample, channel) over its spatial dims; running stats, if given, are
    updated with the batch-averaged instance statistics.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.instance_norm(flow.tensor([[[1.0, 2.0, 3.0]]]))
    tensor([[[-1.2247,  0.0000,  1.2247]]])
    """
    x = _as_float(input, "instance_norm")
    params = dict(weight=weight, bias=bias, running_mean=running_mean, running_var=running_var)
    half = x._data.dtype in HALF
    if half:  # torch's instance_norm takes each one in the input's dtype or float32, mixed
        for name, t in params.items():
            check_norm_params("instance_norm", x, **{name: t})
    else:
        check_norm_params("instance_norm", x, **params)
    if x._data.ndim < 3:
        raise ValueError(f"instance_norm: expected 3D or more input (N, C, L, ...), got "
                         f"input of shape {tuple(x.shape)}")
    if not use_input_stats:
        if half:  # (batch_norm's eval computes a half input in float32 anyway)
            weight, bias = (t if t is None else t.float() for t in (weight, bias))
            running_mean, running_var = (t if t is None else t.float()
                                         for t in (running_mean, running_var))
        return _batch_norm(x, running_mean, running_var, weight, bias, False, momentum, eps)
    if math.prod(x._data.shape[2:]) == 1:  # one value per (sample, channel): its own mean
        raise ValueError(f"instance_norm: expected more than 1 spatial element when "
                         f"training, got input of shape {tuple(x.shape)}")
    _check_momentum("instance_norm", momentum)  # (after that check, as torch's)
    _refuse_differentiable_stats(running_mean, running_var)
    c = x._data.shape[1]
    bshape = (1, c) + (1,) * (x._data.ndim - 2)
    w = _param(weight, (c,), bshape, "instance_norm", "weight")
    if w is not None:  # torch normalises with weight.repeat(N), so it saves a copy: as here
        w = w.clone()
    b = _param(bias, (c,), bshape, "instance_norm", "bias")
    axes = tuple(range(2, x._data.ndim))
    out = _affine_normalize(x, axes, eps, w, b)
    count = math.prod(x._data.shape[a] for a in axes)
    # no values per instance: the running statistics stay (torch's batch_norm of an empty
    # input), unless there are no instances either (their mean is nan, as torch's)
    if (running_mean is not None or running_var is not None) and \
            (count or not x._data.shape[0]):
        mean, var = _batch_stats(x, axes=axes)  # per (sample, channel)
        if running_mean is not None:
            _update_running(running_mean, mean.mean(0), momentum)
        if running_var is not None:
            _update_running(running_var, var.mean(0), momentum, count / max(count - 1, 1))
    return out


# ---- layer_norm, group_norm, rms_norm ----------------------------------------------------
def _normalized_shape(x, normalized_shape, name):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
        tuple(int(s) for s in normalized_shape)
    if len(shape) == 0 or len(shape) > x._data.ndim or \
            tuple(x.shape[x._data.ndim - len(shape):]) != shape:
        raise RuntimeError(f"{name}: given normalized_shape={list(shape)}, expected input "
                           f"with shape [*, {', '.join(map(str, shape))}], but got input of "
                           f"size {list(x.shape)}")
    return shape


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last len(normalized_shape) dims, then scale by weight and shift by
    bias (both of normalized_shape).

    >>> import flowgrad as flow
    >>> flow.nn.functional.layer_norm(flow.tensor([[0.0, 2.0, 4.0]]), 3).shape
    flowgrad.Size([1, 3])
    """
    x = _as_float(input, "layer_norm")
    check_norm_params("layer_norm", x, weight=weight, bias=bias)
    shape = _normalized_shape(x, normalized_shape, "layer_norm")
    w = _param(weight, shape, shape, "layer_norm", "weight")
    b = _param(bias, shape, shape, "layer_norm", "bias")
    axes = tuple(range(x._data.ndim - len(shape), x._data.ndim))
    return _affine_normalize(x, axes, eps, w, b)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Split the channels (dim 1) into num_groups groups and normalise each group of each
    sample; then a per-channel weight and bias.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.group_norm(flow.arange(8.0).reshape(1, 4, 2), 2).shape
    flowgrad.Size([1, 4, 2])
    """
    x = _as_float(input, "group_norm")
    check_norm_params("group_norm", x, weight=weight, bias=bias)
    if x._data.ndim < 2:
        raise RuntimeError(f"group_norm: expected at least 2 dims (N, C, ...), got input of "
                           f"shape {tuple(x.shape)}")
    n, c = x._data.shape[:2]
    if num_groups > 0 and n * c // num_groups * math.prod(x._data.shape[2:]) == 1:
        # torch's _verify_batch_size on (N * C // G, G, *spatial), in train and eval alike
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {list(x.shape)}")
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"group_norm: expected number of channels in input to be "
                           f"divisible by num_groups, but got input of shape "
                           f"{tuple(x.shape)} and num_groups={num_groups}")
    if x._data.dtype in HALF:  # normalised and scaled in float32, rounded once, as torch's
        wb = [t if t is None else t.float() for t in (weight, bias)]
        return group_norm(x.float(), num_groups, *wb, eps=eps).to(x.dtype)
    bshape = (1, c) + (1,) * (x._data.ndim - 2)
    w = _param(weight, (c,), bshape, "group_norm", "weight")
    b = _param(bias, (c,), bshape, "group_norm", "bias")
    group = c // num_groups * math.prod(x._data.shape[2:])  # not -1: an empty batch has n = 0
    y = _affine_normalize(x.reshape(n, num_groups, group), (2,), eps, None, None)
    y = y.reshape(tuple(x.shape))
    if w is not None:
        y = y * w.to(x.dtype)
    if b is not None:
        y = y + b.to(x.dtype)
    return relaid(y, suggested_order(x._data))  # (torch's: channels_last stays)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x**2 over the last dims) + eps) * weight; eps defaults to the machine
    epsilon of the dtype it computes in (float32 for a bfloat16 or float16 input), as torch."""
    x = _as_float(input, "rms_norm", "fVc")  # complex: x * rsqrt(mean(x * x)), as torch
    shape = _normalized_shape(x, normalized_shape, "rms_norm")
    w = _param(weight, shape, shape, "rms_norm", "weight")
    dims = tuple(range(x._data.ndim - len(shape), x._data.ndim))
    # bfloat16 and float16 compute in float32 and round once at the end, as torch's opmath
    # (with bfloat16's own epsilon, 2**-7, as the default, a result was 5% off torch's)
    half = x._data.dtype in HALF
    xc = x.float() if half else x
    if eps is None:
        eps = float(np.finfo(xc._data.dtype).eps)
    y = xc * ((xc * xc).mean(dims, keepdim=True) + eps).rsqrt()
    if w is not None:
        y = y * w.to(xc.dtype)
    y = y.contiguous()  # (a strided input's layout: torch's output is C-ordered)
    return y.to(x.dtype) if half else y
