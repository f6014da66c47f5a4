"""Float sums of arrays for kernels (`add_reduce`): the reductions sum, mean, var/std and the
engine's un-broadcast `sum_to` add through it. Sums over many rows are a cascade, as torch's
(NumPy and a gemv add rows one after another, so their float32 error grows with the count)."""
from __future__ import annotations

import math

from ..blas import column_sums_add
from .halfprec import HALF


def add_reduce(xp, x, axes, keepdims=False):
    """xp.add.reduce(x, axis=axes, keepdims=keepdims), the leading reduced dims first when the
    axes also skip a dim (a conv bias's (0, 2, 3)): NumPy's reduction over non-adjacent axes
    runs an inner loop per spatial row, 3-4x slower than adding whole rows over the leading
    dims and then reducing what is left. Not the same bits as NumPy's order: the last ulps
    differ, with errors of the same size (measured against float64 sums: 1.2e-7 relative
    here, 1.3e-7 NumPy's)."""
    if x.dtype in HALF:  # bfloat16, float16: in float32, as torch
        # (ml_dtypes adds bfloat16 in bfloat16, where 256 + 1 == 256; so do un-broadcast grads)
        y = xp.add.reduce(x, axis=axes, keepdims=keepdims, dtype=xp.float32)
        return y.astype(x.dtype)
    if axes and not axes[0] and x.shape[0] > _CASCADE_ROWS and x.dtype.char in "fd" and \
            not x.flags.c_contiguous:
        # many rows of a strided array (a broadcast gradient, a transpose): NumPy would add
        # them one after another; one copy, then the cascade below
        x = xp.ascontiguousarray(x)
    # (axes are sorted: the last one is len - 1 exactly when they are all leading dims)
    if axes and axes[-1] == len(axes) - 1 < x.ndim - 1 and _by_gemv(x):
        lead = len(axes)
        y = _leading_sum(xp, x, lead)
        return y.reshape((1,) * lead + y.shape) if keepdims else y
    if axes and axes[0] and axes[-1] - axes[0] == len(axes) - 1 < x.ndim - 1 - axes[0] and \
            _by_gemv(x) and math.prod(x.shape[a] for a in axes) > _CASCADE_ROWS:
        # one run of middle dims (a mean over a long sequence, (B, T, C) -> (B, C)): NumPy
        # adds its rows one after another; the cascade, per leading index
        first, stop = axes[0], axes[-1] + 1
        y = _cascade_sum(xp, x.reshape(math.prod(x.shape[:first]), -1,
                                       math.prod(x.shape[stop:])))
        shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdims else \
            x.shape[:first] + x.shape[stop:]
        return y.reshape(shape)
    if len(axes) < 2 or axes[0] or axes[-1] == len(axes) - 1 or x.dtype.char not in "fd" or \
            not x.flags.c_contiguous:
        # (an integer sum stays in its dtype, as torch's: NumPy would widen int32 to int64)
        return xp.add.reduce(x, axis=axes, keepdims=keepdims,
                             dtype=x.dtype if x.dtype.kind in "iu" else None)
    lead = 1
    while axes[lead] == lead:
        lead += 1
    rest = _leading_sum(xp, x, lead) if _by_gemv(x) else \
        xp.add.reduce(x.reshape((math.prod(x.shape[:lead]),) + x.shape[lead:]), axis=0)
    y = xp.add.reduce(rest, axis=tuple(a - lead for a in axes[lead:]))
    if keepdims:
        y = y.reshape(tuple(1 if i in axes else n for i, n in enumerate(x.shape)))
    return y


# sums over the leading dims of at least this many float32/float64 values are a BLAS gemv
# (ones @ x as a matrix): NumPy adds row after row, 2-4x slower (a linear layer's bias
# gradient, (32, 64, 512) -> (512,): 101 us against 55)
_GEMV_MIN = 1 << 14


def _by_gemv(x):
    return x.dtype.char in "fd" and x.size >= _GEMV_MIN and x.flags.c_contiguous


_BLOCK_ROWS = 64  # a cascade's block: few enough adds in a row to stay accurate
_CASCADE_ROWS = 1024  # more rows than this are summed as a cascade


