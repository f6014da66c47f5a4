"""Triangles and diagonals: tril, triu, diagonal (a view), diag_embed, diag, trace.

diagonal and diag_embed are each other's gradient: diagonal reads a strided view, and
diag_embed writes a diagonal into zeros.

>>> import flowgrad as flow
>>> flow.diagonal(flow.arange(9.0).reshape(3, 3))
tensor([0., 4., 8.])
"""
from __future__ import annotations

from numpy.lib.stride_tricks import as_strided

from ..autograd.inplace import expand_write_error, memory_of, run_inplace, self_overlapping
from ..errors import check_kernel_dtype, int_arg
from ..tensor import Tensor, _wrap_dim, tensor_method
from .registry import op

__all__ = ["tril", "triu", "diagonal", "diag_embed", "diag", "trace", "diagflat"]


# ---- triangles ------------------------------------------------------------------------------
@op("tril", jvp="linear", layout="contiguous")
def _tril(xp, x, *, diagonal):
    return xp.tril(x, diagonal)


@_tril.grad
def tril_backward(ctx, dy):
    return _tril(dy, diagonal=ctx.diagonal)


@op("triu", jvp="linear", layout="contiguous")
def _triu(xp, x, *, diagonal):
    return xp.triu(x, diagonal)


@_triu.grad
def triu_backward(ctx, dy):
    return _triu(dy, diagonal=ctx.diagonal)


def _check_2d(input, name):
    if input._data.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions, got shape "
                           f"{tuple(input.shape)}")


@tensor_method()
def tril(input, diagonal=0):
    """The lower triangle of the last two dims (entries on and below `diagonal`).

    >>> import flowgrad as flow
    >>> flow.tril(flow.ones(3, 3))
    tensor([[1., 0., 0.],
            [1., 1., 0.],
            [1., 1., 1.]])
    """
    diagonal = int_arg(diagonal, "tril", "diagonal", 2)  # (parsed first, as torch's)
    _check_2d(input, "tril")
    return _tril(input, diagonal=diagonal)


@tensor_method()
def triu(input, diagonal=0):
    """The upper triangle of the last two dims (entries on and above `diagonal`).

    >>> import flowgrad as flow
    >>> flow.triu(flow.ones(3, 3), diagonal=1)
    tensor([[0., 1., 1.],
            [0., 0., 1.],
            [0., 0., 0.]])
    """
    diagonal = int_arg(diagonal, "triu", "diagonal", 2)  # (parsed first, as torch's)
    _check_2d(input, "triu")
    return _triu(input, diagonal=diagonal)


