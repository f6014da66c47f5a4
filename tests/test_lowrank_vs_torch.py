"""svd_lowrank, pca_lowrank and lobpcg against torch 2.13.

flowgrad's generator (PCG64) does not reproduce torch's random stream after manual_seed, so
the randomized results are compared where they do not depend on the draw: matrices of exact
rank q (the approximation is then exact, as torch's own tests use), and lobpcg started from
the same X. Gradients: float64 finite differences and torch's gradients on the same
deterministic cases; lobpcg's rule (torch's custom symmetric-eigen backward) also against the
exact eigendecomposition's gradient, and its second order against torch's.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import gradcheck

import flowgrad as flow

RNG = np.random.default_rng(1234)


def _low_rank(batch, m, n, r, complex_=False, seed=0):
    rng = np.random.default_rng(seed)

    def draw(*shape):
        x = rng.standard_normal(shape)
        return x + 1j * rng.standard_normal(shape) if complex_ else x
    return draw(*batch, m, r) @ np.swapaxes(draw(*batch, n, r), -1, -2)


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().numpy()
    return t.detach().numpy() if isinstance(t, flow.Tensor) else t


def _close(a, b, atol=1e-9, rtol=1e-7):
    np.testing.assert_allclose(_np(a), _np(b), atol=atol, rtol=rtol)


def _orthonormal(U):
    U = _np(U)
    eye = np.broadcast_to(np.eye(U.shape[-1]), U.shape[:-2] + (U.shape[-1],) * 2)
    _close(np.swapaxes(U, -1, -2).conj() @ U, eye)


def _reconstruct(U, S, V):
    U, S, V = _np(U), _np(S), _np(V)
    return (U * S[..., None, :]) @ np.swapaxes(V, -1, -2).conj()


# ---- svd_lowrank -----------------------------------------------------------------------------
@pytest.mark.parametrize("batch,m,n,r,complex_", [
    ((), 8, 5, 2, False), ((), 5, 8, 3, False), ((2,), 7, 6, 2, False),
    ((), 6, 9, 2, True), ((3,), 9, 4, 3, True)])
def test_svd_lowrank_exact_rank_matches_torch(batch, m, n, r, complex_):
    A = _low_rank(batch, m, n, r, complex_)
    tU, tS, tV = torch.svd_lowrank(torch.tensor(A), q=r)
    fU, fS, fV = flow.svd_lowrank(flow.tensor(A), q=r)
    assert (fU.shape, fS.shape, fV.shape) == (tuple(tU.shape), tuple(tS.shape), tuple(tV.shape))
    assert (fU.dtype, fS.dtype) == (flow.tensor(A).dtype, flow.float64)
    _close(fS, tS)
    _close(fS, np.linalg.svd(A, compute_uv=False)[..., :r])
    _close(_reconstruct(fU, fS, fV), A)
    _close(_reconstruct(fU, fS, fV), _reconstruct(tU, tS, tV))
    _orthonormal(fU)
    _orthonormal(fV)


def test_svd_lowrank_subtracts_a_broadcast_M():
    A0, mean = _low_rank((), 10, 6, 2), RNG.standard_normal((1, 6))
    A = A0 + mean
    t = torch.svd_lowrank(torch.tensor(A), q=2, M=torch.tensor(mean))
    f = flow.svd_lowrank(flow.tensor(A), q=2, M=flow.tensor(mean))
    _close(f[1], t[1])
    _close(_reconstruct(*f), A0)
    f_wide = flow.svd_lowrank(flow.tensor(A.T.copy()), q=2, M=flow.tensor(mean.T.copy()))
    _close(_reconstruct(*f_wide), A0.T)


def test_svd_lowrank_approximates_a_full_rank_matrix_like_torch():
    """Beyond the exact rank the draw matters: both give the top singular values to the
    accuracy the power iterations reach, and q columns as promised."""
    U, _ = np.linalg.qr(RNG.standard_normal((30, 30)))
    V, _ = np.linalg.qr(RNG.standard_normal((20, 20)))
    s = 0.3 ** np.arange(20)
    A = U[:, :20] * s @ V.T
    tS = torch.svd_lowrank(torch.tensor(A), q=6, niter=4)[1]
    fU, fS, fV = flow.svd_lowrank(flow.tensor(A), q=6, niter=4)
    _close(fS[:3], tS[:3], atol=1e-8)
    _close(fS[:3], s[:3], atol=1e-8)
    _orthonormal(fU)
    _orthonormal(fV)


def test_svd_lowrank_is_repeatable_after_manual_seed():
    A = flow.tensor(RNG.standard_normal((7, 5)))
    flow.manual_seed(3)
    first = flow.svd_lowrank(A, q=3)
    flow.manual_seed(3)
    again = flow.svd_lowrank(A, q=3)
    for a, b in zip(first, again):
        assert flow.equal(a, b)


def test_svd_lowrank_sparse_input():
    u, v = RNG.standard_normal((9, 2)), RNG.standard_normal((6, 2))
    u[[1, 4, 7]] = 0
    A = u @ v.T
    for dense in (A, A.T.copy()):  # the tall and the wide (adjoint) path
        t = torch.svd_lowrank(torch.tensor(dense).to_sparse(), q=2)
        f = flow.svd_lowrank(flow.tensor(dense).to_sparse(), q=2)
        _close(f[1], t[1])
        _close(_reconstruct(*f), dense)


@pytest.mark.parametrize("a_shape,b_shape", [((4, 2), (3, 2)), ((3, 2), (5, 2)),
                                             ((2, 4, 2), (3, 2))])
def test_svd_lowrank_gradients(a_shape, b_shape):
    """torch's OpInfo samples: A = a b^T stays of rank 2 under any perturbation, so the
    result (through U V^H and S, which do not depend on the singular vectors' phases) is
    deterministic; finite differences to second order, and torch's first derivative."""
    def fn(m, a, b):
        U, S, V = m.svd_lowrank(a @ b.mT, q=2)
        return U @ V.mH, S
    gradcheck(fn, a_shape, b_shape, atol=1e-6, rtol=1e-4, second_order=len(a_shape) == 2)
    a, b = RNG.standard_normal(a_shape), RNG.standard_normal(b_shape)
    w1, w2 = RNG.standard_normal(a_shape[:-1] + b_shape[-2:-1]), RNG.standard_normal(
        a_shape[:-2] + (2,))
    grads = []
    for m in (torch, flow):
        ta, tb = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        P, S = fn(m, ta, tb)
        grads.append(m.autograd.grad((P * m.tensor(w1)).sum() + (S * m.tensor(w2)).sum(),
                                     [ta, tb]))
    for t, f in zip(*grads):
        _close(f, t, atol=1e-8)


def test_svd_lowrank_complex_gradient_matches_torch():
    a, b = (RNG.standard_normal((2, 5, 2)) + 1j * RNG.standard_normal((2, 5, 2)),
            RNG.standard_normal((2, 4, 2)) + 1j * RNG.standard_normal((2, 4, 2)))
    w = RNG.standard_normal((2, 5, 4)) + 1j * RNG.standard_normal((2, 5, 4))
    grads = []
    for m in (torch, flow):
        ta, tb = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        U, S, V = m.svd_lowrank(ta @ tb.mH, q=2)
        loss = ((U @ V.mH) * m.tensor(w)).real.sum() + S.sum()
        grads.append(m.autograd.grad(loss, [ta, tb]))
    for t, f in zip(*grads):
        _close(f, t, atol=1e-8)


# ---- pca_lowrank -----------------------------------------------------------------------------
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("batch,complex_", [((), False), ((2,), False), ((), True)])
def test_pca_lowrank_matches_torch(center, batch, complex_):
    X = _low_rank(batch, 12, 5, 2, complex_)
    if not center:
        X = X - X.mean(-2, keepdims=True)  # already centred data, rank 2
    data = X + 4.0  # the offset center=True removes
    given = data if center else X
    t = torch.pca_lowrank(torch.tensor(given), q=2, center=center)
    f = flow.pca_lowrank(flow.tensor(given), q=2, center=center)
    centred = given - given.mean(-2, keepdims=True)
    _close(f[1], t[1])
    _close(_reconstruct(*f), centred)
    _orthonormal(f[2])


def test_pca_lowrank_default_q_and_variances():
    X = _low_rank((), 40, 4, 4)
    f = flow.pca_lowrank(flow.tensor(X))
    t = torch.pca_lowrank(torch.tensor(X))
    assert f[1].shape == (4,) == tuple(t[1].shape)  # q = min(6, m, n)
    cov = np.cov(X, rowvar=False)
    _close(f[1] ** 2 / 39, np.linalg.eigvalsh(cov)[::-1])
    _close(f[1], t[1])


def test_pca_lowrank_sparse_input():
    u, v = RNG.standard_normal((10, 2)), RNG.standard_normal((6, 2))
    u[[0, 3, 8]] = 0
    A = u @ v.T
    for dense in (A, A.T.copy()):
        t = torch.pca_lowrank(torch.tensor(dense).to_sparse(), q=3)
        f = flow.pca_lowrank(flow.tensor(dense).to_sparse(), q=3)
        _close(f[1][:2], t[1][:2])
        _close(_reconstruct(*f), dense - dense.mean(0))


def test_pca_lowrank_gradients():
    def fn(m, a, b):
        U, S, V = m.pca_lowrank(a @ b.mT, q=2)
        return U @ V.mH, S
    gradcheck(fn, (6, 2), (4, 2), atol=1e-6, rtol=1e-4, second_order=False)


# ---- errors ----------------------------------------------------------------------------------
def _raises_alike(call):
    outcomes = []
    for m in (torch, flow):
        try:
            call(m)
            outcomes.append(None)
        except Exception as error:  # noqa: BLE001 - raise/no-raise is what is compared
            outcomes.append(error)
    t_error, f_error = outcomes
    assert (t_error is None) == (f_error is None), outcomes
    return outcomes


@pytest.mark.parametrize("kwargs", [dict(q=7), dict(q=-1), dict(niter=-1), dict(q=5),
                                    dict(q=0, niter=0)])
def test_pca_lowrank_argument_checks(kwargs):
    t_error, f_error = _raises_alike(lambda m: m.pca_lowrank(m.ones(8, 5).double(), **kwargs))
    if t_error is not None:
        assert type(f_error) is type(t_error) is ValueError
        assert "pca_lowrank" in str(f_error) and str(t_error).split("(")[0] in str(f_error)


@pytest.mark.parametrize("call", [
    lambda m: m.svd_lowrank(m.ones(6, 4, dtype=m.int64), q=2),
    lambda m: m.svd_lowrank(m.ones(6, 4).to(m.bfloat16), q=2),
    lambda m: m.svd_lowrank(m.ones(6, 4), q=2, M=m.ones(3, 4)),
    lambda m: m.svd_lowrank(m.ones(6, 4), q=2, M=m.ones(4, dtype=m.float64)),
    lambda m: m.svd_lowrank(m.ones(6, 4).double(), q=9),
])
def test_svd_lowrank_raises_as_torch(call):
    _raises_alike(call)


# ---- lobpcg ----------------------------------------------------------------------------------
def _spd(m, seed=0, batch=()):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal(batch + (m, m)))
    return (Q * np.arange(1, m + 1) ** 1.5) @ np.swapaxes(Q, -1, -2)


