"""Sizes that depend on values inside a traced build: a boolean mask's selection, nonzero.

Such a tensor is `ValueShaped`: user code reading its size inside build raises at once. The
plan recomputes it on every run, but what build computed from it may have kept its size: ops
take sizes as attributes (a reshape, a split, a gradient's shape), factories make constants of
its shape, flowgrad's own code turns it into Python numbers (a mean's divisor). So the plan
checks every value-dependent size against the traced one (a `SizeGuard` node after each op
making one): another size raises StalePlanError before any state is written, and
`flow.compile` traces anew. nn.Graph's sizes are static, as its input shapes are.
"""
from __future__ import annotations

import sys

import numpy as np

from ..overrides import _disabled_torch_function_impl
from ..tensor import Tensor
from .ir import Node, StalePlanError
from .sites import _INSIDE, _PACKAGE, user_line

# ops whose output's size depends on the input's values (a boolean mask's selection, the
# non-zero positions): a plan recomputes the values, so a size read while tracing is stale
VALUE_SHAPED = frozenset(("nonzero", "flat_nonzero", "index"))  # (index: by a bool mask)


class ValueShaped(Tensor):
    """A traced tensor whose size depends on values (and what is computed from it, unless
    0-d): user code reading its size inside build raises, as the plan would keep the first
    call's size. flowgrad's own code reads it (the plan checks the size: `guard_sizes`)."""

    __slots__ = ()
    __torch_function__ = _disabled_torch_function_impl

    @property
    def shape(self):
        _refuse_size_read(self)
        return Tensor.shape.fget(self)

    def size(self, dim=None):
        _refuse_size_read(self)
        return Tensor.size(self, dim)

    def numel(self):
        _refuse_size_read(self)
        return Tensor.numel(self)

    def __len__(self):
        _refuse_size_read(self)
        return Tensor.__len__(self)

    def _reduce(self):  # (copied and pickled as a plain tensor)
        return Tensor._wrap(self._data)._reduce()


def _mark_value_shaped(outs):
    for t in outs:
        if t.__class__ is Tensor and t._data.ndim:
            t.__class__ = ValueShaped


class SizeGuard:
    """The op of a guard node: its inputs, the arrays of a value-dependent size, must have
    their traced shapes, or the plan is stale (`guard_sizes`)."""

    n_out = 0
    effect = True  # dead-code elimination keeps it
    name = "check_sizes"

    def __init__(self, root):
        self.root = root
        self.shapes = tuple(v.shape for v in root.outputs[:root.n_results])

    def kernel(self, xp, *arrays):
        for array, traced in zip(arrays, self.shapes):
            if array.shape != traced:
                raise StalePlanError(self._message(traced, array.shape))

    def _message(self, traced, now):
        root = self.root
        return (
            f"nn.Graph: the size of {root.op.name}'s result at "
            f"{user_line(root.where) if root.where else '?'} depends on values (a boolean "
            f"mask's selection, nonzero): it was {tuple(traced)} when the graph compiled and is "
            f"{tuple(now)} this call. A compiled plan keeps the sizes it traced (ops take them "
            f"as attributes, constants as shapes, counts as numbers), as it keeps its input "
            f"shapes. Keep sizes inside build static (flow.where, or a multiply by the mask, "
            f"instead of selecting), or use flow.compile, which traces anew when a size "
            f"changes")


def _refuse_size_read(tensor):
    filename = sys._getframe(2).f_code.co_filename
    inside = _INSIDE.get(filename)
    if inside is None:
        inside = _INSIDE[filename] = filename.startswith(_PACKAGE)
    if not inside:
        raise RuntimeError(
            f"nn.Graph: the size of a tensor (shape {tuple(tensor._data.shape)} this call) "
            f"depends on values (a boolean mask's selection, nonzero), and build() reads it at "
            f"{user_line()}: the compiled plan would keep this call's size. Count with tensor "
            f"ops instead (mask.sum() for the number of selected elements)")


def follow(tracer, op, inputs, outs, node):
    """The outputs of a VALUE_SHAPED op, and of any op reading one, are ValueShaped; the
    former are the program's `value_roots` (each gets a guard: `guard_sizes`)."""
    if op.name in VALUE_SHAPED and (op.name != "index" or any(
            t._data.dtype == np.bool_ for t in inputs[1:])):
        _mark_value_shaped(outs)
        tracer.value_shaped = True
        tracer.program.value_roots.append(node)
    elif any(t.__class__ is ValueShaped for t in inputs):
        _mark_value_shaped(outs)


def guard_sizes(program):
    """After each node making a value-dependent size (nonzero, x[mask]) goes a guard node,
    kept by dead-code elimination: the plan runs only while the sizes are the traced ones."""
    roots = {id(node) for node in program.value_roots}
    nodes = []
    for node in program.nodes:
        nodes.append(node)
        if id(node) in roots:
            guard = Node(SizeGuard(node), node.outputs[:node.n_results], {}, [], node.phase)
            guard.where = node.where
            nodes.append(guard)
    program.nodes = nodes
