"""linalg's solvers: solve_triangular, LU (lu_factor, lu, lu_unpack, lu_solve), the `_ex`
forms that report failure in `info` instead of raising, cholesky_solve/cholesky_inverse,
pinv, lstsq, matrix_rank, tensorinv/tensorsolve.

LU is one op (partial pivoting, LAPACK getrf's packed LU and 1-based pivots) with torch's
rule; the rest is composed of differentiable ops, so torch's gradients (lu_solve's for LU and
B, solve_triangular's masked to its triangle, lstsq's through pinv) come by construction.

>>> import flowgrad as flow
>>> A = flow.tensor([[4.0, 3.0], [6.0, 3.0]])
>>> LU, pivots = flow.linalg.lu_factor(A)
>>> flow.linalg.lu_solve(LU, pivots, flow.tensor([[10.0], [12.0]])).round(decimals=4)
tensor([[1.],
        [2.]])
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..autograd.interpreter import varies_per_run
from ..device import array_module
from ..errors import LinAlgError
from ..func.batched import every_example
from ..tensor import Tensor, tensor_method
from .complex import adjoint, real
from .creation import tensor as _tensor
from .diag import tril, triu
from .elementwise import where
from .linalg_decomp import (
    _eye,
    _getrf,
    _lapack,
    _matrix,
    _square,
    check_info,
    cholesky,
    column_major_result,
    eigvalsh,
    inv,
    lapack_error,
    solve,
    solve_matrices,
    svdvals,
)
from .pad import _pad_constant
from .registry import op
from .shape import cat

__all__ = ["solve_triangular", "lu_factor", "lu_factor_ex", "lu", "lu_unpack", "lu_solve",
           "solve_ex", "inv_ex", "cholesky_ex", "cholesky_solve", "cholesky_inverse", "pinv",
           "lstsq", "matrix_rank", "tensorinv", "tensorsolve"]

LU_FACTOR = namedtuple("LU_FACTOR", ["LU", "pivots"])
LU_FACTOR_EX = namedtuple("LU_FACTOR_EX", ["LU", "pivots", "info"])
PLU = namedtuple("PLU", ["P", "L", "U"])
SOLVE_EX = namedtuple("SOLVE_EX", ["result", "info"])
INV_EX = namedtuple("INV_EX", ["inverse", "info"])
CHOLESKY_EX = namedtuple("CHOLESKY_EX", ["L", "info"])
LSTSQ = namedtuple("LSTSQ", ["solution", "residuals", "rank", "singular_values"])


def _unit_diag(T):
    eye = _eye(T.shape[-1], T)
    return T * (1.0 - eye) + eye


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (left) or X A = B, reading only A's upper or lower triangle (and taking
    its diagonal as ones when `unitriangular`); A's gradient is masked to that triangle.

    >>> import flowgrad as flow
    >>> A = flow.tensor([[2.0, 1.0], [0.0, 4.0]])
    >>> flow.linalg.solve_triangular(A, flow.tensor([[4.0], [8.0]]), upper=True)
    tensor([[1.],
            [2.]])
    """
    _square(A, "linalg.solve_triangular")
    _matrix(B, "linalg.solve_triangular")
    T = triu(A) if upper else tril(A)
    if unitriangular:
        T = _unit_diag(T)
    X = solve_matrices(T, B, left=left, name="linalg.solve_triangular",
                       triangular="upper" if upper else "lower")
    return X if left else column_major_result(X)  # (column-major either way, as torch's)


# ---- LU --------------------------------------------------------------------------------------
@op("linalg_lu_factor", n_out=3, save="outputs", complex=True, layout="column_major")
def _lu_factor(xp, A):
    return _getrf(xp, A)  # (in linalg_decomp.py: slogdet takes its pivots' signs too)


