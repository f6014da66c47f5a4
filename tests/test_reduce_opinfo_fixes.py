"""Regressions for the findings torch's OpInfo database showed in the reductions, statistics,
spectral and special functions: istft with complex windows, quantile of a 0-d tensor, prod to
bool, complex logsumexp / logcumsumexp / var / std / isclose / logaddexp / sinc (values and
conjugate Wirtinger gradients against torch), and the places where torch itself is off
(float64 Bessel functions, the cov aweights gradient) checked against exact math instead."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow


def _pair(shape, dtype=np.complex128, seed=0, low=None):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    if low is not None:
        a = np.abs(a) + low
    a = a.astype(dtype)
    return (flow.tensor(a.copy(), requires_grad=True), torch.tensor(a.copy(), requires_grad=True))


def _cotangent(t_out, seed=1):
    rng = np.random.default_rng(seed)
    c = rng.standard_normal(tuple(t_out.shape))
    if t_out.dtype.is_complex:
        c = c + 1j * rng.standard_normal(tuple(t_out.shape))
    return c.astype(str(t_out.dtype).split(".")[1])


def _check(f_fn, t_fn, *pairs, rtol=1e-10, atol=1e-12):
    """Outputs (each of a tuple) and the gradients of every input against torch's."""
    f_out, t_out = f_fn(*(p[0] for p in pairs)), t_fn(*(p[1] for p in pairs))
    f_outs = f_out if isinstance(f_out, tuple) else (f_out,)
    t_outs = t_out if isinstance(t_out, tuple) else (t_out,)
    for f, t in zip(f_outs, t_outs, strict=True):
        assert str(f.dtype).split(".")[1] == str(t.dtype).split(".")[1]
        assert tuple(f.shape) == tuple(t.shape)
        np.testing.assert_allclose(f.detach().numpy(), t.detach().resolve_conj().numpy(),
                                   rtol=rtol, atol=atol)
    cots = [_cotangent(t, seed=i + 1) for i, t in enumerate(t_outs)]
    t_grads = torch.autograd.grad(t_outs, [p[1] for p in pairs], [torch.tensor(c) for c in cots])
    f_grads = flow.autograd.grad(list(f_outs), [p[0] for p in pairs],
                                 [flow.tensor(c) for c in cots])
    for f, t in zip(f_grads, t_grads, strict=True):
        np.testing.assert_allclose(f.numpy(), t.resolve_conj().numpy(), rtol=rtol, atol=atol)


# ---- istft / stft ------------------------------------------------------------------------------
@pytest.mark.parametrize("win_length", [10, 8])
def test_istft_complex_window_return_complex(win_length):
    # torch's envelope is sum(window ** 2) (not |window| ** 2) with a complex window
    spec, window = _pair((3, 10, 6)), _pair((win_length,), seed=2, low=0.5)
    _check(lambda s, w: flow.istft(s, 10, window=w, win_length=win_length, return_complex=True),
           lambda s, w: torch.istft(s, 10, window=w, win_length=win_length, return_complex=True),
           spec, window)


def test_istft_real_window_gradient_with_complex_input():
    # the OpInfo sample's window is a strided view, whose torch gradient goes to its base (the
    # probe reads 0 there); a window of its own gets this gradient, which finite differences
    # confirm
    spec, window = _pair((4, 5, 6)), _pair((8,), np.float64, seed=2, low=0.5)
    _check(lambda s, w: flow.istft(s, 8, window=w), lambda s, w: torch.istft(s, 8, window=w),
           spec, window)
    s0, w0 = spec[1].detach(), window[1].detach()
    c = torch.tensor(_cotangent(torch.istft(s0, 8, window=w0)))
    f_grad = flow.autograd.grad([flow.istft(spec[0], 8, window=window[0])], [window[0]],
                                [flow.tensor(c.numpy())])[0].numpy()
    eps = 1e-6
    fd = [float(((torch.istft(s0, 8, window=w0 + e) - torch.istft(s0, 8, window=w0 - e)) * c)
                .sum() / (2 * eps)) for e in torch.eye(8, dtype=torch.float64) * eps]
    np.testing.assert_allclose(f_grad, fd, rtol=1e-6, atol=1e-6)


