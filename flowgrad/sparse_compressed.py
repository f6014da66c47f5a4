"""flowgrad.sparse_compressed: sparse CSR, CSC, BSR and BSC tensors.

A `CompressedTensor` holds torch's three dense flowgrad tensors: `compressed_indices`
(*batch, ncompressed + 1), `plain_indices` (*batch, nnz) and `values` (*batch, nnz,
*blocksize, *dense); the compressed dim is the rows for CSR/BSR and the columns for CSC/BSC.
Every computation goes through the COO form (`to_sparse()`), whose ops are dense flowgrad ops,
so gradients reach the values (and the dense operand of a product) by the ordinary rules.

>>> import flowgrad as flow
>>> A = flow.sparse_csr_tensor([0, 1, 3], [1, 0, 2], [1.0, 2.0, 3.0], (2, 3))
>>> A.to_dense()
tensor([[0., 1., 0.],
        [2., 0., 3.]])
>>> A @ flow.ones(3, 1)
tensor([[1.],
        [5.]])
"""
from __future__ import annotations

import numpy as np

from . import sparse as _coo
from .autograd.function import Function
from .autograd.interpreter import check_read
from .autograd.torch_nodes import torch_name
from .device import new_array, to_host
from .sparse import SparseMetadata, SparseTensor, _dense_only, layout, sparse_coo, strided
from .tensor import Tensor

__all__ = ["CompressedTensor", "sparse_compressed_tensor", "sparse_csr_tensor",
           "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor", "sparse_csr",
           "sparse_csc", "sparse_bsr", "sparse_bsc"]

sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
_ROW_MAJOR = {sparse_csr: True, sparse_bsr: True, sparse_csc: False, sparse_bsc: False}
_BLOCKED = (sparse_bsr, sparse_bsc)
# torch's names, used in its error messages (and so in ours)
_TORCH = {strided: "Strided", sparse_coo: "Sparse", sparse_csr: "SparseCsr",
          sparse_csc: "SparseCsc", sparse_bsr: "SparseBsr", sparse_bsc: "SparseBsc"}
_FLIP = {sparse_csr: sparse_csc, sparse_csc: sparse_csr, sparse_bsr: sparse_bsc,
         sparse_bsc: sparse_bsr}

_SUPPORTED = ("to_dense, to_sparse (any layout), to_sparse_csr/csc/bsr/bsc, crow_indices, "
              "col_indices, ccol_indices, row_indices, values, sparse_dim, dense_dim, _nnz, "
              "size, t, transpose, detach, clone, to, float, double, mul by a scalar, neg, "
              "sum(), @ and flowgrad.sparse.mm/addmm with a dense matrix")


def _names(lay):
    """(compressed, plain) index names of a layout, as torch's."""
    return ("crow_indices", "col_indices") if _ROW_MAJOR[lay] else ("ccol_indices",
                                                                     "row_indices")


def _lay_name(x):
    return _TORCH[getattr(x, "layout", strided)]


class _RaiseInBackward(Function):
    """Identity whose backward raises: where torch has no gradient kernel for a layout, the
    forward runs and the backward raises as torch's does."""

    @staticmethod
    def forward(ctx, x, message):
        ctx.message = message
        return x.clone()

    @staticmethod
    def backward(ctx, dy):
        raise RuntimeError(ctx.message)


def _int_array(t):
    """Index data on the host: the index bookkeeping (sorting, counting, checks) runs there
    (inside nn.Graph's build refused for indices the plan computes: it would keep the trace's)."""
    check_read(t, "a sparse compressed tensor's indices")
    return to_host(t._data)


def _index(like, array):
    """Host index values as an int64 tensor on the device of the tensor `like`."""
    return Tensor._wrap(new_array(like._data, array, np.int64))


