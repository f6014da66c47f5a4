"""flowgrad.blas: BLAS's fused axpy/axpby where NumPy's bundled OpenBLAS takes the arrays, the
two NumPy ufuncs elsewhere; both give y + a*x (resp. a*x + b*y) to within one rounding."""
import glob
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import flowgrad as flow
from flowgrad import blas


def _operands(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [10, blas.MIN_SIZE, 3 * blas.MIN_SIZE + 7])
def test_axpy_and_axpby_match_numpy(dtype, n):
    y, x = _operands(n, dtype)
    eps = np.finfo(dtype).eps
    expected = y.astype(np.float64) - 0.37 * x.astype(np.float64)
    got = y.copy()
    blas.axpy(got, -0.37, x)
    np.testing.assert_allclose(got, expected, rtol=4 * eps, atol=4 * eps)
    expected = 0.9 * y.astype(np.float64) + 0.5 * x.astype(np.float64)
    got = y.copy()
    blas.axpby(got, 0.5, x, 0.9)
    np.testing.assert_allclose(got, expected, rtol=4 * eps, atol=4 * eps)


def test_numpy_wheels_bundled_blas_is_found():
    # NumPy's wheels ship scipy-openblas; a NumPy built otherwise runs the fallback
    if "scipy-openblas" not in str(np.show_config(mode="dicts")):
        pytest.skip("this NumPy does not bundle scipy-openblas")
    assert blas.takes(np.empty(blas.MIN_SIZE, np.float32))
    assert blas.takes(np.empty(blas.MIN_SIZE, np.float64))


def test_address_is_where_ctypes_says_the_data_lies():
    # the pointer every BLAS call gets: read from the array's struct (CPython) instead of
    # `.ctypes.data`; views, offsets, negative strides, broadcasts and other dtypes included
    base = np.arange(60.0).reshape(3, 4, 5)
    arrays = [base, base.T, base[1:, ::2, 3:], base[::-1, :, ::-2], base.astype(np.float32)[2],
              np.broadcast_to(base[0, 0], (7, 5)), np.zeros(1, np.int8)[0:1], np.empty((0, 4)),
              np.frombuffer(bytearray(64), np.float64)[3:]]
    assert blas._address(np.ones(3)) != 0
    for a in arrays:
        assert blas._address(a) == a.ctypes.data


@pytest.mark.parametrize("case", ["small", "strided", "float16", "mixed", "overlap", "tensor_a"])
def test_arrays_blas_cannot_take_run_the_ufuncs(case, monkeypatch):
    calls = []
    monkeypatch.setattr(blas, "_ROUTINES", {
        key: (lambda *a, _f=f: calls.append(1) or _f(*a)) for key, f in blas._ROUTINES.items()})
    n = 2 * blas.MIN_SIZE
    y, x = _operands(n, np.float32)
    a = -0.5
    if case == "small":
        y, x = y[:100], x[:100]
    elif case == "strided":
        y, x = y[::2], x[::2]
    elif case == "float16":
        y, x = y.astype(np.float16), x.astype(np.float16)
    elif case == "mixed":
        x = x.astype(np.float64)
    elif case == "overlap":
        x = y
    elif case == "tensor_a":
        a = np.float32(-0.5)
    expected = (y + a * x).astype(y.dtype)
    blas.axpy(y, a, x)
    np.testing.assert_array_equal(y, expected)
    assert not calls


# ---- GEMM: blas.matmul is np.matmul wherever it runs --------------------------------------
needs_gemm = pytest.mark.skipif(("gemm", np.dtype(np.float32)) not in blas._ROUTINES,
                                reason="no BLAS GEMM loaded (MKL is not installed)")


