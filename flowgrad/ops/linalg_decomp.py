"""linalg's decompositions: det/slogdet, inv, solve, cholesky, qr, svd/svdvals, eigh/eigvalsh,
and the norms (`flowgrad.linalg` gathers them with linalg_solve.py and linalg_func.py).

Each decomposition is one op whose rule is the standard matrix-calculus formula written in
flowgrad ops, so second derivatives (of svdvals, eigvalsh, det, ...) come by construction.
Inputs are batches of matrices (..., m, n): float32, float64, complex64 and complex128, with
torch's conjugate Wirtinger gradients for complex ones.

>>> import flowgrad as flow
>>> a = flow.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
>>> flow.linalg.det(a).backward(); a.grad
tensor([[ 3., -1.],
        [-1.,  2.]])
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from ..autograd.interpreter import require, varies_per_run
from ..device import array_module
from ..dtypes import TORCH_SCALAR_NAMES
from ..errors import LinAlgError
from ..tensor import Tensor, _wrap_dim, tensor_method
from . import norm as _norm
from .complex import adjoint, conj, imag, real
from .creation import eye, ones, ones_like
from .diag import diagonal as _diagonal
from .diag import tril
from .elementwise import where
from .halfprec import HALF
from .layout import column_major
from .linalg import matmul
from .norm import vector_norm
from .registry import op
from .shape import cat, stack

__all__ = ["norm", "vector_norm", "matrix_norm", "det", "slogdet", "logdet", "inv", "solve",
           "cholesky", "qr", "svd", "svdvals", "eigh", "eigvalsh", "matmul", "diagonal"]

QR = namedtuple("QR", ["Q", "R"])
SVD = namedtuple("SVD", ["U", "S", "Vh"])
EIGH = namedtuple("EIGH", ["eigenvalues", "eigenvectors"])
SLOGDET = namedtuple("SLOGDET", ["sign", "logabsdet"])


def _square(A, name):
    _matrix(A, name)
    if A._data.shape[-1] != A._data.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A._data.shape[-2]} by {A._data.shape[-1]} matrices")
    return A


def check_info(info, error, message, eager):
    """Raise `error(eager())` (a message with info's values) where a factorization's `info` is
    non-zero; for an info a compiled plan computes anew, a check node of the plan on every
    call's info, raising `error(message)` (read here, it would be the trace's only)."""
    if varies_per_run(info):
        require(info == 0, message, error)
    elif info._data.any():
        raise error(eager())


def _matrix(A, name, low_ok=False):
    """A checked as a batch of float32/float64/complex64/complex128 matrices (`low_ok`:
    float16 and bfloat16 too)."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(A).__name__}")
    if A._data.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions, got "
                           f"shape {tuple(A.shape)}")
    if A._data.dtype.kind not in "fc" and not (low_ok and A._data.dtype in HALF) or \
            A._data.dtype.itemsize < 4 and not low_ok:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {A.dtype.name}; convert with .float() or .double()")
    return A


def _lapack(fn, name, what="the input is singular"):
    """Run a NumPy LAPACK call, turning NumPy's LinAlgError (or a kernel's `lapack_error`)
    into torch's, worded with the function's `name`."""
    try:
        return fn()
    except (np.linalg.LinAlgError, LinAlgError) as e:
        detail = getattr(e, "detail", None) if isinstance(e, LinAlgError) else e
        if detail is None:
            raise
        raise LinAlgError(f"{name}: The factorization could not be completed because {what} "
                           f"({detail})") from None


def lapack_error(e, op_name, what, error=LinAlgError):
    """torch's error class for NumPy's LinAlgError `e` inside a kernel, which a compiled plan
    runs alone (NumPy's is a ValueError); `detail` (NumPy's words) lets `_lapack` word it as
    the function's eager error."""
    failure = error(f"{op_name}: The factorization could not be completed because {what} "
                    f"({e})")
    failure.detail = str(e)
    return failure


def _diag_embed(v):
    return v.unsqueeze(-1) * _eye(v.shape[-1], v)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """linalg.diagonal: torch.diagonal with the last two dims as the default.

    >>> import flowgrad as flow
    >>> flow.linalg.diagonal(flow.arange(8.0).reshape(2, 2, 2))
    tensor([[0., 3.],
            [4., 7.]])
    """
    return _diagonal(A, offset, dim1, dim2)


def _eye(n, like, m=None):
    """The n x m identity in `like`'s dtype (a flowgrad op: rules use it as a constant)."""
    return eye(n, m, dtype=like.dtype, device=like.device)


