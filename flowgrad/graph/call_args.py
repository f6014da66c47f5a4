"""How a call's arguments become a plan's inputs and its outputs come back: build's
parameters bound (`bound_to_build`), inputs flattened and checked against the compiled
signature, the micro-batches of gradient accumulation, and nested results rebuilt."""
from __future__ import annotations

import functools
import inspect
import types

from ..nn.module import Module
from ..return_types import sequence_of
from ..tensor import Tensor

_AS_GIVEN = -2  # build takes *args or **kwargs: calls are never rebound
_PLAIN_KINDS = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def bound_to_build(graph, args, kwargs):
    """The call's arguments by build's parameters, every one given (defaults filled in) and
    positional where it can be: a plan reads its inputs by position, so `graph(x, bias=b)`
    after `graph(x, mask=m)` must not hand b in as the traced mask (now: an input None where
    the plan had a tensor, refused), while `graph(x, m)` and `graph(x, mask=m)` are one call.
    A build taking *args or **kwargs, or arguments build would refuse, are left as given."""
    cls = type(graph)
    arity = cls.__dict__.get("_build_arity")
    if arity is None:
        arity = _plain_arity(graph.build)
        type.__setattr__(cls, "_build_arity", arity)
    if arity == _AS_GIVEN or not kwargs and len(args) == arity:
        return args, kwargs
    signature = cls.__dict__.get("_build_signature")
    if signature is None:
        try:
            signature = inspect.signature(graph.build)
        except (TypeError, ValueError):
            signature = False
        kinds = [p.kind for p in signature.parameters.values()] if signature else []
        if any(k not in _PLAIN_KINDS + (inspect.Parameter.KEYWORD_ONLY,) for k in kinds):
            signature = False
        type.__setattr__(cls, "_build_signature", signature)
    if not signature:
        return args, kwargs
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return args, kwargs
    bound.apply_defaults()
    return bound.args, bound.kwargs


def _plain_arity(build):
    """How many arguments `build` (a bound method of a plain function) takes when all its
    parameters are plain positional ones without defaults; `_AS_GIVEN` when it takes *args or
    **kwargs (a call is never rebound); else -1 (inspect.signature decides). Read off the
    code object: the usual first call then needs no inspect.signature (tens of microseconds)."""
    build = getattr(build, "__func__", None) if type(build) is types.MethodType else None
    code = getattr(build, "__code__", None)
    if code is None or type(build) is not types.FunctionType or hasattr(build, "__wrapped__"):
        return -1
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        return _AS_GIVEN
    if build.__defaults__ or code.co_kwonlyargcount:
        return -1
    return code.co_argcount - 1


_SCALARS = (int, float, bool, str)


def flatten_inputs(args, kwargs):
    """The call's inputs in order (keywords by name). Tensors are the plan's inputs; None,
    Python scalars and flat lists or tuples of them (sequence lengths) are build's arguments,
    part of the compiled signature as values."""
    flat = list(args) + [kwargs[k] for k in sorted(kwargs)]
    for i, a in enumerate(flat):
        if not (a is None or isinstance(a, (Tensor,) + _SCALARS) or isinstance(
                a, (list, tuple)) and all(isinstance(v, _SCALARS) for v in a)):
            raise TypeError(f"nn.Graph: input {i} is a {type(a).__name__}; a graph takes "
                            f"tensors, None, Python scalars and lists or tuples of scalars")
    return flat


def flatten_outputs(out):
    """The tensors of a (nested) result, in order, and a function rebuilding the structure
    from tensors in that order. (Iterative: a recursive closure here was a reference cycle
    that kept the trace's whole eager graph alive until the cycle collector ran.)"""
    leaves, root = [], [None]
    todo = [(out, root, 0)]  # (object, the container its spec goes into, at which key)
    while todo:
        obj, into, key = todo.pop()
        if isinstance(obj, Tensor):
            into[key] = len(leaves)
            leaves.append(obj)
        elif isinstance(obj, (list, tuple)):
            inner = [None] * len(obj)
            into[key] = (type(obj), inner)
            todo += [(o, inner, i) for i, o in reversed(list(enumerate(obj)))]
        elif isinstance(obj, dict):
            inner = dict.fromkeys(obj)
            into[key] = (dict, inner)
            todo += [(v, inner, k) for k, v in reversed(list(obj.items()))]
        elif obj is None:
            into[key] = None
        else:
            raise TypeError(f"nn.Graph: build() returned a {type(obj).__name__}; return "
                            f"tensors, or lists, tuples and dicts of them")
    return leaves, functools.partial(_rebuild, root[0])