def _sign_free(X):
    """X X^T: the eigenvector basis without its signs."""
    X = _np(X)
    return X @ np.swapaxes(X, -1, -2)


@pytest.mark.parametrize("method", ["ortho", "basic"])
@pytest.mark.parametrize("largest", [True, False, None])
@pytest.mark.parametrize("k", [1, 2])
def test_lobpcg_matches_torch_values_and_gradient(method, largest, k):
    A, W = _spd(12, seed=k), RNG.standard_normal((12, 12))
    X0 = RNG.standard_normal((12, k))
    res = []
    for m in (torch, flow):
        tA = m.tensor(A, requires_grad=True)
        E, X = m.lobpcg(tA, k=k, X=m.tensor(X0), largest=largest, method=method, tol=1e-12)
        loss = 0.3 * E.sum() + ((X @ X.mT) * m.tensor(W)).sum()
        res.append((E, X, m.autograd.grad(loss, tA)[0]))
    (tE, tX, tg), (fE, fX, fg) = res
    _close(fE, tE, atol=1e-10)
    _close(_sign_free(fX), _sign_free(tX), atol=1e-8)
    _close(fg, tg, atol=1e-7)
    # against the exact eigendecomposition's gradient of the same loss on (A + A^T) / 2
    A_ = flow.tensor(A, requires_grad=True)
    E_all, V_all = flow.linalg.eigh((A_ + A_.mT) / 2)
    pick = slice(12 - k, None) if largest in (True, None) else slice(0, k)
    V = V_all[:, pick]
    exact = flow.autograd.grad(0.3 * E_all[pick].sum() + ((V @ V.mT) * flow.tensor(W)).sum(),
                               A_)[0]
    _close(fg, exact, atol=1e-6)