def test_stft_complex_window_gradients():
    x, window = _pair((2, 40)), _pair((16,), seed=2, low=0.5)
    _check(lambda a, w: flow.stft(a, 16, hop_length=4, window=w, return_complex=True),
           lambda a, w: torch.stft(a, 16, hop_length=4, window=w, return_complex=True),
           x, window, rtol=1e-9, atol=1e-10)


# ---- quantile, prod ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("q", [0.3, (0.2, 0.9)])
def test_quantile_of_a_0d_tensor_keeps_no_dim(name, dim, keepdim, q):
    x = _pair((), np.float64)
    qs = (lambda m: m.tensor(q, dtype=m.float64)) if isinstance(q, tuple) else (lambda m: q)
    _check(lambda a: getattr(flow, name)(a, qs(flow), dim=dim, keepdim=keepdim),
           lambda a: getattr(torch, name)(a, qs(torch), dim=dim, keepdim=keepdim), x)


@pytest.mark.parametrize("keepdim", [False, True])
def test_prod_to_bool(keepdim):
    a = np.random.default_rng(0).random((5, 5, 5)) > 0.2
    f = flow.prod(flow.tensor(a), 1, dtype=flow.bool, keepdim=keepdim)
    t = torch.prod(torch.tensor(a), 1, dtype=torch.bool, keepdim=keepdim)
    assert f.dtype == flow.bool
    np.testing.assert_array_equal(f.numpy(), t.numpy())


# ---- complex reductions and elementwise ops ----------------------------------------------------
@pytest.mark.parametrize("dim,keepdim", [((1,), False), ((0, 2), True), ((0, 1, 2), False)])
def test_logsumexp_complex(dim, keepdim):
    _check(lambda a: flow.logsumexp(a, dim, keepdim), lambda a: torch.logsumexp(a, dim, keepdim),
           _pair((3, 4, 5)))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_complex(dim):
    _check(lambda a: flow.logcumsumexp(a, dim), lambda a: torch.logcumsumexp(a, dim),
           _pair((4, 6, 3)))


