"""The rest of torch.linalg (LU, triangular solves, the _ex forms, pinv, lstsq, matrix
functions, Householder products, LDL^T) and the torch.* spellings, against torch (forward and
backward) and by float64 finite differences to second order. det at singular matrices and
qr's gradient in every mode torch differentiates. One line per case."""
import numpy as np
import pytest
import torch
from helpers import check, gradcheck

import flowgrad as flow

# torch deprecates its older spellings (torch.lu, lu_solve, triangular_solve, chain_matmul)
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated:UserWarning")


def spd(m, a):
    return a @ a.mT + 3 * m.eye(a.shape[-1], dtype=a.dtype)


def well(m, a):
    """A well-conditioned square matrix with distinct LU pivots."""
    return a + 4 * m.eye(a.shape[-1], dtype=a.dtype)


def sym(a):
    return (a + a.mT) / 2


def lu_factor(m, a):
    LU, piv = m.linalg.lu_factor(a)
    return LU, piv


def sign_free_torch_svd(m, a):
    U, S, V = m.svd(a)
    return S, U * U, V * V, U[..., :, :1] * V[..., :, :1].mT


def sign_free_qr(m, a, mode="reduced"):
    Q, R = m.linalg.qr(a, mode=mode)
    k = min(a.shape[-2:])
    d = m.sign(R[..., :k, :k].diagonal(0, -2, -1))
    return Q[..., :k] * d.unsqueeze(-2), R[..., :k, :] * d.unsqueeze(-1)


def householder(m, a, tau):
    return m.linalg.householder_product(a, tau)


SINGULAR2 = np.array([[1.0, 2.0], [2.0, 4.0]])
SINGULAR3 = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [4.0, 5.0, 7.0]])
RANK1 = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, 1.0, 1.5]])

DET_SINGULAR = [
    ("det_singular", lambda m, a: m.linalg.det(a), SINGULAR2),
    ("det_zero_row", lambda m, a: m.linalg.det(a), SINGULAR3),
    ("det_rank1", lambda m, a: m.linalg.det(a), RANK1),
    ("det_batch_mixed", lambda m, a, b: m.linalg.det(m.stack([a[:2, :2] + 3, b])), (3, 3),
     SINGULAR2),
]

