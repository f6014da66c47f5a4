"""Elementwise ops: arithmetic with broadcasting and Python scalars, unary math, comparisons
(compare.py) and selection (selection.py: where, clamp, maximum, minimum), both re-exported
here. Each op's kernel and gradient rule sit side by side.

Binary ops take two tensors of one dtype (the public functions promote first, by torch's
rules); `scalar_*` ops take a Python number as an attribute, as OneFlow's do.

>>> import flowgrad as flow
>>> x = flow.tensor([1.0, 2.0], requires_grad=True)
>>> (2 * x + 1).sum().backward(); x.grad
tensor([2., 2.])
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from .. import sparse_ops
from ..autograd.inplace import run_inplace
from ..device import constant, scalar_operand
from ..errors import (
    SparseOperandError,
    check_alpha,
    check_int64,
    check_kernel_dtype,
    checked_number,
)
from ..tensor import Tensor
from .compare import (  # noqa: F401 - comparisons, re-exported; their module since it grew
    _promote_pair,
    allclose,
    check_bool_uint64,
    clamp_mask,
    eq,
    equal,
    ge,
    gt,
    isclose,
    isfinite,
    isinf,
    isnan,
    le,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    ne,
    tie_weights,
)
from .complex import conj, real_sign, sgn
from .division import _refuse_bool, _rounded_div
from .halfprec import HALF, half_by_one_element, in_float32, in_float32_with, rounded_to, same_dtype
from .no_derivative import without_derivative
from .out_arg import with_out
from .powers import _scalar_pow, _scalar_rpow, _scaled_product, rounded_power
from .registry import op
from .rules import _div_other_grad, _grad_div, _grad_mul, step, unary

__all__ = [
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "pow", "neg",
    "negative", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "square",
    "reciprocal", "where", "clamp", "clip", "eq", "ne", "lt", "le", "gt", "ge", "equal",
    "maximum", "minimum", "logical_not", "logical_and", "logical_or", "logical_xor",
    "isnan", "isinf", "isfinite", "sign", "allclose", "isclose",
]


# ---- arithmetic: tensor (op) tensor -------------------------------------------------------
@op("add", jvp="linear", complex=True, layout="elementwise")
def _add(xp, a, b):
    return a + b


@_add.grad
def add_backward(ctx, dy):
    return dy, dy


@op("sub", jvp="linear", complex=True, layout="elementwise")
def _sub(xp, a, b):
    return a - b


@_sub.grad
def sub_backward(ctx, dy):
    return dy, (-dy if ctx.needs_input_grad[1] else None)


@op("mul", jvp="multilinear", save="inputs for others", complex=True,
    layout="elementwise")
def _mul(xp, a, b):
    return a * b


@_mul.grad
def mul_backward(ctx, dy):  # conj: the identity for real tensors (complex: torch's convention)
    a, b = ctx.inputs
    need = ctx.needs_input_grad
    return (dy * conj(b) if need[0] else None), (dy * conj(a) if need[1] else None)


@op("div", jvp="diagonal", save="inputs", complex=True, grad_reads=((1,), (0, 1)),
    layout="elementwise")
def _div(xp, a, b):
    return a / b


@_div.grad
def div_backward(ctx, dy):
    a, b = ctx.inputs
    da = _grad_div(dy, conj(b))
    if not ctx.needs_input_grad[1]:
        return da, None
    if a.is_complex() or b.is_complex():
        return da, -_grad_div(da * conj(a), conj(b))
    return da, _div_other_grad(dy, a, b)


@op("pow", jvp="diagonal", save="inputs outputs", complex=True, layout="elementwise")
def _pow(xp, a, b):
    if b.dtype.kind in "iu" and (b < 0).any():
        # torch truncates integer a ** -n = 1 / a ** n: 0 unless |a| == 1 (NumPy raises)
        r = a ** xp.where(b >= 0, b, b & 1)  # (its parity: |b| of the minimum wraps)
        return xp.where((b >= 0) | (xp.abs(a) == 1), r, xp.zeros((), r.dtype))
    return rounded_power(xp, a, b)


@_pow.grad
def pow_backward(ctx, dy):
    (a, b), y = ctx.inputs, ctx.out
    need = ctx.needs_input_grad
    # torch's conventions: d(a**b)/da is 0 where b == 0 (not 0 * 0**-1 = nan), and
    # d(a**b)/db is 0 where a == 0 and b >= 0 (not 0 * log 0 = nan)
    da = _grad_mul(dy, conj(where(b == 0, 0.0, b * a ** (b - 1)))) if need[0] else None
    if need[1]:
        zero = (a == 0) if a.is_complex() or b.is_complex() else (a == 0) & (b >= 0)
        db = dy * conj(where(zero, 0.0, y * log(where(zero, 1.0, a))))
    else:
        db = None
    return da, db


# ---- arithmetic: tensor (op) Python scalar -------------------------------------------------
# Half precision (float16, bfloat16) follows torch's CPU kernels, which differ by op: a
# product or quotient is computed in float32 with the scalar as it is and rounded once
# (x * 0.1 is the float32 x * 0.1 rounded, not x * half(0.1): 1 ulp apart for about a third of
# the values, and half(70000) would be inf), while a sum, a power or fmod rounds the scalar
# to the tensor's dtype first. NumPy rounds it for float16 and ml_dtypes keeps it for
# bfloat16, so each kernel says which it is. (A float32/64 tensor's scalar is a shared
# constant, `scalar_operand`: the `s is value` test keeps those off this path.)
@op("scalar_add", complex=True)
def _scalar_add(xp, x, *, value):
    s = scalar_operand(xp, value, x.dtype)
    if s is value and x.dtype in HALF:  # the scalar rounded to x's dtype, as torch's add
        return in_float32_with(xp, xp.add, x, rounded_to(x, value))
    r = x + s
    return r if r.dtype is x.dtype else r.astype(x.dtype)  # inline same_dtype: hot path


@_scalar_add.grad
def scalar_add_backward(ctx, dy):
    return dy


# torch keeps the scalar as a saved tensor: a 2nd backward through a freed graph raises there,
# so here too
@op("scalar_mul", jvp="linear", save="attrs", complex=True)
def _scalar_mul(xp, x, *, value):
    s = scalar_operand(xp, value, x.dtype)
    if s is value and x.dtype in HALF:
        return in_float32_with(xp, xp.multiply, x, value)
    r = x * s
    return r if r.dtype is x.dtype else r.astype(x.dtype)  # inline same_dtype: hot path


@_scalar_mul.grad
def scalar_mul_backward(ctx, dy):
    return _scalar_mul(dy, value=ctx.value)  # (dy * value, without mul's argument checks)


# x * value where torch's op keeps the number as a Scalar, not a saved tensor (add's alpha,
# lerp's weight, trapezoid's dx): a second backward through it works, as torch's
scale = op("scale", jvp="linear", complex=True)(_scalar_mul.kernel)


@scale.grad
def scale_backward(ctx, dy):
    value = ctx.value  # (torch's gradient of a complex scale: the conjugate's)
    return scale(dy, value=value.conjugate() if isinstance(value, builtins.complex) else value)


@op("scalar_div", jvp="linear", save="attrs", complex=True)  # as scalar_mul
def _scalar_div(xp, x, *, value):
    s = scalar_operand(xp, value, x.dtype)
    if s is value and x.dtype in HALF:
        return in_float32_with(xp, xp.true_divide, x, value)
    return same_dtype(x, x / s)


@_scalar_div.grad
def scalar_div_backward(ctx, dy):
    return dy / ctx.value


# ---- unary math: one row each (flowgrad/ops/rules.py: unary, step) ----------------------------
@op("neg", jvp="linear", complex=True)
def _neg(xp, x):
    return -x


@_neg.grad
def neg_backward(ctx, dy):
    return -dy


@op("abs", jvp="diagonal", save="inputs", complex=True)
def _abs(xp, x):
    return xp.abs(x)


@_abs.grad
def abs_backward(ctx, dy):
    return dy * sgn(ctx.inputs[0])  # sign for real tensors, z / |z| for complex


# NumPy has no bool sign; torch: sign's gradient is zero everywhere
_sign = step("sign", lambda xp, x: x.copy() if x.dtype.kind == "b" else real_sign(xp, x))
_exp = unary("exp", lambda xp, x: xp.exp(x), d_of_y=lambda y: y, complex=True)
_log = unary("log", lambda xp, x: xp.log(x), d_of_x=lambda x: x, divide=True, masked=True,
             complex=True)
_sqrt = unary("sqrt", lambda xp, x: xp.sqrt(x), d_of_y=lambda y: y * 2.0, divide=True,
              masked=True, complex=True)
# (reciprocal, not `1.0 /`: ml_dtypes < 0.7 divides a Python float by bfloat16 in float32)
# (half precision: in float32, rounded once, as torch; sqrt then reciprocal would round twice)
@op("rsqrt", save="outputs", complex=True, jvp="diagonal")
@in_float32
def _rsqrt(xp, x):
    return xp.reciprocal(xp.sqrt(x))


# from the output, as torch's (`value / x` is reciprocal(x) * value: operators._rdiv)
@op("reciprocal", save="outputs", complex=True, jvp="diagonal")
def _reciprocal(xp, x):
    return xp.reciprocal(x)


def _times_powers(dy, y, n):
    """dy y^n as ((dy y) y) ..., each product masked (0 where dy is 0): y^n first underflowed
    where the gradient is a number (float32 1 / x for |x| above 1.8e19: y * y is 0, and
    renorm's gradient at 1e29 lost its projection, 24% off) or overflowed."""
    for _ in range(n):
        dy = _grad_mul(dy, y)
    return dy


@_rsqrt.grad
def rsqrt_backward(ctx, dy):
    return _times_powers(dy, conj(ctx.out), 3) * -0.5


@_reciprocal.grad
def reciprocal_backward(ctx, dy):
    return -_times_powers(dy, conj(ctx.out), 2)
_sin = unary("sin", lambda xp, x: xp.sin(x), d_of_x=lambda x: cos(x), complex=True)
_cos = unary("cos", lambda xp, x: xp.cos(x), d_of_x=lambda x: -sin(x), complex=True)


@op("tanh_grad", jvp="diagonal", save="inputs")
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _tanh_grad(xp, y, dy):
    if y.dtype is dy.dtype and y.dtype.char in "fd" and y.shape == dy.shape and y.ndim:
        t = y * y  # the same three ufuncs, the last two in place, the 1 a shared 0-d array
        return xp.multiply(dy, xp.subtract(constant(xp, 1, y.dtype), t, out=t), out=t)
    return dy * (1 - y * y)


@_tanh_grad.grad
def tanh_grad_backward(ctx, ddx):
    y, dy = ctx.inputs
    d_y = _scaled_product(ddx, dy, y, scale=-2.0) if ctx.needs_input_grad[0] else None
    return d_y, _tanh_grad(y, ddx)


# real tensors: the fused grad op; complex: composed of complex-aware ops, to any order
_tanh = unary("tanh", lambda xp, x: xp.tanh(x), d_of_y=lambda y: 1 - y * y, complex=True,
              grad_op=_tanh_grad)


def _sigmoid_kernel(xp, x):
    if x.dtype.kind == "c":
        return 1 / (1 + xp.exp(-x))
    # split by sign so exp never overflows
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


@op("sigmoid_grad", jvp="diagonal", save="inputs")
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _sigmoid_grad(xp, y, dy):
    return dy * y * (1 - y)


@_sigmoid_grad.grad
def sigmoid_grad_backward(ctx, ddx):
    y, dy = ctx.inputs
    return (ddx * dy * (1.0 - y * 2.0) if ctx.needs_input_grad[0] else None), \
        _sigmoid_grad(y, ddx)


# (bfloat16 in float32: 1 + e rounded to 1 made sigmoid 1.0, and its gradient 0, from x = 5.5)
_sigmoid = unary("sigmoid", in_float32(_sigmoid_kernel), d_of_y=lambda y: y * (1 - y), complex=True,
                 grad_op=_sigmoid_grad)


# ---- public functions: promotion, then the op ---------------------------------------------
_SCALARS = (builtins.int, builtins.float, builtins.bool)
_BOOL = np.dtype(bool)
_F64 = np.dtype(np.float64)  # (a float exponent of any size is fine: only 64-bit ints are checked)


def _scalar_dtype_ok(x, value):
    """True when `x op value` keeps x's dtype (torch's scalar promotion)."""
    kind = x._data.dtype.kind
    if kind in "fVc":
        return True
    if isinstance(value, builtins.float):
        return False
    if kind == "b":
        return isinstance(value, builtins.bool)
    info = np.iinfo(x._data.dtype)  # out of range: NumPy raises, torch wraps (via a cast)
    return info.min <= value <= info.max


def _float_of(x):
    """Ints and bools promote to the default float dtype for float-valued ops."""
    return x if x._data.dtype.kind in "fVc" else x.to(_dt.get_default_dtype())


def _binary(tensor_op, a, b, name, number_pair=False):
    if isinstance(b, Tensor) and isinstance(a, Tensor) and a._data.dtype is b._data.dtype:
        return tensor_op(a, b)
    a, b = _promote_pair(a, b, name, number_pair=number_pair)
    return tensor_op(a, b)


def add(input, other, *, alpha=1, out=None):
    """input + alpha * other, broadcasting, with torch's type promotion.

    >>> import flowgrad as flow
    >>> flow.add(flow.tensor([1.0, 2.0]), flow.tensor([10.0, 20.0]), alpha=2)
    tensor([21., 42.])
    >>> flow.tensor([1, 2]) + 0.5
    tensor([1.5000, 2.5000])
    """
    if out is not None:
        return with_out(add, out, (input, other), "add", no_overlap="partial", alpha=alpha)
    given = other
    try:  # (free until raised: a sparse operand goes to its sparse form)
        if alpha.__class__ is not int or alpha != 1:  # (alpha=True or 1.0: checked too)
            other = scale_by_alpha(input, other, alpha, "add")
        if isinstance(other, _SCALARS) and isinstance(input, Tensor):
            if input._data.dtype.kind in "fVc" or _scalar_dtype_ok(input, other):  # (inline)
                return _scalar_add(input, value=other)
        return _binary(_add, input, other, "add", number_pair=True)
    except SparseOperandError:
        return _sparse_binary("add", input, given, alpha)


def sub(input, other, *, alpha=1, out=None):
    """input - alpha * other.

    >>> import flowgrad as flow
    >>> flow.sub(flow.tensor([5, 7]), 2)
    tensor([3, 5])
    """
    if out is not None:
        return with_out(sub, out, (input, other), "sub", no_overlap="partial", alpha=alpha)
    given = other
    try:  # (free until raised: a sparse operand goes to its sparse form)
        bools = [isinstance(x, builtins.bool) or isinstance(x, Tensor) and
                 x._data.dtype.kind == "b" for x in (input, other)] \
            if _any_bool(input, other) else (False, False)
        if all(bools):
            raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                               "supported. Use the `^` or `logical_xor()` operator instead.")
        if any(bools):
            raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not "
                               "supported. If you are trying to invert a mask, use the `~` or "
                               "`logical_not()` operator instead.")
        if alpha.__class__ is not int or alpha != 1:  # (alpha=True or 1.0: checked too)
            other = scale_by_alpha(input, other, alpha, "sub")
        if isinstance(other, _SCALARS) and isinstance(input, Tensor):
            check_int64("sub", other, "other")  # (before negating: -(-2**63 - 1) would fit)
            if input._data.dtype.kind in "fVc" or _scalar_dtype_ok(input, -other):
                # (x - 0 is x + -0.0: x + 0.0 would turn a -0.0 of x into 0.0)
                neg = -0.0 if other.__class__ is int and other == 0 and \
                    input._data.dtype.kind in "fVc" else -other
                return _scalar_add(input, value=neg)
        return _binary(_sub, input, other, "sub", number_pair=True)
    except SparseOperandError:
        return _sparse_binary("sub", input, given, alpha)


