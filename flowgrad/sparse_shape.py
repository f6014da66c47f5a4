"""Shapes and products of sparse COO tensors, as torch's: unsqueeze, permute, narrow_copy,
cat and stack of sparse tensors, zeros_like, matrix @ vector (mv), batched sparse @ dense
(bmm), and the p-norm of all values. Each works on the indices and values with dense ops, so
gradients reach the values as everywhere in `sparse.py`.

The functional forms (`flowgrad.cat([s, s])`, `flowgrad.abs(s)`, `flowgrad.mv(s, v)`) reach
these through `sparse_form`: a dense function that meets a sparse first operand raises
`SparseOperandError` when it reads it, and the argument guard every public function has
catches that and calls the sparse form of the same name instead (`errors.sparse_form`; no
cost to dense calls).

>>> import flowgrad as flow
>>> A = flow.sparse_coo_tensor([[0, 1], [2, 0]], [3.0, 4.0], (2, 3))
>>> flow.cat([A, A]).to_dense()
tensor([[0., 0., 3.],
        [4., 0., 0.],
        [0., 0., 3.],
        [4., 0., 0.]])
>>> flow.mv(A, flow.ones(3))
tensor([3., 4.])
"""
from __future__ import annotations

from . import errors
from .device import array_module
from .sparse import SparseTensor
from .sparse_ops import _dim
from .tensor import Tensor

__all__ = ["unsqueeze", "permute", "narrow_copy", "cat", "stack", "zeros_like", "mv", "bmm",
           "norm"]


def _pure(s, name):
    if s.dense_dim():
        raise NotImplementedError(f"{name}: hybrid sparse tensors (dense dims in the values) "
                                  f"are not supported; call .to_dense() first")


def unsqueeze(s, dim):
    """A size-1 dim at `dim`: a row of zeros in the indices (or in the values' dense dims)."""
    dim = _dim(s, dim, "unsqueeze", s.dim() + 1)
    size = s._size[:dim] + (1,) + s._size[dim:]
    ns = s.sparse_dim()
    # (never coalesced after, as torch's)
    if dim > ns:  # among the dense dims
        return SparseTensor(s._idx, s._vals.unsqueeze(1 + dim - ns), size)
    from .ops.shape import cat as dense_cat

    idx = s._idx
    idx = dense_cat([idx[:dim], idx.new_zeros(1, idx.shape[1]), idx[dim:]], 0)
    return SparseTensor(idx, s._vals, size)


def permute(s, *dims):
    """The sparse dims reordered (the indices' rows), uncoalesced as torch's."""
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    nd = s.dim()
    if len(dims) != nd:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions: "
                           f"input.dim() = {nd} is not equal to len(dims) = {len(dims)}")
    order = [_dim(s, d, "permute") for d in dims]
    if sorted(order) != list(range(nd)):
        raise RuntimeError(f"permute(sparse_coo): repeated dim in {tuple(dims)}")
    _pure(s, "permute")
    from .ops.shape import stack as dense_stack

    idx = dense_stack([s._idx[k] for k in order], 0)
    return SparseTensor(idx, s._vals, tuple(s._size[k] for k in order))


def narrow_copy(s, dim, start, length):
    """The entries with start <= index < start + length along `dim`, shifted to 0."""
    dim = _dim(s, dim, "narrow_copy")
    size = s._size[dim]
    start = start + size if start < 0 else start
    if not (0 <= start <= size and 0 <= length <= size - start):
        raise IndexError(f"narrow_copy(): start ({start}) + length ({length}) exceeds dimension "
                         f"size ({size})")
    ns = s.sparse_dim()
    out_size = s._size[:dim] + (length,) + s._size[dim + 1:]
    if dim >= ns:
        # (a copy: contiguous values, as torch's, which sparse + sparse reads)
        return SparseTensor(s._idx, s._vals.narrow(1 + dim - ns, start, length).contiguous(),
                            out_size, s._coalesced)
    xp = array_module(s._idx._data)
    row = s._idx._data[dim]
    keep = Tensor._wrap(xp.flatnonzero((row >= start) & (row < start + length)))
    idx = s._idx.index_select(1, keep).clone()
    idx[dim] -= start
    return SparseTensor(idx, s._vals.index_select(0, keep), out_size, s._coalesced)


