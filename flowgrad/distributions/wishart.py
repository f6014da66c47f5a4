"""Wishart: the distribution of sum_i x_i x_i^T over `df` draws x_i ~ N(0, Sigma), given
Sigma as a covariance matrix, a precision matrix or a lower Cholesky factor `scale_tril`
(kept as the Cholesky factor, as torch). rsample follows the Bartlett decomposition, so
samples are differentiable in `df` (through Chi2 draws) and in Sigma.

>>> import flowgrad as flow
>>> d = Wishart(flow.tensor(3.0), covariance_matrix=flow.eye(2))
>>> d.log_prob(2 * flow.eye(2)), d.mean
(tensor(-4.5310), tensor([[3., 0.],
        [0., 3.]]))
"""
from __future__ import annotations

import math
import warnings

import flowgrad as flow

from ..tensor import Tensor
from . import constraints
from .distribution import lazy_property
from .exponential_family import ExponentialFamily
from .more import Chi2

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """The multivariate digamma: sum_{i < p} digamma(x - i / 2)."""
    return flow.digamma(x.unsqueeze(-1) - flow.arange(p, dtype=x.dtype) / 2).sum(-1)


def _precision_to_scale_tril(P):
    # L with L L^T = P^-1 without forming P^-1: the Cholesky factor of P with its rows and
    # columns reversed is the inverse transpose of L reversed
    Lf = flow.linalg.cholesky(flow.flip(P, (-2, -1)))
    L_inv = flow.flip(Lf, (-2, -1)).mT
    eye = flow.eye(P.shape[-1], dtype=P.dtype)
    return flow.linalg.solve_triangular(L_inv, eye, upper=False)


class Wishart(ExponentialFamily):
    """Wishart over p x p positive definite matrices with `df` > p - 1 degrees of freedom and
    scale Sigma: give exactly one of `covariance_matrix`, `precision_matrix`, `scale_tril`."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            # (torch raises AssertionError here)
            raise AssertionError("Wishart: exactly one of covariance_matrix or "
                                 "precision_matrix or scale_tril may be specified.")
        param = given[0]
        if param.dim() < 2:
            raise ValueError("Wishart: scale_tril, covariance_matrix or precision_matrix must "
                             "be at least two-dimensional, with optional leading batch "
                             "dimensions")
        if isinstance(df, Tensor):
            batch = tuple(flow.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(batch)
        else:
            batch = tuple(param.shape[:-2])
            self.df = flow.tensor(float(df), dtype=param.dtype).expand(batch)
        p = param.shape[-1]
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Wishart: value of df={df} expected to be greater than "
                             f"ndim - 1 = {p - 1}.")
        name = "scale_tril" if scale_tril is not None else \
            "covariance_matrix" if covariance_matrix is not None else "precision_matrix"
        setattr(self, name, param.expand(*batch, p, p))
        if bool((self.df < p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to "
                          "occur for ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch, (p, p), validate_args=validate_args)  # validates first
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = flow.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(batch_shape)
        shape = (*batch_shape, *self._event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(shape)
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "precision_matrix", "scale_tril"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(shape)
        return new

    def _matrix_shape(self):
        return (*self._batch_shape, *self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        eye = flow.eye(self._event_shape[-1], dtype=L.dtype)
        return flow.cholesky_solve(eye, L).expand(self._matrix_shape())

    def _df_matrix(self):
        return self.df.reshape(*self._batch_shape, 1, 1)

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self._event_shape[-1] - 1
        factor = flow.where(factor <= 0, flow.full_like(factor, math.nan), factor)
        return factor.reshape(*self._batch_shape, 1, 1) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        diag = V.diagonal(0, -2, -1)
        return self._df_matrix() * (V ** 2 + diag.unsqueeze(-1) * diag.unsqueeze(-2))

    def _bartlett_sample(self, sample_shape):
        # Sigma^1/2 A A^T Sigma^1/2 with A lower triangular: A_ii^2 ~ Chi2(df - i), A_ij ~ N(0, 1)
        p, dtype = self._event_shape[-1], self._unbroadcasted_scale_tril.dtype
        chi2_df = self.df.unsqueeze(-1) - flow.arange(p, dtype=dtype)
        chi2 = Chi2(chi2_df.expand(*self._batch_shape, p), validate_args=False)
        diagonal = chi2.rsample(sample_shape).sqrt().clamp(min=flow.finfo(dtype).eps)
        below = flow.randn(*sample_shape, *self._batch_shape, p, p, dtype=dtype)
        chol = self._unbroadcasted_scale_tril @ (flow.diag_embed(diagonal) + below.tril(-1))
        return chol @ chol.mT

    def rsample(self, sample_shape=(), max_try_correction=None):
        """Samples by the Bartlett decomposition; a sample that is numerically singular (likely
        when df < p) is drawn again, up to `max_try_correction` (default 10) times, and may
        remain singular (log_prob -inf) after that."""
        max_try_correction = 10 if max_try_correction is None else max_try_correction
        sample_shape = tuple(sample_shape)
        sample = self._bartlett_sample(sample_shape)
        singular = ~self.support.check(sample.detach())
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                redrawn = self._bartlett_sample(sample_shape)
                sample = flow.where(singular.unsqueeze(-1).unsqueeze(-1), redrawn, sample)
                singular = ~self.support.check(sample.detach())
                if not bool(singular.any()):
                    break
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu, p, L = self.df, self._event_shape[-1], self._unbroadcasted_scale_tril
        log_det_L = L.diagonal(0, -2, -1).log().sum(-1)
        trace = flow.cholesky_solve(value, L).diagonal(0, -2, -1).sum(-1)
        return -nu * (p * _LOG_2 / 2 + log_det_L) - flow.mvlgamma(nu / 2, p=p) \
            + (nu - p - 1) / 2 * flow.linalg.slogdet(value).logabsdet - trace / 2

    def entropy(self):
        nu, p, L = self.df, self._event_shape[-1], self._unbroadcasted_scale_tril
        log_det_L = L.diagonal(0, -2, -1).log().sum(-1)
        return (p + 1) * (p * _LOG_2 / 2 + log_det_L) + flow.mvlgamma(nu / 2, p=p) \
            - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2

    @property
    def _natural_params(self):
        return -self.precision_matrix / 2, (self.df - self._event_shape[-1] - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-flow.linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p) \
            + flow.mvlgamma(y + (p + 1) / 2, p=p)
