"""Layout reads in build: user code branching on a traced tensor's `is_contiguous()`,
`stride()`, `storage_offset()`, `dim_order()` or address (`data_ptr()`, `untyped_storage()`,
`is_set_to()`): `x * x.stride(0)`, `if x.is_contiguous():`, `if self.weight.is_contiguous():`.
The plan keeps the branch taken and the numbers read at trace time, where eagerly each call
reads the layouts anew; so while build is traced these methods note a read by the user's
code of a tensor the plan recomputes, and the plan then checks the strides and storage
offset (and, after an address read, the address) on each call (`check_layouts`: another one
raises StalePlanError, and flow.compile traces anew): of the parameters and buffers build
read them of when it read only those, else of every input and every parameter and buffer (a
read of a view or a result depends on theirs). flowgrad's own reads are not noted: its ops
replay the layout they see. Reads of autograd state (an input's requires_grad, a .grad) and
the inputs' aliasing are checked here the same way.
"""
from __future__ import annotations

import contextlib
import sys

from ..autograd.inplace import shares_elements
from ..tensor import Tensor
from .ir import CONST, STATE, StalePlanError
from .python_reads import _Same
from .sites import inside as _inside

_READERS = ("stride", "is_contiguous", "storage_offset", "dim_order", "data_ptr",
            "const_data_ptr", "untyped_storage", "is_set_to")
_ADDRESS = ("data_ptr", "const_data_ptr", "untyped_storage", "is_set_to")  # (its address)


def exact_layout(tensor):
    """A tensor's strides (in elements) and storage offset, as the user's code reads them."""
    return tensor.stride(), tensor.storage_offset()


def exact_place(tensor):
    """Its layout and its first element's address (build read a data_ptr())."""
    return tensor.stride(), tensor.storage_offset(), tensor.data_ptr()


@contextlib.contextmanager
def watching_layout_reads(tracer, found):
    """Patch the layout readers for the duration of build's trace; each read by the user's
    code of a tensor that varies per run (an input, state, or what is computed from them)
    appends (the method's name, the tensor if it is a parameter or buffer itself, else None)
    to `found`."""
    originals = {name: Tensor.__dict__[name] for name in _READERS}

    def watched(name, method):
        def read(self, *args, **kwargs):
            if not _inside(sys._getframe(1)):
                value = tracer.value_of.get(id(self._data))
                if value is not None and tracer.varies(self):
                    found.append((name, self if value.kind == STATE else None))
            return method(self, *args, **kwargs)
        read.__name__, read.__doc__ = method.__name__, method.__doc__
        return read

    properties = {name: Tensor.__dict__[name] for name in _AUTOGRAD_READERS}

    def noted(name, prop):
        def read(self):
            got = prop.fget(self)
            if not _inside(sys._getframe(1)):
                value = tracer.value_of.get(id(self._data))
                if name == "grad":  # (one from before the trace: a gradient build made
                    made = got is not None and tracer.varies(got)  # is the plan's)
                    if not made:
                        found.append((name, (self, got)))
                elif value is not None and value.kind != CONST:
                    found.append((name, self if value.kind == STATE else None))
            return got
        return property(read, prop.fset, None, prop.__doc__)

    for name, method in originals.items():
        setattr(Tensor, name, watched(name, method))
    for name, prop in properties.items():
        setattr(Tensor, name, noted(name, prop))
    try:
        yield
    finally:
        for name, method in {**originals, **properties}.items():
            setattr(Tensor, name, method)


# autograd state the user's code reads in build (`if x.requires_grad:`, `p.grad is None`)
_AUTOGRAD_READERS = ("requires_grad", "is_leaf", "grad_fn", "grad")


def layout_watches(found, flat, state):
    """The entries `check_layouts` checks after build's layout reads `found`: input position
    -> (how, traced layout); ("state", j) -> (how, traced layout, the tensor, its array)."""
    watches = _autograd_watches(found, flat)
    found = [(name, t) for name, t in found if name not in _AUTOGRAD_READERS]
    if not found:
        return watches
    how = exact_place if any(name in _ADDRESS for name, _ in found) else exact_layout
    read = {id(t) for _, t in found if t is not None}
    everything = any(t is None for _, t in found)  # (an input, a view, a result: all
    #                                                 inputs' and state's)
    watches.update((i, (how, how(t))) for i, t in enumerate(flat)
                   if everything and isinstance(t, Tensor))
    watches.update((("state", j), (how, how(t), t, t._data)) for j, t in enumerate(state)
                   if everything or id(t) in read)
    return watches