def scale_by_alpha(input, other, alpha, name):
    """`alpha * other` for add/sub(input, other, alpha=): torch's checks on alpha against the
    operands' result dtype (no float alpha for integers, no complex one for reals, a bool one
    for bools only), and the product kept in that dtype (`other * 2` of bools would be int64,
    so add(bools, bools, alpha=2) would no longer be a bool tensor)."""
    if getattr(input, "is_sparse", False) or getattr(other, "is_sparse", False):
        raise SparseOperandError(f"{name} of sparse tensors")  # (add/sub take their sparse form)
    dtype = _dt.result_type(input, other)
    if hasattr(alpha, "item"):  # a tensor or a NumPy number: its value (np.bool_ a float)
        alpha = _dt.scalar_value(alpha) if isinstance(alpha, np.generic) else alpha.item()
    check_alpha(name, "alpha", alpha, dtype.np)
    if dtype.category < 3 and isinstance(alpha, builtins.complex):
        raise RuntimeError(f"For non-complex input tensors, argument alpha must not be a complex "
                           f"number (got alpha={alpha!r} for {dtype} operands)")
    if dtype.category == 0:  # bool arithmetic: alpha * b is b, or False for alpha == 0
        return other if alpha else (other & False if isinstance(other, Tensor) else False)
    # torch converts alpha to the result's dtype (256 does not fit int8; sub negates it first,
    # so sub's alpha=128 does); an integer one as that dtype holds it (uint8's -1 is 255)
    checked_number(name, _negated(alpha) if name == "sub" else alpha, dtype.np, "alpha")
    if dtype.category == 1 and alpha.__class__ is builtins.int:
        alpha = int(np.array(alpha & (2 ** (8 * dtype.np.itemsize) - 1), np.uint64)
                    .astype(dtype.np))
    elif dtype.np in HALF and not isinstance(alpha, builtins.complex):
        alpha = float(dtype.np.type(alpha))  # torch's half-precision alpha * other: rounded
    if isinstance(other, Tensor) and dtype.np == other._data.dtype:
        return scale(other, value=alpha)
    return other * alpha