@op("linalg_lu_permutation", differentiable=False, complex=True, layout="contiguous")
def _permutation(xp, pivots, LU, *, check=None):
    """P with A = P L U from getrf's row swaps: apply the swaps to the rows of I, transposed.
    (LU only gives the size and dtype.) `check`: the function whose range check of pivots
    given by the user this is (in the kernel: a compiled plan checks each call's)."""
    m, dtype = LU.shape[-2], LU.dtype
    if check is not None and pivots.size:
        _check_pivot_range(pivots, m, check)
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    size = math.prod(batch)  # (not -1 in reshape: m or k may be 0)
    perm = xp.broadcast_to(xp.arange(m), batch + (m,)).reshape(size, m).copy()
    piv = pivots.reshape(size, k) - 1
    rows = xp.arange(perm.shape[0])
    for j in range(k):
        p = piv[:, j]
        pj = perm[rows, j].copy()
        perm[rows, j] = perm[rows, p]
        perm[rows, p] = pj
    eye = xp.eye(m, dtype=dtype)
    return xp.swapaxes(eye[perm], -1, -2).reshape(batch + (m, m))


def _check_pivot_range(piv, m, name):
    """torch's errors for pivots outside [1, m] (lu_unpack's one, lu_solve's two)."""
    low, high = piv.min() < 1, piv.max() > m
    if not (low or high):
        return
    again = "Did you properly pass the result of lu_factor?"
    if name == "lu_unpack":
        raise RuntimeError(f"pivots passed to lu_unpack must be between 1 and LU.size(-2) "
                           f"inclusive.{again}")
    raise RuntimeError(f"Pivots given to lu_solve must all be "
                       f"{'greater or equal to 1' if low else 'smaller or equal to LU.size(-2)'}"
                       f". {again}")


def _unpack(LU, pivots, check=None, P=True):
    """P, L (unit lower, m x k), U (upper, k x n) from the packed LU (`P` False: None for
    it); `check`: the function that checks the pivots' range (the user's pivots)."""
    m, n = LU.shape[-2:]
    k = min(m, n)
    L = tril(LU, -1)[..., :, :k] + _eye(m, LU, k)
    U = triu(LU[..., :k, :])  # (a new row-major U, as torch's: not a view of triu(LU)'s rows)
    return _permutation(pivots, LU, check=check) if P else None, L, U


@_lu_factor.grad
def linalg_lu_factor_backward(ctx, gLU, _gpivots, _ginfo):
    LU, pivots, _ = ctx.outputs
    P, L, U = _unpack(LU, pivots)
    m, n = LU.shape[-2:]
    k = min(m, n)
    gL, gU = tril(gLU, -1)[..., :, :k], triu(gLU)[..., :k, :]
    # torch's linalg_lu_backward; square: gA = P L^-H (tril_-1(L^H gL) + triu(gU U^H)) U^-H
    if m == n:
        gA = tril(L.mH @ gL, -1) + triu(gU @ U.mH)
        gA = solve_triangular(U.mH, gA, upper=False, left=False)
        return P @ solve_triangular(L.mH, gA, upper=True, unitriangular=True)
    if m < n:  # wide: U = [U1 U2], U1 square
        U1 = U[..., :k]
        gA = tril(L.mH @ gL - triu(gU) @ U.mH, -1)
        gA = solve_triangular(U1.mH, gA, upper=False, left=False)
        gA = cat([gA + triu(gU[..., :k]), gU[..., k:]], -1)
        return P @ solve_triangular(L.mH, gA, upper=True, unitriangular=True)
    L1 = L[..., :k, :]  # tall: L = [L1; L2], L1 square
    gA = triu(gU @ U.mH - L.mH @ tril(gL, -1))
    gA = solve_triangular(L1.mH, gA, upper=True, unitriangular=True)
    gA = cat([gA + tril(gL[..., :k, :], -1), gL[..., k:, :]], -2)
    return P @ solve_triangular(U.mH, gA, upper=False, left=False)


