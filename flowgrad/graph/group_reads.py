"""Param group options build reads from the graph's own optimizers (`lr =
OPT.param_groups[0]["lr"]` in build, OPT registered with add_optimizer): the plan computes
with the traced value, where eagerly each call reads the rate a scheduler or the user set
since. While build is traced, each group is seen through a dict that notes the keys read;
the plan then compares those options on every call (a change raises StalePlanError). The
options build does not read (a scheduler's lr the update reads anew each call) stay free.
"""
from __future__ import annotations

import contextlib

from .python_reads import _plain_value, _Scope


class _NotingGroup(dict):
    """A param group's copy that notes the keys read from it."""

    __slots__ = ("read",)

    def __getitem__(self, key):
        self.read.add(key)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        self.read.add(key)
        return dict.get(self, key, default)


@contextlib.contextmanager
def noting_group_reads(optimizers, found):
    """Swap each group of `optimizers` for a noting copy while the block runs, then put the
    groups back with what the block wrote into the copies; `found` gets (group, path, key,
    value) for each plain option read, as settings are compared."""
    swapped = []
    for optimizer in optimizers:
        groups = optimizer.param_groups
        for i, group in enumerate(groups):
            noting = _NotingGroup(group)
            noting.read = set()
            groups[i] = noting
            swapped.append((optimizer, groups, i, group, noting))
    try:
        yield
    finally:
        for optimizer, groups, i, group, noting in swapped:
            if groups[i] is noting:
                groups[i] = group
            if dict.keys(noting) != group.keys() or any(
                    dict.__getitem__(noting, k) is not v for k, v in group.items()):
                group.clear()
                group.update(dict.items(noting))
            name = type(optimizer).__name__
            found += [(_Scope(group), f"{name}.param_groups[{i}][{key!r}]", key, group[key])
                      for key in sorted(noting.read, key=str)
                      if key in group and _plain_value(group[key])]

