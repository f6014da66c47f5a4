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

from ..device import ARRAY_MODULES, HOST_XP
from ..errors import kernel_error
from . import interpreter as _interpreter
from .meta import VersionCounter


class _InferenceState(threading.local):
    enabled = False


state = _InferenceState()
# One entry per inference_mode block open in any thread: the interpreter is installed while
# there is one. list.append/pop are atomic, so no lock; a block entered just as another
# thread's last one leaves may see the plain interpreter put back: its ops then run as under
# no_grad (same values, no graph), only their results are not marked as inference tensors.
_open_blocks: list = []


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


class DetachedCounter(VersionCounter):
    """The counter of detach() or .data of an inference tensor outside inference mode:
    torch gives that alias a version counter of its own, so it counts writes and may be
    written, yet it is still an inference tensor (its views are not: they track no versions
    and refuse writes outside inference mode, as inference tensors)."""

    __slots__ = ()


def alias_counter(t):
    """The version counter of detach()'s alias of `t`: t's own (made now if t has none), or
    for an inference tensor a new DetachedCounter (INFERENCE_COUNTER in inference mode)."""
    counter = t._counter
    if counter is None:
        counter = t._counter = VersionCounter()
    elif counter.__class__ is not VersionCounter:
        return INFERENCE_COUNTER if state.enabled else DetachedCounter()
    return counter


def data_alias(t, alias):
    """`alias` (t.data) made an inference tensor where t is one, as torch's."""
    counter = t._counter
    if counter is not None and counter.__class__ is not VersionCounter:
        alias._counter = INFERENCE_COUNTER if state.enabled else DetachedCounter()
    return alias


def tracks_no_versions(t):
    """Whether `t` (with a counter that is not a plain VersionCounter) is an inference tensor
    without versions: made in inference mode, or a view of a DetachedCounter's tensor."""
    return t._counter is INFERENCE_COUNTER or t._view is not None


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
        n_in = len(inputs)  # (as AutogradInterpreter.apply: a tuple for one or two inputs)
        arrays = ((inputs[0]._data,) if n_in == 1 else (inputs[0]._data, inputs[1]._data)
                  if n_in == 2 else [t._data for t in inputs])
        xp = ARRAY_MODULES.get(type(arrays[0]), HOST_XP) if arrays else HOST_XP
        try:
            result = op.kernel(xp, *arrays, **attrs)
        except (ValueError, IndexError, TypeError) as error:
            raise kernel_error(op, inputs, error) from None
        if op.is_view and inputs[0]._counter is not INFERENCE_COUNTER:
            return _normal_views(op, inputs, attrs, result)
        if op.n_out == 1 and type(result) is not tuple:
            out = _new(_interpreter.Tensor)
            out._data = result if type(result) is np.ndarray else xp.asarray(result)
            out._meta = out._grad_fn = out._view = None
            out._counter = INFERENCE_COUNTER
            return out
        wrap = _interpreter.Tensor._wrap
        n_out = len(result) if op.n_out is None else op.n_out
        outs = tuple(wrap(r) for r in result[:n_out])
        for out in outs:
            out._counter = INFERENCE_COUNTER
        return outs if n_out != 1 or op.n_out is None else outs[0]


def _normal_views(op, inputs, attrs, result):
    """A view of a normal tensor stays a normal tensor (torch's): a view sharing its base's
    version counter, as under no_grad; a copy (reshape that could not view) is inference."""
    single = op.n_out == 1 and type(result) is not tuple
    n_out = 1 if single else len(result) if op.n_out is None else op.n_out
    src = inputs[0]
    outs = []
    for i, r in enumerate((result,) if single else result[:n_out]):
        out = _interpreter.Tensor._wrap(r)
        if _interpreter._shares(out._data, src._data):
            _interpreter.mark_view(src, out, op, attrs, None if single else i)
        else:
            out._counter = INFERENCE_COUNTER
        outs.append(out)
    return outs[0] if single or (n_out == 1 and op.n_out is not None) else tuple(outs)


def enter():
    state.enabled = True
    _open_blocks.append(None)
    if _interpreter.current is _interpreter.AutogradInterpreter:
        _interpreter.install(InferenceInterpreter)


def leave(previous):
    state.enabled = previous
    _open_blocks.pop()
    if not _open_blocks and _interpreter.current is InferenceInterpreter:
        _interpreter.install(_interpreter.AutogradInterpreter)


def check_write(tensor):
    """An in-place write to an inference tensor: only inside inference mode (torch's), or
    to a detached alias of one (a DetachedCounter's, not through its views)."""
    if not state.enabled and tracks_no_versions(tensor):
        raise RuntimeError(
            f"Inplace update to inference tensor (shape {tuple(tensor.shape)}) outside "
            f"InferenceMode is not allowed. You can make a clone to get a normal tensor before "
            f"doing inplace update.")


def check_requires_grad(tensor):
    if not state.enabled:
        raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                           "InferenceMode is not allowed.")
