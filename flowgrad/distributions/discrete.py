"""Discrete distributions: Bernoulli, Categorical, OneHotCategorical, Poisson, Binomial.
Those given `probs` or `logits` compute the other lazily, as torch.

>>> import flowgrad as flow
>>> d = Categorical(logits=flow.tensor([0.0, 1.0, 2.0]))
>>> d.log_prob(flow.tensor(2))
tensor(-0.4076)
"""
from __future__ import annotations

import flowgrad as flow

from ..ops.sampling import binomial, poisson
from . import constraints
from .distribution import (
    Distribution,
    broadcast_all,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
)
from .exponential_family import ExponentialFamily

__all__ = ["Bernoulli", "Categorical", "OneHotCategorical", "Poisson", "Binomial"]


def _one_of(distribution, probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError(f"{type(distribution).__name__}: Either `probs` or `logits` must be "
                         f"specified, but not both.")


class _BinaryParams(Distribution):
    """`probs` and `logits` of a success probability, each computed from the other."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)


class _ProbsOrLogits(_BinaryParams):
    """A distribution of one success probability, given as `probs` or `logits`."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(self, probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            shape = self.probs.shape
        else:
            (self.logits,) = broadcast_all(logits)
            shape = self.logits.shape
        super().__init__(shape, validate_args=validate_args)


class Bernoulli(_ProbsOrLogits, ExponentialFamily):
    """1 with probability `probs` (or sigmoid(`logits`)), else 0."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0
    _natural_params = property(lambda self: (flow.logit(self.probs),))

    def _log_normalizer(self, x):
        return flow.log1p(flow.exp(x))

    param_shape = property(lambda self: self._batch_shape)
    mean = property(lambda self: self.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return flow.where(self.probs == 0.5, flow.full_like(mode, float("nan")), mode)

    def sample(self, sample_shape=()):
        probs = self.probs  # outside no_grad: a lazy property is cached with its history
        with flow.no_grad():
            return flow.bernoulli(probs.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = flow.broadcast_tensors(self.logits, value.to(self.logits.dtype))
        return -flow.nn.functional.binary_cross_entropy_with_logits(logits, value,
                                                                    reduction="none")

    def entropy(self):
        return flow.nn.functional.binary_cross_entropy_with_logits(
            self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = flow.arange(2, dtype=self._param.dtype).reshape(
            (-1,) + (1,) * len(self._batch_shape))
        return values.expand(-1, *self._batch_shape) if expand else values

    @property
    def _param(self):
        return self.__dict__.get("probs", self.__dict__.get("logits"))


class Categorical(Distribution):
    """One of K classes, with probabilities `probs` (normalised) or `logits` (..., K)."""

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(self, probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    param_shape = property(lambda self: self._param.shape)
    mean = property(lambda self: flow.full(self._extended_shape(), float("nan"),
                                           dtype=self._param.dtype))
    variance = mean
    mode = property(lambda self: self.probs.argmax(-1))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = self.probs  # outside no_grad: a lazy property is cached with its history
        with flow.no_grad():
            probs_2d = probs.reshape(-1, self._num_events)
            n = max(1, int(flow.Size(sample_shape).numel()))
            draws = flow.multinomial(probs_2d, n, True).T
            return draws.reshape(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = flow.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=flow.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = flow.arange(self._num_events).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(-1, *self._batch_shape) if expand else values


class OneHotCategorical(Distribution):
    """A Categorical whose samples are one-hot vectors (..., K)."""

    arg_constraints = Categorical.arg_constraints
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(batch_shape, _instance=_instance)
        new._categorical = self._categorical.expand(batch_shape)
        return new

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self._categorical.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def mode(self):
        probs = self._categorical.probs
        return flow.nn.functional.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)

    def sample(self, sample_shape=()):
        probs = self._categorical.probs
        idx = self._categorical.sample(sample_shape)
        return flow.nn.functional.one_hot(idx, probs.shape[-1]).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self._event_shape[0]
        values = flow.eye(n, dtype=self.probs.dtype).reshape((n,) + (1,) * len(self.batch_shape)
                                                             + (n,))
        return values.expand(n, *self._batch_shape, n) if expand else values


class Poisson(ExponentialFamily):
    """Counts with mean `rate`."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer
    _natural_params = property(lambda self: (self.rate.log(),))

    def _log_normalizer(self, x):
        return x.exp()

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    mean = property(lambda self: self.rate)
    variance = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())

    def sample(self, sample_shape=()):
        with flow.no_grad():
            return poisson(self.rate.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = flow.broadcast_tensors(self.rate, value.to(self.rate.dtype))
        return flow.xlogy(value, rate) - rate - flow.lgamma(value + 1)


def _clamp_by_zero(x):
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(_BinaryParams):
    """Successes in `total_count` trials of probability `probs` (or sigmoid(`logits`))."""

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of(self, probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
        param = self.__dict__.get("probs", self.__dict__.get("logits"))
        super().__init__(param.shape, validate_args=validate_args)


    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    mean = property(lambda self: self.total_count * self.probs)
    mode = property(lambda self: ((self.total_count + 1) * self.probs).floor()
                    .clamp(max=self.total_count))
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = self.probs  # outside no_grad: a lazy property is cached with its history
        with flow.no_grad():
            return binomial(self.total_count.expand(shape), probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        normalize = n * _clamp_by_zero(logits) + n * flow.log1p(flow.exp(-logits.abs())) \
            - flow.lgamma(n + 1)
        return value * logits - flow.lgamma(value + 1) - flow.lgamma(n - value + 1) \
            - normalize

    def entropy(self):
        n = int(self.total_count.max())
        if not int(self.total_count.min()) == n:
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(flow.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        n = int(self.total_count.max())
        if not int(self.total_count.min()) == n:
            raise NotImplementedError("Inhomogeneous total count not supported by "
                                      "`enumerate_support`.")
        values = flow.arange(1 + n, dtype=self.total_count.dtype).reshape(
            (-1,) + (1,) * len(self._batch_shape))
        return values.expand(-1, *self._batch_shape) if expand else values
