"""Memory layouts as torch chooses them, where NumPy chooses otherwise: `preserve_format`, the
layout of a new tensor made like another (clone, the `*_like` factories, flip); the layout of
an elementwise result of several tensors (`torch_layout`, the registry's
layout="elementwise"); LAPACK results' column-major matrices (`column_major`); an
advanced index's result (`index_layout`); channels_last (NHWC) and channels_last_3d, the
formats torch's convolution, pooling, normalization and padding kernels keep
(`suggested_order`, torch's suggest_memory_format).

preserve_format keeps a dense input's strides; any other input's dims keep their order by
stride, packed densely, a broadcast (stride 0) dim staying where row-major order puts it.
NumPy's `empty_like` orders by stride too but puts stride-0 dims innermost, so this is
computed here. The layout matters beyond `stride()`: whether a later `view` works, and
whether `reshape` returns a view (shared by later in-place writes) or a copy.

>>> import numpy as np
>>> from flowgrad.ops.layout import empty_preserving
>>> empty_preserving(np, np.zeros((3, 4)).T).strides   # a transpose stays one
(8, 32)
>>> rows = np.broadcast_to(np.zeros(3), (2, 3))            # strides (0, 8)
>>> empty_preserving(np, rows).strides, np.empty_like(rows).strides
((24, 8), (8, 16))

NumPy's ufuncs order a result's dims by all operands' strides at once, and when operands
disagree the C order wins; torch's iterator takes the order of the first operand that decides
it. So `x.t() - y` (y contiguous) is column-major in torch and row-major in NumPy:

>>> a, b = np.ones((4, 3)).T, np.ones((3, 4))
>>> torch_layout(np, a + b, (a, b)).strides  # a's column-major order, as torch's
(8, 24)
"""
from __future__ import annotations

import numpy as np

from ..autograd import interpreter as _interpreter
from .view_geometry import expand_strides, view_strides


def _should_swap(d0, d1, shape, strides):
    """torch's reorder_dimensions comparison: 1 when dim d0 should move slower than d1, -1
    when it should stay faster, 0 when no operand decides (broadcast or equal strides)."""
    for st in strides:
        s0, s1 = st[d0], st[d1]
        if s0 == 0 or s1 == 0:
            continue
        if s0 < s1:
            return -1
        if s0 > s1:
            return 1
        if shape[d0] > shape[d1]:
            return 1
    return 0


def _fastest_first(shape, strides):
    """The dims of the result, fastest-moving first: an insertion sort from the C order that
    moves a dim only where some operand's strides say so (torch's reorder_dimensions)."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            decision = _should_swap(perm[dim0], perm[dim1], shape, strides)
            if decision > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif decision < 0:
                break
    return perm


def dense_order(shape, strides):
    """The dims of an array from innermost to outermost, as torch's `infer_dense_strides` (and
    TensorIterator) sort them: by stride, a larger size outer on a tie, stride-0 dims left in
    row-major place."""
    return _fastest_first(shape, [tuple(abs(s) for s in strides)])


def dim_order(shape, strides, contiguous):
    """torch's Tensor.dim_order() of a tensor of `shape` and `strides` (in elements;
    `contiguous`: row-major but for size-1 dims): the dims in order for a contiguous tensor,
    (0, 2, 3, 1) for a 4-d channels-last one (a tensor both, through its size-1 dims, is
    sorted), else sorted by stride from the innermost dim outwards, a zero stride deciding
    nothing and equal strides going by size."""
    last = _channels_last_contiguous(shape, strides)
    if contiguous and not last:
        return tuple(range(len(shape)))
    if last and not contiguous:
        return (0, 2, 3, 1)
    return tuple(reversed(_fastest_first(shape, [strides])))


def _channels_last_contiguous(shape, strides):
    """Whether a 4-d tensor's strides are channels-last contiguous ones, as torch's
    is_channels_last_contiguous_2d reads them (size-1 dims skipped)."""
    if len(shape) != 4:
        return False
    expected = 1
    for d in (1, 3, 2, 0):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


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
    return empty_in_order(xp, like.shape, dtype, dense_order(like.shape, like.strides))


def empty_in_order(xp, shape, dtype, fastest_first):
    """An uninitialised array of `shape` packed densely with its dims in memory in the order
    `fastest_first` gives (innermost first)."""
    outer_first = fastest_first[::-1]
    block = xp.empty([shape[d] for d in outer_first], dtype)
    return block.transpose([outer_first.index(d) for d in range(len(shape))])


def copy_preserving(xp, x):
    """A copy of `x` laid out as torch's `clone()` (preserve_format) lays it out."""
    if row_major(x):
        return x.copy()
    out = empty_preserving(xp, x)
    xp.copyto(out, x)
    return out


