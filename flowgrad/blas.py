"""Level-1 BLAS called directly: the BLAS NumPy's own wheels ship (scipy-openblas, ILP64).

`y += a * x` is two NumPy ufuncs (a temporary, two passes, one thread), and it is the whole
of a plain SGD step. BLAS's axpy is one fused pass on all cores: ~40 against ~260 us for a
784x512 float32 parameter here. It rounds once (a fused multiply-add), as torch's
`add_(x, alpha=a)` does; the ufunc pair rounds twice. Where no such BLAS is found (another
NumPy build), or for arrays it cannot take (other dtypes, non-contiguous, overlapping, small:
a ctypes call costs ~2 us), `axpy` and `axpby` run the ufuncs, so every caller gives the same
numbers on either path up to that rounding.

>>> import numpy as np
>>> y = np.ones(3, np.float32)
>>> axpy(y, 2.0, np.arange(3, dtype=np.float32))
>>> y
array([1., 3., 5.], dtype=float32)
"""
from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

__all__ = ["axpy", "axpby", "takes"]

# arrays below this many elements take the ufuncs (BLAS's call overhead is not repaid)
MIN_SIZE = 1 << 15
_KINDS = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}


def _load():
    """{(routine, dtype): C function} from NumPy's bundled OpenBLAS, or {} if it is absent."""
    base = os.path.dirname(os.path.dirname(np.__file__))
    names = (glob.glob(os.path.join(base, "numpy.libs", "*openblas64*"))
             + glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs", "*openblas64*")))
    for path in names:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        found = {}
        for dtype, k in _KINDS.items():
            real = ctypes.c_float if k == "s" else ctypes.c_double
            for routine, argtypes in (
                    ("axpy", [ctypes.c_int64, real, ctypes.c_void_p, ctypes.c_int64,
                              ctypes.c_void_p, ctypes.c_int64]),
                    ("axpby", [ctypes.c_int64, real, ctypes.c_void_p, ctypes.c_int64, real,
                               ctypes.c_void_p, ctypes.c_int64])):
                fn = getattr(lib, f"scipy_cblas_{k}{routine}64_", None)
                if fn is None:
                    break
                fn.argtypes, fn.restype = argtypes, None
                found[routine, dtype] = fn
        if len(found) == 2 * len(_KINDS) and _agrees(found):
            return found
    return {}


def _agrees(found):
    """A self-test before trusting the library: the integer width and the argument order."""
    x = np.arange(MIN_SIZE, dtype=np.float64)
    y = np.ones(MIN_SIZE)
    found["axpby", x.dtype](MIN_SIZE, 2.0, x.ctypes.data, 1, 3.0, y.ctypes.data, 1)
    found["axpy", x.dtype](MIN_SIZE, 0.5, x.ctypes.data, 1, y.ctypes.data, 1)
    return bool(np.array_equal(y, 2.5 * x + 3.0))


_ROUTINES = _load()


def takes(y):
    """True when BLAS would update this array (of its size and dtype) in place."""
    return type(y) is np.ndarray and y.size >= MIN_SIZE and ("axpy", y.dtype) in _ROUTINES


def _blas(routine, y, x):
    """The routine for y and x, or None where the ufuncs must run."""
    if type(y) is not np.ndarray or type(x) is not np.ndarray or y.size < MIN_SIZE or \
            x.dtype != y.dtype or x.shape != y.shape or \
            not (y.flags.c_contiguous and x.flags.c_contiguous and y.flags.writeable) or \
            np.may_share_memory(x, y):
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
        fn(y.size, a, x.ctypes.data, 1, y.ctypes.data, 1)


def axpby(y, a, x, b):
    """y = a * x + b * y, in place."""
    fn = _blas("axpby", y, x) if _number(a) and _number(b) else None
    if fn is None:
        y *= b
        y += a * x
    else:
        fn(y.size, a, x.ctypes.data, 1, b, y.ctypes.data, 1)
