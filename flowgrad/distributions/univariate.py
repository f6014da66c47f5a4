"""More univariate continuous distributions, with torch's formulas: HalfCauchy, InverseGamma,
Kumaraswamy, Pareto and Weibull (each a simple distribution pushed through transforms),
GeneralizedPareto, FisherSnedecor and the circular VonMises; and the KL divergences torch
registers between these, ContinuousBernoulli, exponential families and the others.

>>> import flowgrad as flow
>>> Pareto(flow.tensor(1.0), flow.tensor(2.0)).log_prob(flow.tensor(1.5))
tensor(-0.5232)
>>> Weibull(flow.tensor(1.0), flow.tensor(2.0)).cdf(flow.tensor(1.0))
tensor(0.6321)
>>> VonMises(flow.tensor(0.0), flow.tensor(2.0)).log_prob(flow.tensor(0.5))
tensor(-0.9067)
>>> from flowgrad.distributions import Exponential, kl_divergence
>>> kl_divergence(Pareto(flow.tensor(1.0), flow.tensor(3.0)), Exponential(flow.tensor(1.0)))
tensor(1.2653)
"""
from __future__ import annotations

import math

import flowgrad as flow

from . import constraints
from .continuous import Beta, Exponential, Gamma, Laplace, Normal, Uniform
from .distribution import Distribution, broadcast_all, lazy_property, sum_rightmost
from .exponential_family import ContinuousBernoulli, ExponentialFamily, _bregman_terms
from .kl import register_kl
from .more import _EULER_GAMMA, Cauchy, Gumbel
from .transformed import TransformedDistribution
from .transforms import AbsTransform, AffineTransform, ExpTransform, PowerTransform

__all__ = ["HalfCauchy", "InverseGamma", "Kumaraswamy", "Pareto", "Weibull",
           "GeneralizedPareto", "FisherSnedecor", "VonMises"]


def _keep_validation(new, old):
    """`new` (an expanded copy, built unchecked) validating as `old` does."""
    new._validate_args = old._validate_args
    return new


class HalfCauchy(TransformedDistribution):
    """|X| for X ~ Cauchy(0, scale)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0.0, scale, validate_args=False), AbsTransform(),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _keep_validation(HalfCauchy(self.scale.expand(batch_shape),
                                           validate_args=False), self)

    scale = property(lambda self: self.base_dist.scale)
    mean = property(lambda self: flow.full(self._extended_shape(), math.inf,
                                           dtype=self.scale.dtype))
    mode = property(lambda self: flow.zeros_like(self.scale))
    variance = property(lambda self: self.base_dist.variance)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = flow.as_tensor(value, dtype=self.scale.dtype)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return flow.where(value >= 0, log_prob, flow.full_like(log_prob, -math.inf))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class InverseGamma(TransformedDistribution):
    """1 / X for X ~ Gamma(concentration, rate)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        # the base is checked as InverseGamma's parameters, so errors name them as such
        base = Gamma(concentration, rate, validate_args=False)
        super().__init__(base, PowerTransform(-base.rate.new_ones(())),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape)
        return _keep_validation(InverseGamma(self.concentration.expand(shape),
                                             self.rate.expand(shape), validate_args=False), self)

    concentration = property(lambda self: self.base_dist.concentration)
    rate = property(lambda self: self.base_dist.rate)
    mode = property(lambda self: self.rate / (self.concentration + 1))

    @property
    def mean(self):
        mean = self.rate / (self.concentration - 1)
        return flow.where(self.concentration > 1, mean, flow.full_like(mean, math.inf))

    @property
    def variance(self):
        a = self.concentration
        variance = self.rate ** 2 / ((a - 1) ** 2 * (a - 2))
        return flow.where(a > 2, variance, flow.full_like(variance, math.inf))

    def entropy(self):
        a = self.concentration
        return a + self.rate.log() + flow.lgamma(a) - (1 + a) * flow.digamma(a)


def _kumaraswamy_moment(a, b, n):
    """E[X^n] = b B(1 + n / a, b)."""
    arg = 1 + n / a
    return b * flow.exp(flow.lgamma(arg) + flow.lgamma(b) - flow.lgamma(arg + b))


