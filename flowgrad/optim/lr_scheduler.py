"""Learning-rate schedulers, with torch's chainable update rules (so the sequence of lrs
equals torch's to the last bit) and their closed forms for `step(epoch)`.

A scheduler reads and writes `optimizer.param_groups[i]["lr"]`; call `scheduler.step()`
after `optimizer.step()`.

>>> import flowgrad as flow
>>> opt = flow.optim.SGD([flow.zeros(1, requires_grad=True)], lr=1.0)
>>> sched = flow.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
>>> lrs = []
>>> for _ in range(4):
...     opt.step(); sched.step(); lrs.append(sched.get_last_lr()[0])
>>> lrs
[1.0, 0.5, 0.5, 0.25]
"""
from __future__ import annotations

import math
import types
import weakref
from bisect import bisect_right
from collections import Counter
from functools import wraps

from .._warn import warn
from ..tensor import Tensor
from ..torch_format import loadable
from ._state_check import check_scheduler_state
from .optimizer import Optimizer, refuse_in_graph

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
           "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "OneCycleLR", "CyclicLR", "ReduceLROnPlateau",
           "SequentialLR", "ChainedScheduler", "CosineDecayLR", "WarmupLR"]

_EPOCH_WARNING = ("The epoch parameter in `scheduler.step()` is deprecated (as in torch); "
                  "with an epoch the closed form is used instead of the chainable form")


def _lrs(optimizer, key="lr"):
    """group[key] of every param group (tensors cloned, so a list never aliases a group's
    lr tensor, as torch)."""
    return [group[key].clone() if isinstance(group[key], Tensor) else group[key]
            for group in optimizer.param_groups]


def _set_lr(group, value, key="lr"):
    """group[key] = value, except that an lr kept as a tensor is filled in place (it keeps
    its identity and dtype, as torch's schedulers do)."""
    old = group[key]
    if isinstance(old, Tensor):
        old.fill_(value.item() if isinstance(value, Tensor) else value)
    else:
        group[key] = value


def _per_group(name, optimizer, value):
    """One value per param group: a scalar is repeated, a list must match the groups; tensors
    are cloned, one per group, as torch's (a scheduler fills a group's lr tensor in place: it
    must not write into the caller's tensor, nor into the other groups')."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has "
                f"{len(value)} values, param_groups has {len(optimizer.param_groups)}.")
    else:
        value = [value] * len(optimizer.param_groups)
    return [v.clone() if isinstance(v, Tensor) else v for v in value]


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _check_resumable(optimizer):
    """A scheduler resumed (last_epoch >= 0) starts from the groups' initial_lr."""
    for i, group in enumerate(optimizer.param_groups):
        if "initial_lr" not in group:
            raise KeyError(
                f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                "scheduler with last_epoch >= 0; load the optimizer's state dict first, or "
                "start with last_epoch=-1")


