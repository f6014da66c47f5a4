"""Continuous distributions with one-dimensional events: Normal, Uniform, Exponential,
Laplace, Gamma; and Beta, Dirichlet (drawn through Gamma samples, so rsample is
differentiable in the concentrations by implicit reparameterisation).

>>> import flowgrad as flow
>>> d = Normal(flow.tensor([0.0, 1.0]), flow.tensor([1.0, 2.0]))
>>> d.log_prob(flow.tensor([0.0, 1.0]))
tensor([-0.9189, -1.6121])
"""
from __future__ import annotations

import math

import flowgrad as flow

from ..ops.sampling import standard_gamma
from . import constraints
from .distribution import LOG_SQRT_2PI, Distribution, broadcast_all
from .exponential_family import ExponentialFamily

__all__ = ["Normal", "Uniform", "Exponential", "Laplace", "Gamma", "Beta", "Dirichlet"]


def _noise(fn, shape, like):
    return fn(*shape, dtype=like.dtype) if shape else fn(1, dtype=like.dtype).reshape(())


class _LocScale(Distribution):
    """What Normal and Laplace share: a real location and a positive scale."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)


class Normal(_LocScale, ExponentialFamily):
    """Gaussian with mean `loc` and standard deviation `scale`. See the module example."""

    _mean_carrier_measure = 0
    _natural_params = property(lambda self: (self.loc / self.scale ** 2, -0.5 / self.scale ** 2))

    def _log_normalizer(self, x, y):
        return -0.25 * x ** 2 / y + 0.5 * flow.log(-math.pi / y)

    stddev = property(lambda self: self.scale)
    variance = property(lambda self: self.scale ** 2)

    def sample(self, sample_shape=()):
        """Draw samples (no gradient; a forward-mode tangent of zeros, as torch's normal)."""
        shape = self._extended_shape(sample_shape)
        with flow.no_grad():
            return flow.normal(self.loc.expand(shape), self.scale.expand(shape))

    def rsample(self, sample_shape=()):
        eps = _noise(flow.randn, self._extended_shape(sample_shape), self.loc)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() \
            - LOG_SQRT_2PI

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + flow.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return self.loc + self.scale * flow.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class Uniform(Distribution):
    """Uniform on [low, high)."""

    has_rsample = True

    @property
    def arg_constraints(self):  # (each bound by the other, as torch's)
        return {"low": constraints.less_than(self.high),
                "high": constraints.greater_than(self.low)}

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    mean = property(lambda self: (self.high + self.low) / 2)
    mode = property(lambda self: self.high * float("nan"))  # every point is one: undefined
    stddev = property(lambda self: (self.high - self.low) / 12 ** 0.5)
    variance = property(lambda self: (self.high - self.low) ** 2 / 12)

    def rsample(self, sample_shape=()):
        u = _noise(flow.rand, self._extended_shape(sample_shape), self.low)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = ((self.low <= value) & (self.high > value)).to(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()


class Exponential(ExponentialFamily):
    """Exponential with the given `rate`."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0
    _natural_params = property(lambda self: (-self.rate,))

    def _log_normalizer(self, x):
        return -flow.log(-x)

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: flow.zeros_like(self.rate))
    stddev = property(lambda self: self.rate.reciprocal())
    variance = property(lambda self: self.rate ** -2)

    def rsample(self, sample_shape=()):
        u = _noise(flow.rand, self._extended_shape(sample_shape), self.rate)
        return -flow.log1p(-u) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - flow.exp(-self.rate * value)

    def icdf(self, value):
        return -flow.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()


class Laplace(_LocScale):
    """Laplace with location `loc` and scale `scale`."""

    stddev = property(lambda self: 2 ** 0.5 * self.scale)
    variance = property(lambda self: 2 * self.scale ** 2)

    def rsample(self, sample_shape=()):
        eps = flow.finfo(self.loc.dtype).eps
        u = _noise(flow.rand, self._extended_shape(sample_shape), self.loc) * (2 - eps) \
            - 1 + eps
        return self.loc - self.scale * u.sign() * flow.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return 0.5 - 0.5 * z.sign() * flow.expm1(-z.abs())

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * flow.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + (2 * self.scale).log()


class Gamma(ExponentialFamily):
    """Gamma with shape `concentration` and `rate`; rsample differentiates through the
    sample by implicit reparameterisation (flowgrad.ops.sampling.standard_gamma)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0
    _natural_params = property(lambda self: (self.concentration - 1, -self.rate))

    def _log_normalizer(self, x, y):
        return flow.lgamma(x + 1) + (x + 1) * flow.log(-y.reciprocal())

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: ((self.concentration - 1) / self.rate).clamp(min=0))
    variance = property(lambda self: self.concentration / self.rate ** 2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return x.clamp(min=flow.finfo(x.dtype).tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration, self.rate
        return flow.xlogy(a, b) + flow.xlogy(a - 1, value) - b * value - flow.lgamma(a)

    def entropy(self):
        a = self.concentration
        return a - self.rate.log() + flow.lgamma(a) + (1.0 - a) * flow.digamma(a)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return flow.special.gammainc(self.concentration, self.rate * value)


class Dirichlet(ExponentialFamily):
    """Dirichlet over the simplex, with concentration (..., K)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True
    _natural_params = property(lambda self: (self.concentration,))

    def _log_normalizer(self, x):
        return flow.lgamma(x).sum(-1) - flow.lgamma(x.sum(-1))

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:],
                         validate_args=validate_args)

    def rsample(self, sample_shape=()):
        x = standard_gamma(self.concentration.expand(self._extended_shape(sample_shape)))
        return x / x.sum(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return flow.xlogy(c - 1.0, value).sum(-1) + flow.lgamma(c.sum(-1)) \
            - flow.lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        c = self.concentration
        cm1 = (c - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, keepdim=True)
        # every concentration below 1: torch answers with a vertex (the argmax of the 0/0 row)
        vertex = flow.nn.functional.one_hot(mode.argmax(-1), c.shape[-1]).to(mode.dtype)
        return flow.where((c < 1).all(-1, keepdim=True), vertex, mode)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0 ** 2 * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k, a0 = c.shape[-1], c.sum(-1)
        return flow.lgamma(c).sum(-1) - flow.lgamma(a0) - (k - a0) * flow.digamma(a0) \
            - ((c - 1.0) * flow.digamma(c)).sum(-1)


class Beta(ExponentialFamily):
    """Beta(concentration1, concentration0) on [0, 1], through a two-class Dirichlet."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True
    _natural_params = property(lambda self: (self.concentration1, self.concentration0))

    def _log_normalizer(self, x, y):
        return flow.lgamma(x) + flow.lgamma(y) - flow.lgamma(x + y)

    def __init__(self, concentration1, concentration0, validate_args=None):
        c1, c0 = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(flow.stack([c1, c0], -1), validate_args=validate_args)
        super().__init__(self._dirichlet.batch_shape, validate_args=validate_args)

    concentration1 = property(lambda self: self._dirichlet.concentration[..., 0])
    concentration0 = property(lambda self: self._dirichlet.concentration[..., 1])

    def expand(self, batch_shape, _instance=None):
        c = self._dirichlet.concentration.expand(*batch_shape, 2)
        new = Beta(c[..., 0], c[..., 1], validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    mode = property(lambda self: self._dirichlet.mode[..., 0])

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total ** 2 * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(flow.stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()