def _check_pivot(pivot, name):
    if not pivot:
        raise RuntimeError(f"{name}: LU without pivoting is not implemented on the CPU; "
                           f"pass pivot=True")


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info): getrf's packed factors; info > 0 names the first zero pivot of U
    (the factorization still completes, as LAPACK's)."""
    _matrix(A, "linalg.lu_factor_ex")
    _check_pivot(pivot, "linalg.lu_factor_ex")
    LU, pivots, info = _lu_factor(A)
    if check_errors:
        _check_lu_info(info, "linalg.lu_factor_ex")
    return LU_FACTOR_EX(LU, pivots, info)


def _check_lu_info(info, name):
    """torch's error for a zero pivot U[i, i] (i: info's largest, 1-based as torch's)."""
    rest = ("is zero and using it on lu_solve would result in a division by zero. If you still "
            "want to perform the factorization, consider calling linalg.lu(A, pivot) or "
            "linalg.lu_factor_ex(A, pivot)")
    check_info(info, RuntimeError, f"{name}: a U[i,i] {rest}",
               lambda: f"{name}: U[{int(info._data.max())},{int(info._data.max())}] {rest}")


def lu_factor(A, *, pivot=True):
    """(LU, pivots) of A = P L U with partial pivoting; raises for a singular A (use
    lu_factor_ex or lu to factor it anyway). Gradient as torch's linalg_lu_backward."""
    _matrix(A, "linalg.lu_factor")
    _check_pivot(pivot, "linalg.lu_factor")
    LU, pivots, info = _lu_factor(A)
    _check_lu_info(info, "linalg.lu_factor")
    return LU_FACTOR(LU, pivots)


def _check_pivots(pivots, name, arg="pivots"):
    """lu_factor's pivots are int32, and torch's LU consumers take no other dtype."""
    if not isinstance(pivots, Tensor) or pivots._data.dtype != np.int32:
        got = pivots.dtype if isinstance(pivots, Tensor) else type(pivots).__name__
        raise RuntimeError(f"{name}: {arg} should be a Tensor of scalar type int32 (as "
                           f"lu_factor returns them), got {got}")


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """torch.lu_unpack: (P, L, U) from the packed LU and its pivots."""
    _check_pivots(LU_pivots, "torch.lu_unpack", "LU_pivots")
    xp = array_module(LU_data._data)
    P, L, U = _unpack(LU_data, LU_pivots, "lu_unpack", P=unpack_pivots)
    empty = Tensor._wrap(xp.empty((0,), LU_data._data.dtype))
    return PLU(P if unpack_pivots else empty, L if unpack_data else empty,
               U if unpack_data else empty)


def lu(A, *, pivot=True):
    """P, L, U with A = P L U (L unit lower m x k, U upper k x n, k = min(m, n)).

    >>> import flowgrad as flow
    >>> P, L, U = flow.linalg.lu(flow.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> P @ L @ U
    tensor([[1., 2.],
            [3., 4.]])
    """
    _matrix(A, "linalg.lu")
    _check_pivot(pivot, "linalg.lu")
    LU, pivots, _ = _lu_factor(A)
    return PLU(*_unpack(LU, pivots))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (or X A = B when not `left`; A^H in place of A when `adjoint`) from
    lu_factor's result; differentiable in LU and B."""
    _square(LU, "linalg.lu_solve")
    _matrix(B, "linalg.lu_solve")
    _check_pivots(pivots, "linalg.lu_solve")
    P, L, U = _unpack(LU, pivots, "lu_solve")

    def tri(T, X, upper, left, unit=False):
        return solve_triangular(T, X, upper=upper, left=left, unitriangular=unit)

    # laid out as torch's: column-major for left, row-major for right
    if left and not adjoint:  # U^-1 L^-1 P^T B
        return tri(U, tri(L, P.mT @ B, False, True, True), True, True)
    if left:  # P L^-H U^-H B
        return column_major_result(P @ tri(L.mH, tri(U.mH, B, False, True), True, True, True))
    if not adjoint:  # B U^-1 L^-1 P^T
        return tri(L, tri(U, B, True, False), False, False, True) @ P.mT
    # B P L^-H U^-H
    return tri(U.mH, tri(L.mH, B @ P, True, False, True), False, False).contiguous()


# ---- the _ex forms: failure goes to info ------------------------------------------------------
def _ex(result, info, name, check_errors):
    """Replace the results of failed matrices by NaN (torch leaves LAPACK's partial results
    there; flowgrad does not promise them)."""
    if check_errors:
        message = f"{name}: the factorization could not be completed"
        check_info(info, LinAlgError, message, lambda: f"{message} (info = {info.tolist()})")
        return result
    if not (varies_per_run(info) or info._data.any()):  # (a plan's: every call's info)
        return result
    bad = info != 0
    while bad.ndim < result.ndim:
        bad = bad.unsqueeze(-1)
    return where(bad, float("nan"), result)


def _safe(A, info):
    bad = (info != 0).unsqueeze(-1).unsqueeze(-1)
    return where(bad, _eye(A.shape[-1], A), A)


def inv_ex(A, *, check_errors=False):
    """(inverse, info): info > 0 for a singular matrix (whose inverse is NaN here).

    >>> import flowgrad as flow
    >>> flow.linalg.inv_ex(flow.tensor([[1.0, 2.0], [2.0, 4.0]])).info
    tensor(2, dtype=flowgrad.int32)
    """
    _square(A, "linalg.inv_ex")
    info = _lu_factor(A)[2]
    return INV_EX(_ex(inv(_safe(A, info)), info, "linalg.inv_ex", check_errors), info)


def solve_ex(A, B, *, left=True, check_errors=False):
    """(result, info) of linalg.solve; info > 0 for a singular A (result NaN there)."""
    _square(A, "linalg.solve_ex")
    info = _lu_factor(A)[2]
    X = solve(_safe(A, info), B, left=left)
    return SOLVE_EX(_ex(X, info, "linalg.solve_ex", check_errors), info)


@op("linalg_cholesky_info", differentiable=False, complex=True)
def _cholesky_info(xp, A):
    """The order of the first leading minor that is not positive-definite (0 if none), by an
    unblocked Cholesky over the batch, as potrf reports it."""
    n = A.shape[-1]
    wide = xp.complex128 if A.dtype.kind == "c" else xp.float64
    a = xp.tril(A.reshape((math.prod(A.shape[:-2]), n, n))).astype(wide)
    info = xp.zeros(a.shape[0], dtype=xp.int32)
    for j in range(n):  # (Hermitian: the diagonal's real part is read, as potrf's)
        d = a[:, j, j].real - xp.sum(xp.abs(a[:, j, :j]) ** 2, axis=1)
        info = xp.where(~(d > 0) & (info == 0), j + 1, info).astype(xp.int32)
        ljj = xp.sqrt(xp.where(d > 0, d, 1))
        a[:, j, j] = ljj
        below = a[:, j + 1:, j] - (a[:, j + 1:, :j] @ a[:, j, :j, None].conj())[..., 0]
        a[:, j + 1:, j] = below / ljj[:, None]
    return info.reshape(A.shape[:-2])


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info): info = k > 0 when the leading k x k minor is not positive-definite."""
    _square(A, "linalg.cholesky_ex")
    info = _cholesky_info(A.mH if upper else A)  # (upper: its upper triangle is read)
    L = _ex(cholesky(_safe(A, info), upper=upper), info, "linalg.cholesky_ex", check_errors)
    return CHOLESKY_EX(L, info)


@tensor_method()
def cholesky_solve(input, input2, upper=False):
    """torch.cholesky_solve: X with A X = input where A = L L^H for L = input2 (or U^H U
    when `upper`)."""
    U = input2 if upper else adjoint(input2)
    Y = solve_triangular(adjoint(U), input, upper=False)
    return solve_triangular(U, Y, upper=True)


@tensor_method()
def cholesky_inverse(input, upper=False):
    """torch.cholesky_inverse: A^-1 from A's Cholesky factor."""
    if input._data.ndim < 2:
        raise RuntimeError(f"cholesky_inverse: The input tensor A must have at least 2 "
                           f"dimensions (got shape {tuple(input.shape)})")
    # a zero on the factor's diagonal: torch's potri refuses it (its triangular solves,
    # which cholesky_solve keeps, give inf and nan)
    zero = input.diagonal(dim1=-2, dim2=-1) == 0
    check_info(zero.long().sum(-1), LinAlgError, "cholesky_inverse: a diagonal element is "
               "zero, the inversion could not be completed because the input matrix is "
               "singular", lambda: _zero_diagonal(zero._data))
    return cholesky_solve(_eye(input.shape[-1], input).expand(input.shape), input, upper)