def bool_bytes(xp, out):
    """`out` (a copy just made) with each bool written as 0 or 1, as torch's copy loops
    write them: a bool view of bytes 2 copies as 1, where NumPy's copy keeps the 2."""
    if out.dtype.kind == "b":
        xp.not_equal(out.view(xp.uint8), 0, out=out)
    return out


def _broadcast_strides(array, shape):
    """`array`'s strides against the result's `shape`: 0 where it is broadcast."""
    lead = len(shape) - array.ndim
    return (0,) * lead + tuple(0 if n == 1 and shape[lead + i] != 1 else s
                               for i, (n, s) in enumerate(zip(array.shape, array.strides)))


def torch_layout(xp, out, arrays):
    """`out`, an elementwise result of `arrays`, in the layout torch's iterator gives it: the
    array itself when its dims already lie in that order (densely), else a copy that does.
    (Called where some operand is not C-contiguous: with all of them so, the order is C's.)"""
    shape = out.shape
    if len(shape) < 2 or out.size == 0:
        return out
    return in_order(xp, out, _fastest_first(shape, [_broadcast_strides(a, shape)
                                                    for a in arrays if a.ndim]))


def in_order(xp, out, fastest_first):
    """`out` packed densely with its dims in memory in the order `fastest_first` (innermost
    first): itself where it already lies so (its size-1 dims anywhere), else a copy."""
    if lies_in_order(out, fastest_first):
        return out
    result = empty_in_order(xp, out.shape, out.dtype, fastest_first)
    result[...] = out
    return result


def lies_in_order(a, fastest_first):
    """Whether array `a` is packed densely with its dims in memory in the order
    `fastest_first` (its size-1 dims anywhere)."""
    shape, expected = a.shape, a.itemsize
    for dim in fastest_first:
        if shape[dim] != 1 and a.strides[dim] != expected:
            return False
        expected *= shape[dim]
    return True


def column_major(xp, a):
    """`a` with its last two dims column-major and any batch dims outermost (torch's layout of
    a LAPACK result); arrays of fewer than 2 dims, and those already so, as they are.

    >>> import numpy as np
    >>> column_major(np, np.ones((2, 3, 4))).strides
    (96, 8, 24)
    """
    if getattr(a, "ndim", 0) < 2 or a.swapaxes(-1, -2).flags.c_contiguous:
        return a
    return xp.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)


def _advanced_parts(xp, x, index):
    """torch's reading of an advanced `index` (index arrays in place) of `x`: (the shape and
    strides of the view its basic part makes, applied first as torch's applySlicing does
    (a new dim's stride is the next dim's extent, as unsqueeze's), the positions of the
    indexed dims in that view, each index tensor's (shape, strides)); a bool mask is its
    nonzero()'s columns (1-d), a bool (or 0-d mask) a new dim indexed by a 1-element mask."""
    used = sum(1 if not hasattr(i, "ndim") else i.ndim if i.dtype == xp.bool_ else 1
               for i in index if not (i is None or i is Ellipsis or type(i) is bool))
    shape, strides = list(x.shape), [abs(s) for s in x.strides]
    positions, tensors = [], []
    dim = 0  # the dims of the view so far
    for item in index:
        if hasattr(item, "ndim") and not (item.dtype == xp.bool_ and item.ndim == 0):
            dims = item.ndim if item.dtype == xp.bool_ else 1
            if item.dtype == xp.bool_:
                tensors.extend([((int(xp.count_nonzero(item)),), (8,))] * dims)
            else:
                tensors.append((item.shape, item.strides))
            positions.extend(range(dim, dim + dims))
            dim += dims
        elif item is None or hasattr(item, "ndim") or type(item) is bool:
            if item is not None:
                positions.append(dim)
                tensors.append(((1 if item else 0,), (8,)))
            shape.insert(dim, 1)
            strides.insert(dim, shape[dim + 1] * strides[dim] if dim < len(strides) else 1)
            dim += 1
        elif item is Ellipsis:
            dim += x.ndim - used
        elif type(item) is slice:
            start, stop, step = item.indices(shape[dim])
            shape[dim] = len(range(start, stop, step))
            strides[dim] *= step
            dim += 1
        else:  # an int: torch's select, applied first
            del shape[dim], strides[dim]
    return shape, strides, positions, tensors


