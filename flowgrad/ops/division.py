"""Rounded division (div with rounding_mode 'floor' or 'trunc'): the op and its guards,
shared by div, floor_divide, remainder and fmod."""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..func.batched import check_every_example
from ..tensor import Tensor
from .broadcasting import broadcast_shapes
from .compare import _promote_pair
from .halfprec import HALF
from .registry import op
from .rules import _zero_grad


def _check_int_zero(a, b, name):
    """Integer division by a zero raises, as torch's, once an element is divided (an empty
    result divides none; shapes that do not broadcast are the op's own error)."""
    if b._data.dtype.kind not in "iub":
        return
    try:
        if 0 in np.broadcast_shapes(a._data.shape, b._data.shape):
            return
    except ValueError:
        return
    check_every_example(b != 0, f"ZeroDivisionError: {name} of integer tensors by zero")


@op("div_rounded", jvp="diagonal", layout="elementwise")
def _div_rounded(xp, a, b, *, mode):
    if a.dtype.kind in "iub":
        q = a // b
        if mode == "trunc":  # a // b floors; step back toward zero where signs differ
            q = q + (((a - q * b) != 0) & ((a < 0) != (b < 0)))
        return q.astype(a.dtype, copy=False)
    with xp.errstate(divide="ignore", invalid="ignore"):
        if mode == "trunc":
            q = xp.trunc(a / b)
        elif a.dtype in HALF:  # torch's floor division, each step rounded to half precision
            mod = xp.fmod(a, b)
            div = (a - mod) / b
            div = xp.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
            q = xp.floor(div)
            q = xp.where(div - q > 0.5, q + 1, q)
            q = xp.where(b == 0, a / b, xp.where(div == 0, xp.copysign(0, a / b), q))
        else:
            q = xp.floor_divide(a, b)
    return q.astype(a.dtype, copy=False)


@_div_rounded.grad
def div_rounded_backward(ctx, dy):
    return _zero_grad(dy), _zero_grad(dy)  # a step function: zero almost everywhere, as torch


def _rounded_div(input, other, rounding_mode):
    """div(..., rounding_mode='floor' | 'trunc'): keeps integer dtypes, as torch."""
    if rounding_mode not in ("floor", "trunc"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found {rounding_mode!r}")
    if isinstance(other, np.generic):  # (a NumPy number is a Python number here, as torch)
        other = _dt.scalar_value(other)
    if isinstance(input, Tensor) and input._data.dtype in HALF:
        # torch divides half precision by a scalar in float32, the scalar unrounded: a number,
        # or a one-element tensor (its kernel's scalar operand: bfloat16 1000.5 // a 0-d 3.0
        # is trunc(1000 / 3) = 333, rounded to 332, not 1000 / 3 rounded to 334 first)
        if isinstance(other, (builtins.int, builtins.float)):
            return _rounded_div(input.float(), other, rounding_mode).to(input.dtype)
        if isinstance(other, Tensor) and other._data.size == 1:
            d = _dt.result_type(input, other)
            if d.np in HALF:
                return _rounded_div(input.float(), other.float(), rounding_mode).to(d)
    a, b = _promote_pair(input, other, "div", number_pair=True)
    _refuse_bool(a, f"div_{rounding_mode}_cpu", b)
    _check_int_zero(a, b, "div")
    return _div_rounded(a, b, mode=rounding_mode)


def _refuse_bool(a, kernel, b=None):
    """torch has no rounded division, remainder, fmod or pow kernel for bool results (it
    raises first for shapes `a` and `b` that do not broadcast)."""
    if a._data.dtype.kind == "b":
        broadcast_shapes(a.shape, a.shape if b is None else b.shape)
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\' (both operands '
                                  f'are bool); convert one with .int() or .float() first')
