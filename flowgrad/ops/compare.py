"""Comparisons and logic (no gradient: eq, lt, logical_and, isnan, isclose, ...), and the
masks gradient rules select with (clamp_mask, tie_weights): ops, so a rule that needs
a mask records it like any other op.

>>> import flowgrad as flow
>>> flow.tensor([1, 2, 3]) >= 2
tensor([False,  True,  True])
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..autograd.interpreter import check_read
from ..autograd.meta import counter_of
from ..device import array_module
from ..errors import check_int64, tensor_operand
from ..meta import MetaArray
from ..tensor import Tensor
from .creation import tensor as _number_tensor
from .halfprec import in_float32
from .registry import op

__all__ = ["eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or",
           "logical_xor", "isnan", "isinf", "isfinite", "equal", "allclose", "isclose", "isin"]


_NUMBERS = (builtins.int, builtins.float, builtins.bool, builtins.complex)


def _promote_pair(a, b, op_name, floating=False, number_pair=False):
    """Both operands as tensors of torch's result dtype; `floating`: lifted to the default
    float dtype when that is integral (cast straight to float, so that in `-3 / uint8` the
    -3 is not first wrapped to 253 by a cast to uint8). `number_pair`: two Python numbers are
    taken, the first as a 0-d tensor (torch's add, sub, mul and div do; its other functions
    refuse them; a NumPy scalar is a number there, as in torch: mul(np.float32(1.5), 2) is a
    float32 0-d tensor, and np.float64 is read as a Python float too)."""
    if isinstance(a, np.generic):  # (two checks: no generator frame per binary op)
        a = _dt.scalar_value(a)  # (np.bool_: a float, as torch)
    if isinstance(b, np.generic):
        b = _dt.scalar_value(b)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        if not (number_pair and isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS)):
            raise TypeError(f"{op_name}(): argument 'input' (position 1) must be Tensor, "
                            f"not {type(a).__name__}; wrap a number in flow.tensor(...)")
        a = _number_tensor(a)
    if not isinstance(a, Tensor):
        a, b = b, a
        swapped = True
    else:
        swapped = False
    if not isinstance(b, Tensor):
        if not isinstance(b, _NUMBERS) and not hasattr(b, "__array__"):
            raise TypeError(f"{op_name}(): unsupported operand type {type(b).__name__}; "
                            f"expected a Tensor or a number")
        check_int64(op_name, b, "other")
        check_bool_uint64(a, b, op_name)
        b = Tensor._wrap(array_module(a._data).asarray(b))  # on a's device
        d = _dt.result_type(a, b if b._data.ndim else b.item())
    else:
        d = _dt.result_type(a, b)
    if floating and d.category < 2:
        d = _dt.get_default_dtype()
    a = a if a._data.dtype == d.np else promoted(a, d)
    b = b if b._data.dtype == d.np else promoted(b, d)
    return (b, a) if swapped else (a, b)


def check_bool_uint64(tensor, number, op_name):
    """A Python int from 2**63 on is a uint64 Scalar in torch, and with a bool tensor the result
    type too, which torch refuses (an int64 of it would wrap to a negative number)."""
    if number.__class__ is int and 9223372036854775808 <= number < 18446744073709551616 and \
            tensor._data.dtype == np.bool_:  # (from 2**64 on: check_int64's OverflowError)
        raise RuntimeError(f"{op_name}(): Promotion for uint16, uint32, uint64 types is not "
                           f"supported, attempted to promote Bool and UInt64 (the number "
                           f"{number} does not fit int64); convert the bool tensor with "
                           f".long() or pass a float")


def promoted(t, dtype):
    """t cast to `dtype` for an op's type promotion. The cast shares t's version counter: torch
    promotes inside the kernel and saves t itself, so an in-place write to t after the op
    makes its backward raise; a copy with a counter of its own would let the backward run on
    the values before the write.

    >>> import flowgrad as flow
    >>> x = flow.ones(2, requires_grad=True)
    >>> n = flow.tensor([2, 3])
    >>> y = x * n          # n is promoted to float32 for the product, and saved
    >>> n += 1
    >>> try:
    ...     y.sum().backward()
    ... except RuntimeError as e:
    ...     print(str(e)[:62])
    one of the tensors needed for gradient computation has been mo
    """
    cast = t.to(dtype)
    if cast is not t and not t.is_inference():
        cast._counter = counter_of(t)
    return cast


# ---- comparisons and logic (no gradient) -----------------------------------------------------
def _compare(name, fn):
    k = op(name, differentiable=False, layout="elementwise")(fn)

    def compare(input, other):
        if not isinstance(other, Tensor) or other._data.dtype is not input._data.dtype:
            # torch compares in the promoted dtype: float16 vs a 0-d float64 rounds the
            # latter to float16, and uint8 vs -3 wraps -3 to 253 as torch's cast does
            input, other = _promote_pair(input, other, name)
        return k(input, other)
    compare.__name__ = compare.__qualname__ = name
    return compare


eq = _compare("eq", lambda xp, a, b: a == b)
ne = _compare("ne", lambda xp, a, b: a != b)
lt = _compare("lt", lambda xp, a, b: a < b)
le = _compare("le", lambda xp, a, b: a <= b)
gt = _compare("gt", lambda xp, a, b: a > b)
ge = _compare("ge", lambda xp, a, b: a >= b)
# (torch takes tensors only there: a number raises)
logical_and = tensor_operand()(_compare("logical_and", lambda xp, a, b: xp.logical_and(a, b)))
logical_or = tensor_operand()(_compare("logical_or", lambda xp, a, b: xp.logical_or(a, b)))
logical_xor = tensor_operand()(_compare("logical_xor", lambda xp, a, b: xp.logical_xor(a, b)))


@op("logical_not", differentiable=False)
def _logical_not(xp, x):
    return xp.logical_not(x)


def logical_not(input):
    """Elementwise `not x` (nonzero is True); returns bool.

    >>> import flowgrad as flow
    >>> flow.logical_not(flow.tensor([0.0, 2.0])).tolist()
    [True, False]
    """
    return _logical_not(input)


@op("isnan", differentiable=False)
def _isnan(xp, x):
    return xp.isnan(x)


def isnan(input):
    """Elementwise test for NaN; returns bool.

    >>> import flowgrad as flow
    >>> flow.isnan(flow.tensor([1.0, float("nan")])).tolist()
    [False, True]
    """
    return _isnan(input)


@op("isinf", differentiable=False)
def _isinf(xp, x):
    return xp.isinf(x)


def isinf(input):
    """Elementwise test for +/-inf; returns bool.

    >>> import flowgrad as flow
    >>> flow.isinf(flow.tensor([1.0, -float("inf")])).tolist()
    [False, True]
    """
    return _isinf(input)


@op("isfinite", differentiable=False)
def _isfinite(xp, x):
    return xp.isfinite(x)


def isfinite(input):
    """Elementwise test for finite values (not inf, not NaN); returns bool.

    >>> import flowgrad as flow
    >>> flow.isfinite(flow.tensor([1.0, float("inf"), float("nan")])).tolist()
    [True, False, False]
    """
    return _isfinite(input)


@op("isin", differentiable=False)
@in_float32  # (ml_dtypes' bfloat16 sort leaves a NaN where it is: 2 in [nan, 2] was False)
def _isin(xp, elements, test_elements, *, invert):
    return xp.isin(elements, test_elements, invert=invert)


def isin(elements=None, test_elements=None, *, assume_unique=False, invert=False,
         element=None, test_element=None):
    """Whether each element of `elements` is in `test_elements` (either may be a number, not
    both; torch names a number `element` or `test_element`), compared in their promoted dtype;
    `invert`: whether it is not. `assume_unique` is accepted (a hint to torch's kernel; the
    answer is the same).

    >>> import flowgrad as flow
    >>> flow.isin(flow.tensor([1, 2, 3, 4]), flow.tensor([2, 4]))
    tensor([False,  True, False,  True])
    """
    elements = element if element is not None else elements
    test_elements = test_element if test_element is not None else test_elements
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin() received an invalid combination of arguments - got "
                        f"({type(elements).__name__}, {type(test_elements).__name__}): "
                        f"pass elements or test_elements as a Tensor")
    for t in (elements, test_elements):
        kind = t._data.dtype.kind if isinstance(t, Tensor) else \
            "b" if isinstance(t, builtins.bool) else "c" if isinstance(t, builtins.complex) else ""
        if kind in ("b", "c"):  # torch has no such kernel
            name = t.dtype if isinstance(t, Tensor) else type(t).__name__
            raise RuntimeError(f"Unsupported input type encountered for isin(): {name}; "
                               f"convert bool or complex values first (.int(), .real)")
    a, b = _promote_pair(elements, test_elements, "isin")
    return _isin(a, b, invert=bool(invert))


def equal(input, other) -> bool:
    """True when both tensors have the same shape and elements."""
    for t in (input, other):
        if t._data.__class__ is MetaArray:  # (no elements to compare, as torch's meta)
            raise NotImplementedError("equal: a meta tensor has no values to compare (torch's "
                                      "aten::equal has no meta kernel either)")
    if input.shape != other.shape:
        return False
    for t in (input, other):  # (a Python bool of the values: no plan repeats it)
        check_read(t, "equal()")
    # array_equal, not `==`: a vmap placeholder refuses NumPy functions (torch refuses too)
    return bool(array_module(input._data).array_equal(input._data, other._data))


def isclose(input, other, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Elementwise |input - other| <= atol + rtol * |other|; returns bool.

    >>> import flowgrad as flow
    >>> flow.isclose(flow.tensor([1.0, 2.0]), flow.tensor([1.0 + 1e-7, 2.1]))
    tensor([ True, False])
    """
    _check_close("isclose", input, other, rtol, atol)
    return _isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)