def _mark_optimizer_steps(optimizer):
    """Wrap `optimizer.step` so a scheduler can warn when it is stepped first."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    func = optimizer.step.__func__
    ref = weakref.ref(optimizer)

    @wraps(func)
    def wrapper(*args, **kwargs):
        opt = ref()
        opt._opt_called = True
        return func.__get__(opt, opt.__class__)(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


@loadable  # (load(weights_only=False) rebuilds it)
class LRScheduler:
    """Base class: `get_lr()` computes the next lrs from the current ones (chainable form),
    `_get_closed_form_lr()` from `base_lrs` and `last_epoch` (used by `step(epoch)`)."""

    _is_initial = False
    _get_lr_called_within_step = False  # (get_lr() warns when called from outside step())

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                lr = group["lr"]
                group.setdefault("initial_lr", lr.clone() if isinstance(lr, Tensor) else lr)
        else:
            _check_resumable(optimizer)
        self.base_lrs = _lrs(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _mark_optimizer_steps(optimizer)
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self):
        """Everything but the optimizer (plain values: save it with `flowgrad.save`)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Load `state_dict()` output, refusing (and changing nothing) one from another
        scheduler class or options, or with per-group lists of another length."""
        check_scheduler_state(self, state_dict)
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        """The lrs the last `step()` set, one per param group."""
        return self._last_lr

    def get_lr(self):
        raise NotImplementedError

    def _check_group_count(self, n, verb="has", what="per-group values"):
        """Refuse, as torch's strict zips do, n per-group values for another number of groups."""
        groups = len(self.optimizer.param_groups)
        if n != groups:
            raise ValueError(
                f"{type(self).__name__} {verb} {n} {what} for the optimizer's {groups} param "
                "groups (a param group added after the scheduler was built?); build the "
                "scheduler after adding the param groups")

    def _warn_direct_get_lr(self):
        """torch's warning when get_lr() is called outside step(): it computes the next lrs
        (and moves CyclicLR's and OneCycleLR's momentum); get_last_lr() reads the current."""
        if not self._get_lr_called_within_step:
            warn("To get the last learning rate computed by the scheduler, please use "
                 "`get_last_lr()`.", UserWarning, stacklevel=2)

    def step(self, epoch=None):
        refuse_in_graph(f"{type(self).__name__}.step()")
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warn("Seems like `optimizer.step()` has been overridden after "
                     "learning rate scheduler initialization. Please, make sure to "
                     "call `optimizer.step()` before `lr_scheduler.step()`.",
                     UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warn("Detected call of `lr_scheduler.step()` before "
                     "`optimizer.step()`. Call them in the opposite order: "
                     "`optimizer.step()` before `lr_scheduler.step()`, or the first "
                     "value of the learning rate schedule is skipped.",
                     UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            self._apply_lrs(self._lrs_in_step(self.get_lr))
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            self._apply_lrs(self._lrs_in_step(closed or self.get_lr))

    def _lrs_in_step(self, compute):
        """compute() (get_lr, or the closed form) as step() runs it: get_lr() warns only when
        called from outside a step."""
        self._get_lr_called_within_step = True
        try:
            return compute()
        finally:
            self._get_lr_called_within_step = False

    def _apply_lrs(self, values):
        """Set each group's lr, refusing as torch's strict zip does a count that differs."""
        groups = self.optimizer.param_groups
        values = list(values)
        self._check_group_count(len(values), "computed", "learning rates")
        for group, lr in zip(groups, values):
            _set_lr(group, lr)
        self._last_lr = _lrs(self.optimizer)


class _LRScheduler(LRScheduler):
    """torch's deprecated name of LRScheduler, which older custom schedulers subclass."""


class _LambdaState:
    """state_dict of schedulers holding lambdas: functions are dropped, callable objects
    keep their __dict__ (as torch)."""

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                            for fn in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict):
        check_scheduler_state(self, state_dict)
        state_dict = dict(state_dict)
        lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


def _lambdas(optimizer, lr_lambda, resuming=False):
    """One lr_lambda per param group, checked in torch's order: their count, then (LambdaLR
    resumed at last_epoch >= 0) the groups' initial_lr, then that each is callable (torch's
    fails only when it calls one)."""
    if isinstance(lr_lambda, (list, tuple)):
        if len(lr_lambda) != len(optimizer.param_groups):
            raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                             f"{len(lr_lambda)}")
        fns = list(lr_lambda)
    else:
        fns = [lr_lambda] * len(optimizer.param_groups)
    if resuming:
        _check_resumable(optimizer)
    for fn in fns:
        if not callable(fn):
            raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
    return fns


