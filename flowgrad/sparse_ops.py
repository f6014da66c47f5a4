"""Arithmetic on sparse COO tensors, as torch's: sparse +/- sparse, dense +/- sparse (dense),
sparse * sparse (their common entries), sparse * dense and dense * sparse (sparse), functions
that map 0 to 0 (abs, sqrt, tanh, relu, x ** 2, ...) on the values, `sparse.softmax` and
`sparse.log_softmax` over the specified entries, `select` and `index_select`.

Like everything in `sparse.py`, each is composed of dense ops on the indices and values, so
gradients reach the values (and a dense operand) through the ordinary rules. A dense op that
meets a sparse operand raises `SparseOperandError` when it first reads it; add, sub and mul
catch it and come here, at no cost to dense calls (the other public functions reach the
methods here through `errors.sparse_form`: `flowgrad.abs(s)` is `s.abs()`). A function that
does not map 0 to 0 (exp, cos, x + 1) has no sparse result: it keeps raising, naming the op
and the remedy (`.to_dense()`).

>>> import flowgrad as flow
>>> A = flow.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, -4.0, 5.0], (2, 3))
>>> (A + A.t().t()).to_dense()
tensor([[ 0.,  0.,  6.],
        [-8.,  0., 10.]])
>>> A.abs().values()
tensor([3., 4., 5.])
>>> flow.sparse.softmax(A * 0.1, 1).to_dense()
tensor([[0.0000, 0.0000, 1.0000],
        [0.2891, 0.0000, 0.7109]])
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes
from .device import array_module, new_array
from .ops.creation import zeros
from .ops.shape import cat
from .sparse import SparseTensor
from .tensor import Tensor

# Tensor methods whose function maps 0 to 0 (torch's sparse kernels): on the coalesced values
# (f(a) + f(b) is not f(a + b)); `pow` by a positive number is one too
_ZERO_TO_ZERO = (
    "abs", "absolute", "asin", "arcsin", "asinh", "arcsinh", "atan", "arctan", "atanh",
    "arctanh", "ceil", "deg2rad", "erf", "erfinv", "expm1", "fix", "floor", "frac", "log1p",
    "nan_to_num", "negative", "rad2deg", "relu", "round", "sgn", "sign", "signbit", "sin",
    "sinh", "sqrt", "square", "tan", "tanh", "trunc", "isnan", "isinf", "isposinf", "isneginf")


def _on_values(name):
    """The sparse form of Tensor method `name` (f(0) = 0): f of the coalesced values."""
    def apply(self, *args, **kwargs):
        if name == "square" and self.dtype == dtypes.bool:  # (torch's: int64 into bool)
            raise RuntimeError("square: result type Long can't be cast to the desired output "
                               "type Bool of a sparse bool tensor; convert it with .to() first")
        c = self.coalesce()  # (the method looked up per call: ops install it after this)
        values = getattr(c._vals, name)(*args, **kwargs)
        return SparseTensor(c._idx, values, c._size, coalesced=True)
    apply.__name__ = apply.__qualname__ = name
    apply.__doc__ = f"Tensor.{name} of the values (0 stays 0: the result is sparse)."
    return apply


def pow(self, exponent):
    """self ** exponent for a positive number: sparse (0 ** exponent is 0)."""
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)) or exponent <= 0:
        raise NotImplementedError(f"pow: a sparse tensor takes a positive number as exponent "
                                  f"(0 ** {exponent!r} is not 0); call .to_dense() first")
    c = self.coalesce()
    return SparseTensor(c._idx, c._vals ** exponent, c._size, coalesced=True)


def binary(name, a, b, alpha=1):
    """add/sub/mul/div(a, b) with a sparse operand (add/sub: `a + alpha * b`)."""
    sa, sb = type(a) is SparseTensor, type(b) is SparseTensor
    if name in ("add", "sub"):
        if sa and sb:
            return _add_sparse(a, b, -alpha if name == "sub" else alpha)
        if alpha != 1:
            b = b * alpha
        if name == "sub":
            b = -b
        if sa or not isinstance(a, Tensor):  # (a number is a dense operand to torch)
            raise RuntimeError(f"{name}(sparse, dense) is not supported. Use {name}(dense, "
                               f"sparse) instead (a dense result), or {name}(sparse, "
                               f"other.to_sparse()) for a sparse one")
        return a + b.to_dense()
    if name == "mul":
        if sa and sb:
            return _mul_sparse(a, b)
        return _mul_dense(a, b) if sa else _mul_dense(b, a)
    if name == "div" and sa and not sb and (not isinstance(b, Tensor) or b.ndim == 0):
        return a._with_values(a._vals / b)
    shape = tuple(b.shape) if isinstance(b, (Tensor, SparseTensor)) else type(b).__name__
    raise RuntimeError(f"{name}: sparse division requires a scalar or zero-dim dense tensor "
                       f"divisor (got {shape}); divide the values, or call .to_dense() first"
                       if name == "div" else f"{name} with a sparse operand is not supported; "
                       f"call .to_dense() first")


def _same_size(a, b, name):
    if a._size != b._size:
        raise RuntimeError(f"{name}: expected the sparse operands to have the same size, got "
                           f"{a._size} and {b._size}")
    if a.sparse_dim() != b.sparse_dim():
        raise RuntimeError(f"{name}: expected the same number of sparse dims, got "
                           f"{a.sparse_dim()} and {b.sparse_dim()}")


def _promoted(a, b):
    dtype = dtypes.promote_types(a.dtype, b.dtype)
    return (a if a.dtype == dtype else a.to(dtype)), (b if b.dtype == dtype else b.to(dtype))


def _add_sparse(a, b, alpha=1):
    """a + alpha * b, as torch's add_out_sparse_cpu: an operand with no entries gives the
    other (its coalesced flag kept); contiguous values are merged entry by entry in one walk
    over both (equal indices met side by side summed into one, so an uncoalesced result keeps
    the duplicates the walk does not meet together), flagged coalesced when both operands
    were; non-contiguous values are concatenated (coalesced only when the entries outnumber
    the elements)."""
    _same_size(a, b, "add")
    a, b = _promoted(a, b)
    if a.dtype == dtypes.bool and b._nnz():  # (torch has no bool cadd_sparse; with no
        # entries on the left it adds in int64 and fails to cast back)
        kind = NotImplementedError if a._nnz() else RuntimeError
        raise kind("add: sparse + sparse is not implemented for bool values; convert both "
                   "with .to() (an integer type) first")
    bv = b._vals if alpha == 1 else b._vals * alpha
    if not (a._nnz() and b._nnz()):  # (cat: the result depends on both, as torch's)
        keep = a if b._nnz() == 0 else b
        return SparseTensor(keep._idx, cat([a._vals, bv], 0), a._size, keep._coalesced)
    if not (a._vals.is_contiguous() and b._vals.is_contiguous()):
        out = SparseTensor(cat([a._idx, b._idx], 1), cat([a._vals, bv], 0), a._size)
        return out.coalesce() if out._nnz() > math.prod(a._size) else out
    coalesced = a._coalesced and b._coalesced
    if coalesced:  # (the walk over sorted unique entries: their union)
        out = SparseTensor(cat([a._idx, b._idx], 1), cat([a._vals, bv], 0), a._size)
        return out.coalesce()
    la, lb = a._linear_index()._data.tolist(), b._linear_index()._data.tolist()
    pa, pb, i, j, n = [], [], 0, 0, 0
    while i < len(la) or j < len(lb):
        take_a = j >= len(lb) or (i < len(la) and la[i] <= lb[j])
        take_b = i >= len(la) or (j < len(lb) and lb[j] <= la[i])
        if take_a:
            pa.append(n)
            i += 1
        if take_b:
            pb.append(n)
            j += 1
        n += 1
    pa = Tensor._wrap(new_array(a._idx._data, pa, np.int64))
    pb = Tensor._wrap(new_array(a._idx._data, pb, np.int64))
    idx = zeros((a.sparse_dim(), n), dtype=a._idx.dtype, device=a._idx.device) \
        .index_copy(1, pb, b._idx).index_copy(1, pa, a._idx)
    vals = zeros((n,) + tuple(a._vals.shape[1:]), dtype=a._vals.dtype, device=a._vals.device)
    return SparseTensor(idx, vals.index_add(0, pa, a._vals).index_add(0, pb, bv), a._size)


def _mul_sparse(a, b):
    """The entries both operands specify, their values multiplied (flagged coalesced when
    both operands were, as torch's)."""
    _same_size(a, b, "mul")
    coalesced = a._coalesced and b._coalesced
    a, b = _promoted(a.coalesce(), b.coalesce())
    la, lb = a._linear_index()._data, b._linear_index()._data
    xp = array_module(la)
    _, ia, ib = xp.intersect1d(la, lb, assume_unique=True, return_indices=True)
    if coalesced and a._nnz() and b._nnz() and a.dtype == b.dtype == dtypes.bool and \
            (ia.size or not a.dense_dim()):  # (torch's mul_out_sparse has no bool kernel:
        # a hybrid one with no common entry does not reach it)
        raise NotImplementedError("mul: sparse * sparse is not implemented for bool values; "
                                  "convert both with .to() (an integer type) first")
    ia, ib = Tensor._wrap(ia.astype(np.int64)), Tensor._wrap(ib.astype(np.int64))
    return SparseTensor(a._idx.index_select(1, ia),
                        a._vals.index_select(0, ia) * b._vals.index_select(0, ib), a._size,
                        coalesced=coalesced)


def _mul_dense(s, d):
    """sparse * dense (a number, or broadcasting to the sparse tensor's shape): sparse, the
    values times the dense entries at the indices."""
    if not isinstance(d, Tensor) or d.ndim == 0:
        return _no_entries_if_empty(s, s._vals * d)
    try:
        shape = np.broadcast_shapes(tuple(d.shape), s._size)
    except ValueError:
        shape = None
    if shape != s._size:
        raise RuntimeError(f"mul: the dense operand of shape {tuple(d.shape)} does not "
                           f"broadcast to the sparse operand's size {s._size}")
    at = d.expand(s._size)[tuple(s._idx[k] for k in range(s.sparse_dim()))]
    return _no_entries_if_empty(s, s._vals * at)


def _no_entries_if_empty(s, values):
    """s's entries with `values`; none, coalesced, when s has no elements (torch's sparse-dense
    intersection returns no entries for a sparse operand of numel 0, such as one narrowed to
    length 0 along a dense dim, whatever its nnz)."""
    if 0 in s._size and s._nnz():
        return SparseTensor(s._idx[:, :0], values[:0], s._size, coalesced=True)
    return SparseTensor(s._idx, values, s._size, s._coalesced)


# ---- softmax over the specified entries -----------------------------------------------------
def softmax(input, dim, dtype=None):
    """torch.sparse.softmax: softmax along `dim` over the specified entries (the unspecified
    ones count as -inf, so they stay unspecified); coalesced, with input's indices.

    >>> import flowgrad as flow
    >>> A = flow.sparse_coo_tensor([[0, 0, 1], [0, 2, 1]], [1.0, 1.0, 3.0], (2, 3))
    >>> flow.sparse.softmax(A, 1).values()
    tensor([0.5000, 0.5000, 1.0000])
    """
    return _softmax(input, dim, dtype, log=False)


def log_softmax(input, dim, dtype=None):
    """torch.sparse.log_softmax: `softmax`'s logarithm, computed as x - max - log(sum)."""
    return _softmax(input, dim, dtype, log=True)


def _softmax(input, dim, dtype, log):
    name = "sparse.log_softmax" if log else "sparse.softmax"
    if type(input) is not SparseTensor:
        raise TypeError(f"{name}: expected a sparse COO tensor, got {type(input).__name__}")
    nd = input.dim()
    if not -nd <= dim < nd:
        raise IndexError(f"{name}: dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {dim})")
    dim %= nd
    s = input.coalesce()
    vals = s._vals if dtype is None else s._vals.to(dtype)
    if vals.dtype.is_floating_point is False and 0 not in s._size:  # (torch's
        # NotImplementedError; an empty tensor it returns)
        raise NotImplementedError(f"{name}: not implemented for {vals.dtype} values; pass "
                                  f"dtype= a floating point type, or convert with .to()")
    if 0 in s._size:  # (no entries, as torch's, whatever the nnz of a dense dim of size 0)
        return SparseTensor(s._idx[:, :0], vals[:0], s._size, coalesced=True)
    ns = s.sparse_dim()
    if dim >= ns:  # a dense dim: each entry's own values
        d = 1 + dim - ns
        out = vals.log_softmax(d) if log else vals.softmax(d)
        return SparseTensor(s._idx, out, s._size, coalesced=True)
    group = _group_of(s, dim)  # entries that share every index but dim's
    n_groups = int(group._data.max()) + 1 if group._data.size else 0
    shape = (n_groups,) + tuple(vals.shape[1:])
    top = zeros(shape, dtype=vals.dtype).index_reduce(0, group, vals.detach(), "amax",
                                                      include_self=False)
    shifted = vals - top.index_select(0, group)
    e = shifted.exp()
    total = zeros(shape, dtype=vals.dtype).index_add(0, group, e).index_select(0, group)
    out = shifted - total.log() if log else e / total
    return SparseTensor(s._idx, out, s._size, coalesced=True)


def _group_of(s, dim):
    """int64 tensor: for each entry, the number of its group (entries whose indices agree
    in every sparse dim but `dim`)."""
    xp = array_module(s._idx._data)
    idx = s._idx._data
    rest = [k for k in range(s.sparse_dim()) if k != dim]
    if not rest:
        return Tensor._wrap(xp.zeros(idx.shape[1], np.int64))
    key = xp.ravel_multi_index(tuple(idx[k] for k in rest), tuple(s._size[k] for k in rest))
    _, group = xp.unique(key, return_inverse=True)
    return Tensor._wrap(group.reshape(-1).astype(np.int64))


# ---- select and index_select ----------------------------------------------------------------
def _dim(s, dim, name, nd=None):
    """`dim` of s (of `nd` dims: a new dim's position counts one more) as a non-negative
    int, or torch's IndexError naming `name`."""
    nd = s.dim() if nd is None else nd
    if not -nd <= dim < nd:
        raise IndexError(f"{name}: dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {dim})")
    return dim % nd


def select(s, dim, index):
    """The slice at `index` of `dim`: sparse (the entries with that index, uncoalesced as
    torch's), or the values' slice along a dense dim."""
    dim = _dim(s, dim, "select")
    size = s._size[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {s._size} "
                         f"at dimension {dim}")
    index %= size
    ns = s.sparse_dim()
    rest = tuple(v for k, v in enumerate(s._size) if k != dim)
    if dim >= ns:
        return SparseTensor(s._idx, s._vals.select(1 + dim - ns, index), rest, s._coalesced)
    hit = Tensor._wrap(array_module(s._idx._data).flatnonzero(s._idx._data[dim] == index))
    keep = [k for k in range(ns) if k != dim]
    return SparseTensor(s._idx[keep].index_select(1, hit), s._vals.index_select(0, hit), rest)


def index_select(s, dim, index):
    """The slices at `index` (a 1-D int64 tensor) of `dim` (repeats repeat): sparse,
    uncoalesced as torch's, its entries in the order of torch's loop for small sizes (by
    position in `index`, or by entry when there are fewer entries than positions)."""
    dim = _dim(s, dim, "index_select")
    if not isinstance(index, Tensor) or index.ndim > 1 or index.dtype.is_floating_point:
        raise RuntimeError("index_select(): expected a 1-D integer index tensor")
    ns, size = s.sparse_dim(), s._size[dim]
    if dim >= ns:
        vals = s._vals.index_select(1 + dim - ns, index)
        return SparseTensor(s._idx, vals, s._size[:dim] + (index.numel(),) + s._size[dim + 1:])
    wanted = index._data.reshape(-1).astype(np.int64)
    if wanted.size and (wanted.min() < 0 or wanted.max() >= size):
        raise IndexError(f"index_select(): index out of range for dimension {dim} of size "
                         f"{size}: {wanted.tolist()}")
    xp = array_module(s._idx._data)
    row = s._idx._data[dim]
    if row.size < wanted.size:  # (torch's loop for small sizes: the shorter one outside)
        entry, position = xp.nonzero(row[:, None] == wanted[None, :])
    else:
        position, entry = xp.nonzero(wanted[:, None] == row[None, :])
    entry_t = Tensor._wrap(entry.astype(np.int64))
    idx = s._idx._data[:, entry].copy()
    idx[dim] = position
    size_out = s._size[:dim] + (len(wanted),) + s._size[dim + 1:]
    return SparseTensor(Tensor._wrap(idx), s._vals.index_select(0, entry_t), size_out)


def _install():
    for name in _ZERO_TO_ZERO:
        setattr(SparseTensor, name, _on_values(name))
    SparseTensor.pow = SparseTensor.__pow__ = pow
    SparseTensor.select = select
    SparseTensor.index_select = index_select
    SparseTensor.__add__ = SparseTensor.add = lambda a, b, *, alpha=1: binary("add", a, b, alpha)
    SparseTensor.__sub__ = SparseTensor.sub = lambda a, b, *, alpha=1: binary("sub", a, b, alpha)
    SparseTensor.__radd__ = lambda a, b: binary("add", b, a)
    SparseTensor.__rsub__ = lambda a, b: binary("sub", b, a)
    SparseTensor.__mul__ = SparseTensor.__rmul__ = SparseTensor.mul = \
        lambda a, b: binary("mul", a, b)
    SparseTensor.__truediv__ = SparseTensor.div = lambda a, b: binary("div", a, b)


_install()

__all__ = ["binary", "softmax", "log_softmax", "select", "index_select"]
