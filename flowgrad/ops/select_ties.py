"""Which of several equal values topk and kthvalue report: torch's CPU kernels order ties by
the steps of their selection algorithms (topk: libstdc++'s std::nth_element then std::sort
of the first k - 1, or std::partial_sort when k * 64 <= n; kthvalue: aten's
quick_select_template), not by position. The stable sort that finds the values gives the
same answer wherever the values that decide it are distinct; rows with ties there are redone
here step for step, in Python, so the indices (and the gradient they route) are torch's;
so are mode's rows (std::sort of (value, index) pairs) above 16 elements or holding a NaN.
(topk(sorted=False) of a row without such ties keeps the sorted order: torch's is
nth_element's arrangement, which it does not document and which would cost a Python pass
over every row. Calls whose tied rows hold more than _BUDGET values keep the stable order's
ties too: the replay is a Python loop.)
"""
from __future__ import annotations

import math

from .halfprec import in_float32
from .registry import op

__all__ = ["torch_tie_order", "mode_row", "within_budget"]

# the values replayed in Python per call at most (a mode of 16 rows of 4096 labels: 0.3 s):
# beyond it the rows keep the stable order's ties, as before (a mode of a million labels
# would take 14 s, a topk of them 12 s)
_BUDGET = 1 << 16


def within_budget(rows, n):
    """Whether `rows` rows of `n` values may be replayed."""
    return rows * n <= _BUDGET


def _isnan(v):
    return isinstance(v, float) and math.isnan(v)


def _comparator(largest):
    """torch's topk comparison of (value, index) pairs: NaN counts as the largest value."""
    if largest:
        return lambda x, y: (_isnan(x[0]) and not _isnan(y[0])) or x[0] > y[0]
    return lambda x, y: (not _isnan(x[0]) and _isnan(y[0])) or x[0] < y[0]


# ---- libstdc++'s algorithms (bits/stl_algo.h, bits/stl_heap.h), over a Python list -----------
def _median_to_first(q, result, a, b, c, comp):
    if comp(q[a], q[b]):
        m = b if comp(q[b], q[c]) else (c if comp(q[a], q[c]) else a)
    elif comp(q[a], q[c]):
        m = a
    else:
        m = c if comp(q[b], q[c]) else b
    q[result], q[m] = q[m], q[result]


