"""Independent (batch dimensions read as event dimensions), TransformedDistribution (a base
distribution pushed through transforms, log_prob by the change of variables), LogNormal and
LogisticNormal.

>>> import flowgrad as flow
>>> from flowgrad.distributions import Normal
>>> d = Independent(Normal(flow.zeros(3), 1.0), 1)
>>> d.batch_shape, d.event_shape, d.log_prob(flow.zeros(3))
(flowgrad.Size([]), flowgrad.Size([3]), tensor(-2.7568))
>>> LogisticNormal(flow.zeros(2), 1.0).log_prob(flow.tensor([0.25, 0.25, 0.5]))
tensor(1.3054)
"""
from __future__ import annotations

import flowgrad as flow

from . import constraints
from .continuous import Normal
from .distribution import Distribution, sum_rightmost
from .transforms import ComposeTransform, ExpTransform, StickBreakingTransform, Transform

__all__ = ["Independent", "TransformedDistribution", "LogNormal", "LogisticNormal"]


class Independent(Distribution):
    """`base_distribution` with its `reinterpreted_batch_ndims` rightmost batch dimensions
    read as event dimensions (log_prob and entropy sum over them)."""

    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = reinterpreted_batch_ndims
        if n > len(base_distribution.batch_shape):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= "
                             f"len(base_distribution.batch_shape), actual {n} vs "
                             f"{len(base_distribution.batch_shape)}")
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        base = self.base_dist.expand(batch_shape + tuple(
            self.event_shape[:self.reinterpreted_batch_ndims]))
        new = Independent(base, self.reinterpreted_batch_ndims, validate_args=False)
        new._validate_args = self._validate_args
        return new

    has_rsample = property(lambda self: self.base_dist.has_rsample)
    # (a cartesian product of supports is not enumerated; with no dims reinterpreted, the
    # base's support is this one's)
    has_enumerate_support = property(lambda self: self.reinterpreted_batch_ndims == 0
                                     and self.base_dist.has_enumerate_support)

    def enumerate_support(self, expand=True):
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Independent.enumerate_support: enumeration over the "
                                      "cartesian product of the reinterpreted dims is not "
                                      "implemented (reinterpreted_batch_ndims > 0)")
        return self.base_dist.enumerate_support(expand=expand)

    @constraints.dependent_property
    def support(self):
        s = self.base_dist.support
        return s if self.reinterpreted_batch_ndims == 0 or s is None else \
            constraints.independent(s, self.reinterpreted_batch_ndims)

    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


class TransformedDistribution(Distribution):
    """The distribution of t_n(...t_1(x)) for x ~ `base_distribution`; the base is expanded
    and read as Independent where the transforms need more dims than its event has."""

    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        elif not isinstance(transforms, list):
            raise ValueError(f"transforms must be a Transform or list, but was {transforms}")
        elif not all(isinstance(t, Transform) for t in transforms):
            raise ValueError("transforms must be a Transform or a list of Transforms")
        self.transforms = transforms
        base_shape = base_distribution.batch_shape + base_distribution.event_shape
        base_event_dim = len(base_distribution.event_shape)
        chain = ComposeTransform(self.transforms)
        if len(base_shape) < chain.domain.event_dim:
            raise ValueError(f"base_distribution needs to have shape with size at least "
                             f"{chain.domain.event_dim}, but got {base_shape}.")
        shape = flow.Size(chain.forward_shape(base_shape))
        expanded_base_shape = flow.Size(chain.inverse_shape(shape))
        if base_shape != expanded_base_shape:
            base_distribution = base_distribution.expand(
                expanded_base_shape[:len(expanded_base_shape) - base_event_dim])
        if chain.domain.event_dim > base_event_dim:
            base_distribution = Independent(base_distribution,
                                            chain.domain.event_dim - base_event_dim)
        self.base_dist = base_distribution
        # the event covers what the transforms couple and what the base already coupled
        event_dim = max(chain.codomain.event_dim, base_event_dim + chain.codomain.event_dim
                        - chain.domain.event_dim)
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = object.__new__(type(self)) if _instance is None else _instance
        new.__dict__.update(self.__dict__)  # a subclass's settings; its tensors it expands
        shape = flow.Size(batch_shape) + self.event_shape
        for t in reversed(self.transforms):
            shape = t.inverse_shape(shape)
        new.base_dist = self.base_dist.expand(shape[:len(shape) - len(self.base_dist.event_shape)])
        return self._expanded(batch_shape, self.event_shape, new)

    has_rsample = property(lambda self: self.base_dist.has_rsample)

    @constraints.dependent_property(is_discrete=False)
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        if len(self.event_shape) > support.event_dim:
            support = constraints.independent(support, len(self.event_shape) - support.event_dim)
        return support

    def sample(self, sample_shape=()):
        with flow.no_grad():
            return self._push(self.base_dist.sample(sample_shape))

    def rsample(self, sample_shape=()):
        return self._push(self.base_dist.rsample(sample_shape))

    def _push(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            log_prob = log_prob - sum_rightmost(t.log_abs_det_jacobian(x, y),
                                                event_dim - t.domain.event_dim)
            y = x
        return log_prob + sum_rightmost(self.base_dist.log_prob(y),
                                        event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value):
        """Flip value to 1 - value where the transforms decrease, so the cdf increases."""
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        return value if isinstance(sign, int) and sign == 1 else sign * (value - 0.5) + 0.5

    def cdf(self, value):
        for t in reversed(self.transforms):
            value = t.inv(value)
        if self._validate_args:
            self.base_dist._validate_sample(value)
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value):
        return self._push(self.base_dist.icdf(self._monotonize_cdf(value)))


class LogNormal(TransformedDistribution):
    """exp of a Normal(loc, scale)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        super().__init__(Normal(loc, scale, validate_args=validate_args), ExpTransform(),
                         validate_args=validate_args)

    loc = property(lambda self: self.base_dist.loc)
    scale = property(lambda self: self.base_dist.scale)
    mean = property(lambda self: (self.loc + self.scale ** 2 / 2).exp())
    mode = property(lambda self: (self.loc - self.scale ** 2).exp())

    def icdf(self, value):
        return self.base_dist.icdf(value).exp()

    @property
    def variance(self):
        s2 = self.scale ** 2
        return flow.expm1(s2) * (2 * self.loc + s2).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class LogisticNormal(TransformedDistribution):
    """A Normal(loc, scale) over K reals pushed onto the simplex of K + 1 entries by
    StickBreakingTransform."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand([1])
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    loc = property(lambda self: self.base_dist.base_dist.loc)
    scale = property(lambda self: self.base_dist.base_dist.scale)
