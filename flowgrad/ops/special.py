"""Special functions for kernels, written with the array module only (NumPy, or CuPy later),
so flowgrad needs no SciPy.

erf for float32 and narrower: erf(x) = tanh(x G(min(x^2, 3.9^2))), G a degree-6 polynomial with
G(0) = 2/sqrt(pi), fit for flowgrad (near-minimax, against float64 erf, on the error of erf
itself); exactly +-1 from |x| = 4.4 on. erf and tanh share their shape, so a short polynomial
suffices: 16 array passes where the former rational fit x P(x^2) / Q(x^2) took 24, measured
1.5x faster. In float32 over every 11th positive float32 bit pattern (194M values): max 3.9
ulp, mean 0.33, max abs 1.8e-7 (the rational: 7.4 ulp, 0.33, 4.4e-7; torch: 1.0 ulp).
erf and erfc in float64: for |x| < 3 the everywhere-positive series
    erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (2n+1)!!
(no cancellation), beyond it 1 - erfc; erfc from |x| = 0.5 on as exp(-x^2) erfcx(x), exp(-x^2)
without the rounding of x * x and erfcx SciPy's; loops run over terms, never over elements, and
stop once terms fall below float64 precision.
erfinv: Winitzki's closed-form estimate (within ~2e-3), polished by Newton steps on erf for
small |y| and on erfc near 1, so both ends keep full relative precision.
"""
from __future__ import annotations

import functools
import math

import numpy as _np  # only to tell NumPy's arrays (chunked) from other devices' (whole)

from ..blas import vector_math

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SPLIT = 3.0  # float64: erf by its series below, as 1 - erfc above
_G = (1.1283791670955126, 0.10276880700926738, -0.00019030141844435822,
      -0.0006214356267363055, 8.830553256277409e-05, -5.779550030820346e-06,
      1.4816477471544408e-07)


# Elements per chunk for map_chunks: 128 KiB of float32, so a formula's temporaries stay in
# the core's cache between its passes (measured best of 16K-128K on erf and gelu)
CHUNK = 32768


@functools.cache
def _scipy_special(xp_name):
    if not xp_name.startswith("cupy"):  # NumPy (or NumPy with MKL's matmul)
        import scipy.special
        return scipy.special
    import cupyx.scipy.special  # a CuPy device: the same ufuncs on the GPU
    return cupyx.scipy.special


def scipy_call(xp, name, *arrays):
    """scipy.special.<name>(*arrays) computed in float64, cast back to the first array's dtype
    (float32 inputs keep float32 results, as torch's)."""
    fn = getattr(_scipy_special(xp.__name__), name)
    with xp.errstate(all="ignore"):
        out = fn(*(a.astype(xp.float64, copy=False) for a in arrays))
    return out.astype(arrays[0].dtype, copy=False)


def map_chunks(xp, fn, *arrays):
    """`fn(xp, *arrays)` for an elementwise `fn` of same-shaped arrays, run on aligned chunks
    of CHUNK elements when NumPy's arrays are larger: a formula of many passes (erf's are 16)
    then reads its temporaries from cache, not memory (erf on a million float32: 1.6x
    faster). Results are the same, element for element.

    >>> import numpy as np
    >>> x = np.linspace(-1, 1, 100_000)
    >>> bool((map_chunks(np, lambda xp, a: a * a + 1, x) == x * x + 1).all())
    True
    """
    first = arrays[0]
    if first.size <= CHUNK or type(first) is not _np.ndarray:
        return fn(xp, *arrays)
    flat = [a.reshape(-1) for a in arrays]
    head = fn(xp, *(a[:CHUNK] for a in flat))
    out = xp.empty(first.size, head.dtype)
    out[:CHUNK] = head
    for start in range(CHUNK, first.size, CHUNK):
        stop = start + CHUNK
        out[start:stop] = fn(xp, *(a[start:stop] for a in flat))
    return out.reshape(first.shape)


