"""flowgrad.profiler: where the time of a training step goes, as torch.profiler.

Inside `profile()`, every op call, every node the backward engine runs (with the ops its
gradient rule calls) and every `record_function` range is timed; `key_averages().table()`
prints torch's table (self and total CPU time per name), `export_chrome_trace` writes a trace
for chrome://tracing or Perfetto, and a `schedule` records chosen steps of a loop only.

>>> import flowgrad as flow
>>> from flowgrad.profiler import profile, record_function, ProfilerActivity
>>> x = flow.ones(8, 8, requires_grad=True)
>>> with profile(activities=[ProfilerActivity.CPU]) as prof:
...     with record_function("step"):
...         (x @ x).tanh().sum().backward()
>>> sorted({e.key for e in prof.key_averages()})[:3]
['add', 'expand', 'matmul']
"""
from __future__ import annotations

import enum
import functools
import gzip
import os
import socket
import time

from .._warn import warn
from ..autograd import profiling as _profiling
from .events import EventList, FunctionEvent, FunctionEventAvg, flatten

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities", "EventList", "FunctionEvent",
           "FunctionEventAvg"]


class ProfilerActivity(enum.Enum):
    """What a profile records: the CPU (the device flowgrad runs on) or accelerators."""

    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    """What a schedule says to do at a step."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def supported_activities():
    """The activities a profile can record here: the CPU."""
    return {ProfilerActivity.CPU}


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """Steps to skip (`skip_first`), then cycles of `wait` idle steps, `warmup` steps and
    `active` recorded steps (the last one's end hands the cycle to on_trace_ready),
    `repeat` times (0: forever), as torch's.

    >>> from flowgrad.profiler import schedule
    >>> s = schedule(wait=1, warmup=1, active=2)
    >>> [s(i).name for i in range(5)]
    ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE', 'NONE']
    """
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("Invalid profiler schedule arguments")
    if warmup == 0:
        warn("Profiler won't be using warmup, this can skew profiler results")

    def action(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def _always_record(step):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An on_trace_ready that writes each trace to `dir_name` as
    `<worker_name>.<time in ns>.pt.trace.json` (gzipped with use_gzip), as torch's."""
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"

    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        name = f"{worker}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        path = os.path.join(dir_name, name)
        if use_gzip:
            plain = path[:-3]
            prof.export_chrome_trace(plain)
            with open(plain, "rb") as src, gzip.open(path, "wb") as dst:
                dst.write(src.read())
            os.remove(plain)
        else:
            prof.export_chrome_trace(path)
    return handler


class profile:  # noqa: N801 - torch's name
    """Record the ops, backward nodes and ranges run inside the block (or between start()
    and stop()); with a `schedule`, only the steps it says to record (call `step()` once per
    step), handing each finished cycle to `on_trace_ready(prof)`.

    Only CPU activity exists here: asking for others warns once and records the CPU's.
    `record_shapes` keeps each op's input shapes (key_averages(group_by_input_shape=True));
    `profile_memory`, `with_stack`, `with_flops` and `with_modules` are accepted and record
    nothing more."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False,
                 use_cuda=None, custom_trace_id_callback=None):
        activities = set(activities) if activities is not None else supported_activities()
        if use_cuda:
            activities.add(ProfilerActivity.CUDA)
        others = activities - supported_activities()
        if others:
            warn(f"profile: flowgrad runs on the CPU; {sorted(a.name for a in others)} "
                 f"activity is not recorded")
        self.activities = activities
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.acc_events = acc_events
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._recorder = None
        self._origin = time.perf_counter_ns()
        self._events = EventList()

    # ---- running ---------------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        self.current_action = self.schedule(self.step_num)
        self._transit(ProfilerAction.NONE, self.current_action)

    def stop(self):
        self._finish_cycle(save=self.current_action in _RECORDING)
        self.current_action = ProfilerAction.NONE

    def step(self):
        """A step of the loop ended: the schedule decides what the next one records."""
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(previous, self.current_action)

    def _transit(self, previous, now):
        if previous == ProfilerAction.RECORD_AND_SAVE:
            self._finish_cycle(save=True)
        elif previous in _RECORDING and now not in _RECORDING:
            self._finish_cycle(save=False)
        if now in _RECORDING and self._recorder is None:
            self._recorder = _profiling.start(self.record_shapes)

    def _finish_cycle(self, save):
        recorder, self._recorder = self._recorder, None
        if recorder is None:
            return
        _profiling.stop(recorder)
        events = flatten(recorder.events, self._origin)
        if self.acc_events:
            self._events.extend(events)
        else:
            self._events = events
        if save and self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # ---- results ----------------------------------------------------------------------------
    def events(self):
        """Every recorded event (parents before their children)."""
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """The events added up per name (and input shapes): an EventList whose table() is
        torch's."""
        return self._events.key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path):
        self._events.export_chrome_trace(path)


class record_function:  # noqa: N801 - torch's name
    """A named range in the profile (around the ops it runs); a context manager or a
    decorator. Outside a profile it records nothing and costs a list test."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self._opened = None

    def __enter__(self):
        self._opened = _profiling.begin_range(self.name)
        return self

    def __exit__(self, *exc):
        _profiling.end_range(self._opened)
        self._opened = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return wrapped
