"""Param group options and lr scheduler values build reads (`lr =
OPT.param_groups[0]["lr"]`, `SCHED.get_last_lr()[0]` in build, OPT the graph's own optimizer
or any other): the plan computes with the traced value, where eagerly each call reads the
rate a scheduler or the user set since. While build is traced, each group of every live
optimizer is seen through a dict that notes the keys read, and a read of a scheduler's
attribute by the user's code is noted; the plan then compares those options (a scheduler's
epoch and last rates) on every call (a change raises StalePlanError). What build does not
read (a scheduler's lr the update reads anew each call, the rate of an optimizer a module
only holds as an attribute) stays free: a scheduler's step between calls retraces nothing.
"""
from __future__ import annotations

import contextlib
import sys

from ..optim.lr_scheduler import LRScheduler
from ..optim.optimizer import LIVE
from .python_reads import _Group, _plain_value, _snapshot
from .sites import inside as _inside


class _NotingGroup(dict):
    """A param group's copy that notes the keys read from it (all of them when it is read
    whole: items(), values(), iterated, copied)."""

    __slots__ = ("read",)

    def __getitem__(self, key):
        self.read.add(key)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        self.read.add(key)
        return dict.get(self, key, default)

    def _whole(self):
        if not _inside(sys._getframe(2)):  # (not flowgrad's: nn.Graph compares the groups)
            self.read.update(dict.keys(self))

    def items(self):
        self._whole()
        return dict.items(self)

    def values(self):
        self._whole()
        return dict.values(self)

    def __iter__(self):
        self._whole()
        return dict.__iter__(self)

    def copy(self):
        self._whole()
        return dict(dict.items(self))




def watched_exactly(stepper):
    """Whether `noting_group_reads` notes what build reads of this optimizer or scheduler
    (an optimizer that never ran Optimizer.__init__ is watched whole, by `python_reads`)."""
    return isinstance(stepper, LRScheduler) or stepper in LIVE


@contextlib.contextmanager
def noting_group_reads(optimizers, found):
    """Swap each group of `optimizers` and of the other live ones for a noting copy while
    the block runs, then put the groups back with what the block wrote into the copies;
    `found` gets (group, path, key, value) for each plain option read, and (scheduler, path,
    name, value) for the epoch and last rates of each scheduler the user's code read, as
    settings are compared."""
    swapped, seen, schedulers = [], {id(o) for o in optimizers}, {}
    for optimizer in [*optimizers, *(o for o in list(LIVE) if id(o) not in seen)]:
        groups = getattr(optimizer, "param_groups", None)
        for i, group in enumerate(groups if type(groups) is list else ()):
            if type(group) is not dict:
                continue
            noting = _NotingGroup(group)
            noting.read = set()
            groups[i] = noting
            swapped.append((optimizer, groups, i, group, noting))

    def noted(self, name):
        if not _inside(sys._getframe(1)):
            schedulers[id(self)] = self
        return object.__getattribute__(self, name)

    held = LRScheduler.__dict__.get("__getattribute__")  # (a trace inside a trace's build)
    LRScheduler.__getattribute__ = noted
    try:
        yield
    finally:
        if held is None:
            del LRScheduler.__getattribute__
        else:
            LRScheduler.__getattribute__ = held
        for optimizer, groups, i, group, noting in swapped:
            if groups[i] is noting:
                groups[i] = group
            if dict.keys(noting) != group.keys() or any(
                    dict.__getitem__(noting, k) is not v for k, v in group.items()):
                group.clear()
                group.update(dict.items(noting))
            name = type(optimizer).__name__
            found += [(_Group(optimizer, i), f"{name}.param_groups[{i}][{key!r}]", key,
                       group[key])
                      for key in sorted(noting.read, key=str)
                      if key in group and _plain_value(group[key])]
        for scheduler in schedulers.values():
            found += [(scheduler, f"{type(scheduler).__name__}.{name}", name,
                       _snapshot(value) if type(value) is list else value)
                      for name, value in vars(scheduler).items()
                      if name in ("last_epoch", "_last_lr")]
