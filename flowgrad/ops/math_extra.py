"""More elementwise math, torch's spellings: absolute, deg2rad/rad2deg, copysign, signbit,
float_power, frexp, ldexp, logaddexp/logaddexp2, nextafter, heaviside, gcd/lcm,
isposinf/isneginf, the long comparison names (greater, less_equal, ...), rsub and the
is_nonzero/is_same_size/is_signed predicates.

Most are compositions of existing ops, so their gradients (to every order) come from those
ops' rules; the kernels here are the value-only ones (bit-level tests, integer arithmetic).

>>> import flowgrad as flow
>>> flow.logaddexp(flow.tensor([0.0]), flow.tensor([0.0]))
tensor([0.6931])
"""
from __future__ import annotations

import math

from .. import dtypes as _dt
from .. import return_types
from ..argument_errors import type_name
from ..device import constant
from ..errors import expect_tensor, tensor_operand
from ..tensor import Tensor, tensor_method
from .broadcasting import broadcast_shapes
from .creation import scalar_tensor, zeros_like
from .elementwise import (
    _float_of,
    _inplace_binary,
    _promote_pair,
    abs,
    abs_of_real,
    eq,
    exp,
    ge,
    gt,
    le,
    lt,
    ne,
    pow,
    sub,
    where,
)
from .halfprec import in_float32
from .math import log1p
from .no_derivative import refuse_forward_rule
from .out_arg import warn_resized
from .registry import op

__all__ = ["absolute", "deg2rad", "rad2deg", "copysign", "signbit", "float_power", "frexp",
           "ldexp", "logaddexp", "logaddexp2", "nextafter", "heaviside", "gcd", "lcm",
           "isposinf", "isneginf", "greater", "greater_equal", "less", "less_equal",
           "not_equal", "rsub", "is_nonzero", "is_same_size", "is_signed"]

greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


@tensor_method()
def absolute(input):
    """|input|, torch's long name for abs.

    >>> import flowgrad as flow
    >>> flow.absolute(flow.tensor([-1.5, 2.0]))
    tensor([1.5000, 2.0000])
    """
    return abs(input)


@tensor_method()
def deg2rad(input):
    """Degrees to radians (integers promote to the default float dtype).

    >>> import flowgrad as flow
    >>> flow.deg2rad(flow.tensor([180.0]))
    tensor([3.1416])
    """
    _refuse_complex(input, "deg2rad")
    return _float_of(input) * (math.pi / 180.0)


@tensor_method()
def rad2deg(input):
    """Radians to degrees.

    >>> import flowgrad as flow
    >>> flow.rad2deg(flow.tensor([3.1415927]))
    tensor([180.])
    """
    _refuse_complex(input, "rad2deg")
    return _float_of(input) * (180.0 / math.pi)


def _refuse_complex(input, name):
    """torch's deg2rad/rad2deg refuse a complex tensor (no complex angle in degrees), and
    isposinf/isneginf (no order of complex numbers, so no sign of their infinity)."""
    if isinstance(input, Tensor) and input.is_complex():
        if name.startswith("is"):
            raise RuntimeError(f"{name} does not support complex inputs (input of dtype "
                               f"{input.dtype}); test .real and .imag, or use isinf")
        raise RuntimeError(f"{name} is not supported for complex tensors.")


# ---- sign-bit functions ----------------------------------------------------------------------
@op("signbit", differentiable=False)
def _signbit(xp, x):
    return xp.signbit(x)


@tensor_method()
def signbit(input):
    """True where the sign bit is set (-0.0 included).

    >>> import flowgrad as flow
    >>> flow.signbit(flow.tensor([-0.0, 0.0, -2.0]))
    tensor([ True, False,  True])
    """
    return _signbit(input)


@tensor_method()
def copysign(input, other):
    """|input| with the sign bit of other; the gradient reaches input only, as torch's
    (other's is zero).

    >>> import flowgrad as flow
    >>> flow.copysign(flow.tensor([1.0, -2.0]), flow.tensor([-0.0, 3.0]))
    tensor([-1.,  2.])
    """
    return _copysign(*_promote_pair(input, other, "copysign", floating=True))


@op("copysign", jvp="diagonal", save="inputs outputs", grad_reads=((0,), ()),
    layout="elementwise")  # (not other)
def _copysign(xp, a, b):
    return xp.copysign(a, b)