def _tril_const(n, like, diag_value=1.0):
    """Ones below the diagonal, `diag_value` on it, in `like`'s dtype."""
    return tril(ones(n, n, dtype=like.dtype, device=like.device), -1) + _eye(n, like) * diag_value


def _is_zero(g):
    """A constant all-zero grad (an output nobody used), so a rule may skip its terms. A grad
    that requires grad is a variable (a derived JVP differentiates the rule at zero), and a
    transform's tensor (vmap) holds no values of its own: neither is skipped."""
    return (type(g) is Tensor and not g.requires_grad and g._grad_fn is None
            and not varies_per_run(g) and not g._data.any())


# ---- det / slogdet / inv / solve -------------------------------------------------------------
@op("linalg_det", save="inputs outputs", complex=True)
def _det(xp, A):
    return xp.linalg.det(A)


@_det.grad
def linalg_det_backward(ctx, dy):
    (A,), d = ctx.inputs, ctx.out
    return _det_backward(A, d, dy)


def _det_backward(A, d, g):
    """torch's rule: g conj(det A) A^-H where A is invertible, and through the SVD where
    det(A) = 0 (det A = det U det Vh prod S, whose product rule needs no division). Both
    branches run on safe inputs and `where` merges them, so the rule has no data-dependent
    branch (graph mode traces it). The singular branch is the adjugate: up to 3 x 3 the
    cofactor matrix, a polynomial; larger, the adjugate op, whose rule is exact at every rank
    too (torch's double backward at a rank n - 2 matrix is nan). (conj: identity on real.)"""
    n = A.shape[-1]
    if n == 0:  # 0 x 0 matrices: det is the constant 1
        return A * 0
    singular = (d == 0).unsqueeze(-1).unsqueeze(-1)
    gd = (g * conj(d)).unsqueeze(-1).unsqueeze(-1)
    regular = gd * adjoint(inv(where(singular, _eye(n, A), A)))
    if n <= 3:  # the cofactors, a polynomial in A: exact derivatives at every rank
        return where(singular, conj(_cofactors(A)) * g.unsqueeze(-1).unsqueeze(-1), regular)
    return where(singular, adjoint(_adjugate(A)) * g.unsqueeze(-1).unsqueeze(-1), regular)


@op("linalg_adjugate", save="inputs", complex=True)
def _adjugate(xp, A):
    """adj(A) = det(U) det(Vh) Vh^H diag(s_others) U^H for A = U diag(S) Vh, where s_others[i]
    is the product of the singular values other than S[i]: no division, exact at every rank."""
    U, S, Vh = xp.linalg.svd(A)
    ones = xp.ones_like(S[..., :1])
    below = xp.cumprod(xp.concatenate([ones, S[..., :-1]], -1), -1)
    above = xp.flip(xp.cumprod(xp.concatenate([ones, xp.flip(S, -1)[..., :-1]], -1), -1), -1)
    sign = (xp.linalg.det(U) * xp.linalg.det(Vh))[..., None, None]
    V, Uh = xp.conj(xp.swapaxes(Vh, -1, -2)), xp.conj(xp.swapaxes(U, -1, -2))
    return sign * (V * (below * above)[..., None, :]) @ Uh


@_adjugate.grad
def linalg_adjugate_backward(ctx, dy):
    """adj(A + E) = sign V adj(S + F) U^H with F = U^H E V, and adj(S + F)'s first-order term
    is diag(P diag(F)) - P * F, P[i, k] the product of the singular values other than S[i] and
    S[k] (P[i, i] = 0): a polynomial in S, exact at every rank. Its adjoint has the same form,
    applied to H = conj(sign) Vh dy U, and U (.) Vh maps it back."""
    (A,) = ctx.inputs
    U, S, Vh = _svd(A, full_matrices=False)
    sign = _det(U.detach()) * _det(Vh.detach())  # of modulus 1, locally constant
    H = conj(sign).unsqueeze(-1).unsqueeze(-1) * (Vh @ dy @ U)
    on_diagonal = _eye(S.shape[-1], S) != 0
    rows = where(on_diagonal, ones_like(S).unsqueeze(-1), S.unsqueeze(-2))  # row i: S[i] -> 1
    P = where(on_diagonal, S.unsqueeze(-1) * 0, _prod_of_others(rows))
    mixed = (P * _diagonal(H, 0, -2, -1).unsqueeze(-2)).sum(-1)
    return U @ (_eye(S.shape[-1], H) * mixed.unsqueeze(-1) - H * P) @ Vh


