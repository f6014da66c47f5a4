"""Matrix products: matmul (1-D, 2-D, batched, broadcast), mm, bmm, mv, dot, outer, the
fused forms addmm, addmv, baddbmm, addbmm, and F.linear / F.bilinear.

matmul's rule promotes 1-D operands to matrices, multiplies by the transposed operands (NumPy
hands transposed views straight to BLAS), and lets the engine sum broadcast batch dims. A
batch of rows times one matrix (`(..., m, k) @ (k, n)`, every linear layer) is folded into a
single 2-D product: one BLAS call instead of one per batch element (5-6x faster).

>>> import flowgrad as flow
>>> a = flow.ones(2, 3, requires_grad=True)
>>> (a @ flow.ones(3)).sum().backward(); a.grad
tensor([[1., 1., 1.],
        [1., 1., 1.]])
"""
from __future__ import annotations

import math

import numpy as np

from .. import blas, sparse
from .. import dtypes as _dt
from ..autograd.grad_mode import is_grad_enabled
from ..autograd.node import FunctionNode
from ..errors import check_alpha, check_same_dtype, fill_scalar
from ..tensor import Tensor, tensor_method
from .complex import conj
from .einsum import einsum, tensordot
from .elementwise import where
from .halfprec import HALF, in_float32, opmath, upcast
from .reduce import _sum
from .registry import op

__all__ = ["matmul", "mm", "bmm", "mv", "dot", "outer", "addmm", "addmv", "baddbmm", "addbmm",
           "inner"]


@op("matmul", jvp="multilinear", save="inputs for others", complex=True, layout="contiguous")
@in_float32
def _matmul(xp, a, b):
    if a.ndim > 2 and b.ndim == 2:  # fold the batch into rows: one BLAS call
        rows = math.prod(a.shape[:-1])  # not -1: ambiguous when a dim is 0
        return xp.matmul(a.reshape(rows, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[-1:])
    if b.ndim > 2 and b.shape[-1] * b.shape[-2] <= _SMALL_NT and _transposed(b):
        b = xp.ascontiguousarray(b)
    return xp.matmul(a, b)


# a batch of small matrices times transposed ones (attention's backward, dy @ v^T) runs as
# OpenBLAS's NT GEMM a third slower than an NN one on a copy: (128, 64, 32) @ (128, 32, 64)^T
# 549 us against 396 with the copy; the gain is gone from 128 x 128 blocks of b on
_SMALL_NT = 8192


def _transposed(b):
    """Whether b's matrices are transposed views (columns contiguous, rows not)."""
    item = b.itemsize
    return b.strides[-2] == item and b.strides[-1] != item and b.shape[-2] > 1 and \
        b.dtype.char in "fd"


@_matmul.grad
def matmul_backward(ctx, dy):
    a, b = ctx.inputs  # a is saved only when b needs its grad, and b only when a does
    need = ctx.needs_input_grad
    a = conj(a) if need[1] else None  # torch's convention for complex; the identity for real
    b = conj(b) if need[0] else None
    (sa, _), (sb, _) = ctx.input_infos
    na, nb = len(sa), len(sb)
    if na == 2 and nb == 2:  # the common case: no reshaping
        if need[0] and need[1] and not dy.is_contiguous():
            dy = dy.contiguous()  # (sum's broadcast grad) copied once here, not by each GEMM
        return (_matmul(dy, b.mT) if need[0] else None), (_matmul(a.mT, dy) if need[1] else None)
    if nb == 2 and na > 2:  # rows of a batch: db is one 2-D product
        k, n = sb
        da = _matmul(dy, b.mT) if need[0] else None
        rows = math.prod(sa[:-1])  # not -1: ambiguous when a dim is 0
        db = _matmul(a.reshape(rows, k).mT, dy.reshape(rows, n)) if need[1] else None
        return da, db
    shape = list(dy.shape)
    if nb == 1:
        shape.append(1)
    if na == 1:
        shape.insert(len(shape) - 1, 1)
    dy2 = dy.reshape(shape)
    da = db = None
    if need[0]:
        da = _matmul(dy2, (b.unsqueeze(-1) if nb == 1 else b).mT)
        if na == 1:
            da = da.squeeze(-2)
    if need[1]:
        db = _matmul((a.unsqueeze(0) if na == 1 else a).mT, dy2)
        if nb == 1:
            db = db.squeeze(-1)
    return da, db


def _check_matmul(a, b, name):
    for x in (a, b):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}(): expected Tensor arguments, got {type(x).__name__}")
    sa, sb = a._data.shape, b._data.shape
    if a._data.dtype.kind == "b" or b._data.dtype.kind == "b":  # (NumPy would OR the ANDs)
        raise NotImplementedError(f'"{name}" not implemented for \'Bool\' (shapes '
                                  f"{tuple(sa)} and {tuple(sb)}); convert with .int() or .float()")
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
    """Matrix product with NumPy/torch broadcasting rules.

    >>> import flowgrad as flow
    >>> a = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> flow.matmul(a, flow.tensor([1.0, 1.0]))
    tensor([3., 7.])
    >>> (a @ a).shape, flow.matmul(flow.ones(5, 2, 3), flow.ones(3, 4)).shape
    (flowgrad.Size([2, 2]), flowgrad.Size([5, 2, 4]))
    """
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        if _is_sparse(input) or _is_sparse(other):
            if input.dim() == 1 and other.dim() == 2:  # vector @ matrix, as torch's
                return _sparse_mm(input.unsqueeze(0), other).squeeze(0)
            if input.dim() == 2 and other.dim() == 1:  # matrix @ vector
                return _sparse_mm(input, other.unsqueeze(1)).squeeze(1)
            return _sparse_mm(input, other)
    a, b = _check_matmul(input, other, "matmul")
    return _matmul(a, b)


