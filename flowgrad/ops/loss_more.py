"""More losses, composed from differentiable ops (so every order of derivative comes from
theirs): kl_div, poisson_nll_loss, gaussian_nll_loss, and the margin losses.
binary_cross_entropy (+ with logits) are elementwise ops with torch's rules (written with
flowgrad ops, so differentiable again).

>>> import flowgrad as flow
>>> x = flow.tensor([0.0, 0.0])
>>> round(flow.nn.functional.binary_cross_entropy_with_logits(x, flow.ones(2)).item(), 4)
0.6931
"""
from __future__ import annotations

import math

import numpy as np

from .._warn import warn
from ..autograd.interpreter import require, varies_per_run
from ..device import array_module
from ..errors import check_kernel_dtype, check_same_dtype, expect_tensor
from ..func.batched import check_every_example
from ..tensor import Tensor
from .activation import softplus
from .elementwise import minimum, where
from .halfprec import upcast
from .kept import kept
from .loss import _float_input, check_no_grad_arg, check_reduction, legacy_reduction, reduce_loss
from .nn_misc import one_hot, pairwise_distance
from .registry import op

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
           "poisson_nll_loss", "gaussian_nll_loss", "cosine_embedding_loss",
           "margin_ranking_loss", "hinge_embedding_loss", "triplet_margin_loss",
           "multi_margin_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "multilabel_margin_loss", "triplet_margin_with_distance_loss"]


# ---- binary cross entropy -----------------------------------------------------------------
def _same_shape(input, target, name):
    if not isinstance(target, Tensor):
        raise TypeError(f"{name}: expected target to be a Tensor, got {type(target).__name__}")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{name}: using a target size ({tuple(target.shape)}) that is "
                         f"different to the input size ({tuple(input.shape)}) is deprecated. "
                         f"Please ensure they have the same size.")
    return target.to(input.dtype) if target._data.dtype != input._data.dtype else target


def _broadcastable(t, shape, name, what):
    if t is None:
        return None
    try:
        np.broadcast_to(np.empty(tuple(t.shape), np.int8), tuple(shape))
    except ValueError:
        raise RuntimeError(f"{name}: {what} of shape {tuple(t.shape)} can't be broadcast to "
                           f"the input's shape {tuple(shape)}") from None
    return t


def _long_target(target, name):
    """torch's margin kernels take int64 class indices only (int32 and uint8 raise too)."""
    if not isinstance(target, Tensor) or target._data.dtype != np.int64:
        got = target.dtype if isinstance(target, Tensor) else type(target).__name__
        raise RuntimeError(f"{name}: expected scalar type Long (int64 class indices) but "
                           f"found {got}; use .long()")


def _check_unit_range(data, what):
    """Raise torch's RuntimeError unless every element of `data` lies in [0, 1] (nan does
    not); one min and one max pass for valid data. In the kernel: a compiled plan checks
    each call's values."""
    if not data.size:
        return
    lo, hi = data.min(), data.max()
    if lo >= 0 and hi <= 1:  # false for nan: min/max propagate it
        return
    bad = data[~((data >= 0) & (data <= 1))].reshape(-1)[0]
    raise RuntimeError(f"binary_cross_entropy: all elements of {what} should be between 0 and "
                       f"1, got {float(bad)} ({what} of shape {tuple(data.shape)})"
                       + ("; apply sigmoid first or use binary_cross_entropy_with_logits"
                          if what == "input" else ""))


# One op each (elementwise loss, torch's formulas), so that an inf upstream gradient gives
# inf * finite = +-inf where the composed rules gave nan (0 * inf); reductions and weights
# stay ordinary ops.
@op("binary_cross_entropy", save="inputs", layout="elementwise")
def _bce(xp, x, t):
    _check_unit_range(x, "input")
    _check_unit_range(t, "target")
    with xp.errstate(divide="ignore"):
        log_x = xp.maximum(xp.log(x), -100)
        log_1mx = xp.maximum(xp.log1p(-x), -100)
    return ((t - 1) * log_1mx - t * log_x).astype(x.dtype, copy=False)


