"""BLAS called directly: GEMM and axpy from Intel MKL when the `mkl` package is installed
(the BLAS torch's CPU wheels use), axpy alone from the OpenBLAS NumPy's wheels ship otherwise.

Why GEMM: NumPy's OpenBLAS runs the small, skinny products of training (128 x 784 x 512) 20-30%
slower than MKL here, and they are most of a training step. Why axpy: `y += a * x` is two NumPy
ufuncs (a temporary, two passes, one thread) and it is the whole of a plain SGD step; axpy is
one fused pass on all cores and rounds once, as torch's `add_(x, alpha=a)` does.

Two thread pools must not spin against each other (a GEMM of MKL's beside one of OpenBLAS's took
8 ms instead of 1 on two cores), so with MKL loaded NumPy's own OpenBLAS (its `np.dot`, `einsum`
and `linalg`) is set to one thread. `FLOWGRAD_BLAS=openblas` (or `numpy`) in the environment
keeps MKL out and NumPy as it was; `FLOWGRAD_BLAS=mkl` loads it. Unset, MKL is loaded except on
AMD's CPUs, where its GEMM runs a generic code path: on a 2-core EPYC (Zen 4) NumPy's OpenBLAS
took 36 ms for a 1024^2 product to MKL's 47, and the MLP and LeNet training steps ran faster on
it in 9 and 8 of 10 alternating rounds. Every routine checks its operands and hands whatever it
cannot take (other dtypes, small, overlapping or oddly strided arrays) to NumPy, and each
library passes a self-test at import before it is used. Where OpenBLAS is the BLAS by default
(AMD's CPUs) and `mkl` is installed, MKL is loaded with its sequential layer for its vector math
alone (`_load_vector_math`).

>>> import numpy as np
>>> y = np.ones(3, np.float32)
>>> axpy(y, 2.0, np.arange(3, dtype=np.float32))
>>> y
array([1., 3., 5.], dtype=float32)
>>> matmul(np.eye(2), np.arange(4.0).reshape(2, 2))
array([[0., 1.],
       [2., 3.]])
"""
from __future__ import annotations

import ctypes
import glob
import os
import site
import sys

import numpy as np

__all__ = ["axpy", "axpby", "takes", "matmul", "vector_math", "vector_math2", "vector_affine",
           "vector_ready", "rows_ready", "VECTOR_THREADED", "fill_rows", "linear", "matmul_add",
           "column_sums_add", "BACKEND", "get_num_threads", "set_num_threads"]

# arrays below this many elements take the ufuncs (a ctypes call costs ~2 us)
MIN_SIZE = 1 << 15
# products of fewer multiply-adds than this take np.matmul: MKL's threaded GEMM pays ~10 us
# to start (64x84 @ 84x10: 14 us against NumPy's 3), and breaks even near 2M (64x400 @ 400x120)
GEMM_MIN = 1 << 21
_KINDS = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}
_REAL = {"s": ctypes.c_float, "d": ctypes.c_double}
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_INT32_MAX = 2 ** 31 - 1


def _address_reader():
    """`address(a)`: where array a's first value lies, `a.ctypes.data`. Read from the array's C
    struct (NumPy's PyArrayObject: its data pointer follows the object header) it takes 0.1 us
    against 0.8 for `.ctypes`, which builds an object per call: three per GEMM, two per axpy.
    Checked at import on arrays, views and offsets; `.ctypes.data` where it does not agree."""
    read, offset = ctypes.c_void_p.from_address, object.__basicsize__

    def address(a):
        return read(id(a) + offset).value

    base = np.arange(24.0).reshape(4, 6)
    probes = (base, base.T, base[1:, 2:], base[::2, ::-1], np.ones(3, np.float32)[1:],
              np.empty((0, 2)), np.broadcast_to(base[0], (3, 6)))
    try:
        if all(address(a) == a.ctypes.data for a in probes):
            return address
    except (ValueError, OSError, OverflowError):  # not CPython's layout: the slow road
        pass
    return lambda a: a.ctypes.data