def _gemm_operand(rng, shape, layout, dtype):
    """An operand of `shape` stored as `layout`: C order, transposed (F order in its last two
    dims), a strided slice of a wider array, or a view with padded leading dimension."""
    if layout == "c":
        return rng.standard_normal(shape).astype(dtype)
    if layout == "t":
        return rng.standard_normal(shape[:-2] + shape[:-3:-1]).astype(dtype).swapaxes(-1, -2)
    if layout == "padded":  # leading dimension larger than the row
        return rng.standard_normal(shape[:-1] + (shape[-1] + 5,)).astype(dtype)[..., :-5]
    if layout == "rows_expanded":  # every row the same: a zero row stride (NumPy's path)
        return np.broadcast_to(rng.standard_normal(shape[:-2] + (1, shape[-1])).astype(dtype),
                               shape)
    if layout == "batch_expanded":  # every matrix of the stack the same: batch stride 0
        return np.broadcast_to(rng.standard_normal(shape[-2:]).astype(dtype), shape)
    wide = rng.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(dtype)
    return wide[..., ::2]  # no unit stride: NumPy's path


GEMM_SHAPES = [((64, 96), (96, 80)), ((128, 784), (784, 512)), ((1, 512), (512, 64)),
               ((512, 1), (1, 64)), ((3, 40, 50), (3, 50, 30)), ((2, 3, 40, 50), (2, 3, 50, 30)),
               ((4, 40, 50), (50, 30)), ((40, 50), (4, 50, 30)), ((2, 1, 40, 50), (1, 3, 50, 30)),
               ((8, 16), (16, 8)), ((0, 50), (50, 30)), ((40, 0), (0, 30))]


@needs_gemm
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("la", ["c", "t", "padded", "strided", "rows_expanded",
                                "batch_expanded"])
@pytest.mark.parametrize("lb", ["c", "t", "padded", "batch_expanded"])
@pytest.mark.parametrize("shapes", GEMM_SHAPES, ids=str)
def test_matmul_matches_numpy_for_every_layout(shapes, la, lb, dtype, monkeypatch):
    monkeypatch.setattr(blas, "GEMM_MIN", 1)  # every size through MKL, not only large ones
    rng = np.random.default_rng(1)
    a = _gemm_operand(rng, shapes[0], la, dtype)
    b = _gemm_operand(rng, shapes[1], lb, dtype)
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    got = blas.matmul(a, b)
    assert got.dtype == dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4 if dtype == np.float32 else 1e-12,
                               atol=1e-3 if dtype == np.float32 else 1e-10)


@needs_gemm
def test_matmul_runs_mkl_for_training_shapes_and_numpy_elsewhere(monkeypatch):
    calls = []
    monkeypatch.setattr(blas, "_ROUTINES", {
        key: (lambda *a, _k=key, _f=f: calls.append(_k[0]) or _f(*a))
        for key, f in blas._ROUTINES.items()})
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((128, 784), np.float32), rng.standard_normal((512, 784), np.float32)
    blas.matmul(x, w.T)
    blas.matmul(rng.standard_normal((6, 40, 500)), rng.standard_normal((6, 500, 300)))
    assert calls == ["gemm", "gemm_batch_strided"]
    for a, b in [(x[:64, :84], w[:10, :84].T),                   # small: MKL's start costs more
                 (x.astype(np.float16), w.T.astype(np.float16)),  # no BLAS for float16
                 (x, w.T.astype(np.float64)),                      # mixed dtypes
                 (x.astype(np.int64), w.T.astype(np.int64)),
                 (x[:, ::2], w[:, ::2].T)]:                        # no unit stride
        np.testing.assert_array_equal(blas.matmul(a, b), np.matmul(a, b))
    assert calls == ["gemm", "gemm_batch_strided"]


@needs_gemm
def test_matmul_out_is_written_or_left_to_numpy(monkeypatch):
    monkeypatch.setattr(blas, "GEMM_MIN", 1)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 80)), rng.standard_normal((80, 72))
    out = np.empty((64, 72))
    assert blas.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    square = rng.standard_normal((64, 64))
    alias = square.copy()
    blas.matmul(alias, square, out=alias)  # out overlaps an operand: NumPy copies first
    np.testing.assert_allclose(alias, square @ square, rtol=1e-12)
    with pytest.raises(ValueError):
        blas.matmul(a, b, out=np.empty((64, 71)))  # NumPy's own error for a wrong out