class Kumaraswamy(TransformedDistribution):
    """Kumaraswamy(concentration1 = a, concentration0 = b) on [0, 1]:
    (1 - U^(1/b))^(1/a) for U ~ Uniform(0, 1)."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base = Uniform(flow.zeros_like(self.concentration0), flow.ones_like(self.concentration0),
                       validate_args=validate_args)
        transforms = [PowerTransform(self.concentration0.reciprocal()),
                      AffineTransform(1.0, -1.0),
                      PowerTransform(self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape)
        return _keep_validation(Kumaraswamy(self.concentration1.expand(shape),
                                            self.concentration0.expand(shape),
                                            validate_args=False), self)

    mean = property(lambda self: _kumaraswamy_moment(self.concentration1,
                                                     self.concentration0, 1))

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        undefined = (b < 1) | (a < 1)
        return flow.where(undefined, flow.full_like(log_mode, math.nan), log_mode).exp()

    @property
    def variance(self):
        second = _kumaraswamy_moment(self.concentration1, self.concentration0, 2)
        return second - self.mean ** 2

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        harmonic_b = flow.digamma(b + 1) + _EULER_GAMMA
        return (1 - b.reciprocal()) + (1 - a.reciprocal()) * harmonic_b - a.log() - b.log()


class Pareto(TransformedDistribution):
    """Pareto type I with minimum `scale` and tail index `alpha`: scale * exp(E) for
    E ~ Exponential(alpha)."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        # the base is checked as Pareto's alpha, so errors name it as such
        base = Exponential(self.alpha, validate_args=False)
        super().__init__(base, [ExpTransform(), AffineTransform(0.0, self.scale)],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape)
        return _keep_validation(Pareto(self.scale.expand(shape), self.alpha.expand(shape),
                                       validate_args=False), self)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    mode = property(lambda self: self.scale)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)  # alpha <= 1: torch answers inf (1 / 0)
        return a * self.scale / (a - 1)

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        return self.scale ** 2 * a / ((a - 1) ** 2 * (a - 2))

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class Weibull(TransformedDistribution):
    """Weibull with `scale` (lambda) and `concentration` (k):
    scale * E^(1/k) for E ~ Exponential(1)."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base = Exponential(flow.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(self.concentration_reciprocal),
                      AffineTransform(0.0, self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape)
        return _keep_validation(Weibull(self.scale.expand(shape),
                                        self.concentration.expand(shape),
                                        validate_args=False), self)

    @property
    def mean(self):
        return self.scale * flow.exp(flow.lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k) ** k.reciprocal()

    @property
    def variance(self):
        inv_k = self.concentration_reciprocal
        return self.scale ** 2 * (flow.exp(flow.lgamma(1 + 2 * inv_k))
                                  - flow.exp(2 * flow.lgamma(1 + inv_k)))

    def entropy(self):
        inv_k = self.concentration_reciprocal
        return _EULER_GAMMA * (1 - inv_k) + flow.log(self.scale * inv_k) + 1


class GeneralizedPareto(Distribution):
    """Generalized Pareto with location `loc`, `scale` and shape `concentration` (xi):
    exceedances over `loc`; xi = 0 is the exponential, xi < 0 has an upper end point."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape)
        new = GeneralizedPareto(self.loc.expand(shape), self.scale.expand(shape),
                                self.concentration.expand(shape), validate_args=False)
        return _keep_validation(new, self)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        upper = flow.where(self.concentration < 0, self.loc - self.scale / self.concentration,
                           flow.full_like(self.loc, math.inf))
        return constraints.interval(self.loc, upper)

    def _zero_and_safe_concentration(self):
        """Where xi is (close to) 0, and xi with those entries set to 1, so that the unused
        branch of a `where` stays finite."""
        xi = self.concentration
        # (against zeros of xi's dtype: torch's literal 0.0 fails for float64 parameters)
        eq_zero = flow.isclose(xi, flow.zeros_like(xi))
        return eq_zero, flow.where(eq_zero, flow.ones_like(xi), xi)

    def rsample(self, sample_shape=()):
        return self.icdf(flow.rand(self._extended_shape(sample_shape), dtype=self.loc.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, xi = self._zero_and_safe_concentration()
        y = 1 / xi + flow.ones_like(z)
        nonzero = flow.where(y == 0, y, y * flow.log1p(xi * z))
        return -self.scale.log() - flow.where(eq_zero, z, nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, xi = self._zero_and_safe_concentration()
        return flow.where(eq_zero, -z, -flow.log1p(xi * z) / xi)

    def log_cdf(self, value):
        return flow.log1p(-flow.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return flow.exp(self.log_cdf(value))

    def icdf(self, value):
        eq_zero, xi = self._zero_and_safe_concentration()
        log_u = flow.log1p(-value)
        nonzero = self.loc + self.scale / xi * flow.expm1(-xi * log_u)
        return flow.where(eq_zero, self.loc - self.scale * log_u, nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        xi = flow.where(valid, self.concentration, flow.full_like(self.concentration, 0.5))
        mean = self.loc + self.scale / (1 - xi)
        return flow.where(valid, mean, flow.full_like(mean, math.nan))

    @property
    def variance(self):
        valid = self.concentration < 0.5
        xi = flow.where(valid, self.concentration, flow.full_like(self.concentration, 0.25))
        variance = self.scale ** 2 / ((1 - xi) ** 2 * (1 - 2 * xi))
        return flow.where(valid, variance, flow.full_like(variance, math.nan))

    mode = property(lambda self: self.loc)

    def entropy(self):
        return flow.broadcast_to(self.scale.log() + self.concentration + 1, self._batch_shape)


class FisherSnedecor(Distribution):
    """Fisher-Snedecor F with `df1` and `df2` degrees of freedom: the ratio of two
    chi-squared variables, each over its degrees of freedom."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        # unchecked: df1 and df2 are checked as FisherSnedecor's, so errors name them
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1, validate_args=False)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2, validate_args=False)
        super().__init__(self.df1.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape)
        return _keep_validation(FisherSnedecor(self.df1.expand(shape), self.df2.expand(shape),
                                               validate_args=False), self)

    @property
    def mean(self):
        df2 = flow.where(self.df2 <= 2, flow.full_like(self.df2, math.nan), self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        df1, df2 = self.df1, self.df2
        mode = (df1 - 2) / df1 * df2 / (df2 + 2)
        return flow.where(df1 <= 2, flow.full_like(mode, math.nan), mode)

    @property
    def variance(self):
        df1 = self.df1
        df2 = flow.where(self.df2 <= 4, flow.full_like(self.df2, math.nan), self.df2)
        return 2 * df2 ** 2 * (df1 + df2 - 2) / (df1 * (df2 - 2) ** 2 * (df2 - 4))

    def rsample(self, sample_shape=()):
        # X1 ~ Gamma(df1 / 2, rate df1) is chi2(df1) / df1, likewise X2: F = X1 / X2
        x1 = self._gamma1.rsample(sample_shape)
        x2 = self._gamma2.rsample(sample_shape)
        tiny = flow.finfo(x2.dtype).tiny
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        half1, half2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        t1 = flow.lgamma(half1 + half2) - flow.lgamma(half1) - flow.lgamma(half2)
        t2 = half1 * ratio.log() + (half1 - 1) * flow.log(value)
        t3 = (half1 + half2) * flow.log1p(ratio * value)
        return t1 + t2 - t3


# Polynomial approximations of I0 and I1 (Abramowitz and Stegun 9.8.1-9.8.4), as torch's:
# in y = (x / 3.75)^2 below 3.75, in 3.75 / x above.
_BESSEL_SMALL = {
    0: [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2],
    1: [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3]}
_BESSEL_LARGE = {
    0: [0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1,
        0.2635537e-1, -0.1647633e-1, 0.392377e-2],
    1: [0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1,
        -0.2895312e-1, 0.1787654e-1, -0.420059e-2]}


def _polynomial(y, coefficients):
    result = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        result = c + y * result
    return result


def _log_modified_bessel(x, order):
    """log I_order(x) for x > 0 and order 0 or 1."""
    small = _polynomial((x / 3.75) ** 2, _BESSEL_SMALL[order])
    if order == 1:
        small = x.abs() * small
    large = x - 0.5 * x.log() + _polynomial(3.75 / x, _BESSEL_LARGE[order]).log()
    return flow.where(x < 3.75, small.log(), large)


class VonMises(Distribution):
    """The circular von Mises distribution with mean direction `loc` and `concentration`:
    values (and loc) are angles, read modulo 2 pi; samples fall in [-pi, pi)."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape)
        return _keep_validation(VonMises(self.loc.expand(shape),
                                         self.concentration.expand(shape),
                                         validate_args=False), self)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.concentration * flow.cos(value - self.loc) - math.log(2 * math.pi) \
            - _log_modified_bessel(self.concentration, order=0)

    mean = property(lambda self: self.loc, doc="The circular mean.")
    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        """The circular variance, 1 - I1(kappa) / I0(kappa)."""
        kappa = self.concentration
        return 1 - (_log_modified_bessel(kappa, 1) - _log_modified_bessel(kappa, 0)).exp()

    @lazy_property
    def _proposal_r(self):
        kappa = self.concentration.detach().to(flow.float64)
        tau = 1 + (1 + 4 * kappa ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        # below 1e-5, the closed form cancels: its second order Taylor expansion in kappa
        return flow.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho ** 2) / (2 * rho))

    def sample(self, sample_shape=()):
        """Best and Fisher's rejection sampler (Applied Statistics, 1979), drawn for all
        entries at once until each has accepted; in float64, since in float32 small
        concentrations (around 1e-4) would reject for ever (torch's issue 88443)."""
        with flow.no_grad():
            shape = self._extended_shape(sample_shape)
            loc = self.loc.to(flow.float64)
            kappa = self.concentration.to(flow.float64)
            r = self._proposal_r
            x = flow.zeros(shape, dtype=flow.float64)
            done = flow.zeros(shape, dtype=flow.bool)
            while not bool(done.all()):
                u1, u2, u3 = flow.rand((3, *shape), dtype=flow.float64).unbind()
                z = flow.cos(math.pi * u1)
                f = (1 + r * z) / (r + z)
                c = kappa * (r - f)
                accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
                x = flow.where(accept & ~done, (u3 - 0.5).sign() * f.acos(), x)
                done = done | accept
            return ((x + math.pi + loc) % (2 * math.pi) - math.pi).to(self.loc.dtype)


# --- KL divergences torch registers involving these, ContinuousBernoulli or an exponential
# family (registered here rather than beside their classes: kl.py imports continuous.py,
# which imports exponential_family.py)

def _x_log_x(x):
    return flow.xlogy(x, x)  # 0 at x = 0


def _inf_where(cond, value):
    return flow.where(cond, flow.full_like(value, math.inf), value)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """The Bregman divergence of the log normalizer, between two members of one family."""
    if type(p) is not type(q):
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
            f"{type(q).__name__}: the cross KL-divergence between different exponential "
            f"families cannot be computed using Bregman divergences")
    p_params, p_log_norm, grads, p_tracked = _bregman_terms(p)
    q_params = q._natural_params
    result = q._log_normalizer(*q_params) - p_log_norm
    for p_param, q_param, grad in zip(p_params, q_params, grads):
        result = result - sum_rightmost((q_param - p_param) * grad, len(q.event_shape))
    tracked = p_tracked or any(t.requires_grad for t in q_params)
    return result if tracked and flow.is_grad_enabled() else result.detach()


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + flow.log1p(-p.probs)
    t3 = -q._cont_bern_log_norm() - flow.log1p(-q.probs)
    return t1 + t2 + t3


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio, alpha_ratio = p.scale / q.scale, q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return _inf_where(p.scale < q.scale, result)  # p's support reaches below q's


def _register_infinite_kls():
    """KL(p || q) = inf, shaped as a parameter of p, for the pairs where p puts mass where q
    has none."""
    def infinite(param):
        return lambda p, q: flow.full_like(getattr(p, param), math.inf)

    for type_p, param, types_q in [(Beta, "concentration1", [Pareto]),
                                   (ContinuousBernoulli, "probs", [Pareto]),
                                   (Exponential, "rate", [ContinuousBernoulli, Pareto]),
                                   (Gamma, "concentration", [ContinuousBernoulli, Pareto]),
                                   (Gumbel, "loc", [ContinuousBernoulli, Pareto]),
                                   (Laplace, "loc", [ContinuousBernoulli, Pareto]),
                                   (Normal, "loc", [ContinuousBernoulli, Pareto]),
                                   (Pareto, "scale", [Beta, ContinuousBernoulli, Uniform])]:
        for type_q in types_q:
            register_kl(type_p, type_q)(infinite(param))


_register_infinite_kls()


def _cross_entropy_to_continuous_bernoulli(p, q):
    """-E_p[log q(x)] for p of known mean, q continuous Bernoulli."""
    return -p.mean * q.logits - flow.log1p(-q.probs) - q._cont_bern_log_norm()


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() + _cross_entropy_to_continuous_bernoulli(p, q)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() + _cross_entropy_to_continuous_bernoulli(p, q)
    # (torch's test: inf unless p lies strictly inside (0, 1))
    return _inf_where((p.high >= 1.0) | (p.low <= 0.0), result)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale) ** 2) + q.scale.log()
    t3 = (p.variance + p.mean ** 2 - 2.0 * q.loc * p.mean) / (2.0 * q.scale ** 2)
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    # (torch's test: inf unless q's interval strictly contains [0, 1])
    return _inf_where((q.low >= 0.0) | (q.high <= 1.0), result)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate = p.scale * q.rate
    result = (p.alpha / scale_rate).log() - p.alpha.reciprocal() \
        + p.alpha * scale_rate / (p.alpha - 1) - 1
    return _inf_where(p.alpha <= 1, result)  # p has no mean


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common
    t2 = flow.lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _inf_where(p.alpha <= 1, t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    two_var = 2 * q.scale ** 2
    common = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common ** 2 / (p.alpha - 2)
    t4 = (p.alpha * common - q.loc) ** 2
    return _inf_where(p.alpha <= 2, t1 - t2 + (t3 + t4) / two_var - 1)  # no variance


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale ** q.alpha * width).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    return _inf_where(p.low < q.scale, t2 * (q.alpha + 1) - t1)

