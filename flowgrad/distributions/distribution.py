"""The Distribution base class and its helpers, as torch.distributions.Distribution:
batch and event shapes, parameter validation, sample / rsample, expand.

>>> import flowgrad as flow
>>> from flowgrad.distributions import Normal
>>> d = Normal(flow.zeros(3), 1.0)
>>> d.batch_shape, d.sample((2,)).shape
(flowgrad.Size([3]), flowgrad.Size([2, 3]))
"""
from __future__ import annotations

import functools
import math

import flowgrad as flow

from ..autograd.interpreter import require
from ..tensor import Tensor
from ..torch_format import loadable
from . import constraints

__all__ = ["Distribution", "broadcast_all", "lazy_property", "logits_to_probs",
           "probs_to_logits", "sum_rightmost", "clamp_probs"]

_VALIDATE = [True]  # torch's default is __debug__ (on unless python -O)


class lazy_property:
    """Computed on first read and stored on the instance (torch's `lazy_property`)."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        value = self.fn(obj)
        obj.__dict__[self.fn.__name__] = value
        return value


def broadcast_all(*values):
    """The values as tensors of one broadcast shape (numbers take the tensors' dtype)."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    dtype = tensors[0].dtype if tensors else flow.get_default_dtype()
    if not tensors:
        return tuple(flow.tensor(float(v), dtype=dtype) for v in values)
    as_t = [v if isinstance(v, Tensor) else flow.tensor(float(v), dtype=dtype) for v in values]
    return tuple(flow.broadcast_tensors(*as_t))


def clamp_probs(probs):
    eps = flow.finfo(probs.dtype).eps
    return probs.clamp(eps, 1 - eps)


def logits_to_probs(logits, is_binary=False):
    return flow.sigmoid(logits) if is_binary else flow.softmax(logits, -1)


def probs_to_logits(probs, is_binary=False):
    p = clamp_probs(probs)
    return flow.log(p) - flow.log1p(-p) if is_binary else flow.log(p)


def sum_rightmost(value, dim):
    """Sum out the rightmost `dim` dimensions."""
    return value.reshape(*value.shape[:value.dim() - dim], -1).sum(-1) if dim > 0 else value


@loadable  # (load(weights_only=False) rebuilds it)
class Distribution:
    """Base class: subclasses set `arg_constraints`, `support` and implement what they can
    of rsample / sample, log_prob, entropy, mean, variance, cdf, icdf, enumerate_support."""

    has_rsample = False
    has_enumerate_support = False
    arg_constraints = {}
    support = None

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError("set_default_validate_args: expected True or False")
        _VALIDATE[0] = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = flow.Size(batch_shape)
        self._event_shape = flow.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(
                        getattr(type(self), param, None), lazy_property):
                    continue  # the other parametrisation was given (probs vs logits)
                value = getattr(self, param)
                require(constraint.check(value), (
                    f"Expected parameter {param} ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                    f"constraint {constraint!r}, but found invalid values"), shown=value)

    @property
    def _validate_args(self):
        return self.__dict__.get("_validate_args_", _VALIDATE[0])

    @_validate_args.setter
    def _validate_args(self, value):
        self.__dict__["_validate_args_"] = value

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def _extended_shape(self, sample_shape=()):
        return flow.Size(tuple(sample_shape) + tuple(self._batch_shape)
                         + tuple(self._event_shape))

    def sample(self, sample_shape=()):
        """Draw samples (no gradient)."""
        with flow.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised sampler "
                                  f"(rsample); use sample()")

    def sample_n(self, n):
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self):
        return flow.exp(self.entropy())

    def enumerate_support(self, expand=True):
        raise NotImplementedError(f"{type(self).__name__} does not enumerate its support")

    def _params(self):
        return [k for k in self.arg_constraints if k in self.__dict__]

    def _expanded(self, batch_shape, event_shape=None, _instance=None):
        """A blank instance of this class (or `_instance`) with the given shapes (event_shape:
        this one's), its parameters unchecked, validating as this one does: what an `expand`
        fills in with its expanded parameters."""
        new = object.__new__(type(self)) if _instance is None else _instance
        Distribution.__init__(new, batch_shape,
                              self._event_shape if event_shape is None else event_shape,
                              validate_args=False)
        new._validate_args = self._validate_args
        return new

    def expand(self, batch_shape, _instance=None):
        """The same distribution with its parameters broadcast to `batch_shape`."""
        batch_shape = flow.Size(batch_shape)
        new = object.__new__(type(self))
        old = len(self._batch_shape)
        for k, v in self.__dict__.items():
            if isinstance(v, Tensor) and k not in ("_batch_shape", "_event_shape"):
                v = v.expand((*batch_shape, *v.shape[old:]))
            elif isinstance(v, Distribution):  # (a base_dist it samples through)
                v = v.expand(tuple(batch_shape) + tuple(v.batch_shape)[old:])
            new.__dict__[k] = v
        new._batch_shape = batch_shape
        return new

    def _validate_sample(self, value):
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim = len(self._event_shape)
        if tuple(value.shape[value.dim() - event_dim:]) != tuple(self._event_shape) and \
                event_dim:
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{tuple(value.shape)} vs {tuple(self._event_shape)}.")
        actual = tuple(value.shape[:value.dim() - event_dim])
        expected = tuple(self._batch_shape)
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{tuple(value.shape)} vs {self._extended_shape()}.")
        support = self.support
        if support is None or constraints.is_dependent(support):
            return
        require(support.check(value), (
            f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) "
            f"to be within the support ({support!r}) of the distribution {self!r}, but found "
            f"invalid values"), shown=value)

    def __repr__(self):
        parts = []
        for k in self._params():
            v = self.__dict__[k]
            parts.append(f"{k}: {v if v.numel() == 1 else v.size()}")
        return f"{type(self).__name__}({', '.join(parts)})"


LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))
