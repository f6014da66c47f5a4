"""The Python values a compiled plan froze from outside the graph's modules: the globals and
closure variables that build, the methods of the user's module classes and the functions they
call read (a temperature, a loss weight, a schedule's factor in a global; a tensor or module
bound to a name). The plan computed with the values they had when it was traced; eagerly each
call reads them anew (torch.compile guards them and recompiles). `python_reads` lists them
after the trace in the forms `Graph._run` checks on every call: settings (compared by value)
and bindings (compared by identity), so a change raises StalePlanError (and flow.compile
traces anew) instead of giving the traced numbers.
"""
from __future__ import annotations

import argparse
import dis
import functools
import os
import sys
import sysconfig
import types
import weakref

import numpy as np

from ..nn import module_hooks as _global_hooks
from ..nn.module import Module
from ..optim.lr_scheduler import LRScheduler
from ..optim.optimizer import Optimizer
from ..tensor import Tensor
from .ir import CONST
from .sites import _PACKAGE

_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic)
_LIBRARIES = tuple(os.path.realpath(p) for p in {
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"]})
_DEPTH = 4  # functions calling functions: how deep the walk follows them


class _Scope:
    """A function's globals seen as an object's attributes (`__dict__`), as settings are."""

    def __init__(self, namespace):
        self.__dict__ = namespace


class _Cell:
    """A closure variable seen as an attribute (`__dict__`, `get`), as settings are."""

    __slots__ = ("_cell",)

    def __init__(self, cell, name):
        self._cell = (cell, name)

    @property
    def __dict__(self):
        cell, name = self._cell
        try:
            return {name: cell.cell_contents}
        except ValueError:  # (emptied: del of the variable)
            return {}

    def get(self, name, default=None):
        return self.__dict__.get(name, default)


class _Group:
    """An optimizer's param group i seen as an object's attributes (`__dict__`), as settings
    are: the group the optimizer holds at each call (load_state_dict puts new dicts in)."""

    __slots__ = ("_at",)

    def __init__(self, optimizer, i):
        self._at = (optimizer, i)

    @property
    def __dict__(self):
        optimizer, i = self._at
        groups = optimizer.param_groups
        return groups[i] if i < len(groups) else {}


def is_python_read(path):
    """Whether a binding's `path` is one `python_reads` made (a global or closure variable)."""
    return path.startswith(("global ", "closure variable "))


def _plain_value(value):
    return isinstance(value, _SCALARS) or type(value) is tuple and all(
        _plain_value(v) for v in value)


@functools.lru_cache(maxsize=1024)
def _global_names(code):
    """The global names `code` and the code nested in it (comprehensions, lambdas) load."""
    names, codes = set(), [code]
    while codes:
        c = codes.pop()
        names.update(i.argval for i in dis.get_instructions(c)
                     if i.opname in ("LOAD_GLOBAL", "LOAD_NAME"))
        codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return tuple(sorted(names))


def _users(code):
    """Whether `code` is the user's (not flowgrad's, the standard library's or a package's)."""
    return _users_file(code.co_filename)


def _user_object(value):
    """An instance of a user class holding settings (a config object: cfg.temperature)."""
    kind = type(value)
    if not isinstance(getattr(value, "__dict__", None), dict) or isinstance(
            value, (Module, Tensor, type, types.ModuleType, types.FunctionType,
                    types.MethodType, functools.partial)):
        return False
    if kind.__module__ == "__main__" or kind in _CONFIGS:
        return True
    filename = getattr(sys.modules.get(kind.__module__), "__file__", None)
    return filename is not None and _users_file(filename)


_CONFIGS = (argparse.Namespace, types.SimpleNamespace)  # (args.temperature)


@functools.lru_cache(maxsize=1024)
def _users_file(filename):
    return not filename.startswith((_PACKAGE, "<frozen")) and not os.path.realpath(
        filename).startswith(_LIBRARIES)


def _methods(cls):
    """The functions the user's classes in `cls`'s MRO define (flowgrad's are not looked at;
    nor __init__: not run by a call, what it reads is not traced)."""
    where = _METHODS.get(cls)
    if where is None:  # (found once per class: where in its MRO, by name)
        where = _METHODS[cls] = tuple(
            (i, name) for i, c in enumerate(cls.__mro__)
            if not c.__module__.startswith("flowgrad") and c is not object
            for name, f in vars(c).items()
            if isinstance(f, types.FunctionType) and f.__name__ != "__init__")
    mro = cls.__mro__
    found = (vars(mro[i]).get(name) for i, name in where)
    return tuple(f for f in found if isinstance(f, types.FunctionType))  # (one deleted since)


# class -> [(position in its MRO, name)] of `_methods`: weak, and without the functions (a
# method using super() holds its class), so a class no graph uses any more is not kept
# alive here with whatever its methods' closures hold (an lru_cache kept 1024 of them, and
# each one it evicted became garbage for the cycle collector inside a later first call)
_METHODS = weakref.WeakKeyDictionary()


def python_reads(graph, modules, settings_of, state=(), watched=lambda stepper: False):
    """(settings, bindings, arrays) for the Python values the traced code read outside
    `modules` (the graph's modules and their submodules): plain values and the plain
    attributes of user objects by value, tensors, modules and NumPy arrays by identity, and a
    NumPy array's values too (arrays: (it as a tensor, its values), read guards). A
    module reached that way has its settings watched too (`settings_of`), and its methods
    walked; so are the hooks of the modules and of the `state` tensors. An optimizer or
    scheduler `watched` says the trace noted the reads of is left to those notes."""
    roots = [type(graph).build, *_methods(type(graph)), *_hook_functions(modules, state)]
    inside = {id(m) for m in modules}
    # (add_optimizer's: the plan reads their options each call; build names them to test
    # `opt is not None`)
    registered = {id(s) for pair in graph._optimizers for s in pair if s is not None}
    settings, bindings, seen, codes, lists, arrays = [], [], set(), [], [], []
    for cls in {type(m) for m in modules}:
        roots += _methods(cls)
    for module in (graph, *modules):  # (the graph's own: self.cfg, self.weights in build)
        for name, value in vars(module).items():
            if name[0] == "_" or type(value) in _SKIPPED:  # (most: a setting, _parameters)
                continue
            if isinstance(value, types.FunctionType):
                roots.append(value)
            elif _plain_container(value) or isinstance(value, np.ndarray) or \
                    _tensor_container(value):  # (if the code names it: self.cache["k"])
                lists.append((module, name, value))
            elif isinstance(value, _STEPPERS) and id(value) not in registered:  # (self.opt)
                settings += _stepper_settings(value, f"attribute {name} of a "
                                                     f"{type(module).__name__}", watched)
            elif _user_object(value):  # (self.cfg.temperature)
                settings += _object_settings(
                    value, f"attribute {name} of a {type(module).__name__}: {name}")
    todo = [(f, 0) for f in roots]
    while todo:
        fn, depth = todo.pop()
        code = getattr(fn, "__code__", None)
        if code is None or id(code) in seen or depth > _DEPTH:
            continue
        seen.add(id(code))
        users = _users(code)
        if users:
            codes.append(code)
        found = []
        if users:
            scope = _Scope(fn.__globals__)
            module_name = fn.__globals__.get("__name__", "?")
            found += [(scope, f"global {n} of {module_name}", n, fn.__globals__[n])
                      for n in _global_names(code) if n in fn.__globals__]
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if users or isinstance(value, types.FunctionType):
                found.append((_Cell(cell, name), f"closure variable {name} of "
                              f"{fn.__qualname__}", name, value))
        for store, path, name, value in found:
            if isinstance(value, types.FunctionType):
                todo.append((value, depth + 1))
            elif _plain_value(value):
                settings.append((store, path, name, value))
            elif _plain_container(value):  # (CFG["temperature"], WEIGHTS = [1.0, 2.0])
                settings.append((store, path, name, _snapshot(value)))
            elif _tensor_container(value):  # (CACHE["k"], MEMORY[-1]: tensors by identity)
                settings.append((_Contents(store, name), path, name, _form(value)))
            elif isinstance(value, dict):  # (CFG["weights"][0] of a NumPy array, CFG["scale"])
                _dict_items(value, path, settings, bindings, arrays)
            elif isinstance(value, np.ndarray):  # (flow.tensor(WEIGHTS), WEIGHTS[0])
                bindings.append((store.__dict__ if type(store) is _Scope else store, path,
                                 name, value))
                arrays.append((Tensor._wrap(value), value.copy()))
            elif isinstance(value, (Tensor, Module)):
                if id(value) in inside:
                    continue
                bindings.append((store.__dict__ if type(store) is _Scope else store, path,
                                 name, value))
                if isinstance(value, Tensor):
                    continue
                for sub in value.modules():
                    if id(sub) not in inside:
                        inside.add(id(sub))
                        settings += settings_of(sub, f"{path}")
                        todo += [(f, depth + 1) for f in _methods(type(sub))]
            elif isinstance(value, _STEPPERS) and id(value) not in registered:
                settings += _stepper_settings(value, path, watched)
            elif _user_object(value):
                settings += _object_settings(value, f"{path}: {name}")
            if users and (isinstance(value, types.FunctionType) or not isinstance(
                    value, _SETTINGS)):
                # (rebound: DIST = Normal(...), P = partial(...), ACT = flow.tanh)
                bindings.append((store.__dict__ if type(store) is _Scope else store, path,
                                 name, value))
    # the user's classes' plain attributes that the code walked names (class Net: scale = 2.0,
    # read as self.scale)
    classes, named = {}, set()
    for cls in {type(graph), *map(type, modules)}:
        classes.update((id(c), c) for c in cls.__mro__ if not c.__module__.startswith(
            "flowgrad") and c is not object)
    for code in codes:
        named.update(_names(code))
    for cls in classes.values():
        settings += [(cls, f"class attribute {name} of {cls.__qualname__}", name, value)
                     for name, value in vars(cls).items()
                     if name in named and not name.startswith("_") and _plain_value(value)]
    for module, name, value in lists:
        if name not in named:
            continue
        if _tensor_container(value):
            settings.append((_Contents(module, name), f"attribute {name} of a "
                             f"{type(module).__name__}", name, _form(value)))
            continue
        if not isinstance(value, np.ndarray):
            settings.append((module, f"a {type(module).__name__}", name, _snapshot(value)))
            continue
        bindings.append((module.__dict__, f"attribute {name} of a {type(module).__name__}",
                         name, value))
        arrays.append((Tensor._wrap(value), value.copy()))
    return settings, bindings, arrays


_STEPPERS = (Optimizer, LRScheduler)
# (what the walk compares by value, or binds itself, or what is no value of the code's)
_SETTINGS = (*_SCALARS, tuple, list, dict, np.ndarray, Tensor, Module, type, types.ModuleType,
             types.BuiltinFunctionType, types.FunctionType)


def _object_settings(value, path, depth=0):
    """The plain attributes (values, containers) of a user object the code reached
    (cfg.temperature, cfg.weights), and of the user objects it holds (cfg.inner.scale)."""
    found = []
    for k, v in vars(value).items():
        if k.startswith("_"):
            continue
        if _plain_value(v) or _plain_container(v):
            found.append((value, f"{path}.{k}", k, _snapshot(v)))
        elif depth < _NESTING and _user_object(v):
            found += [(value, f"{path}.{k}", k, v)] + _object_settings(v, f"{path}.{k}",
                                                                      depth + 1)
    return found


def _stepper_settings(value, path, watched):
    """An optimizer or lr scheduler the traced code reached (OPT.param_groups[0]['lr'],
    SCHED.get_last_lr()[0] in build, where eagerly each call reads the rate a scheduler or
    the user set since): its param groups' plain options, and a scheduler's epoch and last
    rates, compared on each call as settings are; none for one whose reads the trace noted
    (`watched`: group_reads.watched_exactly)."""
    found = []
    if watched(value):
        return found
    if isinstance(value, LRScheduler):
        found += [(value, f"{path}: {name}", name, _snapshot(v) if type(v) is list else v)
                  for name, v in vars(value).items() if name in ("last_epoch", "_last_lr")]
        value = getattr(value, "optimizer", None)
    if isinstance(value, Optimizer):
        found += [(_Group(value, i), f"{path}: param_groups[{i}][{k!r}]", k, v)
                  for i, group in enumerate(value.param_groups) for k, v in group.items()
                  if type(k) is str and _plain_value(v)]
    return found


_SKIPPED = frozenset((bool, int, float, str, type(None), tuple, Tensor))


def _plain_container(value, depth=0):
    """A list or dict (or a tuple holding them) of plain values or such containers, nested
    (a lookup table TABLE[i][j]): compared by its contents on each call (a deep copy taken
    after the trace), as a change in place keeps its identity. A long one too: the
    comparison is C's, ~1 ns an element, and a change to an element the plan read, unseen,
    gave the traced numbers."""
    kind = type(value)
    if depth > _NESTING or kind is not list and kind is not tuple and not isinstance(
            value, dict):  # (an OrderedDict, a defaultdict too)
        return False
    items = value.items() if kind is not list and kind is not tuple else (
        (None, v) for v in value)
    return all(_plain_value(k) and (_plain_value(v) or _plain_container(v, depth + 1))
               for k, v in items)


def _snapshot(value):
    """A copy of a plain container, its nested lists and dicts copied too (not deepcopy's
    memo: a long table is copied at C's speed)."""
    kind = type(value)
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return kind(_snapshot(v) for v in value) if any(
            type(v) in _NESTED or isinstance(v, dict) for v in value) else kind(value)
    return value


_NESTED = (list, tuple)


def _tensor_container(value, depth=0):
    """A list, tuple or dict holding tensors (and plain values, or such containers): a cache
    (self.cache["k"]), a memory (self.mem[-1]) the user changes between calls."""
    kind = type(value)
    if depth > _NESTING or kind is not list and kind is not tuple and not isinstance(
            value, dict):
        return False
    tensors = False
    for v in value.values() if isinstance(value, dict) else value:
        if isinstance(v, Tensor) or _tensor_container(v, depth + 1):
            tensors = True
        elif not (_plain_value(v) or _plain_container(v)):
            return False
    return tensors


def _form(value, depth=0):
    """A tensor container as compared on each call: tensors by identity (`_Same`), plain
    values by value, the containers' kinds, lengths and keys."""
    if isinstance(value, Tensor) or depth > _NESTING:
        return _Same(value)
    if isinstance(value, dict):
        return (type(value), tuple((k, _form(v, depth + 1)) for k, v in value.items()))
    if type(value) in _NESTED:
        return (type(value), tuple(_form(v, depth + 1) for v in value))
    return _snapshot(value) if _plain_container(value) else value


class _Same:
    """An object compared by identity (holding it: its id is not reused)."""

    __slots__ = ("held",)

    def __init__(self, held):
        self.held = held

    def __eq__(self, other):
        return type(other) is _Same and other.held is self.held

    def __hash__(self):
        return id(self.held)

    def __repr__(self):
        return f"{type(self.held).__name__} at {id(self.held):#x}"


class _Contents:
    """A tensor container bound to a name, seen as an attribute holding its `_form`."""

    __slots__ = ("_of",)

    def __init__(self, store, name):
        self._of = (store, name)

    @property
    def __dict__(self):
        store, name = self._of
        found = store.__dict__
        return {name: _form(found[name])} if name in found else {}


_NESTING = 8  # (deeper, or a container holding itself: not compared)


def _dict_items(value, path, settings, bindings, arrays):
    """The items of a dict the traced code read that is not all plain: a NumPy array or a
    tensor by identity (and the array's values), a plain value or container by value."""
    scope = _Scope(value)
    for key, item in value.items():
        where = f"{path}[{key!r}]"
        if isinstance(item, (np.ndarray, Tensor)):
            bindings.append((value, where, key, item))
            if isinstance(item, np.ndarray):
                arrays.append((Tensor._wrap(item), item.copy()))
        elif _plain_value(item) or _plain_container(item):
            settings.append((scope, where, key, _snapshot(item)))




def _hook_functions(modules, state):
    """The functions of the module hooks (the modules' and the global ones) and of the state
    tensors' hooks: build runs them too."""
    found = [*_global_hooks.FORWARD_PRE.values(), *_global_hooks.FORWARD.values(),
             *_global_hooks.BACKWARD_PRE.values(), *_global_hooks.BACKWARD.values()]
    for module in modules:
        own = module.__dict__
        for name in ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks",
                     "_backward_hooks"):
            found += own[name].values()
    for t in state:
        meta = t._meta
        if meta is not None:
            found += [*(meta.hooks or ()), *(meta.post_accumulate_hooks or ())]
    return [getattr(f, "__func__", f) for f in found]


@functools.lru_cache(maxsize=1024)
def _names(code):
    """The names (attributes, globals) `code` and the code nested in it refer to."""
    names, codes = set(), [code]
    while codes:
        c = codes.pop()
        names.update(c.co_names)
        codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return frozenset(names)


def copied_arrays(arrays, program):
    """The `arrays` whose values the plan copied (flow.tensor(WEIGHTS), WEIGHTS[0]), not
    those it reads by reference (flow.from_numpy(BUFFER): a captured tensor sharing the
    array's memory sees each call's values, as eagerly)."""
    if not arrays:
        return []
    frozen = getattr(program, "frozen", ())
    shared = [v.source._data for v in program.values if v.kind == CONST and
              v.id not in frozen and type(v.source._data) is np.ndarray]
    return [(t, seen) for t, seen in arrays
            if not any(np.may_share_memory(t._data, a) for a in shared)]