def _cofactors(A):
    """The cofactor matrix of (batches of) 1 x 1, 2 x 2 or 3 x 3 matrices, d det(A) / dA."""
    n = A.shape[-1]
    if n == 1:
        return ones_like(A)
    if n == 2:
        a, b, c, d = A[..., 0, 0], A[..., 0, 1], A[..., 1, 0], A[..., 1, 1]
        return stack([stack([d, -c], -1), stack([-b, a], -1)], -2)
    rows = [A[..., i, :] for i in range(3)]

    def cross(u, v):
        return stack([u[..., 1] * v[..., 2] - u[..., 2] * v[..., 1],
                      u[..., 2] * v[..., 0] - u[..., 0] * v[..., 2],
                      u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]], -1)
    return stack([cross(rows[1], rows[2]), cross(rows[2], rows[0]), cross(rows[0], rows[1])],
                 -2)


def _prod_of_others(S):
    """out[..., i] = prod_{j != i} S[..., j], without dividing (S may hold zeros)."""
    cols = [S[..., i] for i in range(S.shape[-1])]
    left, right = [ones_like(cols[0])], [ones_like(cols[0])]
    for c, r in zip(cols[:-1], cols[:0:-1]):
        left.append(left[-1] * c)
        right.append(right[-1] * r)
    return stack([lo * hi for lo, hi in zip(left, right[::-1])], -1)


def det(A):
    """Determinant of (batches of) square matrices; differentiable at singular ones too.

    >>> import flowgrad as flow
    >>> a = flow.tensor([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
    >>> flow.linalg.det(a).backward(); a.grad
    tensor([[ 4., -2.],
            [-2.,  1.]])
    """
    return _det(_square(A, "linalg.det"))


def _getrf(xp, A):
    """Doolittle with partial pivoting, vectorised over the batch: LAPACK getrf's packed LU,
    1-based row-swap pivots (int32) and info (the first zero pivot, 1-based; 0 if none)."""
    m, n = A.shape[-2:]
    k = min(m, n)
    batch, kind = A.shape[:-2], A.dtype.kind
    a = A.reshape((math.prod(batch), m, n)).copy()  # (not -1: m or n may be 0)
    rows = xp.arange(a.shape[0])
    piv = xp.zeros((a.shape[0], k), dtype=xp.int32)
    info = xp.zeros(a.shape[0], dtype=xp.int32)
    for j in range(k):
        col = a[:, j:, j]  # complex: |re| + |im|, as LAPACK's izamax, so pivots match
        p = j + xp.argmax(xp.abs(col.real) + xp.abs(col.imag) if kind == "c" else xp.abs(col),
                          axis=1)
        piv[:, j] = p + 1
        row_j = a[rows, j].copy()
        a[rows, j] = a[rows, p]
        a[rows, p] = row_j
        pivot = a[:, j, j]
        zero = pivot == 0
        info = xp.where(zero & (info == 0), j + 1, info).astype(xp.int32)
        scale = xp.where(zero, 0, 1 / xp.where(zero, 1, pivot))
        a[:, j + 1:, j] *= scale[:, None]
        a[:, j + 1:, j + 1:] -= a[:, j + 1:, j, None] * a[:, None, j, j + 1:]
    return a.reshape(A.shape), piv.reshape(batch + (k,)), info.reshape(batch)


@op("linalg_slogdet", n_out=2, save="inputs outputs", complex=True)
def _slogdet(xp, A):
    sign, logabs = xp.linalg.slogdet(A)
    sign = xp.asarray(sign, dtype=A.dtype)
    if (sign == 0).any():
        # torch's zero sign keeps the sign of LAPACK's pivots (row swaps times the nonzero
        # pivots' signs): [[1, 2], [2, 4]] gives -0, so its gradient is [[-inf, inf], ...]
        LU, piv, _ = _getrf(xp, A)
        u = xp.diagonal(LU, axis1=-2, axis2=-1)
        odd = (piv != xp.arange(1, piv.shape[-1] + 1)).sum(-1) % 2 == 1
        pivots = xp.where(u == 0, 1, xp.sign(u)).prod(-1)
        sign = xp.where(sign == 0, xp.where(odd, -pivots, pivots) * 0, sign).astype(A.dtype)
    return sign, xp.asarray(logabs, dtype=A.real.dtype)