_address = _address_reader()


def _openblas():
    """NumPy's bundled OpenBLAS (ILP64, symbols prefixed `scipy_`), or None."""
    base = os.path.dirname(os.path.dirname(np.__file__))
    for path in (glob.glob(os.path.join(base, "numpy.libs", "*openblas64*"))
                 + glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs",
                                          "*openblas64*"))):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _cpu_vendor():
    """The CPU's vendor string ('GenuineIntel', 'AuthenticAMD', ...), or '' where unknown."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    processor = platform.processor()  # Windows: '... Family 25 Model 17, AuthenticAMD'
    return next((v for v in ("GenuineIntel", "AuthenticAMD") if v in processor), "")


def _default_blas(vendor):
    """The BLAS to load when FLOWGRAD_BLAS is unset: OpenBLAS (NumPy's) on AMD and Hygon CPUs,
    MKL elsewhere (where it is installed).

    >>> _default_blas("AuthenticAMD"), _default_blas("GenuineIntel"), _default_blas("")
    ('openblas', 'mkl', 'mkl')
    """
    return "openblas" if vendor in ("AuthenticAMD", "HygonGenuine") else "mkl"


def _mkl():
    """MKL's single dynamic library from the `mkl` wheel (in this Python's prefix), its
    threading layer chosen, or None."""
    choice = os.environ.get("FLOWGRAD_BLAS")
    if choice is None:  # (the CPU's vendor is read only when the environment does not say)
        choice = _default_blas(_cpu_vendor())
    if choice.lower() != "mkl":
        return None
    return _mkl_library(None)


def _mkl_library(layer):
    """libmkl_rt of the `mkl` wheel with threading `layer` (None: a threaded one, see
    `_threading_layer`), or None where it is not installed or the layer does not take."""
    prefixes = dict.fromkeys([sys.prefix, sys.base_prefix, site.getuserbase()])
    for prefix in prefixes:
        for path in sorted(glob.glob(os.path.join(prefix, "lib", "libmkl_rt.*"))):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            if layer is not None:
                return lib if lib.MKL_Set_Threading_Layer(layer) == layer else None
            if "MKL_THREADING_LAYER" not in os.environ:
                lib.MKL_Set_Threading_Layer(_threading_layer(os.path.dirname(path)))
            return lib
    return None


def _threading_layer(libdir):
    """MKL's threading layer: GNU OpenMP (torch's) if it loads, else Intel's from the
    `intel-openmp` wheel beside MKL, else none. MKL exits the process when the runtime of the
    layer it was told to use is missing, hence the checks first."""
    for layer, names in ((3, ["libgomp.so.1"]), (0, glob.glob(os.path.join(libdir, "libiomp5.*")))):
        for name in names:
            try:
                ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
                return layer
            except OSError:
                continue
    return 1  # sequential


def _bind(lib, prefix, suffix, index, routines):
    """{(routine, dtype): C function} for the routines found, with argument types set."""
    found = {}
    for dtype, k in _KINDS.items():
        real = _REAL[k]
        for routine, args in routines.items():
            fn = getattr(lib, f"{prefix}{k}{routine}{suffix}", None)
            if fn is None:
                return {}
            fn.argtypes = [real if a == "r" else index if a == "i" else
                           ctypes.c_int64 if a == "m" else ctypes.c_void_p for a in args]
            fn.restype = None
            found[routine, dtype] = fn
    return found


_LEVEL1 = {"axpy": "irpipi", "axpby": "irpirpi"}
_LEVEL2 = {"gemv": "iiiirpipirpi"}
_LEVEL3 = {"gemm": "iiiiiirpipirpi", "gemm_batch_strided": "iiiiiirpiipiirpiii"}


def _load():
    """(name, routines, library): MKL's level-1 and GEMM routines, else OpenBLAS's level-1,
    else none."""
    mkl, openblas = _mkl(), _openblas()
    if mkl is not None:
        found = _bind(mkl, "cblas_", "", ctypes.c_int, {**_LEVEL1, **_LEVEL2, **_LEVEL3})
        if found and _agrees(found):
            if openblas is not None and hasattr(openblas, "scipy_openblas_set_num_threads64_"):
                openblas.scipy_openblas_set_num_threads64_(1)
            return "mkl", found, mkl
    if openblas is not None:
        found = _bind(openblas, "scipy_cblas_", "64_", ctypes.c_int64, _LEVEL1)
        if found and _agrees(found):
            return "openblas", found, openblas
    return "numpy", {}, None


def _agrees(found):
    """A self-test before trusting the library: the integer width and the argument order."""
    x = np.arange(MIN_SIZE, dtype=np.float64)
    y = np.ones(MIN_SIZE)
    found["axpby", x.dtype](MIN_SIZE, 2.0, _address(x), 1, 3.0, _address(y), 1)
    found["axpy", x.dtype](MIN_SIZE, 0.5, _address(x), 1, _address(y), 1)
    if not np.array_equal(y, 2.5 * x + 3.0):
        return False
    if ("gemm", x.dtype) not in found:
        return True
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(12.0).reshape(3, 4)
    c = np.empty((2, 4))
    a_t = a.T.copy()  # (named: a temporary would be freed before the call reads it)
    found["gemm", a.dtype](_ROW_MAJOR, _TRANS, _NO_TRANS, 2, 4, 3, 1.0, _address(a_t),
                           2, _address(b), 4, 0.0, _address(c), 4)
    if not np.array_equal(c, a @ b):
        return False
    if ("gemv", x.dtype) not in found:
        return True
    ones, y = np.ones(3), np.ones(4)
    found["gemv", b.dtype](_ROW_MAJOR, _TRANS, 3, 4, -2.0, _address(b), 4, _address(ones), 1,
                           1.0, _address(y), 1)
    return bool(np.array_equal(y, 1.0 - 2.0 * b.sum(axis=0)))


BACKEND, _ROUTINES, _LIB = _load()


def _load_bias_gemm():
    """{("gemm", dtype): C function}: NumPy's OpenBLAS's GEMM where it is the BLAS, for
    `linear` alone (the bias rows, then the product added by beta = 1: a (2048, 128) @
    (128, 512) + b took 2.67 ms against 2.86 for NumPy's product and add on a Zen 4 core).
    Every other product stays NumPy's own call into the same library."""
    if BACKEND != "openblas":
        return {}
    found = _bind(_LIB, "scipy_cblas_", "64_", ctypes.c_int64, {**_LEVEL1, "gemm": _LEVEL3[
        "gemm"]})
    if not found or not _agrees(found):
        return {}
    return {key: fn for key, fn in found.items() if key[0] == "gemm"}


_BIAS_GEMM = _load_bias_gemm()


def _one_thread_in_child():
    # GNU OpenMP's thread pool does not survive fork: a forked child's first threaded GEMM
    # would wait forever for threads that stayed in the parent. A child (a DataLoader worker,
    # a multiprocessing pool) runs MKL on one thread, as torch's DataLoader workers run.
    _LIB.MKL_Set_Num_Threads(1)


if BACKEND == "mkl" and hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_one_thread_in_child)


