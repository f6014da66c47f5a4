"""Losses: cross_entropy (log_softmax + nll_loss), nll_loss, mse_loss.

>>> import flowgrad as flow
>>> logits = flow.zeros(2, 3, requires_grad=True)
>>> round(flow.nn.functional.cross_entropy(logits, flow.tensor([0, 2])).item(), 4)
1.0986
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .activation import log_softmax
from .registry import op

__all__ = ["nll_loss", "cross_entropy", "mse_loss"]

_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(reduction, name):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: {reduction!r} is not a valid value for reduction; use one "
                         f"of {_REDUCTIONS}")


def _class_weights(x, target, weight, ignore_index):
    """Per-sample weights (0 where target == ignore_index) and safe targets."""
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    w = weight[safe] if weight is not None else np.ones(safe.shape, x.dtype)
    return (w * valid).astype(x.dtype), safe


@op("nll_loss")
def _nll_loss(xp, x, *, target, weight, ignore_index, reduction):
    w, safe = _class_weights(x, target, weight, ignore_index)
    picked = xp.take_along_axis(x, xp.expand_dims(safe, 1), axis=1).squeeze(1)
    loss = -w * picked
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


@_nll_loss.grad
def _(ctx, dy):
    shape = ctx.input_shapes[0]
    dtype = dy._data.dtype
    w, safe = _class_weights(np.empty(0, dtype), ctx.target, ctx.weight, ctx.ignore_index)
    if ctx.reduction == "mean":
        w = w / w.sum()
    onehot = np.zeros(shape, dtype)
    np.put_along_axis(onehot, np.expand_dims(safe, 1), np.expand_dims(-w, 1), axis=1)
    if ctx.reduction == "none":
        dy = dy.unsqueeze(1)
    return Tensor._wrap(onehot) * dy


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class indices `target` under log-probabilities `input`
    (N, C, d1, ...)."""
    _check_reduction(reduction, "nll_loss")
    if target._data.dtype.kind not in "iu":
        raise RuntimeError(f"nll_loss: expected target of an integer dtype (class indices), "
                           f"got {target.dtype}; use .long()")
    x = input if input._data.ndim > 1 else input.unsqueeze(0)
    t = target._data if input._data.ndim > 1 else target._data.reshape(1)
    if x._data.shape[:1] + x._data.shape[2:] != t.shape:
        raise ValueError(f"nll_loss: expected target of shape "
                         f"{tuple(x.shape[:1] + x.shape[2:])} for input of shape "
                         f"{tuple(input.shape)}, got target shape {tuple(target.shape)}")
    n_classes = x._data.shape[1]
    bad = (t != ignore_index) & ((t < 0) | (t >= n_classes))
    if bad.any():
        raise IndexError(f"nll_loss: target {int(t[bad][0])} is out of bounds for "
                         f"{n_classes} classes (input shape {tuple(input.shape)})")
    w = weight._data if weight is not None else None
    out = _nll_loss(x, target=t, weight=w, ignore_index=ignore_index, reduction=reduction)
    if reduction == "none" and input._data.ndim == 1:
        out = out.squeeze(0)
    return out


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """log_softmax over dim 1, then nll_loss with class indices."""
    if target._data.dtype.kind == "f" or label_smoothing:
        from .loss_more import cross_entropy_soft

        return cross_entropy_soft(input, target, weight, ignore_index, reduction,
                                  label_smoothing)
    dim = 1 if input._data.ndim > 1 else 0
    return nll_loss(log_softmax(input, dim), target, weight, ignore_index=ignore_index,
                    reduction=reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean squared error (sum or per element with `reduction`)."""
    _check_reduction(reduction, "mse_loss")
    if input.shape != target.shape:
        import warnings

        warnings.warn(f"mse_loss: target size {tuple(target.shape)} differs from input size "
                      f"{tuple(input.shape)}; they will be broadcast", stacklevel=2)
    sq = (input - target) ** 2
    return sq if reduction == "none" else sq.sum() if reduction == "sum" else sq.mean()
