"""Vector norms (one op, `vector_norm`, for every order) and torch.norm / Tensor.norm.
Matrix norms are in flowgrad.linalg.

>>> import flowgrad as flow
>>> x = flow.tensor([3.0, -4.0], requires_grad=True)
>>> flow.norm(x).backward(); x.grad
tensor([ 0.6000, -0.8000])
"""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import as_dtype, promote_types
from ..errors import SparseOperandError
from ..tensor import Tensor, tensor_method
from .elementwise import where
from .halfprec import in_float32
from .reduce import expand_reduced, normalize_dims
from .registry import op

__all__ = ["norm"]

matrix_norm = None  # bound by linalg_decomp, which builds on this module (nuc needs the SVD)


@op("vector_norm", save="inputs outputs", layout="contiguous")
@in_float32  # a half-precision input accumulates in float32, as torch
def _vector_norm(xp, x, *, ord, axes, keepdim):
    a = xp.abs(x)
    if ord == math.inf:
        return a.max(axis=axes, keepdims=keepdim)
    if ord == -math.inf:
        return a.min(axis=axes, keepdims=keepdim)
    if ord == 0:
        return (a != 0).sum(axis=axes, keepdims=keepdim).astype(x.dtype)
    if ord == 1 or math.prod(x.shape[i] for i in axes) == 1:
        # the norm of one element is its modulus, as torch's: sqrt(x * x) underflowed 1e-310
        # to 0 and overflowed 1e200 to inf
        return a.sum(axis=axes, keepdims=keepdim)
    return power_norm(xp, a, ord, axes, keepdim)


_TINY32 = float(np.finfo(np.float32).tiny)


def _power_sum(xp, a, p, axes, keepdims):
    if p == 2:
        return xp.sqrt((a * a).sum(axis=axes, keepdims=keepdims))
    # float32: the powers, their sum and its root in float64, as torch's CPU norms accumulate
    # in double (the root's exponent 1 / p rounded to float32 alone put a norm of 1e-6 4 ulps
    # off: pdist(p=3) of near-equal rows, precision_fuzz seed 5007774)
    wide = a.astype(xp.float64) if a.dtype.char == "f" else a
    return ((wide ** p).sum(axis=axes, keepdims=keepdims) ** (1.0 / p)).astype(a.dtype,
                                                                               copy=False)


def power_norm(xp, a, p, axes, keepdims):
    """(sum a^p)^(1/p) of moduli `a` over `axes` (p not 0, 1 or infinite). float32 is summed
    in float32, then redone in float64 and rounded once where that lost a result (torch's CPU
    norms accumulate in double): x * x overflowed above 1.8e19 (inf where the norm is
    finite) and underflowed below 1e-19 (0), p = 3 above 7e12 and below 2e-13. (A zero or
    nan norm is redone too; the common case pays one check of the result.)"""
    if a.ndim == 0 or math.prod(a.shape[i] for i in ((axes,) if isinstance(axes, int)
                                                       else axes)) == 1:
        return a.sum(axis=axes, keepdims=keepdims)  # one element's norm is its modulus
    y = _power_sum(xp, a, p, axes, keepdims)
    if a.dtype.char == "f":
        low = _TINY32 ** (1.0 / p) * 1e4 if p > 1 else 0.0
        with xp.errstate(invalid="ignore"):
            lost = not (xp.all(y > low) and xp.all(y < math.inf))
        if lost:
            y = _power_sum(xp, a.astype(xp.float64), p, axes, keepdims).astype(a.dtype)
    return y


