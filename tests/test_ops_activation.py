"""Activations against torch (forward and gradients) and by float64 finite differences to
second order; in-place forms; stability for |x| ~ 1e4; errors. One line per case."""
import numpy as np
import pytest
import torch
from helpers import check, gradcheck

import flowgrad as flow
import flowgrad.nn.functional as FF

# away from the kinks at 0, +-0.5, +-1, +-3 so finite differences see one smooth piece
SPREAD = np.array([[-4.1, -2.9, -1.3, -0.7, -0.2], [0.3, 0.8, 1.6, 2.7, 6.4]])

# a fully masked row (every value -inf: _safe_softmax gives 0 there), a partly masked one
MASKED_ROWS = np.array([[-np.inf, -np.inf, -np.inf], [0.3, -np.inf, 1.2], [0.5, -0.4, 2.0]])


def C(name, fn, *specs, second=True, **kw):
    return pytest.param(fn, specs, second, kw, id=name)


CASES = [
    C("relu", lambda m, x: m.relu(x), (2, 5)),
    C("relu_method", lambda m, x: x.relu(), (2, 5)),
    C("relu6", lambda m, x: m.nn.functional.relu6(x * 4), SPREAD),
    C("leaky_relu", lambda m, x: m.nn.functional.leaky_relu(x, 0.2), (2, 5)),
    C("elu", lambda m, x: m.nn.functional.elu(x), (2, 5)),
    C("elu_alpha", lambda m, x: m.nn.functional.elu(x, alpha=0.5), SPREAD),
    C("selu", lambda m, x: m.selu(x), (2, 5)),
    C("celu", lambda m, x: m.nn.functional.celu(x, alpha=2.0), (2, 5)),
    C("gelu", lambda m, x: m.nn.functional.gelu(x), (2, 5)),
    C("gelu_tanh", lambda m, x: m.nn.functional.gelu(x, approximate="tanh"), (2, 5)),
    C("silu", lambda m, x: m.nn.functional.silu(x), (2, 5)),
    C("mish", lambda m, x: m.nn.functional.mish(x), (2, 5)),
    C("softplus", lambda m, x: m.nn.functional.softplus(x), (2, 5)),
    C("softplus_beta", lambda m, x: m.nn.functional.softplus(x, beta=2.0, threshold=3.0),
      SPREAD),
    C("softsign", lambda m, x: m.nn.functional.softsign(x), (2, 5)),
    C("hardtanh", lambda m, x: m.nn.functional.hardtanh(x), SPREAD),
    C("hardtanh_range", lambda m, x: m.nn.functional.hardtanh(x, -2.0, 0.5), SPREAD),
    C("hardsigmoid", lambda m, x: m.nn.functional.hardsigmoid(x), SPREAD),
    C("hardswish", lambda m, x: m.nn.functional.hardswish(x), SPREAD),
    C("hardshrink", lambda m, x: m.nn.functional.hardshrink(x), SPREAD),
    C("hardshrink_method", lambda m, x: x.hardshrink(1.0), SPREAD),
    C("softshrink", lambda m, x: m.nn.functional.softshrink(x, 1.0), SPREAD),
    C("tanhshrink", lambda m, x: m.nn.functional.tanhshrink(x), (2, 5)),
    C("threshold", lambda m, x: m.nn.functional.threshold(x, 0.5, -2.0), SPREAD),
    C("prelu", lambda m, x, w: m.nn.functional.prelu(x, w), (2, 3, 4), (3,)),
    C("prelu_single", lambda m, x, w: m.prelu(x, w), (2, 5), (1,)),
    C("prelu_method", lambda m, x, w: x.prelu(w), (2, 5), (5,)),
    C("glu", lambda m, x: m.nn.functional.glu(x), (2, 6)),
    C("glu_dim0", lambda m, x: m.nn.functional.glu(x, dim=0), (4, 3)),
    C("logsigmoid", lambda m, x: m.nn.functional.logsigmoid(x), (2, 5)),
    C("sigmoid", lambda m, x: m.nn.functional.sigmoid(x), (2, 5)),
    C("tanh", lambda m, x: m.nn.functional.tanh(x), (2, 5)),
    C("softmax", lambda m, x: m.softmax(x, dim=1), (2, 5)),
    C("softmax_dim0", lambda m, x: m.nn.functional.softmax(x, dim=0), (3, 4)),
    C("softmax_method_dtype", lambda m, x: x.softmax(-1, dtype=m.float64), (2, 5)),
    C("log_softmax", lambda m, x: m.log_softmax(x, dim=-1), (2, 5)),
    C("log_softmax_3d", lambda m, x: m.nn.functional.log_softmax(x, dim=1), (2, 3, 2)),
    C("softmin", lambda m, x: m.nn.functional.softmin(x, dim=1), (2, 5)),
    C("safe_softmax", lambda m, x: m._safe_softmax(x, 1), (2, 5)),
    C("safe_softmax_masked_rows", lambda m, x: m._safe_softmax(x, -1), MASKED_ROWS),
    C("safe_softmax_dim0_dtype", lambda m, x: m._safe_softmax(x, 0, dtype=m.float64), MASKED_ROWS),
]


