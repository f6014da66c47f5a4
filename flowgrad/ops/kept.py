"""`kept`: the result of a composite whose torch counterpart is one node that saves its
inputs (mse_loss, huber_loss, the adaptive average pools, grid_sample, cdist, nansum...),
passed through a node that saves those inputs too, named as torch's node.

flowgrad builds these ops from others, none of which keeps the user's input, so a write to it
between the op and the backward went unnoticed where torch's backward refuses it ("modified by
an inplace operation"). The kept node's rule passes the gradient through; the engine checks
its saved tensors before running it, as torch's node does when it unpacks them.

>>> import flowgrad as flow
>>> x = flow.ones(3, requires_grad=True)
>>> loss = flow.nn.functional.mse_loss(x, flow.zeros(3))
>>> loss.grad_fn.name()
'MseLossBackward0'
"""
from __future__ import annotations

from ..autograd import grad_mode
from ..autograd import torch_nodes as _torch_nodes
from ..autograd.forward_ad import JVP_RULES
from .registry import op

__all__ = ["kept"]


def _copy(xp, y, *saved, torch_node, order="K"):
    # a copy, not y itself: a node inside the composite may have saved y as its output, and
    # a write into the result must not reach it unseen
    return y.copy(order=order)


def _through(ctx, dy):
    return (dy,) + (None,) * (len(ctx.input_shapes) - 1)


def _first(op, inputs, outs, tans, attrs, aux):
    return tans[0]


def _torch_name(node):
    return node.torch_node


# (number of inputs kept, whether torch's node saves its result too) -> op
_KEPT = {}
for _n in (1, 2):
    for _result in (False, True):
        _name = f"kept{_n}" + ("_result" if _result else "")
        _save = f"inputs[{', '.join(str(i) for i in range(1, _n + 1))}]"
        _op = op(_name, save=_save + (" outputs" if _result else ""), complex=True)(_copy)
        _op.grad(_through)
        JVP_RULES[_name] = _first
        _torch_nodes.NAMES[_name] = _torch_name
        _KEPT[_n, _result] = _op


def kept(y, *inputs, node, result=False, order="K"):
    """`y` (the composite's result) through a node named `node` that saves `inputs` (and
    its own result with `result`), when autograd records it; `y` itself otherwise.
    `order="C"`: the copy made C-contiguous (a composite that returned y.contiguous())."""
    if not (y.requires_grad and grad_mode._state.enabled):
        return y
    return _KEPT[len(inputs), result](y, *inputs, torch_node=node, order=order)