# VML's functions as `_bind` spells their arguments (i: the length, p: arrays, r: scalars)
# the `vm` forms, which take the mode per call: high accuracy, and no error handling. VML's
# default mode sets errno and raises and calls back per special value (an underflow, -inf in
# exp): CdfNorm of 1M values of which half underflow took 18.5 ms there, 3.3 in this mode
# (0.29 with no underflow); exp of 512k values half -inf (a softmax's mask) 0.53 against 0.05
# ms. The values written are the same, but float32 exp(+inf): see vector_math
_VML = {"CdfNorm": "ippm", "Erf": "ippm", "Sqr": "ippm", "Exp": "ippm", "Mul": "ipppm",
        "Add": "ipppm", "Sub": "ipppm", "LinearFrac": "ipprrrrpm"}
_VML_HA_NOERR = 0x2 | 0x2000  # VML_HA | VML_ERRMODE_NOERR (mkl_vml_defines.h)
# VML_LA | VML_ERRMODE_NOERR: float32's normal CDF to 6e-8 (HA's: 4.5e-8; flowgrad's own formula
# 1.1e-7) in 0.73 of the time on a Zen 4 core (1.36 ms against 1.86 on a million values)
_VML_LA_NOERR = 0x1 | 0x2000


_MKL_SEQUENTIAL = 1  # MKL_THREADING_SEQUENTIAL (mkl_service.h)