@_copysign.grad
def copysign_backward(ctx, dy):
    # torch's copysign_tensor_self_backward: dy * (y / x), 0 where x == 0; so nan where x is
    # nan or +-inf (inf / inf), as torch. other's gradient is zero
    a, y = ctx.inputs[0], ctx.out
    need = ctx.needs_input_grad
    return (dy * where(a == 0, 0.0, y / a) if need[0] else None), \
        (zeros_like(dy) if need[1] else None)


# ---- powers of two, float_power --------------------------------------------------------------
@tensor_method()
def float_power(input, exponent):
    """input ** exponent computed in float64 (complex128 for complex operands).

    >>> import flowgrad as flow
    >>> flow.float_power(flow.tensor([2, 3]), 2)
    tensor([4., 9.], dtype=flowgrad.float64)
    """
    def wide(t):
        if not isinstance(t, Tensor):
            return t
        return t.to(_dt.complex128 if t.is_complex() else _dt.float64)
    return pow(wide(input), wide(exponent))


def _float_power_(self, exponent):
    need = _dt.complex128 if self.is_complex() or isinstance(exponent, complex) or \
        isinstance(exponent, Tensor) and exponent.is_complex() else _dt.float64
    if self.dtype is not need:  # (complex64 too: torch's result is complex128)
        raise RuntimeError(f"float_power_(): the base given to float_power_ has dtype "
                           f"{self.dtype.name} but the operation's result requires dtype "
                           f"{need.name}; call .to({need.name}) first or use float_power")
    if isinstance(exponent, Tensor):  # (a complex exponent keeps its imaginary part)
        exponent = exponent.to(_dt.complex128 if exponent.is_complex() else _dt.float64)
    return Tensor.pow_(self, exponent)


_frexp_type = return_types.frexp


@op("frexp_exponent", differentiable=False)
def _frexp_exponent(xp, x):
    return xp.frexp(x)[1].astype(xp.int32)


