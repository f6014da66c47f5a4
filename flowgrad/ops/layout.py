"""torch's `preserve_format`: the memory layout of a new tensor made like another (clone,
the `*_like` factories, flip). A dense input's strides are kept; any other
input's dims keep their order by stride, packed densely, a broadcast (stride 0) dim staying
where row-major order puts it. NumPy's `empty_like` orders by stride too but puts stride-0
dims innermost, so this is computed here. The layout matters beyond `stride()`: whether a
later `view` works, and whether `reshape` returns a view (shared by later in-place writes) or
a copy.

>>> import numpy as np
>>> from flowgrad.ops.layout import empty_preserving
>>> empty_preserving(np, np.zeros((3, 4)).T).strides   # a transpose stays one
(8, 32)
>>> rows = np.broadcast_to(np.zeros(3), (2, 3))            # strides (0, 8)
>>> empty_preserving(np, rows).strides, np.empty_like(rows).strides
((24, 8), (8, 16))
"""
from __future__ import annotations

import numpy as np


def dense_order(shape, strides):
    """The dims of an array from innermost to outermost, as torch's `infer_dense_strides` (and
    TensorIterator) sort them: by stride, a larger size outer on a tie, stride-0 dims left in
    row-major place."""
    perm = list(range(len(shape) - 1, -1, -1))
    for i in range(1, len(perm)):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            a, b = perm[dim0], perm[dim1]
            s0, s1 = abs(strides[a]), abs(strides[b])
            if s0 == 0 or s1 == 0:
                continue  # ambiguous: look further
            if s0 < s1:
                break
            if s0 > s1 or shape[a] > shape[b]:
                perm[dim0], perm[dim1] = b, a
                dim1 = dim0
    return perm


def row_major(a):
    """Whether array `a`'s strides are the row-major ones exactly (NumPy's c_contiguous also
    holds for any stride of a size-1 dim, which torch's preserve_format keeps)."""
    if not a.flags.c_contiguous:
        return False
    if 1 not in a.shape:  # (the common case: no size-1 dim, the flag says it all)
        return True
    step = a.itemsize
    for n, st in zip(reversed(a.shape), reversed(a.strides)):
        if st != step and a.size:
            return False
        step *= n
    return True


def _non_overlapping_and_dense(a):
    """torch's is_non_overlapping_and_dense: the dims of size 2 or more, by stride, pack the
    elements without gaps (a size-1 dim's stride is anything)."""
    dims = sorted((d for d in range(a.ndim) if a.shape[d] > 1), key=lambda d: a.strides[d])
    step = a.itemsize
    for d in dims:
        if a.strides[d] != step:
            return False
        step *= a.shape[d]
    return True


def empty_preserving(xp, like, dtype=None):
    """An uninitialised array of `like`'s shape (and dtype unless given), laid out as torch's
    preserve_format lays out a tensor made like it."""
    dtype = like.dtype if dtype is None else dtype
    if row_major(like):
        return xp.empty(like.shape, dtype)
    if like.size and type(like) is np.ndarray and _non_overlapping_and_dense(like):
        # torch's empty_strided with like's own strides (those of its size-1 dims too)
        item = np.dtype(dtype).itemsize
        return np.lib.stride_tricks.as_strided(
            np.empty(like.size, dtype), like.shape,
            tuple(st // like.itemsize * item for st in like.strides))
    if like.ndim < 2 or like.flags.c_contiguous:
        return xp.empty(like.shape, dtype)
    perm = dense_order(like.shape, like.strides)  # innermost first
    outer_first = perm[::-1]
    block = xp.empty([like.shape[d] for d in outer_first], dtype)
    return block.transpose([outer_first.index(d) for d in range(like.ndim)])


def copy_preserving(xp, x):
    """A copy of `x` laid out as torch's `clone()` (preserve_format) lays it out."""
    if row_major(x):
        return x.copy()
    out = empty_preserving(xp, x)
    xp.copyto(out, x)
    return out
