"""Ops torch records without a derivative formula: their outputs require grad where an input
does, and a backward that reaches them raises (unique, histogram, floor_divide, the out=
forms of conj_physical, diag and softmax ...), rather than skipping them. Forward mode
refuses them too, as torch's: a dual input raises NotImplementedError (not a zero or absent
tangent), whatever the outputs' dtypes (nonzero_static's indices, ldl_factor's factors).

>>> import flowgrad as flow
>>> x = flow.tensor([3.0, -4.0], requires_grad=True)
>>> (x // 2).requires_grad
True
"""
from __future__ import annotations

from ..autograd.forward_ad import JVP_RULES, active_levels
from ..tensor import Tensor
from .registry import op


@op("no_derivative", complex=True)
def _no_derivative(xp, value, source, *, what, error):
    return value


@_no_derivative.grad
def no_derivative_backward(ctx, dy):
    if ctx.error == "RuntimeError":
        raise RuntimeError(f"derivative for aten::{ctx.what} is not implemented (as in torch)")
    raise NotImplementedError(f"the derivative for '{ctx.what}' is not implemented (as in "
                              f"torch)")


def refuse_forward_rule(name, what=None, why="it has no derivative"):
    """Register op `name`'s forward rule as one that refuses, torch's NotImplementedError for
    an op without a forward derivative (`what`: the name it gives; by default the op's
    `what` attribute, as no_derivative's), rather than the error its reverse rule raises."""
    def rule(op, inputs, outs, tans, attrs, aux):
        which = what or attrs["what"]
        raise NotImplementedError(
            f"Trying to use forward AD with aten::{which} that does not support it (as "
            f"torch's: {why}); pass the primal (forward_ad.unpack_dual(x).primal) or "
            f"x.detach() instead of a dual tensor")
    JVP_RULES[name] = rule


refuse_forward_rule("no_derivative")


def refuse_forward(sources, what):
    """Raise torch's NotImplementedError where a floating source is dual at an entered
    forward level (the level's interpreter decides, through no_derivative's rule)."""
    if not active_levels():
        return
    for s in sources:
        if isinstance(s, Tensor) and (s.is_floating_point() or s.is_complex()):
            _no_derivative(s, s, what=what, error="NotImplementedError")


def without_derivative(outputs, sources, what, error="NotImplementedError"):
    """`outputs`, their floating ones requiring grad where a source does, with a backward that
    raises `error`: torch's ops without a derivative formula (unique, histogram) record one
    that refuses, so a loss reaching them raises rather than skipping them. A source that is
    dual (forward mode) raises NotImplementedError here, as torch's."""
    refuse_forward(sources, what)
    source = next((s for s in sources if isinstance(s, Tensor) and s.requires_grad), None)
    if source is None:
        return outputs
    return [_no_derivative(o, source, what=what, error=error)
            if o.is_floating_point() or o.is_complex() else o for o in outputs]