def test_lobpcg_second_order_matches_torch():
    A, W, Vd = _spd(12, seed=5), RNG.standard_normal((12, 12)), RNG.standard_normal((12, 12))
    X0 = RNG.standard_normal((12, 2))
    out = []
    for m in (torch, flow):
        tA = m.tensor(A, requires_grad=True)
        E, X = m.lobpcg(tA, k=2, X=m.tensor(X0), tol=1e-12)
        g = m.autograd.grad(E.sum() + ((X @ X.mT) * m.tensor(W)).sum(), tA,
                            create_graph=True)[0]
        out.append(m.autograd.grad((g * m.tensor(Vd)).sum(), tA)[0])
    _close(out[1], out[0], atol=1e-6)


def test_lobpcg_complete_eigenspace_gradient():
    """k = m is the full eigenspace (torch's other backward branch); lobpcg would refuse
    m < 3 n, so the rule is reached through its Function directly as torch's is."""
    from flowgrad.ops.linalg_lobpcg import _backward_complete
    A = _spd(4, seed=2)
    Dg, Ug = RNG.standard_normal(4), RNG.standard_normal((4, 4))
    E, U = np.linalg.eigh(A)
    t_res = torch._lobpcg._symeig_backward_complete_eigenspace(
        torch.tensor(Dg), torch.tensor(Ug), torch.tensor(A), torch.tensor(E), torch.tensor(U))
    f_res = _backward_complete(flow.tensor(Dg), flow.tensor(Ug), flow.tensor(E),
                               flow.tensor(U))
    _close(f_res, t_res)