def _load_vector_math():
    """{(name, dtype): C function} of MKL's vector math (VML, accurate to ~1 ulp): the normal
    CDF and erf, which NumPy lacks (flowgrad's own float32 formula takes 14 array passes and
    is good to ~4 ulp), and the few passes gelu's gradient makes (square, exp, a * x + b,
    product, sum). With MKL as the BLAS they run on its threads. Where NumPy's OpenBLAS is
    the BLAS by default (AMD's CPUs) and the `mkl` wheel is installed, MKL is loaded for VML
    alone with its sequential layer: no second thread pool to spin against OpenBLAS's (a
    threaded VML there made a char-Transformer step 187 ms, the sequential one 109, NumPy's
    ufuncs 120: exact GELU's forward 2.9 ms against 6.1 on a million float32 values)."""
    lib = _LIB
    if BACKEND != "mkl":
        if BACKEND != "openblas" or "FLOWGRAD_BLAS" in os.environ:
            return {}  # NumPy's own BLAS may be MKL (its threading is not ours to set), or
            #            the environment asked for NumPy as it is
        lib = _mkl_library(_MKL_SEQUENTIAL)
        if lib is None:
            return {}
    found = _bind(lib, "vm", "", ctypes.c_int, _VML)
    x = np.array([-1.0, 0.0, 2.0])
    if ("Erf", x.dtype) in found:  # the self-test
        y = np.empty(3)
        found["Erf", x.dtype](3, _address(x), _address(y), _VML_HA_NOERR)
        if not np.allclose(y, [-0.8427007929497149, 0.0, 0.9953222650189527], rtol=1e-14):
            return {}
    return found


_VECTOR_MATH = _load_vector_math()
# whether VML runs on MKL's threads (MKL is the BLAS): only then do its plain passes (exp,
# products, sums) beat NumPy's; its sequential layer beside OpenBLAS is for what NumPy lacks
# (the normal CDF, erf)
VECTOR_THREADED = BACKEND == "mkl" and bool(_VECTOR_MATH)


def vector_math(name, x, out=None, no_inf=False, low_accuracy=False):
    """`name(x)` ('CdfNorm', 'Erf', 'Sqr', 'Exp') by MKL's vector math, into `out` (a new array when
    None) and returned; None (nothing written, nothing made) where it cannot run: no MKL,
    another dtype, non-contiguous or partly overlapping arrays. `no_inf`: the caller knows x
    holds no +inf (a difference from a row's max, a negated square), which spares exp's
    float32 fix-up: in the no-error mode MKL's float32 exp gives nan at +inf. `low_accuracy`:
    VML's LA mode for float32 (about 4 ulp, as NumPy's own float32 exp and tanh), HA (1 ulp)
    for float64 all the same.

    >>> r = vector_math("Erf", np.array([0.0, 1.0]))
    >>> (r is not None) == bool(_VECTOR_MATH)
    True
    """
    fn = _VECTOR_MATH.get((name, x.dtype))
    out = _vector_out(fn, x, (), out)
    if out is not None:
        inf = None
        if name == "Exp" and x.dtype == np.float32 and not no_inf:
            inf = np.isposinf(x)
            inf = inf if inf.any() else None
        mode = _VML_LA_NOERR if low_accuracy and x.dtype == np.float32 else _VML_HA_NOERR
        fn(x.size, _address(x), _address(out), mode)
        if inf is not None:
            out[inf] = np.inf
    return out


