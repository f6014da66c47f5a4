"""Special functions for kernels, taken from the array module's SciPy counterpart."""
from __future__ import annotations


def _special(xp):
    import scipy.special

    return scipy.special


def erf(xp, x):
    """The error function, elementwise, keeping x's dtype."""
    return _special(xp).erf(x).astype(x.dtype, copy=False)


def erfinv(xp, x):
    return _special(xp).erfinv(x).astype(x.dtype, copy=False)