def test_cpu_kernels_get_the_blas_matmul():
    from flowgrad.device import HOST_XP, array_module
    assert array_module(np.zeros(2)) is HOST_XP
    assert (HOST_XP.matmul is blas.matmul) == (blas.BACKEND == "mkl")
    assert HOST_XP.linalg is np.linalg and HOST_XP.float32 is np.float32


@pytest.mark.parametrize("choice", ["numpy", "openblas"])
def test_flowgrad_blas_env_keeps_numpy_as_it_was(choice):
    code = ("import numpy as np, flowgrad as flow\n"
            "from flowgrad import blas\nfrom flowgrad.device import HOST_XP\n"
            "assert blas.BACKEND != 'mkl' and HOST_XP is np, blas.BACKEND\n"
            "x = flow.ones(64, 64, requires_grad=True)\n"
            "(x @ x).sum().backward(); assert float(x.grad[0, 0]) == 128.0\n")
    env = dict(os.environ, FLOWGRAD_BLAS=choice)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.skipif(not blas._VECTOR_MATH, reason="MKL's vector math is not loaded")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_math_erf_and_normal_cdf(dtype):
    from scipy.special import erf, ndtr
    x = np.linspace(-6, 6, 1001).astype(dtype)
    for name, ref in (("Erf", erf), ("CdfNorm", ndtr)):
        out = np.empty_like(x)
        assert blas.vector_math(name, x, out) is out
        expected = ref(x.astype(np.float64))
        np.testing.assert_allclose(out, expected, rtol=4e-7 if dtype == np.float32 else 1e-13,
                                   atol=1e-300)
        np.testing.assert_array_equal(blas.vector_math(name, x), out)  # a new array
        inplace = x.copy()
        assert blas.vector_math(name, inplace, inplace) is inplace  # the same buffer: allowed
        np.testing.assert_array_equal(inplace, out)
    out = np.empty(500, dtype)
    assert blas.vector_math("Erf", x[::2], out) is None           # strided input
    assert blas.vector_math("Erf", x[1:501], x[:500]) is None      # partly overlapping
    assert blas.vector_math("Erf", x.astype(np.float16)) is None
    assert blas.vector_math("Erf", x, np.empty(1001, np.float64 if dtype == np.float32
                                                    else np.float32)) is None


@pytest.mark.skipif(not blas._VECTOR_MATH, reason="MKL's vector math is not loaded")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_math_products_sums_and_affine(dtype):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 300, 7)).astype(dtype)
    np.testing.assert_array_equal(blas.vector_math2("Mul", a, b), a * b)
    np.testing.assert_array_equal(blas.vector_math2("Add", a, b), a + b)
    np.testing.assert_array_equal(blas.vector_math2("Sub", a, b), a - b)
    np.testing.assert_array_equal(blas.vector_math("Sqr", a), a * a)
    np.testing.assert_allclose(blas.vector_math("Exp", a), np.exp(a), rtol=3e-7)
    np.testing.assert_allclose(blas.vector_affine(a, -0.5, 2.0), a * -0.5 + 2.0, rtol=3e-7)
    out = a.copy()
    assert blas.vector_math2("Mul", out, b, out) is out  # in place: allowed
    np.testing.assert_array_equal(out, a * b)
    assert blas.vector_math2("Mul", a, b[:, ::-1]) is None        # a reversed operand
    assert blas.vector_math2("Mul", a, b.reshape(7, 300)) is None  # another shape
    assert blas.vector_math2("Mul", a, b.astype(np.float16)) is None
    assert blas.vector_ready(a, b) and not blas.vector_ready(a, b.T)


