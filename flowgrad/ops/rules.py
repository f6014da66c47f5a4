"""Declaration helpers for the common shapes of gradient rules, and the masked products
they use. An elementwise unary op whose gradient is `dy * f'(x)` is one row:

    _sin = unary("sin", lambda xp, x: xp.sin(x), d_of_x=lambda x: cos(x), complex=True)

registers the kernel and the rule `sin_backward(ctx, dy) = dy * conj(cos(x))`, saving
only x. `d_of_y` writes f' from the output (saved instead: exp, tanh), `d_of_xy` from both;
`divide=True` takes the reciprocal (dy / d, as torch's `grad / (2 * result)`), `masked=True`
gives exactly 0 where dy is 0 even where d is inf or nan, `scale` a constant factor applied
last ((dy * d) * scale, torch's order). Step functions (floor, sign) are `step(...)` rows:
their gradient is zero. The generated rules are flowgrad ops, so they differentiate again.

>>> import flowgrad as flow
>>> x = flow.tensor([0.0, 1.0], requires_grad=True)
>>> y = flow.sin(x); y.sum().backward(); x.grad, y.grad_fn.name()
(tensor([1.0000, 0.5403]), 'SinBackward0')
"""
from __future__ import annotations

import operator

from ..autograd import grad_mode
from ..device import constant
from .complex import conj
from .creation import zeros_like
from .halfprec import HALF
from .registry import op

# ---- masked gradient products ----------------------------------------------------------------
# `where(x > 0, sqrt(x), 0)` must give x a zero gradient at x < 0, not nan: the branch not
# taken gets dy == 0, and 0 * (1 / (2 * sqrt(x))) is nan. Rules whose factor can be inf or nan
# use these instead of `*` and `/`: they return exactly 0 wherever dy is 0 (one kernel still).
_SMALL = 2048  # below this many values a `where` is faster than a multiply and a nan check


def masked_product(xp, m, d):
    """m * d, exactly 0 wherever m is 0 (False) even where d is inf or nan (0 * inf is nan),
    as torch's masked_fill-style rules. Only a nan product can differ there (up to the sign
    of a zero), so the all-finite case costs one isnan pass, not a `where` on a
    data-dependent mask (several times slower in NumPy on large arrays; on a small one, of a
    boolean mask, one `where` is faster than the multiply and the check, and gives +0 where
    m is False, as torch's).

    >>> import numpy as np
    >>> masked_product(np, np.array([0.0, 2.0]), np.array([np.inf, 3.0]))
    array([0., 6.])
    """
    if m.dtype.kind == "b" and m.size <= _SMALL and d.size <= _SMALL:  # one where: faster
        return xp.where(m, d, constant(xp, 0, d.dtype))
    if m.dtype.kind == "b" and m.shape == d.shape:
        # the mask made a float array first, then a product of two floats in place: the
        # bool -> float cast inside a mixed multiply is a buffered loop, 3x as long (65k
        # values: 5.5 + 5.9 us against 18.5), same values
        r = m.astype(d.dtype)
        xp.multiply(r, d, out=r)
    else:
        r = xp.multiply(m, d, dtype=d.dtype if m.dtype.kind == "b" else None)
    if has_nan(xp, r):
        r = xp.where(m != 0, r, xp.zeros((), r.dtype))
    return r


def has_nan(xp, r):
    """Whether any value of `r` is nan. float32/64: one BLAS dot, r . r, which is nan exactly
    when some value is (squares are never negative: no inf - inf), and is one C call where
    `isnan(r).any()` is three (0.45 against 0.8 us on 100 values, faster on large ones too).

    >>> import numpy as np
    >>> has_nan(np, np.array([1.0, np.inf])), has_nan(np, np.array([[0.0, np.nan]]))
    (False, True)
    """
    if r.dtype.char in "fd":
        flat = r.reshape(-1)
        return bool(xp.isnan(xp.dot(flat, flat)))
    return bool(xp.isnan(r).any())


