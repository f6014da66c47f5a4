"""More elementwise binary ops: rounded division, remainder/fmod, atan2, hypot, xlogy, lerp,
addcmul/addcdiv, fmax/fmin, nan_to_num, clamp with tensor bounds, bitwise ops, and the
in-place writers nn.init needs (fill_, zero_, copy_, uniform_, normal_).

>>> import flowgrad as flow
>>> flow.remainder(flow.tensor([-3, 5]), 3), flow.div(flow.tensor([-7.0]), 2, rounding_mode="trunc")
(tensor([0, 2]), tensor([-3.]))
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..autograd import interpreter as _interpreter
from ..autograd.grad_mode import is_grad_enabled
from ..autograd.inplace import (
    bump_version,
    check_capture,
    check_inplace,
    expand_write_error,
    memory_of,
    rebase,
    run_inplace,
    same_elements,
    self_overlapping,
    tell_written,
)
from ..device import array_module, new_array
from ..errors import (
    check_kernel_dtype,
    check_std,
    check_uniform_bounds,
    checked_number,
    fill_checks_overflow,
    fill_scalar,
    tensor_operand,
)
from ..random import resolve
from ..tensor import Tensor, tensor_method
from .broadcasting import broadcast_shapes
from .compare import promoted
from .complex import conj
from .creation import _normal, _uniform
from .division import _check_int_zero, _div_rounded, _refuse_bool, _rounded_div
from .elementwise import (
    _SCALARS,
    _inplace_binary,
    _promote_pair,
    _where,
    div,
    isfinite,
    isnan,
    log,
    logical_not,
    mul,
    pow,
    scale,
    sub,
    where,
)
from .halfprec import HALF, opmath, upcast
from .no_derivative import without_derivative
from .registry import op
from .rules import _grad_mul, unary
from .transfer import cast_values

__all__ = [
    "floor_divide", "remainder", "fmod", "atan2", "arctan2", "hypot", "xlogy", "lerp",
    "addcmul", "addcdiv", "fmax", "fmin", "nan_to_num", "clamp_min", "clamp_max",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
    "bitwise_right_shift"]


# ---- rounded division, remainder, fmod ------------------------------------------------------
@tensor_method()
def floor_divide(input, other):
    """input // other, rounding toward -inf (Python's rule). No gradient, as in torch: a
    backward reaching it raises (div(..., rounding_mode='floor') has torch's zero gradient).

    >>> import flowgrad as flow
    >>> flow.floor_divide(flow.tensor([7.0, -7.0]), 2)
    tensor([ 3., -4.])
    """
    return _floor_divide(input, other, "floor_divide")


def _floor_divide(input, other, what):
    return without_derivative([_rounded_div(input, other, "floor")], (input, other), what,
                              error="RuntimeError")[0]


# d/da is 1: only b's gradient reads the inputs
@op("remainder", jvp="diagonal", save="inputs", grad_reads=((), (0, 1)), layout="elementwise")
def _remainder(xp, a, b):
    with xp.errstate(divide="ignore", invalid="ignore"):
        r = xp.remainder(a, b)
    if r.dtype.kind in "fV":  # a zero keeps the dividend's sign, as torch's fmod-based kernel
        zero = r == 0  # (NumPy's takes the divisor's)
        if zero.any():
            r = xp.where(zero, xp.copysign(0, a).astype(r.dtype, copy=False), r)
    return r


@_remainder.grad
def remainder_backward(ctx, dy):
    a, b = ctx.inputs
    db = -dy * _div_rounded(a, b, mode="floor") if ctx.needs_input_grad[1] else None
    return dy, db


@op("fmod", jvp="diagonal", save="inputs", grad_reads=((), (0, 1)), layout="elementwise")
def _fmod(xp, a, b):
    with xp.errstate(divide="ignore", invalid="ignore"):
        return xp.fmod(a, b)


@_fmod.grad
def fmod_backward(ctx, dy):
    a, b = ctx.inputs
    db = -dy * _div_rounded(a, b, mode="trunc") if ctx.needs_input_grad[1] else None
    return dy, db


@tensor_method()
def remainder(input, other):
    """Python's modulus: the result takes the sign of the divisor."""
    a, b = _promote_pair(input, other, "remainder")
    _refuse_bool(a, "remainder_cpu", b)
    _check_int_zero(a, b, "remainder")
    return _remainder(a, b)


@tensor_method()
def fmod(input, other):
    """C's fmod: the result takes the sign of the dividend."""
    a, b = _promote_pair(input, other, "fmod")
    _refuse_bool(a, "fmod_cpu", b)
    _check_int_zero(a, b, "fmod")
    return _fmod(a, b)


# ---- atan2, hypot, xlogy ---------------------------------------------------------------------
@op("atan2", jvp="diagonal", save="inputs", layout="elementwise")
def _atan2(xp, a, b):
    return xp.arctan2(a, b)


@_atan2.grad
def atan2_backward(ctx, dy):
    # half precision in float32, rounded once, as torch's (float16's a * a + b * b of a, b
    # ~ 1e-3 lands in subnormals, or 0: an infinite gradient)
    low, (a, b, dy) = upcast(*ctx.inputs, dy)
    den = a * a + b * b
    # 0 at the origin, as torch's (not 0 / 0)
    g = dy * where(den == 0, 0.0, 1.0 / where(den == 0, 1.0, den))
    need = ctx.needs_input_grad
    return tuple(None if not n else r if low is None else r.to(low)
                 for n, r in zip(need, (g * b, -g * a)))


@op("hypot", jvp="diagonal", save="inputs outputs", grad_reads=((0,), (1,)), layout="elementwise")
def _hypot(xp, a, b):
    return xp.hypot(a, b)


@_hypot.grad
def hypot_backward(ctx, dy):
    (a, b), y = ctx.inputs, ctx.out
    need = ctx.needs_input_grad  # torch's dy * x / y: 0 / 0 = nan at the origin (0 where dy
    # is 0: a where's branch not taken stays 0)
    return (_grad_mul(dy, a / y) if need[0] else None), (_grad_mul(dy, b / y) if need[1]
                                                         else None)


@op("xlogy", jvp="diagonal", save="inputs", layout="elementwise")
def _xlogy(xp, x, y):
    with xp.errstate(divide="ignore", invalid="ignore"):
        r = x * xp.log(y)
    return xp.where((x == 0) & ~xp.isnan(y), xp.zeros((), r.dtype), r)


@_xlogy.grad
def xlogy_backward(ctx, dy):
    # half precision in float32, rounded once: float16's x / y overflowed where torch's
    # dy * x / y does not (x = 0.37, y = 2.6e-6)
    low, (x, y, dy) = upcast(*ctx.inputs, dy)
    need = ctx.needs_input_grad
    # log(y), also at x == 0 (x log y is x-linear); 0 only where x == 0 and y <= 0, as torch
    dx = _grad_mul(dy, where((x == 0) & (y <= 0), 0.0, log(y))) if need[0] else None
    dy_ = _grad_mul(dy, x / y) if need[1] else None  # nan at x == y == 0, as torch
    return tuple(r if r is None or low is None else r.to(low) for r in (dx, dy_))


def _float_pair(a, b, name):
    return _promote_pair(a, b, name, floating=True)


@tensor_method()
@tensor_operand()
def atan2(input, other):
    """Angle of (other, input) in radians, in [-pi, pi]."""
    return _atan2(*_float_pair(input, other, "atan2"))


@tensor_method()
@tensor_operand()
def hypot(input, other):
    """sqrt(input**2 + other**2) without overflow (floating tensors only, as torch)."""
    a, b = _promote_pair(input, other, "hypot")
    if a._data.dtype.kind not in "fV":
        raise NotImplementedError(f"hypot: not implemented for {a.dtype.name} (\"hypot_cpu\" "
                                  f"not implemented for integer types); convert with .float()")
    return _hypot(a, b)


@tensor_method()
def xlogy(input, other):
    """input * log(other), and 0 where input == 0 (unless other is nan)."""
    return _xlogy(*_float_pair(input, other, "xlogy"))


arctan2 = atan2


# dtype categories, for a 0-d operand that promotes (bool < integer < float < complex)
_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "V": 2, "c": 3}


