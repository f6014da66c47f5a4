"""What `flowgrad.profiler` records, at the two places work happens: every op call (an
interpreter wrapping the current one, as autocast's) and every node the backward engine runs
(`GraphTask.apply` wraps its runner while a recorder is on), plus the user's ranges
(`record_function`). Each is an `Event` (name, start and end in ns, the events inside it);
nothing is recorded, and nothing costs, while no profiler is on.

>>> import flowgrad as flow
>>> from flowgrad.autograd import profiling
>>> recorder = profiling.start()
>>> x = flow.ones(2, requires_grad=True)
>>> (x * 3).sum().backward()
>>> profiling.stop(recorder)
>>> [(e.name, [c.name for c in e.children]) for e in recorder.events][2:]
[('sum_backward', ['expand']), ('scalar_mul_backward', ['scalar_mul'])]
"""
from __future__ import annotations

import threading
import time

from . import interpreter as _interpreter
from .inference import InferenceInterpreter

_clock = time.perf_counter_ns
ACTIVE = []  # the recorders on (nested profiles: each records), read by the engine once per
# backward run


class Event:
    """One timed piece of work: an op, a backward node, a user's range."""

    __slots__ = ("name", "kind", "start", "end", "children", "shapes", "thread")

    def __init__(self, name, kind, shapes=None):
        self.name, self.kind, self.shapes = name, kind, shapes
        self.children = []
        self.thread = threading.get_ident()
        self.start = _clock()
        self.end = None


class Recorder:
    """The events of one profiling run: the top-level ones in `events` (each holding those
    that ran inside it), per thread."""

    def __init__(self, record_shapes=False):
        self.record_shapes = record_shapes
        self.events = []
        self._open = threading.local()

    def begin(self, name, kind, inputs=()):
        shapes = None
        if self.record_shapes:
            shapes = [list(t.shape) if hasattr(t, "shape") and hasattr(t, "_data") else []
                      for t in inputs]
        event = Event(name, kind, shapes)
        stack = getattr(self._open, "stack", None)
        if stack is None:
            stack = self._open.stack = []
        (stack[-1].children if stack else self.events).append(event)
        stack.append(event)
        return event

    def finish(self, event):
        event.end = _clock()
        stack = self._open.stack
        while stack:  # (an event left open by an error inside it closes with its parent)
            if stack.pop() is event:
                break


class ProfilingInterpreter:
    """Times each op call, then hands it to the interpreter it wraps."""

    def __init__(self, inner, recorder):
        self.restore = inner
        # (inference mode installs itself over the plain eager interpreter only; it falls
        # back to eager outside inference mode, so it is wrapped in eager's place, as
        # autocast's interpreter does)
        self.inner = InferenceInterpreter if inner is _interpreter.AutogradInterpreter else inner
        self.recorder = recorder

    def apply(self, op, inputs, attrs):
        recorder = self.recorder
        if recorder is None:
            return self.inner.apply(op, inputs, attrs)
        event = recorder.begin(op.name, "op", inputs)
        try:
            return self.inner.apply(op, inputs, attrs)
        finally:
            recorder.finish(event)

    def __getattr__(self, name):  # the hooks of the interpreter wrapped (read, varies, ...)
        return getattr(self.inner, name)


def start(record_shapes=False):
    """Start recording; returns the Recorder. Recorders nest: each one on records every op,
    node and range (torch's inner profile takes the events from the outer one)."""
    recorder = Recorder(record_shapes)
    ACTIVE.append(recorder)
    wrapper = ProfilingInterpreter(_interpreter.current, recorder)
    _interpreter.install(wrapper)
    recorder.wrapper = wrapper
    return recorder


def stop(recorder):
    """Stop recording into `recorder`; its interpreter steps aside (it passes calls on if
    another interpreter was installed over it meanwhile)."""
    if recorder in ACTIVE:
        ACTIVE.remove(recorder)
    wrapper = recorder.wrapper
    wrapper.recorder = None
    if _interpreter.current is wrapper:
        _interpreter.install(wrapper.restore)


def timed_runner(run_node):
    """GraphTask's node runner, timing each node the backward runs (with the ops its rule
    calls inside it) for every recorder on."""
    recorders = list(ACTIVE)

    def run(node, deps, targets):
        opened = [(r, r.begin(str(node.name), "backward")) for r in recorders]
        try:
            run_node(node, deps, targets)
        finally:
            for recorder, event in opened:
                recorder.finish(event)
    return run


def begin_range(name):
    """A user's range (`record_function`): [(recorder, its Event)] for every recorder on
    (none while nothing records)."""
    return [(r, r.begin(name, "user")) for r in ACTIVE]


def end_range(opened):
    for recorder, event in opened or ():
        recorder.finish(event)