def matmul_out_rules(args, kwargs, out):
    """(exact dtype, tracked, arguments, then) of matmul's out= form (see out_arg.accept_out):
    torch's matmul of a vector by a matrix writes the mm of the (1, n) row into `out`, then
    squeezes out's first dim (an out of shape (1, m) is resized without the deprecation
    warning, one of shape (m,) with it)."""
    if len(args) == 2 and isinstance(args[0], Tensor) and isinstance(args[1], Tensor) and \
            args[0].ndim == 1 and args[1].ndim == 2:
        return True, "all", (args[0].unsqueeze(0), args[1]), lambda out: out.squeeze_(0)
    return True, "all", args


def _is_sparse(x):
    return getattr(x, "layout", sparse.strided) is not sparse.strided


def _sparse_mm(a, b):
    """A sparse operand (COO or compressed) goes to torch.mm's sparse product: its values are
    sparse.mm's, and the dense tensor a sparse one was made from gets torch.mm's gradient."""
    return sparse.torch_mm(a, b)


Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(other, self)


def _ndim_check(x, n, name, what):
    if x._data.ndim != n:
        raise RuntimeError(f"{name}: {what} must be a {n}D tensor, got shape {tuple(x.shape)}")


def _out_dtype(tensors, out_dtype):
    """The operands cast to torch's `out_dtype` (the product is computed and returned in it)."""
    if out_dtype is None:
        return tensors
    d = _dt.as_dtype(out_dtype)
    return tuple(t if t.dtype is d else t.to(d) for t in tensors)


def mm(input, mat2, out_dtype=None):
    """2-D matrix product; with `out_dtype`, computed and returned in that dtype.

    >>> import flowgrad as flow
    >>> flow.mm(flow.eye(2), flow.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[1., 2.],
            [3., 4.]])
    """
    if not (isinstance(input, Tensor) and isinstance(mat2, Tensor)):
        if _is_sparse(input) or _is_sparse(mat2):
            return _sparse_mm(input, mat2)
    _ndim_check(input, 2, "mm", "self")
    _ndim_check(mat2, 2, "mm", "mat2")
    if out_dtype is not None:
        input, mat2 = _out_dtype((input, mat2), out_dtype)
    return matmul(input, mat2)


