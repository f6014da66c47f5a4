"""Matrix products: matmul (1-D, 2-D, batched, broadcast), mm, bmm, mv, dot, outer.

matmul's rule promotes 1-D operands to matrices, multiplies by the transposed operands (NumPy
hands transposed views straight to BLAS), and lets the engine sum broadcast batch dims.

>>> import flowgrad as flow
>>> a = flow.ones(2, 3, requires_grad=True)
>>> (a @ flow.ones(3)).sum().backward(); a.grad
tensor([[1., 1., 1.],
        [1., 1., 1.]])
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..tensor import Tensor, tensor_method
from .registry import op

__all__ = ["matmul", "mm", "bmm", "mv", "dot", "outer"]


@op("matmul", save="inputs")
def _matmul(xp, a, b):
    return xp.matmul(a, b)


@_matmul.grad
def _(ctx, dy):
    a, b = ctx.inputs
    need = ctx.needs_input_grad
    if a._data.ndim == 2 and b._data.ndim == 2:  # the common case: no reshaping
        return (_matmul(dy, b.mT) if need[0] else None), (_matmul(a.mT, dy) if need[1] else None)
    a2 = a.unsqueeze(0) if a._data.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b._data.ndim == 1 else b
    shape = list(dy._data.shape)
    if b._data.ndim == 1:
        shape.append(1)
    if a._data.ndim == 1:
        shape.insert(len(shape) - 1, 1)
    dy2 = dy.reshape(shape)
    da = db = None
    if need[0]:
        da = _matmul(dy2, b2.mT)
        if a._data.ndim == 1:
            da = da.squeeze(-2)
    if need[1]:
        db = _matmul(a2.mT, dy2)
        if b._data.ndim == 1:
            db = db.squeeze(-1)
    return da, db


def _check_matmul(a, b, name):
    for x in (a, b):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}(): expected Tensor arguments, got {type(x).__name__}")
    sa, sb = a._data.shape, b._data.shape
    if not sa or not sb:
        raise RuntimeError(f"{name}: both arguments to matmul need to be at least 1D, but they "
                           f"are {len(sa)}D and {len(sb)}D")
    k_a = sa[-1]
    k_b = sb[0] if len(sb) == 1 else sb[-2]
    if k_a != k_b:
        raise RuntimeError(
            f"{name}: mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, sa))} and "
            f"{'x'.join(map(str, sb))}): the last dim of the first ({k_a}) must equal the "
            f"{'first' if len(sb) == 1 else 'second-to-last'} dim of the second ({k_b})")
    if a._data.dtype != b._data.dtype:
        d = _dt.result_type(a, b)
        if a._data.ndim and b._data.ndim and a.dtype is not b.dtype:
            raise RuntimeError(
                f"{name}: expected both operands to have the same dtype, but got {a.dtype.name} "
                f"and {b.dtype.name}; convert one with .to({d})")
    return a, b


@tensor_method()
def matmul(input, other):
    """Matrix product with NumPy/torch broadcasting rules."""
    a, b = _check_matmul(input, other, "matmul")
    return _matmul(a, b)


Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(other, self)


def _ndim_check(x, n, name, what):
    if x._data.ndim != n:
        raise RuntimeError(f"{name}: {what} must be a {n}D tensor, got shape {tuple(x.shape)}")


@tensor_method()
def mm(input, mat2):
    """2-D matrix product."""
    _ndim_check(input, 2, "mm", "self")
    _ndim_check(mat2, 2, "mm", "mat2")
    return matmul(input, mat2)


@tensor_method()
def bmm(input, mat2):
    """Batched 3-D matrix product (no broadcasting)."""
    _ndim_check(input, 3, "bmm", "batch1")
    _ndim_check(mat2, 3, "bmm", "batch2")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: {tuple(input.shape)} and "
                           f"{tuple(mat2.shape)}")
    return matmul(input, mat2)


@tensor_method()
def mv(input, vec):
    """Matrix-vector product."""
    _ndim_check(input, 2, "mv", "self")
    _ndim_check(vec, 1, "mv", "vec")
    return matmul(input, vec)


@tensor_method()
def dot(input, other):
    """Inner product of two 1-D tensors."""
    _ndim_check(input, 1, "dot", "self")
    _ndim_check(other, 1, "dot", "other")
    return matmul(input, other)


@tensor_method()
def outer(input, vec2):
    """Outer product of two vectors."""
    _ndim_check(input, 1, "outer", "self")
    _ndim_check(vec2, 1, "outer", "vec2")
    return input.unsqueeze(1) * vec2.unsqueeze(0)