@_slogdet.grad
def linalg_slogdet_backward(ctx, dsign, dlog):
    """torch's rule g A^-T; at a singular A (sign 0) torch's LU solve divides by a zero pivot,
    giving +-inf and nan: here g adj(A)^T / (+-0), the same infinities where adj(A) is
    nonzero and nan where it is zero. Both branches run and `where` merges them (no
    data-dependent branch, so graph mode traces it); sign's gradient is zero, as torch's."""
    (A,), (sign, _) = ctx.inputs, ctx.outputs
    if A.shape[-1] == 0:  # 0 x 0 matrices: logabsdet is the constant 0
        return A * 0
    if A.is_complex() and not _is_zero(dsign):
        # complex: sign = e^{i theta} with d theta = Im tr(A^-1 dA), so its cotangent
        # joins dlog as -i Im(conj(dsign) sign), as torch's
        dlog = dlog - 1j * imag(conj(dsign) * sign)
    singular = (sign == 0).unsqueeze(-1).unsqueeze(-1)
    g = dlog.unsqueeze(-1).unsqueeze(-1)
    regular = g * adjoint(inv(where(singular, _eye(A.shape[-1], A), A)))
    adjugate = _det_backward(A, sign * 0, dlog)  # dlog adj(A)^H: det's singular branch
    return where(singular, adjugate / sign.unsqueeze(-1).unsqueeze(-1), regular)


def slogdet(A):
    """(sign, log|det A|); differentiable in logabsdet with gradient A^-T (complex A: sign
    is det / |det|, differentiable too, and logabsdet real). A singular A gives (0, -inf)
    and, as torch's, an infinite or nan gradient (no error).

    >>> import flowgrad as flow
    >>> a = flow.tensor([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
    >>> sign, logabsdet = flow.linalg.slogdet(a); logabsdet.backward(); a.grad
    tensor([[-inf, inf],
            [inf, -inf]])
    """
    return SLOGDET(*_slogdet(_square(A, "linalg.slogdet")))


def logdet(A):
    """log det A (nan for negative determinants, as torch; complex A: log(sign) + log|det|,
    complex)."""
    sign, logabs = slogdet(A)
    if A.is_complex():
        return sign.log() + logabs
    return where(sign < 0, math.nan, logabs)  # sign 0 already gives logabsdet = -inf


@op("linalg_inv", save="outputs", complex=True, layout="column_major")
def _inv(xp, A):
    try:
        return xp.linalg.inv(A)
    except xp.linalg.LinAlgError as e:
        raise lapack_error(e, "linalg_inv", "the input matrix is singular") from None


@_inv.grad
def linalg_inv_backward(ctx, dy):
    Yh = adjoint(ctx.out)  # Y^T for real Y; Y^H under torch's conjugate Wirtinger convention
    return -(Yh @ dy @ Yh)


def inv(A):
    """Inverse of (batches of) square matrices; raises for singular ones."""
    _square(A, "linalg.inv")
    return _lapack(lambda: _inv(A), "linalg.inv", "the input matrix is singular")


# B's gradient reads A, A's reads A and X: B itself is never read
@op("linalg_solve", save="inputs outputs", complex=True, grad_reads=((0,), (0,)),
    layout="column_major")
def _solve(xp, A, B, *, vector=False, triangular=None):
    if triangular is not None and (xp.diagonal(A, axis1=-2, axis2=-1) == 0).any():
        return _substitute(xp, A, B, triangular == "upper")
    try:
        if vector:  # B a (batch of) vector(s): torch lays the (..., n) result out as a matrix
            # of its last two dims, column-major (a batch's vectors interleaved)
            return column_major(xp, xp.linalg.solve(A, B[..., None])[..., 0])
        return xp.linalg.solve(A, B)
    except xp.linalg.LinAlgError as e:
        raise lapack_error(e, "linalg_solve", "the input matrix is singular") from None


def _substitute(xp, A, B, upper):
    """X with A X = B for a triangular A with a zero on its diagonal (`upper`: A's upper
    triangle), by substitution row after row, as torch's trsm: inf and nan where it divides by
    that zero, where LAPACK's general solve refuses the singular matrix."""
    n = A.shape[-1]
    X = xp.zeros(xp.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + B.shape[-2:],
                 xp.result_type(A, B))
    A, B = xp.broadcast_to(A, X.shape[:-2] + (n, n)), xp.broadcast_to(B, X.shape)
    with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in (range(n - 1, -1, -1) if upper else range(n)):
            row = B[..., i, :]
            for j in (range(i + 1, n) if upper else range(i)):
                row = row - A[..., i, j, None] * X[..., j, :]
            X[..., i, :] = row / A[..., i, i, None]
    return X


_FLIPPED = {"upper": "lower", "lower": "upper", None: None}