def alias_watch(flat, state, writes):
    """The entry `check_layouts` checks when the traced inputs were one tensor twice (`f(x,
    x)`: the trace binds both positions to one value, and the plan reads one of them for
    both) or a parameter or buffer, or when the plan writes into an input (`writes`) and
    another input shares memory with it or might on another call: the plan is compiled for
    the traced aliasing, so each call's must be the same."""
    traced = _aliasing(flat, state, bool(writes))
    if not traced and not writes:
        return {}
    # (the state's arrays looked at each call only when an input was one: mha(q, q, q)
    # compares its inputs alone)
    held = state if any(type(j) is not int for _, j, _ in traced) else ()
    return {"aliasing": (_aliasing, traced, held, bool(writes))}


def _aliasing(flat, state, overlapping):
    """(i, j, whether they are one array) for each two inputs that are one array (or share
    an element: `overlapping`), and (i, ("state", j), True) for an input that is the array of
    state tensor j."""
    arrays = [(i, t._data) for i, t in enumerate(flat) if isinstance(t, Tensor)]
    found = [(i, j, a is b) for n, (i, a) in enumerate(arrays) for j, b in arrays[n + 1:]
             if a is b or overlapping and shares_elements(a, b)]
    held = {id(t._data): j for j, t in enumerate(state)}
    return tuple(found + [(i, ("state", held[id(a)]), True) for i, a in arrays
                          if id(a) in held])


def _autograd_watches(found, flat):
    """The entries for build's reads of autograd state: every input's requires_grad and
    leafness after a read of an input's or a result's (requires_grad, is_leaf, grad_fn: the
    plan keeps the branch taken); the .grad, by identity, of each parameter, captured tensor
    or input whose .grad was read (`p.grad is None`, a value of it)."""
    watches = {}
    if any(name != "grad" and t is None for name, t in found):
        watches["autograd"] = (_autograd_state, _autograd_state(flat))
    grads, traced, seen = [], [], set()
    for name, read in found:
        if name == "grad" and id(read[0]) not in seen:
            t, got = read
            seen.add(id(t))
            grads.append(next((i for i, f in enumerate(flat) if f is t), t))
            traced.append(_Same(got))  # (as read: before build's backward, if any)
    if grads:
        watches["grads"] = (_grads, tuple(traced), grads)
    return watches


def _autograd_state(flat):
    return tuple((t.requires_grad, t.grad_fn is None) for t in flat if isinstance(t, Tensor))


def _grads(flat, tensors):
    return tuple(_Same((flat[t] if type(t) is int else t).grad) for t in tensors)


def layout(tensor):
    """A tensor's strides in elements, 0 for a dim of size 1 (any stride does there)."""
    return tuple(0 if n == 1 else st for n, st in zip(tensor.shape, tensor.stride()))


def written_state_watch(program, state):
    """The entries for the parameters and buffers build wrote into through a reshape of them
    (`self.buf.reshape(-1).add_(1)`): a view of a contiguous one, a copy of another (eagerly
    the write then misses it), so each call's layout must be the traced one."""
    if not program.writebacks:
        return {}
    written = {id(t) for t in program.writebacks}
    origin = {v.id: v.source for v in program.states if id(v.source) in written}
    reshaped = set()
    for node in program.nodes:  # (value id -> the state tensor it views)
        if getattr(node.op, "is_view", False) and node.inputs:
            t = origin.get(node.inputs[0].id)
            if t is not None:
                if getattr(node.op, "name", None) == "reshape":
                    reshaped.add(id(t))
                origin.update((out.id, t) for out in node.outputs)
    return {("state", j): (layout, layout(t), t, t._data) for j, t in enumerate(state)
            if id(t) in reshaped}


