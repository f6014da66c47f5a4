"""Ordering: sort, argsort, msort, topk, kthvalue, unique, searchsorted, bucketize.

Sorted values are a gather of the input at the sorting indices, so their gradient is a
scatter back (gather's rule); the index outputs and unique/searchsorted carry no gradient.

>>> import flowgrad as flow
>>> flow.sort(flow.tensor([3.0, 1.0, 2.0])).values
tensor([1., 2., 3.])
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as _dt
from ..autograd.interpreter import check_read
from ..device import array_module
from ..errors import int_arg
from ..return_types import values_indices
from ..tensor import Tensor, _wrap_dim, tensor_method
from .gather import _dim_flat, _put_flat, gather_values
from .halfprec import HALF, in_float32
from .no_derivative import without_derivative
from .registry import op
from .scan import of_zero_dim
from .select_ties import torch_tie_order

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "unique", "searchsorted",
           "bucketize"]


# (laid out as the input, as torch's sort, whose results are made like a clone of it: a
# transposed input's are transposed; topk and kthvalue take theirs C-ordered)
@op("argsort", differentiable=False, layout="elementwise")
@in_float32  # (ml_dtypes' bfloat16 sort leaves NaN where it is: float32 orders it)
def _argsort(xp, a, *, dim, descending):
    """Stable argsort (int64): ties keep their original order, descending too, as torch's
    sort(stable=True) and its default sort up to 16 elements (above that torch's default
    is unstable: tied indices come in another order, which is not matched)."""
    if not descending:
        return xp.argsort(a, axis=dim, kind="stable").astype(xp.int64)
    n = a.shape[dim]
    rev = xp.argsort(xp.flip(a, dim), axis=dim, kind="stable")
    return xp.flip(n - 1 - rev, dim).astype(xp.int64)


@op("sort_values", save="inputs[1]", jvp="linear", layout="elementwise")
def _sort_values(xp, x, order, *, dim):
    """x's values along `dim` in the order of `order` (argsort's indices, which are laid out
    as x): a gather whose result keeps x's layout, as torch's sort values."""
    return xp.take_along_axis(x, order, axis=dim)


@_sort_values.grad
def sort_values_backward(ctx, dy):
    shape = ctx.input_shapes[0]
    flat = _dim_flat(ctx.inputs[1], shape=shape, dim=ctx.dim)
    return _put_flat(dy, flat, shape=shape, accumulate=True), None


def refuse_complex_order(input, name):
    """torch's ops that order values (sort, topk, max/min along a dim) refuse complex inputs,
    a 0-d one too."""
    if input._data.dtype.kind == "c":
        raise RuntimeError(f"{name}(): does not support complex input (got {input.dtype}, shape "
                           f"{tuple(input.shape)}); apply it to .real, .imag or .abs()")


@tensor_method()
def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along `dim` (NaN sorts as the largest value).

    >>> import flowgrad as flow
    >>> values, indices = flow.sort(flow.tensor([[3.0, 1.0, 2.0]]), dim=1)
    >>> values, indices
    (tensor([[1., 2., 3.]]), tensor([[1, 2, 0]]))
    """
    refuse_complex_order(input, "sort")
    d = _wrap_dim(dim, input._data.ndim, "sort")  # (a 0-d input's dims: -1 and 0)
    if input._data.ndim == 0:
        return of_zero_dim("sort", input)
    idx = _argsort(input, dim=d, descending=descending)
    return values_indices("sort", _sort_values(input, idx, dim=d), idx)