def cat(tensors, dim=0):
    """Sparse tensors of one sparse/dense layout joined along `dim`: their entries, the
    indices along `dim` offset by the sizes before them."""
    tensors = list(tensors)
    if not all(type(t) is SparseTensor for t in tensors):
        raise RuntimeError("cat(): expected all tensors to be sparse COO (a dense one beside "
                           "sparse ones: call .to_dense() on the sparse ones)")
    first = tensors[0]
    nd, ns = first.dim(), first.sparse_dim()
    dim = _dim(first, dim, "cat")
    for t in tensors:
        if t.dim() != nd or t.sparse_dim() != ns or any(
                a != b for k, (a, b) in enumerate(zip(t._size, first._size)) if k != dim):
            raise RuntimeError(f"cat(): sparse tensors must match in sizes (except dim {dim}) "
                               f"and sparse dims, got sizes {first._size} and {t._size}")
    from .ops.shape import cat as dense_cat

    size = first._size[:dim] + (sum(t._size[dim] for t in tensors),) + first._size[dim + 1:]
    if dim >= ns:  # a dense dim: only when every tensor has the same indices (torch's rule)
        raise NotImplementedError("cat(): along a dense dim of hybrid sparse tensors is not "
                                  "supported; call .to_dense() first")
    pieces, offset = [], 0
    for t in tensors:
        idx = t._idx
        if offset:
            shift = idx.new_zeros(ns, 1)
            shift[dim] = offset
            idx = idx + shift
        pieces.append(idx)
        offset += t._size[dim]
    return SparseTensor(dense_cat(pieces, 1), dense_cat([t._vals for t in tensors], 0), size)


def stack(tensors, dim=0):
    """Sparse tensors of one size stacked along a new `dim`."""
    tensors = list(tensors)
    if not tensors or not all(type(t) is SparseTensor for t in tensors):
        raise RuntimeError("stack(): expected all tensors to be sparse COO")
    dim = _dim(tensors[0], dim, "stack", tensors[0].dim() + 1)
    return cat([unsqueeze(t, dim) for t in tensors], dim)


def zeros_like(s, *, dtype=None, **_):
    """A sparse tensor of s's size with no entries."""
    idx = s._idx.new_zeros(s.sparse_dim(), 0)
    vals = s._vals.new_zeros((0,) + tuple(s._vals.shape[1:]), dtype=dtype)
    return SparseTensor(idx, vals, s._size, coalesced=True)


def mv(s, vec):
    """sparse matrix @ dense vector -> dense vector."""
    if s.dim() != 2 or not isinstance(vec, Tensor) or vec.dim() != 1:
        raise RuntimeError(f"mv: expected a 2-D sparse matrix and a 1-D vector, got "
                           f"{s.dim()}-D and {getattr(vec, 'ndim', type(vec).__name__)}")
    return (s @ vec.unsqueeze(1)).squeeze(1)


def bmm(s, dense):
    """Batched sparse (b, n, m) @ dense (b, m, p) -> dense (b, n, p): each entry (k, i, j, v)
    adds v * dense[k, j] to out[k, i]."""
    if s.dim() != 3 or not isinstance(dense, Tensor) or dense.dim() != 3 or \
            s._size[0] != dense.shape[0] or s._size[2] != dense.shape[1]:
        raise RuntimeError(f"bmm: expected sparse (b, n, m) and dense (b, m, p), got sizes "
                           f"{s._size} and {tuple(getattr(dense, 'shape', ()))}")
    _pure(s, "bmm")
    if s.dtype != dense.dtype:
        raise RuntimeError(f"bmm: expected both operands to have the same dtype, but got "
                           f"{s.dtype} and {dense.dtype}")
    b, n = s._size[0], s._size[1]
    batch, row, col = s._idx[0], s._idx[1], s._idx[2]
    p = dense.shape[2]
    picked = dense.reshape(-1, p).index_select(0, batch * dense.shape[1] + col)
    out = dense.new_zeros(b * n, p)
    return out.index_add(0, batch * n + row, s._vals.unsqueeze(-1) * picked).reshape(b, n, p)


def norm(s, p="fro", dim=None, keepdim=False, dtype=None):
    """The p-norm of all values (unspecified entries are 0); torch's sparse norm takes no
    dim."""
    if dim is not None:
        raise RuntimeError("norm(sparse_coo): dim is not supported, as torch's sparse norm; "
                           "call .to_dense() first")
    from .ops.norm import vector_norm

    vals = s.coalesce()._vals
    order = 2 if p in ("fro", None) else p
    return vector_norm(vals if dtype is None else vals.to(dtype), order)


# functional forms whose first argument is a list of tensors, or that are not methods
_FUNCTIONS = {"cat": cat, "concat": cat, "concatenate": cat, "stack": stack,
              "zeros_like": zeros_like}


def _sparse_form(name, args, kwargs, error):
    """The sparse form of public function `name` called on `args` (its first operand, or the
    first of its list, sparse), or `error` raised again when there is none."""
    first = args[0] if args else None
    if isinstance(first, (list, tuple)) and first:
        first = first[0]
    if type(first) is not SparseTensor:
        raise error
    function = _FUNCTIONS.get(name) or getattr(SparseTensor, name, None)
    if function is None:
        raise error
    return function(*args, **kwargs)


def _install():
    errors.SPARSE_FORMS.append(_sparse_form)
    SparseTensor.unsqueeze = unsqueeze
    SparseTensor.permute = permute
    SparseTensor.narrow_copy = narrow_copy
    SparseTensor.mv = mv
    SparseTensor.bmm = bmm
    SparseTensor.norm = norm


_install()
