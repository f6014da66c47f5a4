"""LKJCholesky, as torch.distributions.LKJCholesky: a distribution over lower Cholesky factors
L of correlation matrices with density of L @ L.mT proportional to det(L @ L.mT) **
(concentration - 1); sampled by the onion method (Lewandowski, Kurowicka and Joe, 2009).

>>> import flowgrad as flow
>>> d = LKJCholesky(3, concentration=2.0)
>>> d.event_shape, d.sample((4,)).shape
(flowgrad.Size([3, 3]), flowgrad.Size([4, 3, 3]))
>>> d.log_prob(flow.eye(3))
tensor(-0.6155)
"""
from __future__ import annotations

import math

import flowgrad as flow

from . import constraints
from .continuous import Beta
from .distribution import Distribution, broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """LKJ over `dim` x `dim` correlation Cholesky factors; `concentration` (eta) 1 is uniform
    over correlation matrices, larger values favour the identity."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}. (LKJCholesky needs matrices of at least 2 x 2)")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        # onion method: row i's squared off-diagonal norm is Beta(i / 2, eta + (dim - 2 - i) / 2)
        marginal = self.concentration + 0.5 * (dim - 2)
        offset = flow.cat([flow.zeros(1, dtype=marginal.dtype),
                           flow.arange(dim - 1, dtype=marginal.dtype)])
        self._beta = Beta(offset + 0.5, marginal.unsqueeze(-1) - 0.5 * offset)
        super().__init__(self.concentration.shape, (dim, dim), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = flow.Size(batch_shape)
        new = self._expanded(batch_shape, _instance=_instance)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        return new

    def sample(self, sample_shape=()):
        with flow.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            tiny = flow.finfo(y.dtype).tiny
            u = flow.randn(*self._extended_shape(sample_shape), dtype=y.dtype).tril(-1)
            # each row a uniform direction; the first row is empty (0, not torch's 0 / 0)
            u = u / u.norm(dim=-1, keepdim=True).clamp(min=tiny)
            w = y.sqrt() * u
            diagonal = (1 - (w * w).sum(-1)).clamp(min=tiny).sqrt()
            return w + diagonal.diag_embed()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        # density of L: prod_i L_ii ** (2 (eta - 1) + dim - i) for rows i = 2..dim, the
        # second factor being the Jacobian from L to L @ L.mT
        diagonal = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        eta = self.concentration
        order = 2 * (eta - 1).unsqueeze(-1) + self.dim \
            - flow.arange(2, self.dim + 1, dtype=eta.dtype)
        unnormalized = (order * diagonal.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = eta + 0.5 * dm1
        # the normaliser of LKJ's paper (p. 1999), with mvlgamma's pi term made up to its
        log_normalizer = 0.5 * dm1 * math.log(math.pi) + flow.mvlgamma(alpha - 0.5, dm1) \
            - flow.lgamma(alpha) * dm1
        return unnormalized - log_normalizer
