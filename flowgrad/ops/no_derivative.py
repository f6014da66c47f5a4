"""Ops torch records without a derivative formula: their outputs require grad where an input
does, and a backward that reaches them raises (unique, histogram, floor_divide, the out=
forms of conj_physical, diag and softmax ...), rather than skipping them.

>>> import flowgrad as flow
>>> x = flow.tensor([3.0, -4.0], requires_grad=True)
>>> (x // 2).requires_grad
True
"""
from __future__ import annotations

from ..tensor import Tensor
from .registry import op


@op("no_derivative")
def _no_derivative(xp, value, source, *, what, error):
    return value


@_no_derivative.grad
def no_derivative_backward(ctx, dy):
    if ctx.error == "RuntimeError":
        raise RuntimeError(f"derivative for aten::{ctx.what} is not implemented (as in torch)")
    raise NotImplementedError(f"the derivative for '{ctx.what}' is not implemented (as in "
                              f"torch)")


def without_derivative(outputs, sources, what, error="NotImplementedError"):
    """`outputs`, their floating ones requiring grad where a source does, with a backward that
    raises `error`: torch's ops without a derivative formula (unique, histogram) record one
    that refuses, so a loss reaching them raises rather than skipping them."""
    source = next((s for s in sources if isinstance(s, Tensor) and s.requires_grad), None)
    if source is None:
        return outputs
    return [_no_derivative(o, source, what=what, error=error)
            if o.is_floating_point() or o.is_complex() else o for o in outputs]