@_solve.grad
def linalg_solve_backward(ctx, dX):
    (A, _), X = ctx.inputs, ctx.out
    vector = getattr(ctx, "vector", False)
    triangular = _FLIPPED[getattr(ctx, "triangular", None)]  # (A^H: the other triangle)
    dB = _solve(adjoint(A), dX, vector=True) if vector else _solve(adjoint(A), dX,
                                                                   triangular=triangular)
    if not ctx.needs_input_grad[0]:
        return None, dB
    if vector:
        return -(dB.unsqueeze(-1) @ adjoint(X.unsqueeze(-1))), dB
    return -(dB @ adjoint(X)), dB


def solve(A, B, *, left=True):
    """X with A @ X = B (left=True) or X @ A = B; B may be a (batch of) vector(s): a B of
    A's batch shape and size n, as torch reads it (B (3, 3) beside A (3, 3, 3): 3 vectors)."""
    _square(A, "linalg.solve")
    _same_dtype(A, B, "linalg.solve")
    n = A._data.shape[-1]
    vector = B._data.ndim == 1 or (B._data.ndim == A._data.ndim - 1 and
                                   B._data.shape == A._data.shape[:-1])
    if not vector:
        return solve_matrices(A, B, left=left, name="linalg.solve")
    if not left:  # torch reads B as a column: X A = B has no solution shape
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"XA = B ({n}x{n} and {n}x1): with left=False, B must be a "
                           f"matrix (..., k, {n}); for one row, pass B.unsqueeze(-2)")
    _check_rows(A, B.unsqueeze(-1), "linalg.solve")
    return _lapack(lambda: _solve(A, B, vector=True), "linalg.solve",
                   "the input matrix is singular")


def solve_matrices(A, B, *, left=True, name="linalg.solve", triangular=None):
    """`solve` with B always a (batch of) matrix (..., n, k), batch dims broadcast: what
    solve_triangular, cholesky_solve and lu_solve take (never read as vectors). `triangular`
    ("upper" or "lower": A is that triangle) solves a singular A as torch's trsm does."""
    _same_dtype(A, B, name)
    if not left:
        return solve_matrices(A.mT, B.mT, name=name, triangular=_FLIPPED[triangular]).mT
    _check_rows(A, B, name)
    return _lapack(lambda: _solve(A, B, triangular=triangular), name,
                   "the input matrix is singular")


def _check_rows(A, B, name):
    if B._data.ndim < 2 or B._data.shape[-2] != A._data.shape[-1]:
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation "
                           f"AX = B ({'x'.join(map(str, A.shape))} and "
                           f"{'x'.join(map(str, B.shape))})")


def _same_dtype(A, B, name):
    if not isinstance(B, Tensor):
        raise TypeError(f"{name}: B must be a Tensor, got {type(B).__name__}")
    if A._data.dtype != B._data.dtype:
        raise RuntimeError(f"{name}: Expected A and B to have the same dtype, but found "
                           f"A of type {A.dtype.name} and B of type {B.dtype.name} instead")


# ---- cholesky / qr ---------------------------------------------------------------------------
@op("linalg_cholesky", save="outputs", complex=True, layout="column_major")
def _cholesky(xp, A):
    what = "the input is not positive-definite"
    try:
        L = xp.linalg.cholesky(A)
    except xp.linalg.LinAlgError as e:
        raise lapack_error(e, "linalg_cholesky", what) from None
    if xp.isnan(L).any():  # (a nan pivot, which NumPy's potrf lets through and torch's refuses)
        raise lapack_error("a pivot is nan", "linalg_cholesky", what)
    return L


@_cholesky.grad
def linalg_cholesky_backward(ctx, gL):
    L = ctx.out
    n = L.shape[-1]
    # torch's rule (Murray 2016): A = L L^H  =>  gA = L^-H S L^-1 with M = L^H gL and
    # S = (tril(M) + tril(M, -1)^H) / 2: the Hermitian part of Phi(M) (lower triangle,
    # halved diagonal) up to the diagonal's imaginary part, which torch keeps too
    M = L.mH @ gL
    S = (M * _tril_const(n, L) + adjoint(M * _tril_const(n, L, 0.0))) * 0.5
    Linv = inv(L)
    return adjoint(Linv) @ S @ Linv


@op("cholesky_upper_triangle", complex=True)
def _upper_triangle(xp, A):
    """A^H: A's upper triangle where potrf reads (the lower one) for cholesky(upper=True)."""
    return xp.conj(xp.swapaxes(A, -1, -2))


@_upper_triangle.grad
def cholesky_upper_triangle_backward(ctx, dy):
    return dy  # torch's cholesky rule is the same whichever triangle its kernel read


