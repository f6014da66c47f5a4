"""Inference mode, as torch's: ops run without autograd bookkeeping and make inference tensors.

While a thread is in `inference_mode()`, ops go to the InferenceInterpreter: it runs the kernel
and marks each result as an inference tensor (its version counter is the shared
INFERENCE_COUNTER), skipping what `no_grad` still does (the per-input record check, view
tracking, version counters). Inference tensors are refused later where torch refuses them:
saved for backward, written in place outside inference mode, or set to require grad.

>>> import flowgrad as flow
>>> with flow.inference_mode():
...     y = flow.ones(2) * 2
...     flow.is_inference_mode_enabled()
True
>>> y.is_inference(), (y + 1).is_inference()
(True, False)
"""
from __future__ import annotations

import threading

import numpy as np

from ..device import ARRAY_MODULES
from ..errors import kernel_error
from . import interpreter as _interpreter
from .meta import VersionCounter


class _InferenceState(threading.local):
    enabled = False


state = _InferenceState()
_active = 0  # inference_mode blocks open in any thread: the interpreter is installed while > 0
_lock = threading.Lock()


class InferenceCounter(VersionCounter):
    """The version counter of every inference tensor: inference tensors track no versions
    (torch's), so it always reads 0 and writes go nowhere."""

    __slots__ = ()

    @property
    def value(self):
        return 0

    @value.setter
    def value(self, _):
        pass


INFERENCE_COUNTER = InferenceCounter()
_new = object.__new__


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside `inference_mode()`."""
    return state.enabled


class InferenceInterpreter:
    """Runs ops for threads in inference mode (others go on to the autograd interpreter)."""

    @staticmethod
    def apply(op, inputs, attrs):
        if not state.enabled:  # another thread, or inference_mode(False) inside
            return _interpreter.AutogradInterpreter.apply(op, inputs, attrs)
        if _interpreter.complex_checks and not op.complex:
            _interpreter.refuse_complex(op, inputs)
        if op.is_view and inputs and inputs[0]._version is not INFERENCE_COUNTER:
            # a view of a normal tensor stays a normal tensor (torch's): track it as a view
            return _interpreter.AutogradInterpreter.apply(op, inputs, attrs)
        n_in = len(inputs)  # (as AutogradInterpreter.apply: a tuple for one or two inputs)
        arrays = ((inputs[0]._data,) if n_in == 1 else (inputs[0]._data, inputs[1]._data)
                  if n_in == 2 else [t._data for t in inputs])
        xp = ARRAY_MODULES.get(type(arrays[0]), np) if arrays else np
        try:
            result = op.kernel(xp, *arrays, **attrs)
        except (ValueError, IndexError, TypeError) as error:
            raise kernel_error(op, inputs, error) from None
        if op.n_out == 1 and type(result) is not tuple:
            out = _new(_interpreter.Tensor)
            out._data = result if type(result) is np.ndarray else np.asarray(result)
            out._meta = out._grad_fn = out._view = None
            out._version = INFERENCE_COUNTER
            return out
        wrap = _interpreter.Tensor._wrap
        n_out = len(result) if op.n_out is None else op.n_out
        outs = tuple(wrap(r) for r in result[:n_out])
        for out in outs:
            out._version = INFERENCE_COUNTER
        return outs if n_out != 1 or op.n_out is None else outs[0]


def enter():
    global _active
    state.enabled = True
    with _lock:
        _active += 1
        if _interpreter.current is _interpreter.AutogradInterpreter:
            _interpreter.current = InferenceInterpreter


def leave(previous):
    global _active
    state.enabled = previous
    with _lock:
        _active -= 1
        if _active == 0 and _interpreter.current is InferenceInterpreter:
            _interpreter.current = _interpreter.AutogradInterpreter


def saved_error(tensor):
    return RuntimeError(
        f"Inference tensors cannot be saved for backward (shape {tuple(tensor.shape)}). Please "
        f"do not use Tensors created in inference mode in computation tracked by autograd. "
        f"To work around this, you can make a clone to get a normal tensor and use it in "
        f"autograd, or use `flowgrad.no_grad()` instead of `flowgrad.inference_mode()`.")


def check_write(tensor):
    """An in-place write to an inference tensor: only inside inference mode (torch's)."""
    if not state.enabled:
        raise RuntimeError(
            f"Inplace update to inference tensor (shape {tuple(tensor.shape)}) outside "
            f"InferenceMode is not allowed. You can make a clone to get a normal tensor before "
            f"doing inplace update.")


def check_requires_grad(tensor):
    if not state.enabled:
        raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                           "InferenceMode is not allowed.")