def _zero_diagonal(zero):
    """cholesky_inverse's eager message: the first matrix (and its 1-based diagonal element)
    with a zero, as torch's."""
    rows = zero.reshape(-1, zero.shape[-1])
    b = int(rows.any(-1).argmax())
    batch = f"(Batch element {b}): " if zero.ndim > 1 else ""
    return (f"cholesky_inverse: {batch}The diagonal element {int(rows[b].argmax()) + 1} is "
            f"zero, the inversion could not be completed because the input matrix is singular.")


# ---- pseudo-inverse, least squares, rank ----------------------------------------------------
def _tolerances(A, atol, rtol, name):
    for t in (atol, rtol):
        if isinstance(t, Tensor):
            if t.numel() != 1:
                raise NotImplementedError(f"{name}: atol/rtol as tensors of several values are "
                                          f"not supported; pass floats")
    atol = 0.0 if atol is None else float(atol)
    if rtol is None:
        m, n = A._data.shape[-2:]
        rtol = np.finfo(A._data.dtype).eps * max(m, n) if atol <= 0 else 0.0
    return atol, float(rtol)


@op("linalg_pinv", save="inputs outputs", complex=True)
def _pinv(xp, A, *tolerances, atol, rtol, hermitian):
    """tolerances: (atol, rtol) as float64 arrays broadcasting against A's batch dims, when
    given as tensors of several values (inputs: a compiled plan reads each call's)."""
    if tolerances:
        atol, rtol = tolerances

    def adj(X):  # the conjugate transpose (the transpose, a view, for real X)
        X = xp.swapaxes(X, -1, -2)
        return xp.conj(X) if X.dtype.kind == "c" else X

    try:
        if hermitian:
            w, V = xp.linalg.eigh(A)
        else:
            U, S, Vh = xp.linalg.svd(A, full_matrices=False)
    except xp.linalg.LinAlgError as e:
        raise lapack_error(e, "linalg_pinv", "the SVD did not converge") from None
    if hermitian:
        tol = xp.maximum(atol, rtol * xp.abs(w).max(-1, initial=0))[..., None]
        winv = xp.where(xp.abs(w) > tol, 1 / xp.where(w == 0, 1, w), 0)
        return (V * winv[..., None, :]) @ adj(V)
    tol = xp.maximum(atol, rtol * S.max(-1, initial=0))[..., None]
    sinv = xp.where(S > tol, 1 / xp.where(S == 0, 1, S), 0)
    return adj(Vh) @ (sinv[..., :, None] * adj(U))


