"""Normalization layers: BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, LayerNorm, GroupNorm,
RMSNorm, LocalResponseNorm, CrossMapLRN2d.

>>> import flowgrad as flow
>>> bn = flow.nn.BatchNorm2d(3)
>>> [n for n, _ in bn.named_buffers()]
['running_mean', 'running_var', 'num_batches_tracked']
"""
from __future__ import annotations

import numbers

from ... import dtypes as _dt
from ..._warn import warn
from ...autograd.function import Function
from ...autograd.grad_mode import no_grad
from ...ops.creation import tensor as _tensor
from .. import functional as F
from .. import init
from ..module import Module
from ._utils import new_param, new_tensor

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm",
           "CrossMapLRN2d"]


def _add_affine(module, shape, enabled, bias, dtype, device=None):
    """Register `weight` (and `bias` unless bias=False) of `shape`, or None when disabled."""
    if enabled:
        module.weight = new_param(*shape, dtype=dtype, device=device)
        if bias:
            module.bias = new_param(*shape, dtype=dtype, device=device)
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def _reset_affine(module):
    """weight to ones and bias to zeros, as torch's norm layers start."""
    if module.weight is not None:
        init.ones_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)


class _NormBase(Module):
    """Parameters (weight, bias) and running-statistics buffers shared by batch and
    instance norm."""

    _version = 2  # (torch's: version 2 added num_batches_tracked)

    def _upgrade_state_dict(self, state_dict, prefix, local_metadata):
        """A state dict from before num_batches_tracked (version < 2, or a plain dict with no
        versions) keeps this module's count, as torch's."""
        version = local_metadata.get("version")
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and \
                key not in state_dict:
            state_dict[key] = self.num_batches_tracked if self.num_batches_tracked is not None \
                else _tensor(0, dtype=_dt.int64)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _add_affine(self, (num_features,), affine, bias, dtype, device)
        if track_running_stats:
            self.register_buffer("running_mean", new_tensor(num_features, dtype=dtype))
            self.register_buffer("running_var", new_tensor(num_features, dtype=dtype,
                                                           fill=1.0))
            self.register_buffer("num_batches_tracked", _tensor(0, dtype=_dt.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input):
        if input.dim() not in self._dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._dims)} input "
                             f"(got {input.dim()}D input)")

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _dims = (4,)

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        counted = self.training and self.track_running_stats and \
            self.num_batches_tracked is not None
        if counted:
            with no_grad():  # a counter: no autograd, but an op (a traced graph repeats it)
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average, 1 / batches seen: an op,
                # not item(), so a compiled graph recomputes it each call
                factor = 1.0 / self.num_batches_tracked.to(_dt.float64)
        # eval mode normalises with the running stats when it has them
        # (a bool whatever was assigned to self.training, as torch's if/else makes it)
        bn_training = True if self.training else \
            self.running_mean is None and self.running_var is None
        use_stats = not self.training or self.track_running_stats
        stats_version = self.running_mean._version if counted and \
            self.running_mean is not None else None
        try:
            return F.batch_norm(input, self.running_mean if use_stats else None,
                                self.running_var if use_stats else None, self.weight,
                                self.bias, bn_training, factor, self.eps)
        except Exception:
            # refused before the statistics were updated (a bias of another size, one value
            # per channel): the count back as it was. (Counted first, as torch's: a
            # checkpoint's recomputation, stopped once its tensors are saved, counts again.)
            if counted and (stats_version is None or
                            self.running_mean._version == stats_version):
                with no_grad():
                    self.num_batches_tracked.sub_(1)
            raise


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) inputs."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) inputs; running stats use the unbiased variance.

    >>> import flowgrad as flow
    >>> from flowgrad import nn
    >>> bn = nn.BatchNorm2d(2)
    >>> x = flow.arange(16.0).reshape(2, 2, 2, 2)
    >>> y = bn(x)
    >>> bool(y.mean(dim=(0, 2, 3)).abs().max() < 1e-6)
    True
    >>> bn.running_mean
    tensor([0.5500, 0.9500])
    >>> bn.num_batches_tracked
    tensor(1)
    """

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm over (N, C, D, H, W) inputs (torch.nn.BatchNorm3d)."""
    _dims = (5,)


