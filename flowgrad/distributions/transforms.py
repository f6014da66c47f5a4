"""Transforms for TransformedDistribution and for constrained parameters, as
torch.distributions.transforms: `y = t(x)`, `x = t.inv(y)`, `t.log_abs_det_jacobian(x, y)`,
with domain and codomain constraints, shape inference and a one-value cache.

>>> import flowgrad as flow
>>> t = ComposeTransform([AffineTransform(1.0, 2.0), ExpTransform()])
>>> t(flow.tensor([0.0]))
tensor([2.7183])
>>> StickBreakingTransform()(flow.zeros(2))
tensor([0.3333, 0.3333, 0.3333])
"""
from __future__ import annotations

import math
import numbers

import flowgrad as flow

from . import constraints
from .distribution import broadcast_all, lazy_property, sum_rightmost
from .transform_base import ComposeTransform, Transform, identity_transform

__all__ = ["Transform", "ComposeTransform", "identity_transform", "IndependentTransform",
           "ReshapeTransform", "ExpTransform", "PowerTransform", "SigmoidTransform",
           "SoftplusTransform", "TanhTransform", "AbsTransform", "AffineTransform",
           "CorrCholeskyTransform", "SoftmaxTransform", "StickBreakingTransform",
           "LowerCholeskyTransform", "PositiveDefiniteTransform", "CatTransform",
           "StackTransform", "CumulativeDistributionTransform"]


