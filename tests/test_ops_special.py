"""flow.special and the special functions of flow.* against torch (forward and every input
gradient), by float64 finite differences to second order; the functions torch gives no
gradient (Bessel, Airy, polynomials) against torch on a wide grid; errors."""
import numpy as np
import pytest
import torch
from helpers import Positive, Unit, op_table_tests

import flowgrad as flow

A = np.array([[0.7, 1.5, 3.0], [2.2, 0.9, 5.0]], dtype=np.float32)  # gammainc's a, zeta's x
ZERO = np.array([[0.0, 0.3, -1.2], [2.5, -0.4, 4.0]])  # with an exact 0
GRID = np.array([-30.0, -5.5, -2.0, -1.0, -0.3, 0.0, 1e-3, 0.3, 1.0, 2.0, 5.5, 12.0, 40.0])


CASES = [
    ("lgamma", lambda m, x: m.lgamma(x), (2, 3)),
    ("gammaln", lambda m, x: m.special.gammaln(x), Positive((2, 3))),
    ("digamma", lambda m, x: m.digamma(x), Positive((2, 3))),
    ("psi", lambda m, x: m.special.psi(x), (2, 3)),
    ("polygamma0", lambda m, x: m.polygamma(0, x), Positive((2, 3))),
    ("polygamma1", lambda m, x: m.special.polygamma(1, x), Positive((2, 3))),
    ("polygamma3", lambda m, x: (x + 1).polygamma(3), Positive((2, 3))),
    ("mvlgamma", lambda m, x: m.mvlgamma(x + 2, p=3), Positive((2, 3))),
    ("multigammaln", lambda m, x: m.special.multigammaln(x + 1, 2), Positive((2, 3))),
    ("gammainc", lambda m, x: m.special.gammainc(m.tensor(A), x), Positive((2, 3))),
    ("gammaincc", lambda m, x: m.special.gammaincc(m.tensor(A), x), Positive((2, 3))),
    ("igamma", lambda m, x: m.igamma(m.tensor(A), x), Positive((2, 3))),
    ("igammac", lambda m, x: m.tensor(A).igammac(x * 2), Positive((2, 3))),
    ("i0", lambda m, x: m.i0(x), (2, 3)),
    ("special_i0", lambda m, x: m.special.i0(x * 3), (2, 3)),
    ("i0e_at_0", lambda m, x: m.special.i0e(x * 3), ZERO),  # a kink at 0
    ("i0e", lambda m, x: m.special.i0e(x * 3), (2, 3)),
    ("i1", lambda m, x: m.special.i1(x * 3), ZERO),
    ("i1e", lambda m, x: m.special.i1e(x * 3), ZERO),
    ("ndtr", lambda m, x: m.special.ndtr(x), (2, 3)),
    ("ndtri", lambda m, x: m.special.ndtri(m.sigmoid(x)), (2, 3)),
    ("log_ndtr", lambda m, x: m.special.log_ndtr(x * 4), (2, 3)),
    ("erfcx", lambda m, x: m.special.erfcx(x * 3), (2, 3)),
    ("erf", lambda m, x: m.special.erf(x), (2, 3)),
    ("erfc", lambda m, x: m.special.erfc(x), (2, 3)),
    ("erfinv", lambda m, x: m.special.erfinv(x), Unit((2, 3))),
    ("expit", lambda m, x: m.special.expit(x), (2, 3)),
    ("logit", lambda m, x: m.special.logit(m.sigmoid(x)), (2, 3)),
    ("logit_eps", lambda m, x: m.special.logit(m.sigmoid(x * 3), eps=0.1), (2, 3)),
    ("exp2", lambda m, x: m.special.exp2(x), (2, 3)),
    ("expm1", lambda m, x: m.special.expm1(x), (2, 3)),
    ("log1p", lambda m, x: m.special.log1p(x), Positive((2, 3))),
    ("xlogy", lambda m, x, y: m.special.xlogy(x, y), (2, 3), Positive((3,))),
    ("xlog1py", lambda m, x, y: m.special.xlog1py(x, y), (2, 3), Positive((2, 3))),
    ("xlog1py_zero_x", lambda m, x, y: m.special.xlog1py(x * 0, y), (2, 3), Positive((2, 3))),
    ("zeta", lambda m, q: m.special.zeta(m.tensor(A) + 1, q), Positive((2, 3))),
    ("sinc", lambda m, x: m.sinc(x), ZERO),  # 2nd order at 0 is masked, as torch
    ("special_sinc", lambda m, x: m.special.sinc(x * 2), (2, 3)),
    ("entr", lambda m, x: m.special.entr(x), Positive((2, 3))),
    ("round", lambda m, x: m.special.round(x * 5), (2, 3)),
    ("softmax", lambda m, x: m.special.softmax(x, 1), (2, 3)),
    ("log_softmax", lambda m, x: m.special.log_softmax(x, 0), (2, 3)),
    ("logsumexp", lambda m, x: m.special.logsumexp(x, 1, keepdim=True), (2, 3)),
]


NO_FD = {'round', 'sinc', 'i0e_at_0'}
test_against_torch, test_finite_differences = op_table_tests(
    CASES, [c for c in CASES if c[0] not in NO_FD])


def test_float64_values_and_edges():
    x = np.array([0.0, -1.0, -2.5, 1e-8, 0.5, 7.0, 30.0, np.inf, np.nan])
    for name in ("gammaln", "digamma", "i0", "i0e", "i1", "i1e", "ndtr", "log_ndtr", "erfcx",
                 "sinc", "entr"):
        ours = getattr(flow.special, name)(flow.tensor(x)).numpy()
        theirs = getattr(torch.special, name)(torch.tensor(x)).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-300, err_msg=name)
    p = np.array([0.0, 1e-300, 0.025, 0.5, 1 - 1e-16, 1.0, 1.5])
    np.testing.assert_allclose(flow.special.ndtri(flow.tensor(p)).numpy(),
                               torch.special.ndtri(torch.tensor(p)).numpy(), rtol=1e-12)