def all_finite(xp, a):
    """Whether every value of the float array `a` is finite, by one BLAS dot (a . a is finite
    only then; an overflow of the dot says False too, which callers take as "not known to be
    finite"). Kernels that multiply by structural zeros (a banded or one-hot matrix) use it:
    0 * inf is nan, so a non-finite value there would reach outputs it does not touch.

    >>> import numpy as np
    >>> all_finite(np, np.array([1.0, 2.0])), all_finite(np, np.array([[1.0, np.inf]]))
    (True, False)
    """
    flat = a.reshape(-1)
    return bool(xp.isfinite(xp.dot(flat, flat)))


@op("grad_mul", jvp="diagonal", save="inputs", complex=True)
def _grad_mul(xp, dy, d):
    return masked_product(xp, dy, d)


@_grad_mul.grad
def grad_mul_backward(ctx, g):  # a product too, but saves both: dy's grad needs dy's mask
    dy, d = ctx.inputs
    need = ctx.needs_input_grad
    # masked on dy again: where dy == 0, g may be nan (it came through d) and must not leak
    return (_grad_mul(g, conj(d)) if need[0] else None), \
        (_grad_mul(conj(dy), g) if need[1] else None)


@op("grad_div", jvp="diagonal", save="inputs", complex=True)
def _grad_div(xp, dy, d):
    r = dy / d
    return xp.where(dy == 0, xp.zeros((), r.dtype), r)


@_grad_div.grad
def grad_div_backward(ctx, g):
    dy, d = ctx.inputs
    dy, d = conj(dy), conj(d)
    need = ctx.needs_input_grad
    gd = _grad_div(g, d) if need[0] else None
    return gd, (-_grad_div(_grad_div(_grad_mul(dy, g), d), d) if need[1] else None)


# the gradient of a / b for b. Half precision: torch's -grad * ((a / b) / b), each step
# rounded as torch's ops round it (a cancelling sum of the two gradients, softsign's, was 10x
# torch's error with -(grad / b) * a / b). float32/64: -((grad / b) * a) / b, whose x / x
# gradients cancel exactly where torch's cancel only when two roundings agree (corrcoef of
# one row is c / c: noise of 1e-7 where the truth is 0). Exactly 0 where dy is 0 unless a is
# inf or nan (a where's branch not taken stays 0 where b is 0, a nan of a / b still reaches
# the input)
@op("div_other_grad", jvp="diagonal", save="inputs")
def _div_other_grad(xp, dy, a, b):
    if dy.dtype in HALF:
        r = -(dy * ((a / b) / b))
        return xp.where((dy == 0) & xp.isfinite(a), xp.zeros((), r.dtype), r) \
            if has_nan(xp, r) else r
    t = dy / b  # (only a nan can need the masks: 0 / 0, 0 * inf; one BLAS dot finds it)
    if has_nan(xp, t):
        t = xp.where(dy == 0, xp.zeros((), t.dtype), t)
    t = t * a
    r = t / b
    if has_nan(xp, r):
        r = xp.where(t == 0, xp.zeros((), r.dtype), r)
    return -r


@_div_other_grad.grad
def div_other_grad_backward(ctx, g):  # of -dy a / b^2
    dy, a, b = ctx.inputs
    need = ctx.needs_input_grad
    return (_div_other_grad(g, a, b) if need[0] else None,
            -_grad_div(_grad_div(_grad_mul(g, dy), b), b) if need[1] else None,
            _grad_div(_grad_div(_grad_div(_grad_mul(g, dy * a), b), b), b) * 2.0
            if need[2] else None)


# ---- piecewise-linear rules under create_graph ------------------------------------------------
@op("tie", is_view=True)
def _tie(xp, g, x):
    return g.view()


@_tie.grad
def tie_backward(ctx, dg):
    return dg, zeros_like(dg)


