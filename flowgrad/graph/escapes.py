"""Tensors build computed and kept somewhere the plan cannot reach: a forward hook's
`activations[name] = out.detach()`, `self.history.append(loss.detach())`, a global. Eagerly
each call stores new values there; a plan runs build once, so what was stored keeps the first
call's values. After the trace, an array of a traced value still alive once the trace's own
objects are gone, and not handed out (an output, a gradient, an attribute the plan binds), is
such a tensor: warned about, with the remedy (return it from build)."""
from __future__ import annotations

import collections
import gc
import operator
import sys

import numpy as np

from .._warn import warn
from ..tensor import Tensor
from .ir import CONST, NODE, STATE


def escape_watch(tracer):
    """The arrays the trace saw (a list: one reference each, counted later) and the map from
    an array's id to its Value."""
    return list(tracer.arrays.values()), tracer.value_of


def _referenced_elsewhere(arrays, keep=lambda array: True):
    """The arrays something besides `arrays`, the count's argument and views among `arrays`
    (their .base) refers to, of those `keep` accepts. The count is C-level (this runs on
    every first call, over every traced array); the views are looked at only when some
    accepted array is referenced elsewhere."""
    counts = np.fromiter(map(sys.getrefcount, arrays), np.intp, len(arrays))
    suspects = [i for i in np.flatnonzero(counts > 2).tolist() if keep(arrays[i])]
    if not suspects:
        return []
    views = collections.Counter(map(id, map(_BASE, arrays)))
    return [arrays[i] for i in suspects if counts[i] - views[id(arrays[i])] > 2]


_BASE = operator.attrgetter("base")


def _held_by_the_model(graph, flat):
    """Tensors the graph's modules and optimizers hold (state, attributes the plan binds,
    optimizer state), its inputs and the tensors its plan captured."""
    program = graph._compiled[0]
    tensors = [list(flat), [v.source for v in program.values
                            if v is not None and v.kind in (CONST, STATE)],
               [store.get(name) for store, name in program.attribute_sets],
               list(program.writebacks)]
    for module in graph._modules.values():
        for sub in module.modules():
            tensors.append(list(vars(sub).values()))
            tensors += [list(sub._parameters.values()), list(sub._buffers.values())]
    for optimizer, _ in graph._optimizers:
        tensors.append(list(optimizer.state.values()))
    return tensors


def _array_ids(items, arrays=()):
    """Ids of `arrays` and of the arrays of the tensors (and their .grad) in `items` (nested
    lists, tuples, dicts), with the arrays they are views of."""
    arrays, stack = list(arrays), list(items)
    while stack:
        item = stack.pop()
        if isinstance(item, Tensor):
            arrays.append(item._data)
            if item.grad is not None:
                arrays.append(item.grad._data)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    ids = set()
    for array in arrays:
        while array is not None:
            ids.add(id(array))
            array = getattr(array, "base", None)
    return ids


def warn_escaped(graph, watch, result, flat):
    """Warn when an array of a traced value `watch` names is alive and neither handed out
    nor the model's."""
    arrays, value_of = watch
    out, (grads, _) = result
    handed = _array_ids([out], grads.values())  # (the first call's outputs and gradients)

    def computed(array):  # (by the trace, not handed out)
        value = value_of.get(id(array))
        return value is not None and value.kind == NODE and id(array) not in handed

    alive = [(a, value_of[id(a)]) for a in _referenced_elsewhere(arrays, computed)]
    if alive:
        held = _array_ids(_held_by_the_model(graph, flat))
        alive = [(a, v) for a, v in alive if id(a) not in held]
    if not alive:
        return
    # (rare: only then the cycle collector's time, for what only a cycle held; counted again
    # with `arrays` the one other holder)
    suspects = {id(a): v for a, v in alive}
    del alive
    gc.collect()
    kept = [suspects[id(a)] for a in _referenced_elsewhere(arrays, lambda a: id(a) in suspects)]
    if kept:
        shapes = ", ".join(f"{tuple(v.shape)} from {v.source.op.name}" for v in kept[:4])
        warn(f"nn.Graph {graph._name}: build() computed tensors that are still held outside the "
             f"graph's outputs ({len(kept)}: {shapes}): stored in a list, dict, global or by "
             f"a hook. Its compiled plan does not store them again: later calls leave the "
             f"first call's values there. Return them from build instead")