@_bce.grad
def binary_cross_entropy_backward(ctx, dy):
    x, t = ctx.inputs
    need = ctx.needs_input_grad
    # torch: dy (x - t) / max(x (1 - x), 1e-12) and, for the target, -dy logit(x)
    dx = dy * (x - t) / ((1.0 - x) * x).clamp(min=1e-12) if need[0] else None
    dt = dy * ((-x).log1p() - x.log()) if need[1] else None
    return dx, dt


@op("binary_cross_entropy_with_logits", save="inputs", layout="elementwise")
def _bce_logits(xp, x, t, *pos_weight):
    sp = xp.logaddexp(xp.zeros((), x.dtype), -x)  # softplus(-x) = -log(sigmoid(x))
    if pos_weight:
        sp *= (pos_weight[0] - 1) * t + 1
    sp += (1 - t) * x
    return sp.astype(x.dtype, copy=False)


@_bce_logits.grad
def binary_cross_entropy_with_logits_backward(ctx, dy):
    x, t, *pos_weight = ctx.inputs
    need = ctx.needs_input_grad
    s = x.sigmoid() if need[0] else None
    if not pos_weight:
        return (dy * (s - t) if need[0] else None), (dy * -x if need[1] else None)
    pw = pos_weight[0]
    sp = softplus(-x) if need[1] or need[2] else None
    pt = pw * t
    dx = dy * ((pt + 1.0 - t) * s - pt) if need[0] else None
    # d/dt: (pw - 1) softplus(-x) - x; d/dpw: t softplus(-x)
    dt = dy * ((pw - 1.0) * sp - x) if need[1] else None
    dpw = dy * t * sp if need[2] else None
    return dx, dt, dpw


@legacy_reduction
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)), the logs clamped at -100 as torch does; input and
    target must be probabilities in [0, 1].

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.binary_cross_entropy(flow.tensor([0.9, 0.2]), flow.tensor([1.0, 0.0]))
    tensor(0.1643)
    """
    check_reduction(reduction, "binary_cross_entropy")
    x = _float_input(input, "binary_cross_entropy")
    check_same_dtype("binary_cross_entropy", x, target=target)  # (a non-tensor: _same_shape)
    t = _same_shape(x, target, "binary_cross_entropy")
    _broadcastable(weight, x.shape, "binary_cross_entropy", "weight")
    check_no_grad_arg(weight, "binary_cross_entropy", "weight")
    loss = _bce(x, t)
    if weight is not None:
        loss = loss * weight.to(x.dtype)
    return reduce_loss(loss, reduction)


@legacy_reduction
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """BCE of sigmoid(input), computed stably: (1 - t) x + (1 + (pw - 1) t) softplus(-x).

    >>> import flowgrad as flow
    >>> F = flow.nn.functional
    >>> F.binary_cross_entropy_with_logits(flow.tensor([1e4]), flow.tensor([0.0])).item()
    10000.0
    """
    check_reduction(reduction, "binary_cross_entropy_with_logits")
    x = _float_input(input, "binary_cross_entropy_with_logits")
    if not isinstance(target, Tensor) or tuple(target.shape) != tuple(x.shape):
        raise ValueError(f"binary_cross_entropy_with_logits: target size "
                         f"({tuple(getattr(target, 'shape', ()))}) must be the same as input "
                         f"size ({tuple(x.shape)})")
    if target._data.dtype == np.bool_:  # (torch's kernel subtracts from the target)
        raise RuntimeError("binary_cross_entropy_with_logits: Subtraction, the `-` operator, "
                           "with a bool tensor is not supported; convert the target with "
                           ".float()")
    # torch's kernel computes in the target's dtype (its in-place steps start from the target)
    x, t = (x.to(target.dtype) if target._data.dtype != x._data.dtype else x), target
    _broadcastable(weight, x.shape, "binary_cross_entropy_with_logits", "weight")
    _broadcastable(pos_weight, x.shape, "binary_cross_entropy_with_logits", "pos_weight")
    check_no_grad_arg(weight, "binary_cross_entropy_with_logits", "weight")
    check_no_grad_arg(pos_weight, "binary_cross_entropy_with_logits", "pos_weight")
    if pos_weight is None:
        loss = _bce_logits(x, t)
    else:
        loss = _bce_logits(x, t, pos_weight.to(x.dtype))
    if weight is not None:
        loss = loss * weight.to(x.dtype)
    return reduce_loss(loss, reduction)


# ---- divergences and likelihoods ---------------------------------------------------------------
@legacy_reduction
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL(target || exp(input)) pointwise: target * (log target - input); input holds
    log-probabilities. reduction='batchmean' divides the sum by the batch size.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> p = flow.tensor([[0.25, 0.75]])
    >>> F.kl_div(p.log(), flow.tensor([[0.5, 0.5]]), reduction="batchmean")
    tensor(0.1438)
    """
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"kl_div: {reduction!r} is not a valid value for reduction; use one of "
                         f"('none', 'mean', 'sum', 'batchmean')")
    if isinstance(target, Tensor) and target._data.dtype.kind in "biu":
        raise RuntimeError("kl_div: Integral inputs not supported.")
    x, t = _float_input(input, "kl_div"), target  # (promoted together, as torch's)
    if log_target:
        loss = t.exp() * (t - x)
    else:
        # torch's xlogy(t, t): 0 at t == 0 (nan below 0), and there a nan gradient for the
        # target (torch's rule: 0 * log 0 + 0 / 0), which the branch not taken here gives
        loss = where(t == 0, 0.0, t * t.log()) - t * x
    if reduction == "batchmean":
        return loss.sum() / (x._data.shape[0] if x._data.ndim else 1)
    if reduction == "mean":
        warn("kl_div: reduction='mean' divides the total loss by both the batch size "
             "and the support size; 'batchmean' gives the true KL divergence",
             stacklevel=2)
    return reduce_loss(loss, reduction)


