"""Complex input for the linalg decompositions and functions against torch: values and
gradients (torch's conjugate Wirtinger convention) in complex128, unbatched and batched.

Singular and eigen vectors are unique only up to a phase per column, so those outputs enter
the loss through gauge-invariant functions (U diag(S) Vh, |U|, V diag(L) V^H), as torch's
OpInfo tests do; a loss that depends on the phase raises in both libraries."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

RNG = np.random.default_rng(1234)


def crandn(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def hermitian(*shape):
    a = crandn(*shape)
    return a + np.swapaxes(a, -1, -2).conj()


def _loss_weights(outs):
    """One fixed random cotangent per output (complex for complex outputs)."""
    ws = []
    for o in outs:
        shape = tuple(o.shape)
        w = RNG.standard_normal(shape)
        if o.is_complex():
            w = w + 1j * RNG.standard_normal(shape)
        ws.append(w)
    return ws


def _as_tuple(y):
    return tuple(y) if isinstance(y, (tuple, list)) else (y,)


def compare(fn, *arrays, grad=True, rtol=1e-8, atol=1e-10):
    """fn(m, *tensors) in torch and flowgrad: the outputs, then the gradients of
    sum(Re(w * out)) for fixed random w."""
    xf = [flow.tensor(a, requires_grad=grad) for a in arrays]
    xt = [torch.tensor(a, requires_grad=grad) for a in arrays]
    yf, yt = _as_tuple(fn(flow, *xf)), _as_tuple(fn(torch, *xt))
    assert len(yf) == len(yt)
    for a, b in zip(yf, yt):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)
    if not grad:
        return
    ws = _loss_weights(yt)
    lf = sum(flow.real(o * flow.tensor(w)).sum() for o, w in zip(yf, ws))
    lt = sum(torch.real(o * torch.tensor(w)).sum() for o, w in zip(yt, ws))
    gf = flow.autograd.grad(lf, xf)
    gt = torch.autograd.grad(lt, xt)
    for a, b in zip(gf, gt):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol * 100, atol=atol * 100)


SQUARE = [(3, 3), (2, 4, 4)]
RECT = [(4, 3), (3, 5), (2, 3, 3), (2, 5, 2)]


# ---- det / slogdet / logdet --------------------------------------------------------------
@pytest.mark.parametrize("shape", SQUARE + [(0, 2, 2), (1, 1)])
def test_det(shape):
    compare(lambda m, a: m.linalg.det(a), crandn(*shape))
    compare(lambda m, a: m.det(a), crandn(*shape))


def test_det_singular():
    a = crandn(3, 2) @ crandn(2, 3)  # rank 2: det's gradient through the SVD
    b = crandn(2, 4, 1) @ crandn(2, 1, 4)  # rank 1: a zero gradient
    compare(lambda m, a: m.linalg.det(a), a, atol=1e-9)
    compare(lambda m, a: m.linalg.det(a), b, atol=1e-9)


@pytest.mark.parametrize("shape", SQUARE)
def test_slogdet_and_logdet(shape):
    compare(lambda m, a: m.linalg.slogdet(a), crandn(*shape))  # sign's cotangent too
    compare(lambda m, a: m.linalg.slogdet(a)[1], crandn(*shape))
    compare(lambda m, a: m.logdet(a), crandn(*shape))
    compare(lambda m, a: a.slogdet(), crandn(*shape))


# ---- svd / svdvals ---------------------------------------------------------------------
@pytest.mark.parametrize("shape", RECT)
def test_svd(shape):
    def invariant(m, a):
        U, S, Vh = m.linalg.svd(a, full_matrices=False)
        return U @ (S.unsqueeze(-1) * Vh), U.abs(), Vh.abs(), S, U @ Vh[..., :, :U.shape[-1]]

    compare(invariant, crandn(*shape))
    compare(lambda m, a: m.linalg.svdvals(a), crandn(*shape))


@pytest.mark.parametrize("shape", [(4, 3), (3, 5)])
def test_svd_full_matrices_and_torch_svd(shape):
    def full(m, a):
        U, S, Vh = m.linalg.svd(a, full_matrices=True)
        return U.abs(), Vh.abs(), S

    def old(m, a):
        U, S, V = m.svd(a)
        return U @ (S.unsqueeze(-1) * V.mH), S

    compare(full, crandn(*shape), grad=False)
    compare(old, crandn(*shape))


def test_svd_phase_dependent_loss_raises():
    for m in (flow, torch):
        a = m.tensor(crandn(3, 3), requires_grad=True)
        U, S, Vh = m.linalg.svd(a)
        with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
            U.real.sum().backward()


# ---- eigh / eigvalsh ---------------------------------------------------------------------
@pytest.mark.parametrize("shape", SQUARE)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(shape, uplo):
    def invariant(m, a):
        L, V = m.linalg.eigh(a, UPLO=uplo)
        return L, V.abs(), (V * L.unsqueeze(-2)) @ V.mH

    compare(invariant, hermitian(*shape))
    compare(lambda m, a: m.linalg.eigvalsh(a, UPLO=uplo), hermitian(*shape))
    compare(lambda m, a: m.linalg.eigvalsh(a, UPLO=uplo), crandn(*shape))  # one triangle read


def test_eigh_phase_dependent_loss_raises():
    for m in (flow, torch):
        a = m.tensor(hermitian(3, 3), requires_grad=True)
        L, V = m.linalg.eigh(a)
        with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
            V.imag.sum().backward()


# ---- qr ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", RECT)
def test_qr(shape):
    compare(lambda m, a: m.linalg.qr(a), crandn(*shape))
    compare(lambda m, a: m.qr(a), crandn(*shape))


def test_qr_complete_wide():
    compare(lambda m, a: m.linalg.qr(a, mode="complete"), crandn(2, 3, 5))
    compare(lambda m, a: m.linalg.qr(a, mode="r")[1], crandn(4, 3), grad=False)


# ---- pinv / lstsq ------------------------------------------------------------------------
@pytest.mark.parametrize("shape", RECT)
def test_pinv(shape):
    compare(lambda m, a: m.linalg.pinv(a), crandn(*shape))
    compare(lambda m, a: m.pinverse(a), crandn(*shape))


@pytest.mark.parametrize("shape", SQUARE)
def test_pinv_hermitian(shape):
    compare(lambda m, a: m.linalg.pinv(a, hermitian=True), hermitian(*shape))


@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((2, 4, 4), (2, 4, 3)), ((3, 5), (3,))])
def test_lstsq(shapes):
    compare(lambda m, a, b: m.linalg.lstsq(a, b).solution, crandn(*shapes[0]),
            crandn(*shapes[1]))
    compare(lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd")[:2], crandn(*shapes[0]),
            crandn(*shapes[1]))


# ---- norms, cond, rank -------------------------------------------------------------------
@pytest.mark.parametrize("ord", ["fro", "nuc", 2, -2, 1, -1, float("inf"), -float("inf")])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 3)])
def test_matrix_norm(ord, shape):
    compare(lambda m, a: m.linalg.matrix_norm(a, ord), crandn(*shape))
    compare(lambda m, a: m.linalg.norm(a, ord, dim=(-2, -1)), crandn(*shape))


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, float("inf")])
def test_cond(p):
    # torch differentiates only the SVD-based p (its other branch writes in place to inv_ex)
    compare(lambda m, a: m.linalg.cond(a, p), crandn(2, 3, 3), grad=p in (None, 2, -2))


def test_matrix_rank():
    a = np.stack([crandn(4, 2) @ crandn(2, 4), crandn(4, 4)])
    compare(lambda m, a: m.linalg.matrix_rank(a), a, grad=False)
    h = np.stack([a[0] + a[0].conj().T, hermitian(4, 4)])
    compare(lambda m, a: m.linalg.matrix_rank(a, hermitian=True), h, grad=False)


# ---- matrix_exp --------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [0.3, 4.0])  # 4: scaling and squaring
@pytest.mark.parametrize("shape", SQUARE)
def test_matrix_exp(shape, scale):
    compare(lambda m, a: m.linalg.matrix_exp(a), crandn(*shape) * scale, rtol=1e-9)


# ---- LDL ---------------------------------------------------------------------------------
@pytest.mark.parametrize("herm", [False, True])
def test_ldl(herm):
    a = crandn(3, 6, 6)
    a[:, range(6), range(6)] *= 0.01  # small diagonal: 2 x 2 pivots
    a = a + (np.swapaxes(a, -1, -2).conj() if herm else np.swapaxes(a, -1, -2))
    b = crandn(6, 2)

    def ldl(m, a, b):
        LD, piv, info = m.linalg.ldl_factor_ex(a, hermitian=herm)
        return LD, piv, info, m.linalg.ldl_solve(LD, piv, b, hermitian=herm)

    compare(ldl, a, b, grad=False)


# ---- complex64 ---------------------------------------------------------------------------
def test_complex64_dtypes():
    a = crandn(3, 3, dtype=np.complex64)
    h = (a + a.conj().T).astype(np.complex64)
    for fn, x in ((lambda m, a: m.linalg.det(a), a), (lambda m, a: m.linalg.slogdet(a), a),
                  (lambda m, a: m.linalg.svdvals(a), a), (lambda m, a: m.linalg.eigvalsh(a), h),
                  (lambda m, a: m.linalg.qr(a).R.abs(), a), (lambda m, a: m.linalg.pinv(a), a),
                  (lambda m, a: m.linalg.matrix_exp(a), a),
                  (lambda m, a: m.linalg.matrix_norm(a, "nuc"), a)):
        compare(fn, x, rtol=1e-4, atol=1e-5)