def tied(g, x):
    """A piecewise-linear op's input gradient `g` (dy masked or scaled by where x lies) tied
    to x under create_graph, with a zero derivative: torch's backward formulas for these ops
    take x, so differentiating the gradient again w.r.t. x gives zeros there (an input
    Hessian of a LeakyReLU net), where an untied one would say x was not used. Free
    without create_graph."""
    return _tie(g, x) if grad_mode._state.enabled and x.requires_grad else g


def tied_to_input(g, ctx, i=0):
    """`tied(g, input i)` for a rule that reads input i only for this (its op declares
    `create_graph_reads=(i,)`): a plain backward neither reads nor checks it."""
    return tied(g, ctx.saved_input(i)) if grad_mode._state.enabled else g


# (divide, masked) -> how dy meets f'; operator's functions are `dy * d`, `dy / d` without
# a Python frame of their own
_PRODUCTS = {(False, False): operator.mul, (True, False): operator.truediv,
             (False, True): _grad_mul, (True, True): _grad_div}


# ---- elementwise unary ops: kernel and f' in one row -----------------------------------------
def unary(name, kernel, *, d_of_x=None, d_of_y=None, d_of_xy=None, divide=False, masked=False,
          scale=None, complex=False, grad_op=None, differentiable=True, layout=None):
    """Register the elementwise op `name` (`kernel(xp, x, **attrs)`) whose gradient is
    `dy * f'`, f' given as `d_of_x(x)` (saves the input), `d_of_y(y)` (saves the output) or
    `d_of_xy(x, y)` (both), written with flowgrad ops. `divide`: the function gives 1 / f'
    and the rule divides by it; `masked`: exactly 0 where dy is 0 (`_grad_mul`/`_grad_div`);
    `scale`: a constant multiplying the product last; `complex`: the op accepts complex
    input and is holomorphic, so f' is conjugated (torch's `grad * f'(z).conj()`);
    `grad_op`: for real tensors the rule is that op of (saved, dy) instead (a fused kernel
    with its own rule). With `differentiable=False` and no f', a non-differentiable op.
    `layout`: the registry's option ("elementwise" for a kernel that is not one NumPy ufunc,
    whose result would not keep a strided input's layout as torch's does; "contiguous" where
    torch's result is C-ordered whatever the input).
    Returns the op; its rule is registered as `<name>_backward`.

    >>> from flowgrad.ops.elementwise import _exp
    >>> _exp.save, _exp.backward.__name__
    (2, 'exp_backward')
    """
    given = [f is not None for f in (d_of_x, d_of_y, d_of_xy)]
    if sum(given) != (1 if differentiable else 0):
        raise TypeError(f"unary({name!r}): give exactly one of d_of_x, d_of_y, d_of_xy, or "
                        f"none with differentiable=False")
    if not differentiable:
        return op(name, differentiable=False, complex=complex, layout=layout)(kernel)
    save = ("inputs", "outputs", "inputs outputs")[given.index(True)]
    k = op(name, save=save, complex=complex, jvp="diagonal", layout=layout)(kernel)
    d = d_of_x or d_of_y or d_of_xy
    product = _PRODUCTS[divide, masked]
    from_y, both = d_of_y is not None, d_of_xy is not None

    @k.grad
    def unary_backward(ctx, dy):
        s = ctx.out if from_y else ctx.inputs[0]
        if grad_op is not None and not s.is_complex():
            return grad_op(s, dy)
        f = d(s, ctx.out) if both else d(s)
        g = product(dy, conj(f) if complex else f)
        return g if scale is None else g * scale

    return k


def _zero_grad(dy):
    """A constant zero gradient (for step functions: sign, floor, round, ...)."""
    return zeros_like(dy)


def step(name, kernel):
    """Register the elementwise op `name` whose gradient is zero everywhere (a step function:
    floor, sign, ...; torch's convention at the jumps too). Returns the op.

    >>> from flowgrad.ops.math import _floor
    >>> _floor.backward.__name__
    'floor_backward'
    """
    k = op(name, jvp="diagonal")(kernel)

    @k.grad
    def step_backward(ctx, dy):
        return _zero_grad(dy)

    return k