def bmm(input, mat2, out_dtype=None):
    """Batched 3-D matrix product (no broadcasting); `out_dtype` as in mm.

    >>> import flowgrad as flow
    >>> flow.bmm(flow.ones(4, 2, 3), flow.ones(4, 3, 5)).shape
    flowgrad.Size([4, 2, 5])
    """
    _ndim_check(input, 3, "bmm", "batch1")
    _ndim_check(mat2, 3, "bmm", "batch2")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: {tuple(input.shape)} and "
                           f"{tuple(mat2.shape)}")
    if out_dtype is not None:
        input, mat2 = _out_dtype((input, mat2), out_dtype)
    return matmul(input, mat2)


@tensor_method()
def mv(input, vec):
    """Matrix-vector product."""
    _ndim_check(input, 2, "mv", "self")
    _ndim_check(vec, 1, "mv", "vec")
    return matmul(input, vec)


@tensor_method()
def dot(input, tensor):
    """Inner product of two 1-D tensors.

    >>> import flowgrad as flow
    >>> flow.dot(flow.tensor([1.0, 2.0]), flow.tensor([3.0, 4.0]))
    tensor(11.)
    """
    _ndim_check(input, 1, "dot", "self")
    _ndim_check(tensor, 1, "dot", "tensor")
    if input.shape[0] != tensor.shape[0]:
        raise RuntimeError(f"dot: inconsistent tensor size, expected tensor [{input.shape[0]}] "
                           f"and src [{tensor.shape[0]}] to have the same number of elements, "
                           f"but got {input.shape[0]} and {tensor.shape[0]} elements "
                           f"respectively")
    return matmul(input, tensor)


@tensor_method()
def outer(input, vec2):
    """Outer product of two vectors.

    >>> import flowgrad as flow
    >>> flow.outer(flow.tensor([1, 2]), flow.tensor([1, 10, 100]))
    tensor([[  1,  10, 100],
            [  2,  20, 200]])
    """
    _ndim_check(input, 1, "outer", "self")
    _ndim_check(vec2, 1, "outer", "vec2")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


@tensor_method()
def inner(input, other):
    """Sum-product over the last dims (a scalar times a tensor when either is 0-D)."""
    if input._data.ndim == 0 or other._data.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner: the last dims must match, got shapes {tuple(input.shape)} "
                           f"and {tuple(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


# ---- fused multiply-adds: beta * input + alpha * (product) --------------------------------
def _coefficient(name, arg, value, dtype, refuse_float):
    """beta or alpha as torch takes it: converted to the operands' dtype, so a float one is
    truncated for integer tensors (`refuse_float`: refused, as addr's), and a complex one for
    real tensors, or nan for integer ones, raises (NumPy would promote the product)."""
    if value.__class__ is int and (value == 1 or value == 0):  # the defaults: nothing to check
        return value
    if refuse_float:
        check_alpha(name, arg, value, dtype)
    # (half precision computes in float32: torch reads the coefficient there, 1e10 is fine)
    value = fill_scalar(name, value, opmath(dtype) if dtype in HALF else dtype, arg=arg)
    return int(value) if dtype.kind in "iu" else value


def _wide(input, *mats):
    """(low, tensors): half precision in float32 (halfprec.upcast) for a fused multiply-add,
    rounded once at its end, as torch's GEMMs (alpha * (a @ b) of float16 overflowed)."""
    if not isinstance(input, Tensor):  # (_scaled_add says so)
        return None, (input, *mats)
    return upcast(input, *mats)


def _narrow(out, low):
    return out if low is None else out.to(low)


