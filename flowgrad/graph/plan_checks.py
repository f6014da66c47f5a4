"""What a compiled plan assumes about the graph's modules and optimizers, and what build may
not change while it is traced: the plain settings of modules and of the graph (`training`, a
dropout's p), the param groups' options, the tensors bound as parameters and buffers, the
hooks, and the state's shapes and dtypes. `Graph` snapshots them when it compiles and checks
them on every call (a change raises StalePlanError); a buffer that build assigns anew is a
write-back of the plan (`_rebound`), a tensor attribute it sets is bound to the plan's result
after each call, and a draw from Python's or NumPy's global random stream is refused
(`refuse_host_draws`)."""
from __future__ import annotations

import random

import numpy as np

from .. import dtypes as _dtypes
from ..amp import autocast_mode as _amp
from ..autograd import interpreter as _interpreter
from ..device import array_module
from ..nn import module_hooks as _global_hooks
from ..nn.parameter import Parameter
from ..random import _mt19937_bytes, _put_mt19937_bytes
from ..tensor import Tensor

_GONE = object()
_PLAIN = (bool, int, float, complex, str, type(None), np.generic)


def ambient(amp_configured):
    """The global state a plan's numbers depend on outside the graph: the default float dtype
    (the dtype of a Python float or a float factory in build) and the lower-precision dtype
    of the enabled CPU autocast region the graph is called in (None outside one, or when the
    graph's own config.enable_amp decides), and the interpreter current then (a cheap first
    look for `Graph._run`: the same one and the same default dtype, the same state)."""
    current = _interpreter.current
    return (_dtypes._default_float[0], None if amp_configured or type(
        current) is not _amp.AutocastInterpreter or not _amp.state.enabled["cpu"] else
        _amp.state.dtype["cpu"], type(current))


def _settings(graph, reads):
    """(object, its path, attribute, value) of every plain setting of the graph's modules
    (`training`, a dropout's p, a norm's eps and momentum...) and of the graph itself that
    build read (`reads`: a number such as self.scale): a plan computes with the values they
    had when it was traced."""
    found = [(graph, "self", name, value) for name, value in vars(graph).items()
             if (reads is None or name in reads) and _plain(name, value)]
    for top, module in graph._modules.items():
        for path, sub in module.named_modules(prefix=top):
            found += _module_settings(sub, path)
    return found


def _module_settings(module, path):
    return [(module, path, name, value) for name, value in vars(module).items()
            if name == "training" or _plain(name, value)]


def _refuse_setting_writes(graph, before):
    """build() changed a plain attribute of the graph or a module (`self.steps += 1`): a
    Python side effect the plan cannot repeat, so later calls would silently skip it. The
    attributes are put back as they were (the failed trace leaves no trace)."""
    for obj, path, name, value in before:
        now = obj.__dict__.get(name, _GONE)
        if value is None and isinstance(now, Tensor):
            continue  # (self.last = attn.detach(): bound by the plan each call, `_rebound`)
        if now is not value and now != value:
            for o, _, n, v in before:
                o.__dict__[n] = v
            where = "the graph" if obj is graph else f"module {path!r} ({type(obj).__name__})"
            raise NotImplementedError(
                f"nn.Graph {graph._name}: build() changed {where}'s attribute {name} from "
                f"{value!r} to {now!r} at trace time, a Python side effect its compiled plan "
                f"cannot repeat on later calls. Keep such state in a tensor updated with ops "
                f"(a buffer: self.register_buffer('{name}', flow.zeros(())) and "
                f"self.{name}.add_(1)), or change it outside build")


