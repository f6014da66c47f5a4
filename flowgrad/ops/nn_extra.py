"""The rest of torch's functional names, composed from existing ops: F.pdist,
F.channel_shuffle, F.upsample_bilinear/upsample_nearest, the *_with_indices pools, and the
torch.* spellings of nn functions whose signature differs from F's (reductions as ints:
0 'none', 1 'mean', 2 'sum'; torch.embedding takes the weight first; torch.batch_norm and
torch.instance_norm take weight and bias before the running statistics).

`__all__` lists the torch.* names; nn.functional imports the F ones by name.

>>> import flowgrad as flow
>>> flow.pdist(flow.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
tensor([5.0000, 1.0000, 4.2426])
"""
from __future__ import annotations

import warnings

from . import loss_more as _loss_more
from . import nn_misc as _nn_misc
from . import normalization as _norm
from . import pool as _pool
from .linalg import bilinear  # noqa: F401 - torch.bilinear has F's signature
from .norm import vector_norm
from .odds import triu_indices
from .spatial import interpolate

__all__ = ["pdist", "channel_shuffle", "bilinear", "batch_norm", "instance_norm", "embedding",
           "kl_div", "poisson_nll_loss", "hinge_embedding_loss", "margin_ranking_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "binary_cross_entropy_with_logits"]

F_NAMES = ["pdist", "channel_shuffle", "upsample_bilinear", "upsample_nearest",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "max_pool3d_with_indices"]


def pdist(input, p=2):
    """The p-norm distances between each pair of rows of a 2-D input, in the order of the
    strict upper triangle (row i < row j).

    >>> import flowgrad as flow
    >>> flow.nn.functional.pdist(flow.tensor([[0.0, 0.0], [1.0, 1.0]]), p=1)
    tensor([2.])
    """
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if p < 0:
        raise RuntimeError(f"pdist only supports non-negative p values, got {p}")
    n = input.shape[0]
    i, j = triu_indices(n, n, 1)
    # differences of distinct rows only: no zero distance to differentiate the norm at
    return vector_norm(input[i] - input[j], p, dim=-1)


def channel_shuffle(input, groups):
    """Shuffle the channels of (N, C, *) in `groups` groups (nn.ChannelShuffle).

    >>> import flowgrad as flow
    >>> flow.channel_shuffle(flow.arange(4.0).reshape(1, 4, 1), 2).flatten()
    tensor([0., 2., 1., 3.])
    """
    if input.dim() < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with sizes {list(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if groups <= 0 or c % groups:
        raise RuntimeError(f"channel_shuffle: number of channels ({c}) must be divisible by "
                           f"groups ({groups}), and groups must be positive")
    rest = tuple(input.shape[2:])
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated torch spelling: interpolate(mode='bilinear', align_corners=True).

    >>> import flowgrad as flow
    >>> flow.nn.functional.upsample_bilinear(flow.ones(1, 1, 2, 2), scale_factor=2).shape
    flowgrad.Size([1, 1, 4, 4])
    """
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated torch spelling: interpolate(mode='nearest')."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool1d returning (values, indices)."""
    return _pool.adaptive_max_pool1d(input, output_size, return_indices=True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool2d returning (values, indices)."""
    return _pool.adaptive_max_pool2d(input, output_size, return_indices=True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool3d returning (values, indices)."""
    return _pool.adaptive_max_pool3d(input, output_size, return_indices=True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """max_pool3d returning (values, indices)."""
    return _pool.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode,
                            return_indices=True)


# ---- torch.* spellings -----------------------------------------------------------------------
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value, name):
    if isinstance(value, str):
        return value
    if value not in _REDUCTIONS:
        raise ValueError(f"torch.{name}: reduction must be 0 (none), 1 (mean) or 2 (sum), got "
                         f"{value!r}")
    return _REDUCTIONS[value]


def kl_div(input, target, reduction=1, *, log_target=False):
    """torch.kl_div: F.kl_div with an int reduction.

    >>> import flowgrad as flow
    >>> flow.kl_div(flow.tensor([0.0]), flow.tensor([1.0]), 2)
    tensor(0.)
    """
    return _loss_more.kl_div(input, target, reduction=_reduction(reduction, "kl_div"),
                             log_target=log_target)


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """torch.poisson_nll_loss: F.poisson_nll_loss, every argument positional."""
    return _loss_more.poisson_nll_loss(input, target, log_input, full, eps=eps,
                                       reduction=_reduction(reduction, "poisson_nll_loss"))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    """torch.hinge_embedding_loss: F.hinge_embedding_loss with an int reduction."""
    return _loss_more.hinge_embedding_loss(
        input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss"))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    """torch.margin_ranking_loss: F.margin_ranking_loss with an int reduction."""
    return _loss_more.margin_ranking_loss(
        input1, input2, target, margin, reduction=_reduction(reduction, "margin_ranking_loss"))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    """torch.cosine_embedding_loss: F.cosine_embedding_loss with an int reduction."""
    return _loss_more.cosine_embedding_loss(
        input1, input2, target, margin,
        reduction=_reduction(reduction, "cosine_embedding_loss"))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction=1):
    """torch.triplet_margin_loss: F.triplet_margin_loss with an int reduction."""
    return _loss_more.triplet_margin_loss(
        anchor, positive, negative, margin, p, eps, swap,
        reduction=_reduction(reduction, "triplet_margin_loss"))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=1):
    """torch.binary_cross_entropy_with_logits: pos_weight before the int reduction.

    >>> import flowgrad as flow
    >>> flow.binary_cross_entropy_with_logits(flow.zeros(2), flow.ones(2)).item() > 0.69
    True
    """
    return _loss_more.binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction(reduction, "binary_cross_entropy_with_"
                                                                "logits"),
        pos_weight=pos_weight)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled=True):
    """torch.batch_norm: F.batch_norm with weight and bias first; `cudnn_enabled` has no
    effect on the CPU."""
    return _norm.batch_norm(input, running_mean, running_var, weight, bias, training,
                            momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled=True):
    """torch.instance_norm: F.instance_norm with weight and bias first."""
    return _norm.instance_norm(input, running_mean, running_var, weight, bias,
                               use_input_stats, momentum, eps)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """torch.embedding: rows of `weight` at `indices`; a negative padding_idx means none.

    >>> import flowgrad as flow
    >>> flow.embedding(flow.eye(3), flow.tensor([2, 0]))
    tensor([[0., 0., 1.],
            [1., 0., 0.]])
    """
    return _nn_misc.embedding(indices, weight, padding_idx if padding_idx >= 0 else None,
                              scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