def _scaled_add(input, prod, beta, alpha, name, refuse_float=False, blas_alpha=False,
                input_first=False):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): input must be a Tensor, got {type(input).__name__}")
    try:
        np.broadcast_shapes(input._data.shape, prod._data.shape)
    except ValueError:
        raise RuntimeError(f"{name}: input of shape {tuple(input.shape)} does not broadcast "
                           f"to the product's shape {tuple(prod.shape)}") from None
    dtype = prod._data.dtype
    beta = _coefficient(name, "beta", beta, dtype, refuse_float)
    alpha = _coefficient(name, "alpha", alpha, dtype, refuse_float)
    if alpha == 0 and blas_alpha:
        # torch's addmm/addmv/addbmm: BLAS reads no operand at alpha 0, so a nan or inf in the
        # matrices does not reach the result (a where, not * 0; the operands' gradients are 0)
        prod = where(prod.new_zeros((), dtype=_dt.bool), prod, 0)
    elif alpha != 1:
        prod = prod * alpha
    if beta == 0:  # torch ignores input's values (nan and inf in it do not propagate)
        out = prod.expand(np.broadcast_shapes(input._data.shape, prod._data.shape))
        if input.requires_grad and is_grad_enabled():
            # but keeps it in the graph: its gradient is zeros (a where, not * 0, keeps a
            # nan of input out of the values)
            out = out + where(input.new_zeros((), dtype=_dt.bool), input, 0)
        return out
    scaled = input if beta == 1 else input * beta
    # (the first operand decides a strided result's layout: the product's for a GEMM, which
    # writes into C-ordered memory; input's for addr, an elementwise kernel in torch)
    return scaled + prod if input_first else prod + scaled


def addmm(input, mat1, mat2, out_dtype=None, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2), in `out_dtype` when given.

    >>> import flowgrad as flow
    >>> flow.addmm(flow.ones(2, 2), flow.eye(2), flow.tensor([[1.0, 2.0], [3.0, 4.0]]), beta=0.5)
    tensor([[1.5000, 2.5000],
            [3.5000, 4.5000]])
    """
    if out_dtype is not None:
        input, mat1, mat2 = _out_dtype((input, mat1, mat2), out_dtype)
    if _is_sparse(mat1) or _is_sparse(mat2):  # torch.mm's sparse product (a dense result)
        if mat1.dim() != 2 or mat2.dim() != 2:
            raise RuntimeError(f"addmm: mat1 and mat2 must be matrices, got {mat1.dim()}-D "
                               f"and {mat2.dim()}-D")
        if isinstance(mat2, sparse.SparseTensor):
            raise RuntimeError("addmm: expected a sparse COO mat1 and a strided mat2, got a "
                               "sparse mat2; use addmm(input.t(), mat2.t(), mat1.t()).t()")
        if isinstance(input, Tensor) and input.dtype != mat1.dtype and \
                mat1.dtype != _dt.bool:  # (a bool mat1: torch's NotImplementedError first)
            raise RuntimeError(f"addmm: expected input to be {mat1.dtype} as the sparse "
                               f"mat1, but got {input.dtype}; convert it with .to()")
        return _scaled_add(input, _sparse_mm(mat1, mat2), beta, alpha, "addmm")
    check_same_dtype("addmm", mat1, mat2=mat2, input=input)
    low, (input, mat1, mat2) = _wide(input, mat1, mat2)
    return _narrow(_scaled_add(input, mm(mat1, mat2), beta, alpha, "addmm", blas_alpha=True),
                   low)


@tensor_method()
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    check_same_dtype("addmv", mat, vec=vec, input=input)
    low, (input, mat, vec) = _wide(input, mat, vec)
    return _narrow(_scaled_add(input, mv(mat, vec), beta, alpha, "addmv", blas_alpha=True), low)


def baddbmm(input, batch1, batch2, out_dtype=None, *, beta=1, alpha=1):
    """beta * input + alpha * bmm(batch1, batch2), in `out_dtype` when given."""
    if out_dtype is not None:
        input, batch1, batch2 = _out_dtype((input, batch1, batch2), out_dtype)
    check_same_dtype("baddbmm", batch1, batch2=batch2, input=input)
    low, (input, batch1, batch2) = _wide(input, batch1, batch2)
    return _narrow(_scaled_add(input, bmm(batch1, batch2), beta, alpha, "baddbmm"), low)



# torch's methods take no out_dtype, only its functions do (`x.addmm_(a, b, c)` is refused, not
# c read as a dtype)
def _mm_method(self, mat2):
    return mm(self, mat2)


def _bmm_method(self, mat2):
    return bmm(self, mat2)


def _addmm_method(self, mat1, mat2, *, beta=1, alpha=1):
    return addmm(self, mat1, mat2, beta=beta, alpha=alpha)


def _baddbmm_method(self, batch1, batch2, *, beta=1, alpha=1):
    return baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)


for _fn, _method in ((mm, _mm_method), (bmm, _bmm_method), (addmm, _addmm_method),
                     (baddbmm, _baddbmm_method)):
    _method.__name__ = _method.__qualname__ = _fn.__name__
    _method.__doc__ = _fn.__doc__
    setattr(Tensor, _fn.__name__, _method)

@tensor_method()
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum_b(batch1[b] @ batch2[b])."""
    _ndim_check(batch1, 3, "addbmm", "batch1")
    _ndim_check(batch2, 3, "addbmm", "batch2")
    check_same_dtype("addbmm", batch1, batch2=batch2, input=input)
    if batch1.shape[0] != batch2.shape[0] or batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"addbmm: batch1 {tuple(batch1.shape)} and batch2 "
                           f"{tuple(batch2.shape)} cannot be multiplied")
    low, (input, batch1, batch2) = _wide(input, batch1, batch2)
    return _narrow(_scaled_add(input, einsum("bij,bjk->ik", batch1, batch2), beta, alpha,
                               "addbmm", blas_alpha=True), low)


