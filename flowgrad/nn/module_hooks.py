"""Global module hooks, as torch.nn.modules.module's: hooks every Module call runs (before the
module's own), and hooks every registration of a parameter, buffer or submodule runs.

Profilers, activation statistics and FLOP counters use them: one registration sees every
layer of every model. Each `register_module_*` returns a handle whose `remove()` drops it.

>>> import flowgrad as flow
>>> from flowgrad import nn
>>> seen = []
>>> handle = nn.modules.module.register_module_forward_hook(
...     lambda module, args, output: seen.append(type(module).__name__))
>>> _ = nn.Sequential(nn.Linear(2, 2), nn.ReLU())(flow.ones(1, 2))
>>> handle.remove()
>>> seen
['Linear', 'ReLU', 'Sequential']
"""
from __future__ import annotations

from collections import OrderedDict

from .._warn import warn
from ..hook_handles import RemovableHandle

__all__ = ["register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_pre_hook", "register_module_full_backward_hook",
           "register_module_backward_hook", "register_module_buffer_registration_hook",
           "register_module_module_registration_hook",
           "register_module_parameter_registration_hook"]

FORWARD_PRE = OrderedDict()
FORWARD = OrderedDict()
FORWARD_WITH_KWARGS = OrderedDict()  # id -> True: the hook takes (module, args, kwargs, out)
FORWARD_ALWAYS = OrderedDict()  # forward hooks that run even when forward raises
BACKWARD_PRE = OrderedDict()
BACKWARD = OrderedDict()
BUFFER_REGISTRATION = OrderedDict()
MODULE_REGISTRATION = OrderedDict()
PARAMETER_REGISTRATION = OrderedDict()
# every call hook's handle id: Module.__call__ tests this one dict before looking further
CALL_HOOKS = OrderedDict()


def _register(store, hook, call_hook=True):
    handle = RemovableHandle(store)
    store[handle.id] = hook
    if call_hook:
        handle._also_in(CALL_HOOKS)
    return handle


def register_module_forward_pre_hook(hook):
    """`hook(module, args)` before every module's forward (and its own pre-hooks); a
    non-None result replaces the args."""
    return _register(FORWARD_PRE, hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """`hook(module, args, output)` (with_kwargs: `(module, args, kwargs, output)`) after
    every module's forward, before its own forward hooks; a non-None result replaces the
    output. With always_call it runs (output None) even when forward raises."""
    handle = _register(FORWARD, hook)
    if with_kwargs:
        handle._also_in(FORWARD_WITH_KWARGS)
    if always_call:
        handle._also_in(FORWARD_ALWAYS)
    return handle


def register_module_full_backward_pre_hook(hook):
    """`hook(module, grad_output)` when every module's output gradients are known, before the
    module's own; it may return a replacement grad_output."""
    return _register(BACKWARD_PRE, hook)


def register_module_full_backward_hook(hook):
    """`hook(module, grad_input, grad_output)` when every module's input gradients are
    computed, before the module's own; it may return a replacement grad_input."""
    return _register(BACKWARD, hook)


def register_module_backward_hook(hook):
    """torch's deprecated non-full global backward hook: here a full one, and warned of (as
    `Module.register_backward_hook`)."""
    from .module import _NON_FULL_HOOK

    warn(_NON_FULL_HOOK, FutureWarning)
    return _register(BACKWARD, hook)


def register_module_buffer_registration_hook(hook):
    """`hook(module, name, buffer)` at every buffer registration; a non-None result is
    registered instead."""
    return _register(BUFFER_REGISTRATION, hook, call_hook=False)


def register_module_module_registration_hook(hook):
    """`hook(module, name, submodule)` at every submodule registration; a non-None result is
    registered instead."""
    return _register(MODULE_REGISTRATION, hook, call_hook=False)


def register_module_parameter_registration_hook(hook):
    """`hook(module, name, param)` at every parameter registration; a non-None result is
    registered instead."""
    return _register(PARAMETER_REGISTRATION, hook, call_hook=False)


def registered(store, module, name, value):
    """`value` after the registration hooks of `store` (each may replace it)."""
    for hook in list(store.values()):
        output = hook(module, name, value)
        if output is not None:
            value = output
    return value