def test_lobpcg_generalized_batched_preconditioned_and_sparse():
    A, Bm = _spd(12, seed=3), _spd(12, seed=4) + 12 * np.eye(12)
    X0 = RNG.standard_normal((12, 2))
    t = torch.lobpcg(torch.tensor(A), k=2, B=torch.tensor(Bm), X=torch.tensor(X0))
    f = flow.lobpcg(flow.tensor(A), k=2, B=flow.tensor(Bm), X=flow.tensor(X0))
    _close(f[0], t[0], atol=1e-8)
    Ab = _spd(12, seed=6, batch=(2, 1))
    Xb = RNG.standard_normal((2, 1, 12, 2))
    t = torch.lobpcg(torch.tensor(Ab), k=2, X=torch.tensor(Xb), largest=False)
    f = flow.lobpcg(flow.tensor(Ab), k=2, X=flow.tensor(Xb), largest=False)
    assert f[0].shape == (2, 1, 2) and f[1].shape == (2, 1, 12, 2)
    _close(f[0], t[0], atol=1e-8)
    iK = np.diag(1 / np.diag(A))
    t = torch.lobpcg(torch.tensor(A), k=1, X=torch.tensor(X0[:, :1]), iK=torch.tensor(iK))
    f = flow.lobpcg(flow.tensor(A), k=1, X=flow.tensor(X0[:, :1]), iK=flow.tensor(iK))
    _close(f[0], t[0], atol=1e-8)
    S = A * (np.abs(A) > 0.4)
    S = S + 12 * np.eye(12)
    t = torch.lobpcg(torch.tensor(S).to_sparse(), k=2, X=torch.tensor(X0))
    f = flow.lobpcg(flow.tensor(S).to_sparse(), k=2, X=flow.tensor(X0))
    _close(f[0], t[0], atol=1e-8)


