"""torch.linalg over its options (solve left/right, cholesky upper, qr modes, eigh UPLO, svd
full_matrices, norms of every ord, cond, matrix_power, solve_triangular, lu_solve, lstsq,
multi_dot, ...) on batched, empty-batch and 1x1 inputs against torch, values and gradients
(decompositions through what their gauge leaves fixed): see tests/linalg_fuzz.py."""
from __future__ import annotations

import warnings

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


def _cholesky_outcomes(m, a, upper):
    """Each cholesky form's factor (info too for cholesky_ex) and its gradient, or 'raises'."""
    out = []
    forms = [lambda t: m.linalg.cholesky(t, upper=upper),
             lambda t: m.linalg.cholesky_ex(t, upper=upper),
             lambda t: m.cholesky(t, upper=upper)]
    for form in forms:
        A = m.tensor(a, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (torch.cholesky's deprecation)
            try:
                r = form(A)
            except RuntimeError:
                out.append("raises")
                continue
        L, info = (r[0], r[1].numpy().tolist()) if isinstance(r, tuple) else (r, None)
        if info:  # (a failed factor's L is unspecified)
            out.append(info)
            continue
        (g,) = m.autograd.grad((L * m.tensor(np.arange(L.numel()).reshape(L.shape))).real
                               .sum(), A)
        out.append((info, np.round(L.detach().numpy(), 12).tolist(),
                    np.round(g.numpy(), 10).tolist()))
    return out


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("a", [
    [[4.0, 1.0], [3.0, 5.0]],  # not symmetric: upper=True reads the upper triangle
    [[2.0, 1.0], [np.nan, 2.0]], [[2.0, np.nan], [1.0, 2.0]], [[np.nan, 1.0], [1.0, 2.0]],
    [[[1.0, 0.0], [0.0, 1.0]], [[2.0, 1.0], [np.nan, 2.0]]],
    [[4.0 + 0j, 1.0 - 2.0j], [1.0 + 2.0j, 5.0]],  # Hermitian: torch's complex gradient
], ids=["asymmetric", "nan_lower", "nan_upper", "nan_diagonal", "nan_batch", "hermitian"])
def test_cholesky_reads_the_triangle_torch_reads_and_refuses_nan(a, upper):
    # cholesky(A, upper=True) factored A's lower triangle (and transposed): for a
    # non-symmetric A other values than torch's, which reads the upper one; a nan in the
    # triangle read gave a factor of nans where torch raises (cholesky_ex: info > 0)
    a = np.array(a)
    assert _cholesky_outcomes(flow, a, upper) == _cholesky_outcomes(torch, a, upper)


def test_factorization_failures_raise_torch_linalg_error():
    # torch.linalg.LinAlgError (a RuntimeError) was missing: `except torch.linalg.LinAlgError`
    # raised AttributeError under flowgrad. lu_factor_ex/ldl_factor_ex's check_errors raise
    # a plain RuntimeError in torch, and so in flowgrad
    sing, npd = np.zeros((2, 2)), np.array([[1.0, 2.0], [2.0, 1.0]])
    nan = np.array([[np.nan, 1.0], [1.0, 1.0]])

    def outcomes(m):
        calls = [lambda: m.linalg.cholesky(m.tensor(npd)), lambda: m.linalg.inv(m.tensor(sing)),
                 lambda: m.linalg.solve(m.tensor(sing), m.ones(2, dtype=m.float64)),
                 lambda: m.linalg.inv_ex(m.tensor(sing), check_errors=True),
                 lambda: m.linalg.cholesky_ex(m.tensor(npd), check_errors=True),
                 lambda: m.linalg.lu_factor_ex(m.tensor(sing), check_errors=True),
                 lambda: m.linalg.ldl_factor_ex(m.tensor(sing), check_errors=True)]
        # an SVD of a nan: flowgrad's svdvals, matrix_rank, the 2-norm and cond raised NumPy's
        # LinAlgError (a ValueError)
        calls += [lambda f=f: f(m.tensor(nan)) for f in (
            m.linalg.svdvals, m.linalg.matrix_rank, lambda a: m.linalg.matrix_norm(a, 2),
            m.linalg.cond, m.linalg.svd, m.linalg.pinv)]
        out = []
        for call in calls:
            try:
                call()
                out.append("ok")
            except m.linalg.LinAlgError:
                out.append("LinAlgError")
            except RuntimeError:
                out.append("RuntimeError")
        return out
    assert issubclass(flow.linalg.LinAlgError, RuntimeError)
    assert outcomes(flow) == outcomes(torch)


@pytest.mark.parametrize("pivots", [[1, 2], [2, 2], [3, 2], [0, 2], [-1, 2], [2, 5]])
def test_lu_unpack_and_lu_solve_check_the_pivots_range_as_torch(pivots):
    # flowgrad applied pivots 0 and -1 as row swaps (wrapping) with no error, and failed past
    # the end with NumPy's IndexError; torch raises its RuntimeError for either (lu_unpack
    # only when it unpacks them)
    LU = np.array([[2.0, 1.0], [0.5, 3.0]])

    def outcomes(m):
        piv = m.tensor(pivots, dtype=m.int32)
        calls = [lambda: m.lu_unpack(m.tensor(LU), piv)[0],
                 lambda: m.lu_unpack(m.tensor(LU), piv, unpack_pivots=False)[1],
                 lambda: m.linalg.lu_solve(m.tensor(LU), piv, m.ones(2, 1, dtype=m.float64))]
        out = []
        for call in calls:
            try:
                out.append(np.round(call().numpy(), 6).tolist())
            except RuntimeError as e:
                out.append(str(e))
        return out
    assert outcomes(flow) == outcomes(torch)


def test_singular_triangular_solves_give_torchs_inf_and_nan():
    # flowgrad solved triangular systems with LAPACK's general solve, which refuses a zero on
    # the diagonal (LinAlgError); torch's trsm substitutes row after row into inf and nan
    # (solve_triangular, triangular_solve, cholesky_solve, lu_solve), and only
    # cholesky_inverse refuses the factor
    rng = np.random.default_rng(7)
    A = np.triu(rng.standard_normal((3, 4, 4)).round(1))
    A[0, 1, 1] = A[1, 3, 3] = A[2, 0, 0] = 0.0
    B = rng.standard_normal((3, 4, 2)).round(1)
    B[1, 3] = 0.0  # (0 / 0: nan)

    def outcomes(m):
        a, b = m.tensor(A), m.tensor(B)
        calls = [lambda: m.linalg.solve_triangular(a, b, upper=True),
                 lambda: m.linalg.solve_triangular(a.mT, b, upper=False),
                 lambda: m.linalg.solve_triangular(a, b.mT, upper=True, left=False),
                 lambda: m.cholesky_solve(b, a, upper=True),
                 lambda: m.linalg.lu_solve(a, m.arange(1, 5, dtype=m.int32).expand(3, 4), b),
                 lambda: m.cholesky_inverse(a[1], upper=True)]
        out = []
        for call in calls:
            try:
                x = call().numpy()
                out.append((np.isnan(x).tolist(), np.sign(np.nan_to_num(x)).tolist(),
                            np.isinf(x).tolist(),
                            np.round(np.nan_to_num(x, posinf=0, neginf=0), 6).tolist()))
            except RuntimeError as e:
                out.append(str(e))
        return out
    ours, theirs = outcomes(flow), outcomes(torch)
    assert ours[:5] == theirs[:5]
    assert "cholesky_inverse: The diagonal element 4 is zero" in ours[5] == theirs[5]