# ---- layers' functional forms (exported as F.linear, F.bilinear) --------------------------
_BIAS_IN_GEMM = 1 << 17  # outputs from which the bias goes into the GEMM (below: no gain)

# linear is one op: y = x @ w.T (+ b). Its rule is one GEMM for the input grad (dy @ w), one
# for the weight grad (dy^T @ x with the batch dims folded into rows: linear_wgrad) and one
# reduction for the bias, so a weight gradient comes out of BLAS as a fresh (out, in) array
# that the leaf's .grad can take without a copy.
@op("linear", save="inputs for others", complex=True)
@in_float32
def _linear(xp, x, w, *b):
    if b and w.ndim == 2 and x.ndim >= 2 and math.prod(x.shape[:-1]) * w.shape[0] >= _BIAS_IN_GEMM:
        # torch's addmm: the product accumulated onto the bias's rows by the BLAS's GEMM
        # (MKL's, or NumPy's OpenBLAS's; NumPy's bias add is a pass of its own: (2048, 128) @
        # (128, 512) + b 916 -> 796 us on MKL, 2.86 -> 2.67 ms on OpenBLAS, one thread)
        y = blas.linear(x.reshape(math.prod(x.shape[:-1]), x.shape[-1]), w, b[0])
        if y is not None:
            return y.reshape(x.shape[:-1] + w.shape[:1])
    if w.ndim == 2 and x.ndim > 2:  # fold the batch into rows: one BLAS call
        rows = math.prod(x.shape[:-1])  # not -1: ambiguous when a dim is 0
        y = xp.matmul(x.reshape(rows, x.shape[-1]), w.T).reshape(x.shape[:-1] + w.shape[:1])
    else:
        y = xp.matmul(x, w.T)  # w.T is a view: BLAS reads it transposed, no copy
    if b:
        b = b[0]
        if y.ndim and b.shape == y.shape[-1:] and b.dtype == y.dtype:
            xp.add(y, b, out=y)  # y is the product's own fresh array
        else:
            y = y + b
    return y