@legacy_reduction
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Poisson negative log-likelihood: exp(x) - t x (log_input) or x - t log(x + eps);
    `full` adds Stirling's term for t > 1."""
    check_reduction(reduction, "poisson_nll_loss")
    if not isinstance(input, Tensor):
        raise TypeError(f"poisson_nll_loss: expected input to be a Tensor, got "
                        f"{type(input).__name__}")
    # any dtype, as torch's composite: ints give a float loss (exp, log), a bool raises in
    # the subtraction, a complex one stays complex
    x, t = input, target  # (promoted together, as torch's)
    loss = x.exp() - t * x if log_input else x - t * (x + eps).log()
    if full:
        # torch's masked_fill(t <= 1, 0) of the term: its target gradient is nan where t <= 0
        stirling = t * t.log() - t + (t * (2 * math.pi)).log() * 0.5
        loss = loss + where(t > 1, stirling, 0.0)
    return reduce_loss(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log var + (input - target)^2 / var) (+ 0.5 log 2 pi when full); var is clamped at
    eps for stability without blocking its gradient, as torch does."""
    xp = array_module(input._data)
    check_reduction(reduction, "gaussian_nll_loss")
    x = _float_input(input, "gaussian_nll_loss")
    if not isinstance(var, Tensor):
        var = Tensor._wrap(xp.full(tuple(x.shape), float(var), x._data.dtype))
    check_every_example(var >= 0, "gaussian_nll_loss: var has negative entry/entries",
                        ValueError)
    xs, vs = tuple(x.shape), tuple(var.shape)
    if vs != xs:
        if xs[:-1] == vs:  # one variance per sample (homoscedastic)
            var = var.unsqueeze(-1)
        # else torch's rule: the same ndim and the var's sizes where they differ sum to 1
        # (one mismatched dim of size 1: (4, 1, 32) or (1, 3) against (4, 3, 32) or (4, 3))
        elif len(vs) != len(xs) or sum(b for a, b in zip(xs, vs) if a != b) != 1:
            raise ValueError(f"gaussian_nll_loss: var is of incorrect size {vs} for input of "
                             f"size {xs}; use the input's shape, it without its last dim, or "
                             f"it with 1 for one of its dims")
    # the clamp shifts the value but passes the gradient straight through (torch's no_grad);
    # a where, not var + (clamp(var) - var), which made an infinite var (float16's above
    # 65504) nan where torch's loss is inf
    v = where(var < eps, var - var.detach() + eps, var)
    d = x - target
    loss = (v.log() + d * d / v) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction)


# ---- margin losses ----------------------------------------------------------------------------
def _sign_target(target, name):
    return target == 1, target == -1


@legacy_reduction
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target is 1; max(0, cos(x1, x2) - margin) where it is -1."""
    check_reduction(reduction, "cosine_embedding_loss")
    # torch checks the dims only (a 1-D target: 2-D inputs, a 0-d one: 1-D inputs); the
    # shapes then broadcast, as its ops do
    dim = target._data.ndim
    if dim > 1:
        raise RuntimeError(f"cosine_embedding_loss: 0D or 1D target tensor expected, "
                           f"multi-target not supported, got shape {tuple(target.shape)}")
    if input1._data.ndim != dim + 1 or input2._data.ndim != dim + 1:
        raise RuntimeError(f"cosine_embedding_loss: {dim}D target tensor expects {dim + 1}D "
                           f"input tensors, but found inputs with sizes "
                           f"{tuple(input1.shape)} and {tuple(input2.shape)}")
    try:
        np.broadcast_shapes(tuple(input1.shape), tuple(input2.shape))
        np.broadcast_shapes(tuple(target.shape), tuple(input1.shape[:dim]),
                            tuple(input2.shape[:dim]))
    except ValueError:
        raise RuntimeError(f"cosine_embedding_loss: the sizes of input1 {tuple(input1.shape)}, "
                           f"input2 {tuple(input2.shape)} and target {tuple(target.shape)} "
                           f"don't broadcast") from None
    eps = 1e-12
    # half precision in float32, rounded once (torch rounds each step, as this did: its
    # gradient 1e4 times torch's error for bfloat16 inputs of 1e-11..1e9)
    low, (input1, input2) = upcast(input1, input2) if input1.dtype == input2.dtype else \
        (None, (input1, input2))  # (mixed dtypes promote: the wider one's)
    prod = (input1 * input2).sum(dim)
    denom = (((input1 * input1).sum(dim) + eps) * ((input2 * input2).sum(dim) + eps)).sqrt()
    cos = prod / denom
    is_pos, is_neg = _sign_target(target, "cosine_embedding_loss")
    loss = where(is_pos, 1.0 - cos, 0.0) + where(is_neg, (cos - margin).clamp(min=0.0), 0.0)
    loss = reduce_loss(loss, reduction)
    return loss if low is None else loss.to(low)