def index_layout(xp, out, x, index):
    """`out` = x[index] (an advanced index, index arrays in place) laid out as torch's index
    iterator lays it out (torch's AdvancedIndex: x after the index's basic part, the
    indexed dims first when they are not adjacent, restrided with stride 0 there, and the
    index tensors broadcast and reshaped to the result's dims: the iterator orders the
    result's dims by those operands' strides); C order where x and the index arrays are
    row-major. NumPy puts the indexed dims outermost (`x[:, [0, 3]]` of a row-major x), so
    a later view() of it raised where torch's works. `out` itself where it already lies
    so, else a copy that does."""
    if out.ndim < 2 or out.size == 0:
        return out
    if row_major(x) and all(row_major(i) for i in index if hasattr(i, "ndim")):
        return out if row_major(out) else xp.ascontiguousarray(out)
    shape, strides, positions, tensors = _advanced_parts(xp, x, index)
    first = positions[0]
    if positions != list(range(first, first + len(positions))):  # torch's transposeToFront
        order = positions + [d for d in range(len(shape)) if d not in positions]
        shape, strides, first = [shape[d] for d in order], [strides[d] for d in order], 0
    indexed = tensors[0][0]
    if any(s != indexed for s, _ in tensors):
        indexed = np.broadcast_shapes(*(s for s, _ in tensors))
    after = first + len(positions)
    full = tuple(shape[:first]) + indexed + tuple(shape[after:])
    if full != out.shape:  # (not torch's reading: NumPy's layout stays)
        return out
    operands = [tuple(strides[:first]) + (0,) * len(indexed) + tuple(strides[after:])]
    for s, st in tensors:
        st = tuple(abs(t) for t in st)
        if s != indexed:
            st = expand_strides(s, st, indexed)
        padded = (1,) * first + indexed + (1,) * (len(shape) - after)
        st = view_strides(indexed, st, padded, 1)
        operands.append(tuple(0 if n == 1 and m != 1 else t
                              for n, m, t in zip(padded, full, st)))
    return in_order(xp, out, _fastest_first(full, operands))


# ---- channels_last ---------------------------------------------------------------------------
# torch's channels_last (4 dims) and channels_last_3d (5 dims): the dims fastest-moving first
CHANNELS_LAST = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}


def format_contiguous(a, ndim):
    """torch's is_contiguous(memory_format=channels_last) (ndim 4; channels_last_3d: 5): the
    dims of size other than 1 packed densely, channels fastest, then W, H(, D), N."""
    if a.ndim != ndim:
        return False
    expected = a.itemsize
    for d in CHANNELS_LAST[ndim]:
        n = a.shape[d]
        if n != 1:
            if a.strides[d] != expected:
                return False
            expected *= n
    return True


def _channels_last_strides(shape, strides):
    """torch's is_channels_last_strides_2d/3d: (shape, strides) ordered as channels_last's
    (4 dims) or channels_last_3d's (5), densely or not."""
    order = CHANNELS_LAST.get(len(shape))
    if order is None or strides[1] == 0:
        return False
    low = 0
    for d in order:
        if shape[d] == 0 or strides[d] < low or d == 0 and low == strides[1]:
            return False
        low = strides[d] * shape[d] if shape[d] > 1 else strides[d]
    return True


