"""`flow.jit`: TorchScript has no counterpart here; `script` and `trace` hand back the
function or module unchanged (it runs eagerly, the same numbers), with a one-time note. For a
compiled plan use `flow.compile` or `flow.nn.Graph`.

>>> import flowgrad as flow
>>> f = flow.jit.ignore(lambda x: x + 1)
>>> flow.jit.is_scripting(), f(1)
(False, 2)
"""
from __future__ import annotations

import typing

from ._warn import warn

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "is_scripting",
           "is_tracing", "Final", "annotate", "Attribute", "save", "load", "freeze",
           "optimize_for_inference", "interface", "ScriptModule", "ScriptFunction"]

Final = typing.Final
_noted = [False]


def _note(what):
    if not _noted[0]:
        _noted[0] = True
        warn(f"flowgrad.jit.{what}: TorchScript is not available; the object is "
             "returned unchanged and runs eagerly (flow.compile compiles it)",
             UserWarning, stacklevel=3)


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """Return `obj` (a function or module) unchanged, noting it once."""
    _note("script")
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    """Return `func` unchanged (it is not run on `example_inputs`), noting it once."""
    _note("trace")
    return func


def trace_module(mod, inputs=None, *args, **kwargs):
    """Return `mod` unchanged, noting it once."""
    _note("trace_module")
    return mod


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """Return `mod` unchanged: there is no script module to freeze."""
    return mod


def optimize_for_inference(mod, other_methods=None):
    """Return `mod` unchanged."""
    return mod


def ignore(drop=False, **kwargs):
    """Decorator (with or without arguments): leave a function to Python, i.e. unchanged."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    """Decorator: unchanged (TorchScript would replace the body with a raise)."""
    return fn


def export(fn):
    """Decorator: unchanged."""
    return fn


def interface(obj):
    """Decorator: unchanged."""
    return obj


def is_scripting() -> bool:
    """False: code never runs under TorchScript here."""
    return False


def is_tracing() -> bool:
    """False: `jit.trace` does not trace."""
    return False


def annotate(the_type, the_value):
    """Return `the_value` (the type is a TorchScript hint)."""
    return the_value


def Attribute(value, type=None):  # noqa: N802 - torch's name
    """Return `value` (the type is a TorchScript hint)."""
    return value


class ScriptModule:
    """Never instantiated here: `isinstance(m, flow.jit.ScriptModule)` is False."""


class ScriptFunction:
    """Never instantiated here: `isinstance(f, flow.jit.ScriptFunction)` is False."""


def save(m, f, _extra_files=None):
    """Refused: there is no TorchScript archive; save `m.state_dict()` with flow.save."""
    raise NotImplementedError("flowgrad.jit.save: there is no TorchScript; save the "
                              "module's state_dict() with flowgrad.save instead")


def load(f, map_location=None, _extra_files=None):
    """Refused: flowgrad cannot run TorchScript archives."""
    raise NotImplementedError("flowgrad.jit.load: flowgrad cannot run TorchScript archives; "
                              "load a state_dict (torch.save of model.state_dict()) with "
                              "flowgrad.load into the same model written in Python")