def _negated(alpha):
    """-alpha as torch's Scalar negates it: a 64-bit int wraps (-(-2**63) is -2**63)."""
    if alpha.__class__ is builtins.int and -2 ** 63 <= alpha < 2 ** 63:
        return ((2 ** 63 - alpha) & (2 ** 64 - 1)) - 2 ** 63
    return -alpha


def _any_bool(a, b):
    """Whether either operand of `-` is a bool (tensor): the common case asks nothing more."""
    return (a.__class__ is builtins.bool or b.__class__ is builtins.bool
            or getattr(getattr(a, "_data", None), "dtype", None) == _BOOL
            or getattr(getattr(b, "_data", None), "dtype", None) == _BOOL)


def mul(input, other, *, out=None):
    """input * other, broadcasting.

    >>> import flowgrad as flow
    >>> flow.mul(flow.tensor([[1.0], [2.0]]), flow.tensor([1.0, 10.0]))
    tensor([[ 1., 10.],
            [ 2., 20.]])
    """
    if out is not None:
        return with_out(mul, out, (input, other), "mul", no_overlap="partial")
    try:  # (free until raised: a sparse operand goes to its sparse form)
        if isinstance(other, _SCALARS) and isinstance(input, Tensor):
            if input._data.dtype.kind in "fVc" or _scalar_dtype_ok(input, other):  # (inline)
                return _scalar_mul(input, value=other)
        if isinstance(other, Tensor) and other._data.size == 1 and \
                half_by_one_element(input, other):  # (torch's scalar in float32, unrounded)
            return mul(input.float(), other.float()).to(input.dtype)
        return _binary(_mul, input, other, "mul", number_pair=True)
    except SparseOperandError:
        return _sparse_binary("mul", input, other)


