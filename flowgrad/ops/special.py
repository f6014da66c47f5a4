"""Special functions for kernels, taken from the array module's SciPy counterpart.

SciPy has no float16 or bfloat16 loops: those compute in float32 and round back.
"""
from __future__ import annotations


def _special(xp):
    import scipy.special

    return scipy.special


def _apply(fn, x):
    if x.dtype.kind == "V" or x.dtype.itemsize < 4:  # bfloat16, float16
        import numpy as np

        return fn(x.astype(np.float32)).astype(x.dtype)
    return fn(x).astype(x.dtype, copy=False)


def erf(xp, x):
    """The error function, elementwise, keeping x's dtype."""
    return _apply(_special(xp).erf, x)


def erfc(xp, x):
    """1 - erf(x), accurate where erf(x) is near 1."""
    return _apply(_special(xp).erfc, x)


def erfinv(xp, x):
    """The inverse error function on (-1, 1)."""
    return _apply(_special(xp).erfinv, x)
