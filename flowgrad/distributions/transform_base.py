"""The base of every transform, as torch.distributions.transforms.Transform: `y = t(x)`,
`x = t.inv(y)`, `t.log_abs_det_jacobian(x, y)`, domain and codomain constraints, shape
inference and a one-value cache; their composition (`ComposeTransform`) and the identity.
The transforms themselves are in transforms.py.

>>> import flowgrad as flow
>>> identity_transform(flow.tensor([1.0, 2.0]))
tensor([1., 2.])
"""
from __future__ import annotations

import flowgrad as flow

from ..torch_format import loadable
from . import constraints
from .distribution import lazy_property, sum_rightmost

__all__ = ["Transform", "ComposeTransform", "identity_transform"]


@loadable  # (load(weights_only=False) rebuilds it)
class Transform:
    """Base class: subclasses give `_call`, `_inverse` and, when bijective,
    `log_abs_det_jacobian`. With `cache_size=1` the latest (x, y) pair is remembered, so
    `t.inv(t(x))` returns `x` itself."""

    bijective = False
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError(f"{type(self).__name__}: cache_size must be 0 or 1, got "
                             f"{cache_size}")
        self._cache_size = cache_size
        self._inv = None
        self._cached_x_y = (None, None)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_inv"] = None  # a cycle back to this transform; rebuilt on first use
        return state

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError(f"{type(self).__name__} changes the number of event dimensions: "
                         f"read .domain.event_dim or .codomain.event_dim instead")

    @property
    def inv(self):
        """The inverse transform (`t.inv.inv is t`)."""
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    @property
    def sign(self):
        raise NotImplementedError(f"{type(self).__name__} has no sign: only monotone "
                                  f"univariate transforms define it")

    def with_cache(self, cache_size=1):
        """This transform with a cache of `cache_size` (0 or 1)."""
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self).__name__}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __call__(self, x):
        if not self._cache_size:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        if not self._cache_size:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise NotImplementedError(f"{type(self).__name__} does not implement the forward map")

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} does not implement the inverse map")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError(f"{type(self).__name__} does not implement "
                                  f"log_abs_det_jacobian")

    def forward_shape(self, shape):
        """The output shape for an input of `shape`."""
        return shape

    def inverse_shape(self, shape):
        """The input shape for an output of `shape`."""
        return shape

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    """`t.inv`: `t` with its directions swapped (reach it through `Transform.inv`)."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    domain = property(lambda self: self._inv.codomain)
    codomain = property(lambda self: self._inv.domain)
    bijective = property(lambda self: self._inv.bijective)
    sign = property(lambda self: self._inv.sign)
    inv = property(lambda self: self._inv)

    def with_cache(self, cache_size=1):
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    def __repr__(self):
        return f"{type(self).__name__}({self._inv!r})"

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """Apply `parts` in order; each part does its own caching."""

    def __init__(self, parts, cache_size=0):
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size)
        self.parts = list(parts)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        # the chain's input holds as many event dims as the most coupled part needs
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        return domain if event_dim == domain.event_dim else constraints.independent(
            domain, event_dim - domain.event_dim)

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        return codomain if event_dim == codomain.event_dim else constraints.independent(
            codomain, event_dim - codomain.event_dim)

    @lazy_property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @lazy_property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self):
        if self._inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv, inv._inv = inv, self
        return self._inv

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return flow.zeros_like(x)
        xs = [x]  # the intermediates: free when the parts cache
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        total, event_dim = 0, self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            total = total + sum_rightmost(part.log_abs_det_jacobian(a, b),
                                          event_dim - part.domain.event_dim)
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return total

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self):
        return f"{type(self).__name__}(\n    " + ",\n    ".join(map(repr, self.parts)) + "\n)"


identity_transform = ComposeTransform([])
