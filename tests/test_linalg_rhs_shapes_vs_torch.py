"""Right-hand sides of the solvers against torch: solve_triangular, cholesky_solve,
triangular_solve and lu_solve read B as a (batch of) matrix, broadcast against A's batch,
while linalg.solve reads a B of A's batch shape and size n as vectors. A (3, 3, 3) beside
B (3, 3) is where the two readings part: the matrix solvers took linalg.solve's vector
reading and gave other numbers without an error. Values and gradients, float64."""
import numpy as np
import pytest
import torch

import flowgrad as flow

R = np.random.default_rng(0)
A3 = np.tril(R.standard_normal((3, 3, 3))) + 3 * np.eye(3)  # lower triangular, batch 3
A2 = np.tril(R.standard_normal((2, 3, 3))) + 3 * np.eye(3)
SPD3 = A3 @ np.swapaxes(A3, -1, -2)
SHAPES = {"B (3, 3), batch 3": (A3, SPD3, R.standard_normal((3, 3))),
          "B (2, 3), batch 3": (A3, SPD3, R.standard_normal((3, 2))),
          "B (1, 3, 3)": (A3, SPD3, R.standard_normal((1, 3, 3))),
          "B (3, 4), batch 2": (A2, A2 @ np.swapaxes(A2, -1, -2), R.standard_normal((3, 4)))}
CALLS = {
    "solve_triangular": lambda m, L, S, B: m.linalg.solve_triangular(L, B, upper=False),
    "solve_triangular upper": lambda m, L, S, B: m.linalg.solve_triangular(L.mT, B, upper=True),
    "solve_triangular right": lambda m, L, S, B: m.linalg.solve_triangular(
        L, B.mT, upper=False, left=False),
    "solve_triangular unit": lambda m, L, S, B: m.linalg.solve_triangular(
        L, B, upper=False, unitriangular=True),
    "triangular_solve": lambda m, L, S, B: m.triangular_solve(B, L, upper=False)[0],
    "cholesky_solve": lambda m, L, S, B: m.cholesky_solve(B, L),
    "cholesky_solve upper": lambda m, L, S, B: m.cholesky_solve(B, L.mT, upper=True),
    "lu_solve": lambda m, L, S, B: m.linalg.lu_solve(*m.linalg.lu_factor(S), B),
    "linalg.solve": lambda m, L, S, B: m.linalg.solve(S, B),
    "cholesky_inverse": lambda m, L, S, B: m.cholesky_inverse(L) @ B,
}


def _run(m, call, arrays):
    ts = [m.tensor(a, requires_grad=True) for a in arrays]
    try:
        out = call(m, *ts)
    except RuntimeError as error:
        return type(error), None
    grads = m.autograd.grad((out * out).sum(), ts, allow_unused=True)
    return out.detach().numpy(), [None if g is None else g.numpy() for g in grads]


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", CALLS)
def test_solvers_read_b_as_torch(name, shape):
    want, want_grads = _run(torch, CALLS[name], SHAPES[shape])
    got, grads = _run(flow, CALLS[name], SHAPES[shape])
    if isinstance(want, type):
        assert isinstance(got, type), f"torch raised {want.__name__}, flowgrad gave a value"
        return
    assert not isinstance(got, type), f"flowgrad raised {got.__name__}, torch gave a value"
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    for i, (g, w) in enumerate(zip(grads, want_grads)):
        if w is None:
            continue
        if i == 0 and name.startswith("cholesky"):
            # the factor's unread triangle: flowgrad's gradient there is 0, torch's formula
            # (not projected onto the triangle it reads) gives numbers; L is lower in every row
            g, w = np.tril(g), np.tril(w)
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)