def _rebound(graph, rebinds):
    """The buffers and tensor attributes build assigned a new tensor to (`self.avg =
    self.avg * 0.9 + x.mean()`, `self.last = attn.detach()`, where eagerly each call rebinds
    them; `rebinds`: (store, path, name, tensor before, held), from the tracer), as two lists:
    (store, name, traced tensor, new tensor) where a tensor was there before, for the plan to
    write the new values into the tensor it read (one of the same shape and dtype); (store,
    name, new tensor) where none was (None, or no such attribute), for each call to bind the
    plan's result anew. A parameter rebound, or a tensor given another shape or dtype or
    None, is refused (all put back as they were)."""
    rebinds, written, bound = list(rebinds), [], []
    for store, path, name, old, _ in rebinds:
        new = store.get(name)
        if new is old:
            continue
        if isinstance(new, Tensor) and not isinstance(new, Parameter):
            if not isinstance(old, Tensor):
                bound.append((store, name, new))
                continue
            if not isinstance(old, Parameter) and (new.shape, new.dtype) == (old.shape,
                                                                                old.dtype):
                written.append((store, name, old, new))
                continue
        put_back(rebinds)
        raise NotImplementedError(
            f"nn.Graph {graph._name}: build() assigned {type(new).__name__} "
            f"{tuple(getattr(new, 'shape', ()))} to {path} (a {type(old).__name__} of shape "
            f"{tuple(getattr(old, 'shape', ()))} when traced); a compiled plan keeps the "
            f"tensors it traced. Write new values into it in place (with flow.no_grad(): "
            f"self.{name}.copy_(new)), or change it outside build")
    return written, bound


def put_back(rebinds):
    """Undo build's assignments (`rebinds` as `_rebound` takes them): a refused or failed
    trace leaves the modules holding the tensors they held before the call."""
    for store, _, name, old, held in rebinds:
        if held:
            store[name] = old
        else:
            store.pop(name, None)


def host_random_states():
    """The states of Python's `random` and NumPy's global `np.random` streams. NumPy's is the
    bytes of its bit generator's C struct (MT19937: key[624], pos), read and written back
    through its address (`random._mt19937_bytes`): its get_state() copies the key into a
    dict, ~0.1 ms on every first call."""
    return random.getstate(), _mt19937_bytes(_numpy_bits())


def _numpy_bits():
    return np.random.mtrand._rand._bit_generator


def refuse_host_draws(graph, before):
    """build() drew from Python's `random` or NumPy's global stream (`random.random()`,
    `np.random.rand()`, a mixup's Beta draw): once, at trace time, where eagerly every call
    draws anew; the plan would reuse the numbers. Both streams put back, then refused."""
    (py_state, np_state), (py_now, np_now) = before, host_random_states()
    # (a draw moves a stream's position, a refill rewrites its key: the position, the key's
    # ends and the cached gaussian tell a draw without comparing 625 numbers)
    py_key, key = py_state[1], py_now[1]
    py_drew = (key[624], key[0], key[623], py_now[2]) != (py_key[624], py_key[0],
                                                          py_key[623], py_state[2])
    if not py_drew and np_now == np_state:
        return
    random.setstate(py_state)
    _put_mt19937_bytes(_numpy_bits(), np_state)
    which = "Python's random module" if py_drew else "NumPy's global np.random"
    raise RuntimeError(
        f"nn.Graph {graph._name}: build() drew numbers from {which} while it was traced, once: "
        f"the compiled plan would reuse them on every call, where eagerly each call draws "
        f"anew. Draw inside build with flowgrad's random ops (flow.rand, flow.randn, "
        f"flow.randint, flow.distributions' rsample/sample), which a plan draws anew each "
        f"call, or draw outside build and pass the number to the graph as an argument")


def _group_settings(graph):
    """(param group, a copy of its plain options) for every group of the graph's optimizers."""
    return [(group, {k: v for k, v in group.items() if _plain(k, v)})
            for optimizer, _ in graph._optimizers for group in optimizer.param_groups]


def _refuse_group_writes(graph, before):
    """build() changed an optimizer's option (`param_groups[0]['lr'] *= 0.5`): done once, at
    trace time, where eagerly every step would do it; put back, then refused."""
    for group, options in before:
        now = {k: v for k, v in group.items() if _plain(k, v)}
        changed = [k for k in set(now) | set(options) if now.get(k, _GONE) is not
                   options.get(k, _GONE) and now.get(k, _GONE) != options.get(k, _GONE)]
        if changed:
            name = changed[0]
            for g, o in before:
                g.update(o)
                for k in [k for k in g if _plain(k, g[k]) and k not in o]:
                    del g[k]
            raise NotImplementedError(
                f"nn.Graph {graph._name}: build() changed an optimizer's param group option "
                f"{name!r} from {options.get(name)!r} to {now.get(name)!r} at trace time, a "
                f"Python side effect its compiled plan cannot repeat on later calls. Change "
                f"it outside build, between calls (the plan reads the groups' options at "
                f"every call), or with an lr scheduler given to add_optimizer")