@tensor_method()
def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2 ** exponent, |mantissa| in [0.5, 1);
    the mantissa is input * 2 ** -exponent, so its gradient is 2 ** -exponent.

    >>> import flowgrad as flow
    >>> flow.frexp(flow.tensor([8.0, 0.75]))
    frexp(mantissa=tensor([0.5000, 0.7500]), exponent=tensor([4, 0], dtype=flowgrad.int32))
    """
    if not input.is_floating_point():
        raise RuntimeError(f"torch.frexp() only supports floating-point dtypes, got "
                           f"{input.dtype.name}; convert with .float()")
    e = _frexp_exponent(input)
    # 2 ** -e in two halves: for a subnormal input 2 ** -e itself overflows the dtype
    # (2 ** 24 in float16, 2 ** 149 in float32) and the mantissa came out inf
    scale = -e.to(input.dtype)
    half = (scale / 2).floor()
    return _frexp_type(input * pow(2.0, half) * pow(2.0, scale - half), e)


@tensor_method()
@tensor_operand()
def ldexp(input, other):
    """input * 2 ** other (a float result).

    >>> import flowgrad as flow
    >>> flow.ldexp(flow.tensor([1.0, 3.0]), flow.tensor([2, -1]))
    tensor([4.0000, 1.5000])
    """
    result = _ldexp(input, other)
    if isinstance(other, Tensor) and other._data.dtype.kind in "iu" and \
            input._data.dtype.kind in "fV" and tuple(result.shape) != tuple(input.shape) and \
            input.numel():
        # torch's kernel writes into an empty_like(input), resized (with its deprecation
        # warning) to the broadcast shape
        warn_resized(input.shape, result.shape)
    return result


def _ldexp(input, other):
    if isinstance(other, Tensor) and other._data.dtype.kind == "b" and \
            input._data.dtype.kind in "fV":  # (torch's kernel: a floating input's exponent)
        raise NotImplementedError('"ldexp_cpu_exp" not implemented for \'Bool\'; convert the '
                                  "exponent with .int() first")
    if isinstance(other, Tensor) and other._data.dtype.kind in "iub" and \
            input._data.dtype.kind in "fV":
        # torch's kernel: C's ldexp, exact (ldexp(0.0, 2**31 - 1) is 0.0, where 0 * 2 ** e
        # is 0 * inf = nan, and ldexp(1e300, -1100) is not 1e300 * 0)
        return _ldexp_exact(input, other)
    if not isinstance(other, Tensor):
        return _float_of(input) * pow(2.0, other)
    return input * _pow2(input, other)


ldexp.out_form = _ldexp


def _pow2(input, other):
    """2 ** other as torch's ldexp takes it: pow(2.0, other) for an integer or float32 input
    (other's float dtype, or the default one), else 2 as a 0-d tensor of input's dtype to the
    power other, promoted with it: a 0-d float32 exponent beside a float64 input gives a
    float64 2 ** 1.5, a 1-d one a float32 one (its dimensions outrank the 0-d 2)."""
    d = input._data.dtype
    if d.kind in "iub" or d == _dt.float32.np:
        return pow(2.0, other)
    return pow(scalar_tensor(2.0, dtype=input.dtype, device=input.device), other)


@op("ldexp", save="inputs", grad_reads=((1,), ()),
    layout="elementwise")  # (the exponent only, as torch)
def _ldexp_exact(xp, a, e):
    if a.dtype.kind == "V" or a.dtype == xp.float16:  # (exact in float32, rounded once)
        return xp.ldexp(a.astype(xp.float32), e.astype(xp.int32)).astype(a.dtype)
    return xp.ldexp(a, e.astype(xp.int32))  # (torch's kernel takes a C int exponent)


@_ldexp_exact.grad
def ldexp_exact_backward(ctx, dy):
    return _ldexp_exact(dy, ctx.inputs[1]), None


# ---- logaddexp ---------------------------------------------------------------------------
def _logaddexp(input, other, real_op):
    name = "logaddexp2" if real_op is _logaddexp2_real else "logaddexp"
    a, b = _promote_pair(input, other, name)
    if a._data.dtype.kind in "biu":  # torch has no integer kernel (no lift to float)
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for "
                                  f"'{_dt.from_numpy_dtype(a._data.dtype).name}': {name} of "
                                  f"integer or bool tensors; convert one with .float() first")
    if a.is_complex():
        if real_op is _logaddexp2_real:  # (torch has a complex kernel for logaddexp only)
            raise NotImplementedError(f"\"logaddexp2_cpu\" not implemented for "
                                      f"'{_dt.from_numpy_dtype(a._data.dtype).name}': "
                                      f"logaddexp2 of complex tensors; logaddexp has one")
        return _complex_logaddexp(a, b)
    return real_op(a, b)


def _logaddexp_op(name, two):
    """The real logaddexp (two: logaddexp2) op, with torch's rule dy / (1 + exp(b - a)) (pow
    of 2 for logaddexp2): nan at equal infinities (inf - inf), as torch's."""
    @op(name, jvp="diagonal", save="inputs", layout="elementwise")
    @in_float32  # half precision: computed in float32 and rounded once, as torch
    def kernel(xp, a, b):
        # equal infinities: the answer is that infinity (inf - inf would give nan)
        same_inf = (a == b) & (xp.abs(a) == math.inf)
        with xp.errstate(invalid="ignore"):
            t = -xp.abs(xp.where(same_inf, constant(xp, 0, a.dtype), a - b))
        s = xp.log1p(xp.power(constant(xp, 2, a.dtype), t)) * (1.0 / math.log(2.0)) if two \
            else xp.log1p(xp.exp(t))
        return xp.where(same_inf, a, xp.maximum(a, b) + s).astype(a.dtype, copy=False)

    @kernel.grad
    def logaddexp_backward(ctx, dy):
        a, b = ctx.inputs
        e = (lambda t: pow(2.0, t)) if two else exp
        need = ctx.needs_input_grad
        return (dy / (1.0 + e(b - a)) if need[0] else None), \
            (dy / (1.0 + e(a - b)) if need[1] else None)
    return kernel


_logaddexp_real, _logaddexp2_real = _logaddexp_op("logaddexp", False), \
    _logaddexp_op("logaddexp2", True)


def _complex_logaddexp(a, b):
    """torch's complex logaddexp (_log_add_exp_helper): log1p(exp(lo - hi)) + hi, hi the
    operand with the larger real part (a when tied); both real parts -inf: lo; both +inf:
    log(exp(a) + exp(b)); a nan in either: nan + nan j. Its gradient, from the ops, is
    torch's dy / conj(1 + exp(b - a)) for a (and alike for b)."""
    lo_is_a = a.real < b.real
    lo, hi = where(lo_is_a, a, b), where(lo_is_a, b, a)
    same_inf = (lo.real == hi.real) & (lo.real.abs() == math.inf)
    finite = where(same_inf, 0.0, lo - hi)  # (no inf - inf on the branch not taken)
    out = where(same_inf, where(lo.real < 0, lo, (lo.exp() + hi.exp()).log()),
                log1p(finite.exp()) + hi)
    nan = a.isnan() | b.isnan()  # (a complex isnan: either part)
    return where(nan, complex(math.nan, math.nan), out)


