"""Python containers build changes: a module's or the graph's list or dict attribute that
build appends to or stores into (`self.cache["k"] = k.detach()` of a decoder's cache,
`self.outputs.append(h)`, a counter in a dict) changes once, while build is traced, where
eagerly every call changes it; the plan would run on without repeating it. `contents` takes
the containers' items before the trace, `refuse_container_writes` compares them after it by
identity (a container nested in one, two levels down, too) and refuses a change, putting the
items back. The same for the plain globals and closure variables build reads (`global CALLS;
CALLS += 1`, `SIZES.append(n)`), compared by value.
"""
from __future__ import annotations

import reprlib

from ..nn.module import Module
from ..tensor import Tensor
from .group_reads import watched_exactly
from .ir import CONST, NODE
from .passes import is_random
from .plan_checks import _GONE, _module_settings
from .python_reads import (
    _plain_container,
    _plain_value,
    _Scope,
    _snapshot,
    is_python_read,
    python_reads,
)

_DEPTH = 2  # (self.cache["layer0"]["k"]: containers nested this deep are compared too)


def contents(graph):
    """(object, its path, attribute, container, its items) for each list or dict attribute
    of the graph and of the user's modules (not a Module's own: its hooks and stores); and
    the plain globals and closure variables build's code reads (`python_reads`'s walk: a
    counter, a list of numbers), to refuse a change build makes to them."""
    return _attribute_contents(graph), _plain_reads(graph)


def _plain_reads(graph):
    modules = [s for m in graph._modules.values() for s in m.modules()]
    settings = python_reads(graph, modules, _module_settings, graph._state(),
                            watched_exactly)[0]
    return [(store, path, name, value) for store, path, name, value in settings
            if is_python_read(path) and (_plain_value(value) or _plain_container(value))]


def _attribute_contents(graph):
    found = [(graph, "the graph", name, value, _items(value))
             for name, value in vars(graph).items()
             if not name.startswith("_") and _container(value)]
    for top, module in graph._modules.items():
        for path, sub in module.named_modules(prefix=top):
            if type(sub).__module__.startswith("flowgrad"):
                continue  # (flowgrad's modules keep no such state; their caches are theirs)
            found += [(sub, f"module {path!r} ({type(sub).__name__})", name, value,
                       _items(value)) for name, value in vars(sub).items()
                      if name not in _internal() and "hook" not in name and _container(value)]
    return found


def refuse_container_writes(graph, before, tracer):
    """Raise (the items put back) where build changed a container `contents` took, unless
    it only added keys holding constants (a memo: self.masks[n] = flow.triu(...), which
    eagerly the next call reads back the same), or a plain global or closure variable."""
    before, plain = before
    changed = [(store, path, name, value, store.__dict__.get(name, _GONE))
               for store, path, name, value in plain]
    # (a tensor stored there is an escape: warned about, `escapes.warn_escaped`)
    changed = [c for c in changed if c[4] is not c[3] and c[4] != c[3] and (
        _plain_value(c[4]) or _plain_container(c[4]))]
    shown = [(path, reprlib.repr(value), reprlib.repr(now)) for _, path, _, value, now in changed]
    for store, _, name, value, now in changed:  # (put back: the failed trace leaves none)
        if type(now) is type(value) and type(value) is list:
            now[:] = _snapshot(value)
        elif type(now) is type(value) and type(value) is dict:
            now.clear()
            now.update(_snapshot(value))
        elif type(store) is _Scope:
            store.__dict__[name] = value
    if changed:
        path, value, now = shown[0]
        for _, _, _, v, held in before:
            _put_back(v, held)
        raise NotImplementedError(
            f"nn.Graph {graph._name}: build() changed {path} from {value} to "
            f"{now} at trace time, a Python side effect its compiled plan "
            f"cannot repeat on later calls (eagerly each call changes it). Keep such state in "
            f"a tensor (a buffer updated in place), return it from build, or change it "
            f"outside build")
    for obj, where, name, value, items in before:
        now = _items(value)
        if now == items or isinstance(value, dict) and _memo_fill(items, now, tracer):
            continue
        for _, _, _, v, held in before:
            _put_back(v, held)
        raise NotImplementedError(
            f"nn.Graph {graph._name}: build() changed {where}'s {type(value).__name__} "
            f"attribute {name} (an item stored, appended or removed) at trace time, a Python "
            f"side effect its compiled plan cannot repeat on later calls (eagerly each call "
            f"changes it). Keep such state in a buffer updated in place (a cache: "
            f"self.register_buffer('{name}_k', flow.zeros(shape)) and .copy_(new)), return "
            f"it from build and store it outside, or change the {type(value).__name__} "
            f"outside build")


def _memo_fill(items, now, tracer):
    """Whether `now` is `items` with keys added whose values are constants of the trace
    (tensors it does not recompute per call, or containers of them)."""
    held = dict(items)
    if len(now) <= len(held) or any(
            k in held and held[k] != item for k, item in now):
        return False
    return all(_constant(item, tracer) for k, item in now if k not in held)


def _constant(item, tracer):
    if type(item) is tuple:  # (a nested container: its items)
        return all(_constant(v, tracer) for _, v in item[1])
    tensor = item.item
    if not isinstance(tensor, Tensor):
        return False
    value = tracer.value_of.get(id(tensor._data))
    todo, seen = [value] if value is not None else [], set()
    while todo:  # (made of constants only: no input, state or random draw upstream)
        value = todo.pop()
        if value.kind == CONST or value.id in seen:
            continue
        seen.add(value.id)
        node = value.source
        if value.kind != NODE or is_random(node):
            return False
        todo += node.inputs
    return True


def _container(value):
    return type(value) is list or isinstance(value, dict)


class _Held:
    """An item compared by identity."""

    __slots__ = ("item",)

    def __init__(self, item):
        self.item = item

    def __eq__(self, other):
        return type(other) is _Held and other.item is self.item


def _items(value, depth=0):
    """(keys, items) of a list or dict: nested ones as their own `_items`, others `_Held`."""
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    return [(k, (v, _items(v, depth + 1)) if depth < _DEPTH and _container(v) else _Held(v))
            for k, v in pairs]


def _put_back(value, items):
    """Give a container (and those nested in it) the items `_items` took."""
    kept = []
    for k, item in items:
        if type(item) is tuple:
            _put_back(*item)
            kept.append((k, item[0]))
        else:
            kept.append((k, item.item))
    if isinstance(value, dict):
        value.clear()
        value.update(kept)
    else:
        value[:] = [v for _, v in kept]


_INTERNAL = []


def _internal():
    """The attributes every Module has (its parameters, buffers, hooks): flowgrad's."""
    if not _INTERNAL:
        _INTERNAL.append(frozenset(vars(Module())))
    return _INTERNAL[0]
