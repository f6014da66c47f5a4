"""Count distributions: Multinomial (counts of `total_count` draws among K categories) and
NegativeBinomial (successes before `total_count` failures, drawn as a Gamma-Poisson mixture).

>>> import flowgrad as flow
>>> Multinomial(4, probs=flow.ones(4)).log_prob(flow.tensor([1.0, 2.0, 0.0, 1.0]))
tensor(-3.0603)
>>> NegativeBinomial(flow.tensor(3.0), probs=flow.tensor(0.5)).mean
tensor(3.)
"""
from __future__ import annotations

import math

import flowgrad as flow

from ..ops.sampling import poisson
from . import constraints
from .continuous import Gamma
from .discrete import Binomial, Categorical, _BinaryParams, _one_of
from .distribution import Distribution, broadcast_all

__all__ = ["Multinomial", "NegativeBinomial"]


class Multinomial(Distribution):
    """Counts (..., K) of `total_count` draws among K categories with probabilities `probs`
    (normalised) or softmax(`logits`). log_prob reads each value's own total, so
    `total_count` matters only to sample, entropy and the moments."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError(
                f"inhomogeneous total_count is not supported: Multinomial takes one int "
                f"total_count, got {type(total_count).__name__}; log_prob works with "
                f"Multinomial(probs=...) alone for counts of any total")
        self.total_count = total_count
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = self.probs
        if self.total_count == 0:
            return flow.zeros(*shape, dtype=probs.dtype)
        draws = self._categorical.sample((self.total_count, *sample_shape)).movedim(0, -1)
        counts = flow.zeros(*shape, dtype=draws.dtype)
        return counts.scatter_add(-1, draws, flow.ones_like(draws)).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = flow.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        # an impossible category (logit -inf) counted zero times contributes 0, not nan
        impossible = (value == 0) & (logits == -math.inf)
        logits = flow.where(impossible, flow.zeros_like(logits), logits)
        return flow.lgamma(value.sum(-1) + 1) - flow.lgamma(value + 1).sum(-1) \
            + (logits * value).sum(-1)

    def entropy(self):
        # H = n H(categorical) - log n! + sum_i E[log x_i!], each x_i ~ Binomial(n, p_i)
        n = self.total_count
        binomial = Binomial(n, probs=self.probs, validate_args=False)
        counts = binomial.enumerate_support(expand=False)[1:]
        expected_log_factorials = (binomial.log_prob(counts).exp()
                                   * flow.lgamma(counts + 1)).sum((0, -1))
        return n * self._categorical.entropy() - math.lgamma(n + 1) + expected_log_factorials


class NegativeBinomial(_BinaryParams):
    """The number of successes before `total_count` failures, each trial a success with
    probability `probs` (or sigmoid(`logits`)); `total_count` may be any real >= 0."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        _one_of(self, probs, logits)
        if probs is not None:
            total_count, self.probs = broadcast_all(total_count, probs)
            param = self.probs
        else:
            total_count, self.logits = broadcast_all(total_count, logits)
            param = self.logits
        self.total_count = total_count.to(param.dtype)
        super().__init__(param.shape, validate_args=validate_args)

    param_shape = property(lambda self: self._batch_shape)
    mean = property(lambda self: self.total_count * self.logits.exp())
    mode = property(lambda self: ((self.total_count - 1) * self.logits.exp()).floor()
                    .clamp(min=0.0))
    variance = property(lambda self: self.mean / flow.sigmoid(-self.logits))

    def sample(self, sample_shape=()):
        rate = (-self.logits).exp()  # outside no_grad: a lazy logits is cached with its history
        with flow.no_grad():
            # total_count may be 0, which a validated Gamma refuses
            gamma = Gamma(self.total_count, rate, validate_args=False)
            return poisson(gamma.sample(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logsigmoid = flow.nn.functional.logsigmoid
        n = self.total_count
        unnormalized = n * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        normalization = flow.lgamma(1.0 + value) + flow.lgamma(n) - flow.lgamma(n + value)
        # total_count 0 puts all mass on 0, where lgamma(0) is infinite
        normalization = normalization.masked_fill(n + value == 0.0, 0.0)
        return unnormalized - normalization
