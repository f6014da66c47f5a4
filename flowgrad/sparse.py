"""flowgrad.sparse: sparse COO tensors, enough for graph convolutions and for the sparse
weight gradients of `Embedding(sparse=True)` (which the engine sums into `.grad`).

A `SparseTensor` holds two dense flowgrad tensors, `indices` (sparse_dim, nnz) int64 and
`values` (nnz, *dense_shape), and its size. Every operation on it is composed of dense ops on
those two (index_select to gather, index_add to scatter), so gradients reach the values (and
the dense operand of a product) through the ordinary rules, to any order: there is no sparse
kernel and no sparse rule. What is not listed here raises, pointing to `to_dense()`.

>>> import flowgrad as flow
>>> A = flow.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
>>> flow.sparse.mm(A, flow.ones(3, 2))
tensor([[3., 3.],
        [9., 9.]])
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np

from .autograd import accumulate as _accumulate
from .autograd import engine as _engine
from .autograd.function import Function
from .autograd.interpreter import check_read, require, varies_per_run
from .device import array_module
from .errors import SparseOperandError
from .sparse_checks import check_sparse_tensor_invariants  # noqa: F401 - torch.sparse's
from .tensor import Tensor

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_HELPERS = (__file__, os.path.join(_PACKAGE, "errors.py"))  # not an op a user called

__all__ = ["SparseTensor", "sparse_coo_tensor", "mm", "sum", "addmm", "sampled_addmm", "strided",
           "sparse_coo", "layout", "softmax", "log_softmax", "check_sparse_tensor_invariants"]


class layout:
    """A tensor's memory layout: `flowgrad.strided` (dense) or `flowgrad.sparse_coo`."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"flowgrad.{self.name}"

    def __reduce__(self):
        return self.name


strided = layout("strided")
sparse_coo = layout("sparse_coo")
Tensor.layout = property(lambda self: strided, doc="flowgrad.strided: dense tensors")
Tensor.is_sparse = property(lambda self: False, doc="False: dense tensors")

_SUPPORTED = ("to_dense, coalesce, is_coalesced, indices, values, _indices, _values, "
              "sparse_dim, dense_dim, _nnz, size, t, transpose, detach, clone, to, "
              "float, double, sparse + and - sparse, dense + and - sparse, * by a sparse or "
              "dense tensor or a number, / by a number, neg, functions with f(0) = 0 (abs, "
              "sqrt, sin, tanh, relu, pow by a positive number, ...), select, index_select, "
              "sum, mm/spmm/@ with a dense matrix, mv, bmm, norm, unsqueeze, permute, "
              "narrow_copy, cat, stack, zeros_like, flowgrad.sparse.sum/softmax/log_softmax, "
              "sparse_mask, to_sparse_csr/csc/bsr/bsc")


def _as_tensor(x, dtype=None):
    from .ops.creation import tensor

    if isinstance(x, Tensor):
        return x if dtype is None else x.to(dtype)
    return tensor(x, dtype=dtype)


class SparseMetadata:
    """What COO and compressed sparse tensors read alike from their size and values."""

    __slots__ = ()

    @property
    def shape(self):
        from .tensor import Size

        return Size(self._size)

    def size(self, dim=None):
        return self.shape if dim is None else self._size[dim]

    def dim(self):
        return len(self._size)

    ndim = property(dim)
    dtype = property(lambda self: self._vals.dtype)
    device = property(lambda self: self._vals.device)
    requires_grad = property(lambda self: self._vals.requires_grad)
    is_leaf = property(lambda self: self._vals.is_leaf)

    # a dense op reading the array names itself and the remedy
    def _unsupported(self, name):
        def raise_():
            raise SparseOperandError(
                f"{name} is not supported on flowgrad's {self._kind()} tensors (size "
                f"{self._size}); call .to_dense() first. Supported: {self._supported}")
        return raise_

    def __getattr__(self, name):
        if hasattr(Tensor, name):
            if name.startswith("_"):  # a dense op reading the array: name that op instead
                name = _public_caller() or name
            self._unsupported(name)()
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    def __add__(self, other):
        self._unsupported("add")()

    __radd__ = __sub__ = __rsub__ = __add__


