"""linalg's LDL^T: ldl_factor, ldl_factor_ex and ldl_solve (Bunch-Kaufman with the lower
triangle, as LAPACK's sytrf/sytrs, or hetrf/hetrs for complex Hermitian matrices).

A = P L D L^T P^T (L D L^H with hermitian=True): L unit lower triangular, D block diagonal
with 1 x 1 and 2 x 2 blocks. Pivoting is data dependent, so each matrix of a batch is
factored on its own, in the order and with the pivot choices of LAPACK's unblocked
dsytf2/zsytf2/zhetf2 (what sytrf/hetrf run for the matrices torch's OpInfos use); complex
pivots are chosen by |re| + |im|, as LAPACK's izamax. Not differentiable, as torch's.

>>> import flowgrad as flow
>>> LD, pivots = flow.linalg.ldl_factor(flow.tensor([[4.0, 2.0], [2.0, 3.0]]))
>>> LD
tensor([[4.0000, 0.0000],
        [0.5000, 2.0000]])
"""
from __future__ import annotations

import math
from collections import namedtuple

from .linalg_decomp import _matrix, _square, check_info
from .no_derivative import without_derivative
from .registry import op

__all__ = ["ldl_factor", "ldl_factor_ex", "ldl_solve"]

LDL = namedtuple("LDL", ["LD", "pivots"])
LDL_EX = namedtuple("LDL_EX", ["LD", "pivots", "info"])

_BK_ALPHA = (1 + math.sqrt(17)) / 8


def _cabs1(z):
    """LAPACK's CABS1: |re| + |im| (the pivot measure of complex izamax)."""
    return abs(z.real) + abs(z.imag)


def _sytf2(xp, a, herm):
    """In-place Bunch-Kaufman factorization of one symmetric matrix (lower triangle read):
    returns 1-based pivots (negative for 2 x 2 blocks) and info, as LAPACK's dsytf2 (real),
    zsytf2 (complex symmetric) or zhetf2 (`herm`: complex Hermitian, whose diagonal's
    imaginary part is ignored and D's diagonal real)."""
    n = a.shape[0]
    piv = [0] * n
    info, k = 0, 0
    cabs = _cabs1 if a.dtype.kind == "c" else abs
    dabs = (lambda z: abs(z.real)) if herm else cabs  # the measure of a diagonal entry
    while k < n:
        kstep, absakk = 1, dabs(a[k, k])
        imax, colmax = k, 0.0
        if k < n - 1:
            imax = k + 1 + int(cabs(a[k + 1:, k]).argmax())
            colmax = cabs(a[imax, k])
        if max(absakk, colmax) == 0:
            info = info or k + 1
            kp = k
        elif absakk >= _BK_ALPHA * colmax:
            kp = k
        else:
            rowmax = cabs(a[imax, k:imax]).max()
            if imax < n - 1:
                rowmax = max(rowmax, cabs(a[imax + 1:, imax]).max())
            if absakk >= _BK_ALPHA * colmax * (colmax / rowmax):
                kp = k
            elif dabs(a[imax, imax]) >= _BK_ALPHA * rowmax:
                kp = imax
            else:
                kp, kstep = imax, 2
        kk = k + kstep - 1
        if kp != kk and max(absakk, colmax) != 0:
            a[kp + 1:, [kk, kp]] = a[kp + 1:, [kp, kk]]
            seg = a[kk + 1:kp, kk].copy()
            a[kk + 1:kp, kk] = a[kp, kk + 1:kp]
            a[kp, kk + 1:kp] = seg
            a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]
            if herm:  # the rows of the swapped segment are the columns' conjugates
                a[kk + 1:kp, kk] = a[kk + 1:kp, kk].conj()
                a[kp, kk + 1:kp] = a[kp, kk + 1:kp].conj()
                a[kp, kk] = a[kp, kk].conj()
            if kstep == 2:
                a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
        if herm:
            a[k, k] = a[k, k].real
            if kstep == 2:
                a[k + 1, k + 1] = a[k + 1, k + 1].real
        if max(absakk, colmax) != 0:
            if kstep == 1 and k < n - 1:
                x = a[k + 1:, k] / a[k, k]
                y = a[k + 1:, k].conj() if herm else a[k + 1:, k]
                a[k + 1:, k + 1:] -= xp.outer(x, y)
                a[k + 1:, k] = x
            elif kstep == 2 and k < n - 2:
                _block_update(xp, a, k, herm)
        if herm and kstep == 1 and k < n - 1:
            idx = xp.arange(k + 1, n)
            a[idx, idx] = a[idx, idx].real
        if kstep == 1:
            piv[k] = kp + 1
        else:
            piv[k] = piv[k + 1] = -(kp + 1)
        k += kstep
    return piv, info


