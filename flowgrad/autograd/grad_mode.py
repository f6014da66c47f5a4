"""Grad mode: whether the AutogradInterpreter records ops. Thread-local, like torch's.

`no_grad`, `enable_grad`, `set_grad_enabled` and `inference_mode` work as context managers
and as decorators (`@no_grad()` or bare `@no_grad`).

>>> import flowgrad as flow
>>> x = flow.ones(2, requires_grad=True)
>>> with flow.no_grad():
...     (x * 2).requires_grad
False
"""
from __future__ import annotations

import functools
import inspect
import threading


class _GradState(threading.local):
    enabled = True  # a class attribute: every new thread starts with grad mode on


_state = _GradState()


def is_grad_enabled() -> bool:
    """True when ops record a backward graph in this thread."""
    return _state.enabled


class _GradMode:
    """Sets grad mode to `self.mode` inside a `with` block or a decorated function.

    `mode = None` leaves grad mode as it is.
    """

    mode: bool | None = True

    def __new__(cls, *args, **kwargs):
        # bare decorator form: @no_grad applied straight to a function
        if cls in (no_grad, enable_grad, inference_mode) and len(args) == 1 and callable(args[0]):
            return cls()(args[0])
        return super().__new__(cls)

    def __enter__(self):
        self._prev = _state.enabled
        if self.mode is not None:
            _state.enabled = self.mode

    def __exit__(self, *exc):
        _state.enabled = self._prev
        return False

    def __call__(self, fn):
        mode = self.mode
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(fn, lambda: _Mode(mode))

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = _state.enabled
            if mode is not None:
                _state.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                _state.enabled = prev
        return wrapper


class _Mode(_GradMode):
    """Grad mode `mode` (None: as it is) for one step of a decorated generator."""

    def __init__(self, mode):
        self.mode = mode


def _wrap_generator(fn, context):
    """A decorated generator runs each step (not just its creation) inside `context()`."""
    def in_mode(step, *args):
        with context():
            return step(*args)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        gen = fn(*args, **kwargs)
        try:
            response = in_mode(gen.send, None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    in_mode(gen.close)
                    raise
                except BaseException as exc:
                    response = in_mode(gen.throw, exc)
                else:
                    response = in_mode(gen.send, request)
        except StopIteration as stop:
            return stop.value
    return wrapper


class no_grad(_GradMode):  # noqa: N801 - torch's name
    """Disable recording: ops run, outputs do not require grad.

    >>> import flowgrad as flow
    >>> x = flow.ones(2, requires_grad=True)
    >>> with flow.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    >>> @flow.no_grad()
    ... def f(t):
    ...     return t + 1
    >>> f(x).requires_grad
    False
    """

    mode = False


class enable_grad(_GradMode):  # noqa: N801
    """Re-enable recording inside a `no_grad` block.

    >>> import flowgrad as flow
    >>> x = flow.ones(2, requires_grad=True)
    >>> with flow.no_grad():
    ...     with flow.enable_grad():
    ...         y = x * 2
    >>> y.requires_grad
    True
    """

    mode = True


class set_grad_enabled(_GradMode):  # noqa: N801
    """Set grad mode to `mode`. Takes effect at once, so a plain call works too.

    >>> import flowgrad as flow
    >>> x = flow.ones(1, requires_grad=True)
    >>> with flow.set_grad_enabled(False):
    ...     y = x * 2
    >>> y.requires_grad, flow.is_grad_enabled()
    (False, True)
    """

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._prev = _state.enabled
        _state.enabled = self.mode

    def __enter__(self):
        pass  # __init__ already switched

    def __call__(self, fn):
        _state.enabled = self._prev  # used as a decorator: undo the switch __init__ made
        return super().__call__(fn)


_multithreading = [True]


def is_multithreading_enabled() -> bool:
    """The flag `set_multithreading_enabled` sets (True by default).

    >>> import flowgrad as flow
    >>> flow.autograd.is_multithreading_enabled()
    True
    """
    return _multithreading[0]


class set_multithreading_enabled:  # noqa: N801 - torch's name
    """torch's switch for running backward on per-device threads. flowgrad's engine runs on the
    calling thread either way (one CPU device), so the flag is recorded for
    `is_multithreading_enabled` and changes nothing else. A context manager, a decorator, or
    a plain call.

    >>> import flowgrad as flow
    >>> with flow.autograd.set_multithreading_enabled(False):
    ...     flow.autograd.is_multithreading_enabled()
    False
    """

    def __init__(self, mode: bool):
        self.mode, self._prev = bool(mode), _multithreading[0]
        _multithreading[0] = self.mode

    def __enter__(self):
        pass  # __init__ already switched

    def __exit__(self, *exc):
        _multithreading[0] = self._prev
        return False

    def __call__(self, fn):
        _multithreading[0] = self._prev  # used as a decorator: undo the switch __init__ made

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev, _multithreading[0] = _multithreading[0], self.mode
            try:
                return fn(*args, **kwargs)
            finally:
                _multithreading[0] = prev
        return wrapper


class inference_mode(_GradMode):  # noqa: N801
    """Like `no_grad`, cheaper, and the results are inference tensors (`is_inference()`),
    which autograd refuses later (saved for backward, written in place outside inference
    mode). `inference_mode(False)` turns grad mode on, as torch's does. See `inference.py`.

    >>> import flowgrad as flow
    >>> x = flow.ones(1, requires_grad=True)
    >>> with flow.inference_mode():
    ...     y = x * 2
    >>> y.requires_grad, y.is_inference()
    (False, True)
    """

    def __init__(self, mode: bool = True):
        self.inference = bool(mode)
        self.mode = not mode

    def __enter__(self):
        self._prev = _state.enabled
        _state.enabled = self.mode
        self._prev_inference = inference.state.enabled
        if self.inference:
            inference.enter()
        else:
            inference.state.enabled = False

    def __exit__(self, *exc):
        _state.enabled = self._prev
        if self.inference:
            inference.leave(self._prev_inference)
        else:
            inference.state.enabled = self._prev_inference
        return False

    def __call__(self, fn):
        mode = self.inference
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(fn, lambda: inference_mode(mode))

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper


# inference.py reaches this module through the interpreter: imported once everything here is
# defined, so the blocks above need no import per entry
from . import inference  # noqa: E402