NO_GRAD = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0"]


@pytest.mark.parametrize("name", NO_GRAD)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bessel_airy_match_torch_without_gradient(name, dtype):
    x = GRID.astype(dtype)
    ours = getattr(flow.special, name)(flow.tensor(x, requires_grad=True))
    theirs = getattr(torch.special, name)(torch.tensor(x, requires_grad=True))
    assert ours.requires_grad == theirs.requires_grad is False
    assert ours.dtype.itemsize == theirs.dtype.itemsize
    # near their zeros torch's float64 j0/y1 are off by up to 4e-7 (j0(5.5): 2e-5 relative to
    # mpmath; SciPy's within 1e-15), so the comparison has an absolute floor
    tol = dict(rtol=1e-4, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-8, atol=5e-7)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), **tol)


POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
         "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
         "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
         "laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("name", POLYS)
def test_polynomials_match_torch(name):
    x = np.linspace(-1.5, 1.5, 13)[:, None]
    n = np.arange(-1, 11)[None, :]
    ours = getattr(flow.special, name)(flow.tensor(x), flow.tensor(n)).numpy()
    theirs = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9)
    ours = getattr(flow.special, name)(flow.tensor(x.astype(np.float32)), 3)
    theirs = getattr(torch.special, name)(torch.tensor(x.astype(np.float32)), 3)
    assert ours.dtype == flow.float32 and not ours.requires_grad
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)


def test_int_inputs_promote_and_methods():
    i = np.array([1, 2, 5])
    for name in ("lgamma", "digamma", "i0", "sinc"):
        ours, theirs = getattr(flow, name)(flow.tensor(i)), getattr(torch, name)(torch.tensor(i))
        assert ours.dtype == flow.float32
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    for name, args in (("lgamma_", ()), ("digamma_", ()), ("i0_", ()), ("sinc_", ()),
                       ("polygamma_", (2,)), ("mvlgamma_", (2,)), ("igamma_", (0.5,)),
                       ("igammac_", (0.5,))):
        a, b = flow.tensor(A + 1.0), torch.tensor(A + 1.0)
        getattr(a, name)(*(flow.tensor(v) if isinstance(v, float) else v for v in args))
        getattr(b, name)(*(torch.tensor(v) if isinstance(v, float) else v for v in args))
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, err_msg=name)


def test_errors():
    x = flow.tensor([0.5, 1.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="derivative for 'zeta' is not implemented"):
        flow.special.zeta(x + 1, flow.tensor([1.0, 2.0])).sum().backward()
    with pytest.raises(NotImplementedError, match="igamma: input"):
        flow.special.gammainc(x, flow.tensor([1.0, 2.0])).sum().backward()
    with pytest.raises(RuntimeError, match="non-negative integer"):
        flow.polygamma(-1, x)
    with pytest.raises(TypeError, match="chebyshev_polynomial_t: expected input or n"):
        flow.special.chebyshev_polynomial_t(0.5, 2)


def test_float32_erf_tails_and_chunks_match_torch():
    """The float32 fit gives exactly +-1 from |x| = 4.4 out (1 + erf(x) exactly 0, as torch),
    and the chunked evaluation of a large array (flowgrad.ops.special.map_chunks) equals the
    unchunked one exactly and torch's erf within the fit's 4 ulp."""
    import torch

    from flowgrad.ops.special import CHUNK, _erf_float32, map_chunks

    tails = np.array([4.4, -4.4, 5.0, -5.0, 1e30, -1e30, np.inf, -np.inf], np.float32)
    assert np.array_equal(flow.erf(flow.tensor(tails)).numpy(), np.sign(tails))
    assert (1 + flow.erf(flow.tensor(tails[1::2]))).numpy().tolist() == [0.0] * 4
    band = np.linspace(3.8, 4.4, 1000, dtype=np.float32)  # erf is 1 or 1 - 6e-8 in float32
    assert np.abs(flow.erf(flow.tensor(band)).numpy() - 1).max() <= 1.2e-7  # within an ulp
    huge = flow.nn.functional.gelu(flow.tensor([-1e30, -1e4, -50.0])).numpy()
    assert np.array_equal(huge, [0.0, 0.0, 0.0])  # no x * (1 + erf) blow-up in the tail
    x = np.random.default_rng(0).standard_normal(3 * CHUNK + 17).astype(np.float32) * 3
    got = flow.erf(flow.tensor(x)).numpy()  # MKL's vector math where it is loaded
    assert np.array_equal(map_chunks(np, _erf_float32, x), _erf_float32(np, x))
    np.testing.assert_allclose(_erf_float32(np, x), torch.erf(torch.from_numpy(x)).numpy(),
                               rtol=0, atol=4e-7)
    np.testing.assert_allclose(got, torch.erf(torch.from_numpy(x)).numpy(), rtol=0, atol=4e-7)
    gelu = flow.nn.functional.gelu(flow.tensor(x))
    # (absolute: for x < -3, 1 + erf(x / sqrt 2) cancels, so gelu's tiny values there are
    # only good to the fit's ~3e-7 times |x|; torch's are good relatively)
    np.testing.assert_allclose(gelu.numpy(), torch.nn.functional.gelu(torch.from_numpy(x)).numpy(),
                               rtol=1e-6, atol=2e-6)