class _InstanceNorm(_NormBase):
    _dims = (3, 4)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input):
        self._check_input_dim(input)
        n_sp = self._dims[-1] - 2  # spatial dims of the batched form
        feature_dim = input.dim() - n_sp - 1
        if input.shape[feature_dim] != self.num_features:  # torch's check (affine) or warning
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warn(f"input's size at dim={feature_dim} does not match num_features. You can "
                 f"silence this warning by not passing in num_features, which is not used "
                 f"because affine=False")
        if input.dim() == n_sp + 1:  # unbatched (C, *spatial)
            return self.forward(input.unsqueeze(0)).squeeze(0)
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over (N, C, L) or (C, L) inputs: each sample and channel normalised alone."""
    _dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Normalise each sample's channel over its spatial positions."""

    _dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over (N, C, D, H, W) or (C, D, H, W) inputs."""
    _dims = (4, 5)


class LayerNorm(Module):
    """Normalise over the last len(normalized_shape) dims, then scale and shift.

    >>> import flowgrad as flow
    >>> from flowgrad import nn
    >>> nn.LayerNorm(3)(flow.tensor([[1.0, 2.0, 3.0]]))
    tensor([[-1.2247,  0.0000,  1.2247]], grad_fn=<NativeLayerNormBackward0>)
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _add_affine(self, self.normalized_shape, elementwise_affine, bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalise over groups of channels (and all spatial positions) per sample."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _add_affine(self, (num_channels,), affine, bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dims; eps None means the dtype's
    machine epsilon."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = new_param(*self.normalized_shape, dtype=dtype, device=device)
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LocalResponseNorm(Module):
    """Normalise each channel by the activity of its `size` neighbour channels
    (torch.nn.LocalResponseNorm)."""
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


def _window_matrix(rows, channels, dtype):
    """A (channels, channels) 0/1 tensor: row c marks the channels in rows[c]."""
    return _tensor([[1.0 if j in row else 0.0 for j in range(channels)] for row in rows],
                   dtype=dtype)


def _lrn_forward_windows(channels, size):
    """The channels each output channel's scale sums, as torch's legacy kernel sums them: a
    running window that never drops channel 0 once past `pre_pad` (kept as torch has it)."""
    pre_pad = int((size - 1) / 2 + 1)
    rows = [set(range(min(pre_pad, channels)))]
    for c in range(1, channels):
        row = set(rows[-1])
        if c < channels - pre_pad + 1:
            row.add(c + pre_pad - 1)
        if c > pre_pad:
            row.discard(c - pre_pad)
        rows.append(row)
    return rows


def _lrn_backward_windows(channels, size):
    """The channels torch's legacy backward accumulates for each input channel (its own
    window, not the transpose of the forward's: torch's gradient is kept as it computes it)."""
    lo = int(size - (size - 1) / 2)
    return [set(range(max(c - lo, 0), min(c + size - lo, channels))) for c in range(channels)]


class _CrossMapLRN2dFunction(Function):
    @staticmethod
    def forward(ctx, input, size, alpha, beta, k):
        if input.dim() != 4:
            raise ValueError(
                f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        channels = input.shape[1]
        window = _window_matrix(_lrn_forward_windows(channels, size), channels, input.dtype)
        scale = (window @ (input * input).transpose(0, 1).reshape(channels, -1))
        scale = scale.reshape(channels, input.shape[0], *input.shape[2:]).transpose(0, 1)
        scale = scale * (alpha / size) + k
        output = scale.pow(-beta) * input
        ctx.size, ctx.alpha, ctx.beta = size, alpha, beta
        ctx.save_for_backward(input, output, scale)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, output, scale = ctx.saved_tensors
        channels, size = input.shape[1], ctx.size
        window = _window_matrix(_lrn_backward_windows(channels, size), channels, input.dtype)
        ratio = (grad_output * output / scale).transpose(0, 1).reshape(channels, -1)
        accum = (window @ ratio).reshape(channels, input.shape[0], *input.shape[2:])
        accum = accum.transpose(0, 1)
        grad = grad_output * scale.pow(-ctx.beta)
        grad = grad - input * accum * (2 * ctx.alpha * ctx.beta / size)
        return grad, None, None, None, None


class CrossMapLRN2d(Module):
    """Local response normalisation across channels of a 4-d input (torch.nn.CrossMapLRN2d, the
    legacy Lua-torch layer): its windows and its hand-written gradient are torch's, which is
    not exactly the gradient of its forward (LocalResponseNorm is the consistent one)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return _CrossMapLRN2dFunction.apply(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