def _sparse_binary(name, a, b, alpha=1):
    return sparse_ops.binary(name, a, b, alpha)


def div(input, other, *, rounding_mode=None, out=None):
    """input / other (true division: integers give floats), or floor/trunc division.

    >>> import flowgrad as flow
    >>> flow.div(flow.tensor([7, -7]), 2)
    tensor([ 3.5000, -3.5000])
    >>> flow.div(flow.tensor([7, -7]), 2, rounding_mode="floor")
    tensor([ 3, -4])
    """
    if out is not None:
        return with_out(div, out, (input, other), "div", no_overlap="partial",
                        rounding_mode=rounding_mode)
    if rounding_mode is not None:
        return _rounded_div(input, other, rounding_mode)
    if isinstance(other, _SCALARS) and isinstance(input, Tensor):
        check_bool_uint64(input, other, "div")
        return _scalar_div(_float_of(input), value=other)
    if isinstance(other, Tensor) and other._data.size == 1 and \
            half_by_one_element(input, other):  # (torch's scalar in float32, unrounded)
        return div(input.float(), other.float()).to(input.dtype)
    return _div(*_promote_pair(input, other, "div", floating=True, number_pair=True))


def pow(input, exponent, *, out=None):
    """input ** exponent; either may be a Python number.

    >>> import flowgrad as flow
    >>> flow.pow(flow.tensor([1.0, 2.0]), 2), flow.pow(2, flow.tensor([1, 2]))
    (tensor([1., 4.]), tensor([2, 4]))
    """
    if out is not None:
        if isinstance(exponent, Tensor) and _is_one(input):  # (torch: out filled, unchecked)
            return with_out(lambda e: e.new_ones(e.shape, dtype=out.dtype), out, (exponent,),
                            "pow", no_overlap="partial")
        return with_out(pow, out, (input, exponent), "pow", no_overlap="partial")
    if isinstance(input, np.generic):  # (NumPy's: a number; np.bool_ a float, as torch)
        input = _dt.scalar_value(input)
    if isinstance(exponent, np.generic):
        exponent = _dt.scalar_value(exponent)
    if isinstance(exponent, _SCALARS) and isinstance(input, Tensor):
        if input._data.dtype.kind in "iub" and \
                not isinstance(exponent, (builtins.float, builtins.complex)) and exponent < 0:
            raise RuntimeError(f"pow: Integers to negative integer powers are not allowed "
                               f"(got a {input.dtype.name} tensor ** {exponent}); convert "
                               f"the tensor with .float() first")
        d = input._data.dtype  # torch's Scalar: 64-bit ints, and an integer or half tensor's
        # own dtype for the exponent (int8 ** 256 and half ** 70000.0 raise; float32 ** 1e300
        # is computed)
        if d.kind in "iu" and exponent.__class__ is builtins.int or d in HALF:
            exponent = checked_number("pow", exponent, d, "exponent")
        elif exponent.__class__ is builtins.int:
            exponent = checked_number("pow", exponent, _F64, "exponent")
        if _scalar_dtype_ok(input, exponent):
            return _scalar_pow(input, exponent=exponent)
        if isinstance(exponent, builtins.float):
            return _scalar_pow(_float_of(input), exponent=exponent)
    if isinstance(input, _SCALARS) and isinstance(exponent, Tensor) and \
            _dt.result_type(exponent, input).is_floating_point:
        d = _dt.result_type(exponent, input)
        return _scalar_rpow(exponent if exponent.dtype is d else exponent.to(d), base=input)
    if isinstance(input, Tensor) and isinstance(exponent, Tensor) and \
            input._data.dtype is exponent._data.dtype:
        a, b = input, exponent
    else:
        a, b = _promote_pair(input, exponent, "pow")
    _refuse_bool(a, "pow", b)
    if exponent.__class__ is Tensor and exponent._data.dtype.kind == "b" and \
            a.requires_grad:  # (torch's derivative computes exponent - 1: its backward raises)
        return without_derivative([_pow(a.detach(), b)], [a], "pow (a bool exponent: torch's "
                                  "derivative subtracts 1 from it)", "RuntimeError")[0]
    return _pow(a, b)


