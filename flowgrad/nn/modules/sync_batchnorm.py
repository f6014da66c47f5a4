"""SyncBatchNorm: batch norm whose training statistics are those of the global batch (all
ranks' batches together), as torch.nn.SyncBatchNorm.

The per-channel sums go through `flowgrad.distributed.nn.functional.all_reduce`, a
differentiable collective, so the backward all-reduces the gradient terms exactly as
torch's SyncBatchNorm does, and 2 ranks on half-batches train as 1 process on the whole
batch. Outside a process group (or with one rank, or in eval mode) it is BatchNorm.

>>> import flowgrad as flow
>>> net = flow.nn.Sequential(flow.nn.Conv2d(1, 4, 3), flow.nn.BatchNorm2d(4))
>>> net = flow.nn.SyncBatchNorm.convert_sync_batchnorm(net)
>>> type(net[1]).__name__, net(flow.ones(2, 1, 5, 5)).shape
('SyncBatchNorm', flowgrad.Size([2, 4, 3, 3]))
"""
from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ...ops.creation import full
from ...ops.normalization import _update_running
from ...ops.shape import cat
from .normalization import _BatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """Batch norm over the batch of every rank of `process_group` (default: the world)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None, *,
                 bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _group(self):
        """The ProcessGroup to synchronise over, or None to behave as BatchNorm."""
        from ...distributed import process_group as pgs

        if not (self.training and pgs.is_initialized()):
            return None
        group = pgs.resolve(self.process_group, "SyncBatchNorm")
        return group if group is not None and group.size() > 1 else None

    def forward(self, input):
        group = self._group()
        if group is None:
            return super().forward(input)
        self._check_input_dim(input)
        from ...distributed.nn.functional import all_reduce

        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        c = input.shape[1]
        axes = (0,) + tuple(range(2, input.dim()))
        shape = (1, c) + (1,) * (input.dim() - 2)
        count = full((1,), input.numel() // c, dtype=input.dtype, device=input.device)
        totals = all_reduce(cat([input.sum(axes), count]), group=group)  # one message
        n = totals[c]
        if float(n.item()) <= 1:
            raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel when "
                             f"training over all ranks, got {int(n.item())}")
        mean = totals[:c] / n
        centered = input - mean.reshape(shape)
        var = all_reduce((centered * centered).sum(axes), group=group) / n  # two passes: exact
        out = centered * (var + self.eps).rsqrt().reshape(shape)
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        if self.bias is not None:
            out = out + self.bias.reshape(shape)
        if self.track_running_stats:
            total = float(n.item())
            _update_running(self.running_mean, mean.detach(), factor)
            _update_running(self.running_var, var.detach(), factor, total / (total - 1))
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """`module` with every BatchNorm*D replaced by a SyncBatchNorm that shares its
        parameters and running statistics (torch's conversion)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
