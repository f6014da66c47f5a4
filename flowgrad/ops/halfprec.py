"""Half-precision (float16, bfloat16) products computed in float32, as torch's CPU kernels.

NumPy has no BLAS for either: ml_dtypes' bfloat16 matmul returns float32 and its einsum
refuses bfloat16; float16's matmul is a slow loop. torch's CPU GEMMs and convolutions take
half-precision operands, accumulate in float32 and round the result to the operands' dtype.
`in_float32` wraps such a kernel to do the same, so matmul, linear, conv and einsum return
their inputs' dtype (and so do their gradients, which are these ops again).

>>> import flowgrad as flow
>>> a = flow.ones(2, 3, dtype=flow.float16)
>>> (a @ a.T).dtype
flowgrad.float16
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .kernel_wrappers import wrapped

HALF = frozenset(d.np for d in (_dt.float16, _dt.bfloat16) if d is not None)


def in_float32(kernel):
    """`kernel(xp, *arrays, **attrs)` run on float32 copies of its half-precision arrays; its
    float32 results are rounded to the first half-precision input's dtype. Other dtypes pass
    through untouched (one dtype check per array)."""

    # (the kernel's own parameters: see kernel_wrappers.py)
    run = wrapped(kernel, "    for _array in {arrays}:\n"
                          "        if _array is not None and _array.dtype in HALF:\n"
                          "            _low = _array.dtype\n"
                          "            break\n"
                          "    else:\n"
                          "        return kernel({call})\n"
                          "{rebind}"
                          "    _out = kernel({call})\n"
                          "    if type(_out) is tuple:\n"
                          "        return tuple(_round(o, _low) for o in _out)\n"
                          "    return _round(_out, _low)\n",
                  HALF=HALF, cast=_to_float32, _round=_round)
    run.half_in_float32 = True  # autocast hands such an op its lower-precision inputs as they are
    return run


def _to_float32(xp, a):
    return a.astype(xp.float32) if a is not None and a.dtype in HALF else a


def _round(out, low):
    return out.astype(low) if out.dtype == np.float32 else out


_DOUBLE = frozenset((np.dtype(np.float64), np.dtype(np.complex128)))


def opmath(np_dtype):
    """The real dtype torch's CPU kernels compute with for `np_dtype` (its `opmath_type`):
    float64 for float64 and complex128, float32 for every other floating dtype, half
    precision included; a scalar argument (lerp's weight, an activation's slope) is read
    in it.

    >>> opmath(np.dtype(np.float16)), opmath(np.dtype(np.complex128))
    (dtype('float32'), dtype('float64'))
    """
    return np.dtype(np.float64) if np_dtype in _DOUBLE else np.dtype(np.float32)


def upcast(*tensors):
    """(the half-precision dtype of the first such tensor, or None; the tensors with the half
    ones in float32): a composite of flowgrad ops (a gradient rule, a fused multiply-add) run
    on these computes in float32 and rounds once at its end (`.to(low)`), as torch's kernels,
    where rounding each step to half precision overflows (float16's x ** 3 above 40) or
    lands in subnormals. Other dtypes: (None, the tensors as they are), one check each.

    >>> import flowgrad as flow
    >>> low, (x,) = upcast(flow.ones(2, dtype=flow.float16))
    >>> low, x.dtype
    (flowgrad.float16, flowgrad.float32)
    """
    low = next((t.dtype for t in tensors if t is not None and t._data.dtype in HALF), None)
    if low is None:
        return None, tensors
    return low, tuple(t.float() if t is not None and t._data.dtype in HALF else t
                      for t in tensors)


def half_by_one_element(a, b):
    """Whether torch's mul/div kernel takes `b` as a scalar of `a * b` (`a / b`) in float32:
    `a` a half-precision tensor, `b` a one-element tensor of another dtype (a 0-d float32 or
    float64, an integer) whose result stays `a`'s dtype. torch reads b's original value in
    float32 and rounds the float32 result once (float16 3.0 * a 0-d float32 1 + 2**-11 +
    2**-30 is 3.002, not 3.0 as with b rounded to float16 first); `b * a` is not such a case.
    Not where b requires grad: torch's gradient of b is then computed in the half dtype
    (grad * a summed in float16), which the float32 product would not give (open)."""
    da, db = getattr(a, "_data", None), getattr(b, "_data", None)
    return da is not None and db is not None and da.dtype in HALF and db.size == 1 and \
        db.dtype != da.dtype and not getattr(b, "is_sparse", False) and \
        not b.requires_grad and _dt.result_type(a, b).np == da.dtype


# Elementwise ops with a Python scalar (elementwise.py, powers.py): torch rounds the scalar to a
# half-precision tensor's dtype for some ops and computes in float32 for others.
def same_dtype(x, r):
    """r in x's dtype: ml_dtypes computes `bfloat16 array * Python float` in float32."""
    return r if r.dtype is x.dtype else r.astype(x.dtype)


def in_float32_with(xp, ufunc, x, value):
    """ufunc(x, value) of a half-precision x in float32, the scalar unrounded, rounded once."""
    return ufunc(x.astype(xp.float32), xp.float32(value)).astype(x.dtype)


def rounded_to(x, value):
    """A real scalar rounded to half-precision x's dtype (as a Python float)."""
    return float(x.dtype.type(value)) if not isinstance(value, complex) else value