# ---- lerp, addcmul, addcdiv (composed, but for lerp's tensor weight) ---------------------
# torch's kernel: a weight under 0.5 in magnitude goes from input, another from end (lerp(a,
# b, 1) is b itself); an op of its own, so its result is laid out as torch's iterator lays out
# its three operands, and its gradients are torch's formulas
@op("lerp", save="inputs", complex=True, grad_reads=((2,), (2,), (0, 1)), layout="elementwise")
def _lerp(xp, a, b, w):
    return xp.where(xp.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


@_lerp.grad
def lerp_backward(ctx, dy):
    a, b, w = ctx.inputs
    need = ctx.needs_input_grad
    return (dy * conj(1 - w) if need[0] else None, dy * conj(w) if need[1] else None,
            dy * conj(b - a) if need[2] else None)


@tensor_method()
def lerp(input, end, weight):
    """input + weight * (end - input); weight a number or a tensor. As torch, a weight of
    magnitude 0.5 or more computes end - (end - input) * (1 - weight): lerp(a, b, 1) is b
    itself, and an infinite input gives inf, not nan.

    >>> import flowgrad as flow
    >>> flow.lerp(flow.tensor([0.0, 10.0]), flow.tensor([10.0, 20.0]), 0.25)
    tensor([ 2.5000, 12.5000])
    """
    if isinstance(weight, Tensor) and weight._data.ndim == 0 and isinstance(end, Tensor) and \
            end._data.dtype == input._data.dtype and (
            _KIND_RANK[weight._data.dtype.kind] > _KIND_RANK[input._data.dtype.kind]
            or not input._data.ndim and not end._data.ndim):
        # a 0-d weight of a higher category (float for integers, complex for reals), or of a
        # wider dtype where all three are 0-d, promotes the operands, as torch's type
        # promotion (cast to input's dtype, a complex weight lost its imaginary part;
        # integers were refused; three 0-d float32/float32/float64 gave float32)
        common = _dt.result_type(input, end, weight)
        input, end, weight = input.to(common), end.to(common), weight.to(common)
    if isinstance(weight, Tensor) and weight._data.ndim == 0 and \
            weight._data.dtype != input._data.dtype:
        # torch binds a 0-d tensor of another dtype to its Scalar weight: a number, read in
        # the float it computes in (not differentiated)
        weight = weight.detach().to(_dt.from_numpy_dtype(opmath(input._data.dtype))
                                    if input._data.dtype.kind in "fV" else input.dtype)
    for name, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t._data.dtype != input._data.dtype and \
                not (t is weight and input._data.dtype in HALF and t._data.ndim == 0):
            raise RuntimeError(f"lerp: expected dtype {input.dtype.name} for `{name}` but got "
                               f"dtype {t.dtype.name}; convert it with .to(input.dtype)")
    check_kernel_dtype(input, "lerp_kernel_tensor" if isinstance(weight, Tensor)
                    else "lerp_kernel_scalar", "fVc")
    if isinstance(weight, builtins.complex):  # torch casts it to input's dtype
        weight = fill_scalar("lerp", weight, input._data.dtype)
    elif not isinstance(weight, Tensor):  # torch reads it in the float it computes in
        weight = checked_number("lerp", weight, opmath(input._data.dtype), "weight")
    if input._data.dtype in HALF:  # computed in float32 and rounded once, as torch's kernel
        weight = weight.float() if isinstance(weight, Tensor) else weight
        return lerp(input.float(), end.float(), weight).to(input.dtype)
    if isinstance(weight, Tensor):
        return _lerp(input, end, weight)
    # (a number weight scales unsaved: torch's lerp keeps it as a Scalar)
    if abs(weight) < 0.5:
        return input + scale(end - input, value=weight)
    if input._data.dtype.kind == "c":
        return end - scale(end - input, value=1 - weight)
    # 1 - weight in the precision torch computes it in (float for float32 and half inputs)
    real = opmath(input._data.dtype).type
    return end - scale(end - input, value=float(real(1) - real(weight)))


@tensor_method()
def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2. With integer tensors torch casts `value` to their
    integer type first (0.5 becomes 0), and so does this.

    >>> import flowgrad as flow
    >>> t = flow.tensor([1, 2, 4])
    >>> flow.addcmul(t, t, t, value=2), flow.addcmul(t.float(), t, t, value=0.5)
    (tensor([ 3, 10, 36]), tensor([ 1.5000,  4.0000, 12.0000]))
    """
    if all(isinstance(t, Tensor) and t._data.dtype.kind == "b" for t in (input, tensor1, tensor2)):
        raise NotImplementedError('"addcmul_cpu_out" not implemented for \'Bool\'; convert the '
                                  "tensors with .int() first")
    d = _dt.result_type(input, tensor1, tensor2)  # torch computes all of it in this dtype
    if d.np in HALF:  # computed in float32 (value unrounded) and rounded once, as torch's
        return addcmul(*(_in_dtype(t, d, _dt.float32) for t in (input, tensor1, tensor2)),
                       value=value).to(d)
    tensor1, tensor2 = _in_dtype(tensor1, d), _in_dtype(tensor2, d)
    if isinstance(value, builtins.complex):
        value = fill_scalar("addcmul", value, d.np)
    else:  # torch's Scalar conversion to the result's dtype (256 does not fit int8, nor -1.5
        # uint8), then value.to<integer type>() (0.5 is 0)
        value = checked_number("addcmul", value, opmath(d.np) if d.np in HALF else d.np)
        if isinstance(value, float) and d.category < 2:
            value = int(value)
    prod = tensor1 * tensor2
    return input + (prod if value == 1 else prod * value)


def _in_dtype(t, d, compute=None):
    """An addcmul/addcdiv operand cast to the dtype torch's kernel computes all three in (a
    product of two int32 tensors added to a float one must not wrap in int32 first); a number
    as a 0-d tensor of it. `compute`: then cast to that (float32 for half precision: int32's
    2**31 - 1 is inf in float16 first, as torch's)."""
    if not isinstance(t, Tensor):
        t = Tensor._wrap(new_array(None, fill_scalar("addcmul", t, d.np), d.np))  # (0-d)
    t = promoted(t, d) if t._data.dtype != d.np else t
    return t if compute is None else _in_dtype(t, compute)


@tensor_method()
def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2 (true division; integer tensors are refused)."""
    if tensor1._data.dtype.kind in "iub" and tensor2._data.dtype.kind in "iub":
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported (got tensor1 "
            f"{tensor1.dtype.name} and tensor2 {tensor2.dtype.name}); use "
            "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) instead")
    d = _dt.result_type(input, tensor1, tensor2)  # (floating: integer pairs refused above)
    if d.category < 2:  # (an integer by a 0-d float tensor: true division's float)
        d = _dt.get_default_dtype()
    if d.np in HALF:  # (in float32, rounded once, as addcmul)
        return addcdiv(*(_in_dtype(t, d, _dt.float32) for t in (input, tensor1, tensor2)),
                       value=value).to(d)
    tensor1, tensor2 = _in_dtype(tensor1, d), _in_dtype(tensor2, d)
    if isinstance(value, builtins.complex):
        value = fill_scalar("addcdiv", value, d.np)
    else:  # (half precision: read in float32)
        value = checked_number("addcdiv", value, opmath(d.np) if d.np in HALF else d.np)
    if value == 1:
        return input + tensor1 / tensor2
    # torch's kernel scales before it divides: (value * tensor1) / tensor2
    return input + tensor1 * value / tensor2


# ---- fmax / fmin: nan-ignoring maximum / minimum ---------------------------------------
@op("fmax", jvp="diagonal", save="inputs", layout="elementwise")
def _fmax(xp, a, b):
    return xp.fmax(a, b)


@_fmax.grad
def fmax_backward(ctx, dy):
    a, b = ctx.inputs
    return _pick_grad(dy, (a >= b) | isnan(b))  # torch: ties go to the first input


@op("fmin", jvp="diagonal", save="inputs", layout="elementwise")
def _fmin(xp, a, b):
    return xp.fmin(a, b)


@_fmin.grad
def fmin_backward(ctx, dy):
    a, b = ctx.inputs
    return _pick_grad(dy, (a <= b) | isnan(b))


def _pick_grad(dy, first):
    zero = dy.new_zeros(())
    return _where_op(first, dy, zero), _where_op(logical_not(first), dy, zero)


def _where_op(cond, a, b):
    return _where(cond, a, b)


@tensor_method()
@tensor_operand()
def fmax(input, other):
    """Elementwise max that ignores nan (nan only where both are nan)."""
    return _fmax(*_promote_pair(input, other, "fmax"))


@tensor_method()
@tensor_operand()
def fmin(input, other):
    """Elementwise min that ignores nan."""
    return _fmin(*_promote_pair(input, other, "fmin"))


# ---- nan_to_num ---------------------------------------------------------------------------
def _finfo(dtype):
    if dtype.kind == "V":
        import ml_dtypes

        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


def _nan_to_num_kernel(xp, x, *, nan, posinf, neginf):
    if x.dtype.kind == "c":  # each part on its own, as torch
        y = xp.empty_like(x)
        y.real, y.imag = (_nan_to_num_kernel(xp, p, nan=nan, posinf=posinf, neginf=neginf)
                          for p in (x.real, x.imag))
        return y
    fi = _finfo(x.dtype)
    hi = fi.max if posinf is None else posinf
    lo = fi.min if neginf is None else neginf
    # each mask from the input: a nan replaced by inf (nan=float("inf")) stays inf, as torch's
    y = xp.where(x == xp.inf, xp.asarray(hi, x.dtype), x)
    y = xp.where(x == -xp.inf, xp.asarray(lo, x.dtype), y)
    return xp.where(xp.isnan(x), xp.asarray(nan, x.dtype), y)


# a product, as torch's (a nan grad at an inf input stays nan)
_nan_to_num = unary("nan_to_num", _nan_to_num_kernel, d_of_x=lambda x: isfinite(x).to(x.dtype),
                    complex=True)


@tensor_method()
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """Replace nan, +inf and -inf (by default with 0 and the dtype's largest/lowest values).

    >>> import flowgrad as flow
    >>> flow.nan_to_num(flow.tensor([float("nan"), float("inf"), -1.0]), posinf=100.0)
    tensor([  0., 100.,  -1.])
    """
    for i, (arg, v) in enumerate((("nan", nan), ("posinf", posinf), ("neginf", neginf))):
        if isinstance(v, Tensor) and (v._data.ndim or v.requires_grad):  # (torch's parser)
            raise TypeError(f"nan_to_num(): argument '{arg}' (position {i + 2}) must be "
                            f"float, not Tensor")
    if input._data.dtype.kind not in "fVc":
        return input.clone()
    # torch takes them as doubles (2**200 is a number like any other; NumPy's bfloat16 would
    # refuse the int)
    nan, posinf, neginf = (v if v is None else float(v) for v in (nan, posinf, neginf))
    nan = 0.0 if nan is None else nan  # (torch's None for nan is its default, 0)
    return _nan_to_num(input, nan=nan, posinf=posinf, neginf=neginf)


@tensor_method()
def clamp_min(input, min):
    """max(input, min)."""
    return input.clamp(min=min)


@tensor_method()
def clamp_max(input, max):
    """min(input, max)."""
    return input.clamp(max=max)


# ---- bitwise ops (integer and bool tensors; no gradient) -----------------------------------
_TORCH_NAMES = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
                "float64": "Double"}


def _bitwise_check(name, *xs):
    for x in xs:
        if isinstance(x, Tensor) and x._data.dtype.kind in "fV" or \
                isinstance(x, (builtins.float, np.floating, np.bool_)):  # (np.bool_: a float)
            d = x.dtype.name if isinstance(x, Tensor) else "float"
            raise NotImplementedError(
                f"{name}: not implemented for {d} (\"{name}_cpu\" not implemented for "
                f"'{_TORCH_NAMES.get(d, 'Float')}'); bitwise ops take integer or bool tensors, "
                f"got {', '.join(_describe(v) for v in xs)}")


def _describe(x):
    return x.dtype.name if isinstance(x, Tensor) else type(x).__name__


def _bitwise(name, fn, shift=False):
    k = op(name, differentiable=False, layout="elementwise")(fn)

    def public(input, other):
        # torch's order: two numbers are a TypeError, shapes that do not broadcast a
        # RuntimeError, before the dtype's NotImplementedError
        a, b = _promote_pair(input, other, name)
        broadcast_shapes(a.shape, b.shape)
        _bitwise_check(name, input, other)
        if shift and a._data.dtype.kind == "b":  # (bool << int promotes to int64 first)
            raise NotImplementedError(
                f"\"{'l' if 'left' in name else 'r'}shift_cpu\" not implemented for 'Bool': "
                f"{name} of two bool operands; convert one with .long() first")
        return k(a, b)
    public.__name__ = public.__qualname__ = name
    public.__doc__ = f"Elementwise {name.replace('_', ' ')} of integer or bool tensors."
    return tensor_method()(public)


bitwise_and = _bitwise("bitwise_and", lambda xp, a, b: xp.bitwise_and(a, b))
bitwise_or = _bitwise("bitwise_or", lambda xp, a, b: xp.bitwise_or(a, b))
bitwise_xor = _bitwise("bitwise_xor", lambda xp, a, b: xp.bitwise_xor(a, b))
bitwise_left_shift = _bitwise("bitwise_left_shift",
                              lambda xp, a, b: xp.left_shift(a, b), shift=True)
bitwise_right_shift = _bitwise("bitwise_right_shift",
                               lambda xp, a, b: xp.right_shift(a, b), shift=True)


@op("bitwise_not", differentiable=False)
def _bitwise_not(xp, x):
    return xp.invert(x)


@tensor_method()
def bitwise_not(input):
    """~input: bit inversion for integers, logical not for bools."""
    _bitwise_check("bitwise_not", input)
    return _bitwise_not(input)


def _invert(self):
    if self._data.dtype.kind in "fV":
        raise TypeError(f"~ (operator.invert) is only implemented on integer and Boolean-type "
                        f"tensors, got {self.dtype.name}")
    return _bitwise_not(self)


def _swap(fn):
    return lambda self, other: fn(other, self)


Tensor.__and__, Tensor.__rand__ = bitwise_and, _swap(bitwise_and)
Tensor.__or__, Tensor.__ror__ = bitwise_or, _swap(bitwise_or)
Tensor.__xor__, Tensor.__rxor__ = bitwise_xor, _swap(bitwise_xor)
Tensor.__lshift__, Tensor.__rlshift__ = bitwise_left_shift, _swap(bitwise_left_shift)
Tensor.__rshift__, Tensor.__rrshift__ = bitwise_right_shift, _swap(bitwise_right_shift)
Tensor.__invert__ = _invert
Tensor.__floordiv__, Tensor.__rfloordiv__ = floor_divide, _swap(floor_divide)
Tensor.__mod__, Tensor.__rmod__ = remainder, _swap(remainder)
for _alias, _fn in (("arctan2", atan2), ("true_divide", div)):
    tensor_method(_alias)(_fn)


# ---- in-place writers: fill_, zero_, copy_, uniform_, normal_ ----------------------------
@op("fill", jvp="linear")
def _fill(xp, x, value):
    return cast_values(xp, xp.broadcast_to(value, x.shape), x.dtype)


@_fill.grad
def fill_backward(ctx, dy):
    # the old value is overwritten: no gradient to it; the source gets dy (un-broadcast)
    return None, (dy if ctx.needs_input_grad[1] else None)


def _filled(x, value):
    return _fill(x, value)


def _value_tensor(target, value, name):
    if isinstance(value, Tensor):  # (torch casts a 0-d tensor unchecked here)
        return value
    if not isinstance(value, _SCALARS + (builtins.complex,)) and \
            not isinstance(value, np.generic):
        raise TypeError(f"{name}: expected a number or a 0-dim tensor as the value, got "
                        f"{type(value).__name__}")
    dtype = target._data.dtype
    value = fill_scalar(name, value, dtype, name == "copy_" or fill_checks_overflow(
        dtype, target._data.size))
    return Tensor._wrap(array_module(target._data).asarray(value, dtype))


def _fill_value(target, value, name):
    """fill's and fill_'s value as a tensor: a number, or a 0-d tensor (copy_ takes any)."""
    if isinstance(value, Tensor) and value._data.ndim:
        raise RuntimeError(f"{name} only supports 0-dimension value tensor but got tensor with "
                           f"{value._data.ndim} dimensions (shape {tuple(value.shape)})")
    return _value_tensor(target, value, name)


def fill_(self, value):
    """Fill with `value` (a number or a 0-dim tensor, whose gradient is then recorded)."""
    value_tensor = _fill_value(self, value, "fill_")
    if isinstance(value, Tensor) and self_overlapping(memory_of(self)):
        # (torch's fill_ of a tensor is a copy_, which refuses such a target; of a number, not)
        raise expand_write_error("fill_", self.shape, "fill with a number (value.item()), or "
                                 "call .clone() before the in-place operation")
    return run_inplace("fill_", _filled, self, value_tensor)


def zero_(self):
    """Fill with zeros."""
    zero = array_module(self._data).zeros((), self._data.dtype)
    return run_inplace("zero_", _filled, self, Tensor._wrap(zero))


def copy_(self, other=None, non_blocking=False, *, src=None):
    """Copy `other` (broadcast to this shape, cast to this dtype) into this tensor. `other` is
    the keyword torch's Tensor.copy_ binds; `src`, the name in its docs and schema, works too."""
    if (other is None) == (src is None):
        raise TypeError("copy_() takes the source once: as `other` (positional or keyword) "
                        "or as `src`" if src is not None else
                        "copy_() missing 1 required positional argument: 'other'")
    src = other if src is None else src
    if isinstance(src, np.ndarray) or isinstance(src, _SCALARS + (builtins.complex,)):
        # OneFlow's Tensor.copy_ takes a NumPy array too; a number is torch's wrapped 0-d
        # tensor (int64, float64, complex128), cast unchecked as any source (300 into int8
        # is 44, as torch's)
        src = Tensor._wrap(array_module(self._data).asarray(src))  # onto self's device
    src = _value_tensor(self, src, "copy_")
    if _same_data(src, self) and (
            not (is_grad_enabled() and (self.requires_grad or src.requires_grad))
            or self_overlapping(memory_of(self))) and not (
            self._view is not None and _tangents_follow_views()
            and not self_overlapping(memory_of(self))):
        # torch's copy_ of itself (or of a view with its very elements) writes nothing, but
        # counts as a write; recorded (below), it starts a new version of the history, except
        # into an expand (where flowgrad refuses recorded writes that torch would only refuse
        # in backward, and forward AD's write through the view too: the tangent of an
        # expand's elements is its base's already); its tangent (forward AD) is src's, as
        # torch's. A leaf (or a view of
        # one) that requires grad is refused all the same, and inside func transforms a
        # captured tensor: torch checks the target first
        check_inplace("copy_", self)
        bump_version(self)
        if is_grad_enabled() and (self.requires_grad or src.requires_grad):
            # an expand (or an alias of one: `x.expand(..).data`) copied from its own
            # elements: torch records the copy (through a view, a CopySlices whose backward
            # refuses the shared elements, as rebase's); the values stay as they are
            rebase(self, lambda t: _filled(t, src))
        tell_written(self, src)
        return self
    try:
        shape = np.broadcast_shapes(src._data.shape, self._data.shape)
    except ValueError:
        shape = None
    if shape != self._data.shape:
        raise RuntimeError(f"copy_: the source of shape {tuple(src.shape)} is not broadcastable "
                           f"to the destination of shape {tuple(self.shape)}")
    return run_inplace("copy_", _filled, self, src)


def _tangents_follow_views():
    """Whether forward AD is on (its interpreter follows writes through views): a copy of a
    view's own elements then writes as any copy, so the view's base takes src's tangent too
    (torch's; the shortcut gave the view alone a tangent)."""
    current = _interpreter.current
    return current is not _interpreter.AutogradInterpreter and \
        getattr(current, "written_view", None) is not None


def _same_data(a, b):
    """Whether tensors a and b are the same elements of one dtype: one tensor, or views of
    them (torch's copy_ returns early for those): every stride equal, size-1 dims' too, as
    torch's early return compares them (else its loop's overlap checks decide)."""
    x, y = memory_of(a), memory_of(b)  # (under vmap, the examples)
    return a is b or type(x) is type(y) and x.dtype == y.dtype and same_elements(x, y, True)


def _write_sample(self, name, random_op, generator, kinds="fV", refusal=RuntimeError, **attrs):
    """Fill self with a sample of `random_op` (attributes `attrs`, self's shape and dtype):
    drawn inside an op, so an nn.Graph plan draws fresh numbers on every run (drawn by
    Python here, it froze them). `kinds`: the dtype kinds the sample may have (another is
    torch's `refusal`)."""
    check_capture(name, self)  # (before the draw, as torch's: a refused write draws nothing)
    if self._data.dtype.kind not in kinds:
        if self.requires_grad and self._grad_fn is None and is_grad_enabled():
            refusal = RuntimeError  # (torch's autograd check comes before its kernel's)
            raise refusal(f"{name}: a leaf tensor that requires grad (shape "
                          f"{tuple(self.shape)}) is being used in an in-place operation")
        raise refusal(f"{name}: expects a floating point tensor, got {self.dtype.name}; "
                      f"convert it with .float() first")
    sample = random_op(shape=self._data.shape, dtype=self._data.dtype,
                       generator=resolve(generator), **attrs)
    if array_module(sample._data) is not array_module(self._data):  # the host's draw, moved
        sample = Tensor._wrap(array_module(self._data).asarray(sample._data))
    return run_inplace(name, _filled, self, sample)


def uniform_(self, a=0.0, b=1.0, *, generator=None, **kwargs):
    """Fill with samples from U[a, b); torch's keywords `from` and `to` (`from` is a Python
    keyword, hence **kwargs) name a and b."""
    if kwargs:
        a, b = _uniform_keywords(a, b, kwargs)
    if self._data.dtype.kind not in "fVc":  # (torch's dtype dispatch, before the bounds)
        raise NotImplementedError(f"uniform_: expects a floating point tensor, got "
                                  f"{self.dtype.name}; convert it with .float() first")
    check_uniform_bounds("uniform_", self.dtype, a, b)
    return _write_sample(self, "uniform_", _uniform, generator, low=float(a), high=float(b),
                         refusal=NotImplementedError)  # (torch's dtype dispatch refuses)


def _uniform_keywords(a, b, kwargs):
    unknown = set(kwargs) - {"from", "to"}
    if unknown:
        raise TypeError(f"uniform_() got an unexpected keyword argument {sorted(unknown)[0]!r}; "
                        f"it takes from, to and generator")
    return kwargs.get("from", a), kwargs.get("to", b)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with samples from N(mean, std**2)."""
    check_std(std, "normal_")
    kinds = "fV" if self.numel() else "fViub"  # (torch's kernel checks the dtype, on elements)
    return _write_sample(self, "normal_", _normal, generator, mean=float(mean), std=float(std),
                         kinds=kinds, refusal=NotImplementedError)


Tensor.fill_, Tensor.zero_, Tensor.copy_ = fill_, zero_, copy_
Tensor.uniform_, Tensor.normal_ = uniform_, normal_


_CHECKED = {"floor_divide_", "remainder_", "fmod_", "bitwise_and_", "bitwise_or_",
            "bitwise_xor_", "bitwise_left_shift_", "bitwise_right_shift_", "pow_"}


_CHECKED_NUMBERS = _SCALARS + (builtins.complex, np.number, np.bool_)  # (NumPy's: numbers)


def _checked_inplace(name, fn):
    """The in-place `name` checking, as torch's TensorIterator does before any kernel runs,
    the broadcast shape and then the promoted result type against self: `int8 &= float32
    tensor` is torch's cast error, not bitwise_and's "not implemented for 'Float'"."""
    method = _inplace_binary(name, fn)

    def checked(self, *args, **kwargs):
        other = args[0] if args else kwargs.get("other", kwargs.get("exponent"))
        if isinstance(other, Tensor) or isinstance(other, _CHECKED_NUMBERS):
            shape = tuple(self.shape)
            full = tuple(broadcast_shapes(shape, other.shape if isinstance(other, Tensor)
                                          else ()))
            if full != shape:
                raise RuntimeError(f"{name}: output with shape {shape} doesn't match the "
                                   f"broadcast shape {full}; in-place ops cannot change a "
                                   f"tensor's shape")
            result = _dt.result_type(self, other)
            if not _dt.can_cast(result, self.dtype):
                raise RuntimeError(f"{name}: result type {result.name} can't be cast to the "
                                   f"desired output type {self.dtype.name}; use the out-of-place "
                                   f"op, or convert the tensor first")
        return method(self, *args, **kwargs)
    checked.__name__ = name
    return checked


for _name, _fn in (("floor_divide_", lambda input, other: _floor_divide(input, other,
                                                                    "floor_divide_")),
                   ("remainder_", remainder),
                   ("fmod_", fmod), ("atan2_", atan2), ("hypot_", hypot), ("xlogy_", xlogy),
                   ("lerp_", lerp), ("addcmul_", addcmul), ("addcdiv_", addcdiv),
                   ("nan_to_num_", nan_to_num), ("clamp_min_", clamp_min),
                   ("clamp_max_", clamp_max), ("bitwise_and_", bitwise_and),
                   ("bitwise_or_", bitwise_or), ("bitwise_xor_", bitwise_xor),
                   ("bitwise_not_", bitwise_not),
                   ("true_divide_", div), ("subtract_", sub), ("multiply_", mul),
                   ("divide_", div), ("arctan2_", atan2),
                   ("bitwise_left_shift_", bitwise_left_shift),
                   ("bitwise_right_shift_", bitwise_right_shift), ("pow_", pow)):
    setattr(Tensor, _name, (_checked_inplace if _name in _CHECKED else _inplace_binary)(
        _name, _fn))
_nan_to_num_in_place = Tensor.nan_to_num_


def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
    """nan_to_num in place; of an integer or bool tensor torch's copy of it into itself,
    which writes nothing (an expand's shared elements too)."""
    if self._data.dtype.kind not in "fVc":
        return self.copy_(self)
    return _nan_to_num_in_place(self, nan, posinf, neginf)


Tensor.nan_to_num_ = nan_to_num_
Tensor.__iand__, Tensor.__ior__ = Tensor.bitwise_and_, Tensor.bitwise_or_
Tensor.__ixor__ = Tensor.bitwise_xor_
Tensor.__ifloordiv__, Tensor.__imod__ = Tensor.floor_divide_, Tensor.remainder_