def check_layouts(graph_name, layouts, flat):
    """Raise where an input's or a watched parameter's layout is not the traced one, or the
    inputs' aliasing is not the traced one."""
    for key, (how, traced, *held) in layouts.items():
        if type(key) is str:  # (reads of the call's inputs: aliasing, autograd state)
            now = how(flat, *held)
            if now != traced:
                raise StalePlanError(_CHANGED[key](graph_name, traced, now))
            continue
        if held and held[0]._data is held[1]:
            continue  # (the same array: the same layout and address)
        tensor = held[0] if held else flat[key]
        now = how(tensor)
        if now == traced:
            continue
        if how is exact_layout or how is exact_place:
            what = f"input {key}" if held == [] else (f"a parameter or buffer of shape "
                                                       f"{tuple(tensor.shape)}")
            raise StalePlanError(_layout_changed(graph_name, what, traced, now))
        if held:
            raise StalePlanError(
                f"nn.Graph {graph_name}: a parameter or buffer of shape "
                f"{tuple(tensor.shape)} has strides {tensor.stride()}, and build() wrote into "
                f"it through a reshape when it had strides {traced}: a view of it then, a copy "
                f"now (eagerly the write would not reach it). Keep it contiguous (p.data = "
                f"w.contiguous()), write into it directly, or build a new graph")
        raise RuntimeError(
            f"nn.Graph {graph_name}: input {key} has strides {tensor.stride()}, and "
            f"build() wrote into the input traced with strides {traced}: whether a write "
            f"through a view or reshape of it reaches the input depends on its layout, and "
            f"the plan keeps the traced one. Pass inputs of one layout (x.contiguous()), or "
            f"write into a clone inside build")


def _layout_changed(graph_name, what, traced, now):
    address = (f" and address {traced[2]:#x}", f" and address {now[2]:#x}") if len(
        traced) > 2 else ("", "")
    return (f"nn.Graph {graph_name}: build() read a layout (is_contiguous(), stride(), "
            f"storage_offset() or data_ptr()) while it was traced, when {what} had strides "
            f"{traced[0]}, storage offset {traced[1]}{address[0]}; it has strides {now[0]}, "
            f"storage offset {now[1]}{address[1]} this call. The plan keeps what build "
            f"computed from the traced layout (a branch taken, a number read). Pass inputs "
            f"of one layout (x.contiguous()), keep parameters contiguous (p.data = "
            f"w.contiguous()), keep build's code independent of layouts, or use flow.compile, "
            f"which traces anew for another layout")


def _aliasing_changed(graph_name, traced, now):
    def show(pairs):
        return ", ".join(f"input {i} {'is' if same else 'overlaps'} "
                         f"{'input ' if type(j) is int else 'state tensor '}"
                         f"{j if type(j) is int else j[1]}" for i, j, same in pairs) or "none"
    return (f"nn.Graph {graph_name}: the inputs shared memory when the graph was traced "
            f"({show(traced)}) unlike this call ({show(now)}): the plan was compiled for the "
            f"traced aliasing (one tensor passed twice is one value of the plan; a write into "
            f"an input reaches the inputs sharing its memory), and would give other numbers "
            f"than eager. Pass the inputs aliased as when traced (x.clone() for a distinct "
            f"one), or use flow.compile, which traces anew")


def _autograd_changed(graph_name, traced, now):
    return (f"nn.Graph {graph_name}: build() read an input's requires_grad, is_leaf or "
            f"grad_fn while it was traced, when the inputs had (requires_grad, is a leaf) "
            f"{traced}; they have {now} this call. The plan keeps the branch build took. "
            f"Pass inputs as when traced, or use flow.compile, which traces anew")


def _grads_changed(graph_name, traced, now):
    return (f"nn.Graph {graph_name}: build() read a tensor's .grad while it was traced (its "
            f"gradient then: {traced}); it is another one this call ({now}): the plan keeps "
            f"the traced one (a branch on `p.grad is None`, or its values). Pass the gradient "
            f"to the graph as an input, or use flow.compile, which traces anew")


_CHANGED = {"aliasing": _aliasing_changed, "autograd": _autograd_changed,
            "grads": _grads_changed}