@pytest.mark.parametrize(("fn", "specs", "second", "kw"), CASES)
def test_against_torch(fn, specs, second, kw):
    check(fn, *specs, **kw)


@pytest.mark.parametrize(("fn", "specs", "second", "kw"), CASES)
def test_finite_differences(fn, specs, second, kw):
    gradcheck(fn, *specs, second_order=second)


# exact gelu runs on chunks of special.CHUNK elements and hands Phi(x) to its backward as an
# aux output: with CHUNK = 4 the 3 x 5 input takes four chunks, the last one ragged
@pytest.mark.parametrize("shape", [(3, 5), ()])
def test_gelu_chunks_and_saved_cdf(shape, monkeypatch):
    from flowgrad.ops import special

    monkeypatch.setattr(special, "CHUNK", 4)
    check(lambda m, x: m.nn.functional.gelu(x), shape)
    gradcheck(lambda m, x: m.nn.functional.gelu(x), shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_grad_from_saved_cdf_equals_recomputed(dtype):
    """gelu_grad with the forward's Phi(x) gives what it gives computing Phi itself."""
    from flowgrad.ops.activation import _gelu, _gelu_grad
    from flowgrad.ops.special import CHUNK

    rng = np.random.default_rng(4)
    x = (rng.standard_normal(2 * CHUNK + 5) * 3).astype(dtype)
    dy = rng.standard_normal(x.shape).astype(dtype)
    y, cdf = _gelu.kernel(np, x, approximate="none")
    assert cdf.dtype == np.float32 if dtype == np.float32 else cdf.dtype == np.float64
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(_gelu_grad.kernel(np, x, dy, cdf), _gelu_grad.kernel(np, x, dy),
                               rtol=tol, atol=tol)
    with torch.no_grad():
        theirs = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(y, theirs, rtol=tol, atol=2e-6 if dtype == np.float32 else tol)


INPLACE = [
    C("relu_inplace", lambda m, x: m.nn.functional.relu(x * 1, inplace=True), (2, 5)),
    C("relu_", lambda m, x: m.relu_(x * 1), (2, 5)),
    C("relu_method_", lambda m, x: (x * 1).relu_(), (2, 5)),
    C("leaky_relu_", lambda m, x: m.nn.functional.leaky_relu_(x * 1, 0.1), (2, 5)),
    C("elu_", lambda m, x: m.nn.functional.elu_(x * 1), (2, 5)),
    C("selu_inplace", lambda m, x: m.nn.functional.selu(x * 1, inplace=True), (2, 5)),
    C("celu_", lambda m, x: m.nn.functional.celu(x * 1, 1.5, inplace=True), (2, 5)),
    C("hardtanh_", lambda m, x: m.nn.functional.hardtanh_(x * 1, -0.5, 0.5), SPREAD),
    C("relu6_inplace", lambda m, x: m.nn.functional.relu6(x * 2, inplace=True), SPREAD),
    C("hardswish_inplace", lambda m, x: m.nn.functional.hardswish(x * 1, inplace=True), SPREAD),
    C("silu_inplace", lambda m, x: m.nn.functional.silu(x * 1, inplace=True), (2, 5)),
    C("threshold_", lambda m, x: m.nn.functional.threshold_(x * 1, 0.5, 0.0), SPREAD),
    C("sigmoid_", lambda m, x: (x * 1).sigmoid_(), (2, 5)),
]


@pytest.mark.parametrize(("fn", "specs", "second", "kw"), INPLACE)
def test_inplace_against_torch(fn, specs, second, kw):
    check(fn, *specs, **kw)


def test_inplace_writes_the_input():
    x = flow.tensor([-1.0, 2.0])
    assert FF.relu(x, inplace=True) is x and x.tolist() == [0.0, 2.0]
    assert FF.elu(x, inplace=True) is x


# ---- numerical stability: finite values and gradients for |x| ~ 1e4 -----------------------
BIG = np.array([[-1e4, -100.0, -30.0, 0.0, 30.0, 100.0, 1e4]])
STABLE = [
    C("sigmoid", lambda m, x: m.sigmoid(x), BIG),
    C("logsigmoid", lambda m, x: m.nn.functional.logsigmoid(x), BIG),
    C("softplus", lambda m, x: m.nn.functional.softplus(x), BIG),
    C("softplus_beta", lambda m, x: m.nn.functional.softplus(x, beta=3.0, threshold=50.0), BIG),
    C("log_softmax", lambda m, x: m.log_softmax(x, dim=1), BIG),
    C("log_softmax_rows", lambda m, x: m.log_softmax(x.reshape(7, 1) * m.ones(1, 3), 1), BIG),
    C("softmax", lambda m, x: m.softmax(x, dim=1), BIG),
    C("softmin", lambda m, x: m.nn.functional.softmin(x, dim=1), BIG),
    C("tanh", lambda m, x: m.tanh(x), BIG),
    C("elu", lambda m, x: m.nn.functional.elu(x), BIG),
    C("selu", lambda m, x: m.nn.functional.selu(x), BIG),
    C("celu", lambda m, x: m.nn.functional.celu(x, 0.5), BIG),
    C("silu", lambda m, x: m.nn.functional.silu(x), BIG),
    C("mish", lambda m, x: m.nn.functional.mish(x), BIG),
    C("gelu", lambda m, x: m.nn.functional.gelu(x), BIG),
    C("softsign", lambda m, x: m.nn.functional.softsign(x), BIG),
    C("logsumexp", lambda m, x: m.logsumexp(x, dim=1), BIG),
    C("logsumexp_rows", lambda m, x: m.logsumexp(x.reshape(7, 1) * m.ones(1, 3), 1), BIG),
]


@pytest.mark.parametrize(("fn", "specs", "second", "kw"), STABLE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stable_for_huge_inputs(fn, specs, second, kw, dtype):
    x = flow.tensor(specs[0].astype(dtype), requires_grad=True)
    y = fn(flow, x)
    y.sum().backward()
    assert np.isfinite(y.detach().numpy()).all(), "forward overflowed"
    assert np.isfinite(x.grad.numpy()).all(), "gradient overflowed"
    check(fn, *specs, dtype=dtype, **kw)


# ---- names: F.*, flow.* and Tensor methods wherever torch has them --------------------------
def test_names_match_torch():
    from flowgrad.ops import activation

    missing = []
    for name in activation.__all__:
        if hasattr(torch.nn.functional, name) and not hasattr(FF, name):
            missing.append(f"F.{name}")
        if hasattr(torch, name) and not hasattr(flow, name):
            missing.append(f"flow.{name}")
        if hasattr(torch.Tensor, name) and not hasattr(flow.Tensor, name):
            missing.append(f"Tensor.{name}")
    for name in ("relu", "relu_", "sigmoid", "sigmoid_", "tanh", "softmax", "log_softmax",
                 "hardshrink", "prelu"):
        if not hasattr(flow.Tensor, name):
            missing.append(f"Tensor.{name}")
    assert not missing, f"missing: {missing}"


# ---- bad arguments -------------------------------------------------------------------------
X = flow.ones(2, 3, 4)
ERRORS = [
    ("prelu_size", lambda: FF.prelu(X, flow.ones(2)), RuntimeError,
     "prelu.*parameter numbers = 2 and channel size = 3"),
    ("glu_odd", lambda: FF.glu(X, dim=1), RuntimeError,
     "Halving dimension must be even, but dimension 1 is size 3"),
    ("glu_scalar", lambda: FF.glu(flow.tensor(1.0)), RuntimeError, "glu does not support"),
    ("glu_dim", lambda: FF.glu(X, dim=3), IndexError, "glu.*Dimension out of range"),
    ("hardtanh_range", lambda: FF.hardtanh(X, 2.0, 1.0), ValueError,
     "min_val cannot be greater than max_val.*min_val=2.0, max_val=1.0"),
    ("softshrink_neg", lambda: FF.softshrink(X, -1.0), RuntimeError,
     "lambda must be greater or equal to 0, but found to be -1.0"),
    ("celu_zero", lambda: FF.celu(X, 0.0), RuntimeError, "celu.*alpha"),
    ("gelu_mode", lambda: FF.gelu(X, approximate="fast"), RuntimeError,
     "approximate must be 'none' or 'tanh', got 'fast'"),
    ("softmax_dim", lambda: FF.softmax(X, dim=3), IndexError, "softmax.*out of range"),
    ("relu_inplace_leaf", lambda: FF.relu(flow.ones(2, requires_grad=True), inplace=True),
     RuntimeError, "relu_.*leaf"),
]


@pytest.mark.parametrize(("name", "fn", "exc", "match"), ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_arguments(name, fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_of_many_short_rows_as_torch(dtype):
    # attention's shape (batch * heads, queries, keys), over the size where the rows'
    # broadcasts go to BLAS and the exp to MKL's vector math: a causal mask's -inf, a row of
    # -inf only, a nan and an inf, forward and backward as torch's
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((128, 64, 64)) * 4).astype(dtype)
    x = np.where(np.triu(np.ones((64, 64), bool), 1), -np.inf, x).astype(dtype)
    x[3, 5, :], x[4, 6, 7], x[5, 7, 8] = -np.inf, np.nan, np.inf
    dy = rng.standard_normal(x.shape).astype(dtype)
    from flowgrad import blas
    assert blas.rows_ready(x.reshape(-1, 64)) or blas.BACKEND != "mkl"  # the path under test
    results = []
    for m in (flow, torch):
        t = m.tensor(x, requires_grad=True)
        y = m.softmax(t, dim=-1)
        y.backward(m.tensor(dy))
        results.append((y.detach().numpy(), t.grad.numpy()))
    rtol = 2e-6 if dtype == "float32" else 1e-14
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=rtol)  # (values of order 1)


@pytest.mark.parametrize("shape", [(7, 10), (3, 4, 16), (5, 17), (1, 10), (6, 0), (0, 5)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_row_max_equals_numpys_max_with_nan_and_inf_rows(shape, dtype):
    """row_max (softmax's, log_softmax's and cross_entropy's row maxima; short rows from a
    transposed copy) gives NumPy's max along the last dim, -inf along an empty one."""
    from flowgrad.ops.activation import row_max

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    if x.size > 2 * shape[-1]:
        x[0, ..., 1] = np.nan
        x.reshape(-1, shape[-1])[1] = -np.inf
        x.reshape(-1, shape[-1])[2, -1] = np.inf
    expected = x.max(axis=-1, keepdims=True, initial=-np.inf)
    for view in (x, x[..., ::-1]):  # (a strided view takes NumPy's own max)
        got = row_max(np, view, view.ndim - 1)
        assert got.dtype == x.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, view.max(axis=-1, keepdims=True, initial=-np.inf))


def test_hardsigmoid_bits_match_torch_in_float64():
    """torch's kernel divides (x + 3) by 6 (x * (1 / 6) is 1 ulp off at x = 2) and its backward
    multiplies by the float literal 1.0f / 6.0f even in float64 (0.1666666716337204)."""
    xs = [-4.0, -3.0, -1.0, 0.0, 2.0, 2.999, 3.0, 5.0]
    x = flow.tensor(xs, dtype=flow.float64, requires_grad=True)
    t = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
    y, yt = FF.hardsigmoid(x), torch.nn.functional.hardsigmoid(t)
    y.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_threshold_compares_as_torch_and_saves_its_input(dtype):
    """torch's threshold compares half precision in float32 with the threshold unrounded (a
    float16 0.30005 stays above 0.3: flowgrad's where compared in float16 and gave the value),
    and its node, ThresholdBackward0, saves the input: a write to it fails the backward."""
    got = []
    for m in (torch, flow):
        x = m.tensor([1.0, -2.0, 0.30000001, 0.3, float("nan"), float("inf")],
                     dtype=getattr(m, dtype), requires_grad=True)
        y = m.nn.functional.threshold(x, 0.3, -7.5)
        (y * m.arange(6, dtype=y.dtype)).sum().backward()
        t = x * 1
        z = m.nn.functional.threshold(t, 0.3, 0.0)
        t.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an"):
            z.sum().backward()
        got.append((y.float().tolist(), x.grad.float().tolist(), type(y.grad_fn).__name__))
    assert str(got[1]) == str(got[0])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["hardshrink", "clamp", "hardtanh"])
def test_half_precision_bounds_compare_as_torch(name, dtype):
    """Inputs next to a bound: hardshrink's and clamp's backward compare in the input's dtype
    with the bound rounded to it (float16 0.30005 is not above 0.3), as torch's kernels;
    flowgrad's hardshrink compared in float32 (kept 0.30005) and bfloat16 clamp's mask used
    the unrounded bound (a zero gradient)."""
    fns = {"hardshrink": lambda m, x: m.nn.functional.hardshrink(x, 0.3),
           "clamp": lambda m, x: x.clamp(-0.3, 0.3),
           "hardtanh": lambda m, x: m.nn.functional.hardtanh(x, -0.3, 0.3)}
    got = []
    for m in (torch, flow):
        x = m.tensor([0.30000001, 0.3, 0.2998, 0.3002, -0.3, -0.30000001, 0.0],
                     dtype=getattr(m, dtype), requires_grad=True)
        y = fns[name](m, x)
        (y * m.arange(7, dtype=y.dtype)).sum().backward()
        got.append((y.float().tolist(), x.grad.float().tolist()))
    assert got[1] == got[0]
