"""A backward run started inside another (a reentrant checkpoint's backward, backward called
in a hook or in a custom Function's backward): torch gives it a GraphTask with input buffers
of its own. Here gradients are summed in the tensors' metas, which both runs share, so the
outer run's pending gradients are set aside for the inner run and put back after it.
"""
from __future__ import annotations

from ..errors import freed_graph_error


class _Freed:
    """What a node of the outer run that the inner run freed (retain_graph=False) holds in
    place of its saved tensors: reading them raises torch's error for a second backward,
    when the outer run gets to the node (not a TypeError from a rule reading None)."""

    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    def __getitem__(self, i):
        raise freed_graph_error(self.node)

    def __iter__(self):
        raise freed_graph_error(self.node)

    def __getattr__(self, name):
        raise freed_graph_error(self.node)


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
            holding.append((node, node._inputs is not None, node._outputs is not None,
                            node.aux is not None))
    for meta in outer.targets:
        if meta.current_grad is not None:
            pending.append((meta, meta.current_grad))
            meta.current_grad = None
    return pending, holding


def put_back(pending, holding):
    """The outer run's gradients back in their metas (what the inner run left there was its
    own, and goes); the saved tensors the inner run freed raise when read."""
    for meta, g in pending:
        meta.current_grad = g
    for node, inputs, outputs, aux in holding:
        if node.released:
            freed = _Freed(node)
            if inputs:
                node._inputs = freed
            if outputs:
                node._outputs = freed
            if aux:
                node.aux = freed