class SparseTensor(SparseMetadata):
    """A sparse COO tensor (see the module's docstring). Made by `flowgrad.sparse_coo_tensor`
    or `Tensor.to_sparse()`."""

    __slots__ = ("_idx", "_vals", "_size", "_coalesced", "_src")
    is_sparse = True
    layout = sparse_coo

    def __init__(self, indices, values, size, coalesced=False):
        self._idx, self._vals, self._size = indices, values, tuple(int(s) for s in size)
        self._coalesced = coalesced or indices.shape[1] < 2  # (one entry is coalesced: torch's)
        self._src = None  # the dense tensor to_sparse() made this of: see _DenseGrad

    def sparse_dim(self):
        return self._idx.shape[0]

    def dense_dim(self):
        return len(self._size) - self.sparse_dim()

    def _nnz(self):
        return self._idx.shape[1]

    def is_coalesced(self):
        return self._coalesced

    def requires_grad_(self, requires_grad=True):
        self._vals.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        """The gradient at this tensor's entries, as a sparse tensor in torch's form: a
        duplicated index appears once (sorted), with the gradient of each of its copies, and,
        as torch's, it is not flagged coalesced."""
        g = self._vals.grad
        if g is None:
            return None
        uniq_idx, _, first = self._unique()
        return SparseTensor(uniq_idx, g[Tensor._wrap(first)], self._size)

    # ---- parts -----------------------------------------------------------------------------
    def _indices(self):
        return self._idx

    def _values(self):
        return self._vals

    def indices(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._idx

    def values(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._vals

    def _linear_index(self):
        """Row-major position of each entry among the sparse dims (int64 tensor; all 0 when
        there are none: every entry lands on the one dense block)."""
        sizes = self._size[:self.sparse_dim()]
        if not sizes:
            from .ops.creation import zeros

            return zeros(self._nnz(), dtype=self._idx.dtype, device=self._idx.device)
        strides = [math.prod(sizes[d + 1:]) for d in range(len(sizes))]
        lin = None
        for d, s in enumerate(strides):
            term = self._idx[d] * s
            lin = term if lin is None else lin + term
        return lin

    def _unique(self):
        """(sorted unique indices, each entry's position among them, each one's first entry)."""
        xp = array_module(self._vals._data)
        sizes = self._size[:self.sparse_dim()]
        linear = self._linear_index()
        check_read(linear, "a sparse tensor's coalescing")  # (how many entries stay: values')
        uniq, first, inverse = xp.unique(linear._data, return_index=True, return_inverse=True)
        idx = xp.stack(xp.unravel_index(uniq, sizes)) if sizes else xp.zeros((0, len(uniq)))
        return (Tensor._wrap(idx.astype(np.int64).reshape(len(sizes), len(uniq))),
                Tensor._wrap(inverse.reshape(-1).astype(np.int64)), first.astype(np.int64))

    def coalesce(self):
        """Sorted, unique indices; the values of duplicates summed (differentiable)."""
        if self._coalesced:
            return self
        from .ops.creation import zeros

        idx, inverse, _ = self._unique()
        vals = zeros((idx.shape[1],) + tuple(self._vals.shape[1:]), dtype=self._vals.dtype,
                     device=self._vals.device)
        return SparseTensor(idx, vals.index_add(0, inverse, self._vals), self._size,
                            coalesced=True)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The dense tensor (duplicates summed); gradients flow to the values."""
        from .ops.creation import zeros

        if dtype is not None:
            raise RuntimeError(f"to_dense: the dtype argument is not supported for sparse "
                               f"tensors (as torch's sparse_to_dense), got {dtype}; call "
                               f".to_dense().to({dtype}) instead")
        nsparse = math.prod(self._size[:self.sparse_dim()])
        dense = self._size[self.sparse_dim():]
        out = zeros((nsparse,) + dense, dtype=self._vals.dtype, device=self._vals.device)
        return out.index_add(0, self._linear_index(), self._vals).reshape(self._size)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        """Itself (COO), or the compressed `layout` (sparse_dim 2 only, as torch's)."""
        if layout in (None, sparse_coo):
            return self
        return _compressed()._convert(self, layout, blocksize, dense_dim, "to_sparse")

    def to_sparse_coo(self):
        return self

    def to_sparse_csr(self, dense_dim=None):
        mod = _compressed()
        return mod._convert(self, mod.sparse_csr, None, dense_dim, "to_sparse_csr")

    def to_sparse_csc(self, dense_dim=None):
        mod = _compressed()
        return mod._convert(self, mod.sparse_csc, None, dense_dim, "to_sparse_csc")

    def to_sparse_bsr(self, blocksize, dense_dim=None):
        mod = _compressed()
        return mod._convert(self, mod.sparse_bsr, blocksize, dense_dim, "to_sparse_bsr")

    def to_sparse_bsc(self, blocksize, dense_dim=None):
        mod = _compressed()
        return mod._convert(self, mod.sparse_bsc, blocksize, dense_dim, "to_sparse_bsc")

    def sparse_mask(self, mask):
        """self's entries at the mask's indices (as torch's, through the dense form)."""
        return _compressed()._sparse_mask(self.to_dense(), mask)

    def _compressed_only(self, name, kind):
        raise RuntimeError(f"{name} expected sparse {kind} compressed tensor layout but got "
                           f"Sparse; convert with .to_sparse_{'csr' if kind == 'row' else 'csc'}()"
                           f" first")

    crow_indices = lambda self: self._compressed_only("crow_indices", "row")  # noqa: E731
    col_indices = lambda self: self._compressed_only("col_indices", "row")  # noqa: E731
    ccol_indices = lambda self: self._compressed_only("ccol_indices", "column")  # noqa: E731
    row_indices = lambda self: self._compressed_only("row_indices", "column")  # noqa: E731
    is_sparse_csr = False

    # ---- a few elementwise forms on the values ---------------------------------------------
    def _with_values(self, values):
        return SparseTensor(self._idx, values, self._size, self._coalesced)

    def __neg__(self):
        return self._with_values(-self._vals)

    neg = __neg__  # (+, -, *, / and the functions of the values: sparse_ops.py)

    def sum(self, dim=None, keepdim=False, dtype=None):
        """Tensor.sum on a sparse tensor: over all, the stored values as they are (torch does not
        coalesce here, unlike flowgrad.sparse.sum); over `dim`, flowgrad.sparse.sum."""
        if keepdim:
            raise NotImplementedError("sum: keepdim=True is not supported on sparse tensors; "
                                      "call .to_dense() first")
        if dim is None:
            return self._vals.sum(dtype=dtype)
        return sum(self, dim, dtype)

    def detach(self):
        return self._with_values(self._vals.detach())

    def zero_(self):
        """No entries left, the size kept (torch's zero_() of a sparse tensor; an optimizer's
        zero_grad(set_to_none=False) of a sparse gradient)."""
        self._idx, self._vals = self._idx[:, :0], self._vals.detach()[:0]
        self._coalesced = True
        return self

    def clone(self):
        return SparseTensor(self._idx.clone(), self._vals.clone(), self._size, self._coalesced)

    def to(self, dtype):
        return self._with_values(self._vals.to(dtype))

    def float(self):
        return self.to(self._float("float32"))

    def double(self):
        return self.to(self._float("float64"))

    def long(self):
        return self.to(self._float("int64"))

    def int(self):
        return self.to(self._float("int32"))

    def bool(self):
        return self.to(self._float("bool"))

    @staticmethod
    def _float(name):
        from . import dtypes

        return getattr(dtypes, name)

    def transpose(self, dim0, dim1):
        """Swap two sparse dims (the result is not coalesced, as torch's; a dim with itself:
        the tensor as it is, any dim)."""
        n = self.sparse_dim()
        d0, d1 = dim0 % self.dim(), dim1 % self.dim()
        if d0 == d1:
            out = SparseTensor(self._idx, self._vals, self._size, coalesced=self._coalesced)
            out._src = self._src
            return out
        if d0 >= n or d1 >= n:  # (torch's RuntimeError)
            raise RuntimeError(f"sparse transpose: transposed dimensions must be sparse, got "
                               f"sparse_dim {n}, dims {dim0} and {dim1}; call .to_dense() "
                               f"first")
        order = list(range(n))
        order[d0], order[d1] = order[d1], order[d0]
        size = list(self._size)
        size[d0], size[d1] = size[d1], size[d0]
        out = SparseTensor(self._idx[order], self._vals, size)
        if self._src is not None:
            out._src = self._src.transpose(d0, d1)
        return out

    def t(self):
        if self.dim() < 2:
            return self._with_values(self._vals)
        if self.dim() > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.dim()}D")
        return self.transpose(0, 1)

    def __matmul__(self, other):
        return torch_mm(self, other)

    def __rmatmul__(self, other):
        return torch_mm(other, self)

    def __len__(self):
        return self._size[0]

    def __format__(self, spec):  # (torch's: a 0-d one formats its number, as a dense one)
        if not self._size:
            return self.to_dense().__format__(spec)
        return object.__format__(self, spec)

    def __repr__(self):
        # torch's: indices and values as the inner tensors' text (no dtype; an empty one's
        # size), then size, nnz, a dtype not implied (as a dense tensor's), the layout and
        # requires_grad/grad_fn, the first suffix on a new line
        from .printing import implied_dtype, tensor_str, with_suffixes

        inner = []
        for name, t in (("indices", self._idx), ("values", self._vals)):
            text = tensor_str(t, 7 + len(name) + 8)
            inner.append(f"{name}=tensor({text}" + (f", size={tuple(t.shape)})" if
                                                    not t.numel() else ")"))
        extras = [f"size={self._size}", f"nnz={self._nnz()}"]
        if not implied_dtype(self.dtype):
            extras.append(f"dtype={self.dtype}")
        extras.append("layout=flowgrad.sparse_coo")
        return with_suffixes(self._vals, "tensor(", ",\n       ".join(inner), extras,
                             force_newline=True)

    # ---- everything else: SparseMetadata's refusals -----------------------------------------
    _supported = _SUPPORTED

    def _kind(self):
        return "sparse COO"


# (the engine sums sparse gradients: Embedding(sparse=True); hooks may return them)
_engine.SparseTensor = _accumulate.SparseTensor = _engine._node_hooks.SPARSE[0] = SparseTensor


def _public_caller():
    """The name of the innermost public flowgrad function on the stack (`mv`, `relu`, `mul`
    for `dense * sparse`): the op a sparse operand was passed to. Walked on the error path
    only."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        name = code.co_name
        if (code.co_filename.startswith(_PACKAGE) and code.co_filename not in _HELPERS
                and not name.startswith(("_", "<"))):
            return name
        frame = frame.f_back
    return None


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """A sparse COO tensor from `indices` (sparse_dim, nnz) and `values` (nnz, *dense).
    `size` defaults to the smallest that holds the indices, which are always checked against it
    (torch checks only with check_invariants=True). With requires_grad the values become a leaf
    that accumulates the gradient (`S.grad` is sparse with the same indices).

    >>> import flowgrad as flow
    >>> flow.sparse_coo_tensor([[0, 2]], [1.0, 5.0], (4,)).to_dense()
    tensor([1., 0., 5., 0.])
    """
    from . import dtypes

    idx = _as_tensor(indices, dtypes.int64)
    vals = _as_tensor(values, dtype)
    if idx._data.ndim != 2:
        raise RuntimeError(f"sparse_coo_tensor: indices must be sparse_dim x nnz, but got "
                           f"shape {tuple(idx.shape)}")
    if idx._data.dtype.kind not in "iu":
        raise RuntimeError(f"sparse_coo_tensor: indices must be an int64 tensor, got "
                           f"{idx.dtype}")
    nsparse, nnz = idx._data.shape
    if vals._data.ndim == 0 or vals._data.shape[0] != nnz:
        raise RuntimeError(f"sparse_coo_tensor: number of dimensions... indices have {nnz} "
                           f"entries but values have shape {tuple(vals.shape)}: values must be "
                           f"(nnz, *dense_shape)")
    idx = idx.long()
    dense = tuple(vals._data.shape[1:])
    if size is None:
        check_read(idx, "sparse_coo_tensor() without a size")  # (the size: the indices' max)
        top = idx._data.max(1) + 1 if nnz else np.zeros(nsparse, np.int64)
        size = tuple(int(t) for t in top) + dense
    size = tuple(int(s) for s in size)
    if len(size) != nsparse + len(dense) or tuple(size[nsparse:]) != dense:
        raise RuntimeError(f"sparse_coo_tensor: size {size} does not match {nsparse} sparse "
                           f"dims and values' dense shape {dense}")
    if nnz and ((idx._data < 0).any() or (idx._data.max(1) >= np.array(size[:nsparse])).any()):
        # torch builds these unchecked unless check_invariants=True (its uses are then
        # undefined); flowgrad always checks, with the words of torch's check
        d = int(((idx._data < 0).any(1) | (idx._data.max(1) >= size[:nsparse])).nonzero()[0][0])
        low, high = int(idx._data[d].min()), int(idx._data[d].max())
        what = (f"found negative index {low} for dim {d}" if low < 0 else
                f"size is inconsistent with indices: for dim {d}, size is {size[d]} but found "
                f"index {high}")
        raise RuntimeError(f"sparse_coo_tensor: indices out of bounds for size {size}: {what}")
    if nnz and varies_per_run(idx):  # (a plan's indices: checked on each call's)
        bound = idx.new_tensor(size[:nsparse]).unsqueeze(1)
        require((idx >= 0) & (idx < bound), f"sparse_coo_tensor: indices out of bounds for "
                                            f"size {size}", RuntimeError)
    if requires_grad:
        vals = vals.detach()._set_requires_grad(True)
    return SparseTensor(idx, vals, size, coalesced=bool(is_coalesced))


def _to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """Tensor.to_sparse: the non-zero entries (over the first `sparse_dim` dims; a slice of
    the remaining dims is kept when any of it is non-zero). Gradients flow back to self."""
    for arg, value in (("sparse_dim", sparse_dim), ("dense_dim", dense_dim)):
        _check_int("to_sparse", arg, value)
    if layout not in (None, sparse_coo):
        return _compressed()._convert(self, layout, blocksize, dense_dim, "to_sparse")
    if blocksize is not None:
        raise RuntimeError(f"to_sparse: blocksize is for the block layouts (sparse_bsr, "
                           f"sparse_bsc), got blocksize {blocksize} with layout {layout}")
    if dense_dim is not None:
        sparse_dim = self.ndim - int(dense_dim)
    check_read(self, "to_sparse()")  # (which entries are stored is the values': no plan repeats it)
    if self.ndim == 0 and sparse_dim is None:  # torch: no sparse dims, one entry if non-zero
        nnz = int(bool(self._data != 0))
        idx = Tensor._wrap(array_module(self._data).zeros((0, nnz), dtype=np.int64))
        return SparseTensor(idx, self.reshape(1)[:nnz], (), coalesced=True)
    n = self.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 < n <= self.ndim:
        raise RuntimeError(f"to_sparse: sparse_dim must be in 1..{self.ndim}, got {sparse_dim}")
    data = self._data
    mask = data != 0 if n == data.ndim else (data != 0).any(axis=tuple(range(n, data.ndim)))
    xp = array_module(data)
    idx = xp.stack(xp.nonzero(mask)).astype(np.int64)
    values = self[tuple(Tensor._wrap(i) for i in idx)]
    out = SparseTensor(Tensor._wrap(idx), values, tuple(self.shape), coalesced=True)
    if self.requires_grad and n == self.ndim:
        out._src = self
    return out


def _check_int(name, arg, value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
        raise TypeError(f"{name}(): argument '{arg}' must be int, not {type(value).__name__}")


def _compressed():
    from . import sparse_compressed  # it builds on this module

    return sparse_compressed


def _dense_only(name, kind, remedy):
    """A Tensor method of sparse tensors only: on a dense tensor it raises as torch's."""
    def raise_(self):
        what = f"sparse {kind} tensor" if kind else "sparse tensor"
        raise RuntimeError(f"{name} expected {what} layout but got Strided; convert with "
                           f"{remedy} first")
    raise_.__name__ = name
    return raise_


Tensor.to_sparse = _to_sparse
Tensor.coalesce = _dense_only("coalesce", "coordinate", ".to_sparse()")
Tensor.is_coalesced = _dense_only("is_coalesced", "coordinate", ".to_sparse()")
Tensor.indices = _dense_only("indices", "coordinate", ".to_sparse()")
Tensor.values = _dense_only("values", None, ".to_sparse()")
Tensor.sparse_dim = lambda self: 0  # torch's: a dense tensor has no sparse dims
Tensor.dense_dim = lambda self: self.ndim
Tensor.to_sparse_coo = lambda self: _to_sparse(self)
Tensor.to_dense = lambda self, dtype=None, *, masked_grad=None: (
    self if dtype is None else self.to(dtype))


def _bool():
    from . import dtypes

    return dtypes.bool


def _check_mm(a, b, name):
    if a.dim() < 2 or b.dim() < 2:  # (torch's IndexError: it reads the size of dim -2)
        raise IndexError(f"{name}: expected 2-D operands, got {a.dim()}-D and {b.dim()}-D")
    if a.dim() != 2 or b.dim() != 2:
        raise RuntimeError(f"{name}: expected 2-D operands, got {a.dim()}-D and {b.dim()}-D")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"{name}: mat1 and mat2 shapes cannot be multiplied "
                           f"({a.shape[0]}x{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")
    if any(isinstance(t, SparseTensor) and t.dtype == _bool() and t._nnz() and not
           t.dense_dim() for t in (a, b)):
        # (torch's: no bool kernel, checked before the dtypes)
        raise NotImplementedError(f"{name}: not implemented for bool sparse tensors; convert "
                                  f"with .to() (a floating point type) first")
    if a.dtype != b.dtype:
        raise RuntimeError(f"{name}: expected both operands to have the same dtype, but got "
                           f"{a.dtype} and {b.dtype}; convert one with .to()")


def mm(mat1, mat2):
    """sparse @ dense (or dense @ sparse) -> dense: gradients for the dense operand and the
    sparse values. out[i] = sum over entries (i, j, v) of v * dense[j].

    >>> import flowgrad as flow
    >>> A = flow.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
    >>> flow.sparse.mm(A, flow.tensor([[1.0], [10.0]]))
    tensor([[20.],
            [ 3.]])
    """
    from .ops.creation import zeros

    if _is_compressed(mat1) or _is_compressed(mat2):
        return _compressed()._matmul(mat1, mat2, "sparse.mm", form="sparse.mm")
    s1, s2 = isinstance(mat1, SparseTensor), isinstance(mat2, SparseTensor)
    if s1 and s2:
        raise NotImplementedError("sparse.mm: sparse @ sparse is not supported; call "
                                  ".to_dense() on one operand")
    if not (s1 or s2):
        from .ops.linalg import mm as dense_mm

        return dense_mm(mat1, mat2)
    _check_mm(mat1, mat2, "sparse.mm")
    if s2:  # dense @ sparse = (sparse^T @ dense^T)^T
        return mm(mat2.t(), mat1.t()).t()
    if mat1.dense_dim():  # (torch's RuntimeError)
        raise RuntimeError("sparse.mm: hybrid sparse tensors (dense dims in the values) are "
                           "not supported; call .to_dense() first")
    rows, cols = mat1._idx[0], mat1._idx[1]
    contrib = mat1._vals.unsqueeze(-1) * mat2.index_select(0, cols)
    out = zeros(mat1.shape[0], mat2.shape[1], dtype=contrib.dtype, device=contrib.device)
    return out.index_add(0, rows, contrib)


class _DenseGrad(Function):
    """The zero-valued term of `S @ dense` that gives the dense tensor S was made from
    (`x.to_sparse...()`) torch.mm's gradient, `g @ dense^T` over all of x: torch.mm's
    gradient for a sparse operand is dense (torch.sparse.mm's is masked to its entries)."""

    @staticmethod
    def forward(ctx, src, dense):
        ctx.save_for_backward(dense)
        return src.new_zeros(src.shape[0], dense.shape[1])

    @staticmethod
    def backward(ctx, g):
        (dense,) = ctx.saved_tensors
        return g @ dense.t(), None


def _src_needs_grad(s):
    from .autograd.grad_mode import is_grad_enabled

    src = getattr(s, "_src", None)
    return src is not None and src.requires_grad and is_grad_enabled()


def torch_mm(mat1, mat2):
    """torch.mm (and @) with a sparse COO operand: sparse.mm's values, but the dense tensor
    the sparse one was made from gets torch.mm's dense gradient (see _DenseGrad)."""
    if _is_compressed(mat1) or _is_compressed(mat2):
        return _compressed()._matmul(mat1, mat2, "mm")
    if isinstance(mat1, SparseTensor) and isinstance(mat2, Tensor) and mat2.ndim == 1:
        return torch_mm(mat1, mat2.unsqueeze(1)).squeeze(1)  # matrix @ vector
    if isinstance(mat2, SparseTensor) and _src_needs_grad(mat2):
        return torch_mm(mat2.t(), mat1.t()).t()
    if isinstance(mat1, SparseTensor) and _src_needs_grad(mat1):
        _check_mm(mat1, mat2, "mm")
        return mm(mat1.detach(), mat2) + _DenseGrad.apply(mat1._src, mat2)
    return mm(mat1, mat2)


def _is_compressed(x):
    return type(x).__name__ == "CompressedTensor"


def sampled_addmm(input, mat1, mat2, *, beta=1.0, alpha=1.0, out=None):
    """beta * input + alpha * (mat1 @ mat2) at the entries a sparse CSR `input` stores (and
    only there: a CSR result of input's pattern), batched as torch's. Each product is one row
    of mat1 dotted with one column of mat2, gathered by flowgrad ops, so gradients reach
    mat1, mat2 and input's values.

    >>> import flowgrad as flow
    >>> s = flow.eye(2).to_sparse_csr()
    >>> flow.sparse.sampled_addmm(s, flow.ones(2, 3), flow.ones(3, 2)).values()
    tensor([4., 4.])
    """
    if out is not None:
        raise NotImplementedError("sampled_addmm: out= is not supported for sparse results; "
                                  "use the returned tensor")
    compressed = _compressed()
    if not isinstance(input, compressed.CompressedTensor) or input.layout is not \
            compressed.sparse_csr:
        raise NotImplementedError(f"sampled_addmm: input must be a sparse CSR tensor, got "
                                  f"layout {getattr(input, 'layout', strided).name}; convert "
                                  f"it with .to_sparse_csr()")
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if not isinstance(m, Tensor):
            raise RuntimeError(f"sampled_addmm: Expected {name} to have strided layout, but "
                               f"got {getattr(m, 'layout', type(m).__name__)}")
        if m.dtype != input.dtype:
            raise RuntimeError(f"sampled_addmm: Expected {name} and self to have the same "
                               f"dtype, but got {m.dtype} and {input.dtype}")
    nb = input._nbatch()
    (rows, cols), k = input.shape[nb:nb + 2], mat1.shape[-1]
    if mat1.ndim != nb + 2 or mat2.ndim != nb + 2 or mat2.shape[-2] != k:
        raise RuntimeError(f"sampled_addmm: mat1 and mat2 shapes cannot be multiplied "
                           f"({tuple(mat1.shape)} and {tuple(mat2.shape)}) for a self of "
                           f"shape {tuple(input.shape)}")
    if mat1.shape[-2] != rows or mat2.shape[-1] != cols:
        raise RuntimeError(f"sampled_addmm: self.shape {tuple(input.shape)} must match "
                           f"mat1.shape[-2] and mat2.shape[-1] (mat1 {tuple(mat1.shape)}, "
                           f"mat2 {tuple(mat2.shape)})")
    coords, _ = input._entries()
    batch = np.ravel_multi_index(coords[:nb], input.shape[:nb]) if nb else \
        np.zeros(coords.shape[1], np.int64)
    left = mat1.reshape(-1, rows, k)[compressed._index(mat1, batch),
                                     compressed._index(mat1, coords[nb])]
    right = mat2.reshape(-1, k, cols).mT[compressed._index(mat2, batch),
                                         compressed._index(mat2, coords[nb + 1])]
    products = (left * right).sum(-1).reshape(input._vals.shape)
    return input._with_values(input._vals * beta + products * alpha)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """beta * mat + alpha * (mat1 @ mat2) with a sparse mat1 (torch.sparse.addmm). As torch,
    beta=0 ignores mat (nan and inf in it do not propagate) and mat must have mat1's dtype."""
    from .ops.linalg import _scaled_add

    if isinstance(mat, Tensor) and mat.dtype != mat1.dtype:
        raise RuntimeError(f"sparse.addmm: expected mat to have the dtype of mat1 and mat2 "
                           f"({mat1.dtype}), but got {mat.dtype}; convert it with .to()")
    return _scaled_add(mat, mm(mat1, mat2), beta, alpha, "sparse.addmm")


def sum(input, dim=None, dtype=None):
    """Sum of a sparse tensor: all of it (a dense 0-d tensor), or over `dim` (sparse while
    sparse dims remain, dense otherwise), as torch.sparse.sum.

    >>> import flowgrad as flow
    >>> A = flow.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    >>> flow.sparse.sum(A), flow.sparse.sum(A, 0).to_dense()
    (tensor(12.), tensor([4., 0., 8.]))
    """
    if _is_compressed(input):
        raise RuntimeError(f"sparse.sum: coalesce expected sparse coordinate tensor layout but "
                           f"got {input.layout}; use .sum() or .to_sparse() first")
    if not isinstance(input, SparseTensor):
        raise TypeError(f"sparse.sum: expected a sparse tensor, got {type(input).__name__}")
    if dim is None:  # torch coalesces first, in the values' dtype: a duplicated True counts
        input = input.coalesce()  # once, duplicated int8 entries wrap before the sum
    vals = input._vals if dtype is None else input._vals.to(dtype)
    if dim is None:
        return vals.sum()
    nd = input.dim()
    dims = []
    for d in ((dim,) if isinstance(dim, int) else dim):
        if not -nd <= d < nd:
            raise IndexError(f"sparse.sum: dimension out of range (expected to be in range of "
                             f"[{-nd}, {nd - 1}], but got {d})")
        if d % nd in dims:
            raise RuntimeError(f"sparse.sum: dim {d % nd} appears multiple times in the list "
                               f"of dims {tuple(dim)}")
        dims.append(d % nd)
    dims.sort()
    ns = input.sparse_dim()
    dense_dims = [1 + d - ns for d in dims if d >= ns]
    keep = [d for d in range(ns) if d not in dims]
    if dense_dims and keep and dtype is None and vals.sum().dtype != vals.dtype:
        # (torch's: the int64 sums of bool values cannot fill a sparse bool result)
        raise RuntimeError(f"sparse.sum: summing dense dims of {vals.dtype} values gives "
                           f"{vals.sum().dtype}, which does not fit a {vals.dtype} sparse "
                           f"result; pass dtype= or convert with .to() first")
    if dense_dims:
        vals = vals.sum(tuple(dense_dims))
    size = [s for d, s in enumerate(input._size) if d not in dims]
    if not keep:
        return vals.sum(0)
    return SparseTensor(input._idx[keep], vals, size).coalesce()


def spmm(input, mat2, out_dtype=None):
    """torch.spmm: sparse @ dense (in `out_dtype` when given)."""
    if out_dtype is not None:
        input, mat2 = input.to(out_dtype), mat2.to(out_dtype)
    if _is_compressed(input) or _is_compressed(mat2):  # torch's matmul rules, not sparse.mm's
        return _compressed()._matmul(input, mat2, "spmm")
    return mm(input, mat2)


def softmax(input, dim, dtype=None):
    """torch.sparse.softmax over the specified entries: `sparse_ops.softmax`."""
    from .sparse_ops import softmax as sparse_softmax  # (it builds on this module)

    return sparse_softmax(input, dim, dtype)


def log_softmax(input, dim, dtype=None):
    """torch.sparse.log_softmax over the specified entries: `sparse_ops.log_softmax`."""
    from .sparse_ops import log_softmax as sparse_log_softmax

    return sparse_log_softmax(input, dim, dtype)