@tensor_method()
@tensor_operand()
def logaddexp(input, other):
    """log(exp(input) + exp(other)) without overflow.

    >>> import flowgrad as flow
    >>> flow.logaddexp(flow.tensor([1000.0]), flow.tensor([1000.0]))
    tensor([1000.6932])
    """
    return _logaddexp(input, other, _logaddexp_real)


@tensor_method()
@tensor_operand()
def logaddexp2(input, other):
    """log2(2 ** input + 2 ** other) without overflow.

    >>> import flowgrad as flow
    >>> flow.logaddexp2(flow.tensor([3.0]), flow.tensor([3.0]))
    tensor([4.])
    """
    return _logaddexp(input, other, _logaddexp2_real)


# ---- value-only kernels ------------------------------------------------------------------
@op("nextafter", save="inputs", layout="elementwise")
def _nextafter(xp, a, b):
    # where a == b, b itself (C's nextafter: nextafter(-0.0, 0.0) is 0.0); NumPy's float16
    # loop returns a there
    return xp.where(a == b, b, xp.nextafter(a, b))


@_nextafter.grad
def nextafter_backward(ctx, dy):  # torch's: dy where input != other (nan passes), else 0
    a, b = ctx.inputs
    return where(a != b, dy, 0.0), None


@tensor_method()
@tensor_operand()
def nextafter(input, other):
    """The next floating-point value after input towards other.

    >>> import flowgrad as flow
    >>> (flow.nextafter(flow.tensor([1.0]), flow.tensor([2.0])) - 1).item() > 0
    True
    """
    a, b = _promote_pair(input, other, "nextafter")
    if not a.is_floating_point():
        raise NotImplementedError(  # (torch's dispatch error: its type, not RuntimeError)
            f"nextafter: not implemented for {a.dtype.name} (\"nextafter_cpu\" not implemented "
            f"for '{_dt.TORCH_SCALAR_NAMES[a.dtype.name]}'); floating tensors only")
    return _nextafter(a, b)


@op("heaviside", layout="elementwise")
def _heaviside(xp, x, values):
    return xp.where(x == 0, values, (x > 0).astype(x.dtype)).astype(x.dtype)


@_heaviside.grad
def heaviside_backward(ctx, dy):
    raise RuntimeError("the derivative for heaviside is not implemented (as in torch); "
                       "use a smooth step such as sigmoid(k * x) to differentiate")


refuse_forward_rule("heaviside", "heaviside")  # (NotImplementedError, not the reverse's error)


@tensor_method()
def heaviside(input, values):
    """0 where input < 0, values where input == 0, 1 where input > 0.

    >>> import flowgrad as flow
    >>> flow.heaviside(flow.tensor([-1.0, 0.0, 2.0]), flow.tensor([0.5]))
    tensor([0.0000, 0.5000, 1.0000])
    """
    if not isinstance(values, Tensor):
        raise TypeError(f"heaviside(): argument 'values' (position 2) must be Tensor, not "
                        f"{type_name(values)}; wrap a number with flowgrad.tensor(...)")
    if input.dtype is not values.dtype:
        raise RuntimeError(f"heaviside is not yet implemented for tensors with different "
                           f"dtypes ({input.dtype.name} and {values.dtype.name}); convert "
                           f"values to the input's dtype")
    return _heaviside(input, values)


def _integer_pair(input, other, name):
    a, b = _promote_pair(input, other, name)
    broadcast_shapes(a.shape, b.shape)  # (torch's shape error comes before the dtype's)
    if a._data.dtype.kind not in "iu":
        raise NotImplementedError(f"{name}: \"{name}_cpu\" not implemented for "
                                  f"'{a.dtype.name}'; {name} takes integer tensors")
    return a, b


def _c_gcd(xp, a, b):
    """torch's calc_gcd: Euclid on C's abs and remainder, so the minimum of a signed dtype
    (whose abs wraps to itself) gives gcd(-5, -32768) = -1 where NumPy's gcd gives 1."""
    a, b = xp.abs(a) + xp.zeros_like(b), xp.abs(b) + xp.zeros_like(a)  # broadcast
    while True:
        live = a != 0
        if not live.any():
            return b
        a, b = xp.where(live, xp.fmod(b, xp.where(live, a, 1)), 0), xp.where(live, a, b)


