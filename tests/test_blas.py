"""flowgrad.blas: BLAS's fused axpy/axpby where NumPy's bundled OpenBLAS takes the arrays, the
two NumPy ufuncs elsewhere; both give y + a*x (resp. a*x + b*y) to within one rounding."""
import numpy as np
import pytest

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
