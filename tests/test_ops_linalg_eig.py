"""linalg.eig and linalg.eigvals (complex results for real and complex input), and the complex
forms of inv and solve their gradient uses: against torch (values, dtypes, every gradient of a
real loss) and by complex finite differences to second order. An eigenvector is defined up to
a phase, so the cases compare functions of V that do not depend on it: |V|, V V^H, and V with
each column turned so its largest component is real and positive (torch's and NumPy's LAPACK
may pick other signs for real eigenvectors)."""
import numpy as np
import pytest
import torch
from complex_helpers import Real, complex_table_tests

import flowgrad as flow


def phase_fixed(m, V):
    """Each column times conj(p)/|p|, p its largest component: a phase-free function of V."""
    a = V.abs()
    pick = (a == a.amax(-2, keepdim=True)).to(V.dtype)
    p = (V * pick).sum(-2, keepdim=True)
    return V * (p.conj() / p.abs())


def eig_parts(m, A):
    L, V = m.linalg.eig(A)
    return L, V.abs(), V @ V.mH


def reconstruct(m, A):
    L, V = m.linalg.eig(A)
    return V @ (L.unsqueeze(-1) * m.linalg.inv(V))


CASES = [
    ("eigvals_real", lambda m, a: m.linalg.eigvals(a), Real((4, 4))),
    ("eigvals_complex", lambda m, a: m.linalg.eigvals(a), (3, 3)),
    ("eigvals_batch", lambda m, a: m.linalg.eigvals(a), Real((2, 3, 3))),
    ("eigvals_abs", lambda m, a: m.linalg.eigvals(a).abs(), Real((3, 3))),
    ("eig_parts_real", eig_parts, Real((4, 4))),
    ("eig_parts_complex_batch", eig_parts, (2, 3, 3)),
    ("eig_vectors_real", lambda m, a: phase_fixed(m, m.linalg.eig(a)[1]), Real((3, 3))),
    ("eig_vectors_complex", lambda m, a: phase_fixed(m, m.linalg.eig(a)[1]), (3, 3)),
    ("eig_reconstruct", reconstruct, Real((3, 3))),
    ("inv_complex", lambda m, a: m.linalg.inv(a), (3, 3)),
    ("solve_complex", lambda m, a, b: m.linalg.solve(a, b), (3, 3), (3, 2)),
    ("solve_complex_vec_right", lambda m, a, b, c: (m.linalg.solve(a, b),
                                                   m.linalg.solve(a, c, left=False)),
     (2, 3, 3), (2, 3), (2, 4, 3)),
]
FD_CASES = [c for c in CASES if c[0] not in ("eigvals_batch", "eig_parts_complex_batch")]

test_against_torch, test_finite_differences = complex_table_tests(CASES, FD_CASES)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_values_and_dtypes_match_torch(dtype):
    a = np.random.default_rng(1).standard_normal((2, 4, 4))
    if dtype.startswith("complex"):
        a = a + 1j * np.random.default_rng(2).standard_normal((2, 4, 4))
    a = a.astype(dtype)
    L, V = flow.linalg.eig(flow.tensor(a))
    Lt, Vt = torch.linalg.eig(torch.tensor(a))
    assert (L.dtype.name, V.dtype.name) == (str(Lt.dtype)[6:], str(Vt.dtype)[6:])
    tol = 1e-5 if dtype in ("float32", "complex64") else 1e-12
    # both run LAPACK geev, so the order agrees; sort anyway, as LAPACK builds may differ
    key = lambda w: np.lexsort((w.imag.round(4), w.real.round(4)))  # noqa: E731
    for ours, theirs in zip(L.numpy(), Lt.numpy()):
        np.testing.assert_allclose(ours[key(ours)], theirs[key(theirs)], atol=tol, rtol=tol)
    np.testing.assert_allclose(flow.linalg.eigvals(flow.tensor(a)).numpy(), L.numpy())
    # A V = V diag(L), unit columns
    np.testing.assert_allclose(a @ V.numpy(), V.numpy() * L.numpy()[..., None, :],
                               atol=tol * 10)
    np.testing.assert_allclose(np.linalg.norm(V.numpy(), axis=-2), 1, atol=tol)