@op("gcd", differentiable=False, layout="elementwise")
def _gcd(xp, a, b):
    return _c_gcd(xp, a, b)


@op("lcm", differentiable=False, layout="elementwise")
def _lcm(xp, a, b):
    # torch's calc_lcm: abs(a / gcd * b) in C's int (8- and 16-bit types promote to it) or
    # the dtype, wrapping on overflow, then cast back (NumPy's lcm takes |a| and |b| first:
    # lcm(-2147483647, 2) is 2 in torch's int32, -2 in NumPy's; int16 lcm(32767, 2) is -2)
    g = _c_gcd(xp, a, b)
    wide = a.dtype if a.dtype.itemsize >= 4 else xp.int64
    with xp.errstate(over="ignore"):
        q = a.astype(wide) // xp.where(g == 0, 1, g).astype(wide)  # exact: g divides a
        return xp.where(g == 0, 0, xp.abs(q * b.astype(wide))).astype(a.dtype)


@tensor_method()
@tensor_operand()
def gcd(input, other):
    """Greatest common divisor, elementwise (integer tensors).

    >>> import flowgrad as flow
    >>> flow.gcd(flow.tensor([12, -9, 0]), flow.tensor([18, 6, 5]))
    tensor([6, 3, 5])
    """
    return _gcd(*_integer_pair(input, other, "gcd"))


@tensor_method()
@tensor_operand()
def lcm(input, other):
    """Least common multiple, elementwise (integer tensors).

    >>> import flowgrad as flow
    >>> flow.lcm(flow.tensor([4, -3]), flow.tensor([6, 5]))
    tensor([12, 15])
    """
    return _lcm(*_integer_pair(input, other, "lcm"))


@tensor_method()
def isposinf(input):
    """True where input is +inf.

    >>> import flowgrad as flow
    >>> flow.isposinf(flow.tensor([float("inf"), -float("inf"), 1.0]))
    tensor([ True, False, False])
    """
    _refuse_complex(input, "isposinf")
    return eq(input, math.inf)


@tensor_method()
def isneginf(input):
    """True where input is -inf.

    >>> import flowgrad as flow
    >>> flow.isneginf(flow.tensor([float("inf"), -float("inf"), 1.0]))
    tensor([False,  True, False])
    """
    _refuse_complex(input, "isneginf")
    return eq(input, -math.inf)


def rsub(input, other, alpha=1):
    """other - alpha * input (sub with its operands swapped).

    >>> import flowgrad as flow
    >>> flow.rsub(flow.tensor([1.0, 2.0]), 10.0, alpha=2)
    tensor([8., 6.])
    """
    expect_tensor("rsub", input)
    return sub(other, input, alpha=alpha)


# ---- predicates --------------------------------------------------------------------------
@tensor_method()
def is_nonzero(input):
    """Whether a one-element tensor is non-zero (an error for any other size).

    >>> import flowgrad as flow
    >>> flow.is_nonzero(flow.tensor([0.5])), flow.is_nonzero(flow.tensor(0))
    (True, False)
    """
    n = input.numel()
    if n != 1:
        what = "no values" if n == 0 else "more than one value"
        raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous (shape "
                           f"{tuple(input.shape)}); use .any() or .all()")
    return bool(input.item() != 0)


@tensor_method()
def is_same_size(input, other):
    """Whether two tensors have one shape.

    >>> import flowgrad as flow
    >>> flow.is_same_size(flow.ones(2, 3), flow.zeros(2, 3))
    True
    """
    return tuple(input.shape) == tuple(other.shape)


@tensor_method()
def is_signed(input):
    """Whether the dtype is signed (floats, complex and int8..int64; not uint8 or bool).

    >>> import flowgrad as flow
    >>> flow.is_signed(flow.tensor([1], dtype=flow.uint8)), flow.tensor([1.0]).is_signed()
    (False, True)
    """
    return input._data.dtype.kind in "ifcV"


for _name, _fn in (("absolute_", abs_of_real), ("deg2rad_", deg2rad), ("rad2deg_", rad2deg),
                   ("copysign_", copysign), ("ldexp_", ldexp), ("nextafter_", nextafter),
                   ("heaviside_", heaviside), ("gcd_", gcd), ("lcm_", lcm)):
    setattr(Tensor, _name, _inplace_binary(_name, _fn))
Tensor.float_power_ = _float_power_
