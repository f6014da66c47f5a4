"""linalg's matrix functions and products: matrix_exp, matrix_power, cond, multi_dot, vander,
vecdot, cross, householder_product (orgqr, ormqr, geqrf), and the torch.* spellings of the
older API (svd, qr, lu, lu_solve, triangular_solve, ...). LDL^T is in linalg_ldl.py.

matrix_exp is one op (Pade 13 with scaling and squaring) whose rule is torch's: the top-right
block of exp([[A^H, G], [0, A^H]]), itself a matrix_exp, so it differentiates to any order.
The rest is composed of differentiable ops. geqrf has no gradient, as in torch.

>>> import flowgrad as flow
>>> flow.linalg.matrix_exp(flow.zeros(2, 2))
tensor([[1., 0.],
        [0., 1.]])
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from .._warn import warn, warn_once
from ..errors import check_same_dtype, int_arg
from ..tensor import Tensor, _wrap_dim, tensor_method
from ..typed_tensors import contiguous_format
from .complex import adjoint
from .creation import ones_like, zeros_like
from .diag import tril
from .elementwise import where
from .linalg import dot, matmul, outer
from .linalg_decomp import (
    _eye,
    _matrix,
    _square,
    column_major_result,
    inv,
    matrix_norm,
    qr,
    svd,
    svdvals,
)
from .linalg_solve import LU_FACTOR, inv_ex, lu_factor_ex, lu_solve
from .linalg_solve import solve_triangular as _solve_triangular
from .no_derivative import without_derivative
from .out_arg import check_out_partial_overlap
from .registry import op
from .shape import broadcast_tensors, cat, not_a_sequence, stack

__all__ = ["matrix_exp", "matrix_power", "cond", "multi_dot", "vander", "vecdot", "cross",
           "householder_product"]

SVD_V = namedtuple("SVD_V", ["U", "S", "V"])
GEQRF = namedtuple("GEQRF", ["a", "tau"])
TRIANGULAR = namedtuple("TRIANGULAR", ["solution", "cloned_coefficient"])

# ---- matrix_exp ------------------------------------------------------------------------------
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152  # the largest 1-norm Pade 13 handles in float64 (Higham 2005)


@op("linalg_matrix_exp", save="inputs", complex=True)
def _matrix_exp(xp, A):
    if A.shape[-1] == 0:
        return A.copy()
    a = A.astype(xp.complex128 if A.dtype.kind == "c" else xp.float64)
    norm1 = xp.abs(a).sum(-2).max(-1)  # each matrix is scaled by its own power of two
    with xp.errstate(divide="ignore"):
        s = xp.ceil(xp.log2(norm1 / _THETA13))
    s = xp.where(xp.isfinite(s) & (s > 0), s, 0).astype(xp.int64)
    a = a / (2.0 ** s)[..., None, None]
    b, eye = _PADE13, xp.eye(a.shape[-1])
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
             + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
        + b[0] * eye
    r = xp.linalg.solve(v - u, v + u)
    for i in range(int(s.max(initial=0))):
        r = xp.where((i < s)[..., None, None], r @ r, r)
    return r.astype(A.dtype)


@_matrix_exp.grad
def linalg_matrix_exp_backward(ctx, g):
    (A,) = ctx.inputs
    n = A.shape[-1]
    At = adjoint(A)  # A^H: torch's convention for complex, A^T for real
    block = cat([cat([At, g], -1), cat([At * 0, At], -1)], -2)
    return _matrix_exp(block)[..., :n, n:]


def matrix_exp(A):
    """The matrix exponential sum_k A^k / k!.

    >>> import flowgrad as flow
    >>> flow.linalg.matrix_exp(flow.tensor([[0.0, 1.0], [0.0, 0.0]]))
    tensor([[1., 1.],
            [0., 1.]])
    """
    _square(A, "linalg.matrix_exp")
    return _matrix_exp(A)


def matrix_power(A, n):
    """A^n by repeated squaring (n < 0: the inverse's power; n = 0: the identity).

    >>> import flowgrad as flow
    >>> flow.linalg.matrix_power(flow.tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
    tensor([[1., 3.],
            [0., 1.]])
    """
    n = int_arg(n, "matrix_power", "n", 2)  # (parsed first, as torch's)
    if not isinstance(A, Tensor) or A._data.ndim < 2 or A._data.shape[-1] != A._data.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: expected a tensor of square matrices, got "
                           f"shape {tuple(getattr(A, 'shape', ()))}")
    if n == 0:  # the identity, in A's graph with gradient zero (A * 0 would be nan at inf),
        # row-major as torch's (a bool condition of A's layout would give A's)
        return where(ones_like(A, dtype=_dt.bool, memory_format=contiguous_format),
                     _eye(A.shape[-1], A), A)
    if n < 0:  # (A^-1 is inv's result, column-major, as torch's)
        A, n = inv(A), -n
    elif n == 1:  # a new row-major matrix (torch's clone), not A itself
        return A.clone(memory_format=contiguous_format)
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def power_out_rules(args, kwargs, out):
    """(exact dtype, tracked, arguments) of matrix_power's out= form (see out_arg.with_out),
    as torch's linalg_matrix_power_out: for n = 1 it is out.copy_(A), which casts safely
    (float64 into float32 or complex128, not into an integer) and gives `out` A's history;
    for n = 0 out.copy_(the identity), alike but with no history (A detached: the identity
    does not depend on it); for other n its matmul (or inv) into `out`, which takes only the
    result's dtype and refuses an input that requires grad."""
    n = args[1] if len(args) > 1 else kwargs.get("n")
    if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n in (0, 1):
        if n == 1 and args and isinstance(out, Tensor):  # (copy_'s check: an out sharing
            check_out_partial_overlap(out, args[:1], "linalg.matrix_power")  # part of A)
        if n == 0 and args and isinstance(args[0], Tensor):
            args = (args[0].detach(), *args[1:])
        return False, "out", args
    return True, "all", args


@tensor_method("matrix_exp")
def torch_matrix_exp(input):
    """torch.matrix_exp: linalg.matrix_exp."""
    return matrix_exp(input)


@tensor_method("matrix_power")
def torch_matrix_power(input, n):
    """torch.matrix_power: linalg.matrix_power."""
    return matrix_power(input, n)


def cond(A, p=None):
    """Condition number: s_max / s_min for p None or 2 (s_min / s_max for -2), else
    norm(A, p) * norm(A^-1, p) on square A (inf for a singular one, as torch's).

    >>> import flowgrad as flow
    >>> flow.linalg.cond(flow.tensor([[2.0, 0.0], [0.0, 0.5]]))
    tensor(4.)
    """
    _matrix(A, "linalg.cond")
    if p in (None, 2, -2):
        S = svdvals(A)
        return S[..., -1] / S[..., 0] if p == -2 else S[..., 0] / S[..., -1]
    _square(A, "linalg.cond")
    Ainv, info = inv_ex(A)
    value = matrix_norm(A, p) * matrix_norm(where(Ainv.isnan(), 0.0, Ainv), p)
    return where(info != 0, math.inf, value)


# ---- products --------------------------------------------------------------------------------
def _chain_order(dims):
    """Matrix-chain order by dynamic programming: split[i][j] for the product of i..j."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors):
    """The product of 2-D matrices in the cheapest order; the first may be a row vector and
    the last a column vector (1-D).

    >>> import flowgrad as flow
    >>> flow.linalg.multi_dot([flow.ones(3), flow.ones(3, 2), flow.ones(2)])
    tensor(6.)
    """
    not_a_sequence(tensors, "linalg_multi_dot")
    if len(tensors) < 2:
        raise RuntimeError(f"linalg.multi_dot(): expected at least 2 tensors but got "
                           f"{len(tensors)}")
    ts = list(tensors)
    first, last = ts[0]._data.ndim == 1, ts[-1]._data.ndim == 1
    ts[0] = ts[0].unsqueeze(0) if first else ts[0]
    ts[-1] = ts[-1].unsqueeze(-1) if last else ts[-1]
    for i, t in enumerate(ts):
        if t._data.ndim != 2:
            raise RuntimeError(f"linalg.multi_dot(): tensor {i} must be 2D (1D allowed only "
                               f"first and last) but got {t._data.ndim}D")
        if i and ts[i - 1]._data.shape[1] != t._data.shape[0]:
            raise RuntimeError(f"linalg.multi_dot(): tensors {i - 1} and {i} with shapes "
                               f"{tuple(tensors[i - 1].shape)} and {tuple(tensors[i].shape)} "
                               f"cannot be multiplied")
    split = _chain_order([ts[0]._data.shape[0]] + [t._data.shape[1] for t in ts])
    out = _chain_product(ts, split, 0, len(ts) - 1)
    if first:
        out = out.squeeze(0)
    return out.squeeze(-1) if last else out


def _chain_product(ts, split, i, j):
    """ts[i] @ ... @ ts[j] in the order `split` chose (not a closure: a recursive one is a
    reference cycle that keeps the operands alive until the cycle collector runs)."""
    if i == j:
        return ts[i]
    k = split[i][j]
    return matmul(_chain_product(ts, split, i, k), _chain_product(ts, split, k + 1, j))


def chain_matmul(*matrices):
    """torch.chain_matmul: multi_dot of 2-D matrices (of one: a copy of it, as torch's)."""
    warn_once("torch.chain_matmul is deprecated and will be removed in a future PyTorch "
              "release. Use torch.linalg.multi_dot instead, which accepts a list of two or more "
              "tensors rather than multiple parameters.")
    for i, t in enumerate(matrices):  # (multi_dot takes vectors at the ends: chain_matmul not)
        if isinstance(t, Tensor) and t._data.ndim != 2:
            raise RuntimeError(f"chain_matmul(): Tensor {i} must be 2-D, got "
                               f"{t._data.ndim}-D")
    if len(matrices) == 1 and isinstance(matrices[0], Tensor):
        return matrices[0].clone()
    return multi_dot(matrices)


def vander(x, *, N=None):
    """linalg.vander: columns x^0, x^1, ..., x^(N-1) (N defaults to x.shape[-1]).

    >>> import flowgrad as flow
    >>> flow.linalg.vander(flow.tensor([1.0, 2.0, 3.0]))
    tensor([[1., 1., 1.],
            [1., 2., 4.],
            [1., 3., 9.]])
    """
    if x._data.ndim == 0:  # a 0-d x is one point, as torch's: (1, N)
        x = x.unsqueeze(0)
    N = x._data.shape[-1] if N is None else int(N)
    if N <= 1:
        raise RuntimeError(f"linalg.vander: N must be greater than 1, got {N}")
    cols = [ones_like(x)]
    for _ in range(N - 1):
        cols.append(cols[-1] * x)
    return stack(cols, -1)


def torch_vander(x, N=None, increasing=False):
    """torch.vander: x^(N-1) ... x^0 by default (increasing=True reverses)."""
    if x._data.ndim != 1:
        raise RuntimeError("vander: x must be a one-dimensional tensor")
    N = x._data.shape[0] if N is None else int(N)
    if x._data.dtype == np.bool_:  # (torch's result type: bool promotes to int64)
        x = x.long()
    if N < 0:
        raise RuntimeError("vander: N must be non-negative.")
    if N == 0 or x._data.shape[0] == 0:  # (torch's: a new empty tensor, off the graph)
        return x.detach().new_empty((x._data.shape[0], N))
    out = vander(x, N=max(N, 2))[:, :N] if N > 1 else x.new_ones((x.shape[0], 1))  # (torch's)
    return out if increasing else out.flip(-1)


def vecdot(x, y, *, dim=-1):
    """Dot products along `dim` (broadcasting): sum(conj(x) * y, dim), as torch's; two 1-D
    tensors: their vdot (of equal sizes, whatever `dim`).

    >>> import flowgrad as flow
    >>> flow.linalg.vecdot(flow.tensor([[1.0, 2.0], [3.0, 4.0]]), flow.tensor([1.0, 1.0]))
    tensor([3., 7.])
    """
    if x.dtype != y.dtype:  # (torch's kernel does not promote)
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found "
                           f"x of type {x.dtype} and y of type {y.dtype} instead")
    if not (x.is_floating_point() or x.is_complex()):
        raise RuntimeError(f"linalg.vecdot: Expected a floating point or complex tensor as "
                           f"input. Got {x.dtype}")
    if x.ndim == 1 and y.ndim == 1:  # torch's vdot then: no broadcasting, dim unread
        return vdot(x, y)
    return (x.conj() * y).sum(dim)  # conj of a real tensor is the tensor itself


@tensor_method()
def vdot(input, other):
    """torch.vdot: the dot product of two 1-D tensors (conjugating the first if complex)."""
    if input._data.ndim != 1 or other._data.ndim != 1:
        raise RuntimeError(f"vdot: 1D tensors expected, but got {input._data.ndim}D and "
                           f"{other._data.ndim}D tensors")
    check_same_dtype("vdot", input, other=other)
    # dot's product, in the operands' dtype as torch's (a sum of int8 products stays int8);
    # conj of a real tensor is the tensor itself
    return dot(input.conj(), other)


@tensor_method()
def ger(input, vec2):
    """torch.ger: the outer product (torch.outer's old name)."""
    return outer(input, vec2)


def _cross(input, other, dim, name):
    check_same_dtype(name, input, other=other)
    if input._data.ndim != other._data.ndim:
        raise RuntimeError(f"{name}: inputs must have the same number of dimensions, got "
                           f"shapes {tuple(input.shape)} and {tuple(other.shape)}")
    nd = input._data.ndim
    if nd == 0:
        raise IndexError(f"{name}: Dimension specified as {dim} but tensor has no dimensions")
    d = _wrap_dim(dim, nd, name)  # (dim % nd took any dim: 1 of a 1-D input was 0)
    # both must have length 3 there before broadcasting ((5, 3) with (5, 1) is refused)
    if input._data.shape[d] != 3 or other._data.shape[d] != 3:
        raise RuntimeError(f"{name}: inputs dimension {dim} must have length 3. Got "
                           f"{input._data.shape[d]} and {other._data.shape[d]}")
    a, b = broadcast_tensors(input, other)
    dim = d
    a0, a1, a2 = (a.narrow(dim, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(dim, i, 1) for i in range(3))
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim)


def linalg_cross(input, other, *, dim=-1):
    """linalg.cross: the cross product of 3-vectors along `dim` (broadcasting).

    >>> import flowgrad as flow
    >>> flow.linalg.cross(flow.tensor([1.0, 0.0, 0.0]), flow.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    return _cross(input, other, dim, "linalg.cross")


@tensor_method()
def cross(input, other, dim=None):
    """torch.cross: as linalg.cross; `dim=None` takes the first dim of size 3."""
    if dim is None:

        warn("Using torch.cross without specifying the dim arg is deprecated.",
             UserWarning, stacklevel=2)
        # the first dim of size 3 in input's own shape, as torch's
        dim = next((i for i, s in enumerate(input._data.shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("cross: no dimension of size 3 in input")
    return _cross(input, other, dim, "cross")


# ---- Householder reflectors ------------------------------------------------------------------
def _apply_reflectors(A, tau, C, left, transpose):
    """Q C, Q^H C, C Q or C Q^H for Q = H_1 ... H_k, H_i = I - tau_i v_i v_i^H, v_i the i-th
    column of A below the diagonal with a unit on it (LAPACK's geqrf/unmqr storage; H_i^H
    has conj(tau_i) in place of tau_i; conj of a real tensor is the tensor itself)."""
    m, k = A._data.shape[-2], tau._data.shape[-1]
    V = tril(A, -1)[..., :, :k] + _eye(m, A, k)
    order = range(k) if left == transpose else reversed(range(k))
    for i in order:
        v, t = V[..., :, i], tau[..., i].unsqueeze(-1)
        t = t.conj() if transpose else t
        vh = v.conj()
        if left:
            C = C - (t * v).unsqueeze(-1) * (vh.unsqueeze(-2) @ C)
        else:
            C = C - (C @ v.unsqueeze(-1)) * (t * vh).unsqueeze(-2)
    return C


def householder_product(A, tau):
    """The first n columns of H_1 ... H_k (the Q of geqrf's A and tau); differentiable in
    both, composed of matrix products.

    >>> import flowgrad as flow
    >>> a, tau = flow.geqrf(flow.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> flow.linalg.householder_product(a, tau).abs()
    tensor([[0.6000, 0.8000],
            [0.8000, 0.6000]])
    """
    _matrix(A, "linalg.householder_product")
    m, n = A._data.shape[-2:]
    if m < n or tau._data.shape[-1] > n or tau._data.shape[:-1] != A._data.shape[:-2]:
        raise RuntimeError(f"linalg.householder_product: expected input (..., m, n) with "
                           f"m >= n and tau (..., k) with k <= n and the same batch dims, got "
                           f"{tuple(A.shape)} and {tuple(tau.shape)}")
    if tau.dtype != A.dtype:
        raise RuntimeError(f"linalg.householder_product: tau dtype {tau.dtype} does not match "
                           f"input dtype {A.dtype}; convert tau with .to()")
    eye = _eye(m, A, n).expand(*A._data.shape[:-2], m, n)
    if tau._data.shape[-1] == 0:  # no reflectors: Q = I, still a function of A (as torch's,
        # with a zero gradient): `where` on an all-false mask links it without reading A
        return column_major_result(where(zeros_like(A, dtype=_dt.bool), A, eye))
    return column_major_result(_apply_reflectors(A, tau, eye, True, False))


@tensor_method()
def orgqr(input, input2):
    """torch.orgqr: householder_product's older name (input2 is tau)."""
    return householder_product(input, input2)


@tensor_method()
def ormqr(input, input2, input3, left=True, transpose=False):
    """torch.ormqr: Q @ input3 (or Q^T, or on the right) for geqrf's reflectors (input,
    tau = input2), without forming Q."""
    for arg, t in (("input", input), ("other", input3)):
        if isinstance(t, Tensor) and t._data.ndim < 2:
            raise RuntimeError(f"torch.ormqr: {arg} must have at least 2 dimensions (got shape "
                               f"{tuple(t.shape)})")
    if all(isinstance(t, Tensor) for t in (input, input2, input3)):
        _check_ormqr(input, input2, input3, left)
    return column_major_result(_apply_reflectors(input, input2, input3, left, transpose))


def _check_ormqr(input, tau, other, left):
    """torch.ormqr's argument checks: its reflectors must fill tau exactly, with no
    broadcasting of the batch dims and one dtype (else its kernel refuses)."""
    side = -2 if left else -1
    if tau.ndim < 1 or tau.shape[-1] != min(other.shape[side], input.shape[-1]):
        raise RuntimeError(f"torch.ormqr: tau.shape[-1] must be equal to min(other.shape[{side}], "
                           f"input.shape[-1]) (got tau {tuple(tau.shape)}, other "
                           f"{tuple(other.shape)}, input {tuple(input.shape)})")
    if other.shape[side] != input.shape[-2]:
        raise RuntimeError(f"torch.ormqr: other.shape[{side}] must be equal to input.shape[-2] "
                           f"(got other {tuple(other.shape)}, input {tuple(input.shape)})")
    if tau.ndim != input.ndim - 1:
        raise RuntimeError(f"torch.ormqr: Expected tau to have one dimension less than input, "
                           f"but got tau.ndim equal to {tau.ndim} and input.ndim is equal to "
                           f"{input.ndim}")
    if other.ndim != input.ndim:
        raise RuntimeError(f"torch.ormqr: Expected other to have the same number of dimensions "
                           f"as input, but got other.ndim equal to {other.ndim} and input.ndim "
                           f"is equal to {input.ndim}")
    batch = tuple(input.shape[:-2])
    for name, t in (("tau", tau), ("other", other)):
        got = tuple(t.shape[:input.ndim - 2])
        if got != batch:
            raise RuntimeError(f"torch.ormqr: Expected batch dimensions of {name} to be equal "
                               f"to input.shape[:-2] {list(batch)}, but got {list(got)}")
    for name, t in (("tau", tau), ("other", other)):
        if t.dtype != input.dtype:
            raise RuntimeError(f"torch.ormqr: Expected input and {name} to have the same dtype, "
                               f"but input has dtype {input.dtype} and {name} has dtype "
                               f"{t.dtype}")


@op("geqrf", n_out=2, differentiable=False, complex=True, layout="column_major")
def _geqrf(xp, A):
    h, tau = xp.linalg.qr(A, mode="raw")
    return xp.ascontiguousarray(xp.swapaxes(h, -1, -2)), tau


@tensor_method()
def geqrf(input):
    """torch.geqrf: LAPACK's QR storage (R above the diagonal, reflectors below, and tau);
    not differentiable, as torch's."""
    _matrix(input, "geqrf")
    # (torch records a node that refuses: its outputs require grad, a backward raises)
    return GEQRF(*without_derivative(list(_geqrf(input)), [input], "geqrf"))


# ---- torch.* spellings of the older API ------------------------------------------------------
@tensor_method("svd")
def torch_svd(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with V = Vh^H; zero U and V when not compute_uv."""
    U, S, Vh = svd(input, full_matrices=not some)
    if not compute_uv:
        m, n = input.shape[-2:]
        z = np.zeros
        d = input._data.dtype
        return SVD_V(Tensor._wrap(z(tuple(input.shape[:-2]) + (m, m), d)), svdvals(input),
                     Tensor._wrap(z(tuple(input.shape[:-2]) + (n, n), d)))
    return SVD_V(U, S, Vh.mH)  # V = Vh^H (Vh^T for real input)


@tensor_method("qr")
def torch_qr(input, some=True):
    """torch.qr: linalg.qr in 'reduced' (some=True) or 'complete' mode."""
    return qr(input, "reduced" if some else "complete")


@tensor_method("lu")
def torch_lu(A, pivot=True, get_infos=False):
    """torch.lu: (LU, pivots) or, with get_infos, (LU, pivots, infos)."""
    warn_once("torch.lu is deprecated in favor of torch.linalg.lu_factor / "
              "torch.linalg.lu_factor_ex and will be removed in a future PyTorch release.\n"
              "LU, pivots = torch.lu(A, compute_pivots)\nshould be replaced with\n"
              "LU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\n"
              "LU, pivots, info = torch.lu(A, compute_pivots, get_infos=True)\nshould be "
              "replaced with\nLU, pivots, info = torch.linalg.lu_factor_ex(A, compute_pivots)")
    out = lu_factor_ex(A, pivot=pivot)
    return out if get_infos else LU_FACTOR(out.LU, out.pivots)


@tensor_method("lu_solve")
def torch_lu_solve(input, LU_data, LU_pivots):
    """torch.lu_solve(b, LU_data, LU_pivots): linalg.lu_solve's older argument order."""
    return lu_solve(LU_data, LU_pivots, input)


@tensor_method()
def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve: (X, A's copy) with A X = input (A^T X = input when
    `transpose`)."""
    T = A.mT if transpose else A
    X = _solve_triangular(T, input, upper=upper != transpose, unitriangular=unitriangular)
    return TRIANGULAR(X, column_major_result(A.clone()))  # (torch's clone is column-major)