class LambdaLR(_LambdaState, LRScheduler):
    """lr = initial_lr * lr_lambda(epoch)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda, last_epoch != -1 and
                                   isinstance(optimizer, Optimizer))
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_direct_get_lr()
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaState, LRScheduler):
    """lr = lr * lr_lambda(epoch) at every step after the first."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_direct_get_lr()
        if self._is_initial:
            return _lrs(self.optimizer)
        self._check_group_count(len(self.lr_lambdas), what="lr_lambdas")
        return [g["lr"] * fn(self.last_epoch)
                for fn, g in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    """Multiply lr by gamma every `step_size` epochs.

    >>> import flowgrad as flow
    >>> opt = flow.optim.SGD([flow.zeros(1, requires_grad=True)], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    >>> for epoch in range(5):
    ...     opt.step()
    ...     sched.step()
    >>> sched.get_last_lr()
    [0.0010000000000000002]
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_direct_get_lr()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _lrs(self.optimizer)
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply lr by gamma at each milestone epoch."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_direct_get_lr()
        if self.last_epoch not in self.milestones:
            return _lrs(self.optimizer)
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect_right(milestones, self.last_epoch)
                for b in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr * factor until epoch `total_iters`, then lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_direct_get_lr()
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _lrs(self.optimizer)
        return [g["lr"] * (1.0 / self.factor) for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [b * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for b in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale lr linearly from start_factor to end_factor over `total_iters` epochs."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 "
                             "and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_direct_get_lr()
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _lrs(self.optimizer)
        delta = self.end_factor - self.start_factor
        ratio = 1.0 + delta / (self.total_iters * self.start_factor
                               + (self.last_epoch - 1) * delta)
        return [g["lr"] * ratio for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        delta = self.end_factor - self.start_factor
        return [b * (self.start_factor
                     + delta * min(self.total_iters, self.last_epoch) / self.total_iters)
                for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply lr by gamma every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_direct_get_lr()
        if self._is_initial:
            return _lrs(self.optimizer)
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay lr to 0 over `total_iters` epochs as (1 - t/T)^power.

    OneFlow's arguments select its form: `steps` (T), `end_learning_rate` (the floor e,
    0.0001 by default) and `cycle` (T grows to the next multiple of itself after each
    decay): lr = (base - e) * (1 - t/T)^power + e; `last_step` is `last_epoch`.
    """

    _optional_state = frozenset({"cycle", "end_learning_rate"})  # OneFlow's, not torch's

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1, *, steps=None,
                 end_learning_rate=None, cycle=False, last_step=None, verbose=False):
        self._oneflow = steps is not None or end_learning_rate is not None or cycle
        if self._oneflow:
            total_iters = total_iters if steps is None else steps
            if total_iters <= 0:
                raise ValueError(f"steps must be greater than zero, but got {total_iters}")
        self.total_iters = total_iters
        self.power = power
        self.end_learning_rate = 0.0001 if end_learning_rate is None else end_learning_rate
        self.cycle = cycle
        super().__init__(optimizer, last_epoch if last_step is None else last_step)

    def _oneflow_form(self):
        t, n = self.last_epoch, self.total_iters
        if self.cycle:
            n = n * max(1, math.ceil(t / n))
        else:
            t = min(t, n)
        e = self.end_learning_rate
        return [(b - e) * (1 - t / n) ** self.power + e for b in self.base_lrs]

    def get_lr(self):
        self._warn_direct_get_lr()
        if self._oneflow:
            return self._oneflow_form()
        if self._is_initial or self.last_epoch > self.total_iters:
            return _lrs(self.optimizer)
        t, n = self.last_epoch, self.total_iters
        factor = ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        if self._oneflow:
            return self._oneflow_form()
        return [b * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the initial lr to eta_min over T_max epochs (SGDR without
    restarts), computed recursively as torch does.

    >>> import flowgrad as flow
    >>> opt = flow.optim.SGD([flow.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = flow.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    >>> lrs = []
    >>> for _ in range(4):
    ...     opt.step()
    ...     sched.step()
    ...     lrs.append(round(sched.get_last_lr()[0], 4))
    >>> lrs
    [0.8536, 0.5, 0.1464, 0.0]
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_direct_get_lr()
        groups, t, tm, lo = self.optimizer.param_groups, self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return _lrs(self.optimizer)
        if self._step_count == 1 and t > 0:
            self._check_group_count(len(self.base_lrs), what="base_lrs")
            return [lo + (b - lo) * (1 + math.cos(t * math.pi / tm)) / 2 for b in self.base_lrs]
        if (t - 1 - tm) % (2 * tm) == 0:
            self._check_group_count(len(self.base_lrs), what="base_lrs")
            return [g["lr"] + (b - lo) * (1 - math.cos(math.pi / tm)) / 2
                    for b, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / tm)) / (1 + math.cos(math.pi * (t - 1) / tm))
                * (g["lr"] - lo) + lo for g in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (b - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for b in self.base_lrs]


# the other families live in their own modules (one file would pass ~800 lines); they build on
# LRScheduler above, and `flowgrad.optim.lr_scheduler.X` names every scheduler
from ._composite import ChainedScheduler, SequentialLR  # noqa: E402,F401
from .lr_scheduler_cyclic import (  # noqa: E402,F401
    CosineAnnealingWarmRestarts,
    CyclicLR,
    OneCycleLR,
)
from .lr_scheduler_oneflow import CosineDecayLR, WarmupLR  # noqa: E402,F401 - OneFlow's
from .lr_scheduler_plateau import ReduceLROnPlateau  # noqa: E402,F401