def chunk_elements(x):
    """Elements per chunk for a kernel that loops over x in cache-sized pieces itself (gelu,
    layer norm's row blocks): CHUNK for NumPy's arrays, all of x for other devices'.

    >>> import numpy as np
    >>> chunk_elements(np.zeros(10)) == CHUNK
    True
    """
    return CHUNK if type(x) is _np.ndarray else max(1, x.size)


def _polynomial(xp, coefs, t):
    """sum_k coefs[k] t^k by Horner's rule, in place on one buffer."""
    acc = t * xp.float32(coefs[-1])
    for c in coefs[-2:0:-1]:
        acc += xp.float32(c)
        acc *= t
    acc += xp.float32(coefs[0])
    return acc


def _erf_float32(xp, x):
    """erf for float32 (and narrower) inputs, computed in float32: tanh(x G(x^2))."""
    shape = x.shape
    x = x.astype(xp.float32, copy=False).reshape(-1)  # 1-d: 0-d arithmetic gives scalars
    inner = xp.clip(x, -3.9, 3.9)  # G is fit up to 3.9 and turns over far out
    acc = _polynomial(xp, _G, inner * inner)
    # times the unclipped x: from |x| = 4.4 on the argument passes 10, where tanh is exactly
    # +-1, so 1 + erf(x) is exactly 0 in the tails (-0.5 x (1 + erf) of gelu stays 0 at
    # x = -1e30); between 3.83 and 4.4 it is 1 ulp short of the +-1 erf rounds to
    acc *= x
    return xp.tanh(acc, out=acc).reshape(shape)


# Phi(x) = (1 + erf(x / sqrt 2)) / 2 as _erf_float32 computes it, the 1 / sqrt 2 folded into
# G's coefficients (G'_k = G_k / (sqrt 2 2^k) of x^2), one pass fewer
_G_CDF = tuple(c / (math.sqrt(2) * 2 ** k) for k, c in enumerate(_G))
_CLIP_CDF = 3.9 * math.sqrt(2)


def normal_cdf_into(xp, x, out, tmp):
    """Phi(x), the standard normal CDF, of a float32 array into `out` (`tmp`: float32 scratch
    of x's size), by the float32 erf's formula in 14 in-place passes: gelu runs it on
    cache-sized chunks.

    >>> import numpy as np
    >>> x = np.array([-1.0, 0.0, 1.0], np.float32)
    >>> normal_cdf_into(np, x, np.empty(3, np.float32), np.empty(3, np.float32)).round(4)
    array([0.1587, 0.5   , 0.8413], dtype=float32)
    """
    if vector_math("CdfNorm", x, out) is not None:  # MKL's, where it is loaded: one pass
        return out
    u = xp.clip(x, -_CLIP_CDF, _CLIP_CDF, out=tmp)
    xp.square(u, out=u)
    xp.multiply(u, xp.float32(_G_CDF[-1]), out=out)
    for c in _G_CDF[-2:0:-1]:
        out += xp.float32(c)
        out *= u
    out += xp.float32(_G_CDF[0])
    out *= x  # the unclipped x: exactly 0 or 1 in the tails, as erf's -1 and 1
    xp.tanh(out, out=out)
    out += xp.float32(1)
    out *= xp.float32(0.5)
    return out


def _exp_neg_square(xp, a, scale=1.0):
    """exp(-scale a^2) for 0 <= a <= 40 (scale a power of two) to ~1 ulp: a = hi + lo with hi
    on a 2^-16 grid, so hi^2 is exact and exp(-a^2) = exp(-hi^2) exp(-(2 hi + lo) lo)
    (exp(-a * a) loses a^2 ulps to the rounding of a * a: 100 ulps of erfc at a = 20)."""
    hi = xp.round(a * 65536.0) / 65536.0
    lo = a - hi
    return xp.exp(-scale * (hi * hi)) * xp.exp(-scale * ((2.0 * hi + lo) * lo))