@tensor_method()
def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort `input` along `dim`.

    >>> import flowgrad as flow
    >>> flow.argsort(flow.tensor([3.0, 1.0, 2.0]), descending=True)
    tensor([0, 2, 1])
    """
    return sort(input, dim, descending, stable).indices


@tensor_method()
def msort(input):
    """sort along dim 0 (values only)."""
    return sort(input, 0).values


@tensor_method()
def topk(input, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) entries along `dim`, with their indices.

    >>> import flowgrad as flow
    >>> flow.topk(flow.tensor([1.0, 4.0, 2.0, 3.0]), 2).indices
    tensor([1, 3])
    """
    k = int_arg(k, "topk", "k", 2)  # (parsed first, as torch's: a tensor is a TypeError)
    nd = input._data.ndim
    refuse_complex_order(input, "topk")
    if input._data.dtype.kind == "b":
        raise RuntimeError(f'"topk_cpu" not implemented for \'Bool\' (input of shape '
                           f"{tuple(input.shape)}); convert with .int() first")
    d = _wrap_dim(dim, nd, "topk")
    size = input._data.shape[d] if nd else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"topk(): selected index k ({k}) out of range for dimension {d} "
                           f"with size {size}")
    if nd == 0:
        return of_zero_dim("topk", input)
    # (the indices a C-ordered tensor of their own, as torch's: not a narrowed view)
    idx = _argsort(input, dim=d, descending=largest).narrow(d, 0, k).contiguous()
    idx = torch_tie_order(input, idx, dim=d, k=k, largest=largest, sorted=sorted, kth=False)
    return values_indices("topk", gather_values(input, d, idx), idx)


@tensor_method()
def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest entry along `dim` (k counts from 1), with its index."""
    k = int_arg(k, "kthvalue", "k", 2)  # (parsed first, as torch's: a tensor is a TypeError)
    nd = input._data.ndim
    d = _wrap_dim(dim, nd, "kthvalue")
    size = input._data.shape[d] if nd else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k ({k}) out of range for dimension "
                         f"{d} with size {size}")
    if nd == 0:  # (torch returns a 0-d input before its kernel's dtype check)
        return of_zero_dim("kthvalue", input)
    if input._data.dtype.kind == "b":
        raise NotImplementedError(f'"kthvalue_cpu" not implemented for \'Bool\' (input of '
                                  f"shape {tuple(input.shape)}); convert with .int() first")
    idx = _argsort(input, dim=d, descending=False).narrow(d, k - 1, 1).contiguous()
    idx = torch_tie_order(input, idx, dim=d, k=k, largest=False, sorted=True, kth=True)
    values = gather_values(input, d, idx)
    if not keepdim:
        values, idx = values.squeeze(d), idx.squeeze(d)
    return values_indices("kthvalue", values, idx)


def unique_dim(shape, dim, name):
    """`dim` wrapped; as torch, an empty input must have exactly one 0-size dim, `dim`."""
    d = _wrap_dim(dim, len(shape), name)
    if 0 in shape:
        if shape.count(0) > 1:
            raise RuntimeError(f"{name}: shape {tuple(shape)} has more than one 0-size dim, so "
                               f"unique cannot be applied along dim {dim}")
        if shape[d]:
            raise RuntimeError(f"{name}: shape {tuple(shape)} has a 0-size dim other than dim "
                               f"{dim}, so unique cannot be applied along it")
    return d


@tensor_method()
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (or distinct slices along `dim`), sorted; optionally the inverse
    indices and counts. No gradient, as in torch.

    >>> import flowgrad as flow
    >>> flow.unique(flow.tensor([3, 1, 3, 2, 1]), return_counts=True)
    (tensor([1, 2, 3]), tensor([2, 1, 2]))
    """
    check_read(input, "unique()")  # (its output's shape is the values': no plan repeats it)
    xp = array_module(input._data)
    a = input._data
    low = a.dtype if a.dtype in HALF else None
    if low is not None:  # (ordered in float32: exact both ways, NaN sorted last)
        a = a.astype(xp.float32)
    if dim is not None:
        d = unique_dim(a.shape, dim, "unique")
        vals, inv, cnt = xp.unique(a, return_inverse=True, return_counts=True, axis=d,
                                   equal_nan=False)
    else:  # (every nan is a value of its own, as torch's)
        vals, inv, cnt = xp.unique(a.reshape(-1), return_inverse=True, return_counts=True,
                                   equal_nan=False)
        inv = inv.reshape(a.shape)
    out = [Tensor._wrap(vals if low is None else vals.astype(low))]
    if return_inverse:
        out.append(Tensor._wrap(inv.reshape(-1).astype(np.int64) if dim is not None
                                else inv.astype(np.int64)))
    if return_counts:
        out.append(Tensor._wrap(cnt.astype(np.int64)))
    out = without_derivative(out, [input], "_unique2" if dim is None else "unique_dim")
    return out[0] if len(out) == 1 else tuple(out)


