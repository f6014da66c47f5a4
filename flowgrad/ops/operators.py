"""Tensor's Python operators (`+`, `*`, `==`, `&`, ...), its methods for the elementwise
family (`x.add`, `x.clamp`, ...) and their in-place forms (`x.add_`, `x += y`), bound to the
public functions of elementwise.py.

>>> import flowgrad as flow
>>> x = flow.tensor([1.0, -2.0])
>>> (x * 2 + 1).tolist(), (x > 0).tolist()
([3.0, -3.0], [True, False])
>>> x.clamp_(min=0); x.tolist()
tensor([1., 0.])
[1.0, 0.0]
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor, tensor_method
from .elementwise import (
    _SCALARS,
    _inplace_binary,
    abs,
    abs_of_real,
    add,
    allclose,
    clamp,
    cos,
    div,
    eq,
    equal,
    exp,
    ge,
    gt,
    isclose,
    isfinite,
    isinf,
    isnan,
    le,
    log,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    neg,
    pow,
    reciprocal,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    sub,
    tanh,
    where,
)

for _fn in (add, sub, mul, div, pow, neg, abs, exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid,
            square, reciprocal, clamp, eq, ne, lt, le, gt, ge, maximum, minimum, sign, isnan,
            isinf, isfinite, logical_not, logical_and, logical_or, logical_xor, equal, allclose,
            isclose):
    tensor_method(_fn.__name__)(_fn)
for _alias, _fn in (("subtract", sub), ("multiply", mul), ("divide", div), ("true_divide", div),
                    ("negative", neg), ("clip", clamp), ("greater", gt), ("less", lt),
                    ("greater_equal", ge), ("less_equal", le), ("not_equal", ne)):
    tensor_method(_alias)(_fn)


@tensor_method("where")
def _where_method(self, condition, other):
    return where(condition, self, other)


def _rsub(self, other):
    return sub(other, self)  # not -self + other: -uint8 wraps


def _rdiv(self, other):
    if isinstance(other, (*_SCALARS, complex, np.number)):
        # torch's value / x: reciprocal(x) * value, so its backward reads the reciprocal (a
        # temporary), not x: a later write to x (in place, or through .data) leaves it as is;
        # for a complex or NumPy value too (2j / bfloat16 x is reciprocal(x) rounded to
        # bfloat16, times 2j)
        return mul(reciprocal(self), other)
    return div(other, self)


def _elementwise_operand(other):
    """Whether `x == other` compares elementwise: a tensor, a number or an array. Any other
    object (None, a string) is not equal, as Python's default (torch's `x == None` is False)."""
    return isinstance(other, (Tensor, int, float, complex)) or hasattr(other, "__array__")


def _operand_eq(self, other):
    return eq(self, other) if _elementwise_operand(other) else NotImplemented


def _operand_ne(self, other):
    return ne(self, other) if _elementwise_operand(other) else NotImplemented


def _rpow(self, other):
    return pow(other, self)


Tensor.__add__ = Tensor.__radd__ = add
Tensor.__sub__ = sub
Tensor.__rsub__ = _rsub
Tensor.__mul__ = Tensor.__rmul__ = mul
Tensor.__truediv__ = div
Tensor.__rtruediv__ = Tensor.__rdiv__ = _rdiv  # (torch keeps the Python 2 name)
Tensor.__pow__ = pow
Tensor.__rpow__ = _rpow
Tensor.__neg__ = neg
Tensor.__abs__ = abs
Tensor.__eq__ = _operand_eq
Tensor.__ne__ = _operand_ne
Tensor.__lt__ = lt
Tensor.__le__ = le
Tensor.__gt__ = gt
Tensor.__ge__ = ge
Tensor.__invert__ = logical_not
Tensor.__and__ = logical_and
Tensor.__or__ = logical_or
Tensor.__xor__ = logical_xor


def _compared_in_place(compare):
    """x.eq_(y) and its kin: the comparison as x's new values, differentiable with a zero
    gradient where x or y requires grad (torch's derivative of eq_ is zeros for both; keeping
    x's history passed the gradient of the values the comparison overwrote, and a float x
    compared with a y that requires grad did not require grad, where torch's does)."""
    def method(src, *args, **kwargs):
        result = compare(src, *args, **kwargs)
        other = args[0] if args else kwargs.get("other")
        other_tracked = isinstance(other, Tensor) and other.requires_grad and \
            src._data.dtype.kind in "fcV"
        if not (src.requires_grad or other_tracked):
            return result
        everywhere = result.logical_or(result.logical_not())
        kept = src + (other * 0).to(src.dtype) if other_tracked else src  # (never selected)
        return where(everywhere, result.to(src.dtype), kept)
    return method


for _name, _fn in (("add_", add), ("sub_", sub), ("mul_", mul), ("div_", div), ("pow_", pow),
                   ("clamp_", clamp), ("clip_", clamp), ("neg_", neg), ("negative_", neg),
                   ("abs_", abs_of_real), ("sign_", sign), ("exp_", exp), ("log_", log),
                   ("sqrt_", sqrt),
                   ("rsqrt_", rsqrt), ("sin_", sin), ("cos_", cos), ("tanh_", tanh),
                   ("sigmoid_", sigmoid), ("square_", square), ("reciprocal_", reciprocal),
                   ("eq_", _compared_in_place(eq)), ("ne_", _compared_in_place(ne)),
                   ("lt_", _compared_in_place(lt)), ("le_", _compared_in_place(le)),
                   ("gt_", _compared_in_place(gt)), ("ge_", _compared_in_place(ge)),
                   ("greater_", _compared_in_place(gt)), ("greater_equal_", _compared_in_place(ge)),
                   ("less_", _compared_in_place(lt)), ("less_equal_", _compared_in_place(le)),
                   ("not_equal_", _compared_in_place(ne)),
                   ("logical_not_", logical_not), ("logical_and_", logical_and),
                   ("logical_or_", logical_or), ("logical_xor_", logical_xor)):
    setattr(Tensor, _name, _inplace_binary(_name, _fn))
Tensor.__iadd__ = Tensor.add_
Tensor.__isub__ = Tensor.sub_
Tensor.__imul__ = Tensor.mul_
Tensor.__itruediv__ = Tensor.div_
