"""The rest of torch's functional names, composed from existing ops: F.pdist,
F.channel_shuffle, F.upsample_bilinear/upsample_nearest, the *_with_indices pools, and the
torch.* spellings of nn functions whose signature differs from F's (reductions as ints:
0 'none', 1 'mean', 2 'sum'; torch.embedding takes the weight first; torch.batch_norm and
torch.instance_norm take weight and bias before the running statistics; torch.embedding_bag
returns torch's four tensors; the dropout spellings take (input, p, train); torch.binomial
checks its dtypes; torch.segment_reduce lives in ops/segment.py).

`__all__` lists the torch.* names; nn.functional imports the F ones by name.

>>> import flowgrad as flow
>>> flow.pdist(flow.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
tensor([5.0000, 1.0000, 4.2426])
"""
from __future__ import annotations

import math

from .._warn import warn
from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..errors import check_kernel_dtype, int_arg
from ..func.batched import check_every_example
from ..typed_tensors import contiguous_format
from . import loss_ctc as _loss_ctc
from . import loss_more as _loss_more
from . import nn_misc as _nn_misc
from . import normalization as _norm
from . import pool as _pool
from . import sampling as _sampling
from .elementwise import where
from .kept import kept
from .layout import suggested_order
from .linalg import bilinear  # noqa: F401 - torch.bilinear has F's signature
from .no_derivative import without_derivative
from .normalization import dist_norm
from .odds import triu_indices
from .out_arg import warn_resized
from .registry import op
from .segment import _segment_reduce, segment_reduce  # noqa: F401 - torch.* names
from .shape import relaid
from .spatial import grid_sample, interpolate

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
    if input._data.dtype.kind not in "fV":
        raise RuntimeError("pdist only supports floating-point dtypes")
    check_kernel_dtype(input, "pdist", kinds="f")  # (float32 and float64: no half precision)
    if input._data.dtype.itemsize < 4:
        check_kernel_dtype(input, "pdist", kinds="")
    n = input.shape[0]
    i, j = triu_indices(n, n, 1)
    # differences of distinct rows only: no zero distance to differentiate the norm at
    d = dist_norm(input[i] - input[j], p, -1, every_tie=True)
    # torch's node saves input.contiguous() and the result (a strided input's copy: unseen)
    if not input.is_contiguous():
        return d
    return kept(d, input, node="PdistBackward0", result=True)


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
    # in new row-major memory, as torch allocates it: never a view of the input (groups=1,
    # or an expanded input, gave one)
    shuffled = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return relaid(shuffled.clone(memory_format=contiguous_format).view(n, c, *rest),
                  suggested_order(input._data))  # (or channels_last, as torch's kernel)


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated torch spelling: interpolate(mode='bilinear', align_corners=True).

    >>> import flowgrad as flow
    >>> flow.nn.functional.upsample_bilinear(flow.ones(1, 1, 2, 2), scale_factor=2).shape
    flowgrad.Size([1, 1, 4, 4])
    """
    warn("`nn.functional.upsample_bilinear` is deprecated. Use "
         "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated torch spelling: interpolate(mode='nearest')."""
    warn("`nn.functional.upsample_nearest` is deprecated. Use "
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
# (their int reduction: torch's Python bindings of the torch.* losses default it to 0, no
# reduction, whatever their schemas say: torch.kl_div(x, y) is elementwise where F.kl_div
# means)
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value, name):
    if isinstance(value, str):
        return value
    if not isinstance(value, int):
        raise TypeError(f"torch.{name}: reduction must be an int: 0 (none), 1 (mean) or 2 "
                        f"(sum), got {value!r}")
    return _REDUCTIONS.get(value, "none")  # (torch's apply_loss_reduction: any other int)