class IndependentTransform(Transform):
    """`base_transform` with `reinterpreted_batch_ndims` more rightmost dims read as event
    dims: the map is unchanged, log_abs_det_jacobian sums over them."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else IndependentTransform(
            self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    domain = property(lambda self: constraints.independent(self.base_transform.domain,
                                                           self.reinterpreted_batch_ndims))
    codomain = property(lambda self: constraints.independent(self.base_transform.codomain,
                                                             self.reinterpreted_batch_ndims))
    bijective = property(lambda self: self.base_transform.bijective)
    sign = property(lambda self: self.base_transform.sign)

    def _call(self, x):
        _check_rank(self, x.shape, self.domain.event_dim)
        return self.base_transform(x)

    def _inverse(self, y):
        _check_rank(self, y.shape, self.codomain.event_dim)
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y),
                             self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_transform!r}, " \
               f"{self.reinterpreted_batch_ndims})"


def _check_rank(transform, shape, rank):
    if len(shape) < rank:
        raise ValueError(f"{type(transform).__name__}: too few dimensions on input: expected "
                         f"at least {rank}, got shape {tuple(shape)}")


class ReshapeTransform(Transform):
    """Reshape the rightmost `in_shape` of a tensor to `out_shape` (unit Jacobian)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape, self.out_shape = flow.Size(in_shape), flow.Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError(f"ReshapeTransform: in_shape {tuple(self.in_shape)} and out_shape "
                             f"{tuple(self.out_shape)} have different numbers of elements")
        super().__init__(cache_size)

    domain = property(lambda self: constraints.independent(constraints.real,
                                                           len(self.in_shape)))
    codomain = property(lambda self: constraints.independent(constraints.real,
                                                             len(self.out_shape)))

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        return x.reshape((*x.shape[:x.dim() - len(self.in_shape)], *self.out_shape))

    def _inverse(self, y):
        return y.reshape((*y.shape[:y.dim() - len(self.out_shape)], *self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(x.shape[:x.dim() - len(self.in_shape)])

    def forward_shape(self, shape):
        return self._swap(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._swap(shape, self.out_shape, self.in_shape)

    def _swap(self, shape, old, new):
        _check_rank(self, shape, len(old))
        cut = len(shape) - len(old)
        if tuple(shape[cut:]) != tuple(old):
            raise ValueError(f"ReshapeTransform: shape mismatch: expected trailing "
                             f"{tuple(old)} but got {tuple(shape[cut:])}")
        return flow.Size(tuple(shape[:cut]) + tuple(new))


def _equal_by_class(cls):
    """Class decorator: any two instances of `cls` are equal (torch's == for the transforms
    without parameters)."""
    cls.__eq__ = lambda self, other: isinstance(other, cls)
    return cls


@_equal_by_class
class ExpTransform(Transform):
    """y = exp(x)."""

    codomain = constraints.positive
    bijective = True
    sign = 1

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
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            PowerTransform(self.exponent, cache_size=cache_size)

    @lazy_property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and \
            bool(self.exponent.eq(other.exponent).all().item())

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return flow.broadcast_shapes(shape, self.exponent.shape)

    inverse_shape = forward_shape


def _clipped_sigmoid(x):
    finfo = flow.finfo(x.dtype)
    return flow.sigmoid(x).clamp(min=finfo.tiny, max=1.0 - finfo.eps)


@_equal_by_class
class SigmoidTransform(Transform):
    """y = sigmoid(x), x = logit(y); y kept inside (0, 1) in floating point."""

    codomain = constraints.unit_interval
    bijective = True
    sign = 1

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        finfo = flow.finfo(y.dtype)
        y = y.clamp(min=finfo.tiny, max=1.0 - finfo.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        softplus = flow.nn.functional.softplus
        return -softplus(-x) - softplus(x)


@_equal_by_class
class SoftplusTransform(Transform):
    """y = log(1 + exp(x))."""

    codomain = constraints.positive
    bijective = True
    sign = 1

    def _call(self, x):
        return flow.nn.functional.softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -flow.nn.functional.softplus(-x)


@_equal_by_class
class TanhTransform(Transform):
    """y = tanh(x); the inverse is not clamped (use cache_size=1 near +-1)."""

    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = 1

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return flow.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) without cancellation for large |x|
        return 2.0 * (math.log(2.0) - x - flow.nn.functional.softplus(-2.0 * x))


@_equal_by_class
class AbsTransform(Transform):
    """y = |x| (not bijective: the inverse is the positive branch)."""

    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, over `event_dim` rightmost dimensions."""

    bijective = True

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

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            AffineTransform(self.loc, self.scale, self._event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
                if a != b:
                    return False
            elif not bool((a == b).all().item()):
                return False
        return True

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Number):
            return 1 if self.scale > 0 else -1 if self.scale < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if isinstance(self.scale, numbers.Number):
            result = flow.full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self._event_dim:
            result = result.reshape(*result.shape[:result.dim() - self._event_dim], -1).sum(-1)
            shape = shape[:len(shape) - self._event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return flow.broadcast_shapes(shape, getattr(self.loc, "shape", ()),
                                     getattr(self.scale, "shape", ()))

    inverse_shape = forward_shape


def _tril_mask(n, diag):
    rows = flow.arange(n)
    return rows < rows.view(-1, 1) + (diag + 1)


def _tril_to_vec(matrix, diag=0):
    """The entries on and below diagonal `diag`, in row order, as the last dim."""
    n = matrix.shape[-1]
    if not -n <= diag < n:
        raise ValueError(f"diag ({diag}) is outside [{-n}, {n - 1}] for {n} x {n} matrices")
    return matrix[..., _tril_mask(n, diag)]


def _vec_to_tril(vec, diag=0):
    """The inverse of `_tril_to_vec`: a (D, D) lower-triangular matrix per vector."""
    # the positive root of D^2 + (1 + 2 diag) D - |diag| (diag + 1) - 2 N = 0
    b = 1 + 2 * diag
    n = (-b + (b * b + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if abs(round(n) - n) > flow.finfo(vec.dtype).eps:
        raise ValueError(f"The size of last dimension is {vec.shape[-1]} which cannot be "
                         f"expressed as the lower triangular part of a square D x D matrix.")
    n = round(n)
    matrix = vec.new_zeros(tuple(vec.shape[:-1]) + (n, n))
    matrix[..., _tril_mask(n, diag)] = vec
    return matrix


def _pad_last(x, left, right, value):
    return flow.nn.functional.pad(x, [left, right], value=value)


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length D(D-1)/2 to Cholesky factors of D x D correlation
    matrices: tanh maps each entry into (-1, 1), then a signed stick-breaking per row of the
    strict lower triangle gives rows of unit norm."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        eps = flow.finfo(x.dtype).eps
        r = _vec_to_tril(x.tanh().clamp(min=-1 + eps, max=1 - eps), diag=-1)
        # y_ij = r_ij * sqrt(prod_{k<j} (1 - r_ik^2)): stick-breaking on the squares
        remaining = (1 - r * r).sqrt().cumprod(-1)
        r = r + flow.eye(r.shape[-1], dtype=r.dtype)
        return r * _pad_last(remaining[..., :-1], 1, 0, 1.0)

    def _inverse(self, y):
        remaining = _pad_last((1 - (y * y).cumsum(-1))[..., :-1], 1, 0, 1.0)
        t = _tril_to_vec(y, diag=-1) / _tril_to_vec(remaining, diag=-1).sqrt()
        return (t.log1p() - t.neg().log1p()) / 2

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        # of x and the strict lower triangle of y: the two spaces differ in dimension.
        # diag=-2 reads the cumulative sums already shifted one column to the right.
        remaining = _tril_to_vec(1 - (y * y).cumsum(-1), diag=-2)
        stick_breaking = 0.5 * remaining.log().sum(-1)
        tanh = -2 * (x + flow.nn.functional.softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking + tanh

    def forward_shape(self, shape):
        _check_rank(self, shape, 1)
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError(f"CorrCholeskyTransform: the last dimension ({n}) is not "
                             f"D * (D - 1) / 2 for any D")
        return flow.Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        _check_rank(self, shape, 2)
        if shape[-2] != shape[-1]:
            raise ValueError(f"CorrCholeskyTransform: the input is not square: "
                             f"{tuple(shape)}")
        d = shape[-1]
        return flow.Size(tuple(shape[:-2]) + (d * (d - 1) // 2,))


@_equal_by_class
class SoftmaxTransform(Transform):
    """Reals to the simplex by exp and normalising (not bijective: the inverse is log)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        _check_rank(self, shape, 1)
        return shape

    inverse_shape = forward_shape


def _stick_offsets(k, like):
    return flow.arange(k, 0, -1, dtype=like.dtype)


@_equal_by_class
class StickBreakingTransform(Transform):
    """Reals (..., K) to the simplex (..., K + 1) by stick breaking: each sigmoid takes its
    share of what is left. Bijective, so fit for HMC; mixes coordinates."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def _call(self, x):
        # the offsets make x = 0 the simplex's centre
        z = _clipped_sigmoid(x - _stick_offsets(x.shape[-1], x).log())
        left = (1 - z).cumprod(-1)
        return _pad_last(z, 0, 1, 1.0) * _pad_last(left, 1, 0, 1.0)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        # clamped: rounding can leave no stick when y[..., -1] ~ 0
        left = (1 - y_crop.cumsum(-1)).clamp(min=flow.finfo(y.dtype).tiny)
        return y_crop.log() - left.log() + _stick_offsets(y_crop.shape[-1], y).log()

    def log_abs_det_jacobian(self, x, y):
        x = x - _stick_offsets(x.shape[-1], x).log()
        # 1 - sigmoid(x) = exp(-x) sigmoid(x)
        return (-x + flow.nn.functional.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        _check_rank(self, shape, 1)
        return flow.Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        _check_rank(self, shape, 1)
        return flow.Size(tuple(shape[:-1]) + (shape[-1] - 1,))


@_equal_by_class
class LowerCholeskyTransform(Transform):
    """Unconstrained matrices to lower-triangular ones with a positive diagonal (exp)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


@_equal_by_class
class PositiveDefiniteTransform(Transform):
    """Unconstrained matrices to positive-definite ones, L @ L.mT with L lower Cholesky."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(flow.linalg.cholesky(y))


class _Pieces(Transform):
    """What CatTransform and StackTransform share: one transform per piece along `dim`."""

    def __init__(self, tseq, dim=0, cache_size=0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError(f"{type(self).__name__}: every element of tseq must be a "
                                 f"Transform")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size)
        self.transforms, self.dim = list(tseq), dim

    bijective = property(lambda self: all(t.bijective for t in self.transforms))

    def _check(self, value, size, what):
        if not -value.dim() <= self.dim < value.dim():
            raise AssertionError(f"{type(self).__name__}: dim {self.dim} is out of range for "
                                 f"a tensor of shape {tuple(value.shape)}")
        if value.size(self.dim) != size:
            raise AssertionError(f"{type(self).__name__}: the size of dim {self.dim} is "
                                 f"{value.size(self.dim)}, but it must equal {what} ({size})")


class CatTransform(_Pieces):
    """Apply `tseq[i]` to the i-th piece (of `lengths[i]`, default 1) along `dim`, as
    torch.cat joins pieces."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        super().__init__(tseq, dim, cache_size)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"CatTransform: {len(self.transforms)} transforms but "
                                 f"{len(self.lengths)} lengths; give one length each")

    @lazy_property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @lazy_property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _pieces(self, value):
        self._check(value, self.length, "the sum of lengths")
        starts = [sum(self.lengths[:i]) for i in range(len(self.lengths))]
        return [value.narrow(self.dim, i, n) for i, n in zip(starts, self.lengths)]

    def _call(self, x):
        return flow.cat([t(p) for t, p in zip(self.transforms, self._pieces(x))], self.dim)

    def _inverse(self, y):
        return flow.cat([t.inv(p) for t, p in zip(self.transforms, self._pieces(y))],
                        self.dim)

    def log_abs_det_jacobian(self, x, y):
        terms = [sum_rightmost(t.log_abs_det_jacobian(a, b), self.event_dim - t.event_dim)
                 for t, a, b in zip(self.transforms, self._pieces(x), self._pieces(y))]
        # dim inside the event: the pieces' terms add up; in the batch: they are joined
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        return flow.cat(terms, dim) if dim < 0 else sum(terms)

    domain = property(lambda self: constraints.cat([t.domain for t in self.transforms],
                                                   self.dim, self.lengths))
    codomain = property(lambda self: constraints.cat([t.codomain for t in self.transforms],
                                                     self.dim, self.lengths))


class StackTransform(_Pieces):
    """Apply `tseq[i]` to the i-th slice along `dim`, as torch.stack joins slices."""

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else \
            StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, value):
        self._check(value, len(self.transforms), "the number of transforms")
        return [value.select(self.dim, i) for i in range(value.size(self.dim))]

    def _call(self, x):
        return flow.stack([t(s) for t, s in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y):
        return flow.stack([t.inv(s) for t, s in zip(self.transforms, self._slices(y))],
                          self.dim)

    def log_abs_det_jacobian(self, x, y):
        terms = [t.log_abs_det_jacobian(a, b)
                 for t, a, b in zip(self.transforms, self._slices(x), self._slices(y))]
        return flow.stack(terms, self.dim)

    domain = property(lambda self: constraints.stack([t.domain for t in self.transforms],
                                                     self.dim))
    codomain = property(lambda self: constraints.stack([t.codomain for t in self.transforms],
                                                       self.dim))


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x) (a copula's margins): the inverse is its icdf and the log
    Jacobian its log_prob."""

    bijective = True
    codomain = constraints.unit_interval
    sign = 1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size)
        self.distribution = distribution

    domain = property(lambda self: self.distribution.support)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)
