"""The memory layout of an elementwise result of several tensors, as torch's TensorIterator
chooses it (ops declared with `layout="elementwise"` in the registry).

NumPy's ufuncs order a result's dims by all operands' strides at once, and when operands
disagree the C order wins; torch's iterator takes the order of the first operand that decides
it. So `x.t() - y` (y contiguous) is column-major in torch and row-major in NumPy, and what a
later `flatten()` or `view()` does differs: a copy in torch, a view in NumPy's layout (a write
into it reaching the result). The result keeps NumPy's values; only its layout is torch's.

>>> import numpy as np
>>> a, b = np.ones((4, 3)).T, np.ones((3, 4))
>>> torch_layout(np, a + b, (a, b)).strides  # a's column-major order, as torch's
(8, 24)
"""
from __future__ import annotations

__all__ = ["column_major", "torch_layout"]


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


def _broadcast_strides(array, shape):
    """`array`'s strides against the result's `shape`: 0 where it is broadcast."""
    lead = len(shape) - array.ndim
    return (0,) * lead + tuple(0 if n == 1 and shape[lead + i] != 1 else s
                               for i, (n, s) in enumerate(zip(array.shape, array.strides)))


def torch_layout(xp, out, arrays):
    """`out`, an elementwise result of `arrays`, in the layout torch's iterator gives it: the
    array itself when its dims already lie in that order (densely), else a copy that does."""
    shape = out.shape
    if len(shape) < 2 or out.size == 0:
        return out
    operands = [a for a in arrays if a.ndim]
    if all(a.shape == shape for a in operands) and all(a.flags.c_contiguous for a in operands):
        perm = list(range(len(shape) - 1, -1, -1))  # torch's fast setup: all contiguous
    else:
        perm = _fastest_first(shape, [_broadcast_strides(a, shape) for a in operands])
    expected = out.itemsize
    for dim in perm:
        if shape[dim] != 1 and out.strides[dim] != expected:
            break
        expected *= shape[dim]
    else:
        return out
    order = perm[::-1]
    dense = xp.empty([shape[d] for d in order], out.dtype)
    result = dense.transpose([order.index(d) for d in range(len(shape))])
    result[...] = out
    return result


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