def suggested_format(a):
    """torch's suggest_memory_format: 4 (channels_last) or 5 (channels_last_3d) where `a`'s
    strides are ordered as that format's, else 0 (contiguous)."""
    if a.ndim not in CHANNELS_LAST or a.flags.c_contiguous and 1 not in a.shape:
        return 0
    return a.ndim if _channels_last_strides(a.shape, a.strides) else 0


def suggested_order(a, pooled_1d=False):
    """The dims, fastest first, of a result that torch's kernels (convolution, pooling,
    batch_norm, interpolate, padding) lay out in the format `a`'s strides suggest:
    channels_last's (1, 3, 2, 0), channels_last_3d's (1, 4, 3, 2, 0), or None (C order).
    pooled_1d: a 3-d `a` as torch's 1-d pooling sees it, unsqueezed to (N, C, 1, L), whose
    channels_last order is (1, 2, 0) once squeezed."""
    if pooled_1d and a.ndim == 3:
        if a.flags.c_contiguous and 1 not in a.shape:
            return None
        shape, strides = a.shape, a.strides
        return (1, 2, 0) if _channels_last_strides(
            shape[:2] + (1,) + shape[2:], strides[:2] + (shape[2] * strides[2],) + strides[2:]) \
            else None
    rank = suggested_format(a)
    return CHANNELS_LAST[rank] if rank else None


def format_strides(shape, ndim):
    """The element strides of a dense `shape` in channels_last (ndim 4) / channels_last_3d
    (5), as torch's get_channels_last_strides."""
    stride, step = [0] * len(shape), 1
    for d in CHANNELS_LAST[ndim]:
        stride[d] = step
        step *= max(shape[d], 1)
    return stride


def empty_in_format(xp, shape, dtype, ndim):
    """An uninitialised array of `shape` in channels_last (ndim 4) / channels_last_3d (5)
    order, or C order (ndim 0)."""
    if not ndim:
        return xp.empty(shape, dtype)
    return empty_in_order(xp, tuple(shape), dtype, CHANNELS_LAST[ndim])


def in_format(xp, out, ndim):
    """`out` laid out in channels_last (ndim 4), channels_last_3d (5) or C order (0): itself
    where it already lies so, else a copy that does."""
    if not ndim or out.ndim != ndim:
        return out if out.flags.c_contiguous else xp.ascontiguousarray(out)
    return in_order(xp, out, CHANNELS_LAST[ndim])


def fresh_in_format(xp, out, ndim):
    """`out`, a fresh array, with the strides torch gives a new tensor in channels_last (ndim
    4) / channels_last_3d (5): get_channels_last_strides', a size-1 dim's too (in_format keeps
    an array whose size-1 dims lie anywhere, as torch's contiguous() does)."""
    if not out.size or out.strides == tuple(s * out.itemsize
                                            for s in format_strides(out.shape, ndim)):
        return out
    result = empty_in_format(xp, out.shape, out.dtype, ndim)
    result[...] = out
    return result


def in_suggested_order(xp, out, order):
    """`out` densely in `order` (dims fastest first: suggested_order's), or in C order where
    `order` is None; itself where it already lies so."""
    if order is None or out.ndim != len(order):
        return out if out.flags.c_contiguous else xp.ascontiguousarray(out)
    return in_order(xp, out, order)


def c_contiguous(input, reshape, clone):
    """contiguous(): a C-ordered `clone` of a tensor that is not, else itself; of a graph input
    while a plan is traced, a `reshape` op to one dim and back, which each call makes a view
    of the input (writes through it reach the input, as eagerly) where its layout lets it,
    and a C-ordered copy where a later call's input is not contiguous (returning the input
    froze the traced layout: a view() of it then refused a transposed input that eagerly is
    copied first)."""
    if not input._data.flags.c_contiguous:
        return clone(input)
    current = _interpreter.current
    if current is _interpreter.AutogradInterpreter or not getattr(
            current, "is_input", _no_input)(input):
        return input
    return reshape(reshape(input, shape=(input._data.size,)), shape=input._data.shape)


def _no_input(_):
    return False