def _is_one(base):
    """Whether pow's base is a number equal to 1 (not True): torch's pow(Scalar, Tensor, out=)
    then fills out with ones of its dtype, so 1.0 ** a float tensor goes into an int out."""
    if isinstance(base, np.generic):
        base = _dt.scalar_value(base)
    return isinstance(base, (builtins.int, builtins.float, builtins.complex)) and \
        base.__class__ is not builtins.bool and base == 1


def neg(input):
    """-input."""
    if input._data.dtype.kind == "b":
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If "
                           "you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    return _neg(input)


def abs(input):
    """|input|; its gradient is sign(input) (0 at 0).

    >>> import flowgrad as flow
    >>> flow.abs(flow.tensor([-1.5, 2.0]))
    tensor([1.5000, 2.0000])
    """
    check_kernel_dtype(input, "abs_cpu", "fVciu")  # all but bool
    return _abs(input)


def abs_of_real(input):
    """abs for abs_ / absolute_: a complex tensor cannot hold its own real modulus (torch
    refuses rather than writing |z| + 0j)."""
    if input.is_complex():
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    return abs(input)


def sign(input):
    """-1, 0 or 1 by the sign of each element (no gradient)."""
    return _sign(input)


def exp(input):
    """e ** x, elementwise; integer inputs are computed in the default float dtype.

    >>> import flowgrad as flow
    >>> flow.exp(flow.tensor([0.0, 1.0]))
    tensor([1.0000, 2.7183])
    """
    return _exp(_float_of(input))


