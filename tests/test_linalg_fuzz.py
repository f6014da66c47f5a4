"""torch.linalg over its options (solve left/right, cholesky upper, qr modes, eigh UPLO, svd
full_matrices, norms of every ord, cond, matrix_power, solve_triangular, lu_solve, lstsq,
multi_dot, ...) on batched, empty-batch and 1x1 inputs against torch, values and gradients
(decompositions through what their gauge leaves fixed): see tests/linalg_fuzz.py."""
from __future__ import annotations

import fuzz_common
import linalg_fuzz as lf
import numpy as np
import pytest
import torch

import flowgrad as flow


@pytest.mark.parametrize("seed", range(300))
def test_linalg_case_matches_torch(seed):
    verdict = lf.check(seed)
    assert verdict is None, f"{lf.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_linalg_cases_match_torch():
    fuzz_common.assert_seeds_agree(lf.check, range(300, 3000))


def test_eigh_gradient_of_a_symmetric_leaf_is_symmetric_as_torch():
    # before: the eigenvector part used all of V^T gV, so a symmetric parameter updated by
    # its gradient stopped being symmetric
    rng = np.random.default_rng(0)
    b = rng.standard_normal((3, 3))
    up = rng.standard_normal((3, 3))
    grads = []
    for m in (torch, flow):
        x = m.tensor(b + b.T, requires_grad=True)
        w, v = m.linalg.eigh(x)
        loss = (((v * m.tensor([1.0, 2.0, 3.0], dtype=m.float64)) @ v.mT) *
                m.tensor(up)).sum()
        grads.append(m.autograd.grad(loss, x)[0].numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(grads[1], grads[1].T, rtol=1e-12, atol=1e-14)


def test_solve_on_the_right_refuses_a_vector_as_torch():
    with pytest.raises(RuntimeError, match="XA = B"):
        flow.linalg.solve(flow.eye(3, dtype=flow.float64).expand(2, 3, 3),
                          flow.ones(2, 3, dtype=flow.float64), left=False)
