"""Empty tensors through function transforms, against torch.func: a Jacobian whose output
has no elements (jacrev vmapped over an empty basis raised IndexError), and vmap over a batch
of no examples through an op without a batching rule (the per-example loop had no result to
stack: IndexError). Found by vmap_fuzz's chain mode (seed 100871)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

X = np.array([[-0.94, -0.63, 0.46, -1.08], [0.1, 0.2, 0.3, 0.4]])


def _shapes_and_values(result):
    parts = result if isinstance(result, tuple) else (result,)
    return [(tuple(p.shape), p.detach().numpy()) for p in parts]


JACOBIANS = {
    "jacrev": lambda m, f: m.func.jacrev(f)(m.tensor(X[0])),
    "vmap_jacrev": lambda m, f: m.func.vmap(m.func.jacrev(f))(m.tensor(X)),
    "jacfwd": lambda m, f: m.func.jacfwd(f)(m.tensor(X[0])),
    "vmap_jacfwd": lambda m, f: m.func.vmap(m.func.jacfwd(f))(m.tensor(X)),
    "hessian": lambda m, f: m.func.hessian(lambda x: f(x)[0].sum())(m.tensor(X[0])),
}


@pytest.mark.parametrize("how", sorted(JACOBIANS))
def test_jacobians_with_an_empty_output_as_torch(how):
    def run(m):
        return _shapes_and_values(JACOBIANS[how](m, lambda x: (x.sin() * 2, x.narrow(0, 3, 0))))
    ours, theirs = run(flow), run(torch)
    assert [s for s, _ in ours] == [s for s, _ in theirs]
    for (_, a), (_, b) in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12)


OPS = {"sort": lambda m, x: x.sort(), "det": lambda m, x: m.linalg.det(x),
       "sin": lambda m, x: x.sin(), "cumsum": lambda m, x: x.cumsum(0)}


@pytest.mark.parametrize("name", sorted(OPS))
def test_vmap_over_no_examples_as_torch(name):
    def run(m):
        return [s for s, _ in _shapes_and_values(
            m.func.vmap(lambda x: OPS[name](m, x))(m.zeros(0, 3, 3, dtype=m.float64)))]
    assert run(flow) == run(torch)
