"""Bijective transforms for TransformedDistribution, as torch.distributions.transforms:
`y = t(x)`, `x = t.inv(y)`, `t.log_abs_det_jacobian(x, y)`, with domain and codomain.

>>> import flowgrad as flow
>>> t = ComposeTransform([AffineTransform(1.0, 2.0), ExpTransform()])
>>> t(flow.tensor([0.0]))
tensor([2.7183])
"""
from __future__ import annotations

import math

import flowgrad as flow

from . import constraints
from .distribution import sum_rightmost

__all__ = ["Transform", "ComposeTransform", "ExpTransform", "AffineTransform",
           "SigmoidTransform", "TanhTransform", "PowerTransform", "AbsTransform",
           "SoftplusTransform", "identity_transform"]


class Transform:
    """Base class: subclasses give `_call`, `_inverse`, `log_abs_det_jacobian`."""

    bijective = True
    sign = 1
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size=0):
        self.cache_size = cache_size
        self._cached = (None, None)

    @property
    def event_dim(self):
        return self.domain.event_dim

    @property
    def inv(self):
        return _InverseTransform(self)

    def __call__(self, x):
        if self.cache_size and self._cached[0] is x:
            return self._cached[1]
        y = self._call(x)
        if self.cache_size:
            self._cached = (x, y)
        return y

    def _inv_call(self, y):
        if self.cache_size and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self.cache_size:
            self._cached = (x, y)
        return x

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        super().__init__()
        self._inv = transform

    domain = property(lambda self: self._inv.codomain)
    codomain = property(lambda self: self._inv.domain)
    sign = property(lambda self: self._inv.sign)
    inv = property(lambda self: self._inv)

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)


class ComposeTransform(Transform):
    """Apply `parts` in order."""

    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size)
        self.parts = list(parts)

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        dom = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        return dom if event_dim == dom.event_dim else constraints.independent(
            dom, event_dim - dom.event_dim)

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        cod = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        return cod if event_dim == cod.event_dim else constraints.independent(
            cod, event_dim - cod.event_dim)

    @property
    def sign(self):
        s = 1
        for p in self.parts:
            s = s * p.sign
        return s

    @property
    def inv(self):
        return ComposeTransform([p.inv for p in reversed(self.parts)])

    def _call(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y):
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return flow.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms, event_dim = [], self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(sum_rightmost(part.log_abs_det_jacobian(a, b),
                                       event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        return total


class _Identity(ComposeTransform):
    def __init__(self):
        super().__init__([])


identity_transform = _Identity()


class ExpTransform(Transform):
    """y = exp(x)."""

    codomain = constraints.positive

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent (x > 0)."""

    domain = constraints.positive
    codomain = constraints.positive

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size)
        self.exponent = exponent

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()


class SigmoidTransform(Transform):
    """y = sigmoid(x)."""

    codomain = constraints.unit_interval

    def _call(self, x):
        return flow.sigmoid(x)

    def _inverse(self, y):
        eps = flow.finfo(y.dtype).eps
        y = y.clamp(eps, 1 - eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        softplus = flow.nn.functional.softplus
        return -softplus(-x) - softplus(x)


class SoftplusTransform(Transform):
    """y = log(1 + exp(x))."""

    codomain = constraints.positive

    def _call(self, x):
        return flow.nn.functional.softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -flow.nn.functional.softplus(-x)


class TanhTransform(Transform):
    """y = tanh(x)."""

    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return flow.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - flow.nn.functional.softplus(-2.0 * x))


class AbsTransform(Transform):
    """y = |x| (not bijective: the inverse is the positive branch)."""

    bijective = False
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, over `event_dim` rightmost dimensions."""

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return constraints.real if self._event_dim == 0 else \
            constraints.independent(constraints.real, self._event_dim)

    codomain = domain

    @property
    def sign(self):
        return self.scale.sign() if isinstance(self.scale, flow.Tensor) else \
            (1 if self.scale > 0 else -1 if self.scale < 0 else 0)

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        if isinstance(self.scale, flow.Tensor):
            result = self.scale.abs().log()
        else:
            result = flow.full_like(x, math.log(abs(self.scale)))
        if self._event_dim:
            shape = tuple(result.shape[:result.dim() - self._event_dim]) + (-1,)
            result = result.reshape(*shape).sum(-1)
            shape = tuple(shape[:-1])
            return result.expand(*tuple(x.shape[:x.dim() - self._event_dim])) if shape != \
                tuple(x.shape[:x.dim() - self._event_dim]) else result
        return result.expand(*x.shape)
