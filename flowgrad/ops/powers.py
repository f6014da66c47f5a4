"""Powers: `x ** number` (scalar_pow, with its gradient as one op, scalar_pow_grad),
`number ** x` (scalar_rpow), and the product of three (scaled_product) that the second
derivatives of pow and tanh record as one node. Tensor ** tensor is elementwise.py's pow, which
computes with `rounded_power` from here. Each kernel follows torch's CPU kernel's rounding:
small integer exponents by products, float32 powers rounded once from float64.

>>> import flowgrad as flow
>>> x = flow.tensor([3.0], requires_grad=True)
>>> (x ** 3).backward(); x.grad
tensor([27.])
"""
from __future__ import annotations

import math

from ..device import scalar_operand
from .complex import complex_power, conj
from .halfprec import HALF, rounded_to, same_dtype
from .registry import op
from .rules import _grad_mul, _zero_grad


# a * b * c * scale as one node: the second derivatives of tanh and pow (their rules' products
# of three, under create_graph) record one op instead of three
@op("scaled_product", jvp="multilinear", save="inputs for others")
def _scaled_product(xp, a, b, c, *, scale):
    product = a * b * c
    product *= scalar_operand(xp, scale, product.dtype)  # (in place: the inputs' dtype)
    return product


@_scaled_product.grad
def scaled_product_backward(ctx, dy):
    a, b, c = ctx.inputs
    need, scale = ctx.needs_input_grad, ctx.scale
    return (_scaled_product(dy, b, c, scale=scale) if need[0] else None,
            _scaled_product(a, dy, c, scale=scale) if need[1] else None,
            _scaled_product(a, b, dy, scale=scale) if need[2] else None)


# exponents torch's CPU kernel computes by products (float32/64): the C library's pow of a
# negative base takes a slow path (~40 ns a value against ~0.5 for x * x * x)
_POW_BY_PRODUCT = {
    3: lambda xp, x: x * x * x,
    -2: lambda xp, x: xp.reciprocal(x * x),
    -0.5: lambda xp, x: xp.reciprocal(xp.sqrt(x)),
}


def _power(xp, x, exponent):
    product = _POW_BY_PRODUCT.get(exponent) if x.dtype.char in "fd" else None
    return rounded_power(xp, x, exponent) if product is None else product(xp, x)


def rounded_power(xp, a, b):
    """a ** b; a float32 power computed in float64 and rounded once. NumPy's float32 power is
    off by an ulp for a fifth of the values (0.9 ** 4: 0.6561 for 0.65609992), torch's (1 ulp
    at most) for one in fifty: rounded from float64, the two agree on 98% of them."""
    if a.dtype.char == "f" and getattr(b, "dtype", a.dtype).char == "f":
        return (a.astype(xp.float64) ** (b.astype(xp.float64) if hasattr(b, "dtype") else b)
                ).astype(xp.float32)
    return complex_power(xp, a, b) if a.dtype.kind == "c" else a ** b


@op("scalar_pow", jvp="diagonal", save="inputs", complex=True, layout="elementwise")
def _scalar_pow(xp, x, *, exponent):
    if x.dtype in HALF:  # the exponent rounded to x's dtype, as torch's
        e = rounded_to(x, exponent)
        product = _HALF_POW_BY_PRODUCT.get(e) if x.dtype.kind == "V" else None
        if product is not None:  # torch's bfloat16 products, each rounded to bfloat16
            return same_dtype(x, product(xp, x))
        return same_dtype(x, _power(xp, x.astype(xp.float32), e))
    return same_dtype(x, _power(xp, x, exponent))


# the exponents torch's bfloat16 pow computes by products in bfloat16 (its float16 pow is one
# float32 power, rounded once)
_HALF_POW_BY_PRODUCT = {2: lambda xp, x: x * x, 3: lambda xp, x: x * x * x,
                        -2: lambda xp, x: xp.reciprocal(x * x)}


# pow's gradient dy * (e * x ** (e - 1)) as one op (torch's product, so the same bits): one
# node instead of three when differentiated again (create_graph), as tanh_grad for tanh
@op("scalar_pow_grad", jvp="diagonal", save="inputs")
def _scalar_pow_grad(xp, x, dy, *, exponent):
    if exponent == 0:  # torch's zeros, not dy * 0 (nan where x ** -1 is inf)
        return xp.zeros_like(dy)
    return same_dtype(x, dy * (scalar_operand(xp, exponent, x.dtype) * _power(xp, x, exponent - 1)))


@_scalar_pow_grad.grad
def scalar_pow_grad_backward(ctx, ddx):
    x, dy = ctx.inputs
    e, need = ctx.exponent, ctx.needs_input_grad
    # d/dx: ddx * dy * e * (e - 1) * x ** (e - 2); d/ddy: ddx * e * x ** (e - 1)
    if not need[0]:
        dx = None
    elif e == 3:  # (x ** 1: a product of three, one node)
        dx = _scaled_product(ddx, dy, x, scale=6.0)
    else:
        dx = _scalar_pow_grad(x, ddx * dy, exponent=e - 1) * e
    return dx, (_scalar_pow_grad(x, ddx, exponent=e) if need[1] else None)


@_scalar_pow.grad
def scalar_pow_backward(ctx, dy):
    (x,), e = ctx.inputs, ctx.exponent
    x = conj(x)
    if e == 0:
        return _zero_grad(dy)  # torch's zeros (dy * 0 would keep dy's nan)
    real = not isinstance(e, complex) and not x.is_complex() and not dy.is_complex()
    if real and e >= 1:  # torch's product (finite where x is), and its graph: edges to x
        return _scalar_pow_grad(x, dy, exponent=e)
    if e == 1:
        return dy
    if e == 2:
        return dy * x * 2.0
    if not isinstance(e, complex) and e > 1:
        return dy * ((x ** (e - 1)) * e)
    return _grad_mul(dy, (x ** (e - 1)) * e)  # x ** -0.5 at 0: inf, masked where dy == 0


@op("scalar_rpow", jvp="diagonal", save="outputs", complex=True, layout="contiguous")
def _scalar_rpow(xp, x, *, base):
    if x.dtype in HALF:  # the base rounded to x's dtype, as torch's
        return same_dtype(x, xp.float32(rounded_to(x, base)) ** x.astype(xp.float32))
    return same_dtype(x, rounded_power(xp, xp.asarray(base, x.dtype), x) if x.dtype.char == "f"
                 and not isinstance(base, complex) else base ** x)


@_scalar_rpow.grad
def scalar_rpow_backward(ctx, dy):
    base, out = ctx.base, ctx.out
    if base > 0:
        return dy * conj(out) * math.log(base)
    if base == 0:  # as torch: 0 where x >= 0 (out 0 or 1), out * log(0) = -inf where x < 0
        return dy * (out.clamp(max=1.0) - out)  # (out = inf there: 1 - inf)
    return dy * math.nan  # a negative base has no real log: torch's gradient is nan
