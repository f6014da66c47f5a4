"""Selection ops: where, clamp (number or tensor bounds), maximum, minimum. Each op's kernel
and gradient rule sit side by side; only the selected input receives gradient, so a NaN
gradient in the branch not taken does not leak through.

>>> import flowgrad as flow
>>> flow.clamp(flow.tensor([-2.0, 0.5, 3.0]), min=-1, max=1)
tensor([-1.0000,  0.5000,  1.0000])
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..device import array_module, undispatched
from ..errors import checked_number, tensor_operand
from ..tensor import Tensor
from .broadcasting import broadcast_shapes
from .compare import _promote_pair, clamp_mask, promoted, tie_weights
from .elementwise import _F64, _binary
from .halfprec import HALF
from .index_functions import nonzero
from .out_arg import with_out
from .registry import op
from .rules import _grad_mul

__all__ = ["where", "clamp", "clip", "maximum", "minimum"]


# ---- selection ---------------------------------------------------------------------------------
# saves the condition only: writes to x or y stay valid
@op("where", jvp="linear", save="inputs[0]", complex=True, layout="elementwise")
def _where(xp, cond, x, y):
    return undispatched(xp, "where")(cond, x, y)


@_where.grad
def where_backward(ctx, dy):
    cond = ctx.inputs[0]
    zero = dy.new_zeros(())
    need = ctx.needs_input_grad
    return (None, _where(cond, dy, zero) if need[1] else None,
            _where(cond, zero, dy) if need[2] else None)


@op("clamp", jvp="diagonal", save="inputs")
def _clamp(xp, x, *, min, max):
    return xp.clip(x, min, max).astype(x.dtype, copy=False)  # clip gives float32 for bfloat16


@_clamp.grad
def clamp_backward(ctx, dy):
    return _where(clamp_mask(ctx.inputs[0], min=ctx.min, max=ctx.max), dy, dy.new_zeros(()))


@op("maximum", jvp="diagonal", save="inputs", layout="elementwise")
def _maximum(xp, a, b):
    return xp.maximum(a, b)


@_maximum.grad
def maximum_backward(ctx, dy):
    return _split_tie_grad(dy, *ctx.inputs, ">")


@op("minimum", jvp="diagonal", save="inputs", layout="elementwise")
def _minimum(xp, a, b):
    return xp.minimum(a, b)


@_minimum.grad
def minimum_backward(ctx, dy):
    return _split_tie_grad(dy, *ctx.inputs, "<")


def _split_tie_grad(dy, a, b, first_wins):
    """Grads of max/min of two tensors: to the winner; split in half on ties, as torch. The
    loser gets exactly 0 even where dy is inf or nan (grad_mul masks on its first factor)."""
    w, rest = tie_weights(a, b, first_wins=first_wins, dtype=dy.dtype)
    return _grad_mul(w, dy), _grad_mul(rest, dy)



# ---- public functions ---------------------------------------------------------------------
def where(condition, input=None, other=None):
    """Elementwise `input if condition else other`; scalars allowed for either branch.

    Only the branch taken receives gradient, so a NaN gradient in the other branch does not
    leak through.

    >>> import flowgrad as flow
    >>> x = flow.tensor([-1.0, 2.0, -3.0])
    >>> flow.where(x > 0, x, 0.0)
    tensor([0., 2., 0.])
    """
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        # two Python scalars: torch's dtype for them (where(c, 1, 0) is int64)
        d, xp = _dt.result_type(input, other), array_module(condition._data)
        input, other = (Tensor._wrap(xp.asarray(checked_number("where", v, d.np, arg), d.np))
                        for v, arg in ((input, "input"), (other, "other")))  # (1e300: raise)
    if isinstance(input, Tensor) is not isinstance(other, Tensor):
        # the number converts to the result's dtype as torch's Scalar does (300 does not fit
        # int8: raise; -1 for uint8 is 255), not by NumPy's wrap-around; half precision takes
        # any float (1e10 becomes inf), as torch's
        if isinstance(input, Tensor):
            other = _checked_branch(input, other, "other")
        else:
            input = _checked_branch(other, input, "input")
    if not isinstance(input, Tensor) or not isinstance(other, Tensor) or \
            input._data.dtype != other._data.dtype:
        input, other = _promote_pair(input, other, "where")
    if condition._data.dtype.kind != "b":
        if condition._data.dtype != np.uint8:  # (a byte condition: torch's deprecated mask)
            raise RuntimeError(f"where expected condition to be a boolean tensor, but got a "
                               f"tensor with dtype {condition.dtype}; compare it (x != 0) or "
                               f"call .bool()")
        condition = condition.to(_dt.bool)
    return _where(condition, input, other)


def _checked_branch(tensor, number, arg):
    """where's number branch checked against the dtype it takes beside `tensor` (the
    tensor's own, int64 for an int beside bools, the default float dtype for a float beside
    integers)."""
    d = tensor._data.dtype
    if isinstance(number, np.generic):  # (a NumPy scalar is the Python number it holds)
        number = _dt.scalar_value(number)
    cls = number.__class__
    if d.kind in "iub":
        if cls is builtins.complex:
            return number
        if cls is builtins.float:  # the result is the default float dtype: 1e300 overflows it
            d = _dt.get_default_dtype().np
        if d.kind == "b" and cls is not builtins.bool:
            d = _INT64
    elif d.kind == "c":  # (1e300 overflows complex64's parts)
        return checked_number("where", number, d, arg)
    elif cls is builtins.complex:
        return number
    elif d in HALF:  # any float fits (1e10 becomes inf, as torch's); an int of 64 bits
        d = _F64
    return checked_number("where", number, d, arg)


_INT64 = np.dtype(np.int64)


def _as_number(bound):
    if isinstance(bound, Tensor) and bound._data.ndim == 0 and not bound.requires_grad:
        return bound.item()
    return bound


def clamp(input, min=None, max=None, *, out=None):
    """Limit values to [min, max]; either bound may be None or a tensor.

    >>> import flowgrad as flow
    >>> flow.clamp(flow.tensor([-2.0, 0.5, 3.0]), min=-1, max=1)
    tensor([-1.0000,  0.5000,  1.0000])
    """
    if out is not None:  # (torch's Scalar overload takes only out of the result's dtype)
        bounds = (min, max)
        if min is not None and max is not None and \
                isinstance(min, Tensor) is not isinstance(max, Tensor):
            bounds = [_as_number(v) for v in bounds]  # (read as below)
        scalars = not any(isinstance(v, Tensor) for v in bounds)
        return with_out(clamp, out, (input,), "clamp", exact_dtype=scalars,
                        no_overlap="partial", min=min, max=max)
    if min is None and max is None:
        raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
    if min is not None and max is not None and \
            isinstance(min, Tensor) is not isinstance(max, Tensor):
        # torch's parser reads a 0-d tensor that needs no grad as the other's Number
        min, max = (_as_number(v) for v in (min, max))
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if min is not None and max is not None and \
                isinstance(min, Tensor) is not isinstance(max, Tensor):
            # torch's two overloads: two numbers or two tensors (either may be None)
            raise TypeError(f"clamp(): min and max must both be numbers or both be tensors "
                            f"(or None), got {type(min).__name__} and {type(max).__name__}; "
                            f"wrap the number with flowgrad.tensor(...)")
        return clamp_tensor(input, min, max)
    d = _dt.result_type(input, *(v for v in (min, max) if v is not None))
    if d is _dt.bool:  # torch has no bool kernel (an int bound promotes to int64: fine)
        kernel = "clamp_scalar_cpu" if min is not None and max is not None else \
            "clamp_min_scalar_cpu" if min is not None else "clamp_max_scalar_cpu"
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'; convert the '
                                  f"tensor with .int() first")
    if d.is_complex and not input.is_floating_point():  # (before the bounds' conversion, as
        # torch's; a floating tensor's complex bound is converted to double: RuntimeError)
        raise NotImplementedError(f"clamp is not supported for complex types (got {d} from "
                                  f"{input.dtype} and the bounds); clamp .real or .abs()")
    if min is not None and max is not None and any(
            isinstance(v, float) and v != v for v in (min, max)):
        min = max = float("nan")  # (torch fills nan: the other bound is never converted)
    # the bounds convert to the result's dtype as torch's Scalar does: out of its range
    # raises, and uint8 takes -255..-1 modulo 256 (clamp(min=-1) of uint8 gives 255s)
    min, max = checked_number("clamp", min, d.np, "min"), checked_number("clamp", max, d.np, "max")
    if d is not input.dtype:  # torch promotes: a bool tensor clamped to ints gives int64
        input = input.to(d)
    return _clamp(input, min=min, max=max)


clip = clamp


@tensor_operand()
def maximum(input, other):
    """Elementwise max of two tensors (ties split the gradient).

    >>> import flowgrad as flow
    >>> flow.maximum(flow.tensor([1.0, 5.0]), flow.tensor([3.0, 2.0]))
    tensor([3., 5.])
    """
    return _binary(_maximum, input, other, "maximum")


@tensor_operand()
def minimum(input, other):
    """Elementwise min of two tensors (ties split the gradient).

    >>> import flowgrad as flow
    >>> flow.minimum(flow.tensor([1.0, 5.0]), flow.tensor([3.0, 2.0]))
    tensor([1., 2.])
    """
    return _binary(_minimum, input, other, "minimum")


# ---- clamp with tensor bounds ---------------------------------------------------------------
@op("clamp_tensor", jvp="diagonal", save="inputs", layout="elementwise")
def _clamp_tensor(xp, x, *bounds, has_min, has_max):
    y = xp.maximum(x, bounds[0]) if has_min else x
    return xp.minimum(y, bounds[-1]) if has_max else y


@_clamp_tensor.grad
def clamp_tensor_backward(ctx, dy):
    x, *bounds = ctx.inputs
    lo = bounds[0] if ctx.has_min else None
    hi = bounds[-1] if ctx.has_max else None
    keeps, grads = [], []
    if lo is not None:
        keeps.append(x >= lo)
        grads.append((x < lo) & (lo < hi) if hi is not None else x < lo)
    if hi is not None:
        keeps.append(x <= hi)
        grads.append((x > hi) | (lo > hi) if lo is not None else x > hi)  # min > max: max wins
    zero = dy.new_zeros(())
    if not keeps:  # no bounds: the identity
        return (dy,)
    keep_x = keeps[0] & keeps[1] if len(keeps) == 2 else keeps[0]
    return tuple(_where(m, dy, zero) if need else None
                 for m, need in zip([keep_x, *grads], ctx.needs_input_grad))


def clamp_tensor(input, min=None, max=None):
    """clamp with tensor (or mixed) bounds, promoted together with input."""
    bounds = [b for b in (min, max) if b is not None]
    d, xp = _dt.result_type(input, *bounds), array_module(input._data)
    if d is _dt.bool and len(bounds) == 2:  # (one bound is maximum/minimum: bools are fine)
        broadcast_shapes(*(t.shape for t in (input, *bounds)
                           if isinstance(t, Tensor)))  # (torch's shape error first)
        raise NotImplementedError("clamp: \"clamp_cpu\" not implemented for 'Bool' (tensor, "
                                  "min and max all bool); convert them with .int() first, "
                                  "or clamp by one bound (maximum/minimum)")
    ts = [promoted(t, d) if isinstance(t, Tensor) else Tensor._wrap(xp.asarray(t, d.np))
          for t in (input, *bounds)]
    return _clamp_tensor(*ts, has_min=min is not None, has_max=max is not None)