@legacy_reduction
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (x1 - x2) + margin).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> x1, x2 = flow.tensor([1.0, 2.0]), flow.tensor([2.0, 1.0])
    >>> F.margin_ranking_loss(x1, x2, flow.tensor([1.0, 1.0]))
    tensor(0.5000)
    """
    check_reduction(reduction, "margin_ranking_loss")
    if not (input1._data.ndim == input2._data.ndim == target._data.ndim):
        raise RuntimeError(f"margin_ranking_loss: all input tensors should have the same "
                           f"number of dims; got input1: {tuple(input1.shape)}, input2: "
                           f"{tuple(input2.shape)}, target: {tuple(target.shape)}")
    t = target  # (promoted with the inputs, as torch's)
    return reduce_loss((-t * (input1 - input2) + margin).clamp(min=0.0), reduction)


@legacy_reduction
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """x where target is 1, max(0, margin - x) where it is -1."""
    check_reduction(reduction, "hinge_embedding_loss")
    expect_tensor("hinge_embedding_loss", input)
    expect_tensor("hinge_embedding_loss", target, "target", 2)
    loss = where(target != 1, (margin - input).clamp(min=0.0), 0.0) + \
        where(target != -1, input, 0.0)
    return reduce_loss(loss, reduction)


@legacy_reduction
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, d(a, p) - d(a, n) + margin), d the pairwise p-norm distance.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> a = flow.tensor([[0.0, 0.0]])
    >>> F.triplet_margin_loss(a, flow.tensor([[0.0, 1.0]]), flow.tensor([[3.0, 0.0]]), margin=1.0)
    tensor(0.)
    """
    check_reduction(reduction, "triplet_margin_loss")
    if margin <= 0:
        raise ValueError(f"triplet_margin_loss: margin must be greater than 0, got {margin}")
    nd = anchor._data.ndim
    if not nd == positive._data.ndim == negative._data.ndim:
        raise RuntimeError(f"triplet_margin_loss: expected anchor, positive and negative with "
                           f"the same number of dims, got {tuple(anchor.shape)}, "
                           f"{tuple(positive.shape)}, {tuple(negative.shape)}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return reduce_loss((d_pos - d_neg + margin).clamp(min=0.0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """max(0, d(a, p) - d(a, n) + margin) for any distance d (pairwise_distance by default);
    with swap, d(a, n) is replaced by min(d(a, n), d(p, n)).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> a = flow.tensor([[0.0, 0.0]])
    >>> F.triplet_margin_with_distance_loss(a, a + 1, a, margin=0.5)
    tensor(1.9142)
    """
    check_reduction(reduction, "triplet_margin_with_distance_loss")
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, "
                         f"got {margin}")
    dims = [t._data.ndim for t in (anchor, positive, negative)]
    if len(set(dims)) != 1:
        raise RuntimeError(f"triplet_margin_with_distance_loss: the anchor, positive, and "
                           f"negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and "
                           f"negative {dims[2]}D inputs")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, dist(positive, negative))
    return reduce_loss((margin + d_pos - d_neg).clamp(min=0.0), reduction)


@legacy_reduction
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Multi-class hinge: sum over j != y of w[y] max(0, margin - x[y] + x[j])**p / C."""
    check_reduction(reduction, "multi_margin_loss")
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    if weight is not None and weight.ndim != 1:  # (torch's Python check, before the others)
        raise ValueError(f"multi_margin_loss: weight must be one-dimensional, got shape "
                         f"{tuple(weight.shape)}")
    x = _float_input(input, "multi_margin_loss")
    x2 = x if x._data.ndim == 2 else x.reshape(1, -1)  # (a 0-d input: one class, as torch)
    if x._data.ndim > 2 or target._data.ndim > 1 or \
            target._data.reshape(-1).shape[0] != x2._data.shape[0]:
        raise RuntimeError(f"multi_margin_loss: expected input (N, C) or (C,) and target (N,) "
                           f"or (), got input {tuple(x.shape)} and target {tuple(target.shape)}")
    _long_target(target, "multi_margin_loss")
    # torch's CPU kernel: float32 and float64 only (half precision refused)
    check_kernel_dtype(x, "multi_margin_loss_cpu_kernel",
                       kinds="fc" if x._data.dtype.itemsize >= 4 else "")
    t = target._data.reshape(-1)
    n, c = x2._data.shape
    if t.size and (t.min() < 0 or t.max() >= c):
        raise RuntimeError(f"multi_margin_loss: target out of range: class indices must lie "
                           f"in [0, {c}), got {t.tolist() if t.size < 10 else t.dtype}")
    if varies_per_run(target) and t.size:  # (a plan's: its error, on each call's target)
        require((target >= 0) & (target < c), f"multi_margin_loss: target out of range: class "
                                              f"indices must lie in [0, {c})", RuntimeError)
    target_shape = tuple(target.shape)
    target = target.reshape(n, 1)  # (ops on the target: a graph compiles them)
    picked = x2.gather(1, target)
    z = x2 - picked + margin
    z = where(z > 0, z, 0.0)  # (strictly: a margin met exactly has no gradient, as torch's)
    if p == 2:
        z = z * z
    z = where(one_hot(target.reshape(n), c) == 0, z, 0.0)
    if weight is not None:
        if tuple(weight.shape) != (c,):
            raise RuntimeError(f"multi_margin_loss: weight must have shape ({c},), got "
                               f"{tuple(weight.shape)}")
        check_same_dtype("multi_margin_loss", x, weight=weight)
        check_no_grad_arg(weight, "multi_margin_loss", "weight")
        z = z * weight[target.reshape(n)].unsqueeze(1)
    loss = z.sum(1) / c
    if tuple(loss.shape) != tuple(target_shape):  # torch's: the target's shape, (1,) or ()
        loss = loss.reshape(target_shape)
    return reduce_loss(loss, reduction)


@legacy_reduction
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), averaged over all elements."""
    check_reduction(reduction, "soft_margin_loss")
    if not isinstance(target, Tensor):
        raise TypeError(f"soft_margin_loss: expected target to be a Tensor, got "
                        f"{type(target).__name__}")
    # torch broadcasts the target into the input's shape (an output of the input's shape)
    _broadcastable(target, input.shape, "soft_margin_loss", "target")
    t = target.to(input.dtype) if target._data.dtype != input._data.dtype else target
    check_no_grad_arg(target, "soft_margin_loss", "target")  # (torch has no target rule)
    return kept(reduce_loss(softplus(-t * input), reduction), input, target,
                node="SoftMarginLossBackward0")


@legacy_reduction
def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Per-class BCE-with-logits, averaged over the classes (last dim) of each sample."""
    check_reduction(reduction, "multilabel_soft_margin_loss")
    if not isinstance(target, Tensor):
        raise TypeError(f"multilabel_soft_margin_loss: expected target to be a Tensor, got "
                        f"{type(target).__name__}")
    try:  # torch broadcasts input and target (and weight) with no check of their shapes
        np.broadcast_shapes(tuple(input.shape), tuple(target.shape))
    except ValueError:
        raise RuntimeError(f"multilabel_soft_margin_loss: target of shape "
                           f"{tuple(target.shape)} can't be broadcast with the input's shape "
                           f"{tuple(input.shape)}") from None
    t = target  # (promoted with the input, and the weight too, as torch's)
    # -(t log sigmoid(x) + (1 - t) log sigmoid(-x)) = t softplus(-x) + (1 - t) softplus(x)
    loss = t * softplus(-input) + (1.0 - t) * softplus(input)
    if weight is not None:
        loss = loss * weight
    # the class dim is the input's last, counted from the front in a broadcast loss, as torch's
    class_dim = input._data.ndim - 1
    c = input._data.shape[-1]
    return reduce_loss(loss.sum(class_dim) / c, reduction)


