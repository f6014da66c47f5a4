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
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from functools import wraps

from ._state_check import check_scheduler_state
from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
           "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "OneCycleLR", "CyclicLR", "ReduceLROnPlateau",
           "SequentialLR", "ChainedScheduler", "CosineDecayLR", "WarmupLR"]

_EPOCH_WARNING = ("The epoch parameter in `scheduler.step()` is deprecated (as in torch); "
                  "with an epoch the closed form is used instead of the chainable form")


def _lrs(optimizer, key="lr"):
    return [group[key] for group in optimizer.param_groups]


def _per_group(name, optimizer, value):
    """One value per param group: a scalar is repeated, a list must match the groups."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has "
                f"{len(value)} values, param_groups has {len(optimizer.param_groups)}.")
        return list(value)
    return [value] * len(optimizer.param_groups)


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


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


class LRScheduler:
    """Base class: `get_lr()` computes the next lrs from the current ones (chainable form),
    `_closed_form()` from `base_lrs` and `last_epoch` (used by `step(epoch)`)."""

    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0; load the optimizer's state "
                        "dict first, or start with last_epoch=-1")
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

    def step(self, epoch=None):
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn("Seems like `optimizer.step()` has been overridden after "
                              "learning rate scheduler initialization. Please, make sure to "
                              "call `optimizer.step()` before `lr_scheduler.step()`.",
                              UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn("Detected call of `lr_scheduler.step()` before "
                              "`optimizer.step()`. Call them in the opposite order: "
                              "`optimizer.step()` before `lr_scheduler.step()`, or the first "
                              "value of the learning rate schedule is skipped.",
                              UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._closed_form() if hasattr(self, "_closed_form") else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = _lrs(self.optimizer)


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


def _lambdas(optimizer, lr_lambda):
    if isinstance(lr_lambda, (list, tuple)):
        if len(lr_lambda) != len(optimizer.param_groups):
            raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                             f"{len(lr_lambda)}")
        fns = list(lr_lambda)
    else:
        fns = [lr_lambda] * len(optimizer.param_groups)
    for fn in fns:
        if not callable(fn):
            raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
    return fns


class LambdaLR(_LambdaState, LRScheduler):
    """lr = initial_lr * lr_lambda(epoch)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaState, LRScheduler):
    """lr = lr * lr_lambda(epoch) at every step after the first."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return _lrs(self.optimizer)
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
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _lrs(self.optimizer)
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _closed_form(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply lr by gamma at each milestone epoch."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return _lrs(self.optimizer)
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for g in self.optimizer.param_groups]

    def _closed_form(self):
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
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _lrs(self.optimizer)
        return [g["lr"] * (1.0 / self.factor) for g in self.optimizer.param_groups]

    def _closed_form(self):
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
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _lrs(self.optimizer)
        delta = self.end_factor - self.start_factor
        ratio = 1.0 + delta / (self.total_iters * self.start_factor
                               + (self.last_epoch - 1) * delta)
        return [g["lr"] * ratio for g in self.optimizer.param_groups]

    def _closed_form(self):
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
        if self._is_initial:
            return _lrs(self.optimizer)
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _closed_form(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay lr to 0 over `total_iters` epochs as (1 - t/T)^power.

    OneFlow's arguments select its form: `steps` (T), `end_learning_rate` (the floor e,
    0.0001 by default) and `cycle` (T grows to the next multiple of itself after each
    decay): lr = (base - e) * (1 - t/T)^power + e; `last_step` is `last_epoch`.
    """

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
        if self._oneflow:
            return self._oneflow_form()
        if self._is_initial or self.last_epoch > self.total_iters:
            return _lrs(self.optimizer)
        t, n = self.last_epoch, self.total_iters
        factor = ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _closed_form(self):
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
        groups, t, tm, lo = self.optimizer.param_groups, self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return _lrs(self.optimizer)
        if self._step_count == 1 and t > 0:
            return [lo + (b - lo) * (1 + math.cos(t * math.pi / tm)) / 2 for b in self.base_lrs]
        if (t - 1 - tm) % (2 * tm) == 0:
            return [g["lr"] + (b - lo) * (1 - math.cos(math.pi / tm)) / 2
                    for b, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / tm)) / (1 + math.cos(math.pi * (t - 1) / tm))
                * (g["lr"] - lo) + lo for g in groups]

    def _closed_form(self):
        return [self.eta_min + (b - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for b in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: cosine annealing restarted every T_i epochs, T_i = T_0 * T_mult^k.

    OneFlow's arguments: `decay_rate` scales the peak by decay_rate^k in cycle k, and after
    `restart_limit` cycles (0: no limit) the lr stays at eta_min; `last_step` is
    `last_epoch`.
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1,  # noqa: N803
                 decay_rate=1.0, restart_limit=0, last_step=None, verbose=False):
        last_epoch = last_epoch if last_step is None else last_step
        self.decay_rate, self.restart_limit = decay_rate, restart_limit
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        gamma = 1.0
        if self.decay_rate != 1.0 or self.restart_limit:
            k = self._cycle()
            if 0 < self.restart_limit <= k:
                return [self.eta_min for _ in self.base_lrs]
            gamma = self.decay_rate ** k
        return [self.eta_min + (b * gamma - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for b in self.base_lrs]

    def _cycle(self):
        """Which restart cycle `last_epoch` lies in (counted exactly, without logs)."""
        t = max(self.last_epoch, 0)
        if self.T_mult == 1:
            return t // self.T_0
        k, start, span = 0, 0, self.T_0
        while t >= start + span:
            start, span, k = start + span, span * self.T_mult, k + 1
        return k

    def step(self, epoch=None):
        """Advance one epoch, or jump to `epoch` (fractional epochs allowed)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = _lrs(self.optimizer)


def _set_momentum(group, use_beta1, value):
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


def _momentum_setup(sched, optimizer, base_momentum, max_momentum, last_epoch):
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                         "option enabled")
    sched.use_beta1 = "betas" in optimizer.defaults
    bases = _per_group("base_momentum", optimizer, base_momentum)
    maxes = _per_group("max_momentum", optimizer, max_momentum)
    if last_epoch == -1:
        for hi, lo, group in zip(maxes, bases, optimizer.param_groups):
            _set_momentum(group, sched.use_beta1, hi)
            group["max_momentum"] = hi
            group["base_momentum"] = lo
    return bases, maxes


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith): lr rises from max_lr/div_factor to max_lr over pct_start
    of the steps, then anneals to initial_lr/final_div_factor; momentum moves inversely.
    `three_phase=True` adds a symmetric descent before the final annealing."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True,
                 base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError("Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        n = self.total_steps
        if three_phase:
            self._schedule_phases = [
                dict(end_step=float(pct_start * n) - 1, start_lr="initial_lr",
                     end_lr="max_lr", start_momentum="max_momentum",
                     end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * n) - 2, start_lr="max_lr",
                     end_lr="initial_lr", start_momentum="base_momentum",
                     end_momentum="max_momentum"),
                dict(end_step=n - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]
        else:
            self._schedule_phases = [
                dict(end_step=float(pct_start * n) - 1, start_lr="initial_lr",
                     end_lr="max_lr", start_momentum="max_momentum",
                     end_momentum="base_momentum"),
                dict(end_step=n - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum")]
        if not isinstance(pct_start, float) or pct_start < 0 or pct_start > 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, hi in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = hi / div_factor
                group["max_lr"] = hi
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            _momentum_setup(self, optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total "
                             f"steps is {self.total_steps}")
        lrs = []
        phases = self._schedule_phases
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(phases):
                end = phase["end_step"]
                if step <= end or i == len(phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(group[phase["start_momentum"]],
                                           group[phase["end_momentum"]], pct)
                    break
                start = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(group, self.use_beta1, mom)
        return lrs


class CyclicLR(LRScheduler):
    """Cyclical learning rates (Smith): triangular, triangular2 or exp_range cycles between
    base_lr and max_lr, with momentum cycling inversely."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else (
            "iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.base_momentums, self.max_momentums = _momentum_setup(
                self, optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale = x / self.step_ratio
        else:
            scale = (x - 1) / (self.step_ratio - 1)
        arg = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [b + (hi - b) * scale * self.scale_fn(arg)
               for b, hi in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, lo, hi in zip(self.optimizer.param_groups, self.base_momentums,
                                     self.max_momentums):
                _set_momentum(group, self.use_beta1, hi - (hi - lo) * scale * self.scale_fn(arg))
        return lrs

    def state_dict(self):
        sd = super().state_dict()
        fn = sd.pop("_scale_fn_custom")
        sd["_scale_fn_custom"] = (fn.__dict__.copy() if fn is not None
                                  and not isinstance(fn, types.FunctionType) else None)
        return sd

    def load_state_dict(self, state_dict):
        check_scheduler_state(self, state_dict)
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom", None)
        super().load_state_dict(state_dict)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)


class ReduceLROnPlateau(LRScheduler):
    """Multiply lr by `factor` when a metric has stopped improving for `patience` epochs:
    `scheduler.step(val_loss)`."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got "
                                 f"{len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _lrs(optimizer)
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown don't count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _lrs(self.optimizer)

    def _reduce_lr(self):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                    "usually due to a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the `optimizer` param "
                    "groups.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, group in enumerate(groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                group["lr"] = new

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _is_better(self, a, best):
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError("mode " + str(mode) + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + str(threshold_mode) + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict):
        check_scheduler_state(self, state_dict)
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


# schedulers made of schedulers live in their own module (this one would pass ~800 lines)
from ._composite import ChainedScheduler, SequentialLR  # noqa: E402,F401 - needs the above
from .lr_scheduler_oneflow import CosineDecayLR, WarmupLR  # noqa: E402,F401 - OneFlow's