CASES = [
    ("qr_wide", sign_free_qr, (3, 5)),
    ("qr_wide_complete", lambda m, a: sign_free_qr(m, a, "complete"), (2, 4)),
    ("qr_square_complete", lambda m, a: sign_free_qr(m, a, "complete"), (3, 3)),
    ("qr_batch_tall", sign_free_qr, (2, 4, 2)),
    ("solve_triangular_upper", lambda m, a, b: m.linalg.solve_triangular(well(m, a), b,
                                                                          upper=True), (3, 3),
     (3, 2)),
    ("solve_triangular_lower_right", lambda m, a, b: m.linalg.solve_triangular(
        well(m, a), b, upper=False, left=False), (3, 3), (2, 3)),
    ("solve_triangular_unit", lambda m, a, b: m.linalg.solve_triangular(
        a, b, upper=False, unitriangular=True), (2, 3, 3), (3, 1)),
    ("lu_factor", lu_factor, (3, 3)),
    ("lu_factor_batch", lu_factor, (2, 3, 3)),
    ("lu_factor_wide", lu_factor, (2, 4)),
    ("lu_factor_tall", lu_factor, (4, 2)),
    ("lu", lambda m, a: m.linalg.lu(a), (3, 3)),
    ("lu_wide", lambda m, a: m.linalg.lu(a), (3, 5)),
    ("lu_tall", lambda m, a: m.linalg.lu(a), (2, 5, 3)),
    ("lu_factor_ex", lambda m, a: m.linalg.lu_factor_ex(a), (3, 3)),
    ("lu_unpack", lambda m, a: m.lu_unpack(*m.linalg.lu_factor(a)), (3, 4)),
    ("lu_solve", lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(well(m, a)), b), (3, 3),
     (3, 2)),
    ("lu_solve_adjoint", lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(well(m, a)), b,
                                                           adjoint=True), (3, 3), (3, 2)),
    ("lu_solve_right", lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(well(m, a)), b,
                                                         left=False), (3, 3), (2, 3)),
    ("lu_solve_right_adj", lambda m, a, b: m.linalg.lu_solve(
        *m.linalg.lu_factor(well(m, a)), b, left=False, adjoint=True), (2, 3, 3), (2, 3)),
    ("torch_lu_solve", lambda m, a, b: m.lu_solve(b, *m.lu(well(m, a))), (3, 3), (3, 1)),
    ("solve_ex", lambda m, a, b: m.linalg.solve_ex(well(m, a), b), (3, 3), (3,)),
    ("inv_ex", lambda m, a: m.linalg.inv_ex(well(m, a)), (2, 3, 3)),
    ("cholesky_ex", lambda m, a: m.linalg.cholesky_ex(spd(m, a)), (3, 3)),
    ("cholesky_ex_upper", lambda m, a: m.linalg.cholesky_ex(spd(m, a), upper=True), (3, 3)),
    ("cholesky_solve", lambda m, a, b: m.cholesky_solve(b, m.linalg.cholesky(spd(m, a))),
     (3, 3), (3, 2)),
    ("cholesky_solve_upper", lambda m, a, b: b.cholesky_solve(
        m.linalg.cholesky(spd(m, a), upper=True), upper=True), (3, 3), (3, 2)),
    ("cholesky_inverse", lambda m, a: m.cholesky_inverse(m.linalg.cholesky(spd(m, a))),
     (3, 3)),
    ("triangular_solve", lambda m, b, a: m.triangular_solve(b, well(m, a)), (3, 2), (3, 3)),
    ("triangular_solve_t", lambda m, b, a: m.triangular_solve(b, well(m, a), upper=False,
                                                              transpose=True), (3, 2), (3, 3)),
    ("pinv_tall", lambda m, a: m.linalg.pinv(a), (4, 3)),
    ("pinv_wide", lambda m, a: m.linalg.pinv(a), (2, 3, 4)),
    ("pinv_hermitian", lambda m, a: m.linalg.pinv(spd(m, a), hermitian=True), (3, 3)),
    ("pinverse", lambda m, a: m.pinverse(a), (3, 2)),
    ("lstsq", lambda m, a, b: m.linalg.lstsq(a, b).solution, (4, 3), (4, 2)),
    ("lstsq_gelsd", lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd")[:2], (5, 3), (5, 2)),
    ("lstsq_vec_batch", lambda m, a, b: m.linalg.lstsq(a, b).solution, (2, 4, 3), (2, 4)),
    ("lstsq_wide", lambda m, a, b: m.linalg.lstsq(a, b, driver="gelss").solution, (2, 4),
     (2, 1)),
    ("tensorinv", lambda m, a: m.linalg.tensorinv(well(m, a).reshape(4, 2, 2), ind=1),
     (4, 4)),
    ("tensorsolve", lambda m, a, b: m.linalg.tensorsolve(well(m, a).reshape(2, 3, 6), b),
     (6, 6), (2, 3)),
    ("matrix_exp", lambda m, a: m.linalg.matrix_exp(a), (3, 3)),
    ("matrix_exp_scaled", lambda m, a: m.matrix_exp(a * 4), (2, 3, 3)),
    ("matrix_exp_method", lambda m, a: a.matrix_exp(), (2, 2)),
    ("matrix_power_3", lambda m, a: m.linalg.matrix_power(a, 3), (3, 3)),
    ("matrix_power_0", lambda m, a: m.matrix_power(a, 0), (2, 3, 3)),
    ("matrix_power_neg", lambda m, a: well(m, a).matrix_power(-2), (3, 3)),
    ("cond", lambda m, a: m.linalg.cond(a), (3, 3)),
    ("cond_wide", lambda m, a: m.linalg.cond(a, -2), (2, 4)),
    ("multi_dot", lambda m, a, b, c, d: m.linalg.multi_dot([a, b, c, d]), (2, 5), (5, 3),
     (3, 4), (4, 2)),
    ("multi_dot_vec", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), (3,), (3, 4), (4,)),
    ("chain_matmul", lambda m, a, b, c: m.chain_matmul(a, b, c), (2, 3), (3, 4), (4, 2)),
    ("vander", lambda m, x: m.linalg.vander(x), (3,)),
    ("vander_n", lambda m, x: m.linalg.vander(x, N=4), (2, 3)),
    ("vecdot", lambda m, x, y: m.linalg.vecdot(x, y), (2, 3), (3,)),
    ("vecdot_dim", lambda m, x, y: m.linalg.vecdot(x, y, dim=0), (3, 2), (3, 2)),
    ("vdot", lambda m, x, y: m.vdot(x, y), (4,), (4,)),
    ("ger", lambda m, x, y: m.ger(x, y), (3,), (2,)),
    ("cross", lambda m, x, y: m.linalg.cross(x, y), (2, 3), (1, 3)),
    ("cross_dim", lambda m, x, y: m.cross(x, y, dim=0), (3, 2), (3, 2)),
    ("householder_product", householder, (4, 3), (3,)),
    ("householder_product_k", householder, (2, 4, 3), (2, 2)),
    ("orgqr", lambda m, a, tau: m.orgqr(a, tau), (3, 3), (2,)),
    ("ormqr", lambda m, a, tau, c: m.ormqr(a, tau, c), (4, 3), (3,), (4, 2)),
    ("ormqr_t", lambda m, a, tau, c: m.ormqr(a, tau, c, transpose=True), (4, 3), (3,), (4, 2)),
    ("ormqr_right", lambda m, a, tau, c: m.ormqr(a, tau, c, left=False), (4, 3), (3,), (2, 4)),
    ("ormqr_right_t", lambda m, a, tau, c: a.ormqr(tau, c, left=False, transpose=True), (4, 3),
     (3,), (2, 4)),
    ("torch_svd", sign_free_torch_svd, (4, 3)),
    ("torch_qr", lambda m, a: sign_free_qr(m, a), (3, 2)),
]

