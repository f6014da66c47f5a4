"""LowRankMultivariateNormal: a Gaussian whose covariance is `cov_factor @ cov_factor.mT +
diag(cov_diag)`. log_prob and entropy use the m x m capacitance matrix
C = I + W^T D^-1 W (m the rank), never the n x n covariance: the Woodbury identity for the
inverse and the matrix determinant lemma for the log determinant. KL divergences with itself
and with MultivariateNormal are registered here.

>>> import flowgrad as flow
>>> d = LowRankMultivariateNormal(flow.zeros(2), flow.tensor([[1.0], [0.0]]), flow.ones(2))
>>> d.log_prob(flow.zeros(2)), d.covariance_matrix
(tensor(-2.1845), tensor([[2., 0.],
        [0., 1.]]))
"""
from __future__ import annotations

import math

import flowgrad as flow

from . import constraints
from .distribution import Distribution, lazy_property
from .kl import register_kl
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis

__all__ = ["LowRankMultivariateNormal"]


def _batch_mv(matrix, vector):
    return (matrix @ vector.unsqueeze(-1)).squeeze(-1)


def _batch_capacitance_tril(W, D):
    """The lower Cholesky factor of I + W^T D^-1 W, for factors W (..., n, m), diagonals D."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    return flow.linalg.cholesky(Wt_Dinv @ W + flow.eye(W.shape[-1], dtype=W.dtype))


def _batch_lowrank_logdet(W, D, capacitance_tril):
    """log |W W^T + D| = log |C| + log |D| (the matrix determinant lemma)."""
    return 2 * capacitance_tril.diagonal(0, -2, -1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    """x^T (W W^T + D)^-1 x by the Woodbury identity
    (W W^T + D)^-1 = D^-1 - D^-1 W C^-1 W^T D^-1."""
    Wt_Dinv_x = _batch_mv(W.mT / D.unsqueeze(-2), x)
    return (x ** 2 / D).sum(-1) - _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)


def _batch_trace_XXT(X):
    """trace(X X^T) over the last two dimensions."""
    return (X ** 2).sum((-2, -1))


class LowRankMultivariateNormal(Distribution):
    """Gaussian over vectors (..., n) with mean `loc` and covariance W W^T + diag(D), for
    `cov_factor` W (..., n, m) and `cov_diag` D (..., n) > 0."""

    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("LowRankMultivariateNormal: loc must be at least one-dimensional.")
        n = loc.shape[-1]
        if cov_factor.dim() < 2:
            raise ValueError("LowRankMultivariateNormal: cov_factor must be at least "
                             "two-dimensional, with optional leading batch dimensions")
        if cov_factor.shape[-2] != n:
            raise ValueError(f"LowRankMultivariateNormal: cov_factor must be a batch of "
                             f"matrices with shape {n} x m (loc has {n} entries), got shape "
                             f"{tuple(cov_factor.shape)}")
        if cov_diag.dim() < 1 or cov_diag.shape[-1] != n:
            raise ValueError(f"LowRankMultivariateNormal: cov_diag must be a batch of vectors "
                             f"with shape ({n},), got shape {tuple(cov_diag.shape)}")
        try:
            loc_, self.cov_factor, cov_diag_ = flow.broadcast_tensors(
                loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1))
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"LowRankMultivariateNormal: incompatible batch shapes: loc "
                             f"{tuple(loc.shape)}, cov_factor {tuple(cov_factor.shape)}, "
                             f"cov_diag {tuple(cov_diag.shape)}") from e
        self.loc, self.cov_diag = loc_[..., 0], cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        super().__init__(self.loc.shape[:-1], (n,), validate_args=validate_args)
        # after validation: a bad cov_diag is reported as such, not as a failed Cholesky
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(batch_shape)
        shape = (*batch_shape, *self._event_shape)
        new.loc, new.cov_diag = self.loc.expand(shape), self.cov_diag.expand(shape)
        new.cov_factor = self.cov_factor.expand(*shape, self.cov_factor.shape[-1])
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        return new

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    def _matrix_shape(self):
        return (*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def variance(self):
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return ((W ** 2).sum(-1) + D).expand((*self._batch_shape, *self._event_shape))

    @lazy_property
    def scale_tril(self):
        # W W^T + D = D^1/2 (I + D^-1/2 W W^T D^-1/2) D^1/2: the middle factor has eigenvalues
        # at least 1, so its Cholesky factorisation is well conditioned
        n = self._event_shape[0]
        D_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / D_sqrt
        K = Dinvsqrt_W @ Dinvsqrt_W.mT + flow.eye(n, dtype=Dinvsqrt_W.dtype)
        return (D_sqrt * flow.linalg.cholesky(K)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        covariance = W @ W.mT + flow.diag_embed(self._unbroadcasted_cov_diag)
        return covariance.expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        # Woodbury: (W W^T + D)^-1 = D^-1 - A^T A with A = L_C^-1 W^T D^-1
        D = self._unbroadcasted_cov_diag
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / D.unsqueeze(-2)
        A = flow.linalg.solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        precision = flow.diag_embed(D.reciprocal()) - A.mT @ A
        return precision.expand(self._matrix_shape())

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps_W = flow.randn(*shape[:-1], self.cov_factor.shape[-1], dtype=self.loc.dtype)
        eps_D = flow.randn(*shape, dtype=self.loc.dtype)
        return self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_W) \
            + self._unbroadcasted_cov_diag.sqrt() * eps_D

    def _log_det(self):
        return _batch_lowrank_logdet(self._unbroadcasted_cov_factor,
                                     self._unbroadcasted_cov_diag, self._capacitance_tril)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        M = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor,
                                       self._unbroadcasted_cov_diag, value - self.loc,
                                       self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + M)

    def entropy(self):
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return H.expand(self._batch_shape) if len(self._batch_shape) else H


def _check_event_shapes(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two (Low Rank) Multivariate Normals with "
                         f"different event shapes ({tuple(p.event_shape)} and "
                         f"{tuple(q.event_shape)}) cannot be computed")


def _woodbury_factor(q):
    """A = L_C^-1 W^T D^-1 of q, so that q's precision is D^-1 - A^T A."""
    Wt_Dinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return flow.linalg.solve_triangular(q._capacitance_tril, Wt_Dinv, upper=False)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    _check_event_shapes(p, q)
    log_det_ratio = q._log_det() - p._log_det()
    mahalanobis = _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor,
                                             q._unbroadcasted_cov_diag, q.loc - p.loc,
                                             q._capacitance_tril)
    # trace(q_cov^-1 p_cov) = trace((qD^-1 - A^T A) (pD + pW pW^T)), expanded in four terms
    A = _woodbury_factor(q)
    p_W, p_D, q_D = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, \
        q._unbroadcasted_cov_diag
    trace = (p_D / q_D).sum(-1) + _batch_trace_XXT(p_W * q_D.rsqrt().unsqueeze(-1)) \
        - _batch_trace_XXT(A * p_D.sqrt().unsqueeze(-2)) - _batch_trace_XXT(A @ p_W)
    return 0.5 * (log_det_ratio + trace + mahalanobis - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p, q):
    _check_event_shapes(p, q)
    p_L = p._unbroadcasted_scale_tril
    log_det_ratio = q._log_det() - 2 * p_L.diagonal(0, -2, -1).log().sum(-1)
    mahalanobis = _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor,
                                             q._unbroadcasted_cov_diag, q.loc - p.loc,
                                             q._capacitance_tril)
    # trace(q_cov^-1 p_cov) = trace((qD^-1 - A^T A) p_L p_L^T)
    A = _woodbury_factor(q)
    trace = _batch_trace_XXT(p_L * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1)) \
        - _batch_trace_XXT(A @ p_L)
    return 0.5 * (log_det_ratio + trace + mahalanobis - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p, q):
    _check_event_shapes(p, q)
    q_L = q._unbroadcasted_scale_tril
    log_det_ratio = 2 * q_L.diagonal(0, -2, -1).log().sum(-1) - p._log_det()
    mahalanobis = _batch_mahalanobis(q_L, q.loc - p.loc)
    # trace(q_cov^-1 p_cov) = |q_L^-1 pW|^2 + |q_L^-1 pD^1/2|^2 (Frobenius norms)
    n, m = p.event_shape[0], p.cov_factor.shape[-1]
    batch = flow.broadcast_shapes(tuple(q_L.shape[:-2]),
                                  tuple(p._unbroadcasted_cov_factor.shape[:-2]))
    q_L = q_L.expand(*batch, n, n)
    p_W = p._unbroadcasted_cov_factor.expand(*batch, n, m)
    p_D_sqrt = flow.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(*batch, n, n)
    trace = _batch_trace_XXT(flow.linalg.solve_triangular(q_L, p_W, upper=False)) \
        + _batch_trace_XXT(flow.linalg.solve_triangular(q_L, p_D_sqrt, upper=False))
    return 0.5 * (log_det_ratio + trace + mahalanobis - n)