@_vector_norm.grad
def vector_norm_backward(ctx, dy):
    (x,), y, p = ctx.inputs, ctx.out, ctx.ord
    shape, axes = ctx.input_shapes[0], ctx.axes
    g = expand_reduced(dy, shape, axes)
    if p == 0:  # a count: torch's undefined gradient, so x.grad stays None
        return None
    if p == 1:
        return g * x.sign()
    y = expand_reduced(y, shape, axes)
    if math.isinf(p):  # ties at the extreme share the gradient, as for amax; a nan is the
        a = x.abs()    # extreme (torch's mask), and its sign(nan) = 0 gives it no gradient
        hit = (a == y).logical_or(a.isnan()).to(x.dtype)
        return g * x.sign() * (hit / hit.sum(dim=axes, keepdim=True))
    safe_y = where(y == 0, 1.0, y)  # the norm of a zero slice: gradient 0, as torch
    if p == 2:  # (torch masks the ratio, not g: a nan or inf g at a zero norm gives nan)
        return g * where(y == 0, 0.0, x / safe_y)
    if p < 1:
        # a zero element's |x| ** (p - 1) is inf (times sign 0: nan); torch's rule masks that
        # factor to 0, and g y ** (1 - p) multiplies it (a nan g stays nan). Made finite
        # before the power: forward mode differentiates this rule in g, and where's gradient
        # times an inf factor would be nan
        zero = x == 0
        scaled = where(zero, 0.0, x.sign() * where(zero, 1.0, x.abs()) ** (p - 1))
        return scaled * g * y ** (1 - p)
    zero = y == 0  # p > 1: torch masks g / y ** (p - 1) at a zero norm (a nan g gives 0)
    ratio = where(zero, 1.0, x.abs() / safe_y)
    return where(zero, 0.0, g * x.sign() * ratio ** (p - 1))


def in_norm_dtype(x, dtype, name):
    """A float or complex `x` in a norm's `dtype=`, by torch's rules: the same kind (real for a
    real input, complex for a complex one) and never narrower. (An integer input is left to
    the caller.)"""
    kind = x._data.dtype.kind
    if dtype is None or kind not in "fVc":
        return x
    dtype = as_dtype(dtype)
    if (kind == "c") != dtype.is_complex:
        raise RuntimeError(f"{name}: dtype should be {'complex' if kind == 'c' else 'real'} for "
                           f"{'complex' if kind == 'c' else 'real'} inputs, but got {dtype}; "
                           f"pass a dtype of the input's kind")
    if promote_types(x.dtype, dtype) is not dtype:
        raise RuntimeError(f"{name}: the dtype of the input ({x.dtype}) should be convertible "
                           f"without narrowing to the specified dtype ({dtype}); pass a wider "
                           f"dtype or none")
    return x.to(dtype)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The `ord`-norm of x over `dim` (all elements when None), for any real `ord`."""
    if not isinstance(x, Tensor):
        if getattr(x, "is_sparse", False):  # (norm's public function takes its sparse form)
            raise SparseOperandError("linalg.vector_norm: sparse tensors are not supported; "
                                     "call .to_dense() first, or Tensor.norm()")
        raise TypeError(f"linalg.vector_norm(): expected a Tensor, got {type(x).__name__}")
    x = in_norm_dtype(x, dtype, "linalg.vector_norm")  # (an integer input raises below)
    if x._data.dtype.kind == "c":
        x = x.abs()  # a norm reads only the moduli; abs's rule gives torch's complex gradient
    if x._data.dtype.kind not in "fV":
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {x.dtype.name}; call .float() first")
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}; use "
                           f"linalg.matrix_norm for 'fro' and 'nuc'")
    axes = normalize_dims(dim, x._data.ndim, "linalg.vector_norm")
    if (ord < 0 or ord == math.inf) and x._data.size == 0:  # min/max: no identity (torch's)
        if dim is None:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty "
                               f"tensor because the operation does not have an identity")
        for a in axes:
            if x._data.shape[a] == 0:
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {ord} norm on the dimension {a} "
                    f"because this dimension is empty and the operation does not have an "
                    f"identity; reduce over the non-empty dims only")
    return _vector_norm(x, ord=float(ord), axes=axes, keepdim=keepdim)


@tensor_method()
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: 'fro' (the 2-norm over `dim`), 'nuc' (matrix), or a number p (vector
    p-norm over `dim`, all elements when None)."""
    if isinstance(dim, int):
        dim = (dim,)
    if p is None:  # (torch's default 2-norm, over any number of dims)
        p = 2
    if p == "nuc":
        return matrix_norm(input, "nuc", dim if dim is not None else (-2, -1), keepdim,
                           dtype=dtype)
    if p == "fro":
        if dim is not None and len(dim) > 2:
            raise RuntimeError(f"norm: 'fro' expects at most 2 dims, got dim={tuple(dim)}")
        p = 2
    elif isinstance(p, str):
        raise RuntimeError(f"norm: p must be 'fro', 'nuc' or a number, got {p!r}")
    return vector_norm(input, p, dim, keepdim, dtype=dtype)