@_linear.grad
def linear_backward(ctx, dy):
    x, w = (None if t is None else conj(t) for t in ctx.inputs[:2])
    need = ctx.needs_input_grad
    dx = dw = db = None
    if need[0]:
        dx = _matmul(dy, w) if w.ndim == 2 else dy.unsqueeze(-1) * w
    if need[1]:
        dw = _linear_wgrad(dy, x)
    if len(need) > 2 and need[2]:
        n = ctx.input_shapes[2]
        if len(n) == 1 and dy.ndim > 1 and dy.shape[-1] == n[0]:
            db = _sum(dy, axes=tuple(range(dy.ndim - 1)), keepdim=False)
        else:
            db = dy  # the engine sums it down to the bias's shape
    return (dx, dw) if len(need) == 2 else (dx, dw, db)


@op("linear_wgrad", jvp="multilinear", save="inputs", complex=True)
@in_float32
def _linear_wgrad(xp, dy, x):
    """linear's weight gradient: dy^T @ x over all rows (2-D weight), x^T @ dy (1-D)."""
    rows = math.prod(x.shape[:-1])
    x2 = x.reshape(rows, x.shape[-1])
    if dy.ndim == x.ndim:  # 2-D weight: (n, k) = (rows, n)^T @ (rows, k)
        return xp.matmul(dy.reshape(rows, dy.shape[-1]).T, x2)
    return xp.matmul(dy.reshape(rows), x2)  # 1-D weight: (k,)


@_linear_wgrad.grad
def linear_wgrad_backward(ctx, ddw):
    dy, x = (conj(t) for t in ctx.inputs)
    need = ctx.needs_input_grad
    d_dy = _linear(x, ddw) if need[0] else None
    if not need[1]:
        return d_dy, None
    return d_dy, (_matmul(dy, ddw) if ddw.ndim == 2 else dy.unsqueeze(-1) * ddw)


def _drop_unneeded_saves(y):
    """Keep what linear's rule reads, as torch's addmm does: x only for the weight's grad,
    the weight only for x's, never the bias (so writing to them in place stays legal)."""
    node = y._grad_fn
    if type(node) is FunctionNode and node.op is _linear and node._inputs is not None:
        need = node.needs_input_grad
        saved = node._inputs
        saved[2] = None
        if not need[1]:
            saved[0] = None
        if not need[0]:
            saved[1] = None


def _kind_rank(t):
    """bool < integers < floating (bfloat16's NumPy kind is V) < complex: what an in-place add
    may cast from."""
    return {"b": 0, "i": 1, "u": 1, "f": 2, "V": 2, "c": 3}[t._data.dtype.kind]


def _bias_as_torch_adds_it(input, weight, bias):
    """linear's bias where it is not one of out_features in the weight's dtype, as torch's
    path takes it: addmm (one dtype, the weight as mat2, the bias broadcast to the (rows,
    out_features) of the input's rows) for a 2-D input, or a contiguous one with a contiguous
    bias of one dim (squeezed); else matmul, the bias then added in place (cast into the
    result's dtype as an in-place add casts: float16 into float64; broadcast to the result's
    shape, which it may not grow)."""
    xs, ws, b = tuple(input.shape), tuple(weight.shape), bias._data
    addmm = len(xs) == 2 or input.is_contiguous() and bias.is_contiguous() and (
        b.ndim == 1 or sum(n != 1 for n in b.shape) == 1)
    if len(ws) == 1 and addmm:
        raise RuntimeError("linear: mat2 must be a matrix, got 1-D tensor: a 1-D weight "
                           "with a bias needs a 2-D weight (weight.unsqueeze(0))")
    out = xs[:-1] + ws[:1]
    rows = (math.prod(xs[:-1]),) + ws[:1]  # addmm's result
    target = rows if addmm else out
    try:
        fits = np.broadcast_shapes(b.shape, target) == target
    except ValueError:
        fits = False
    if not fits:
        where = ("rows of the input by out_features (torch adds it by addmm here)" if addmm
                 else "result, which an in-place add may not grow")
        raise RuntimeError(f"linear: bias of shape {b.shape} does not broadcast to {target}, "
                           f"the {where}; pass a bias of shape {ws[:1] if ws[1:] else ()}")
    if b.dtype != weight._data.dtype:
        if not addmm and _kind_rank(bias) <= _kind_rank(weight):
            bias = bias.to(weight.dtype)
        else:
            check_same_dtype("linear", weight, bias=bias)
    if addmm and b.ndim == 2 and (b.shape[0] != 1 or len(xs) == 1):
        bias = bias.expand(*rows).reshape(out)  # (a bias per row of the flattened input)
    return bias


