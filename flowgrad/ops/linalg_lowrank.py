"""Randomized low-rank decompositions: torch's svd_lowrank and pca_lowrank (Halko, Martinsson
and Tropp 2009, Algorithms 4.4 and 5.1). lobpcg is in linalg_lobpcg.py.

Both are composed of differentiable ops (matmul, qr, svd), so gradients come from those ops'
rules; no op of their own is registered. The random projection is drawn from flowgrad's
global generator, whose stream is not torch's: results equal torch's where the answer does not
depend on the draw (a matrix of rank at most q), and agree with it as an approximation
otherwise. A sparse COO input (flowgrad.sparse_coo_tensor) is multiplied through
flowgrad.sparse.mm, never densified.

>>> import flowgrad as flow
>>> _ = flow.manual_seed(0)
>>> A = flow.randn(5, 2, dtype=flow.float64) @ flow.randn(2, 4, dtype=flow.float64)
>>> U, S, V = flow.svd_lowrank(A, q=2)
>>> bool(flow.allclose(U @ flow.diag(S) @ V.mT, A))
True
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..sparse import SparseTensor
from ..sparse import mm as _sparse_mm
from ..tensor import Tensor
from .creation import ones
from .linalg import matmul
from .linalg_decomp import qr, svd
from .linalg_lobpcg import lobpcg
from .random_factories import randn

__all__ = ["svd_lowrank", "pca_lowrank", "lobpcg"]


def _is_sparse(A):
    if isinstance(A, SparseTensor):
        return True
    if isinstance(A, Tensor):
        return False
    raise TypeError(f"expected Tensor but got {type(A)}")


def _floating_dtype(A):
    """torch's rule for the draw's dtype: half, float and double stay, the rest is float32."""
    return A.dtype if A.dtype in (_dt.float16, _dt.float32, _dt.float64) else _dt.float32


def _mm(A, B):
    """A @ B where A may be sparse COO (B is dense)."""
    return _sparse_mm(A, B) if _is_sparse(A) else matmul(A, B)


def _adjoint(A):
    if _is_sparse(A):
        At = A.transpose(-2, -1)
        return At.conj() if A.dtype.is_complex else At
    return A.mH


def _approximate_basis(A, q, niter, M):
    """Q with q orthonormal columns such that Q Q^H (A - M) approximates A - M (Algorithm 4.4:
    a random range finder refined by niter power iterations, each re-orthonormalised by QR so
    that the small singular directions are not lost to rounding)."""
    niter = 2 if niter is None else niter
    dtype = A.dtype if A.dtype.is_complex else _floating_dtype(A)
    R = randn(A.shape[-1], q, dtype=dtype, device=A.device)

    def times(X, Y, adjoint=False):  # (A - M) @ Y or (A - M)^H @ Y without forming A - M
        out = _mm(_adjoint(X) if adjoint else X, Y)
        if M is not None:
            out = out - matmul(M.mH if adjoint else M, Y)
        return out

    Q = qr(times(A, R)).Q
    for _ in range(niter):
        Q = qr(times(A, Q, adjoint=True)).Q
        Q = qr(times(A, Q)).Q
    return Q


def _svd_lowrank(A, q, niter, M):
    q = 6 if q is None else q
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(tuple(A.size()))
    tall = m >= n
    if not tall:  # the algorithm takes a tall matrix; a wide one is done as its adjoint
        A = _adjoint(A)
        M = None if M is None else M.mH
    Q = _approximate_basis(A, q, niter, M)
    # Q^H A; for a sparse A as (A^H Q)^H, so that the sparse factor stays on the left
    B = _mm(_adjoint(A), Q).mH if _is_sparse(A) else matmul(Q.mH, A)
    if M is not None:
        B = B - matmul(Q.mH, M)
    U, S, Vh = svd(B, full_matrices=False)
    U, V = matmul(Q, U), Vh.mH
    return (U, S, V) if tall else (V, S, U)


def svd_lowrank(A, q=6, niter=2, M=None):
    r"""A rank-q approximate SVD `(U, S, V)` of A (or of A - M), A ~= U diag(S) V^H, by a
    random projection and `niter` subspace iterations; torch.svd_lowrank.

    A is (*, m, n), dense or sparse COO; M (broadcast to A's shape) is subtracted without
    forming A - M. U is (*, m, q), S (*, q), V (*, n, q). Draws from the global generator:
    seed it (flowgrad.manual_seed) for repeatable results.

    >>> import flowgrad as flow
    >>> _ = flow.manual_seed(0)
    >>> A = flow.randn(6, 3, dtype=flow.float64) @ flow.randn(3, 5, dtype=flow.float64)
    >>> U, S, V = flow.svd_lowrank(A, q=3)
    >>> U.shape, S.shape, V.shape
    (flowgrad.Size([6, 3]), flowgrad.Size([3]), flowgrad.Size([5, 3]))
    >>> bool(flow.allclose(S, flow.linalg.svdvals(A)[:3]))
    True
    """
    return _svd_lowrank(A, q, niter, M)


def pca_lowrank(A, q=None, center=True, niter=2):
    r"""Principal component analysis of a (batch of) data matrix A (*, m, n), m samples of n
    features: `(U, S, V)` of a rank-q approximate SVD of A with its column means removed
    (center=True). V's columns are the principal directions, S**2 / (m - 1) the variances
    along them; torch.pca_lowrank.

    q defaults to min(6, m, n) and must lie in [0, min(m, n)]; niter must be >= 0. A sparse
    COO A (2-D) is centred without densifying it.

    >>> import flowgrad as flow
    >>> _ = flow.manual_seed(0)
    >>> X = flow.randn(50, 2, dtype=flow.float64) @ flow.randn(2, 4, dtype=flow.float64)
    >>> U, S, V = flow.pca_lowrank(X + 3.0, q=2)
    >>> bool(flow.allclose(S, flow.linalg.svdvals(X - X.mean(0))[:2]))
    True
    """
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not (q >= 0 and q <= min(m, n)):
        raise ValueError(f"pca_lowrank: q(={q}) must be non-negative integer and not greater "
                         f"than min(m, n)={min(m, n)}")
    if not (niter >= 0):
        raise ValueError(f"pca_lowrank: niter(={niter}) must be non-negative integer")
    if not center:
        return _svd_lowrank(A, q, niter, None)
    if _is_sparse(A):
        if len(A.shape) != 2:
            raise ValueError("pca_lowrank input is expected to be 2-dimensional tensor, got "
                             f"a sparse tensor of shape {tuple(A.shape)}")
        # the column means as a dense (m, n) M, which svd_lowrank subtracts on the fly
        dtype = _floating_dtype(A)
        ones_ = ones(m, 1, dtype=dtype, device=A.device)
        means = _mm(A.transpose(0, 1), ones_).to(dtype) / m  # (n, 1)
        M = matmul(ones_, means.mT)
        return _svd_lowrank(A, q, niter, M)
    C = A.mean(dim=(-2,), keepdim=True)
    return _svd_lowrank(A - C, q, niter, None)
