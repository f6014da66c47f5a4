"""MixtureSameFamily: a mixture of k components of one family (the rightmost batch dimension
of `component_distribution`) weighted by a Categorical over k.

>>> import flowgrad as flow
>>> from flowgrad.distributions import Categorical, Normal
>>> mix = Categorical(probs=flow.tensor([0.25, 0.75]))
>>> gmm = MixtureSameFamily(mix, Normal(flow.tensor([-1.0, 2.0]), flow.tensor([1.0, 0.5])))
>>> gmm.mean, gmm.log_prob(flow.tensor(0.0))
(tensor(1.2500), tensor(-2.8019))
"""
from __future__ import annotations

import flowgrad as flow

from . import constraints
from .constraints import MixtureSameFamilyConstraint
from .discrete import Categorical
from .distribution import Distribution

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    """Draws component i ~ `mixture_distribution` (a Categorical over k), then a value from
    `component_distribution`'s i-th component (its batch shape ends in k). Log density,
    cdf and moments are the mixture's; there is no rsample (the choice is discrete)."""

    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(f"MixtureSameFamily: the mixture distribution needs to be an "
                             f"instance of flowgrad.distributions.Categorical, got "
                             f"{type(mixture_distribution).__name__}; pass "
                             f"Categorical(probs=weights)")
        if not isinstance(component_distribution, Distribution):
            raise ValueError(f"MixtureSameFamily: the component distribution needs to be an "
                             f"instance of flowgrad.distributions.Distribution, got "
                             f"{type(component_distribution).__name__}")
        component_batch = tuple(component_distribution.batch_shape)
        if not component_batch:
            raise IndexError("MixtureSameFamily: component_distribution needs a batch "
                             "dimension indexing the components (batch_shape (..., k)), got "
                             "batch_shape ()")
        mixture_batch, batch = tuple(mixture_distribution.batch_shape), component_batch[:-1]
        for size1, size2 in zip(reversed(mixture_batch), reversed(batch)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"MixtureSameFamily: `mixture_distribution.batch_shape` "
                                 f"{mixture_batch} is not compatible with "
                                 f"`component_distribution.batch_shape[:-1]` {batch}")
        k_mixture = mixture_distribution.logits.shape[-1]
        k_component = component_batch[-1]
        if k_mixture != k_component:
            raise ValueError(f"MixtureSameFamily: `mixture_distribution` has {k_mixture} "
                             f"components, which does not equal "
                             f"`component_distribution.batch_shape[-1]` ({k_component})")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        self._num_component = k_mixture
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(batch, component_distribution.event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        new = self._expanded(batch_shape)
        new._component_distribution = self._component_distribution.expand(
            batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component, new._event_ndims = self._num_component, self._event_ndims
        return new

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)

    @constraints.dependent_property
    def support(self):
        return MixtureSameFamilyConstraint(self._component_distribution.support)

    def _weights(self):
        """The mixture probabilities (..., k), with a trailing 1 per event dimension."""
        probs = self._mixture_distribution.probs
        return probs.reshape((*probs.shape, *(1,) * self._event_ndims))

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    @property
    def mean(self):
        return (self._weights() * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        # law of total variance: Var(Y) = E[Var(Y | i)] + Var(E[Y | i])
        weights, dim = self._weights(), -1 - self._event_ndims
        component = self._component_distribution
        mean_of_variances = (weights * component.variance).sum(dim)
        variance_of_means = (weights * (component.mean - self._pad(self.mean)) ** 2).sum(dim)
        return mean_of_variances + variance_of_means

    def cdf(self, x):
        cdf_x = self._component_distribution.cdf(self._pad(x))
        return (cdf_x * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self._component_distribution.log_prob(self._pad(x))  # (S, B, k)
        log_weights = flow.log_softmax(self._mixture_distribution.logits, -1)  # (B, k)
        return (log_prob_x + log_weights).logsumexp(-1)

    def sample(self, sample_shape=()):
        # no no_grad block here: each sample() makes its own, after it reads (and caches)
        # its lazy parameters with their history
        which = self._mixture_distribution.sample(sample_shape)  # (S, mixture batch)
        draws = self._component_distribution.sample(sample_shape)  # (S, B, k, E)
        sample_shape = tuple(sample_shape)
        dim = len(sample_shape) + len(self._batch_shape)
        # the mixture's batch may be a broadcastable suffix of the components'
        index = which.reshape(*sample_shape, *(1,) * (dim - which.dim()),
                              *which.shape[len(sample_shape):], 1, *(1,) * self._event_ndims)
        index = index.expand(*sample_shape, *self._batch_shape, 1, *self._event_shape)
        return draws.gather(dim, index).squeeze(dim)

    def __repr__(self):
        return f"MixtureSameFamily(\n  {self._mixture_distribution},\n" \
               f"  {self._component_distribution})"
