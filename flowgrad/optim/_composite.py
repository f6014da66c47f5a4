"""Schedulers made of schedulers: SequentialLR (one after another at milestones) and
ChainedScheduler (all at once). Part of `flowgrad.optim.lr_scheduler`, which re-exports them.

>>> import flowgrad as flow
>>> opt = flow.optim.SGD([flow.zeros(1, requires_grad=True)], lr=1.0)
>>> warm = flow.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
>>> decay = flow.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
>>> sched = flow.optim.lr_scheduler.SequentialLR(opt, [warm, decay], milestones=[2])
>>> lrs = []
>>> for _ in range(4):
...     opt.step(); sched.step(); lrs.append(sched.get_last_lr()[0])
>>> lrs
[0.75, 1.0, 0.5, 0.25]
"""
from __future__ import annotations

from bisect import bisect_right

from ._state_check import check_scheduler_state
from .lr_scheduler import LRScheduler, _lrs, _set_lr
from .lr_scheduler_plateau import ReduceLROnPlateau
from .optimizer import refuse_in_graph


def _check_children(cls_name, optimizer, schedulers):
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{cls_name} at index {i} should have `optimizer` as its "
                            "attribute.")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(
                f"{cls_name} does not support `ReduceLROnPlateau` scheduler as it requires "
                "additional kwargs to be specified when calling `step`, but got one at index "
                f"{i} in the given schedulers sequence.")
        if optimizer is not s.optimizer:
            raise ValueError(
                f"{cls_name} expects all schedulers to belong to the same optimizer, but got "
                f"scheduler {type(s).__name__} at index {i} has {s.optimizer}, which is "
                f"different from {type(optimizer).__name__}.")


class _Composite(LRScheduler):
    """state_dict of schedulers made of schedulers: children saved by their own dicts."""

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict):
        check_scheduler_state(self, state_dict)
        state_dict = dict(state_dict)
        children = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, children):
            s.load_state_dict(sd)


class SequentialLR(_Composite):
    """Run `schedulers[i]` between milestones[i-1] and milestones[i]."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got "
                             "no scheduler.")
        _check_children(type(self).__name__, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                f"than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # the children already stepped once when built: undo that, restart the first one
        for group in optimizer.param_groups:
            _set_lr(group, group["initial_lr"])
        self._undo(self)
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = self._schedulers[idx].get_last_lr()

    def _undo(self, sched):
        if hasattr(sched, "_schedulers"):
            for s in sched._schedulers:
                self._undo(s)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    def step(self):
        refuse_in_graph("SequentialLR.step()")
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Step every scheduler in the list at each step (their effects compose)."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler to be "
                             "chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_children(type(self).__name__, optimizer, schedulers)
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = _lrs(self._schedulers[-1].optimizer)

    def step(self):
        refuse_in_graph("ChainedScheduler.step()")
        for s in self._schedulers:
            s.step()
        self._last_lr = _lrs(self._schedulers[-1].optimizer)