def test_empty_and_real_spectrum_are_complex():
    L, V = flow.linalg.eig(flow.zeros(2, 0, 0))
    assert (tuple(L.shape), tuple(V.shape), L.dtype) == ((2, 0), (2, 0, 0), flow.complex64)
    L = flow.linalg.eigvals(flow.tensor([[2.0, 1.0], [0.0, 3.0]], dtype=flow.float64))
    assert L.dtype == flow.complex128
    np.testing.assert_array_equal(L.numpy(), [2, 3])


def test_phase_dependent_loss_raises_as_torch():
    a = np.random.default_rng(3).standard_normal((3, 3))
    at = torch.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="specified up to multiplication by e"):
        torch.linalg.eig(at)[1].imag.sum().backward()
    x = flow.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="linalg_eig_backward: The eigenvectors in the "
                                           "complex case are specified up to multiplication"):
        flow.linalg.eig(x)[1].imag.sum().backward()
    assert x.grad is None


@pytest.mark.parametrize("a, match", [
    (flow.ones(2, 3), "must be batches of square matrices, but they are 2 by 3"),
    (flow.ones(3), "at least 2 dimensions"),
    (flow.ones(2, 2, dtype=flow.int64), "Expected a floating point or complex tensor"),
    (flow.tensor([[1.0, float("nan")], [0.0, 1.0]]), "should not contain infs or NaNs"),
])
def test_bad_input_names_op_and_remedy(a, match):
    for fn, name in ((flow.linalg.eig, "linalg.eig"), (flow.linalg.eigvals, "linalg.eigvals")):
        with pytest.raises(RuntimeError, match=name + ".*" + match):
            fn(a)


def test_graph_mode_traces_the_rule():
    """The rule (with its phase check, a guard read while tracing) in a compiled training
    step: the weight moves as eager steps move it."""
    a = np.random.default_rng(4).standard_normal((3, 3))

    class Spectral(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = flow.nn.Parameter(flow.tensor(a))

        def forward(self):
            L, V = flow.linalg.eig(self.w)
            return L.abs().sum() + (V.abs() ** 2 * flow.arange(3.0, dtype=L.real.dtype)).sum()

    graph_model, eager_model = Spectral(), Spectral()

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = graph_model
            self.add_optimizer(flow.optim.SGD(graph_model.parameters(), lr=0.1))

        def build(self):
            out = self.model()
            out.backward()
            return out

    step = Step()
    opt = flow.optim.SGD(eager_model.parameters(), lr=0.1)
    for _ in range(3):  # the trace, then the compiled plan
        step()
        opt.zero_grad()
        eager_model().backward()
        opt.step()
    w = eager_model.w.detach().numpy()
    np.testing.assert_allclose(graph_model.w.detach().numpy(), w, atol=1e-12)
    assert not np.allclose(w, a)


def test_vmap_of_grad_matches_torch_func():
    """vmap's batched grads skip the phase check (it would read per-example values)."""
    def f(m, a):
        L, V = m.linalg.eig(a)
        return L.abs().sum() + (V.abs() ** 2 * m.arange(3.0, dtype=a.dtype)).sum()

    b = np.random.default_rng(5).standard_normal((2, 3, 3))
    ours = flow.func.vmap(flow.func.grad(lambda a: f(flow, a)))(flow.tensor(b))
    for example, got in zip(b, ours.numpy()):  # torch per example (torch.func starts slowly)
        at = torch.tensor(example, requires_grad=True)
        np.testing.assert_allclose(got, torch.autograd.grad(f(torch, at), at)[0], atol=1e-12)