def _partition_pivot(q, first, last, comp):
    _median_to_first(q, first, first + 1, first + (last - first) // 2, last - 1, comp)
    lo, hi, pivot = first + 1, last, q[first]
    while True:
        while comp(q[lo], pivot):
            lo += 1
        hi -= 1
        while comp(pivot, q[hi]):
            hi -= 1
        if not lo < hi:
            return lo
        q[lo], q[hi] = q[hi], q[lo]
        lo += 1


def _linear_insert(q, last, comp):
    v = q[last]
    while comp(v, q[last - 1]):
        q[last] = q[last - 1]
        last -= 1
    q[last] = v


def _insertion_sort(q, first, last, comp):
    for i in range(first + 1, last):
        if comp(q[i], q[first]):
            q[first:i + 1] = [q[i]] + q[first:i]
        else:
            _linear_insert(q, i, comp)


def _adjust_heap(q, first, hole, length, value, comp):
    top = child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if comp(q[first + child], q[first + child - 1]):
            child -= 1
        q[first + hole] = q[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        q[first + hole] = q[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and comp(q[first + parent], value):
        q[first + hole] = q[first + parent]
        hole, parent = parent, (parent - 1) // 2
    q[first + hole] = value


def _heap_select(q, first, middle, last, comp):
    length = middle - first
    for parent in range((length - 2) // 2, -1, -1) if length > 1 else ():
        _adjust_heap(q, first, parent, length, q[first + parent], comp)
    for i in range(middle, last):
        if comp(q[i], q[first]):
            v, q[i] = q[i], q[first]
            _adjust_heap(q, first, 0, length, v, comp)


def _partial_sort(q, first, middle, last, comp):
    _heap_select(q, first, middle, last, comp)
    while middle - first > 1:
        middle -= 1
        v, q[middle] = q[middle], q[first]
        _adjust_heap(q, first, 0, middle - first, v, comp)


def _nth_element(q, nth, comp):
    first, last, depth = 0, len(q), 2 * (len(q).bit_length() - 1)
    while last - first > 3:
        if depth == 0:
            _heap_select(q, first, nth + 1, last, comp)
            q[first], q[nth] = q[nth], q[first]
            return
        depth -= 1
        cut = _partition_pivot(q, first, last, comp)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(q, first, last, comp)


def _introsort_loop(q, first, last, depth, comp):
    while last - first > 16:
        if depth == 0:
            _partial_sort(q, first, last, last, comp)
            return
        depth -= 1
        cut = _partition_pivot(q, first, last, comp)
        _introsort_loop(q, cut, last, depth, comp)
        last = cut


def _sort(q, last, comp):
    if last < 2:
        return
    _introsort_loop(q, 0, last, 2 * (last.bit_length() - 1), comp)
    _insertion_sort(q, 0, min(last, 16), comp)
    for i in range(16, last):
        _linear_insert(q, i, comp)


def topk_row(row, k, largest, sort):
    """torch's topk indices of one row (a list of Python numbers): aten's topk_impl_loop."""
    q = [(v, j) for j, v in enumerate(row)]
    comp = _comparator(largest)
    if k * 64 <= len(q):
        _partial_sort(q, 0, k, len(q), comp)
    else:
        _nth_element(q, k - 1, comp)
        if sort:
            _sort(q, k - 1, comp)
    return [j for _, j in q[:k]]


def kth_row(row, k):
    """torch's kthvalue index (k from 0) of one row: aten's quick_select_template."""
    arr, idx = list(row), list(range(len(row)))
    gt = _comparator(True)

    def gt_or_nan(a, b):
        return gt((a,), (b,))

    def swap(a, b):
        arr[a], arr[b] = arr[b], arr[a]
        idx[a], idx[b] = idx[b], idx[a]

    lo, hi = 0, len(arr) - 1
    while hi > lo:
        if hi == lo + 1:
            if gt_or_nan(arr[lo], arr[hi]):
                swap(lo, hi)
            break
        swap(lo + (hi - lo) // 2, lo + 1)
        if gt_or_nan(arr[lo + 1], arr[hi]):
            swap(lo + 1, hi)
        if gt_or_nan(arr[lo], arr[hi]):
            swap(lo, hi)
        if gt_or_nan(arr[lo + 1], arr[lo]):
            swap(lo + 1, lo)
        i, j, piv = lo + 1, hi, arr[lo]
        while True:
            i += 1
            while gt_or_nan(piv, arr[i]):
                i += 1
            j -= 1
            while gt_or_nan(arr[j], piv):
                j -= 1
            if j < i:
                break
            swap(i, j)
        swap(lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1
    return idx[k]


def mode_row(row):
    """torch's mode (value, index) of one row: its kernel std::sorts (value, index) pairs by
    value alone (unstable above 16 elements, and NaN compares false both ways), then takes
    the first longest run of equal neighbours, at the run's last pair."""
    q = [(v, j) for j, v in enumerate(row)]
    _sort(q, len(q), lambda x, y: x[0] < y[0])
    run = longest = 0
    best = q[-1]
    for i, pair in enumerate(q):
        run += 1
        if i == len(q) - 1 or pair[0] != q[i + 1][0]:
            if run > longest:
                best, longest = pair, run
            run = 0
    return best


def _same(xp, a, b):
    same = a == b
    if a.dtype.kind in "fc":
        same |= xp.isnan(a) & xp.isnan(b)
    return same


@op("torch_tie_order", differentiable=False)
@in_float32  # (ml_dtypes' scalars are no Python floats: NaN is read in float32)
def torch_tie_order(xp, a, idx, *, dim, k, largest, sorted, kth):
    """idx (the stable order's first k indices along dim, or the k-th alone with `kth`) with
    each row whose deciding values tie redone as torch's kernel picks."""
    if idx.size == 0:
        return idx
    rows = xp.moveaxis(a, dim, -1).reshape(-1, a.shape[dim])
    picked = xp.moveaxis(idx, dim, -1).reshape(rows.shape[0], -1)
    vals = xp.take_along_axis(rows, picked, 1)
    # a row needs redoing where the last picked value occurs again (in or out of the pick),
    # or (topk) two picked values are equal
    tied = _same(xp, rows, vals[:, -1:]).sum(1) > 1
    if not kth and vals.shape[1] > 1:
        tied |= _same(xp, vals[:, 1:], vals[:, :-1]).any(1)
    redo = xp.flatnonzero(tied)
    if redo.size == 0 or not within_budget(redo.size, rows.shape[1]):
        return idx
    picked = picked.copy()
    for r in redo.tolist():
        row = rows[r].tolist()
        picked[r] = kth_row(row, k - 1) if kth else topk_row(row, k, largest, sorted)
    shape = list(idx.shape)
    shape.append(shape.pop(dim))
    return xp.moveaxis(picked.reshape(shape), -1, dim).copy()