@legacy_reduction
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge: for each sample, sum over its target classes j (the indices in
    target before the first -1) and non-target classes i of max(0, 1 - (x[j] - x[i])) / C.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.multilabel_margin_loss(flow.tensor([0.1, 0.2, 0.4, 0.8]), flow.tensor([3, 0, -1, 1]))
    tensor(0.8500)
    """
    check_reduction(reduction, "multilabel_margin_loss")
    x = _float_input(input, "multilabel_margin_loss")
    nd = x._data.ndim
    if nd > 2 or nd == 2 and x._data.shape[1] == 0 or nd < 2 and x._data.size == 0:
        raise RuntimeError(f"multilabel_margin_loss: expected non-empty vector or matrix with "
                           f"optional 0-dim batch size, but got: {list(x.shape)}")
    _long_target(target, "multilabel_margin_loss")
    if tuple(target.shape) != tuple(x.shape) and not (nd == 0 and target._data.size == 1):
        raise RuntimeError(f"multilabel_margin_loss: inconsistent target size: "
                           f"{list(target.shape)} for input of size: {list(x.shape)}")
    x2 = x.reshape(-1, x._data.shape[-1] if nd else 1)
    n, c = x2._data.shape
    check = target._data.reshape(-1)  # (a validation read: the masks below are ops)
    if check.size and (check.min() < -1 or check.max() >= c):
        raise RuntimeError(f"multilabel_margin_loss: target is out of range: class indices "
                           f"must lie in [0, {c}) or be -1 (padding), got "
                           f"{int(check.min())}..{int(check.max())}")
    if varies_per_run(target) and check.size:  # (a plan's: its error, on each call's target)
        require((target >= -1) & (target < c), f"multilabel_margin_loss: target is out of "
                f"range: class indices must lie in [0, {c}) or be -1 (padding)", RuntimeError)
    # the targets of a row are the indices before its first -1 (ops on the target, so a
    # traced graph reads each call's)
    t = target.reshape(n, c).long()
    valid = (t != -1).long().cumprod(1) == 1
    safe = where(valid, t, 0)
    is_target = (one_hot(safe, c) * valid.long().unsqueeze(2)).amax(1) == 1  # (N, C)
    picked = x2.gather(1, safe)  # (N, C): x[y_j]
    z = 1.0 - picked.unsqueeze(2) + x2.unsqueeze(1)  # (N, j, i)
    z = where(z > 0, z, 0.0)  # (strictly: a margin met exactly has no gradient, as torch's)
    pair = valid.unsqueeze(2) & is_target.logical_not().unsqueeze(1)
    loss = where(pair, z, 0.0).sum((1, 2)) / c
    loss = loss.reshape(()) if nd < 2 else loss
    return reduce_loss(loss, reduction)
