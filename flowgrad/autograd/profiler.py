"""torch.autograd.profiler, the older spelling of flowgrad.profiler: `profile(enabled=True,
record_shapes=...)` records the block; its results read as the newer one's
(`key_averages().table()`, `function_events`, `total_average()`).

>>> import flowgrad as flow
>>> from flowgrad.autograd import profiler
>>> with profiler.profile() as prof:
...     _ = flow.ones(2) * 2
>>> [e.name for e in prof.function_events]
['scalar_mul']
"""
from __future__ import annotations

from ..profiler import EventList, FunctionEvent, FunctionEventAvg, record_function
from ..profiler import profile as _profile

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]


class profile(_profile):  # noqa: N801 - torch's name
    """Record the ops, backward nodes and ranges run inside the block, unless `enabled` is
    False (then it records nothing)."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        super().__init__(use_cuda=use_cuda, record_shapes=record_shapes,
                         acc_events=acc_events)
        self.enabled = enabled

    def __enter__(self):
        if not self.enabled:
            return None  # (as torch's)
        self.start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.stop()
        return False

    @property
    def function_events(self):
        return self.events()

    def total_average(self):
        return self.events().total_average()

    @property
    def self_cpu_time_total(self):
        return self.events().self_cpu_time_total

    def table(self, *args, **kwargs):
        return self.key_averages().table(*args, **kwargs)

    def __str__(self):
        return self.table()