def _block_update(xp, a, k, herm):
    """The trailing update after a 2 x 2 pivot block at k (LAPACK's formulas)."""
    if herm:
        d = abs(a[k + 1, k])
        d11, d22 = a[k + 1, k + 1].real / d, a[k, k].real / d
        tt = 1 / (d11 * d22 - 1)
        d21 = a[k + 1, k] / d
        d = tt / d
        wk = d * (d11 * a[k + 2:, k] - d21 * a[k + 2:, k + 1])
        wkp1 = d * (d22 * a[k + 2:, k + 1] - d21.conj() * a[k + 2:, k])
        a[k + 2:, k + 2:] -= xp.outer(a[k + 2:, k], wk.conj()) + \
            xp.outer(a[k + 2:, k + 1], wkp1.conj())
        a[k + 2:, k], a[k + 2:, k + 1] = wk, wkp1
        idx = xp.arange(k + 2, a.shape[0])
        a[idx, idx] = a[idx, idx].real
        return
    d21 = a[k + 1, k]
    d11, d22 = a[k + 1, k + 1] / d21, a[k, k] / d21
    d21 = (1 / (d11 * d22 - 1)) / d21
    wk = d21 * (d11 * a[k + 2:, k] - a[k + 2:, k + 1])
    wkp1 = d21 * (d22 * a[k + 2:, k + 1] - a[k + 2:, k])
    a[k + 2:, k + 2:] -= xp.outer(a[k + 2:, k], wk) + xp.outer(a[k + 2:, k + 1], wkp1)
    a[k + 2:, k], a[k + 2:, k + 1] = wk, wkp1


