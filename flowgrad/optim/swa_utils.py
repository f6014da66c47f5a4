"""Stochastic weight averaging and EMA of a model's weights, as torch.optim.swa_utils:
AveragedModel, SWALR, update_bn and the averaging functions.

>>> import flowgrad as flow
>>> model = flow.nn.Linear(2, 1)
>>> swa = flow.optim.swa_utils.AveragedModel(model)
>>> swa.update_parameters(model); int(swa.n_averaged)
1
"""
from __future__ import annotations

import copy
import itertools
import math

from ..autograd.grad_mode import no_grad
from ..nn.module import Module
from ..nn.modules.normalization import _BatchNorm
from ..ops.creation import tensor
from .lr_scheduler import LRScheduler

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_avg_fn", "get_swa_avg_fn",
           "get_ema_multi_avg_fn", "get_swa_multi_avg_fn"]


def get_ema_multi_avg_fn(decay=0.999):
    """In-place EMA over lists of tensors: ema = decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    def ema_update(ema_params, current_params, num_averaged):
        with no_grad():
            for e, c in zip(ema_params, current_params):
                if e.is_floating_point() or e.is_complex():
                    e.lerp_(c, 1 - decay)
                else:  # an integer buffer (num_batches_tracked): torch's float mix, truncated
                    e.copy_(e * decay + c * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """In-place running mean over lists of tensors."""
    def swa_update(averaged_params, current_params, num_averaged):
        with no_grad():
            w = 1 / (float(num_averaged) + 1)
            for a, c in zip(averaged_params, current_params):
                if a.is_floating_point() or a.is_complex():
                    a.lerp_(c, w)
                else:  # an integer buffer: the running mean truncated, as torch's
                    a.copy_(a + (c - a) / (float(num_averaged) + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """EMA of one tensor: returns decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """Running mean of one tensor: averaged + (current - averaged) / (n + 1)."""
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         f"[0,1] range.")


class AveragedModel(Module):
    """A copy of `model` whose parameters (and buffers with use_buffers=True) are the running
    average (SWA, default) or `avg_fn` / `multi_avg_fn` (e.g. EMA) of the model's over the
    calls to `update_parameters(model)`. See the module example."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        self.register_buffer("n_averaged", tensor(0))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Fold `model`'s current weights into the average."""
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine, theirs = list(self.module.parameters()), list(model.parameters())
        n = int(self.n_averaged)
        with no_grad():
            mine = [p.detach() for p in mine]
            theirs = [p.detach() for p in theirs]
            if n == 0:
                for a, c in zip(mine, theirs):
                    a.copy_(c)
            elif self.avg_fn is not None:
                for a, c in zip(mine, theirs):
                    a.copy_(self.avg_fn(a, c, self.n_averaged))
            else:
                (self.multi_avg_fn or get_swa_multi_avg_fn())(mine, theirs, self.n_averaged)
            if not self.use_buffers:
                for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                    b_swa.detach().copy_(b_model.detach())
            self.n_averaged.add_(1)


def update_bn(loader, model, device=None):
    """Recompute the BatchNorm running statistics of `model` with one pass over `loader`
    (cumulative average, as torch: momentum None during the pass)."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr to `swa_lr` over `anneal_epochs` steps ("cos" or "linear"),
    then holds it."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        groups = optimizer.param_groups
        swa_lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(groups)
        if len(swa_lrs) != len(groups):
            raise ValueError(f"swa_lr must have the same length as optimizer.param_groups: "
                             f"swa_lr has {len(swa_lrs)}, optimizer.param_groups has "
                             f"{len(groups)}")
        for lr, group in zip(swa_lrs, groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self._anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t):
        return (1 - math.cos(math.pi * t)) / 2 if self._anneal_strategy == "cos" else t

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        alpha = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        out = []
        for group in self.optimizer.param_groups:
            lr, swa = group["lr"], group["swa_lr"]
            prev = swa if prev_alpha == 1 else (lr - prev_alpha * swa) / (1 - prev_alpha)
            out.append(swa * alpha + prev * (1 - alpha))
        return out