def _rebuild(spec, tensors):
    """The structure `spec` (from _flatten_outputs) with `tensors` in its places."""
    root = [None]
    todo = [(spec, root, 0)]
    sequences = []  # (container, key, kind, items): made once their items are (inner first)
    while todo:
        item, into, key = todo.pop()
        if item is None:
            into[key] = None
        elif isinstance(item, int):
            into[key] = tensors[item]
        else:
            kind, inner = item
            if kind is dict:
                into[key] = made = dict.fromkeys(inner)
                todo += [(v, made, k) for k, v in inner.items()]
            else:
                items = [None] * len(inner)
                sequences.append((into, key, kind, items))
                todo += [(v, items, i) for i, v in enumerate(inner)]
    for into, key, kind, items in reversed(sequences):
        into[key] = sequence_of(kind, items)
    return root[0]


def micro_batches(args, kwargs, steps, parts):
    """The (args, kwargs) of each micro-batch: tensors split along dim 0, the rest as given.
    An input that requires grad is split into leaves (`parts[id]`: it and its chunks), whose
    gradients the caller gathers into it."""
    def split(obj):
        if not isinstance(obj, Tensor):
            return [obj] * steps
        if obj.ndim == 0 or obj.shape[0] % steps:
            raise RuntimeError(f"nn.Graph: gradient accumulation over {steps} micro-batches "
                               f"needs every tensor input's dim 0 divisible by {steps}; got "
                               f"shape {tuple(obj.shape)}")
        if not obj.requires_grad:
            return list(obj.chunk(steps, 0))
        chunks = [c.requires_grad_() for c in obj.detach().chunk(steps, 0)]
        parts[id(obj)] = (obj, chunks)
        return chunks

    arg_parts = [split(a) for a in args]
    kwarg_parts = {k: split(v) for k, v in kwargs.items()}
    return [(tuple(p[i] for p in arg_parts), {k: p[i] for k, p in kwarg_parts.items()})
            for i in range(steps)]


def signature_key(signature):
    return repr(signature)


def input_signature(flat):
    """Each input's meta: a tensor's shape and dtype; any other input's value (a list as a
    tuple tagged with its type: a later change to the caller's list is not the signature's)."""
    return [(tuple(t.shape), t.dtype) if isinstance(t, Tensor) else
            (type(t).__name__, tuple(t)) if isinstance(t, (list, tuple)) else t for t in flat]


def check_signature(expected, actual):
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e != a:
            raise RuntimeError(
                f"nn.Graph ONLY accepts static inputs tensor meta, please check whether your "
                f"input tensor meta each step is the same as the input of first call. The "
                f"expected tensor meta is: {e}, but the actual tensor meta is: {a}. The input "
                f"index is {i}.")
    if len(expected) != len(actual):
        raise RuntimeError(f"nn.Graph: called with {len(actual)} inputs, compiled for "
                           f"{len(expected)}")


def captured_by(fn):
    """The modules and tensors `fn` refers to: its bound self, closure cells, defaults and the
    globals its code (and its nested functions' code) names; a list, tuple or dict among them
    is looked into, once."""
    if isinstance(fn, Module):
        return [fn]
    values = []
    owner = getattr(fn, "__self__", None)
    if owner is not None:
        values.append(owner)
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:  # (a callable object: what it holds)
        values += list(vars(fn).values()) if hasattr(fn, "__dict__") else []
    else:
        for cell in fn.__closure__ or ():
            try:
                values.append(cell.cell_contents)
            except ValueError:  # (a cell not yet filled)
                pass
        values += list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values())
        module_globals = fn.__globals__
        values += [module_globals[n] for n in _names_in(code) if n in module_globals]
    found, seen = [], set()
    for value in values:
        items = list(value.values()) if isinstance(value, dict) else \
            list(value) if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, (Module, Tensor)) and id(item) not in seen:
                seen.add(id(item))
                found.append(item)
    return found


@functools.lru_cache(maxsize=256)
def _names_in(code):
    """The global names `code` and its nested functions' code refer to, sorted: the same on
    every call of a compiled function (`captured_by` runs per call), so found once."""
    names, codes = set(), [code]
    while codes:
        c = codes.pop()
        names.update(c.co_names)
        codes += [k for k in c.co_consts if hasattr(k, "co_names")]
    return tuple(sorted(names))