def cholesky(A, *, upper=False):
    """Lower (or upper: L^H) Cholesky factor of Hermitian (symmetric) positive-definite
    matrices; float and complex."""
    _square(A, "linalg.cholesky")
    # torch factors the triangle it is told to: upper=True reads A's upper one (A^H's lower)
    L = _lapack(lambda: _cholesky(_upper_triangle(A) if upper else A), "linalg.cholesky",
                "the input is not positive-definite")
    return column_major_result(adjoint(L)) if upper else L


def column_major_result(X):
    """X as (a batch of) column-major matrices, copied where it is not: torch's layout of a
    LAPACK-backed result that flowgrad composes of other ops (cholesky's upper factor,
    householder_product, ormqr, lu_solve, solve_triangular), which the registry's
    layout="column_major" gives the results of single kernels."""
    data = X._data
    if data.ndim < 2 or data.swapaxes(-1, -2).flags.c_contiguous:
        return X
    return X.mT.contiguous().mT


@op("linalg_qr", n_out=2, save="outputs", complex=True, layout="column_major")
def _qr(xp, A, *, mode):
    Q, R = xp.linalg.qr(A, mode="complete" if mode == "complete" else "reduced")
    return Q, R  # a plain tuple: NumPy's QRResult is a namedtuple


@_qr.grad
def linalg_qr_backward(ctx, gQ, gR):
    Q, R = ctx.outputs
    m, n = Q.shape[-2], R.shape[-1]
    if ctx.mode == "r":
        raise RuntimeError("linalg.qr: The derivative of linalg.qr depends on Q, which is not "
                           "computed when mode='r'. Please use linalg.qr(A, mode='reduced') if "
                           "you are going to differentiate through linalg.qr.")
    if ctx.mode == "complete" and m > n:
        raise RuntimeError("linalg.qr: The QR decomposition is not differentiable when "
                           "mode='complete' and nrows > ncols.")
    if m >= n:
        return _qr_tall_grad(Q, R, gQ, gR)
    # wide: A = Q [X Y] with X square; Y = Q^H A[:, m:] sends gY to Q and to A[:, m:]
    X, Y = R[..., :m], R[..., m:]
    gX, gY = gR[..., :m], gR[..., m:]
    gU = _qr_tall_grad(Q, X, gQ + (Q @ Y) @ adjoint(gY), gX)
    return cat([gU, Q @ gY], -1)


def _qr_tall_grad(Q, R, gQ, gR):
    """m >= n, Q (m, n), R (n, n): gA = (gQ + Q copyltu(M)) R^-H, M = R gR^H - gQ^H Q
    (Walter & Lehmann; Seeger et al.; torch's), copyltu(M) the Hermitian matrix with M's
    strictly lower triangle and Re diag(M)."""
    n = R.shape[-1]
    M = R @ adjoint(gR) - adjoint(gQ) @ Q
    strict = M * _tril_const(n, M, 0.0)
    copyltu = strict + adjoint(strict) + _diag_embed(real(M.diagonal(0, -2, -1)))
    return (gQ + Q @ copyltu) @ adjoint(inv(R))


def qr(A, mode="reduced"):
    """QR decomposition: Q (orthonormal columns) and R (upper triangular); float or complex
    (R's diagonal is real for complex A, as LAPACK's and torch's). Differentiable
    as torch's: mode='reduced' (any shape), 'complete' when m <= n; not mode='r'.

    >>> import flowgrad as flow
    >>> Q, R = flow.linalg.qr(flow.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> R.abs()
    tensor([[5.0000, 2.2000],
            [0.0000, 0.4000]])
    """
    xp = array_module(A._data)
    _matrix(A, "linalg.qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"linalg.qr: qr received unrecognized mode '{mode}' but expected "
                           f"one of 'reduced' (default), 'r', or 'complete'")
    Q, R = _qr(A, mode=mode)
    if mode == "r":
        return QR(Tensor._wrap(xp.empty((0,), A._data.dtype)), R)
    return QR(Q, R)


# ---- svd / eigh ------------------------------------------------------------------------------
@op("linalg_svd", n_out=3, save="outputs", complex=True, layout="column_major")
def _svd(xp, A, *, full_matrices):
    try:
        U, S, Vh = xp.linalg.svd(A, full_matrices=full_matrices)
    except xp.linalg.LinAlgError as e:
        raise lapack_error(e, "linalg_svd", "the SVD did not converge") from None
    return U, S, Vh


