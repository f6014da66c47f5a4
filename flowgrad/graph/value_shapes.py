"""Sizes that depend on values inside a traced build: a boolean mask's selection, nonzero.

A plan recomputes such a tensor on every run, and what is computed from it (elementwise
ops, reductions, matmuls, index_add_ by its indices) follows its size. Two things cannot:
user code reading the size inside build (refused at once: `ValueShaped`), and an op taking the
size as an attribute (a reshape, expand or split of such a tensor, a gradient rule's shape for
one, a `*_like` factory shaped like it). When the trace holds one of those, the plan guards
every value-dependent size with a `SizeGuard` node, which raises `StalePlanError` when a run's
size is not the traced one (`flow.compile` then traces anew) instead of computing with the
traced size.
"""
from __future__ import annotations

import sys

import numpy as np

from ..overrides import _disabled_torch_function_impl
from ..tensor import Tensor
from .ir import Node, StalePlanError
from .sites import _INSIDE, _PACKAGE, user_line, user_site

# ops whose output's size depends on the input's values (a boolean mask's selection, the
# non-zero positions): a plan recomputes the values, so a size read while tracing is stale
VALUE_SHAPED = frozenset(("nonzero", "flat_nonzero", "index"))  # (index: by a bool mask)
# kernel attributes that are sizes: computed from a ValueShaped tensor's size, they are stale
SIZE_ATTRS = frozenset(("shape", "out_shape", "size", "bounds", "region", "length"))


class ValueShaped(Tensor):
    """A traced tensor whose size depends on values (and what is computed from it, unless
    0-d): user code reading its size inside build raises, as the plan would keep the first
    call's size. flowgrad's own code reads it freely (its kernels see each run's arrays)."""

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
    """The op of a guard node: its inputs, a value-dependent size's arrays, must have their
    traced shapes, or the plan is stale (`guard_sizes`)."""

    n_out = 0
    effect = True  # dead-code elimination keeps it
    name = "check_sizes"

    def __init__(self, root, taker):
        self.root, self.taker = root, taker
        self.shapes = tuple(v.shape for v in root.outputs[:root.n_results])

    def kernel(self, xp, *arrays):
        for array, traced in zip(arrays, self.shapes):
            if array.shape != traced:
                raise StalePlanError(self._message(traced, array.shape))

    def _message(self, traced, now):
        root, taker = self.root, self.taker
        if type(taker) is tuple:  # (a factory shaped like such a tensor: its name and site)
            name, where = taker
        else:
            name, where = getattr(taker.op, "name", None) or taker.op.node_name, taker.where
        return (
            f"nn.Graph: the size of {root.op.name}'s result at "
            f"{user_line(root.where) if root.where else '?'} depends on values (a boolean "
            f"mask's selection, nonzero): it was {tuple(traced)} when the graph compiled and is "
            f"{tuple(now)} this call, and {name} at {user_line(where) if where else '?'} took "
            f"that size (a view, reshape, split or expand of such a tensor, a factory shaped "
            f"like it, or a gradient's shape): the plan would compute with the traced size. "
            f"Keep sizes inside build static (flow.where, or a multiply by the mask, instead "
            f"of selecting), or run this step eagerly (flow.compile traces anew when this "
            f"happens)")


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


def follow(tracer, op, inputs, attrs, outs, node):
    """Sizes that depend on values: the outputs of a VALUE_SHAPED op, and of any op reading
    one, are ValueShaped. An op taking one of those sizes as an attribute (SIZE_ATTRS) keeps
    the traced size: it is remembered in `sized_by_values` (while the autograd pass runs a
    rule: an op of it whose output is shaped as a value-dependent input of the node
    differentiated, whose traced shapes `tracer.sizes_from_values` holds)."""
    program = tracer.program
    if op.name in VALUE_SHAPED and (op.name != "index" or any(
            t._data.dtype == np.bool_ for t in inputs[1:])):
        _mark_value_shaped(outs)
        tracer.value_shaped = True
        program.value_roots.append(node)
        return
    from_values = any(t.__class__ is ValueShaped for t in inputs)
    if from_values:
        _mark_value_shaped(outs)
    if attrs and not SIZE_ATTRS.isdisjoint(attrs) and (from_values if tracer.phase != "backward"
                                                      else _shaped_like_one(tracer, outs)):
        program.sized_by_values.append(node)


def _shaped_like_one(tracer, outs):
    """While a rule runs: whether an op of it makes an array shaped as one of the
    value-dependent inputs of the node differentiated (a gradient for it, its shape taken as
    an attribute); a gradient for a parameter it read (sum_to a bias's shape) is not."""
    shapes = tracer.sizes_from_values
    return bool(shapes) and any(t._data.shape in shapes for t in outs)


def sized_like(program, tensor, op_name):
    """A factory (zeros_like, rand_like, ...) shaped like `tensor` makes a constant or a draw
    of the traced size, which is stale if that size depends on values."""
    if tensor.__class__ is ValueShaped:
        program.sized_by_values.append((op_name, user_site()))


def guard_sizes(program):
    """After each node making a value-dependent size (nonzero, x[mask]) goes a guard node,
    kept by dead-code elimination: the plan runs only while the sizes are the traced ones."""
    taker = program.sized_by_values[0]
    roots = {id(node) for node in program.value_roots}
    nodes = []
    for node in program.nodes:
        nodes.append(node)
        if id(node) in roots:
            guard = Node(SizeGuard(node, taker), node.outputs[:node.n_results], {}, [],
                         node.phase)
            guard.where = node.where
            nodes.append(guard)
    program.nodes = nodes
