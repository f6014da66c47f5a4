"""Tensor-op semantics torch users rely on without thinking, each case run in torch and in
flowgrad: the same values (bit for bit where torch rounds once), dtype and shape.

A probe of ~6,000 calls (promotion of every dtype pair and Python scalar, integer division
and remainders, bitwise ops, reductions with every dim form, the sort family, indexing
mixtures, factories, out=) agreed except for these, fixed:
- a tuple inside the index tuple (`x[(0, 1), 2]`, `x[((0, 1),)]`) raised IndexError; torch
  reads it as a sequence, like a list.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow


def _same_bits(t, f):
    assert str(t.dtype).split(".")[-1] == str(f.dtype).split(".")[-1]
    assert tuple(t.shape) == tuple(f.shape)
    np.testing.assert_array_equal(f.float().numpy(), t.float().numpy())


INDEX_ROWS = [
    ("tuple then int", lambda: ((0, 1), 1)),
    ("tuple alone", lambda: ((0, 1),)),
    ("two tuples", lambda: ((1, 0), (2, 1))),
    ("tuple slice tuple", lambda: ((1, 0), slice(None), (3, 0))),
    ("int tuple", lambda: (1, (2, 0, 2))),
    ("tuple of bools", lambda: ((True, False),)),
]


@pytest.mark.parametrize("name,index", INDEX_ROWS, ids=[r[0] for r in INDEX_ROWS])
def test_tuple_inside_the_index_is_a_sequence(name, index):
    got = []
    for m in (torch, flow):
        x = m.arange(24.0).reshape(2, 3, 4).requires_grad_()
        y = x.detach().clone()
        y[index()] = -1.0
        (g,) = m.autograd.grad((x[index()] * 2).sum(), x)
        got.append((x[index()].detach(), y, g))
    for t, f in zip(*got):
        _same_bits(t, f)