def vector_math2(name, a, b, out=None):
    """`name(a, b)` ('Mul', 'Add', 'Sub') of two arrays of one shape, as `vector_math` (on MKL's
    threads where it is the BLAS), into `out` (new when None; it may be a or b), or None where
    it cannot run.

    >>> r = vector_math2("Mul", np.array([2.0, 3.0]), np.array([4.0, 5.0]))
    >>> r is None or r.tolist() == [8.0, 15.0]
    True
    """
    fn = _VECTOR_MATH.get((name, a.dtype))
    out = _vector_out(fn, a, (b,), out)
    if out is not None:
        fn(a.size, _address(a), _address(b), _address(out), _VML_HA_NOERR)
    return out


def vector_affine(x, scale, shift, out=None):
    """scale * x + shift (VML's LinearFrac with a unit denominator), as `vector_math`.

    >>> r = vector_affine(np.array([1.0, 2.0]), -0.5, 1.0)
    >>> r is None or r.tolist() == [0.5, 0.0]
    True
    """
    fn = _VECTOR_MATH.get(("LinearFrac", x.dtype))
    out = _vector_out(fn, x, (), out)
    if out is not None:
        fn(x.size, _address(x), _address(x), scale, shift, 0.0, 1.0, _address(out),
           _VML_HA_NOERR)
    return out


def vector_ready(*arrays):
    """Whether the vector math runs on these arrays: MKL's VML loaded, plain contiguous NumPy arrays
    of one shape and of float32 or float64 alike (a kernel checks once before a sequence).

    >>> vector_ready(np.zeros(3), np.zeros(3)) == bool(_VECTOR_MATH)
    True
    """
    first = arrays[0]
    if ("Mul", first.dtype) not in _VECTOR_MATH or first.size > _INT32_MAX:
        return False
    return all(type(a) is np.ndarray and a.dtype == first.dtype and a.shape == first.shape and
               a.flags.c_contiguous for a in arrays)


# matrices of fewer values take NumPy's broadcast (fill_rows + a VML pass gain from ~256k
# values: 8192 x 64: 227 -> 82 us; 2048 x 64: 43 against 52)
ROWS_MIN = 1 << 18


def rows_ready(a):
    """Whether `fill_rows` runs on this (rows, n) matrix and pays: MKL loaded, a plain
    C-contiguous float32/float64 NumPy array of at least ROWS_MIN values."""
    return (type(a) is np.ndarray and a.ndim == 2 and ("gemm", a.dtype) in _ROUTINES and
            ("Mul", a.dtype) in _VECTOR_MATH and ROWS_MIN <= a.size <= _INT32_MAX and
            a.flags.c_contiguous)


def fill_rows(column, out):
    """out[i, :] = column[i] for a `rows_ready` matrix `out` and a contiguous (rows,) column:
    one GEMM against a row of ones on MKL's threads (NumPy's broadcast runs an inner loop per
    short row). The column's values are copied exactly (each is one product by 1).

    >>> out = np.empty((2 ** 12, 64))
    >>> if rows_ready(out):
    ...     fill_rows(np.arange(2.0 ** 12), out)
    ...     assert (out == np.arange(2.0 ** 12)[:, None]).all()
    """
    _outer(column, np.ones(out.shape[1], out.dtype), out)


def _outer(u, v, out):
    """out = u v^T for contiguous vectors u (rows,) and v (n,) and a C-contiguous (rows, n)
    out of their dtype: one GEMM of inner size 1 on MKL's threads, each value copied exactly
    (one product by 1 where u or v is a ones vector). u and v are held by this call's frame:
    a temporary passed in stays alive while MKL reads it."""
    rows, n = out.shape
    _ROUTINES["gemm", out.dtype](_ROW_MAJOR, _NO_TRANS, _NO_TRANS, rows, n, 1, 1.0,
                                 _address(u), 1, _address(v), n, 0.0, _address(out), n)