class CompressedTensor(SparseMetadata):
    """A sparse compressed tensor (see the module's docstring). Made by
    `flowgrad.sparse_csr_tensor` and its kin or `Tensor.to_sparse_csr()` and its kin."""

    __slots__ = ("_cidx", "_pidx", "_vals", "_size", "layout", "_src")
    is_sparse = False  # torch's: is_sparse means COO

    def __init__(self, cidx, pidx, values, size, layout):
        self._cidx, self._pidx, self._vals = cidx, pidx, values
        self._size, self.layout = tuple(int(s) for s in size), layout
        self._src = None  # the dense tensor this was made of: see sparse._DenseGrad

    # ---- metadata (and SparseMetadata's) -----------------------------------------------------
    is_sparse_csr = property(lambda self: self.layout is sparse_csr)

    def _nbatch(self):
        return self._cidx.ndim - 1

    def _blocksize(self):
        nb = self._nbatch()
        return tuple(self._vals.shape[nb + 1:nb + 3]) if self.layout in _BLOCKED else ()

    def sparse_dim(self):
        return 2

    def dense_dim(self):
        return len(self._size) - self._nbatch() - 2

    def _nnz(self):
        return self._pidx.shape[-1]

    def requires_grad_(self, requires_grad=True):
        self._vals.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        """The gradient at this tensor's stored values, with the same indices (torch gives a
        dense gradient after some products: see the tests' notes)."""
        g = self._vals.grad
        return None if g is None else CompressedTensor(self._cidx, self._pidx, g, self._size,
                                                       self.layout)

    # ---- parts -----------------------------------------------------------------------------
    def values(self):
        """The stored values; with requires_grad, an alias (not the leaf), as torch's."""
        return self._vals.view_as(self._vals) if self._vals.requires_grad else self._vals

    def _index(self, name, row_major):
        if _ROW_MAJOR[self.layout] != row_major:
            kind = "row" if row_major else "column"
            raise RuntimeError(f"{name} expected sparse {kind} compressed tensor layout but got "
                               f"{_lay_name(self)}")
        return self._cidx if name in ("crow_indices", "ccol_indices") else self._pidx

    def crow_indices(self):
        return self._index("crow_indices", True)

    def col_indices(self):
        return self._index("col_indices", True)

    def ccol_indices(self):
        return self._index("ccol_indices", False)

    def row_indices(self):
        return self._index("row_indices", False)

    def _coo_only(self, name):
        raise RuntimeError(f"{name} expected sparse coordinate tensor layout but got "
                           f"{_lay_name(self)}; convert with .to_sparse() first")

    def indices(self):
        self._coo_only("indices")

    def coalesce(self):
        self._coo_only("coalesce")

    def is_coalesced(self):
        self._coo_only("is_coalesced")

    def _entries(self):
        """(batch..., major, minor) coordinates of each stored value or block in storage
        order (numpy (nbatch + 2, B * nnz)), and the values flattened to (B * nnz, ...)."""
        nb = self._nbatch()
        cidx = _int_array(self._cidx).astype(np.int64)
        batch = cidx.shape[:-1]
        nmajor, nnz = cidx.shape[-1] - 1, self._nnz()
        flat = cidx.reshape(-1, nmajor + 1)
        major = np.concatenate([np.repeat(np.arange(nmajor), np.diff(c)) for c in flat]) \
            if flat.shape[0] else np.zeros(0, np.int64)
        minor = _int_array(self._pidx).astype(np.int64).reshape(-1)
        bidx = np.unravel_index(np.repeat(np.arange(int(np.prod(batch))), nnz), batch) \
            if batch else ()
        coords = np.stack([*bidx, major, minor]).reshape(nb + 2, -1).astype(np.int64)
        lead = int(np.prod(self._vals.shape[:nb + 1]))  # (not -1: a dense dim may be 0)
        vals = self._vals.reshape(lead, *self._vals.shape[nb + 1:])
        return coords, vals

    def _coo(self):
        """The COO form: one entry per stored element (a block's zeros included, as torch's),
        flagged coalesced for CSR only, as torch's."""
        coords, vals = self._entries()
        nb = self._nbatch()
        if not _ROW_MAJOR[self.layout]:
            coords = coords[list(range(nb)) + [nb + 1, nb]]
        bs = self._blocksize()
        if bs:  # each block's elements, row by row
            bh, bw = bs
            ii, jj = np.divmod(np.arange(bh * bw), bw)
            coords = np.repeat(coords, bh * bw, axis=1)
            coords[nb] = coords[nb] * bh + np.tile(ii, vals.shape[0])
            coords[nb + 1] = coords[nb + 1] * bw + np.tile(jj, vals.shape[0])
            vals = vals.reshape(-1, *vals.shape[3:])
        return SparseTensor(_index(vals, coords), vals, self._size,
                            coalesced=self.layout is sparse_csr)

    # ---- conversions -----------------------------------------------------------------------
    def to_dense(self, dtype=None, *, masked_grad=None):
        """The dense tensor; gradients flow to the values."""
        return self._coo().to_dense(dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        """Tensor.to_sparse: COO (sparse_dim 2 only, as torch's) or the compressed `layout`."""
        if layout in (None, sparse_coo):
            if sparse_dim not in (None, 2):
                raise RuntimeError(f"sparse_compressed_to_sparse: conversion from "
                                   f"{_lay_name(self)} to Sparse with sparse_dim argument !=2 "
                                   f"is not supported (got {sparse_dim})")
            return self._coo()
        return _convert(self, layout, blocksize, dense_dim, "to_sparse")

    def to_sparse_csr(self, dense_dim=None):
        return _convert(self, sparse_csr, None, dense_dim, "to_sparse_csr")

    def to_sparse_csc(self, dense_dim=None):
        return _convert(self, sparse_csc, None, dense_dim, "to_sparse_csc")

    def to_sparse_bsr(self, blocksize, dense_dim=None):
        return _convert(self, sparse_bsr, blocksize, dense_dim, "to_sparse_bsr")

    def to_sparse_bsc(self, blocksize, dense_dim=None):
        return _convert(self, sparse_bsc, blocksize, dense_dim, "to_sparse_bsc")

    def to_sparse_coo(self):
        return self._coo()

    def sparse_mask(self, mask):
        return _sparse_mask(self.to_dense(), mask)

    # ---- elementwise forms on the values ---------------------------------------------------
    def _with_values(self, values):
        return CompressedTensor(self._cidx, self._pidx, values, self._size, self.layout)

    def __mul__(self, other):
        if isinstance(other, (int, float)) or (isinstance(other, Tensor) and other.ndim == 0):
            return self._with_values(self._vals * other)
        return self._unsupported("mul by a non-scalar")()

    __rmul__ = mul = __mul__

    def __neg__(self):
        return self._with_values(-self._vals)

    neg = __neg__

    def __truediv__(self, other):  # torch has no div for compressed layouts
        raise RuntimeError(f"div: unsupported tensor layout: {_lay_name(self)}; multiply by "
                           f"the reciprocal, or call .to_dense() first")

    div = __truediv__

    def sum(self, dim=None, keepdim=False, dtype=None):
        """The sum of all values (a dense 0-d tensor); over dims, torch refuses: densify."""
        if dim is not None:
            raise RuntimeError(f"sum: reductions over dims of {_lay_name(self)} tensors are not "
                               f"supported; call .to_dense().sum({dim}) instead")
        return self._vals.sum(dtype=dtype)

    def detach(self):
        return self._with_values(self._vals.detach())

    def clone(self):
        return CompressedTensor(self._cidx.clone(), self._pidx.clone(), self._vals.clone(),
                                self._size, self.layout)

    def to(self, dtype):
        return self._with_values(self._vals.to(dtype))

    def float(self):
        return self.to(_coo.SparseTensor._float("float32"))

    def double(self):
        return self.to(_coo.SparseTensor._float("float64"))

    def t(self):
        """The transpose: CSR <-> CSC (BSR <-> BSC, each block transposed) on the same index
        tensors, as torch's."""
        if self.dim() != 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.dim()}D (a batched {_lay_name(self)} tensor): use "
                               f"transpose(-2, -1)")
        return self.transpose(0, 1)

    def transpose(self, dim0, dim1):
        nb, nd = self._nbatch(), self.dim()
        if sorted((dim0 % nd, dim1 % nd)) != [nb, nb + 1]:
            raise NotImplementedError(f"transpose of {_lay_name(self)} tensors: only the two "
                                      f"sparse dims ({nb}, {nb + 1}) can be swapped, got "
                                      f"({dim0}, {dim1}); call .to_dense() first")
        vals = self._vals
        if self.layout in _BLOCKED:
            vals = vals.transpose(nb + 1, nb + 2)
        size = list(self._size)
        size[nb], size[nb + 1] = size[nb + 1], size[nb]
        out = CompressedTensor(self._cidx, self._pidx, vals, size, _FLIP[self.layout])
        if self._src is not None:
            out._src = self._src.transpose(dim0, dim1)
        return out

    def __matmul__(self, other):
        return _matmul(self, other, "matmul")

    def __rmatmul__(self, other):
        return _matmul(other, self, "matmul")

    matmul = mm = __matmul__

    def __len__(self):
        return self._size[0]

    def __repr__(self):
        # torch's layout: the three parts without their own suffixes, then size, nnz, dtype,
        # layout and the grad flag, each wrapped onto a new line when it passes linewidth
        from .dtypes import get_default_dtype
        from .printing import _OPTS, _format_array

        indent = len("tensor(")
        parts = []
        for name, t in zip(_names(self.layout) + ("values",), (self._cidx, self._pidx,
                                                               self._vals)):
            a, prefix = to_host(t._data), f"{name}=tensor("
            parts.append(prefix + ("[]" if a.size == 0 else
                                   _format_array(a, indent + len(prefix))) + ")")
        text = "tensor(" + (",\n" + " " * indent).join(parts)
        suffixes = [f"size={self._size}", f"nnz={self._nnz()}"]
        if self.dtype is not get_default_dtype():
            suffixes.append(f"dtype={self.dtype}")
        suffixes.append(f"layout=flowgrad.{self.layout.name}")
        if self._vals._grad_fn is not None:
            suffixes.append(f"grad_fn=<{torch_name(self._vals._grad_fn)}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        last = len(text) - text.rfind("\n") + 1  # (torch's count of the last line)
        for suffix in suffixes:
            if last + len(suffix) + 2 > _OPTS["linewidth"]:
                text += ",\n" + " " * indent + suffix
                last = indent + len(suffix)
            else:
                text += ", " + suffix
                last += len(suffix) + 2
        return text + ")"

    # ---- everything else -------------------------------------------------------------------
    # (SparseMetadata's refusals: __getattr__, __add__ and kin, naming this layout)
    _supported = _SUPPORTED

    def _kind(self):
        return _lay_name(self)


# ---- building ------------------------------------------------------------------------------
def _compress(coords, vals, size, lay, nbatch):
    """A compressed tensor from unique (batch..., major, minor) coordinates (numpy) of values
    (flowgrad, (n, *block, *dense)): sorted into storage order, counted per major index."""
    batch = tuple(size[:nbatch])
    base = size[nbatch:nbatch + 2]
    bs = tuple(vals.shape[1:3]) if lay in _BLOCKED else (1, 1)
    nmajor = base[0] // bs[0] if _ROW_MAJOR[lay] else base[1] // bs[1]
    nbtot = int(np.prod(batch))
    b = np.ravel_multi_index(tuple(coords[:nbatch]), batch) if nbatch else \
        np.zeros(coords.shape[1], np.int64)
    major, minor = coords[nbatch], coords[nbatch + 1]
    order = np.lexsort((minor, major, b))
    counts = np.bincount(b, minlength=nbtot)
    if nbtot and (counts != counts[0]).any():
        raise RuntimeError("Expect the same number of specified elements per batch: a batched "
                           f"compressed tensor needs one nnz for all batches, got "
                           f"{counts.tolist()}")
    nnz = int(counts[0]) if nbtot else 0
    major = major[order].reshape(nbtot, nnz)
    cidx = np.zeros((nbtot, nmajor + 1), np.int64)
    for i in range(nbtot):
        cidx[i, 1:] = np.cumsum(np.bincount(major[i], minlength=nmajor))
    pidx = minor[order].reshape(batch + (nnz,))
    values = vals[_index(vals, order)] if len(order) else vals
    values = values.reshape(*batch, nnz, *vals.shape[1:])
    return CompressedTensor(_index(vals, cidx.reshape(batch + (nmajor + 1,))),
                            _index(vals, pidx), values, size, lay)


def _blocks_from_entries(coords, vals, size, nbatch, bs):
    """Element entries -> the blocks holding any of them, each block's other elements 0."""
    from .ops.creation import zeros

    bh, bw = bs
    r, c = coords[nbatch], coords[nbatch + 1]
    key = np.stack([*coords[:nbatch], r // bh, c // bw])
    uniq, inverse = np.unique(key, axis=1, return_inverse=True) if key.shape[1] else \
        (key, np.zeros(0, np.int64))
    pos = inverse.reshape(-1) * bh * bw + (r % bh) * bw + (c % bw)
    out = zeros((uniq.shape[1] * bh * bw,) + tuple(vals.shape[1:]), dtype=vals.dtype,
                device=vals.device)
    out = out.index_add(0, _index(vals, pos), vals)
    return uniq.astype(np.int64), out.reshape(uniq.shape[1], bh, bw, *vals.shape[1:])


def _check_blocksize(size, nbatch, blocksize, name):
    if blocksize is None:
        raise RuntimeError(f"{name}: conversion to a block layout without blocksize argument "
                           f"given is not supported; pass blocksize=(rows, cols)")
    bs = tuple(int(b) for b in blocksize)
    base = size[nbatch:nbatch + 2]
    if len(bs) != 2 or base[0] % bs[0] or base[1] % bs[1]:
        raise RuntimeError(f"{name}: tensor sparse size ({base[0]},{base[1]}) must be divisible "
                           f"by given blocksize ({','.join(map(str, bs))})")
    return bs


def _major_minor(coords, nbatch, lay):
    """Reorder (batch..., row, col) coordinates to (batch..., major, minor) for `lay`."""
    if _ROW_MAJOR[lay]:
        return coords
    return coords[list(range(nbatch)) + [nbatch + 1, nbatch]]


def _from_entries(coords, vals, size, nbatch, lay, blocksize, name):
    """A compressed tensor from unique element entries ((batch..., row, col) coordinates)."""
    if lay in _BLOCKED:
        bs = _check_blocksize(size, nbatch, blocksize, name)
        coords, vals = _blocks_from_entries(coords, vals, size, nbatch, bs)
    return _compress(_major_minor(coords, nbatch, lay), vals, size, lay, nbatch)


def _dense_to(x, lay, blocksize, dense_dim, name):
    """Dense -> compressed (see _dense_to_parts), remembering x for torch.mm's gradient."""
    check_read(x, f"{name}()")  # (which entries are stored is the values': no plan repeats it)
    out = _dense_to_parts(x, lay, blocksize, dense_dim, name)
    if x.requires_grad and not out.dense_dim() and out.dim() == 2:
        out._src = x
    return out


def _dense_to_parts(x, lay, blocksize, dense_dim, name):
    """Dense -> compressed: the entries (blocks) with any non-zero, values gathered from x."""
    dd = 0 if dense_dim is None else int(dense_dim)
    if x.ndim < 2:
        raise RuntimeError(f"{name}: expected a tensor with at least 2 dimensions (rows and "
                           f"columns), got {x.ndim}-D of shape {tuple(x.shape)}")
    if not 0 <= dd <= x.ndim - 2:
        raise RuntimeError(f"dense_to_{_TORCH[lay].lower().replace('sparse', 'sparse_')}: "
                           f"dense_dim argument must be in [0,{x.ndim - 2}] range, but {dd} "
                           f"is given")
    nb = x.ndim - 2 - dd
    size = tuple(x.shape)
    if lay not in _BLOCKED:
        coo = x.to_sparse(nb + 2)
        return _compress(_major_minor(_int_array(coo._idx), nb, lay), coo._vals, size, lay, nb)
    bh, bw = _check_blocksize(size, nb, blocksize, f"dense_to_{lay.name}")
    r, c = size[nb], size[nb + 1]
    dense = size[nb + 2:]
    # (*batch, R/bh, C/bw, bh, bw, *dense): every element of a kept block is differentiable
    xb = x.reshape(*size[:nb], r // bh, bh, c // bw, bw, *dense)
    order = list(range(nb)) + [nb, nb + 2, nb + 1, nb + 3] + list(range(nb + 4, xb.ndim))
    xb = xb.permute(*order)
    data = to_host(xb._data) != 0
    mask = data.any(axis=tuple(range(nb + 2, data.ndim))) if data.ndim > nb + 2 else data
    coords = np.stack(np.nonzero(mask)).reshape(nb + 2, -1).astype(np.int64)
    vals = xb[tuple(_index(xb, i) for i in coords)]
    return _compress(_major_minor(coords, nb, lay), vals, size, lay, nb)


def _convert(src, lay, blocksize, dense_dim, name):
    """Any tensor (dense, COO, compressed) to the compressed layout `lay`, as torch's rules."""
    if lay not in _ROW_MAJOR:
        raise RuntimeError(f"{name}: expected a sparse compressed layout (flowgrad.sparse_csr, "
                           f"sparse_csc, sparse_bsr or sparse_bsc), got {lay}")
    _coo._check_int(name, "dense_dim", dense_dim)
    if isinstance(src, Tensor):
        return _dense_to(src, lay, blocksize, dense_dim, name)
    if dense_dim is not None and dense_dim != src.dense_dim():
        raise RuntimeError(f"{name}: a sparse input keeps its dense_dim ({src.dense_dim()}), "
                           f"got dense_dim={dense_dim}")
    if isinstance(src, SparseTensor):
        if src.sparse_dim() != 2:
            raise RuntimeError(f"coo_to_{lay.name}: conversion from Sparse to {_TORCH[lay]} "
                               f"for input tensors with sparse_dim()!=2 is not supported "
                               f"(got {src.sparse_dim()})")
        src = src.coalesce()
        return _from_entries(_int_array(src._idx), src._vals, src._size, 0, lay, blocksize,
                             name)
    old_bs, nb = src._blocksize(), src._nbatch()
    if src.layout is lay and (blocksize is None or tuple(blocksize) == old_bs):
        return src
    if old_bs:
        if lay not in _BLOCKED:
            raise RuntimeError(f"sparse_compressed_to_{lay.name}: expected SparseCsr or "
                               f"SparseCsc layout but got {_lay_name(src)}")
        if blocksize is not None and tuple(blocksize) != old_bs:
            raise RuntimeError(f"{name}: conversion from {_lay_name(src)} to {_TORCH[lay]} "
                               f"with blocksize changed from {list(old_bs)} to "
                               f"{list(blocksize)} is not supported")
        coords, vals = src._entries()  # the same blocks, stored in the other order
        coords = _major_minor(_major_minor(coords, nb, src.layout), nb, lay)
        return _same_index_dtype(_compress(coords, vals, src._size, lay, nb), src)
    coords, vals = src._entries()
    coords = _major_minor(coords, nb, src.layout)  # back to (batch..., row, col)
    return _same_index_dtype(_from_entries(coords, vals, src._size, nb, lay, blocksize, name),
                             src)


def _same_index_dtype(out, src):
    """torch keeps int32 indices through a conversion between compressed layouts."""
    if out._cidx.dtype != src._cidx.dtype:
        out._cidx, out._pidx = out._cidx.to(src._cidx.dtype), out._pidx.to(src._cidx.dtype)
    return out


# ---- products ------------------------------------------------------------------------------
# What torch 2.13 computes on the CPU for (compressed left operand) @ dense, by the left
# operand's layout (a right operand is its transpose on the left: CSR <-> CSC, BSR <-> BSC):
# None where the forward raises, else the operands whose gradient raises.
_NO_GRAD = {
    "matmul": {sparse_csr: (), sparse_csc: (), sparse_bsr: ("dense",), sparse_bsc: None},
    "sparse.mm": {sparse_csr: (), sparse_csc: ("values",), sparse_bsr: ("values", "dense"),
                  sparse_bsc: None},
}


def _left_product(a, b, name, form):
    """a (compressed, 2-D, no dense dims) @ b (dense 1-D or 2-D), through a's COO form."""
    rule = _NO_GRAD[form][a.layout]
    if rule is None:
        raise RuntimeError(f"{name}: computation on CPU is not implemented for "
                           f"{_lay_name(a)} @ Strided in torch (and so in flowgrad); convert "
                           f"with .to_sparse_csr() or .to_dense() first")
    if a.dim() != 2 or a.dense_dim():
        raise RuntimeError(f"{name}: expected a 2-D {_lay_name(a)} operand without batch or "
                           f"dense dims, got size {a._size}; call .to_dense() first")
    if not isinstance(b, Tensor):
        raise TypeError(f"{name}: expected a dense Tensor operand, got {type(b).__name__}")
    why = (f"{name}: the gradient for the {{}} of a {_lay_name(a)} @ Strided product is not "
           f"supported (torch has no such CPU kernel); convert with .to_sparse_csr() first")
    if "values" in rule and a.requires_grad:
        a = a._with_values(_RaiseInBackward.apply(a._vals, why.format("values")))
    if "dense" in rule and b.requires_grad:
        b = _RaiseInBackward.apply(b, why.format("dense operand"))
    if b.ndim == 1:
        return _left_product(a, b.unsqueeze(1), name, form).squeeze(1)
    if form == "matmul" and _coo._src_needs_grad(a):  # torch.mm's dense gradient for a's source
        _coo._check_mm(a, b, name)
        return _coo.mm(a.detach()._coo(), b) + _coo._DenseGrad.apply(a._src, b)
    return _coo.mm(a._coo(), b)


def _matmul(a, b, name, form="matmul"):
    """A product with one compressed operand; a compressed right one is a transpose."""
    ca, cb = isinstance(a, CompressedTensor), isinstance(b, CompressedTensor)
    if ca and cb or (ca and isinstance(b, SparseTensor)) or (cb and isinstance(a, SparseTensor)):
        raise NotImplementedError(f"{name}: sparse @ sparse is not supported; call "
                                  f".to_dense() on one operand")
    if ca:
        if isinstance(b, Tensor) and b.ndim > 2:
            raise RuntimeError(f"{name}: a {_lay_name(a)} operand needs a 1-D or 2-D dense "
                               f"operand, got {b.ndim}-D (torch: expand is unsupported)")
        return _left_product(a, b, name, form)
    if not isinstance(a, Tensor) or a.ndim != 2:
        raise RuntimeError(f"{name}: expected a 2-D dense left operand for a {_lay_name(b)} "
                           f"right operand")
    return _left_product(b.t(), a.t(), name, form).t()


def _sparse_mask(self, mask):
    """Tensor.sparse_mask: self's values at the mask's entries, in the mask's layout and
    indices (the mask's values are ignored). Gradients flow back to self at those entries."""
    if not isinstance(mask, (SparseTensor, CompressedTensor)):
        raise NotImplementedError(f"sparse_mask: mask must be a sparse tensor (COO or "
                                  f"compressed), got a {_lay_name(mask)} one; convert it with "
                                  f".to_sparse()")
    if tuple(self.shape) != mask._size:
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self.shape)} but mask has size {list(mask._size)}")
    coo = mask._coo() if isinstance(mask, CompressedTensor) else mask
    if isinstance(mask, CompressedTensor) and self.requires_grad:
        self = _RaiseInBackward.apply(self, f"sparse_mask: the gradient through a "
                                            f"{_lay_name(mask)} mask is not supported (as "
                                            f"torch's); pass mask.to_sparse() for a COO mask")
    vals = self[tuple(_index(self, i) for i in _int_array(coo._idx))]
    if isinstance(mask, SparseTensor):
        return SparseTensor(mask._idx, vals, mask._size, mask._coalesced)
    return mask._with_values(vals.reshape(mask._vals.shape))


# ---- constructors --------------------------------------------------------------------------
def _check(ok, name, message):
    if not ok:
        raise RuntimeError(f"{name}: {message}")


def _index_tensors(cidx, pidx, cname, pname, name):
    from . import dtypes

    def as_index(x):
        if isinstance(x, Tensor):
            return x
        return _coo._as_tensor(x, dtypes.int64)

    c, p = as_index(cidx), as_index(pidx)
    _check(c.dtype == p.dtype, name, f"{cname} and {pname} must have the same dtype, but got "
                                     f"{c.dtype} and {p.dtype}, respectively")
    _check(c.dtype in (dtypes.int32, dtypes.int64), name,
           f"{cname} and {pname} dtype must be int32 or int64, but got {c.dtype}")
    _check(c.ndim >= 1, name, f"{cname} must have dimensionality >= 1 but got {c.ndim}")
    _check(c.ndim == p.ndim, name, f"{cname} and {pname} dimensionalities must be equal but "
                                   f"got {c.ndim} and {p.ndim}, respectively")
    return c, p


def _check_invariants(c, p, nmajor, nminor, nnz, cname, pname, name):
    minor = "ncols" if cname == "crow_indices" else "nrows"
    ca = _int_array(c).reshape(-1, nmajor + 1)
    pa = _int_array(p).reshape(ca.shape[0], nnz)
    if not ca.shape[0]:
        return
    _check((ca[:, 0] == 0).all(), name, f"`{cname}[..., 0] == 0` is not satisfied.")
    _check((ca[:, -1] == nnz).all(), name, f"`{cname}[..., -1] == nnz` is not satisfied.")
    steps = np.diff(ca, axis=1)
    _check(((steps >= 0) & (steps <= nminor)).all(), name,
           f"`0 <= {cname}[..., 1:] - {cname}[..., :-1] <= {minor}` is not satisfied "
           f"({cname} must be non-decreasing).")
    _check(((pa >= 0) & (pa < nminor)).all(), name,
           f"`0 <= {pname} < {minor}` is not satisfied.")
    for crow, plain in zip(ca, pa):
        for lo, hi in zip(crow[:-1], crow[1:]):
            _check((np.diff(plain[lo:hi]) > 0).all(), name,
                   f"`{pname}[..., {cname}[..., i - 1]:{cname}[..., i]] for all i = 1, ..., "
                   f"n are sorted and distinct along the last dimension values` is not "
                   f"satisfied.")


def sparse_compressed_tensor(compressed_indices, plain_indices, values, size=None, *,
                             dtype=None, layout=None, device=None, pin_memory=False,
                             requires_grad=False, check_invariants=None):
    """A sparse compressed tensor of `layout` (flowgrad.sparse_csr, sparse_csc, sparse_bsr or
    sparse_bsc). Unlike torch (which checks only with check_invariants=True), the indices are
    always checked: a bad index makes a clear error here, not a wrong result later.

    >>> import flowgrad as flow
    >>> flow.sparse_compressed_tensor([0, 1, 2], [1, 0], [5.0, 6.0], (2, 2),
    ...                               layout=flow.sparse_csc).to_dense()
    tensor([[0., 6.],
            [5., 0.]])
    """
    name = {sparse_csr: "sparse_csr_tensor", sparse_csc: "sparse_csc_tensor",
            sparse_bsr: "sparse_bsr_tensor", sparse_bsc: "sparse_bsc_tensor"}.get(
        layout, "sparse_compressed_tensor")
    if layout not in _ROW_MAJOR:
        raise RuntimeError(f"sparse_compressed_tensor expected sparse compressed tensor layout "
                           f"but got {_TORCH.get(layout, layout) if layout else 'none'}: pass "
                           f"layout=flowgrad.sparse_csr, sparse_csc, sparse_bsr or sparse_bsc")
    cname, pname = _names(layout)
    c, p = _index_tensors(compressed_indices, plain_indices, cname, pname, name)
    vals = _coo._as_tensor(values, dtype)
    nb = c.ndim - 1
    nblock = 2 if layout in _BLOCKED else 0
    _check(vals.ndim > nb + nblock, name, f"values must have dimensionality > sum of batch and "
                                          f"block dimensionalities (={nb} + {nblock}) but got "
                                          f"{vals.ndim}")
    batch = tuple(c.shape[:-1])
    _check(tuple(p.shape[:-1]) == batch and tuple(vals.shape[:nb]) == batch, name,
           f"batch shapes of {cname} {tuple(c.shape)}, {pname} {tuple(p.shape)} and values "
           f"{tuple(vals.shape)} must be equal")
    nnz = vals.shape[nb]
    _check(p.shape[-1] == nnz, name, f"{pname}.shape[-1] must be equal to nnz (={nnz}) as "
                                     f"defined by values.shape[{nb}], but got {p.shape[-1]}")
    bs = tuple(vals.shape[nb + 1:nb + 1 + nblock]) or (1, 1)
    dense = tuple(vals.shape[nb + 1 + nblock:])
    row = _ROW_MAJOR[layout]
    if size is None:  # torch's: the compressed dim from its index, the plain one from the max
        nmajor = c.shape[-1] - 1
        nminor = int(_int_array(p).max()) + 1 if p._data.size else 0
        base = (nmajor * bs[0], nminor * bs[1]) if row else (nminor * bs[0], nmajor * bs[1])
        size = batch + base + dense
    size = tuple(int(s) for s in size)
    _check(len(size) == nb + 2 + len(dense), name,
           f"tensor dimensionality must be sum of batch, base, and dense dimensionalities "
           f"(={nb} + 2 + {len(dense)}) but got {len(size)}")
    _check(size[:nb] == batch and size[nb + 2:] == dense, name,
           f"size {size} does not match the batch shape {batch} and the values' dense shape "
           f"{dense}")
    for d in (0, 1):
        _check(size[nb + d] % bs[d] == 0, name,
               f"tensor shape[{nb + d}] (={size[nb + d]}) must be divisible with blocksize[{d}] "
               f"(={bs[d]}) as defined by values shape")
    nrows, ncols = size[nb] // bs[0], size[nb + 1] // bs[1]
    nmajor, nminor = (nrows, ncols) if row else (ncols, nrows)
    what = ("rows" if row else "columns") if not nblock else ("row blocks" if row else
                                                              "column blocks")
    _check(c.shape[-1] == nmajor + 1, name, f"{cname}.shape[-1] must be equal to the number of "
                                            f"{what} + 1 (={nmajor + 1}), but got "
                                            f"{c.shape[-1]}")
    _check_invariants(c, p, nmajor, nminor, nnz, cname, pname, name)
    if requires_grad:
        vals = vals.detach()._set_requires_grad(True)
    return CompressedTensor(c, p, vals, size, layout)


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """A sparse CSR tensor (see sparse_compressed_tensor).

    >>> import flowgrad as flow
    >>> flow.sparse_csr_tensor([0, 1, 2], [1, 0], [5.0, 6.0], (2, 2)).to_dense()
    tensor([[0., 5.],
            [6., 0.]])
    """
    return sparse_compressed_tensor(crow_indices, col_indices, values, size, dtype=dtype,
                                    layout=sparse_csr, device=device,
                                    requires_grad=requires_grad,
                                    check_invariants=check_invariants)


def sparse_csc_tensor(ccol_indices, row_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """A sparse CSC tensor (see sparse_compressed_tensor).

    >>> import flowgrad as flow
    >>> flow.sparse_csc_tensor([0, 1, 2], [1, 0], [5.0, 6.0], (2, 2)).to_dense()
    tensor([[0., 6.],
            [5., 0.]])
    """
    return sparse_compressed_tensor(ccol_indices, row_indices, values, size, dtype=dtype,
                                    layout=sparse_csc, device=device,
                                    requires_grad=requires_grad,
                                    check_invariants=check_invariants)


def sparse_bsr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """A sparse BSR tensor: `values` holds (nnz, block rows, block columns) blocks.

    >>> import flowgrad as flow
    >>> flow.sparse_bsr_tensor([0, 1, 2], [1, 0], flow.ones(2, 1, 1), (2, 2)).values().shape
    flowgrad.Size([2, 1, 1])
    """
    return sparse_compressed_tensor(crow_indices, col_indices, values, size, dtype=dtype,
                                    layout=sparse_bsr, device=device,
                                    requires_grad=requires_grad,
                                    check_invariants=check_invariants)


def sparse_bsc_tensor(ccol_indices, row_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """A sparse BSC tensor: `values` holds (nnz, block rows, block columns) blocks.

    >>> import flowgrad as flow
    >>> flow.sparse_bsc_tensor([0, 1, 2], [1, 0], flow.ones(2, 1, 1), (2, 2)).values().shape
    flowgrad.Size([2, 1, 1])
    """
    return sparse_compressed_tensor(ccol_indices, row_indices, values, size, dtype=dtype,
                                    layout=sparse_bsc, device=device,
                                    requires_grad=requires_grad,
                                    check_invariants=check_invariants)


# ---- Tensor methods ------------------------------------------------------------------------
Tensor.to_sparse_csr = lambda self, dense_dim=None: _convert(self, sparse_csr, None, dense_dim,
                                                             "to_sparse_csr")
Tensor.to_sparse_csc = lambda self, dense_dim=None: _convert(self, sparse_csc, None, dense_dim,
                                                             "to_sparse_csc")
Tensor.to_sparse_bsr = lambda self, blocksize, dense_dim=None: _convert(
    self, sparse_bsr, blocksize, dense_dim, "to_sparse_bsr")
Tensor.to_sparse_bsc = lambda self, blocksize, dense_dim=None: _convert(
    self, sparse_bsc, blocksize, dense_dim, "to_sparse_bsc")
Tensor.crow_indices = _dense_only("crow_indices", "row compressed", ".to_sparse_csr()")
Tensor.col_indices = _dense_only("col_indices", "row compressed", ".to_sparse_csr()")
Tensor.ccol_indices = _dense_only("ccol_indices", "column compressed",
                                  ".to_sparse_csc()")
Tensor.row_indices = _dense_only("row_indices", "column compressed", ".to_sparse_csc()")
Tensor.is_sparse_csr = property(lambda self: False, doc="False: dense tensors")
Tensor.sparse_mask = _sparse_mask