def linear(input, weight, bias=None):
    """F.linear: input @ weight.T + bias, with weight of shape (out_features, in_features).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> w = flow.tensor([[1.0, 1.0], [0.0, 1.0]])
    >>> F.linear(flow.tensor([[1.0, 2.0]]), w, flow.tensor([0.5, 0.0]))
    tensor([[3.5000, 2.0000]])
    """
    for t in (input, weight) if bias is None else (input, weight, bias):
        if not isinstance(t, Tensor):
            raise TypeError(f"linear(): expected Tensor arguments, got {type(t).__name__}")
    wd = weight._data
    if wd.ndim not in (1, 2):
        raise RuntimeError(f"linear: weight must be 1-D or 2-D, got shape "
                           f"{tuple(weight.shape)}")
    xs = input._data.shape
    if not xs or xs[-1] != wd.shape[-1]:
        raise RuntimeError(
            f"linear: mat1 and mat2 shapes cannot be multiplied "
            f"({'x'.join(map(str, input.shape))} and "
            f"{'x'.join(map(str, wd.shape[::-1]))}): "
            f"input's last dim must equal weight's in_features ({wd.shape[-1]})")
    if input._data.dtype != wd.dtype:
        raise RuntimeError(
            f"linear: expected both operands to have the same dtype, but got "
            f"{input.dtype.name} and {weight.dtype.name}; convert one with "
            f".to({_dt.result_type(input, weight)})")
    if wd.dtype == np.bool_:  # (matmul refuses it too)
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    if bias is None:
        return _linear(input, weight)
    if wd.ndim == 1 or bias._data.dtype != wd.dtype or bias._data.shape != wd.shape[:1]:
        bias = _bias_as_torch_adds_it(input, weight, bias)
    y = _linear(input, weight, bias)
    if y._grad_fn is not None:
        _drop_unneeded_saves(y)
    return y


def bilinear(input1, input2, weight, bias=None):
    """F.bilinear: y[..., o] = input1[..., i] weight[o, i, j] input2[..., j] + bias[o]."""
    if weight._data.ndim != 3 or input1.shape[-1] != weight.shape[1] or \
            input2.shape[-1] != weight.shape[2] or input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(
            f"bilinear: expected input1 (..., in1), input2 (..., in2) with the same batch "
            f"dims and weight (out, in1, in2); got {tuple(input1.shape)}, "
            f"{tuple(input2.shape)} and {tuple(weight.shape)}")
    check_same_dtype("bilinear", input1, input2=input2, weight=weight, bias=bias)
    if bias is not None and (not bias._data.ndim or bias._data.shape[0] != weight.shape[0]):
        # torch checks the bias's first size only (then broadcasts it): a 0-d one fails there
        if not bias._data.ndim:
            raise IndexError("bilinear(): expected a bias of shape (out_features,), got a 0-d "
                             "tensor (dimension specified as 0 but tensor has no dimensions)")
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias.shape[0]} but expected {weight.shape[0]}")
    y = einsum("...i,oij,...j->...o", input1, weight, input2)
    return y + bias if bias is not None else y