# torch's own backward fails for these (an in-place write in its rule): compared forward,
# differentiated by finite differences
TORCH_FORWARD = [
    ("cond_fro", lambda m, a: m.linalg.cond(well(m, a), "fro"), (3, 3)),
    ("cond_1", lambda m, a: m.linalg.cond(well(m, a), 1), (2, 3, 3)),
    ("cond_inf", lambda m, a: m.linalg.cond(well(m, a), float("inf")), (3, 3)),
    ("torch_vander", lambda m, x: m.vander(x), (3,)),
    ("torch_vander_inc", lambda m, x: m.vander(x, N=4, increasing=True), (3,)),
]

# values, or grads, torch does not have (int outputs, no derivative): forward only
FORWARD_ONLY = TORCH_FORWARD + [
    ("matrix_rank", lambda m, a: m.linalg.matrix_rank(a), RANK1),
    ("matrix_rank_full", lambda m, a: m.linalg.matrix_rank(a, atol=0.1), (2, 3, 4)),
    ("matrix_rank_hermitian", lambda m, a: m.linalg.matrix_rank(a @ a.mT, hermitian=True),
     (3, 2)),
    ("geqrf", lambda m, a: m.geqrf(a), (4, 3)),
    ("geqrf_batch_wide", lambda m, a: m.geqrf(a), (2, 2, 3)),
    ("ldl_factor", lambda m, a: m.linalg.ldl_factor(sym(a)), (5, 5)),
    ("ldl_factor_batch", lambda m, a: m.linalg.ldl_factor_ex(sym(a)), (3, 6, 6)),
    ("ldl_solve", lambda m, a, b: m.linalg.ldl_solve(*m.linalg.ldl_factor(sym(a)), b), (6, 6),
     (6, 2)),
    ("ldl_solve_batch", lambda m, a, b: m.linalg.ldl_solve(*m.linalg.ldl_factor(sym(a)), b),
     (2, 5, 5), (5, 3)),
    ("lstsq_outputs", lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd"), (5, 3), (5, 2)),
    ("lstsq_gels", lambda m, a, b: m.linalg.lstsq(a, b, driver="gels")[:2], (5, 3), (5, 2)),
    ("torch_lu_infos", lambda m, a: m.lu(a, get_infos=True), (3, 3)),
    ("inv_ex_singular", lambda m, a: m.linalg.inv_ex(a).info, SINGULAR2),
    ("solve_ex_singular", lambda m, a: m.linalg.solve_ex(a, a).info, SINGULAR3),
    ("cholesky_ex_not_pd", lambda m, a: m.linalg.cholesky_ex(a).info,
     np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])),
    ("lu_factor_ex_singular", lambda m, a: m.linalg.lu_factor_ex(a), SINGULAR3),
    ("svd_no_uv", lambda m, a: m.svd(a, compute_uv=False), (3, 2)),
]