def _erf_series(xp, a):
    """erf(a) for 0 <= a < 3 in float64."""
    a2 = a * a
    term = a.copy()
    total = a.copy()
    for n in range(1, 100):
        term *= (2.0 / (2 * n + 1)) * a2
        total += term
        if n > 4 and not (term > 1e-17 * total).any():
            break
    return _TWO_OVER_SQRT_PI * _exp_neg_square(xp, a) * total


def _erfc_big(xp, a):
    """erfc(a) for a >= 0.5 in float64: exp(-a^2) erfcx(a), erfcx by SciPy's Faddeeva kernel
    (~2 ulps); 0 from a = 28 on, where erfc has underflowed."""
    capped = xp.minimum(a, 28.0)
    out = _exp_neg_square(xp, capped) * scipy_call(xp, "erfcx", capped)
    return xp.where(a >= 28.0, 0.0, out)


def _erf_erfc_abs(xp, a):
    """(erf(a), erfc(a)) for a = |x| in float64 (1-D), each branch on its own elements: erf by
    its series below 3, erfc as 1 - erf below 0.5 (erfc > 0.48 there: no cancellation) and by
    _erfc_big from 0.5 on (1 - erf lost up to 5e4 ulps of erfc at 2.9)."""
    erf_abs = xp.full_like(a, xp.nan)
    erfc_abs = xp.full_like(a, xp.nan)
    small = a < _SPLIT
    if small.any():
        erf_abs[small] = _erf_series(xp, a[small])
    low = a < 0.5
    erfc_abs[low] = 1.0 - erf_abs[low]
    high = a >= 0.5
    if high.any():
        erfc_abs[high] = _erfc_big(xp, a[high])
    large = a >= _SPLIT
    erf_abs[large] = 1.0 - erfc_abs[large]
    return erf_abs, erfc_abs


def _precise(xp, x):
    a = xp.abs(x.astype(xp.float64)).ravel()
    erf_abs, erfc_abs = _erf_erfc_abs(xp, a)
    return erf_abs.reshape(x.shape), erfc_abs.reshape(x.shape)


def erf(xp, x):
    """The error function, elementwise, keeping x's dtype."""
    out = vector_math("Erf", x)  # MKL's (float32, float64), where it is loaded
    if out is not None:
        return out
    if x.dtype.itemsize < 8 or x.dtype.kind == "V":
        return map_chunks(xp, _erf_float32, x).astype(x.dtype, copy=False)
    erf_abs, _ = _precise(xp, x)
    return xp.sign(x) * erf_abs


def erfc(xp, x):
    """1 - erf(x), accurate where erf(x) is near 1 (computed in float64)."""
    _, erfc_abs = _precise(xp, x)
    return xp.where(x >= 0, erfc_abs, 2.0 - erfc_abs).astype(x.dtype)


def erfinv(xp, x):
    """The inverse error function on [-1, 1] (+-inf at +-1, nan outside)."""
    y = x.astype(xp.float64)
    a = xp.abs(y)
    inside = a < 1
    a_in = xp.where(inside, a, 0.0)
    target = 1.0 - a_in  # exact near 1: Newton solves erfc(z) = 1 - |y|
    w = 0.147  # Winitzki's constant
    log_term = xp.log(target * (1.0 + a_in))  # log(1 - a^2) without cancellation
    first = 2.0 / (math.pi * w) + log_term / 2.0
    z = xp.sqrt(xp.sqrt(first * first - log_term / w) - first)
    small = a_in < 0.5
    for _ in range(5):  # quadratic convergence from ~2e-3
        e, c = _precise(xp, z)
        # the residual erf(z) - |y|, from erf where |y| is small, from erfc near 1
        residual = xp.where(small, e - a_in, target - c)
        z = z - residual / (_TWO_OVER_SQRT_PI * xp.exp(-z * z))
    edge = xp.where(a == 1, xp.inf, xp.nan)
    return (xp.sign(y) * xp.where(inside, z, edge)).astype(x.dtype)
