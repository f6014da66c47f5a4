"""Constraints on distribution parameters and supports, as torch.distributions.constraints:
each has `check(value)` (a bool tensor), `is_discrete` and `event_dim`.

>>> import flowgrad as flow
>>> positive.check(flow.tensor([1.0, -1.0]))
tensor([ True, False])
"""
from __future__ import annotations

import flowgrad as flow

__all__ = ["Constraint", "boolean", "real", "real_vector", "positive", "nonnegative",
           "nonnegative_integer", "positive_integer", "unit_interval", "simplex", "interval",
           "half_open_interval", "greater_than", "greater_than_eq", "less_than",
           "integer_interval", "independent", "lower_cholesky", "positive_definite",
           "lower_triangular", "dependent", "dependent_property", "is_dependent"]


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


class dependent_property(property):
    """A property that is also a dependent constraint (`@constraints.dependent_property`)."""

    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        super().__init__(fn)
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


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, value):
        sym = ((value - value.mT).abs() < 1e-6).flatten(-2).all(-1)
        return sym & (flow.linalg.eigvalsh(value) > 0).all(-1)


dependent = _Dependent()
boolean = _Boolean()
real = _Real()
real_vector = _Independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThan(0.0, eq=True)
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
independent = _Independent


def greater_than_eq(lower_bound):
    return _GreaterThan(lower_bound, eq=True)


def half_open_interval(lower_bound, upper_bound):
    return _Interval(lower_bound, upper_bound, half_open=True)
