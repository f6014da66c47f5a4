"""OneFlow's schedulers that torch lacks: CosineDecayLR and WarmupLR (closed forms of the
step count, as OneFlow computes them).

>>> import flowgrad as flow
>>> opt = flow.optim.SGD([flow.zeros(1, requires_grad=True)], lr=1.0)
>>> sched = flow.optim.lr_scheduler.WarmupLR(opt, warmup_factor=0.5, warmup_iters=2)
>>> lrs = [sched.get_last_lr()[0]]
>>> for _ in range(3):
...     opt.step(); sched.step(); lrs.append(sched.get_last_lr()[0])
>>> lrs
[0.5, 0.75, 1.0, 1.0]
"""
from __future__ import annotations

import math

from .lr_scheduler import LRScheduler
from .optimizer import Optimizer

__all__ = ["CosineDecayLR", "WarmupLR"]


class CosineDecayLR(LRScheduler):
    """OneFlow's CosineDecayLR: for t < decay_steps,
    lr = base * ((1 - alpha) * (1 + cos(pi t / decay_steps)) / 2 + alpha), then base * alpha.

    >>> import flowgrad as flow
    >>> opt = flow.optim.SGD([flow.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = flow.optim.lr_scheduler.CosineDecayLR(opt, decay_steps=2, alpha=0.1)
    >>> opt.step(); sched.step(); round(sched.get_last_lr()[0], 4)
    0.55
    """

    def __init__(self, optimizer, decay_steps, alpha=0.0, last_step=-1, verbose=False):
        if decay_steps <= 0:
            raise ValueError(f"decay_steps must be greater than zero, but got {decay_steps}")
        self.decay_steps, self.alpha = decay_steps, alpha
        super().__init__(optimizer, last_step)

    def get_lr(self):
        t = min(max(self.last_epoch, 0), self.decay_steps)
        factor = (1 - self.alpha) * 0.5 * (1 + math.cos(math.pi * t / self.decay_steps)) \
            + self.alpha
        return [b * factor for b in self.base_lrs]

    _get_closed_form_lr = get_lr


class WarmupLR(LRScheduler):
    """OneFlow's WarmupLR: `warmup_iters` steps of warmup, then the wrapped scheduler (or the
    optimizer's lr). Linear warmup goes from `warmup_factor` to where the wrapped schedule
    stands at `warmup_iters` (to 1 without one, or with `warmup_prefix=True`, which also
    starts the wrapped schedule from its step 0 after the warmup); constant warmup holds
    `warmup_factor`. The wrapped scheduler must have a closed form (all but
    CosineAnnealingWarmRestarts, ReduceLROnPlateau, OneCycleLR, CyclicLR and the chains)."""

    def __init__(self, scheduler_or_optimizer, warmup_factor=1.0 / 3, warmup_iters=5,
                 warmup_method="linear", warmup_prefix=False, last_step=-1, verbose=False):
        if isinstance(scheduler_or_optimizer, LRScheduler):
            scheduler, optimizer = scheduler_or_optimizer, scheduler_or_optimizer.optimizer
            if not hasattr(scheduler, "_get_closed_form_lr"):
                raise TypeError(f"WarmupLR: {type(scheduler).__name__} has no closed form to "
                                "resume after the warmup; wrap a scheduler such as "
                                "CosineDecayLR, StepLR or LinearLR")
        elif isinstance(scheduler_or_optimizer, Optimizer):
            scheduler, optimizer = None, scheduler_or_optimizer
        else:
            raise ValueError("'scheduler_or_optimizer' must be a LRScheduler or an Optimizer, "
                             f"but got {type(scheduler_or_optimizer)}")
        if warmup_method not in ("linear", "constant"):
            raise ValueError(f"'warmup_method' must be 'linear' or 'constant', but got "
                             f"{warmup_method}")
        if scheduler is None and warmup_iters == 0:
            raise ValueError("When 'scheduler_or_optimizer' is an optimizer warmup_iters "
                             "can't be equal to 0")
        self.scheduler = scheduler
        self.warmup_factor, self.warmup_iters = warmup_factor, warmup_iters
        self.warmup_method, self.warmup_prefix = warmup_method, warmup_prefix
        super().__init__(optimizer, last_step)

    def _inner(self, step):
        if self.scheduler is None:
            return list(self.base_lrs)
        saved = self.scheduler.last_epoch
        self.scheduler.last_epoch = step
        try:
            return self.scheduler._get_closed_form_lr()
        finally:
            self.scheduler.last_epoch = saved

    def get_lr(self):
        t, n = max(self.last_epoch, 0), self.warmup_iters
        if t >= n:
            return self._inner(t - n if self.warmup_prefix else t)
        if self.warmup_method == "constant":
            return [b * self.warmup_factor for b in self.base_lrs]
        ends = self._inner(n) if self.scheduler is not None and not self.warmup_prefix \
            else self.base_lrs
        start = self.warmup_factor
        return [b * (start + (end / b - start) * t / n) if b else 0.0
                for b, end in zip(self.base_lrs, ends)]

    _get_closed_form_lr = get_lr

    def state_dict(self):
        """The warmup's own state plus the wrapped scheduler's state_dict."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "scheduler")}
        state["scheduler"] = None if self.scheduler is None else self.scheduler.state_dict()
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        inner = state.pop("scheduler", None)
        if (inner is None) != (self.scheduler is None):
            raise ValueError("WarmupLR.load_state_dict: the state was saved with"
                             f"{'out' if inner is None else ''} a wrapped scheduler, this "
                             f"WarmupLR has{' none' if self.scheduler is None else ' one'}")
        self.__dict__.update(state)
        if inner is not None:
            self.scheduler.load_state_dict(inner)