def log(input):
    """Natural logarithm, elementwise; integer inputs are computed in the default float dtype.

    >>> import flowgrad as flow
    >>> flow.log(flow.tensor([1.0, 100.0]))
    tensor([0.0000, 4.6052])
    """
    return _log(_float_of(input))


def sqrt(input):
    """Square root, elementwise; integer inputs are computed in the default float dtype.

    >>> import flowgrad as flow
    >>> flow.sqrt(flow.tensor([4, 2]))
    tensor([2.0000, 1.4142])
    """
    return _sqrt(_float_of(input))


def rsqrt(input):
    """1 / sqrt(x), elementwise; integer inputs are computed in the default float dtype."""
    return _rsqrt(_float_of(input))


def sin(input):
    """Sine, elementwise; integer inputs are computed in the default float dtype."""
    return _sin(_float_of(input))


def cos(input):
    """Cosine, elementwise; integer inputs are computed in the default float dtype."""
    return _cos(_float_of(input))


def tanh(input):
    """Hyperbolic tangent, elementwise; integer inputs are computed in the default float dtype."""
    return _tanh(_float_of(input))


def sigmoid(input):
    """1 / (1 + exp(-x)), elementwise; integer inputs are computed in the default float dtype."""
    return _sigmoid(_float_of(input))


def square(input):
    """x * x, elementwise (keeps integer dtypes, as torch.square)."""
    return pow(input, 2)


def reciprocal(input):
    """1 / x, elementwise; integer inputs are computed in the default float dtype."""
    return _reciprocal(_float_of(input))


from .selection import (  # noqa: E402,F401 - selection ops, re-exported: their module since it grew
    _where,
    clamp,
    clamp_tensor,
    clip,
    maximum,
    minimum,
    where,
)

subtract, multiply, divide, true_divide, negative = sub, mul, div, div, neg


def _inplace_binary(name, fn):
    """The in-place Tensor method `name` (`add_`) running `fn` in place on self."""
    def method(self, *args, **kwargs):
        return run_inplace(name, fn, self, *args, **kwargs)
    method.__name__ = name
    return method


# the Tensor methods and Python operators of this family: operators.py (it reads the names
# above, so it is imported last)
from . import operators  # noqa: E402,F401