def _search(xp, seq, values, right):
    """searchsorted of each row of values in the matching row of seq: torch's binary search,
    run on every value at once (one step per bit of the length). Its comparisons are
    `not (boundary >= value)` (left) and `not (boundary > value)` (right), so a NaN value
    lands past the end and a NaN boundary counts as below every value, as in torch."""
    if seq.ndim == 1 and (seq.dtype.kind not in "fc" or not xp.isnan(seq).any()):
        # one sorted row without NaN: NumPy's search gives the same (a NaN value, which
        # sorts last there, lands past the end as in torch), in C
        return xp.searchsorted(seq, values, side="right" if right else "left")
    n = seq.shape[-1]
    start = xp.zeros(values.shape, xp.int64)
    end = xp.full(values.shape, n, xp.int64)
    for _ in range(n.bit_length()):
        active = start < end
        mid = start + (end - start) // 2
        at = xp.minimum(mid, max(n - 1, 0))  # (finished lanes may point one past the end)
        boundary = seq[at] if seq.ndim == 1 else xp.take_along_axis(seq, at, -1)
        with xp.errstate(invalid="ignore"):
            up = ~(boundary > values) if right else ~(boundary >= values)
        start = xp.where(active & up, mid + 1, start)
        end = xp.where(active & ~up, mid, end)
    return start


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Insertion points of `input` in the innermost dim of `sorted_sequence`.

    >>> import flowgrad as flow
    >>> flow.searchsorted(flow.tensor([1.0, 3.0, 5.0]), flow.tensor([0.0, 3.0, 6.0]))
    tensor([0, 1, 3])
    """
    xp = array_module(sorted_sequence._data)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"searchsorted(): side can only be 'left' or 'right' but got "
                               f"{side!r}")
        if right and side == "left":
            raise RuntimeError("searchsorted(): side and right can't be set to opposites, got "
                               "side of left while right was True")
        right = side == "right"
    scalar = not isinstance(input, Tensor)
    if scalar and not isinstance(input, numbers.Number):
        raise TypeError(f"searchsorted(): argument 'input' must be a Tensor or a number, not "
                        f"{type(input).__name__}")
    values = Tensor._wrap(xp.asarray(input)) if scalar else input
    seq, vals = sorted_sequence._data, values._data
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive "
                           "dimension, but got 0 dimension")
    if seq.ndim > 1 and (scalar or seq.shape[:-1] != vals.shape[:-1]):
        raise RuntimeError(
            f"searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            f"dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(seq.shape)} and input value tensor "
            f"{list(vals.shape)}")
    if seq.dtype.kind == "b" and vals.dtype.kind == "b":  # (the kernel runs in their type)
        raise NotImplementedError(f"searchsorted(): not implemented for bool tensors "
                                  f"(boundaries {seq.dtype}, values {vals.dtype}); convert "
                                  f"them with .int() first")
    if sorter is not None:
        if sorter._data.dtype != np.int64:
            raise RuntimeError(f"torch.searchsorted(): sorter must be a tensor of long dtype "
                               f"but got dtype {sorter.dtype}; convert it with .long()")
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):  # (gather takes a prefix)
            raise RuntimeError(f"torch.searchsorted(): boundary and sorter must have the same "
                               f"size, but got boundary tensor {list(sorted_sequence.shape)} "
                               f"and got sorter tensor {list(sorter.shape)}")
        sorted_sequence = gather_values(sorted_sequence, -1, sorter)
    # compared in torch's result type, as its comparison ops do: int32 boundaries past 2^24
    # against float32 values round, and a number below an unsigned dtype wraps (-2 -> 254)
    common = _dt.result_type(sorted_sequence, input)
    if sorted_sequence.dtype != common:
        sorted_sequence = sorted_sequence.to(common)
    if values.dtype != common:
        values = values.to(common)
    return _searchsorted(sorted_sequence, values, right=right, out_int32=out_int32)


@op("searchsorted", differentiable=False)  # an op: a graph compiles it rather than freezing it
@in_float32  # (ml_dtypes' bfloat16 sort leaves NaN where it is: float32 orders it)
def _searchsorted(xp, seq, vals, *, right, out_int32):
    return xp.asarray(_search(xp, seq, vals, right)).astype(xp.int32 if out_int32 else xp.int64)


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket index of each element of input given 1-D sorted `boundaries`."""
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"bucketize(): boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries._data.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)