def kl_div(input, target, reduction=0, *, log_target=False):
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


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    """torch.hinge_embedding_loss: F.hinge_embedding_loss with an int reduction."""
    return _loss_more.hinge_embedding_loss(
        input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss"))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """torch.margin_ranking_loss: F.margin_ranking_loss with an int reduction."""
    return _loss_more.margin_ranking_loss(
        input1, input2, target, margin, reduction=_reduction(reduction, "margin_ranking_loss"))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """torch.cosine_embedding_loss: F.cosine_embedding_loss with an int reduction."""
    return _loss_more.cosine_embedding_loss(
        input1, input2, target, margin,
        reduction=_reduction(reduction, "cosine_embedding_loss"))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction=0):
    """torch.triplet_margin_loss: F.triplet_margin_loss with an int reduction."""
    return _loss_more.triplet_margin_loss(
        anchor, positive, negative, margin, p, eps, swap,
        reduction=_reduction(reduction, "triplet_margin_loss"))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=0):
    """torch.binary_cross_entropy_with_logits: pos_weight before the int reduction.

    >>> import flowgrad as flow
    >>> flow.binary_cross_entropy_with_logits(flow.zeros(2), flow.ones(2))
    tensor([0.6931, 0.6931])
    """
    return _loss_more.binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction(reduction, "binary_cross_entropy_with_"
                                                                "logits"),
        pos_weight=pos_weight)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled=True):
    """torch.batch_norm: F.batch_norm with weight and bias first; `cudnn_enabled` has no
    effect on the CPU."""
    return _norm._batch_norm(input, running_mean, running_var, weight, bias, training,
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




def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    """torch.ctc_loss: F.ctc_loss with an int reduction."""
    return _loss_ctc.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                              _reduction(reduction, "ctc_loss"), zero_infinity)


# ---- dropout spellings: torch.*(input, p, train), in place with a trailing _ -----------------
def _dropout_spelling(name, input, p, train, inplace, alpha=False, feature=False):
    if not 0.0 <= p <= 1.0:  # (ATen's check: a RuntimeError, where F's is a ValueError)
        raise RuntimeError(f"{name}: dropout probability has to be between 0 and 1, but got "
                           f"{p}")
    if feature and train and input.dim() < 2:
        raise RuntimeError(f"{name}: Feature dropout requires at least 2 dimensions in the "
                           f"input, got shape {tuple(input.shape)}")
    dims = max(input.dim() - 2, 0) if feature else None
    return _nn_misc._dropout_impl(input, p, train, inplace, name.rstrip("_"), alpha=alpha,
                                  feature_dims=dims)


def feature_dropout(input, p, train):
    """torch.feature_dropout: zero whole (sample, channel) slices of an input of at least 2
    dims with probability p, scaling the rest by 1 / (1 - p).

    >>> import flowgrad as flow
    >>> flow.feature_dropout(flow.ones(2, 3, 4), 0.5, False).sum().item()
    24.0
    """
    return _dropout_spelling("feature_dropout", input, p, train, False, feature=True)


def feature_dropout_(input, p, train):
    """torch.feature_dropout_: feature_dropout in place."""
    return _dropout_spelling("feature_dropout_", input, p, train, True, feature=True)


def dropout_(input, p, train):
    """torch.dropout_: dropout in place; returns `input`.

    >>> import flowgrad as flow
    >>> x = flow.ones(3)
    >>> flow.dropout_(x, 0.5, False) is x
    True
    """
    return _dropout_spelling("dropout_", input, p, train, True)


def alpha_dropout_(input, p, train):
    """torch.alpha_dropout_: alpha_dropout in place."""
    return _dropout_spelling("alpha_dropout_", input, p, train, True, alpha=True)


def feature_alpha_dropout_(input, p, train):
    """torch.feature_alpha_dropout_: feature_alpha_dropout in place."""
    return _dropout_spelling("feature_alpha_dropout_", input, p, train, True, alpha=True,
                             feature=True)


# ---- torch.embedding_bag: the output and the CPU kernel's bookkeeping -----------------------
_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


@op("embedding_bag_bookkeeping", n_out=3, differentiable=False)
def _bag_bookkeeping(xp, weight, indices, offsets, *, mode, last, padding_idx, fast, per_bag):
    """torch's offset2bag, bag_size and max_indices (indices' dtype): each position's bag,
    each bag's count of non-padding entries, and (max mode) the weight row each output
    element came from. torch's sum mode keeps none of them: zeros, one per bag when the
    weight needs a gradient (`per_bag`), else one per offset, and an empty offset2bag on its
    float32 fast path, which runs without a padding_idx."""
    n, dtype = indices.shape[0], indices.dtype
    off = offsets.astype(xp.int64)
    bags = off.shape[0] - (1 if last else 0)
    where_bag = xp.minimum(xp.searchsorted(off, xp.arange(n), side="right") - 1, bags - 1)
    offset2bag = xp.zeros(0, dtype) if fast else where_bag.astype(dtype)
    if mode == "sum":
        zeros = xp.zeros(bags if per_bag else off.shape[0], dtype)
        return offset2bag, zeros, zeros.copy()
    real = indices != padding_idx if padding_idx is not None else xp.ones(n, bool)
    size = xp.bincount(where_bag[real], minlength=bags).astype(dtype) if n else \
        xp.zeros(bags, dtype)
    if mode == "mean":
        return offset2bag, size, size.copy()
    best = xp.zeros((bags, weight.shape[1]), dtype)
    for b in range(bags):  # the first row holding each column's max, as torch's loop
        rows = indices[(where_bag == b) & real]
        if rows.size:
            best[b] = rows[xp.argmax(weight[rows], axis=0)]
    return offset2bag, size, best


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """torch.embedding_bag: weight first, 1-D indices with offsets, an int mode (0 sum,
    1 mean, 2 max), a negative padding_idx for none; returns (output, offset2bag, bag_size,
    max_indices) as torch's CPU kernel does.

    >>> import flowgrad as flow
    >>> out, offset2bag, bag_size, _ = flow.embedding_bag(
    ...     flow.eye(3), flow.tensor([0, 2, 1]), flow.tensor([0, 2]), mode=1)
    >>> out
    tensor([[0.5000, 0.0000, 0.5000],
            [0.0000, 1.0000, 0.0000]])
    >>> offset2bag, bag_size
    (tensor([0, 0, 1]), tensor([2, 1]))
    """
    if mode not in _BAG_MODES:
        raise RuntimeError(f"embedding_bag: `mode` must be sum, mean, or max (0, 1 or 2), got "
                           f"{mode!r}")
    if indices.dim() != 1 or offsets is None or offsets.dim() != 1:
        raise RuntimeError(f"torch.embedding_bag: expected 1-D indices and 1-D offsets, got "
                           f"shapes {tuple(indices.shape)} and "
                           f"{None if offsets is None else tuple(offsets.shape)}; "
                           f"nn.functional.embedding_bag takes 2-D bags")
    if padding_idx is not None and padding_idx < 0:
        padding_idx = None
    name = _BAG_MODES[mode]
    out = _nn_misc.embedding_bag(indices, weight, offsets, None, 2, scale_grad_by_freq, name,
                                 sparse, per_sample_weights, include_last_offset, padding_idx)
    fast = name == "sum" and padding_idx is None and weight.dtype.name == "float32"
    return (out, *_bag_bookkeeping(weight.detach(), indices, offsets, mode=name,
                                   last=bool(include_last_offset), padding_idx=padding_idx,
                                   fast=fast, per_bag=weight.requires_grad and
                                   is_grad_enabled()))


def binomial(count, prob, generator=None):
    """torch.binomial: Binomial(count, prob) draws, float, broadcast. Both float tensors of
    one dtype; a nan probability gives nan, a count <= 0 gives 0, prob is clamped to [0, 1].
    The draws require grad where an input does, and a backward reaching them raises (torch
    has no derivative for them).

    >>> import flowgrad as flow
    >>> flow.binomial(flow.tensor([4.0, 0.0]), flow.tensor([1.0, 0.5]))
    tensor([4., 0.])
    """
    for name, t in (("count", count), ("prob", prob)):
        if t._data.dtype.kind not in "fV":
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: "
                             f"{t.dtype}")
    if count.dtype != prob.dtype:
        raise RuntimeError(f"binomial: count and prob must have one dtype, got {count.dtype} "
                           f"and {prob.dtype}; convert one with .to({count.dtype})")
    if count.dtype.name in ("float16", "bfloat16"):
        raise NotImplementedError(f"binomial: not implemented for {count.dtype} (float32 or "
                                  f"float64 only)")
    with no_grad():
        bad = prob.isnan() | count.isnan()
        n = where(count > 0, count, 0.0).floor()
        p = where(bad, 0.0, prob).clamp(0.0, 1.0)
        check_every_example(~(n.isinf() & (p > 0)), "binomial: an infinite count with a "
                            "positive probability has no finite draw")
        draws = where(bad, math.nan, _sampling.binomial(where(n.isinf(), 0.0, n), p, generator))
    if tuple(draws.shape) != tuple(count.shape) and count.numel():
        warn_resized(count.shape, draws.shape)  # (torch's kernel: an empty_like(count) resized)
    return without_derivative([draws], (count, prob), "binomial", error="RuntimeError")[0]


__all__ += ["ctc_loss", "feature_dropout", "feature_dropout_", "dropout_", "alpha_dropout_",
            "feature_alpha_dropout_", "embedding_bag", "binomial", "segment_reduce",
            "_segment_reduce"]


# ---- torch.grid_sampler*: F.grid_sample with torch's integer codes ------------------------
_GRID_MODES = ("bilinear", "nearest", "bicubic")
_GRID_PADDINGS = ("zeros", "border", "reflection")


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """F.grid_sample with torch's codes: interpolation 0 bilinear, 1 nearest, 2 bicubic;
    padding 0 zeros, 1 border, 2 reflection.

    >>> import flowgrad as flow
    >>> x = flow.arange(4.0).reshape(1, 1, 2, 2)
    >>> flow.grid_sampler(x, flow.zeros(1, 1, 1, 2), 0, 0, True)
    tensor([[[[1.5000]]]])
    """
    return _grid_sampler("grid_sampler", input, grid, interpolation_mode, padding_mode,
                         align_corners, None)


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler_2d: grid_sampler of a 4-D input and grid."""
    return _grid_sampler("grid_sampler_2d", input, grid, interpolation_mode, padding_mode,
                         align_corners, 4)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler_3d: grid_sampler of a 5-D input and grid (no bicubic)."""
    return _grid_sampler("grid_sampler_3d", input, grid, interpolation_mode, padding_mode,
                         align_corners, 5)


def _grid_sampler(name, input, grid, interpolation_mode, padding_mode, align_corners, ndim):
    codes = []
    for position, arg, value, names in ((3, "interpolation_mode", interpolation_mode,
                                         _GRID_MODES),
                                        (4, "padding_mode", padding_mode, _GRID_PADDINGS)):
        codes.append(int_arg(value, name, arg, position))
        if not 0 <= codes[-1] < len(names):  # (torch runs undefined behaviour there)
            raise RuntimeError(f"{name}(): {arg} must be one of 0..{len(names) - 1} "
                               f"({', '.join(names)}), got {codes[-1]}")
    mode, padding = _GRID_MODES[codes[0]], _GRID_PADDINGS[codes[1]]
    if not isinstance(align_corners, bool):
        raise TypeError(f"{name}(): argument 'align_corners' (position 5) must be bool, not "
                        f"{type(align_corners).__name__}")
    if ndim is not None and (input.ndim != ndim or grid.ndim != ndim):
        raise RuntimeError(f"grid_sampler(): expected {ndim}D input and grid with same number "
                           f"of dimensions, but got input with sizes {list(input.shape)} and "
                           f"grid with sizes {list(grid.shape)}")
    if mode == "bicubic" and input.ndim == 5:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    return grid_sample(input, grid, mode, padding, align_corners)


__all__ += ["grid_sampler", "grid_sampler_2d", "grid_sampler_3d"]


# ---- torch.native_*_norm: the normalized output and the statistics it used -------------------
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """(layer_norm's output, mean, rstd): mean and 1 / sqrt(biased var + eps) over the
    normalized dims, kept as size-1 dims; as torch's, only the output is differentiable.

    >>> import flowgrad as flow
    >>> out, mean, rstd = flow.native_layer_norm(flow.tensor([[1.0, 3.0]]), (2,), None, None,
    ...                                          0.0)
    >>> out, mean, rstd
    (tensor([[-1.,  1.]]), tensor([[2.]]), tensor([[1.]]))
    """
    out = _norm.layer_norm(input, normalized_shape, weight, bias, eps)
    dims = tuple(range(input.ndim - len(tuple(normalized_shape)), input.ndim))
    with no_grad():
        mean, rstd = _mean_rstd(input.detach(), dims, eps, (weight, bias))
    return out, mean, rstd


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(batch_norm's output, save_mean, save_invstd): in training the batch's mean and
    1 / sqrt(biased var + eps) per channel (running statistics updated as batch_norm's), in
    eval two empty tensors; as torch's, only the output is differentiable.

    >>> import flowgrad as flow
    >>> out, mean, invstd = flow.native_batch_norm(flow.tensor([[1.0], [3.0]]), None, None,
    ...                                            None, None, True, 0.1, 0.0)
    >>> mean, invstd
    (tensor([2.]), tensor([1.]))
    """
    dims = (0,) + tuple(range(2, input.ndim))
    with no_grad():
        if training:
            mean, rstd = (s.reshape(-1) for s in _mean_rstd(input.detach(), dims, eps,
                                                            (weight, bias)))
        else:
            mean = rstd = input.new_empty((0,))
    out = _norm._batch_norm(input, running_mean, running_var, weight, bias, bool(training),
                            momentum, eps)
    return out, mean, rstd


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """(group_norm's output, mean, rstd) with the (N, group) statistics; as torch's, all
    three are differentiable.

    >>> import flowgrad as flow
    >>> out, mean, rstd = flow.native_group_norm(flow.tensor([[[1.0], [3.0]]]), None, None,
    ...                                          1, 2, 1, 1, 0.0)
    >>> mean, rstd
    (tensor([[2.]]), tensor([[1.]]))
    """
    if input.numel() and (input.shape[0] != N or input.shape[1] != C or
                          input.numel() != N * C * HxW):
        raise RuntimeError(f"native_group_norm: expected input of N={N}, C={C} and HxW={HxW} "
                           f"elements per channel, got shape {tuple(input.shape)}")
    out = _norm.group_norm(input, group, weight, bias, eps)
    mean, rstd = _mean_rstd(input.reshape(N, group, C // group * HxW), (2,), eps)
    return out, mean.reshape(N, group), rstd.reshape(N, group)


def _mean_rstd(x, dims, eps, params=()):
    """The statistics in x's dtype; in float32 for a half-precision x with float32 `params`
    (weight, bias: torch's mixed precision), as torch's layer and batch norms."""
    if x.dtype.name in ("bfloat16", "float16") and any(
            p is not None and p.dtype.name == "float32" for p in params):
        x = x.float()
    mean = x.mean(dims, keepdim=True)
    return mean, (x.var(dims, unbiased=False, keepdim=True) + eps).rsqrt()


__all__ += ["native_layer_norm", "native_batch_norm", "native_group_norm"]