@_pinv.grad
def linalg_pinv_backward(ctx, g):
    # torch's pinv_backward: exact where the rank is locally constant
    A, P = ctx.inputs[0], ctx.out
    m, n = A.shape[-2:]
    Ph, gh = adjoint(P), adjoint(g)
    if m <= n:
        K = gh @ P
        KPh = K @ Ph
        gA = -adjoint(P @ K) + KPh - (A @ P) @ KPh + (Ph @ P) @ (gh - K @ A)
    else:
        K = P @ gh
        PhK = Ph @ K
        gA = -adjoint(K @ P) + (gh - A @ K) @ P @ Ph + PhK - PhK @ P @ A
    return gA if len(ctx.input_shapes) == 1 else (gA, None, None)


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """Moore-Penrose pseudo-inverse (singular values <= max(atol, rtol * s_max) dropped).
    The gradient is torch's, valid where the rank does not change under perturbation.

    >>> import flowgrad as flow
    >>> flow.linalg.pinv(flow.tensor([[1.0, 0.0], [0.0, 0.0]]))
    tensor([[1., 0.],
            [0., 0.]])
    """
    _matrix(A, "linalg.pinv")
    for t, what in ((atol, "atol"), (rtol, "rtol")):
        if isinstance(t, Tensor) and t.requires_grad and is_grad_enabled():
            raise RuntimeError(f"The function 'linalg_pinv' is not differentiable with respect "
                               f"to argument '{what}'. This input cannot have requires_grad "
                               f"True; pass it detached")
    if A._data.size == 0:  # (torch's early return: the tolerances are not read)
        atol = rtol = None
    tensors = ()  # tolerance tensors: kernel inputs, per batch (as matrix_rank's)
    if isinstance(atol, Tensor) or isinstance(rtol, Tensor):
        tensors, atol, rtol = _tolerance_tensors(A, atol, rtol), 0.0, 0.0
    else:
        atol, rtol = _tolerances(A, atol, rtol, "linalg.pinv")
    return _lapack(lambda: _pinv(A, *tensors, atol=atol, rtol=rtol, hermitian=bool(hermitian)),
                   "linalg.pinv", "the SVD did not converge")