# ---- diagonal / diag_embed --------------------------------------------------------------------
def _diag_view(x, offset, dim1, dim2):
    """A writable strided view of the diagonal, moved to the last dim (torch's layout)."""
    n1, n2 = x.shape[dim1], x.shape[dim2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    start = [0] * x.ndim
    if length:
        if offset >= 0:
            start[dim2] = offset
        else:
            start[dim1] = -offset
    base = x[tuple(slice(s, None) for s in start)] if length else x
    keep = [k for k in range(x.ndim) if k not in (dim1, dim2)]
    shape = tuple(x.shape[k] for k in keep) + (length,)
    strides = tuple(base.strides[k] for k in keep) + (base.strides[dim1] + base.strides[dim2],)
    return as_strided(base, shape, strides, writeable=x.flags.writeable)


@op("diagonal", jvp="linear", is_view=True)
def _diagonal(xp, x, *, offset, dim1, dim2):
    return _diag_view(x, offset, dim1, dim2)


@_diagonal.grad
def diagonal_backward(ctx, dy):
    return _diag_embed(dy, shape=ctx.input_shapes[0], offset=ctx.offset, dim1=ctx.dim1,
                       dim2=ctx.dim2)


@op("diag_embed", jvp="linear")
def _diag_embed(xp, v, *, shape, offset, dim1, dim2):
    out = xp.zeros(shape, v.dtype)
    _diag_view(out, offset, dim1, dim2)[...] = v
    return out


@_diag_embed.grad
def diag_embed_backward(ctx, ddx):
    return _diagonal(ddx, offset=ctx.offset, dim1=ctx.dim1, dim2=ctx.dim2)


@tensor_method()
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of dims (dim1, dim2) as the last dim; a view sharing storage."""
    offset = int_arg(offset, "diagonal", "offset", 2)  # (parsed first, as torch's)
    nd = input._data.ndim
    # torch wraps the dims first (an IndexError out of range); fewer than 2 dims then fail
    d1, d2 = _wrap_dim(dim1, nd, "diagonal"), _wrap_dim(dim2, nd, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal(): dimensions cannot be identical {dim1}, {dim2}")
    if nd < 2:
        raise RuntimeError(f"diagonal(): input must have at least 2 dimensions, got shape "
                           f"{tuple(input.shape)}")
    return _diagonal(input, offset=offset, dim1=d1, dim2=d2)


@tensor_method()
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims dim1, dim2 of the result) whose diagonal is input's last dim."""
    nd = input._data.ndim + 1
    d1, d2 = _wrap_dim(dim1, nd, "diag_embed"), _wrap_dim(dim2, nd, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diag_embed(): diagonal dimensions cannot be identical {dim1}, "
                           f"{dim2}")
    shp = input._data.shape
    offset = int_arg(offset, "diag_embed", "offset", 2)
    n = (shp[-1] if shp else 1) + abs(offset)
    rest = list(shp[:-1])
    shape = []
    for k in range(nd):
        shape.append(n if k in (d1, d2) else rest.pop(0))
    v = input if shp else input.reshape(1)
    return _diag_embed(v, shape=tuple(shape), offset=offset, dim1=d1, dim2=d2)


@tensor_method()
def diag(input, diagonal=0):
    """1-D input: a square matrix with it on the `diagonal`; 2-D input: that diagonal.

    >>> import flowgrad as flow
    >>> flow.diag(flow.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    >>> flow.diag(flow.tensor([[1, 2], [3, 4]]))
    tensor([1, 4])
    """
    nd = input._data.ndim
    if nd == 1:
        return diag_embed(input, diagonal, 0, 1)
    if nd == 2:
        return _diagonal(input, offset=diagonal, dim1=0, dim2=1).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {nd}D (shape "
                       f"{tuple(input.shape)})")


@tensor_method()
def diagflat(input, offset=0):
    """diag of the flattened input."""
    return diag_embed(input.reshape(-1), offset, 0, 1)


@tensor_method()
def trace(input):
    """The sum of the main diagonal of a matrix."""
    if input._data.ndim != 2:
        raise RuntimeError(f"trace(): expected a matrix, but got tensor with shape "
                           f"{tuple(input.shape)}")
    check_kernel_dtype(input, "trace", "fVciu")  # all but bool, as torch
    return diagonal(input).sum()


def _writes_in_place(a):
    """torch's checkTrilTriuBatchContiguous(allow_zero_stride=True): whether tril_/triu_
    write `a` in place (only its zeros: an expand's shared elements are fine) rather than
    through a contiguous copy copied back (which refuses such a target). Up to three dims in
    place; above, where each batch dim but a first stride-0 or size-1 one is laid out as in a
    contiguous batch of matrices. A size-1 dim's stride is torch's from unsqueeze or expand
    (the next dim's size times its stride), NumPy's being anything."""
    if a.ndim <= 3:
        return True
    strides = [s // a.itemsize for s in a.strides]
    for i in range(a.ndim - 2, -1, -1):
        if a.shape[i] == 1:
            strides[i] = a.shape[i + 1] * strides[i + 1]
    expected = a.shape[-1] * a.shape[-2]
    for i in range(a.ndim - 3, -1, -1):
        if i == 0 and (strides[0] == 0 or a.shape[0] == 1):
            continue
        if strides[i] != expected:
            return False
        expected *= a.shape[i]
    return True


def _triangle_(name, fn):
    def method(self, *args, **kwargs):
        data = memory_of(self)
        if self_overlapping(data) and not _writes_in_place(data):
            raise expand_write_error(name, self.shape)
        return run_inplace(name, fn, self, *args, **kwargs)
    return method


Tensor.tril_, Tensor.triu_ = _triangle_("tril_", tril), _triangle_("triu_", triu)
