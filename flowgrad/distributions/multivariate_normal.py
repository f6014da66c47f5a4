"""MultivariateNormal, parametrised by a covariance, a precision or a lower Cholesky factor
(kept as `scale_tril`; log_prob solves with it, as torch).

>>> import flowgrad as flow
>>> d = MultivariateNormal(flow.zeros(2), flow.eye(2))
>>> d.log_prob(flow.zeros(2))
tensor(-1.8379)
"""
from __future__ import annotations

import math

import flowgrad as flow

from . import constraints
from .distribution import Distribution, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mahalanobis(L, x):
    """|| L^{-1} x ||^2 over the last dimension, L and x broadcast."""
    shape = flow.broadcast_shapes(tuple(L.shape[:-2]), tuple(x.shape[:-1]))
    L = L.expand((*shape, *L.shape[-2:]))
    x = x.expand(*shape, x.shape[-1])
    y = flow.linalg.solve_triangular(L, x.unsqueeze(-1), upper=False).squeeze(-1)
    return (y * y).sum(-1)


class MultivariateNormal(Distribution):
    """Gaussian over vectors with mean `loc` (..., K)."""

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        matrix = given[0]
        if matrix.dim() < 2:
            raise ValueError("scale_tril, covariance_matrix or precision_matrix must be at "
                             "least two-dimensional, with optional leading batch dimensions")
        batch = flow.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        k = loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(*batch, k, k)
            tril = self.scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(*batch, k, k)
            tril = flow.linalg.cholesky(self.covariance_matrix)
        else:
            self.precision_matrix = precision_matrix.expand(*batch, k, k)
            tril = flow.linalg.cholesky(flow.linalg.inv(self.precision_matrix))
        self.loc = loc.expand(*batch, k)
        self._unbroadcasted_scale_tril = tril
        super().__init__(batch, (k,), validate_args=validate_args)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return L @ L.mT

    @lazy_property
    def precision_matrix(self):
        return flow.cholesky_inverse(self._unbroadcasted_scale_tril)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        return (self._unbroadcasted_scale_tril ** 2).sum(-1).expand(
            (*self._batch_shape, *self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = flow.randn(*shape, dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) \
            - self._half_log_det()

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(self._batch_shape) if len(self._batch_shape) else h