def _sytrs(xp, ld, piv, b, herm):
    """Solve with _sytf2's factors (LAPACK's dsytrs/zsytrs, or zhetrs with `herm`, lower):
    b is overwritten with X."""
    n = ld.shape[0]
    cj = (lambda z: z.conj()) if herm else (lambda z: z)
    k = 0
    while k < n:  # L D Y = P^T B
        if piv[k] > 0:
            kp = piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            b[k + 1:] -= xp.outer(ld[k + 1:, k], b[k])
            b[k] /= ld[k, k].real if herm else ld[k, k]
            k += 1
        else:
            kp = -piv[k] - 1
            b[[k + 1, kp]] = b[[kp, k + 1]]
            b[k + 2:] -= xp.outer(ld[k + 2:, k], b[k]) + xp.outer(ld[k + 2:, k + 1], b[k + 1])
            akm1k = ld[k + 1, k]
            akm1, ak = ld[k, k] / cj(akm1k), ld[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1
            bkm1, bk = b[k] / cj(akm1k), b[k + 1] / akm1k
            b[k], b[k + 1] = (ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T P^T X = Y (L^H for herm)
        b[k] -= cj(ld[k + 1:, k]) @ b[k + 1:]
        if piv[k] > 0:
            kp = piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            b[k - 1] -= cj(ld[k + 1:, k - 1]) @ b[k + 1:]
            kp = -piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 2
    return b


@op("linalg_ldl_factor", n_out=3, differentiable=False, complex=True, layout="column_major")
def _ldl_factor(xp, A, *, hermitian):
    n = A.shape[-1]
    herm = hermitian and A.dtype.kind == "c"
    a = xp.tril(A.reshape((math.prod(A.shape[:-2]), n, n))).copy()  # (n may be 0)
    piv = xp.zeros(a.shape[:2], dtype=xp.int32)
    info = xp.zeros(a.shape[0], dtype=xp.int32)
    for i in range(a.shape[0]):  # pivoting is data dependent: one matrix at a time
        p, info[i] = _sytf2(xp, a[i], herm)
        piv[i] = p
    return xp.tril(a).reshape(A.shape), piv.reshape(A.shape[:-1]), info.reshape(A.shape[:-2])


@op("linalg_ldl_solve", differentiable=False, complex=True, layout="column_major")
def _ldl_solve(xp, LD, pivots, B, *, hermitian):
    n = LD.shape[-1]
    herm = hermitian and LD.dtype.kind == "c"
    batch = xp.broadcast_shapes(LD.shape[:-2], B.shape[:-2])
    size = math.prod(batch)  # (not -1 in reshape: n may be 0)
    ld = xp.broadcast_to(LD, batch + (n, n)).reshape(size, n, n)
    pv = xp.broadcast_to(pivots, batch + (n,)).reshape(size, n)
    b = xp.broadcast_to(B, batch + B.shape[-2:]).reshape((size,) + B.shape[-2:]).copy()
    for i in range(b.shape[0]):
        _sytrs(xp, ld[i], pv[i], b[i], herm)
    return b.reshape(batch + B.shape[-2:])


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    """(LD, pivots, info) of A = P L D L^T P^T (L D L^H for a complex A with `hermitian`;
    Bunch-Kaufman, LAPACK sytrf/hetrf's lower form): L unit lower below the diagonal of LD,
    D's 1 x 1 and 2 x 2 blocks on it, pivots 1-based (negative for a 2 x 2 block). Not
    differentiable, as torch's (a backward reaching LD raises); `hermitian` changes nothing
    for real matrices."""
    _square(A, "linalg.ldl_factor_ex")
    LD, pivots, info = _ldl_factor(A, hermitian=bool(hermitian))
    # (LD requires grad where A does and refuses a backward, as torch's)
    LD = without_derivative([LD], [A], "linalg_ldl_factor_ex", "RuntimeError")[0]
    if check_errors:
        message = "linalg.ldl_factor_ex: the factorization could not be completed: D is singular"
        check_info(info, RuntimeError, message, lambda: f"{message} (info = {info.tolist()})")
    return LDL_EX(LD, pivots, info)


def ldl_factor(A, *, hermitian=False):
    """(LD, pivots): ldl_factor_ex without info.

    >>> import flowgrad as flow
    >>> LD, pivots = flow.linalg.ldl_factor(flow.tensor([[4.0, 2.0], [2.0, 3.0]]))
    >>> LD, pivots
    (tensor([[4.0000, 0.0000],
            [0.5000, 2.0000]]), tensor([1, 2], dtype=flowgrad.int32))
    """
    LD, pivots, _ = ldl_factor_ex(A, hermitian=hermitian)
    return LDL(LD, pivots)


def ldl_solve(LD, pivots, B, *, hermitian=False):
    """X with A X = B from ldl_factor's result (not differentiable, as torch's); pass the
    `hermitian` the factorization used."""
    _square(LD, "linalg.ldl_solve")
    _matrix(B, "linalg.ldl_solve")
    if B._data.shape[-2] != LD._data.shape[-1]:
        raise RuntimeError(f"linalg.ldl_solve: Incompatible shapes of A and B for the equation "
                           f"AX = B ({tuple(LD.shape)} and {tuple(B.shape)})")
    return without_derivative([_ldl_solve(LD, pivots, B, hermitian=bool(hermitian))],
                              [LD, B], "linalg_ldl_solve", "RuntimeError")[0]
