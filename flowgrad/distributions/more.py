"""More distributions, with torch's formulas: Cauchy, HalfNormal, Gumbel, StudentT, Chi2 (a
Gamma), and the discrete Geometric.

>>> import flowgrad as flow
>>> Cauchy(flow.tensor(0.0), flow.tensor(1.0)).cdf(flow.tensor(1.0))
tensor(0.7500)
>>> StudentT(flow.tensor(3.0)).log_prob(flow.tensor(0.0))
tensor(-1.0009)
"""
from __future__ import annotations

import math

import flowgrad as flow

from . import constraints
from .continuous import Gamma, Normal, Uniform, _LocScale, _noise
from .discrete import _ProbsOrLogits
from .distribution import Distribution, broadcast_all

__all__ = ["Cauchy", "HalfNormal", "Gumbel", "StudentT", "Chi2", "Geometric"]

_EULER_GAMMA = 0.57721566490153286060


def _inside(inside, log_prob):
    """log_prob where `inside`, -inf elsewhere."""
    return flow.where(inside, log_prob, flow.full_like(log_prob, -math.inf))


class Cauchy(_LocScale):
    """Cauchy with location `loc` (its median and mode) and scale `scale`; no mean."""

    mean = property(lambda self: flow.full_like(self.loc, math.nan))
    variance = property(lambda self: flow.full_like(self.loc, math.inf))

    def rsample(self, sample_shape=()):
        u = _noise(flow.rand, self._extended_shape(sample_shape), self.loc)
        return self.loc + self.scale * flow.tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - \
            flow.log1p(((value - self.loc) / self.scale) ** 2)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return flow.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return flow.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class HalfNormal(Distribution):
    """|X| for X ~ Normal(0, scale)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (self.scale,) = broadcast_all(scale)
        self.base_dist = Normal(flow.zeros_like(self.scale), self.scale, validate_args=False)
        super().__init__(self.scale.shape, validate_args=validate_args)

    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    mode = property(lambda self: flow.zeros_like(self.scale))
    variance = property(lambda self: self.scale ** 2 * (1 - 2 / math.pi))

    def sample(self, sample_shape=()):
        with flow.no_grad():  # (the base's sample: a forward-mode tangent of zeros, as torch's)
            return self.base_dist.sample(sample_shape).abs()

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape).abs()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return _inside(value >= 0, self.base_dist.log_prob(value) + math.log(2))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, value):
        return self.base_dist.icdf((value + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class Gumbel(_LocScale):
    """Gumbel (type I extreme value) with location `loc` and scale `scale`."""

    mean = property(lambda self: self.loc + self.scale * _EULER_GAMMA)
    stddev = property(lambda self: (math.pi / math.sqrt(6)) * self.scale)
    variance = property(lambda self: self.stddev ** 2)

    def rsample(self, sample_shape=()):
        info = flow.finfo(self.loc.dtype)
        u = _noise(flow.rand, self._extended_shape(sample_shape), self.loc)
        u = u.clamp(info.tiny, 1 - info.eps)  # torch's Uniform(tiny, 1 - eps) base
        return self.loc - self.scale * flow.log(-flow.log(u))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (self.loc - value) / self.scale
        return (z - z.exp()) - self.scale.log()

    def _base(self):
        # torch's Gumbel is a TransformedDistribution of this Uniform: its cdf validates the
        # inverted value there (nan, +-inf, tails beyond [tiny, 1 - eps] raise) and clamps
        info = flow.finfo(self.loc.dtype)
        return Uniform(flow.full_like(self.loc, info.tiny), flow.full_like(self.loc, 1 - info.eps),
                       validate_args=self._validate_args)

    def cdf(self, value):
        u = flow.exp(-flow.exp(-(value - self.loc) / self.scale))
        # torch's _monotonize_cdf: its transforms' sign is a tensor, so it always rounds here
        return (self._base().cdf(u) - 0.5) + 0.5

    def icdf(self, value):
        u = self._base().icdf((value - 0.5) + 0.5)
        return self.loc - self.scale * flow.log(-flow.log(u))

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)


class StudentT(Distribution):
    """Student's t with `df` degrees of freedom, location `loc` and scale `scale`."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.shape, validate_args=validate_args)

    @property
    def mean(self):
        return flow.where(self.df > 1, self.loc, flow.full_like(self.loc, math.nan))

    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        df = self.df
        finite = self.scale ** 2 * df / (df - 2)
        infinite = flow.where(df > 1, flow.full_like(df, math.inf), flow.full_like(df, math.nan))
        return flow.where(df > 2, finite, infinite)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = _noise(flow.randn, shape, self.df)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * flow.rsqrt(z / self.df)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + \
            flow.lgamma(0.5 * self.df) - flow.lgamma(0.5 * (self.df + 1.0))
        return -0.5 * (self.df + 1.0) * flow.log1p(y ** 2.0 / self.df) - z

    def entropy(self):
        half_df = 0.5 * self.df
        lbeta = flow.lgamma(half_df) + math.lgamma(0.5) - flow.lgamma(half_df + 0.5)
        return self.scale.log() + (self.df + 1) * 0.5 * (
            flow.digamma(half_df + 0.5) - flow.digamma(half_df)) + 0.5 * self.df.log() + lbeta


class Chi2(Gamma):
    """Chi-squared with `df` degrees of freedom: Gamma(df / 2, 1 / 2)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, flow.full_like(df, 0.5), validate_args=validate_args)

    df = property(lambda self: self.concentration * 2)


class Geometric(_ProbsOrLogits):
    """The number of failures before the first success of probability `probs` (or
    sigmoid(`logits`))."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    mean = property(lambda self: 1.0 / self.probs - 1.0)
    mode = property(lambda self: flow.zeros_like(self.probs))
    variance = property(lambda self: (1.0 / self.probs - 1.0) / self.probs)

    def sample(self, sample_shape=()):
        probs = self.probs
        with flow.no_grad():
            info = flow.finfo(probs.dtype)
            u = _noise(flow.rand, self._extended_shape(sample_shape), probs)
            u = u.clamp(min=info.tiny)
            return (u.log() / flow.log1p(-probs)).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # (torch's: p == 1 at value 0 is log 1 = 0, not 0 * log(0) = nan)
        safe = flow.where((probs == 1) & (value == 0), flow.zeros_like(probs), probs)
        return value * flow.log1p(-safe) + self.probs.log()

    def entropy(self):
        return flow.nn.functional.binary_cross_entropy_with_logits(
            self.logits, self.probs, reduction="none") / self.probs
