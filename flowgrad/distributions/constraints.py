"""Constraints on distribution parameters and supports, as torch.distributions.constraints:
each has `check(value)` (a bool tensor), `is_discrete` and `event_dim`.

>>> import flowgrad as flow
>>> positive.check(flow.tensor([1.0, -1.0]))
tensor([ True, False])
"""
from __future__ import annotations

import flowgrad as flow

from ..torch_format import loadable

__all__ = ["Constraint", "boolean", "real", "real_vector", "positive", "nonnegative",
           "nonnegative_integer", "positive_integer", "unit_interval", "simplex", "interval",
           "half_open_interval", "greater_than", "greater_than_eq", "less_than",
           "integer_interval", "independent", "lower_cholesky", "positive_definite",
           "lower_triangular", "dependent", "dependent_property", "is_dependent", "one_hot",
           "multinomial", "corr_cholesky", "square", "symmetric", "positive_semidefinite",
           "cat", "stack", "MixtureSameFamilyConstraint"]


@loadable  # (load(weights_only=False) rebuilds it)
class Constraint:
    """A region of values: `check(value)` says, per batch element, whether it lies in it."""

    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__.lstrip("_") + "()"


class _Dependent(Constraint):
    """A constraint that depends on other parameters (a support like interval(low, high))."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, *, is_discrete=False, event_dim=0):
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    return isinstance(constraint, _Dependent)


class dependent_property(property, _Dependent):
    """A property that is also a dependent constraint (`@constraints.dependent_property`)."""

    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        property.__init__(self, fn)
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def __call__(self, fn):
        return dependent_property(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _Real(Constraint):
    def check(self, value):
        return value == value  # false only for nan


class _GreaterThan(Constraint):
    def __init__(self, lower_bound, eq=False):
        self.lower_bound, self.eq = lower_bound, eq

    def check(self, value):
        return value >= self.lower_bound if self.eq else value > self.lower_bound

    def __repr__(self):
        return f"{'GreaterThanEq' if self.eq else 'GreaterThan'}(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    def __init__(self, lower_bound):
        super().__init__(lower_bound, eq=True)


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound, half_open=False):
        self.lower_bound, self.upper_bound, self.half_open = lower_bound, upper_bound, half_open

    def check(self, value):
        upper = value < self.upper_bound if self.half_open else value <= self.upper_bound
        return (value >= self.lower_bound) & upper

    def __repr__(self):
        kind = "HalfOpenInterval" if self.half_open else "Interval"
        return f"{kind}(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def __init__(self, lower_bound, upper_bound):
        super().__init__(lower_bound, upper_bound, half_open=True)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound=None):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        ok = (value % 1 == 0) & (value >= self.lower_bound)
        return ok if self.upper_bound is None else ok & (value <= self.upper_bound)

    def __repr__(self):
        if self.upper_bound is None:
            return f"IntegerGreaterThan(lower_bound={self.lower_bound})"
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Independent(Constraint):
    def __init__(self, base, reinterpreted_batch_ndims):
        self.base_constraint = base
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.is_discrete = base.is_discrete
        self.event_dim = base.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        if result.dim() < self.reinterpreted_batch_ndims:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        for _ in range(self.reinterpreted_batch_ndims):
            result = result.all(-1)
        return result

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, " \
               f"{self.reinterpreted_batch_ndims})"


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return (value.tril() == value).flatten(-2).all(-1)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        tril = (value.tril() == value).flatten(-2).all(-1)
        return tril & (value.diagonal(0, -2, -1) > 0).all(-1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _Multinomial(Constraint):
    """Nonnegative integer counts in the last dim summing to at most `upper_bound`."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return (value >= 0).all(-1) & (value.sum(-1) <= self.upper_bound)


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: positive diagonal, rows of norm 1."""

    event_dim = 2

    def check(self, value):
        tol = flow.finfo(value.dtype).eps * value.size(-1) * 10  # (torch's tolerance)
        row_norm = flow.linalg.norm(value.detach(), dim=-1)
        return lower_cholesky.check(value) & ((row_norm - 1).abs() <= tol).all(-1)


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return flow.full(value.shape[:-2], value.shape[-2] == value.shape[-1],
                         dtype=flow.bool)


class _Symmetric(_Square):
    def check(self, value):
        square = super().check(value)
        if not square.all():
            return square
        return flow.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        symmetric = super().check(value)
        if not symmetric.all():
            return symmetric
        return (flow.linalg.eigvalsh(value) >= 0).all(-1)


class _PositiveDefinite(_Symmetric):
    """As torch's: a batch holding a non-square or non-symmetric matrix gives the symmetry
    check itself; else whether each matrix has a Cholesky factor."""

    def check(self, value):
        symmetric = super().check(value)
        if not symmetric.all():
            return symmetric
        return flow.linalg.cholesky_ex(value).info == 0


class _Cat(Constraint):
    """Constraints `cseq` on consecutive pieces of `lengths` (default 1 each) along `dim`."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq = list(cseq)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise ValueError(f"constraints.cat: {len(self.cseq)} constraints but "
                             f"{len(self.lengths)} lengths; give one length per constraint")
        self.dim = dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        _check_dim("cat", self.dim, value)
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start += length
        return flow.cat(checks, self.dim)


class _Stack(Constraint):
    """Constraint `cseq[i]` on the i-th slice of `dim`."""

    def __init__(self, cseq, dim=0):
        self.cseq, self.dim = list(cseq), dim

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        dim = max(c.event_dim for c in self.cseq)
        return dim + 1 if self.dim + dim < 0 else dim

    def check(self, value):
        _check_dim("stack", self.dim, value)
        n = min(len(self.cseq), value.size(self.dim))  # (torch zips the two)
        return flow.stack([self.cseq[i].check(value.select(self.dim, i)) for i in range(n)],
                          self.dim)


def _check_dim(name, dim, value):
    if not -value.dim() <= dim < value.dim():
        raise ValueError(f"constraints.{name}: dim {dim} is out of range for a value of shape "
                         f"{tuple(value.shape)}")


class MixtureSameFamilyConstraint(Constraint):
    """A mixture's support: its components' support, checked for every component."""

    def __init__(self, base_constraint):
        self.base_constraint = base_constraint

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim

    def __repr__(self):
        return f"{type(self).__name__}({self.base_constraint!r})"

    def check(self, value):
        result = self.base_constraint.check(value.unsqueeze(-1 - self.event_dim))
        if value.dim() < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        keep = value.dim() - self.event_dim
        return result.reshape(tuple(result.shape[:keep]) + (-1,)).all(-1)


dependent = _Dependent()
boolean = _Boolean()
real = _Real()
real_vector = _Independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
nonnegative_integer = _IntegerInterval(0)
positive_integer = _IntegerInterval(1)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
interval = _Interval
integer_interval = _IntegerInterval
greater_than = _GreaterThan
less_than = _LessThan
greater_than_eq = _GreaterThanEq
half_open_interval = _HalfOpenInterval
independent = _Independent
one_hot = _OneHot()
multinomial = _Multinomial
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
cat = _Cat
stack = _Stack