def test_lobpcg_tracker_sees_the_state_and_can_stop():
    A, X0 = _spd(15, seed=7), RNG.standard_normal((15, 2))
    seen = {}
    for m in (torch, flow):
        steps = []

        def tracker(worker, steps=steps):
            steps.append((worker.ivars["istep"], worker.ivars["converged_count"],
                          tuple(worker.X.shape)))
            if worker.ivars["istep"] == 3:
                worker.bvars["force_stop"] = True
        m.lobpcg(m.tensor(A), k=2, X=m.tensor(X0), tracker=tracker)
        seen[m.__name__] = steps
    assert seen["flowgrad"] == seen["torch"]
    assert len(seen["torch"]) == 3


def test_lobpcg_ortho_params_and_float32():
    A, X0 = _spd(12, seed=8), RNG.standard_normal((12, 2))
    kw = dict(k=2, ortho_iparams={"ortho_i_max": 2}, ortho_bparams={"ortho_use_drop": True},
              ortho_fparams={"ortho_tol": 1e-10})
    t = torch.lobpcg(torch.tensor(A), X=torch.tensor(X0), **kw)
    f = flow.lobpcg(flow.tensor(A), X=flow.tensor(X0), **kw)
    _close(f[0], t[0], atol=1e-8)
    t = torch.lobpcg(torch.tensor(A, dtype=torch.float32), X=torch.tensor(X0).float(), k=2)
    f = flow.lobpcg(flow.tensor(A, dtype=flow.float32), X=flow.tensor(X0).float(), k=2)
    assert f[0].dtype == flow.float32
    _close(f[0], t[0], atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("call", [
    lambda m: m.lobpcg(m.tensor(_spd(12)[:, :11]), k=1),
    lambda m: m.lobpcg(m.tensor(_spd(12)), k=5),
    lambda m: m.lobpcg(m.tensor(_spd(12)), k=1, B=m.tensor(_spd(11))),
    lambda m: m.lobpcg(m.tensor(_spd(12)), k=2, X=m.ones(11, 2).double()),
    lambda m: m.lobpcg(m.tensor(_spd(12)).to(m.float16), k=1),
    lambda m: m.lobpcg(m.tensor(_spd(12) + 0j), k=1),
    lambda m: m.lobpcg(m.tensor(_spd(12), requires_grad=True), k=2,
                       B=m.tensor(np.eye(12)))[0].sum().backward(),
    lambda m: m.lobpcg(m.tensor(_spd(12) + 0j, requires_grad=True), k=2,
                       X=m.tensor(np.eye(12, 2) + 0j))[0].real.sum().backward(),
])
def test_lobpcg_raises_as_torch(call):
    t_error, f_error = _raises_alike(call)
    assert t_error is not None
    assert type(f_error) is type(t_error), (t_error, f_error)
    if isinstance(t_error, ValueError):
        assert str(f_error).split("(")[0] == str(t_error).split("(")[0]


def test_lobpcg_complex_forward_with_complex_start():
    A, X0 = _spd(12, seed=9) + 0j, np.eye(12, 2) + 0j
    t = torch.lobpcg(torch.tensor(A), k=2, X=torch.tensor(X0))
    f = flow.lobpcg(flow.tensor(A), k=2, X=flow.tensor(X0))
    _close(f[0], t[0], atol=1e-8)


def test_lobpcg_batched_gradient_matches_torch():
    A, W = _spd(12, seed=3, batch=(2,)), RNG.standard_normal((2, 12, 12))
    X0 = RNG.standard_normal((2, 12, 3))
    grads = []
    for m in (torch, flow):
        tA = m.tensor(A, requires_grad=True)
        E, X = m.lobpcg(tA, k=3, X=m.tensor(X0), tol=1e-12, largest=False)
        grads.append(m.autograd.grad(E.sum() + ((X @ X.mT) * m.tensor(W)).sum(), tA)[0])
    _close(grads[1], grads[0], atol=1e-7)