@_svd.grad
def linalg_svd_backward(ctx, gU, gS, gVh):
    """torch's svd_backward: gA = U [(skew(U^H gU) S + S skew(V^H gV)) / E + diag(gS)
    (+ diag(Im(U^H gU)) i / S, complex)] V^H + (I - U U^H) gU S^-1 V^H
    + U S^-1 gV^H (I - V V^H), E_jk = s_k^2 - s_j^2, skew(X) = X - X^H. Complex: a loss
    that depends on the columns' phases has no gradient, and the rule raises as torch's."""
    U, S, Vh = ctx.outputs
    m, n = U.shape[-2], Vh.shape[-1]
    k = S.shape[-1]
    if U.shape[-1] != k or Vh.shape[-2] != k:
        U, Vh = U[..., :k], Vh[..., :k, :]  # full_matrices: only the first k columns matter
        gU, gVh = gU[..., :k], gVh[..., :k, :]
    if _is_zero(gU) and _is_zero(gVh):  # svdvals: U diag(gS) V^H
        return (U * gS.unsqueeze(-2)) @ Vh
    inner = _diag_embed(gS)
    UhgU, VhgV = adjoint(U) @ gU, Vh @ adjoint(gVh)
    skew_u, skew_v = UhgU - adjoint(UhgU), VhgV - adjoint(VhgV)
    if U.is_complex():
        _check_phase_invariance(skew_u.diagonal(0, -2, -1), skew_v.diagonal(0, -2, -1),
                                "svd_backward: The singular vectors", "depends on this phase "
                                "term, making it ill-defined.")
        inner = inner + _diag_embed(skew_u.diagonal(0, -2, -1) / (2 * S))
    s2 = S * S
    E = s2.unsqueeze(-2) - s2.unsqueeze(-1) + _eye(k, S)  # any non-zero value on the diagonal
    inner = inner + (skew_u * S.unsqueeze(-2) + S.unsqueeze(-1) * skew_v) / E
    gA = U @ inner @ Vh
    sinv = 1.0 / S
    if m > k:
        gA = gA + (gU - U @ UhgU) @ (adjoint(Vh) * sinv.unsqueeze(-2)).mH
    if n > k:
        gA = gA + (U * sinv.unsqueeze(-2)) @ (gVh - (gVh @ adjoint(Vh)) @ Vh)
    return gA


def _check_phase_invariance(a, b, what, ending):
    """torch's check that the loss does not depend on the vectors' phases: allclose(Im a,
    -Im b) with its lax tolerances (a, b: diagonals of skew-Hermitian parts; b None: 0). A
    graph-mode trace checks it once, while tracing; vmap's batched tensors skip it, as torch
    skips tensor subclasses."""
    if type(a) is not Tensor:
        return
    im_b = 0 if b is None else imag(b)
    tol = 1e-2 if b is None else 1e-2 + 1e-2 * im_b.abs()
    if not bool(((imag(a) + im_b).abs() <= tol).all()):  # NaN fails it too
        raise RuntimeError(f"{what} in the complex case are specified up to multiplication "
                           f"by e^{{i phi}}. The specified loss function {ending}")


def svd(A, full_matrices=True):
    """U, S, Vh with A = U diag(S) Vh; differentiable for full_matrices=False or square A
    (the gradient is undefined where singular values repeat)."""
    _matrix(A, "linalg.svd")
    return SVD(*_lapack(lambda: _svd(A, full_matrices=full_matrices), "linalg.svd",
                        "the SVD did not converge"))


def svdvals(A):
    """Singular values, descending; gradient U diag(gS) V^T."""
    _matrix(A, "linalg.svdvals")
    return _svd(A, full_matrices=False)[1]


@op("linalg_eigh", n_out=2, save="outputs", complex=True, layout="column_major")
def _eigh(xp, A, *, UPLO):
    try:
        w, V = xp.linalg.eigh(A, UPLO=UPLO)
    except xp.linalg.LinAlgError as e:
        raise lapack_error(e, "linalg_eigh", "the eigenvalue algorithm did not converge") \
            from None
    return w, V