@pytest.mark.skipif(not blas._VECTOR_MATH, reason="MKL's vector math is not loaded")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_math_at_special_values_gives_numpys_values(dtype):
    # the calls run in VML's no-error mode (its default handles each underflow, inf and nan
    # one by one, ~60x slower): the values must still be the IEEE ones
    x = np.array([-np.inf, -1e4, -745.2, -104.0, -90.0, -1.0, 0.0, 1.0, 100.0, 800.0,
                  np.inf, np.nan], dtype)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(blas.vector_math("Exp", x), np.exp(x), rtol=3e-7, atol=0)
        np.testing.assert_array_equal(blas.vector_math2("Sub", x, x[::-1].copy()),
                                      x - x[::-1])
    from scipy.special import ndtr
    np.testing.assert_allclose(blas.vector_math("CdfNorm", x), ndtr(x.astype(np.float64)),
                               rtol=4e-7 if dtype == np.float32 else 1e-13, atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_kernels_with_and_without_vector_math(dtype, monkeypatch):
    # MKL's whole-array passes and the chunked NumPy formulas give gelu and its gradient to a
    # few ulps of each other (sizes over a chunk, so the chunk loops run too)
    from flowgrad.ops import activation
    rng = np.random.default_rng(4)
    x, dy = (rng.standard_normal(70_001) * 3).astype(dtype), rng.standard_normal(70_001)
    dy = dy.astype(dtype)
    kernels = []
    for table in (blas._VECTOR_MATH, {}):
        monkeypatch.setattr(blas, "_VECTOR_MATH", table)
        y, cdf = activation._gelu.kernel(np, x, approximate="none")
        kernels.append((y, activation._gelu_grad.kernel(np, x, dy, cdf)))
    tol = 2e-6 if dtype == np.float32 else 1e-14
    for with_vml, without in zip(*kernels):
        np.testing.assert_allclose(with_vml, without, rtol=tol, atol=tol)


@needs_gemm
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_runs_gemms_after_the_parent_did():
    # GNU OpenMP's pool does not survive fork: without blas's at-fork hook the child's first
    # threaded GEMM waited forever (a DataLoader worker doing a matmul would hang)
    code = ("import os, numpy as np\n"
            "from flowgrad import blas\n"
            "a = np.ones((256, 256), np.float32)\n"
            "assert blas.matmul(a, a)[0, 0] == 256\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    ok = blas.matmul(a, a)[0, 0] == 256 and blas.get_num_threads() == 1\n"
            "    os._exit(0 if ok else 3)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "assert os.waitstatus_to_exitcode(status) == 0, status\n"
            "assert blas.matmul(a, a)[0, 0] == 256\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["rows", "batch", "transposed"])
def test_linear_with_its_bias_in_the_gemm_as_torch(dtype, layout):
    # from 128k outputs the bias goes into the GEMM (beta = 1, as torch's addmm): values
    # and every gradient as torch's, for 2-D, batched and transposed inputs
    import torch

    from flowgrad.ops import linalg
    rng = np.random.default_rng(5)
    shape = {"rows": (2048, 96), "batch": (16, 128, 96), "transposed": (96, 2048)}[layout]
    x0 = rng.standard_normal(shape).astype(dtype)
    w0, b0 = (rng.standard_normal(s).astype(dtype) for s in ((80, 96), (80,)))
    dy0 = rng.standard_normal(shape[:-1] + (80,) if layout != "transposed" else (2048, 80))
    results = []
    for m in (flow, torch):
        x, w, b = (m.tensor(a, requires_grad=True) for a in (x0, w0, b0))
        y = m.nn.functional.linear(x.T if layout == "transposed" else x, w, b)
        y.backward(m.tensor(dy0.astype(dtype)))
        results.append([t.detach().numpy() for t in (y, x.grad, w.grad, b.grad)])
    tol = 2e-5 if dtype == "float32" else 1e-12
    for ours, theirs in zip(*results):
        # the weight gradient sums 2048 products: another BLAS (OpenBLAS on AMD) sums them in
        # another order, so small entries are compared on the scale of the largest
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol * np.abs(theirs).max())
    rows = x0.T if layout == "transposed" else x0.reshape(-1, 96)
    # (MKL's GEMM, or NumPy's OpenBLAS's bound for the bias alone)
    assert (blas.linear(rows, w0, b0) is not None) == (blas.BACKEND.startswith("mkl") or
                                                      bool(blas._BIAS_GEMM))
    assert math.prod(shape) // 96 * 80 >= linalg._BIAS_IN_GEMM  # the path under test


def test_default_blas_by_cpu_vendor():
    # MKL's GEMM takes a generic path on AMD's CPUs (slower than NumPy's OpenBLAS there)
    assert blas._default_blas("AuthenticAMD") == "openblas"
    assert blas._default_blas("GenuineIntel") == blas._default_blas("") == "mkl"
    if "FLOWGRAD_BLAS" not in os.environ and blas._ROUTINES:
        wanted = blas._default_blas(blas._cpu_vendor())
        assert blas.BACKEND == "mkl" or wanted != "mkl" or not blas._mkl()


@pytest.mark.skipif(blas.BACKEND == "mkl" or not glob.glob(os.path.join(
    sys.prefix, "lib", "libmkl_rt.*")), reason="MKL is this process's BLAS, or not installed")
def test_mkl_paths_where_mkl_is_installed_but_not_the_default():
    # on an AMD machine the suite runs on NumPy's OpenBLAS: this file's MKL tests still run,
    # with MKL loaded by name
    env = dict(os.environ, FLOWGRAD_BLAS="mkl")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:xdist", __file__, "-k", "not where_mkl_is_installed"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, summary


@needs_gemm
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_add_scales_the_product_into_c(dtype):
    """c += alpha * a @ b by one GEMM (nn.Graph's fused SGD step of a weight): the product
    rounded once into c, so within an ulp or two of the two-step NumPy update."""
    rng = np.random.default_rng(4)
    dy, x = rng.standard_normal((64, 96)).astype(dtype), rng.standard_normal((64, 80)).astype(dtype)
    c = rng.standard_normal((96, 80)).astype(dtype)
    expected = c - dtype(0.1) * (dy.T @ x)
    assert blas.matmul_add(dy.T, x, c, -0.1, least=1)
    np.testing.assert_allclose(c, expected, rtol=1e-5 if dtype == np.float32 else 1e-13,
                               atol=1e-6 if dtype == np.float32 else 1e-14)
    before = c.copy()
    assert not blas.matmul_add(dy.T, x, c, -0.1)  # below GEMM_MIN: NumPy's, nothing done
    assert not blas.matmul_add(dy.T, x, c, np.float32(0.5), least=1)  # not a Python number
    assert not blas.matmul_add(dy.T, x.astype(np.float16), c, -0.1, least=1)
    np.testing.assert_array_equal(c, before)


@needs_gemm
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_sums_add_is_a_bias_step(dtype):
    rng = np.random.default_rng(5)
    m, y = rng.standard_normal((128, 40)).astype(dtype), rng.standard_normal(40).astype(dtype)
    expected = y - dtype(0.01) * m.sum(axis=0)
    assert blas.column_sums_add(m, y, -0.01)
    np.testing.assert_allclose(y, expected, rtol=1e-5 if dtype == np.float32 else 1e-13,
                               atol=1e-7 if dtype == np.float32 else 1e-15)
    before = y.copy()
    for bad_m, bad_y in [(m.T, y), (m[:, ::2], y[:20]), (m, y[::2]), (m, y.astype(np.float16)),
                         (m[:0], y), (m.astype(np.int64), y.astype(np.int64))]:
        assert not blas.column_sums_add(bad_m, bad_y, -0.01)
    assert not blas.column_sums_add(m, m[0], -0.01)  # y inside m: nothing written
    np.testing.assert_array_equal(y, before)