def _vector_out(fn, x, others, out):
    """The array a VML call may write (`out`, or a new one), or None where it may not run:
    no such function, not plain contiguous NumPy arrays of one dtype and size, an `out` that
    partly overlaps an input (the same array is fine: VML works element by element)."""
    if fn is None or type(x) is not np.ndarray or not x.flags.c_contiguous or \
            x.size > _INT32_MAX:
        return None
    for a in others:
        if type(a) is not np.ndarray or a.dtype != x.dtype or a.shape != x.shape or \
                not a.flags.c_contiguous:
            return None
    if out is None:
        return np.empty_like(x)
    if type(out) is not np.ndarray or out.dtype != x.dtype or out.size != x.size or \
            not (out.flags.c_contiguous and out.flags.writeable):
        return None
    for a in (x,) + others:
        if _address(out) != _address(a) and np.may_share_memory(a, out):
            return None
    return out


def takes(y):
    """True when BLAS would update this array (of its size and dtype) in place."""
    return type(y) is np.ndarray and y.size >= MIN_SIZE and ("axpy", y.dtype) in _ROUTINES


def _blas(routine, y, x):
    """The routine for y and x, or None where the ufuncs must run."""
    if type(y) is not np.ndarray or type(x) is not np.ndarray or y.size < MIN_SIZE or \
            x.dtype != y.dtype or x.shape != y.shape or \
            not (y.flags.c_contiguous and x.flags.c_contiguous and y.flags.writeable) or \
            np.may_share_memory(x, y) or y.size > _INT32_MAX:
        return None
    return _ROUTINES.get((routine, y.dtype))


def _number(a):
    return type(a) is float or type(a) is int


def axpy(y, a, x):
    """y += a * x, in place."""
    fn = _blas("axpy", y, x) if _number(a) else None
    if fn is None:
        y += a * x
    else:
        fn(y.size, a, _address(x), 1, _address(y), 1)


def axpby(y, a, x, b):
    """y = a * x + b * y, in place."""
    fn = _blas("axpby", y, x) if _number(a) and _number(b) else None
    if fn is None:
        y *= b
        y += a * x
    else:
        fn(y.size, a, _address(x), 1, b, _address(y), 1)


