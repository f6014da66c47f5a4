"""cov's weight checks and promotion, bincount's bool and empty cases, against torch (cov
took negative or integer observation weights silently, and cast float64 weights down)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

X = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)

RAISE = [
    lambda m, x: m.cov(x, fweights=m.tensor([1, -1, 2, 1])),
    lambda m, x: m.cov(x, aweights=m.tensor([1, 2, 3, 4])),
    lambda m, x: m.cov(x, aweights=m.tensor([1.0, -2, 3, 4])),
    lambda m, x: m.cov(x, fweights=m.tensor([1.0, 2, 3, 4])),
    lambda m, x: m.cov(x, fweights=m.tensor([[1, 2, 3, 4]])),
    lambda m, x: m.cov(x, aweights=m.tensor([1.0, 2, 3])),
]


@pytest.mark.parametrize("call", RAISE)
def test_cov_refuses_bad_weights_as_torch(call):
    for m in (torch, flow):
        with pytest.raises(RuntimeError, match="cov"):
            call(m, m.tensor(X))


@pytest.mark.parametrize("call", [
    lambda m, x: m.cov(x, fweights=m.tensor([1, 2, 0, 3]),
                       aweights=m.tensor([0.5, 1, 2, 0.1]), correction=2),
    lambda m, x: m.cov(x, aweights=m.tensor([0.5, 1, 2, 0.1], dtype=m.float64)),
    lambda m, x: m.cov(x[0], fweights=m.tensor([2, 1, 1, 3])),
])
def test_cov_weights_against_torch(call):
    got, want = call(flow, flow.tensor(X)), call(torch, torch.tensor(X))
    assert got.dtype.name == str(want.dtype).split(".")[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)


def test_bincount_edges_as_torch():
    for m in (torch, flow):
        with pytest.raises(NotImplementedError):
            m.bincount(m.tensor([True, False]))
        empty = m.bincount(m.tensor([], dtype=m.int64), weights=m.tensor([], dtype=m.float64),
                           minlength=3)
        assert empty.dtype == m.int64 and empty.tolist() == [0, 0, 0]