def test_logcumsumexp_complex_special_values():
    inf, nan = float("inf"), float("nan")
    data = np.array([[complex(-inf, 0), 1 + 2j, complex(-inf, 3), 5 - 40j, complex(nan, 0), 1j],
                     [complex(inf, 1), complex(inf, 2), 0j, 1e3 + 1j, 1e3 - 1j, -1e3 + 0j]])
    f = flow.logcumsumexp(flow.tensor(data), 1).numpy()
    t = torch.logcumsumexp(torch.tensor(data), 1).numpy()
    np.testing.assert_allclose(f, t, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("kwargs", [{}, {"dim": 1}, {"dim": (0, 2), "keepdim": True},
                                    {"dim": 1, "correction": 0}])
def test_var_std_complex(name, kwargs):
    _check(lambda a: getattr(flow, name)(a, **kwargs), lambda a: getattr(torch, name)(a, **kwargs),
           _pair((3, 4, 5)))


@pytest.mark.parametrize("equal_nan", [False, True])
@pytest.mark.parametrize("rtol,atol", [(1e-5, 1e-8), (0.0, 0.0), (0.1, 0.01)])
def test_isclose_allclose_complex(rtol, atol, equal_nan):
    inf, nan = float("inf"), float("nan")
    vals = [1 + 1j, complex(inf, 1), complex(inf, 2), complex(nan, 0), complex(1, nan),
            complex(1 + 1e-6, 1), complex(-inf, -inf), complex(inf, inf), 0j, 1.05 + 1j]
    a = np.array([x for x in vals for _ in vals])
    b = np.array([y for _ in vals for y in vals])
    f = flow.isclose(flow.tensor(a), flow.tensor(b), rtol, atol, equal_nan).numpy()
    t = torch.isclose(torch.tensor(a), torch.tensor(b), rtol, atol, equal_nan).numpy()
    np.testing.assert_array_equal(f, t)
    for x, y in ((a[:3], a[:3]), (a[:12], b[:12])):
        assert flow.allclose(flow.tensor(x), flow.tensor(y), rtol, atol, equal_nan) == \
            torch.allclose(torch.tensor(x), torch.tensor(y), rtol, atol, equal_nan)


def test_logaddexp_complex():
    _check(flow.logaddexp, torch.logaddexp, _pair((4, 5)), _pair((5,), seed=3))
    inf, nan = float("inf"), float("nan")
    a = np.array([complex(-inf, 1), complex(inf, 1), complex(nan, 0), 1 + 1j, 2 + 0j, 1e3j])
    b = np.array([complex(-inf, 2), complex(inf, -1), 1 + 0j, 1 - 1j, 2 + 5j, -1e3j])
    f = flow.logaddexp(flow.tensor(a), flow.tensor(b)).numpy()
    t = torch.logaddexp(torch.tensor(a), torch.tensor(b)).numpy()
    np.testing.assert_allclose(f, t, rtol=1e-12, equal_nan=True)


def test_sinc_complex():
    x = _pair((20,))
    _check(flow.sinc, torch.sinc, x)
    z = np.array([0j, 1e-9 + 1e-9j, 2 + 0j, 3j])
    np.testing.assert_allclose(flow.sinc(flow.tensor(z)).numpy(),
                               torch.sinc(torch.tensor(z)).numpy(), rtol=1e-12)


# ---- where torch is off: checked against exact math ------------------------------------------
_BESSEL = {"bessel_j0": ("besselj", 0), "bessel_j1": ("besselj", 1), "bessel_y0": ("bessely", 0),
           "bessel_y1": ("bessely", 1), "modified_bessel_i0": ("besseli", 0),
           "modified_bessel_i1": ("besseli", 1), "modified_bessel_k0": ("besselk", 0),
           "modified_bessel_k1": ("besselk", 1)}


@pytest.mark.parametrize("name", sorted(_BESSEL) + ["airy_ai", "spherical_bessel_j0"])
def test_bessel_functions_are_float64_accurate(name):
    """torch's float64 j0/j1/y0/y1 (and airy_ai) are off by up to ~1e-6 between ~2.5 and ~25
    (e.g. j0(5.4215) by 2e-7 absolute): flowgrad's Cephes kernels agree with mpmath to ~1e-15,
    so these are checked against mpmath, not torch."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-1, 1, 30), rng.uniform(-12, 12, 80),
                        rng.uniform(12, 1000, 40), [2.404825557695773, 5.520078110286311,
                                                    3.8317059702075125, 1e-5]])
    if name.startswith(("bessel_y", "modified_bessel_k")):
        x = np.abs(x)
    if name.startswith("modified_bessel"):
        x = x[np.abs(x) < 600]
    if name == "airy_ai":
        x = x[x < 80]
    with mpmath.workdps(40):
        if name in _BESSEL:
            fn, order = _BESSEL[name]
            ref = [getattr(mpmath, fn)(order, mpmath.mpf(float(v))) for v in x]
        elif name == "airy_ai":
            ref = [mpmath.airyai(mpmath.mpf(float(v))) for v in x]
        else:
            ref = [mpmath.sinc(mpmath.mpf(float(v))) for v in x]
        ref = np.array([float(r) for r in ref])
    out = getattr(flow.special, name)(flow.tensor(x)).numpy()
    # relative where the value is not tiny; near a zero, absolute (of the function's scale)
    scale = np.maximum(np.abs(ref), 1e-3 if name.startswith(("bessel", "airy", "sph")) else 0)
    assert np.max(np.abs(out - ref) / scale) < 5e-13


def test_cov_aweights_gradient_is_zero_up_to_rounding():
    """With two observations and aweights only, cov does not depend on the weights (w1 w2 |d|^2
    / W over 2 w1 w2 / W): the gradient is 0. torch and flowgrad both give float32 rounding
    (about 2^-16 here) for float32 weights, at different positions; float64 weights: ~1e-14."""
    x = flow.tensor([-4.8270 - 7.5824j, -0.6047 - 1.5412j])
    cot = flow.tensor(0.3 - 1.2j)
    for dtype, tol in ((flow.float32, 1e-4), (flow.float64, 1e-12)):
        w = flow.tensor([0.2598, 0.3666], dtype=dtype, requires_grad=True)
        (g,) = flow.autograd.grad([flow.cov(x, aweights=w)], [w], [cot])
        assert g.dtype == dtype
        assert np.abs(g.numpy()).max() < tol