@tensor_method()
def pinverse(input, rcond=1e-15):
    """torch.pinverse: pinv with relative tolerance `rcond`."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None):
    """The number of singular values above max(atol, rtol * s_max) (int64, no gradient).

    >>> import flowgrad as flow
    >>> flow.linalg.matrix_rank(flow.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(1)
    """
    _matrix(A, "linalg.matrix_rank")
    if tol is not None:
        atol, rtol = tol, 0.0
    if isinstance(atol, Tensor) or isinstance(rtol, Tensor):
        return _matrix_rank_per_batch(A, atol, rtol, hermitian)
    atol, rtol = _tolerances(A, atol, rtol, "linalg.matrix_rank")
    with no_grad():
        S = eigvalsh(A).abs() if hermitian else svdvals(A)
        if S.shape[-1] == 0:  # empty matrices: rank 0 (amax has nothing to reduce)
            return (S > 0).sum(-1)
        tol_ = (S.amax(-1, keepdim=True) * rtol).clamp(min=atol)
        return (S > tol_).sum(-1)


def _tolerance_tensors(A, atol, rtol):
    """atol and rtol as float64 tensors, broadcasting against A's batch dims as torch's; an
    unset rtol is 0 where atol > 0, else eps * max(m, n)."""
    with no_grad():
        atol = _tensor(0.0 if atol is None else atol, dtype=_dt.float64) \
            if not isinstance(atol, Tensor) else atol.to(_dt.float64)
        if rtol is None:
            eps = np.finfo(A._data.dtype).eps * max(A.shape[-2:])
            rtol = where(atol > 0, 0.0, eps)
        elif not isinstance(rtol, Tensor):
            rtol = _tensor(rtol, dtype=_dt.float64)
        return atol, rtol.to(_dt.float64)


def _matrix_rank_per_batch(A, atol, rtol, hermitian):
    """matrix_rank with tolerance tensors, broadcast against A's batch dims as torch's (in
    float64; an unset rtol is 0 where atol > 0, else eps * max(m, n))."""
    with no_grad():
        atol, rtol = _tolerance_tensors(A, atol, rtol)
        S = eigvalsh(A).abs() if hermitian else svdvals(A)
        if S.shape[-1] == 0:
            batch = np.broadcast_shapes(S.shape[:-1], atol.shape, rtol.shape)
            return (S > 0).sum(-1).expand(batch).contiguous()
        tol_ = (rtol.unsqueeze(-1) * S.amax(-1, keepdim=True)).maximum(atol.unsqueeze(-1))
        return (S > tol_).sum(-1)


_DRIVERS = (None, "gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """Least squares: (solution, residuals, rank, singular_values) as torch's CPU drivers
    return them. The solution is pinv(A) @ B (the minimum-norm one: equal to every driver's
    for a full-rank A; gelsy's differs for a rank-deficient A); its gradient is torch's
    (through pinv). residuals: squared residual norms for m > n and full rank (not 'gelsy').

    >>> import flowgrad as flow
    >>> A = flow.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> flow.linalg.lstsq(A, flow.tensor([[1.0], [1.0], [2.0]])).solution.round(decimals=4)
    tensor([[1.],
            [1.]])
    """
    xp = array_module(A._data)
    _matrix(A, "linalg.lstsq")
    if driver not in _DRIVERS:
        raise RuntimeError(f"linalg.lstsq: parameter `driver` should be one of (gels, gelsy, "
                           f"gelsd, gelss), got {driver!r}")
    if not 0 <= A._data.ndim - B._data.ndim <= 1:
        raise RuntimeError(f"linalg.lstsq: input.dim() must be greater or equal to other.dim() "
                           f"and (input.dim() - other.dim()) <= 1, got {tuple(A.shape)} and "
                           f"{tuple(B.shape)}")
    vector = B._data.ndim == A._data.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm._data.shape[-2] != A._data.shape[-2]:
        raise RuntimeError(f"linalg.lstsq: input.size(-2) should match other.size(-2), got "
                           f"{tuple(A.shape)} and {tuple(B.shape)}")
    m, n = A._data.shape[-2:]
    rtol = rcond if rcond is not None and rcond > 0 else np.finfo(A._data.dtype).eps * max(m, n)
    X = pinv(A, rtol=rtol) @ Bm
    if m > n:  # torch's solution: the first n rows of a column-major (..., m, k) buffer
        pads = ((0, 0),) * (X._data.ndim - 2) + ((0, m - n), (0, 0))
        X = column_major_result(_pad_constant(X, pads=pads, value=0))[..., :n, :]
    else:
        X = column_major_result(X)
    empty = Tensor._wrap(xp.empty((0,), A._data.real.dtype))  # real for complex A, as torch's
    rank = empty.long() if driver == "gels" else matrix_rank(A, rtol=rtol)
    svals = svdvals(A.detach()) if driver in ("gelsd", "gelss") else empty
    residuals = real(X.reshape(-1)[:0])  # empty, differentiable as torch's, and real
    # full rank everywhere: under vmap, over the whole batch, as torch's batching rule
    if m > n and driver != "gelsy" and driver is not None and (
            varies_per_run(A) or every_example(matrix_rank(A) == n)):
        r = A @ X - Bm
        r = r.abs() if r.is_complex() else r  # complex: |r|^2, real as torch's
        residuals = (r ** 2).sum(-2)  # (..., 1) for a vector B too, as torch's
        if varies_per_run(A):  # (a plan: whether A has full rank is each call's, and so is
            # the residuals' size: selected by it, a size the plan checks on every call)
            kept = residuals.reshape(-1)[(matrix_rank(A) == n).all().expand(residuals.numel())]
            residuals = kept.reshape(residuals.shape) if kept.numel() else kept
    return LSTSQ(X.squeeze(-1) if vector else X, residuals, rank, svals)


# ---- tensor forms ------------------------------------------------------------------------------
def tensorinv(A, ind=2):
    """The inverse of A seen as a map from its first `ind` dims' space to the rest's.

    >>> import flowgrad as flow
    >>> flow.linalg.tensorinv(flow.eye(4).reshape(4, 2, 2), ind=1).shape
    flowgrad.Size([2, 2, 4])
    """
    if ind <= 0:
        raise RuntimeError(f"linalg.tensorinv: Expected a strictly positive integer for 'ind', "
                           f"but got {ind}")
    out_shape, in_shape = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    rows, cols = int(np.prod(out_shape)), int(np.prod(in_shape))
    if rows != cols:
        raise RuntimeError(f"linalg.tensorinv: Expected self to satisfy the requirement "
                           f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got {cols} "
                           f"!= {rows}")
    return inv(A.reshape(rows, cols)).reshape((*in_shape, *out_shape))


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B; `dims` first moves those dims of A to the end."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.permute(*[d for d in range(A.ndim) if d not in dims], *dims)
    # as torch's: only the sizes must agree (A's leading dims need not be B's shape)
    x_shape = tuple(A.shape[B.ndim:])
    cols = int(np.prod(x_shape))
    if cols != B.numel():
        raise RuntimeError(f"linalg.tensorsolve: Expected self to satisfy the requirement "
                           f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), "
                           f"but got {cols} != {B.numel()} (A {tuple(A.shape)}, B "
                           f"{tuple(B.shape)})")
    if A.numel() != cols * cols:
        raise RuntimeError(f"linalg.tensorsolve: A of shape {tuple(A.shape)} cannot be seen as "
                           f"a {cols} x {cols} matrix for B of shape {tuple(B.shape)}")
    return solve(A.reshape(cols, cols), B.reshape(cols)).reshape(x_shape)
