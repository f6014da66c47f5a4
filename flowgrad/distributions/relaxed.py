"""Relaxed (Concrete / Gumbel-softmax) versions of the Bernoulli and the one-hot Categorical,
whose samples are differentiable in the parameters: LogitRelaxedBernoulli and
RelaxedBernoulli, ExpRelaxedCategorical and RelaxedOneHotCategorical; and
OneHotCategoricalStraightThrough, whose one-hot samples pass gradients straight through.

>>> import flowgrad as flow
>>> d = RelaxedBernoulli(flow.tensor(0.5), probs=flow.tensor(0.3))
>>> d.log_prob(flow.tensor(0.2))
tensor(-0.2528)
>>> x = RelaxedOneHotCategorical(flow.tensor(1.0), logits=flow.zeros(3)).rsample((2,))
>>> tuple(x.shape), bool(((x.sum(-1) - 1).abs() < 1e-6).all())
((2, 3), True)
"""
from __future__ import annotations

import flowgrad as flow

from . import constraints
from .continuous import _noise
from .discrete import Categorical, OneHotCategorical, _ProbsOrLogits
from .distribution import Distribution, broadcast_all, clamp_probs
from .transformed import TransformedDistribution
from .transforms import ExpTransform, SigmoidTransform

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli", "ExpRelaxedCategorical",
           "RelaxedOneHotCategorical", "OneHotCategoricalStraightThrough"]


def _uniform(shape, like):
    """Uniform draws in (0, 1), kept off both ends so their logs stay finite."""
    return clamp_probs(_noise(flow.rand, shape, like))


class LogitRelaxedBernoulli(_ProbsOrLogits):
    """The logit of a RelaxedBernoulli: (logit(u) + `logits`) / `temperature` for uniform u,
    given `probs` or `logits`."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        super().__init__(probs, logits, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(batch_shape, ())
        new.temperature = self.temperature  # not broadcast with the batch, as torch
        for name in ("probs", "logits"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(batch_shape)
        return new

    param_shape = property(lambda self: self._batch_shape)

    def sample(self, sample_shape=()):
        probs = self.probs  # outside no_grad: a lazy probs is cached with its history
        with flow.no_grad():
            return self._draw(probs, sample_shape)

    def rsample(self, sample_shape=()):
        return self._draw(self.probs, sample_shape)

    def _draw(self, probs, sample_shape):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(probs.expand(shape))
        u = _uniform(shape, probs)
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class _Relaxed(TransformedDistribution):
    """What the relaxed distributions share: a base distribution holding `temperature`
    and the `probs` / `logits` parameters, pushed through one transform."""

    has_rsample = True

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)

    def sample(self, sample_shape=()):
        # the base's sample reads its lazy parameters outside no_grad (see there)
        return self._push(self.base_dist.sample(sample_shape))


class RelaxedBernoulli(_Relaxed):
    """A Bernoulli relaxed to (0, 1) at `temperature`: sigmoid of a LogitRelaxedBernoulli,
    given `probs` or `logits`; lower temperatures bring samples nearer 0 and 1."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical: log_softmax((`logits` + Gumbel noise) /
    `temperature`) over the last dimension (K), given `probs` or `logits`."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector  # (the values lie on a K - 1 dimensional part of it)
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(batch_shape)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        return new

    param_shape = property(lambda self: self._categorical.param_shape)
    logits = property(lambda self: self._categorical.logits)
    probs = property(lambda self: self._categorical.probs)

    def sample(self, sample_shape=()):
        logits = self.logits  # outside no_grad: a lazy logits is cached with its history
        with flow.no_grad():
            return self._draw(logits, sample_shape)

    def rsample(self, sample_shape=()):
        return self._draw(self.logits, sample_shape)

    def _draw(self, logits, sample_shape):
        u = _uniform(self._extended_shape(sample_shape), logits)
        gumbels = -(-u.log()).log()
        scores = (logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        k = self._categorical._num_events
        logits, value = broadcast_all(self.logits, value)
        # log (K - 1)! + (K - 1) log temperature: the density's normaliser
        log_scale = flow.full_like(self.temperature, float(k)).lgamma() \
            + (k - 1) * self.temperature.log()
        score = logits - value * self.temperature
        return (score - score.logsumexp(-1, keepdim=True)).sum(-1) + log_scale


class RelaxedOneHotCategorical(_Relaxed):
    """A OneHotCategorical relaxed onto the simplex at `temperature` (Gumbel-softmax): exp of
    an ExpRelaxedCategorical, given `probs` or `logits`."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """A OneHotCategorical whose rsample is a one-hot sample in the forward pass and has the
    gradient of `probs` in the backward pass (the straight-through estimator)."""

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