# an op: a graph compiles it rather than freezing it; complex: |a - b| is the modulus, as torch
@op("isclose", differentiable=False, complex=True, layout="elementwise")
def _isclose(xp, a, b, *, rtol, atol, equal_nan):
    return xp.isclose(a, b, rtol, atol, equal_nan)


def allclose(input, other, rtol=1e-5, atol=1e-8, equal_nan=False) -> bool:
    """True if every element of input is close to other (see isclose); a Python bool."""
    _check_close("allclose", input, other, rtol, atol)
    # (bool() of a tensor: inside nn.Graph's build a value read, refused as item() is)
    return bool(_isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan).all())


def _check_close(name, input, other, rtol, atol):
    """torch's checks: one dtype (no promotion: an int64 tensor against float32 values would
    be compared as floats), non-negative tolerances."""
    if input._data.dtype != other._data.dtype:
        raise RuntimeError(f"{name}(): {input.dtype} did not match {other.dtype}; convert one "
                           f"tensor with .to(other.dtype) first")
    for arg, tol in (("rtol", rtol), ("atol", atol)):
        if not tol >= 0:
            raise RuntimeError(f"{name}(): {arg} must be greater than or equal to zero, but got "
                               f"{tol}")


# ---- masks for gradient rules ------------------------------------------------------------
@op("clamp_mask", differentiable=False)
def clamp_mask(xp, x, *, min, max):
    """Where clamp(x, min, max) passes x through (its gradient flows): a bool mask."""
    if x.dtype.kind == "V":  # bfloat16: torch compares in it, the bounds rounded (as NumPy's
        # float16 does), where ml_dtypes compares in float32 with them unrounded
        min, max = (None if v is None else x.dtype.type(v) for v in (min, max))
    return (((x >= min) if min is not None else True)
            & ((x <= max) if max is not None else True))


@op("tie_weights", n_out=2, differentiable=False)
def tie_weights(xp, a, b, *, first_wins, dtype):
    """The shares of maximum(a, b) (`first_wins` ">") or minimum(a, b) ("<") gradients: 1 to
    the winner, 0 to the loser, half each on a tie, as torch; in `dtype` (a flowgrad dtype).
    Where a or b is nan neither lost (torch masks each input where it compares as the loser):
    both get the whole gradient."""
    a_lost, b_lost = (a < b, a > b) if first_wins == ">" else (a > b, a < b)
    share = 1.0 - 0.5 * (a == b)
    return (share * ~a_lost).astype(dtype.np), (share * ~b_lost).astype(dtype.np)
