"""A backward run started inside another (a reentrant checkpoint's backward, backward called
in a hook or in a custom Function's backward): torch gives it a GraphTask with input buffers
of its own. Here gradients are summed in the tensors' metas, which both runs share, so the
outer run's pending gradients are set aside for the inner run and put back after it.
"""
from __future__ import annotations

from ..errors import freed_graph_error


class _FreedOp:
    """The op of a node of the outer run that the inner run freed (retain_graph=False): its
    rule raises torch's error for a second backward when the outer run gets to the node
    (the outer run checked its nodes before it began, when this one still held its saved
    tensors). Anything else is the op's."""

    __slots__ = ("op",)

    def __init__(self, op):
        self.op = op

    def __getattr__(self, name):
        return getattr(self.op, name)

    def backward(self, node, *grads):
        raise freed_graph_error(node)


def set_aside(outer):
    """Take the gradients `outer` has summed so far but not yet used out of their metas (the
    inner run neither reads them, its hooks would see them summed in, nor passes them on);
    note the outer nodes still holding saved tensors. Returns what `put_back` takes."""
    pending, holding = [], []
    for node in outer.dependencies or ():
        for meta in node.output_metas:
            if meta.current_grad is not None:
                pending.append((meta, meta.current_grad))
                meta.current_grad = None
        if not getattr(node, "released", True) and getattr(node, "saved_something", False):
            holding.append(node)
    for meta in outer.targets:
        if meta.current_grad is not None:
            pending.append((meta, meta.current_grad))
            meta.current_grad = None
    return pending, holding


def put_back(pending, holding):
    """The outer run's gradients back in their metas (what the inner run left there was its
    own, and goes); a node the inner run freed raises when the outer run gets to it."""
    for meta, g in pending:
        meta.current_grad = g
    for node in holding:
        if node.released:
            node.op = _FreedOp(node.op)
