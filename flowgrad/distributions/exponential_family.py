"""ExponentialFamily, the base of the distributions with density
exp(<t(x), theta> - F(theta) + k(x)), whose entropy follows from the log normalizer F through
autograd (a Bregman divergence); and ContinuousBernoulli, a member over [0, 1].

>>> import flowgrad as flow
>>> d = ContinuousBernoulli(flow.tensor([0.2, 0.5]))
>>> d.log_prob(flow.tensor([0.1, 0.1]))
tensor([0.4757, 0.0000])
>>> ExponentialFamily.entropy(d)  # the Bregman route agrees with the closed form
tensor([-0.0764,  0.0000])
"""
from __future__ import annotations

import math

import flowgrad as flow

from . import constraints
from .distribution import (
    Distribution,
    broadcast_all,
    clamp_probs,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
)

__all__ = ["ExponentialFamily", "ContinuousBernoulli"]


def _bregman_terms(dist):
    """The natural parameters of `dist`, its log normalizer at them, the normalizer's
    gradient (kept in the graph, so what is built from it stays differentiable), and whether
    the parameters carry a history the caller's result should keep."""
    natural = dist._natural_params
    tracked = flow.is_grad_enabled() and any(p.requires_grad for p in natural)
    # F's gradient needs parameters that require grad: constants become leaves of their own
    params = [p if p.requires_grad else p.detach().requires_grad_() for p in natural]
    with flow.enable_grad():
        log_norm = dist._log_normalizer(*params)
        grads = flow.autograd.grad(log_norm.sum(), params, create_graph=True)
    return params, log_norm, grads, tracked


class ExponentialFamily(Distribution):
    """Base class of exponential families: subclasses give the natural parameters theta
    (`_natural_params`), the log normalizer F (`_log_normalizer`) and the expected carrier
    measure E[k(x)] (`_mean_carrier_measure`); `entropy` is then
    F(theta) - <theta, grad F(theta)> - E[k(x)]."""

    @property
    def _natural_params(self):
        raise NotImplementedError(f"{type(self).__name__} does not give its natural parameters")

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError(f"{type(self).__name__} does not give its log normalizer")

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError(f"{type(self).__name__} does not give its expected carrier "
                                  f"measure, which its entropy needs")

    def entropy(self):
        # unlike torch, which detaches the natural parameters, the result keeps their history:
        # the same values, with gradients with respect to the distribution's parameters
        carrier = self._mean_carrier_measure
        params, log_norm, grads, tracked = _bregman_terms(self)
        with flow.enable_grad():
            result = log_norm - carrier
            for theta, grad in zip(params, grads):
                result = result - (theta * grad).reshape(*self._batch_shape, -1).sum(-1)
        return result if tracked else result.detach()


class ContinuousBernoulli(ExponentialFamily):
    """The continuous Bernoulli on [0, 1], density proportional to
    probs^x (1 - probs)^(1 - x), given `probs` (in (0, 1)) or `logits`; within `lims` of
    probs = 1/2, where the closed forms lose precision, Taylor expansions stand in."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (probs,) = broadcast_all(probs)
            # checked before the clamp, which would let any value through; torch checks here
            # whenever validate_args is given at all (True or False), and not by default
            if validate_args is not None and not bool(
                    constraints.unit_interval.check(probs).all()):
                raise ValueError(f"The parameter probs has invalid values: ContinuousBernoulli "
                                 f"needs probs in [0, 1], got\n{probs}")
            self.probs = clamp_probs(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        self._lims = lims
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(batch_shape, (), object.__new__(ContinuousBernoulli))
        new._lims = self._lims
        for name in ("probs", "logits"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(batch_shape)
                new._param = new.__dict__[name]
        return new

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    param_shape = property(lambda self: self._param.shape)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        """probs, with those near 1/2 moved to lims[0], so the unused closed-form branch of
        a `where` stays finite (and so does its gradient)."""
        return flow.where(self._outside_unstable_region(), self.probs,
                          flow.full_like(self.probs, self._lims[0]))

    def _cont_bern_log_norm(self):
        """log C(probs), the log of the density's normalising constant."""
        cut = self._cut_probs()
        below_half = flow.where(cut <= 0.5, cut, flow.zeros_like(cut))
        above_half = flow.where(cut >= 0.5, cut, flow.ones_like(cut))
        log_norm = flow.log((flow.log1p(-cut) - flow.log(cut)).abs()) - flow.where(
            cut <= 0.5, flow.log1p(-2.0 * below_half), flow.log(2.0 * above_half - 1.0))
        x = (self.probs - 0.5) ** 2
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return flow.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / (flow.log1p(-cut) - flow.log(cut))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x ** 2) * x
        return flow.where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self):
        cut = self._cut_probs()
        variances = cut * (cut - 1.0) / (1.0 - 2.0 * cut) ** 2 + 1.0 / (
            flow.log1p(-cut) - flow.log(cut)) ** 2
        x = (self.probs - 0.5) ** 2
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return flow.where(self._outside_unstable_region(), variances, taylor)

    def sample(self, sample_shape=()):
        probs = self.probs  # outside no_grad: a lazy property is cached with its history
        u = flow.rand(self._extended_shape(sample_shape), dtype=probs.dtype)
        with flow.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=()):
        return self.icdf(flow.rand(self._extended_shape(sample_shape), dtype=self.probs.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -flow.nn.functional.binary_cross_entropy_with_logits(
            logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut ** value * (1.0 - cut) ** (1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        inside = flow.where(self._outside_unstable_region(), cdfs, value)
        return flow.where(value <= 0.0, flow.zeros_like(inside),
                          flow.where(value >= 1.0, flow.ones_like(inside), inside))

    def icdf(self, value):
        cut = self._cut_probs()
        closed_form = (flow.log1p(-cut + value * (2.0 * cut - 1.0)) - flow.log1p(-cut)) / (
            flow.log(cut) - flow.log1p(-cut))
        return flow.where(self._outside_unstable_region(), closed_form, value)

    def entropy(self):
        log_probs0, log_probs1 = flow.log1p(-self.probs), flow.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        """log C as a function of the natural parameter (the logits)."""
        # (torch's test: the logits against lims - 1/2, as if they were probs)
        stable = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = flow.where(stable, x, flow.full_like(x, self._lims[0] - 0.5))
        log_norm = flow.log(flow.expm1(cut).abs()) - flow.log(cut.abs())
        taylor = 0.5 * x + x ** 2 / 24.0 - x ** 4 / 2880.0
        return flow.where(stable, log_norm, taylor)