def _plain(name, value):
    return not name.startswith("_") and (isinstance(value, _PLAIN) or isinstance(
        value, tuple) and all(isinstance(v, _PLAIN) for v in value))


def _bindings(graph, bound=()):
    """(store, path, name, object) for every submodule, parameter, buffer and plain tensor
    attribute under the graph's modules: a plan holds the objects it traced, so replacing
    one (module.weight = Parameter(...), module.scale = flow.tensor(3.0)) must be refused,
    not ignored. `bound`: (store, name) pairs each call of
    the plan binds anew (a buffer that held None before build assigned it)."""
    skip = {(id(store), name) for store, name in bound}
    found = []
    for top, module in graph._modules.items():
        found.append((graph._modules, "self", top, module))
        for path, sub in module.named_modules(prefix=top):
            for kind in ("_modules", "_parameters", "_buffers"):
                store = sub.__dict__[kind]
                found += [(store, path, name, value) for name, value in store.items()
                          if (id(store), name) not in skip]
            store = sub.__dict__  # plain tensor attributes (self.scale = flow.tensor(2.0))
            found += [(store, path, name, value) for name, value in store.items()
                      if isinstance(value, Tensor) and (id(store), name) not in skip]
    return found


def _hooks(graph, state):
    """(hook store, its hooks) for every module hook dict under the graph's modules and every
    tensor hook list of its state (their metas' lists, made on first registration, are
    watched through the meta): a plan runs the hooks it traced, so registering or removing
    one afterwards must be refused, not ignored."""
    found = [(store, tuple(store)) for store in (  # the global module hooks too
        _global_hooks.FORWARD_PRE, _global_hooks.FORWARD, _global_hooks.BACKWARD_PRE,
        _global_hooks.BACKWARD)]
    for module in graph._modules.values():
        for sub in module.modules():
            for name in ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks",
                         "_backward_hooks"):
                store = sub.__dict__[name]
                found.append((store, tuple(store)))
    for t in state:
        meta = t._meta
        if meta is not None:
            found.append((_TensorHooks(meta), tuple(_TensorHooks(meta))))
    return found


class _TensorHooks:
    """A meta's tensor and post-accumulate-grad hooks, iterated as one (lists made lazily)."""

    __slots__ = ("meta",)

    def __init__(self, meta):
        self.meta = meta

    def __iter__(self):
        meta = self.meta
        yield from meta.hooks or ()
        yield from meta.post_accumulate_hooks or ()


def _state_meta(state):
    """(shape, dtype) of each state tensor's array: a plan is compiled for them."""
    return [(t._data.shape, t._data.dtype) for t in state]


def _trainable(state):
    """(the state tensors, which of them require grad): a plan is compiled for one such set."""
    state = tuple(state)
    return state, tuple(t.requires_grad for t in state)


def same_array(now, seen):
    """Whether a read guard's array still holds the values build read: the same bits (one
    pass, no NaN test: a big array a plan copied is compared on each call), else equal."""
    if now.shape != seen.shape or now.dtype != seen.dtype:
        return False
    bits = _BITS.get(now.itemsize) if now.flags.c_contiguous and now.dtype.kind != "O" else None
    return bits is not None and bool((now.view(bits) == seen.view(bits)).all()) or bool(
        array_module(now).array_equal(now, seen, equal_nan=now.dtype.kind in "fcV"))


_BITS = {1: "u1", 2: "u2", 4: "u4", 8: "u8"}


def _refuse_without_grad(graph):
    """A training graph called under no_grad: eagerly its backward raises; the plan would
    train on (an eval loop calling the training graph by mistake)."""
    if graph._compiled[0].differentiated:
        raise RuntimeError(
            f"nn.Graph {graph._name}: called under no_grad (or inference_mode), and its build "
            f"calls backward: element 0 of tensors does not require grad and does not have a "
            f"grad_fn, as the eager step raises. Call the training graph with grad enabled, "
            f"and use a graph without an optimizer for evaluation")