def _leading_sum(xp, x, lead):
    """x summed over its first `lead` dims by gemv; more than _CASCADE_ROWS rows as a
    cascade, as torch's (`_cascade_sum`). One gemv adds row after row into the result: over
    400,000 rows of 0.1 it was 1.4e-4 off (1e-5 on random data), where torch's stays near
    1e-7; the cascade's is 7e-7, at the gemv's speed (faster on large arrays: cache-sized
    passes). The order differs from NumPy's row-by-row one in the last ulps; an all -0.0
    column sums to +0.0, as torch's."""
    rows = math.prod(x.shape[:lead])
    return _cascade_sum(xp, x.reshape(1, rows, x.size // rows)).reshape(x.shape[lead:])


def _cascade_sum(xp, m):
    """The sum over dim 1 of the C-contiguous (pre, rows, post) array m, (pre, post): blocks
    of _BLOCK_ROWS rows summed by one stacked matmul with ones, then their partial sums
    likewise while more than _CASCADE_ROWS are left, then one more."""
    while m.shape[1] > _CASCADE_ROWS:
        pre, n, post = m.shape
        whole = n - n % _BLOCK_ROWS
        parts = xp.matmul(xp.ones(_BLOCK_ROWS, m.dtype),
                          m[:, :whole].reshape(pre, whole // _BLOCK_ROWS, _BLOCK_ROWS, post))
        if whole < n:
            tail = xp.matmul(xp.ones(n - whole, m.dtype), m[:, whole:])
            parts = xp.concatenate([parts, tail[:, None]], axis=1)
        m = parts
    return xp.matmul(xp.ones(m.shape[1], m.dtype), m)


def leading_sum_add(x, lead, y, alpha):
    """y += alpha * x.sum(axis=range(lead)), in place, by one BLAS gemv (`column_sums_add`)
    where add_reduce would add the rows one after another too (at most _CASCADE_ROWS of a
    C-contiguous float array); False, with nothing done, otherwise. nn.Graph's plans compute a
    plain SGD step of a bias this way, its gradient never stored (optimizer_pass.py)."""
    rows = math.prod(x.shape[:lead])
    if not 0 < rows <= _CASCADE_ROWS or not x.flags.c_contiguous or x.dtype.char not in "fd":
        return False
    return column_sums_add(x.reshape(rows, x.size // rows), y, alpha)


_ROW_BLOCK = 128  # a row's values summed by one gemv at most this many at a time


def row_sums(xp, a):
    """The sums of the rows of a float (m, n) array in blocks of at most _ROW_BLOCK values
    (one gemv with the blocks as rows), the rows' block sums then added by a second gemv: one
    gemv along a whole row keeps a running float32 sum per lane, where a few large terms
    absorb thousands of small ones, each rounded the same way (a layer norm's squares, twenty
    near 1e36 beside 4000 near 1e31 in a row of 4096: 9e-6 off, precision_fuzz seed
    11126793; blocked 6e-8, as NumPy's pairwise sum), for 1.4-1.7x one gemv's time (NumPy's
    sum: 2-3x). Rows of at most two blocks are one gemv, as before."""
    m, n = a.shape
    if a.dtype != xp.float32 or n <= 2 * _ROW_BLOCK:
        return xp.matmul(a, xp.ones(n, a.dtype))
    size = next((b for b in range(_ROW_BLOCK, _ROW_BLOCK // 4, -1) if n % b == 0), None)
    if size is not None and a.flags.c_contiguous:  # the blocks are rows of one matrix
        parts = xp.matmul(a.reshape(-1, size), xp.ones(size, a.dtype)).reshape(m, -1)
        return xp.matmul(parts, xp.ones(n // size, a.dtype))
    k, tail = divmod(n, _ROW_BLOCK)
    full = n - tail
    parts = xp.matmul(a[:, :full].reshape(m, k, _ROW_BLOCK).transpose(1, 0, 2),
                      xp.ones(_ROW_BLOCK, a.dtype))
    total = xp.matmul(xp.ones(k, a.dtype), parts)
    if tail:
        total += xp.matmul(a[:, full:], xp.ones(tail, a.dtype))
    return total