# ---- GEMM --------------------------------------------------------------------------------
def _layout(rows, cols, s0, s1, item):
    """(transpose flag, leading dimension) by which row-major BLAS reads a rows x cols matrix
    with byte strides (s0, s1), or None (negative, misaligned or overlapping strides)."""
    if (s1 == item or cols == 1) and (rows == 1 or (s0 % item == 0 and s0 >= cols * item)):
        return _NO_TRANS, (s0 // item if rows > 1 else cols)
    if (s0 == item or rows == 1) and (cols == 1 or (s1 % item == 0 and s1 >= rows * item)):
        return _TRANS, (s1 // item if cols > 1 else rows)
    return None


_ONE_MATRIX = (1, 0)  # `_batch` of a 2-D array


def _batch(shape, strides, item):
    """The leading dims of an array (all but the last two) as one: (count, element stride), or
    None when they do not merge into a single stride."""
    count, stride = 1, 0
    for size, step in zip(reversed(shape[:-2]), reversed(strides[:-2])):
        if size == 1:
            continue
        if step < 0 or step % item:
            return None
        if count == 1:
            stride = step // item
        elif step != stride * count * item:
            return None
        count *= size
    return count, stride


def matmul(a, b, out=None):
    """`np.matmul(a, b, out=out)`, on MKL's GEMM for float32/float64 matrices and stacks of them
    (a batch shared or broadcast from one matrix); anything else, and small products, on NumPy.

    >>> a = np.arange(12.0).reshape(2, 2, 3)
    >>> np.array_equal(matmul(a, a.mT), np.matmul(a, a.mT))
    True
    """
    c = _gemm(a, b, out)
    if c is None:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    return c


def _gemm(a, b, out, beta=0.0, routines=None, alpha=1.0, least=None):
    """alpha times the product computed by BLAS into `out` (or a new array), or None where
    NumPy must; beta = 1 adds it to what `out` holds. `routines`: where the GEMM is bound
    (_ROUTINES); `least`: the fewest multiply-adds BLAS takes (GEMM_MIN)."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim < 2 or b.ndim < 2:
        return None
    dtype = a.dtype
    gemm = (_ROUTINES if routines is None else routines).get(("gemm", dtype))
    if gemm is None or b.dtype != dtype:
        return None
    *_, m, k = a.shape
    kb, n = b.shape[-2:]
    if k != kb or m * n * k == 0 or max(m, n, k) > _INT32_MAX:
        return None
    matrices = a.ndim == 2 and b.ndim == 2
    if least is None:
        least = GEMM_MIN
    if matrices and m * n * k < least:
        return None  # (NumPy's: before the layout checks below, which it would not use)
    item = dtype.itemsize
    la = _layout(m, k, a.strides[-2], a.strides[-1], item)
    lb = _layout(k, n, b.strides[-2], b.strides[-1], item)
    ba = bb = _ONE_MATRIX
    if not matrices:
        ba = _batch(a.shape, a.strides, item)
        bb = _batch(b.shape, b.strides, item)
    if la is None or lb is None or ba is None or bb is None \
            or not (a.flags.aligned and b.flags.aligned):
        return None
    if a.shape[:-2] == b.shape[:-2] or b.ndim == 2:
        lead = a.shape[:-2]
    elif a.ndim == 2:
        lead = b.shape[:-2]
    else:
        return None  # a broadcast between two stacks
    count = max(ba[0], bb[0])
    if count * m * n * k < least or count * m * n > _INT32_MAX:
        return None
    shape = lead + (m, n)
    if out is None:
        c = np.empty(shape, dtype)
    elif type(out) is np.ndarray and out.shape == shape and out.dtype == dtype and \
            out.flags.c_contiguous and out.flags.writeable and out.flags.aligned and \
            not np.may_share_memory(out, a) and not np.may_share_memory(out, b):
        c = out
    else:
        return None
    (ta, lda), (tb, ldb) = la, lb
    sa = ba[1] if ba[0] > 1 else 0
    sb = bb[1] if bb[0] > 1 else 0
    if count == 1:
        gemm(_ROW_MAJOR, ta, tb, m, n, k, alpha, _address(a), lda, _address(b), ldb,
             beta, _address(c), n)
    elif sb == 0 and ta == _NO_TRANS and sa == m * lda:
        # one matrix against a contiguous stack: a single GEMM over all its rows
        gemm(_ROW_MAJOR, ta, tb, count * m, n, k, alpha, _address(a), lda, _address(b),
             ldb, beta, _address(c), n)
    else:
        _ROUTINES["gemm_batch_strided", dtype](
            _ROW_MAJOR, ta, tb, m, n, k, alpha, _address(a), lda, sa, _address(b), ldb,
            sb, beta, _address(c), n, m * n, count)
    return c


# the bias rows of `linear` are one GEMM (`_outer`) from this many values on, NumPy's broadcast
# copy below: (2048, 512) took 90 us against 153, (128, 512) 8 against 5 and a linear layer's
# (128, 784) @ (784, 512) + b 371 against 348 (the two GEMMs' thread hand-over)
_OUTER_MIN = 1 << 18


def linear(x, w, bias):
    """x @ w.T + bias for a 2-D x, a 2-D weight and a 1-D bias, as torch's addmm: the rows of
    the bias (`_outer` with a ones column on MKL for large outputs, else NumPy's broadcast
    copy), then one GEMM that adds the product to them (beta = 1), a pass fewer than the
    product and an add; None where no BLAS GEMM is bound (NumPy's own BLAS) or the product is
    small.

    >>> x, w, b = np.ones((2, 3)), np.ones((4, 3)), np.arange(4.0)
    >>> y = linear(x, w, b)
    >>> y is None or y.tolist() == (x @ w.T + b).tolist()
    True
    """
    routines = _ROUTINES if BACKEND == "mkl" else _BIAS_GEMM
    if not all(type(t) is np.ndarray for t in (x, w, bias)) or x.ndim != 2 or w.ndim != 2 \
            or bias.shape != w.shape[:1] or bias.dtype != x.dtype or \
            not bias.flags.c_contiguous or ("gemm", x.dtype) not in routines or \
            x.shape[0] * w.size < GEMM_MIN:  # (_gemm's own bound: no bias rows made in vain)
        return None
    c = np.empty((x.shape[0], w.shape[0]), x.dtype)
    if BACKEND == "mkl" and c.size >= _OUTER_MIN:
        _outer(np.ones(x.shape[0], x.dtype), bias, c)
    else:  # (OpenBLAS's GEMM of inner size 1 is slow)
        np.copyto(c, bias)
    return _gemm(x, w.T, c, beta=1.0, routines=routines)


def matmul_add(a, b, c, alpha=1.0, least=None):
    """c += alpha * (a @ b), in place, by one GEMM with beta = 1 (c may be a run of rows of a
    larger array); False, with nothing done, where MKL does not take the product (as
    `matmul`; `least`: the fewest multiply-adds it takes, a GEMM's start-up against NumPy's).

    >>> a, b, c = np.ones((2, 3)), np.ones((3, 2)), np.ones((2, 2))
    >>> matmul_add(a, b, c) is False or c.tolist() == [[4.0, 4.0], [4.0, 4.0]]
    True
    """
    return _number(alpha) and _gemm(a, b, c, beta=1.0, alpha=alpha, least=least) is not None


def column_sums_add(m, y, alpha):
    """y += alpha * m.sum(axis=0), in place, for a C-contiguous (rows, n) float matrix m and
    a C-contiguous (n,) y of its dtype, by one MKL gemv (m^T times a column of ones); False,
    with nothing done, where MKL does not take it. The rows are added one after another, as
    NumPy's and flowgrad's own sums of up to a thousand rows (a bias gradient's).

    >>> m, y = np.ones((3, 2)), np.zeros(2)
    >>> column_sums_add(m, y, -0.5) is False or y.tolist() == [-1.5, -1.5]
    True
    """
    gemv = _ROUTINES.get(("gemv", m.dtype))
    if gemv is None or type(m) is not np.ndarray or type(y) is not np.ndarray or \
            not _number(alpha) or m.ndim != 2 or y.shape != m.shape[1:] or \
            y.dtype != m.dtype or not (m.flags.c_contiguous and m.flags.aligned and
                                       y.flags.c_contiguous and y.flags.writeable and
                                       y.flags.aligned) or \
            not 0 < m.size <= _INT32_MAX or np.may_share_memory(m, y):
        return False
    rows, n = m.shape
    ones = _ONES.get((rows, m.dtype))
    if ones is None:
        ones = _ONES[rows, m.dtype] = np.ones(rows, m.dtype)
        ones.flags.writeable = False
    gemv(_ROW_MAJOR, _TRANS, rows, n, alpha, _address(m), n, _address(ones), 1, 1.0,
         _address(y), 1)
    return True


_ONES = {}  # (rows, dtype) -> a read-only column of ones, for column_sums_add


def get_num_threads():
    """The threads of the BLAS flowgrad's GEMMs run on, or None where that is NumPy's."""
    return _LIB.MKL_Get_Max_Threads() if BACKEND == "mkl" else None


def set_num_threads(num):
    """Resize MKL's pool (NumPy's OpenBLAS stays at one thread beside it); False without MKL."""
    if BACKEND != "mkl":
        return False
    _LIB.MKL_Set_Num_Threads(num)
    # and no per-thread count left over in the calling thread (mkl_set_num_threads_local, as
    # a library sharing this MKL may set: it overrides the global one there)
    _LIB.MKL_Set_Num_Threads_Local(0)
    return True