# finite differences where the function is smooth at the random input
FD = [c for c in CASES if c[0] not in ("lstsq_gelsd",)] + DET_SINGULAR + TORCH_FORWARD


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_against_torch(case):
    name, fn, *specs = case
    check(fn, *specs, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("case", FORWARD_ONLY, ids=[c[0] for c in FORWARD_ONLY])
def test_forward_against_torch(case):
    name, fn, *specs = case
    check(fn, *specs, atol=1e-4, rtol=1e-4, grad=False, dtype=np.float64)


@pytest.mark.parametrize("case", FD, ids=[c[0] for c in FD])
def test_finite_differences(case):
    name, fn, *specs = case
    gradcheck(fn, *specs)


@pytest.mark.parametrize("case", DET_SINGULAR, ids=[c[0] for c in DET_SINGULAR])
def test_det_gradient_at_singular_matrices(case):
    # the gradient of det is the adjugate (cofactors transposed), non-zero at rank n-1. torch
    # 2.13 returns it under create_graph=True (its SVD formula) but zeros without: we compare
    # with the former, which is also what finite differences give (test_finite_differences)
    name, fn, *specs = case
    arrays = [np.asarray(s, np.float64) if not isinstance(s, tuple)
              else np.random.default_rng(0).standard_normal(s) for s in specs]
    ours = [flow.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    g_ours = flow.autograd.grad(fn(flow, *ours).sum(), ours)
    g_theirs = torch.autograd.grad(fn(torch, *theirs).sum(), theirs, create_graph=True)
    for a, b in zip(g_ours, g_theirs):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), atol=1e-10)


# slogdet at singular matrices: (sign 0, logabsdet -inf) and torch's non-finite gradient.
# torch divides by U's zero pivot in an LU solve (without create_graph; with it, it raises);
# flowgrad divides the adjugate by the signed zero. They agree entry for entry on the first
# three; elsewhere (rank <= n-2, a zero row, a rank-1 3x3) which entries are nan, +-inf or
# (torch, where MKL's substitution skips a zero) finite differs: MKL's order is not LAPACK's
# reference order either, so no portable rule reproduces it.
SLOGDET_SINGULAR = [  # (matrix, exact match)
    (SINGULAR2, True), ([[1.0, 0.0], [0.0, 0.0]], True),
    ([[2.0, 1.0, 0.0], [1.0, 3.0, 0.0], [0.0, 0.0, 0.0]], True),
    (SINGULAR3, False), (RANK1, False), (np.zeros((2, 2)), False),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", range(len(SLOGDET_SINGULAR)))
def test_slogdet_at_singular_matrices(case, dtype):
    M, exact = SLOGDET_SINGULAR[case]
    a = np.stack([np.asarray(M), np.eye(len(M)) * 2 + 1]).astype(dtype)  # batch: one regular
    out = []
    for m in (flow, torch):
        A = m.tensor(a, requires_grad=True)
        sign, logabs = m.linalg.slogdet(A)
        (logabs * m.tensor([2.0, 3.0], dtype=A.dtype)).sum().backward()
        out.append([t.detach().numpy() for t in (sign, logabs, A.grad)])
    (s, l, g), (ts, tl, tg) = out
    np.testing.assert_array_equal(s, ts)
    np.testing.assert_array_equal(l, tl)
    assert l[0] == -np.inf and s[0] == 0
    np.testing.assert_allclose(g[1], tg[1], rtol=1e-5)
    if exact:
        np.testing.assert_array_equal(g[0], tg[0])
        np.testing.assert_array_equal(np.signbit(s), np.signbit(ts))  # -0 as torch
    else:
        assert not np.isfinite(g[0]).all() and not np.isfinite(tg[0]).all()