@_eigh.grad
def linalg_eigh_backward(ctx, gL, gV):
    """torch's rule: gA = V (diag(gL) + skewh(V^H gV) / E) V^H, E_ij = l_j - l_i off the
    diagonal, skewh(X) = (X - X^H) / 2: the projection onto the tangent space of the unitary
    matrices, so gA is Hermitian. Complex: a loss that depends on the eigenvectors' phases
    (Im diag(V^H gV) != 0) has no gradient, and the rule raises as torch's."""
    L, V = ctx.outputs
    if _is_zero(gV):  # eigvalsh
        return (V * gL.unsqueeze(-2)) @ adjoint(V)
    n = L.shape[-1]
    eye = _eye(n, L)
    VhgV = adjoint(V) @ gV
    if V.is_complex():
        _check_phase_invariance(VhgV.diagonal(0, -2, -1), None,
                                "linalg_eigh_backward: The eigenvectors",
                                "depends on this quantity, so it is ill-defined.")
    inner = (VhgV - adjoint(VhgV)) * 0.5 / (L.unsqueeze(-2) - L.unsqueeze(-1) + eye)
    if not _is_zero(gL):
        inner = inner * (1 - eye) + _diag_embed(gL)
    return V @ inner @ adjoint(V)


def eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of symmetric (Hermitian) matrices; only the
    UPLO triangle is read."""
    _square(A, "linalg.eigh")
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    return EIGH(*_lapack(lambda: _eigh(A, UPLO=UPLO), "linalg.eigh",
                         "the eigenvalue algorithm did not converge"))


def eigvalsh(A, UPLO="L"):
    """Eigenvalues of symmetric matrices, ascending."""
    return eigh(A, UPLO)[0]


# ---- norms -----------------------------------------------------------------------------------
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """Matrix norm over the two dims `dim`: 'fro', 'nuc', inf, -inf, 1, -1, 2, -2."""
    _matrix(A, "linalg.matrix_norm", low_ok=True)  # (half precision: not the SVD's orders)
    if A._data.dtype in HALF and ord in ("nuc", 2, -2):
        raise RuntimeError(f"linalg.matrix_norm: Low precision dtypes not supported. Got "
                           f"{TORCH_SCALAR_NAMES[A._data.dtype.name]}")
    if dtype is not None:
        A = _norm.in_norm_dtype(A, dtype, "linalg.matrix_norm").to(dtype)
    if not isinstance(dim, (tuple, list)) or len(dim) != 2 or \
            _wrap_dim(dim[0], A.ndim, "linalg.matrix_norm") == \
            _wrap_dim(dim[1], A.ndim, "linalg.matrix_norm"):
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple of different dims, got "
                           f"{dim}")
    r0, r1 = dim[0] % A.ndim, dim[1] % A.ndim
    taken_over = {2: A.shape[r0] * A.shape[r1], 1: A.shape[r1], math.inf: A.shape[r0]}
    if not isinstance(ord, str) and taken_over.get(ord) == 0:
        # the largest of no singular values / column sums / row sums: 0, as torch (no grad)
        return A.detach().abs().sum((r0, r1), keepdim=keepdim)
    if ord == "fro":
        return vector_norm(A, 2, (r0, r1), keepdim)
    if ord in ("nuc", 2, -2):
        B = A.permute(*[i for i in range(A.ndim) if i not in (r0, r1)], r0, r1)
        s = svdvals(B)
        out = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
        return out.unsqueeze(min(r0, r1)).unsqueeze(max(r0, r1)) if keepdim else out
    if ord in (1, -1, math.inf, -math.inf):
        # 1: the largest absolute column sum; inf: the largest absolute row sum
        sum_dim, ext_dim = (r0, r1) if ord in (1, -1) else (r1, r0)
        sums = A.abs().sum(dim=sum_dim, keepdim=True)
        out = sums.amax(ext_dim, keepdim=True) if ord > 0 else sums.amin(ext_dim, keepdim=True)
        return out if keepdim else out.squeeze((r0, r1))
    raise RuntimeError(f"linalg.matrix_norm: Order {ord!r} not supported; use 'fro', 'nuc', "
                       f"inf, -inf, 1, -1, 2 or -2")


_norm.matrix_norm = matrix_norm  # torch.norm(p='nuc') calls it


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """linalg.norm: a vector norm (1 dim, or all when ord is None) or a matrix norm
    (2 dims, or a 2-D input with ord given)."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or (dim is None and ord is not None and A.ndim == 2):
        return matrix_norm(A, "fro" if ord is None else ord, dim or (-2, -1), keepdim,
                           dtype=dtype)
    if dim is None and ord is not None and A.ndim != 1:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must "
                           f"be 1D or 2D. Got {A.ndim}D")
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.norm: ord={ord!r} needs a matrix: pass two dims")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


# ---- Tensor methods ------------------------------------------------------------------------
for _name, _fn in (("det", det), ("logdet", logdet), ("slogdet", slogdet), ("inverse", inv),
                   ("cholesky", cholesky)):
    tensor_method(_name)(_fn)
