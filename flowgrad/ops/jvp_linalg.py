"""Forward-mode (JVP) rules of the matrix decompositions and of logcumsumexp, torch's
formulas (FunctionsManual.cpp: `linalg_qr_jvp`, `linalg_svd_jvp`, `linalg_eig_jvp`).

Their reverse rules divide by eigenvalue or singular-value gaps and branch on the sign of the
cotangent, so the JVP derived from them (double vjp at a zero cotangent) is costly and, for
logcumsumexp, zero. Rules have `jvp_rules`' signature and are written in flowgrad ops, so an
outer transform differentiates or batches them.
"""
from __future__ import annotations

from .. import dtypes as _dt
from .creation import eye
from .diag import tril, triu
from .elementwise import where
from .linalg_solve import solve_triangular
from .shape import cat


def _eye(n, like):
    return eye(n, dtype=like.dtype, device=like.device)


def _diag(X):
    return X.diagonal(0, -2, -1)


def _diag_embed(v):
    return v.unsqueeze(-1) * _eye(v.shape[-1], v)


def _qr(op, inputs, outs, tans, attrs, aux):
    """A = QR: with m >= n, dR R^-1 is upper triangular and Q^T dQ skew, so
    dR = syminv(sym(Q^T dA R^-1)) R and dQ = dA R^-1 - Q dR R^-1; with m < n, Q^T dQ is
    recovered from the leading square block of R."""
    (A,), (Q, R), (dA,) = inputs, outs, tans
    m, n = A.shape[-2], A.shape[-1]
    if attrs["mode"] == "r":
        raise RuntimeError("linalg.qr: The derivative of linalg.qr depends on Q, which is not "
                           "computed when mode='r'. Please use linalg.qr(A, mode='reduced') if "
                           "you are going to differentiate through linalg.qr.")
    if attrs["mode"] == "complete" and m > n:
        raise RuntimeError("linalg.qr: The QR decomposition is not differentiable when "
                           "mode='complete' and nrows > ncols.")
    if m >= n:
        dARinv = solve_triangular(R, dA, upper=True, left=False)
        X = Q.mT @ dARinv
        X = X + X.mT
        dR = triu(X) - _diag_embed(_diag(X) * 0.5)
        return dARinv - Q @ dR, dR @ R
    QtdA = Q.mT @ dA
    X = tril(solve_triangular(R[..., :m], QtdA[..., :m], upper=True, left=False), -1)
    dQ = X - X.mT
    return Q @ dQ, QtdA - dQ @ R


def _svd(op, inputs, outs, tans, attrs, aux):
    """dS = diag(U^T dA V); dU, dVh from sym(dX S) / E and sym(S dX) / E, E_jk = s_k^2 - s_j^2,
    plus the parts outside U's (V's) span for tall (wide) A; full_matrices' extra columns
    (rows) get zero tangents, as torch's."""
    (A,), (U, S, Vh), (dA,) = inputs, outs, tans
    m, n, k = A.shape[-2], A.shape[-1], S.shape[-1]
    if k == 0:  # an empty A: full_matrices' U or Vh is a non-empty identity, tangent 0
        return U * 0, S * 0, Vh * 0
    full = U.shape[-1] != k or Vh.shape[-2] != k
    if full:
        U, Vh = U[..., :k], Vh[..., :k, :]
    V = Vh.mT
    dP = U.mT @ (dA @ V) if m < n else (U.mT @ dA) @ V
    dS = _diag(dP)
    dX = dP - _diag_embed(dS)
    s2 = S * S
    E = s2.unsqueeze(-2) - s2.unsqueeze(-1) + _eye(k, S)  # the diagonal: 0 / 1
    XS = dX * S.unsqueeze(-2)
    dU = U @ ((XS + XS.mT) / E)
    if m > n:
        dAVSinv = dA @ (V / S.unsqueeze(-2))
        dU = dU + dAVSinv - U @ (U.mT @ dAVSinv)
        if full:
            dU = cat([dU, (dU[..., :1] * 0).expand(*dU.shape[:-1], m - n)], -1)
    SX = dX * (-S).unsqueeze(-1)
    dVh = ((SX + SX.mT) / E) @ Vh
    if m < n:
        UtdASinv = (U.mT / S.unsqueeze(-1)) @ dA
        dVh = dVh + UtdASinv - (UtdASinv @ V) @ Vh
        if full:
            dVh = cat([dVh, (dVh[..., :1, :] * 0).expand(*dVh.shape[:-2], n - m, n)], -2)
    return dU, dS, dVh


def _eigh(op, inputs, outs, tans, attrs, aux):
    """dP = V^T dA V: dL = diag(dP), dV = V (dP / E) off the diagonal, E_ij = l_j - l_i.
    As torch's, dA is taken as given (assumed symmetric), not read from one triangle."""
    (L, V), (dA,) = outs, tans
    dP = V.mT @ dA @ V
    eye_n = _eye(L.shape[-1], L)
    E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye_n
    return _diag(dP), V @ (dP * (1.0 - eye_n) / E)


def _logcumsumexp(op, inputs, outs, tans, attrs, aux):
    """dy_i = sum_{j <= i} exp(x_j - y_i) t_j, split by the sign of t so each part is a
    logcumsumexp of x + log|t| (the reverse rule's scheme, stable for any |x|)."""
    (x,), (y,), (t,) = inputs, outs, tans
    lowest = float(_dt.finfo(x.dtype).min)  # log 0 without -inf - -inf = nan downstream
    log_abs = t.abs().log()
    pos, neg = where(t > 0, log_abs, lowest), where(t < 0, log_abs, lowest)
    return (op(x + pos, **attrs) - y).exp() - (op(x + neg, **attrs) - y).exp()


RULES = {"linalg_qr": _qr, "linalg_svd": _svd, "linalg_eigh": _eigh,
         "logcumsumexp": _logcumsumexp}
