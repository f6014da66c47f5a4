"""Losses over classes and regression losses: cross_entropy (a fused primitive for class
indices: log_softmax and nll in one kernel; composed for probabilities or label smoothing),
nll_loss, mse_loss, l1_loss, smooth_l1_loss, huber_loss. The rest are in loss_more.py
(margins, divergences) and loss_ctc.py.

>>> import flowgrad as flow
>>> logits = flow.zeros(2, 3, requires_grad=True)
>>> round(flow.nn.functional.cross_entropy(logits, flow.tensor([0, 2])).item(), 4)
1.0986
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from .._warn import warn
from ..autograd import grad_mode
from ..dtypes import bfloat16, float16, promote_types
from ..errors import check_kernel_dtype, check_same_dtype
from ..tensor import Tensor
from .activation import _row_sums, log_softmax, row_max, softmax
from .elementwise import where
from .halfprec import HALF, in_float32
from .kept import kept
from .registry import op
from .rules import step

__all__ = ["nll_loss", "cross_entropy", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"]

_REDUCTIONS = ("none", "mean", "sum")


def check_reduction(reduction, name):
    """Raise ValueError naming loss `name` unless `reduction` is 'none', 'mean' or 'sum'."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: {reduction!r} is not a valid value for reduction; use one "
                         f"of {_REDUCTIONS}")


_check_reduction = check_reduction


def legacy_reduction_name(size_average, reduce):
    """The `reduction` torch's deprecated `size_average` / `reduce` arguments stand for (None
    counts as True), with torch's deprecation warning.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     legacy_reduction_name(False, None), legacy_reduction_name(None, False)
    ('sum', 'none')
    """
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    name = "mean" if (size_average and reduce) else "sum" if reduce else "none"
    warn(f"size_average and reduce args will be deprecated, please use "
         f"reduction='{name}' instead.", stacklevel=3)  # the caller's caller
    return name


def legacy_reduction(loss):
    """Decorator for a functional loss with torch's deprecated `size_average` and `reduce`
    arguments: when either is given (by keyword or position) it sets `reduction`, as torch's
    (`F.mse_loss(x, y, size_average=False)` is a sum)."""
    signature = inspect.signature(loss)
    names = list(signature.parameters)
    first = min(names.index("size_average"), names.index("reduce"))

    @functools.wraps(loss)
    def call(*args, **kwargs):
        if len(args) <= first and kwargs.get("size_average") is None and \
                kwargs.get("reduce") is None:
            return loss(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        given = bound.arguments
        if given.get("size_average") is not None or given.get("reduce") is not None:
            given["reduction"] = legacy_reduction_name(given.get("size_average"),
                                                       given.get("reduce"))
            given["size_average"] = given["reduce"] = None
        return loss(*bound.args, **bound.kwargs)
    return call


def _weighted(loss, weight, input, reduction, name, mean_by_weight):
    """torch's weighted mse/l1/huber: the weight of the input's exact shape multiplies the
    elementwise loss; 'mean' divides by the summed weights for mse and l1 (a weighted mean),
    by the element count for huber."""
    if weight is None:
        return reduce_loss(loss, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{name}: Weights and input must have the same size; got weight "
                         f"{tuple(weight.shape)} for input {tuple(input.shape)}")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / weight.sum()
    return reduce_loss(loss, reduction)


def check_no_grad_arg(tensor, name, arg):
    """Raise torch's RuntimeError where loss `name` has no gradient rule for `arg` (a class
    weight, pos_weight, a target) and that tensor requires grad while grad mode is on."""
    if isinstance(tensor, Tensor) and tensor.requires_grad and grad_mode.is_grad_enabled():
        raise RuntimeError(f"{name}: the function is not differentiable with respect to "
                           f"argument '{arg}'; pass {arg}.detach()")


def reduce_loss(loss, reduction):
    """Apply 'none' / 'mean' / 'sum' to a per-element loss."""
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _class_weights(xp, dtype, target, weight, ignore_index):
    """Per-sample weights (0 where target == ignore_index) and safe targets (kernels)."""
    valid = target != ignore_index
    safe = xp.where(valid, target, 0)
    w = weight[0][safe] if weight else xp.ones(safe.shape, dtype)
    return (w * valid).astype(dtype, copy=False), safe, valid


def _check_targets(target, ignore_index, n_classes, name, shape=None):
    """Class targets in range (or ignore_index): in the Python wrapper, before anything is
    gathered by them, and again in the kernel, as a compiled plan runs the kernel alone and a
    negative target would wrap around instead of raising. `shape`: the input's, for the
    message."""
    bad = (target != ignore_index) & ((target < 0) | (target >= n_classes))
    if bad.any():
        where = "" if shape is None else f" (input shape {shape})"
        raise IndexError(f"{name}: target {int(target[bad][0])} is out of bounds for "
                         f"{n_classes} classes{where}")


def _reduce_picked(xp, picked, w, reduction):
    loss = -w * picked
    if reduction == "none":  # row-major, as torch's kernels allocate it (the class weights
        # gathered by a strided target would lay it out as the target)
        return loss if loss.flags.c_contiguous else xp.ascontiguousarray(loss)
    if reduction == "sum":
        return xp.add.reduce(loss, axis=None)
    return xp.add.reduce(loss, axis=None) / xp.add.reduce(w, axis=None)  # all ignored: nan


def _coef_arrays(xp, dy, target, weight, n_classes, ignore_index, reduction):
    """For the rules of nll_loss and cross_entropy: d(loss)/d(picked log-prob) per sample,
    over -dy (-w_i, scaled for 'mean'), where the target is valid, and the one-hot mask of
    the valid targets. Ignored samples get exactly 0, as torch (which never writes them),
    even when every target is ignored ('mean': 0 / 0); valid targets of total weight 0 give
    nan (torch: 0 * inf)."""
    w, safe, valid = _class_weights(xp, dy.dtype, target, weight, ignore_index)
    if reduction == "mean":
        total = w.sum()
        if total != 0:
            w = w / total
        elif valid.any():
            w = xp.where(valid, xp.nan, 0.0).astype(dy.dtype)
    classes = xp.arange(n_classes).reshape((1, n_classes) + (1,) * (safe.ndim - 1))
    hit = (classes == xp.expand_dims(safe, 1)) & xp.expand_dims(valid, 1)
    return w, valid, hit


@op("nll_coef", n_out=3, differentiable=False)
def _nll_coef(xp, dy, target, *weight, n_classes, ignore_index, reduction):
    return _coef_arrays(xp, dy, target, weight, n_classes, ignore_index, reduction)


def _plain_targets(xp, target, n_classes, ignore_index):
    """Whether every target is a class in [0, n_classes) and none is ignore_index: one
    comparison of the targets read as unsigned integers (a negative one reads as huge), and
    one more only when ignore_index is itself a class (array methods only: any xp)."""
    kind = target.dtype.kind
    if kind not in "iu" or not target.size:
        return False
    unsigned = target.view(f"u{target.dtype.itemsize}") if kind == "i" else target
    if not (unsigned < n_classes).all():
        return False
    return not 0 <= ignore_index < n_classes or not (target == ignore_index).any()


def _plain_batch(xp, weight, logits, target, ignore_index, reduction):
    """The usual classification batch: (N, C) logits, no class weights, every target a class
    and none ignored, a reduced loss. Its kernels skip the per-sample weights (the same
    values: each weight is exactly 1 and the mean divides by the count)."""
    return not weight and logits.ndim == 2 and reduction != "none" and \
        _plain_targets(xp, target, logits.shape[1], ignore_index)


@op("cross_entropy_grad", differentiable=False)
@in_float32  # a half-precision input accumulates in float32, as torch
def _cross_entropy_grad(xp, logp, dy, target, *weight, ignore_index, reduction):
    """cross_entropy's plain backward in one kernel: coef * (softmax(x) - onehot(t))."""
    if _plain_batch(xp, weight, logp, target, ignore_index, reduction):
        n = logp.shape[0]
        coef = dy if reduction == "sum" else dy * (logp.dtype.type(1) / logp.dtype.type(n))
        grad = xp.exp(logp)
        grad *= coef
        grad[xp.arange(n), target] -= coef
        return grad
    w, valid, hit = _coef_arrays(xp, dy, target, weight, logp.shape[1], ignore_index,
                                 reduction)
    coef = xp.expand_dims(xp.where(valid, dy * w, 0.0), 1).astype(logp.dtype, copy=False)
    return xp.exp(logp) * coef - xp.where(hit, coef, 0.0)


def _sample_coef(ctx, dy, target, weight):
    """dy times each sample's weight, 0 for ignored samples; and the one-hot target mask."""
    w, valid, hit = _nll_coef(dy, target, *weight, n_classes=ctx.input_shapes[0][1],
                              ignore_index=ctx.ignore_index, reduction=ctx.reduction)
    return where(valid, dy * w, 0.0), hit


# ---- nll_loss ------------------------------------------------------------------------------
@op("nll_loss", save="inputs")
@in_float32  # a half-precision input accumulates in float32, as torch
def _nll_loss(xp, x, target, *weight, ignore_index, reduction):
    _check_targets(target, ignore_index, x.shape[1], "nll_loss")
    w, safe, _ = _class_weights(xp, x.dtype, target, weight, ignore_index)
    picked = xp.take_along_axis(x, xp.expand_dims(safe, 1), axis=1).squeeze(1)
    return _reduce_picked(xp, picked, w, reduction)


@_nll_loss.grad
def nll_loss_backward(ctx, dy):
    target = ctx.saved_input(1)
    weight = [ctx.saved_input(i) for i in range(2, len(ctx.input_infos))]
    coef, hit = _sample_coef(ctx, dy, target, weight)
    grad = where(hit, -coef.unsqueeze(1), 0.0)
    if grad_mode.is_grad_enabled():
        # torch's gradient is a function of the input too (of zero derivative): under
        # create_graph it requires grad, and a grad of it is zeros rather than an error
        grad = grad + _nll_input_zeros(ctx.saved_input(0))
    return (grad, None) + (None,) * len(weight)


_nll_input_zeros = step("nll_input_zeros", lambda xp, x: xp.zeros_like(x))


# ---- cross_entropy with class indices: one fused kernel --------------------------------
@op("cross_entropy", save="inputs", create_graph_reads=(0,))
@in_float32  # a half-precision input accumulates in float32, as torch
def _cross_entropy(xp, x, target, *weight, ignore_index, reduction):
    plain = _plain_batch(xp, weight, x, target, ignore_index, reduction)
    if not plain:
        _check_targets(target, ignore_index, x.shape[1], "cross_entropy")
    # (no classes: NumPy's error; the row sums by gemv, as softmax's)
    logp = x - (row_max(xp, x, 1) if x.shape[1] else x.max(axis=1, keepdims=True))
    logp -= xp.log(_row_sums(xp, xp.exp(logp), 1))
    if plain:
        total = xp.add.reduce(-logp[xp.arange(x.shape[0]), target], axis=None)
        return (total if reduction == "sum" else total / x.dtype.type(x.shape[0])), logp
    w, safe, _ = _class_weights(xp, x.dtype, target, weight, ignore_index)
    picked = xp.take_along_axis(logp, xp.expand_dims(safe, 1), axis=1).squeeze(1)
    return _reduce_picked(xp, picked, w, reduction), logp  # logp: aux, for the rule


@_cross_entropy.grad
def cross_entropy_backward(ctx, dy):
    target = ctx.saved_input(1)
    weight = [ctx.saved_input(i) for i in range(2, len(ctx.input_infos))]
    none = (None,) * (1 + len(weight))
    # d/dx of -w * log_softmax(x)[t] = w * (softmax(x) - onehot(t))
    if not grad_mode.is_grad_enabled():  # plain backward: one fused kernel from the log-probs
        return (_cross_entropy_grad(ctx.aux[0], dy, target, *weight,
                                    ignore_index=ctx.ignore_index, reduction=ctx.reduction),
                ) + none
    # create_graph: differentiable ops of x (torch saves its log-probs instead, so only here
    # a write to x after the forward raises where torch's does not)
    coef, hit = _sample_coef(ctx, dy, target, weight)
    coef = coef.unsqueeze(1)
    return (softmax(ctx.saved_input(0), 1) * coef - where(hit, coef, 0.0),) + none


def _check_class_target(input, target, weight, ignore_index, name):
    """Validate (N, C, d1, ...) input against (N, d1, ...) integer targets; return the 2D+
    input, the target and the weight (of the input's dtype, as torch requires) tensors."""
    if not isinstance(target, Tensor):
        raise TypeError(f"{name}: expected target to be a Tensor, got {type(target).__name__}")
    if target._data.dtype not in (np.int64, np.uint8):
        raise RuntimeError(f"{name}: expected target of an integer dtype, Long or Byte "
                           f"(class indices), got {target.dtype}; use .long()")
    if input._data.ndim == 0:
        raise ValueError(f"{name}: input must have at least 1 dimension (C,) or (N, C, ...)")
    if target._data.dtype == np.uint8 and input._data.ndim > 2:
        # (torch's K-dimensional kernel, nll_loss2d, takes Long only; (N, C) and (C,) take Byte)
        raise RuntimeError(f"{name}: expected scalar type Long but found Byte: uint8 targets "
                           f"serve (N, C) and (C,) inputs only, got input of shape "
                           f"{tuple(input.shape)}; use target.long()")
    x = input if input._data.ndim > 1 else input.unsqueeze(0)
    if input._data.ndim == 1 and target._data.ndim != 0:
        raise ValueError(f"{name}: for an unbatched input of shape {tuple(input.shape)} the "
                         f"target must be a 0-D class index, got shape {tuple(target.shape)}")
    t = target._data if input._data.ndim > 1 else target._data.reshape(-1)
    expected = x._data.shape[:1] + x._data.shape[2:]
    if t.shape != expected:
        if t.shape[:1] != expected[:1]:
            raise ValueError(f"{name}: expected input batch_size ({expected[0]}) to match "
                             f"target batch_size ({t.shape[0] if t.ndim else 0}); input shape "
                             f"{tuple(input.shape)}, target shape {tuple(target.shape)}")
        raise RuntimeError(f"{name}: expected target of shape {expected} for input of shape "
                           f"{tuple(input.shape)}, got target shape {tuple(target.shape)}")
    n_classes = x._data.shape[1]
    if not _plain_targets(None, t, n_classes, ignore_index):  # (else all in range: one test)
        _check_targets(t, ignore_index, n_classes, name, tuple(input.shape))
    w = None
    if weight is not None:
        if tuple(weight.shape) != (n_classes,):
            raise RuntimeError(f"{name}: weight tensor should be defined either for all "
                               f"{n_classes} classes or no classes but got weight tensor of "
                               f"shape: {list(weight.shape)}")
        check_same_dtype(name, input, weight=weight)
        w = weight
    return x, target if input._data.ndim > 1 else target.reshape(-1), w


def _float_input(input, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: expected input to be a Tensor, got {type(input).__name__}")
    if input._data.dtype.kind not in "fV":
        raise RuntimeError(f"{name}: expected a floating point input, got {input.dtype}")
    return input


@legacy_reduction
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class indices `target` under log-probabilities `input`
    (N, C, d1, ...); 'mean' divides by the summed weights of the non-ignored targets.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.nll_loss(flow.tensor([[-0.1, -2.3], [-1.6, -0.2]]), flow.tensor([0, 1]))
    tensor(0.1500)
    """
    check_reduction(reduction, "nll_loss")
    _float_input(input, "nll_loss")
    check_no_grad_arg(weight, "nll_loss", "weight")
    x, t, w = _check_class_target(input, target, weight, ignore_index, "nll_loss")
    out = _nll_loss(x, t, *(() if w is None else (w,)), ignore_index=ignore_index,
                    reduction=reduction)
    if reduction == "none" and input._data.ndim == 1:
        out = out.squeeze(0)
    return out


@legacy_reduction
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """Cross entropy between logits `input` (N, C, d1, ...) and class indices (N, d1, ...)
    or class probabilities (the input's shape); with optional class weights, ignore_index
    and label smoothing. Stable for large logits (log-sum-exp).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> logits = flow.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 3.0]], requires_grad=True)
    >>> loss = F.cross_entropy(logits, flow.tensor([0, 2]))
    >>> loss
    tensor(0.1755, grad_fn=<NllLossBackward0>)
    >>> loss.backward(); logits.grad
    tensor([[-0.1072,  0.0876,  0.0196],
            [ 0.0247,  0.0272, -0.0519]])
    """
    check_reduction(reduction, "cross_entropy")
    _float_input(input, "cross_entropy")
    if label_smoothing > 1.0:
        raise RuntimeError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                           f"{label_smoothing}")
    label_smoothing = max(label_smoothing, 0.0)  # torch ignores a negative one
    if isinstance(target, Tensor) and target._data.dtype.kind in "iub" and \
            target._data.shape == input._data.shape and input._data.ndim > 1:
        # (torch reads a target of the input's shape as class probabilities)
        raise RuntimeError(f"cross_entropy: a target of the input's shape "
                           f"{tuple(input.shape)} holds class probabilities and must be "
                           f"floating point, got {target.dtype}; for one-hot class indices "
                           f"pass target.argmax(1) instead, or convert with .float()")
    if isinstance(target, Tensor) and target._data.dtype.kind in "fV" or label_smoothing:
        return cross_entropy_soft(input, target, weight, ignore_index, reduction,
                                  label_smoothing)
    check_no_grad_arg(weight, "cross_entropy", "weight")  # (class indices: nll's weight)
    x, t, w = _check_class_target(input, target, weight, ignore_index, "cross_entropy")
    out = _cross_entropy(x, t, *(() if w is None else (w,)), ignore_index=ignore_index,
                         reduction=reduction)
    if reduction == "none" and input._data.ndim == 1:
        out = out.squeeze(0)
    return out


def _class_view(t, ndim):
    """A (C,) tensor viewed to broadcast along dim 1 of an ndim-D input."""
    return t.reshape((1, -1) + (1,) * (ndim - 2)) if ndim > 1 else t


# ---- cross_entropy with probabilities or label smoothing --------------------------------------
def cross_entropy_soft(input, target, weight, ignore_index, reduction, label_smoothing):
    """torch's cross_entropy for class-probability targets, and for class indices with
    label_smoothing > 0 (the smoothed part normalised like nll_loss)."""
    dim = 1 if input._data.ndim > 1 else 0
    n_classes = input._data.shape[dim]
    logp = log_softmax(input, dim)
    if weight is not None and tuple(weight.shape) != (n_classes,):
        raise RuntimeError(f"cross_entropy: weight tensor should be defined either for all "
                           f"{n_classes} classes or no classes but got weight tensor of shape: "
                           f"{list(weight.shape)}")
    w = _class_view(weight.to(input.dtype), input._data.ndim) if weight is not None else None
    if target._data.dtype.kind in "fV":
        batch = target._data.shape[0] if target._data.ndim else 0
        if tuple(target.shape) != tuple(input.shape) and input._data.ndim > 1 and \
                batch != input._data.shape[0]:  # (torch's class-index check comes first)
            raise ValueError(f"cross_entropy: expected input batch_size ({input.shape[0]}) to "
                             f"match target batch_size ({batch}); input shape "
                             f"{tuple(input.shape)}, target shape {tuple(target.shape)}")
        if tuple(target.shape) != tuple(input.shape):
            raise RuntimeError(f"cross_entropy: a floating-point target holds class "
                               f"probabilities and must have the input's shape "
                               f"{tuple(input.shape)}, got {tuple(target.shape)}; class "
                               f"indices must be int64 (target.long())")
        if ignore_index >= 0:
            raise RuntimeError(f"cross_entropy: ignore_index ({ignore_index}) is not supported "
                               f"for floating point (probability) targets")
        t = target  # (promoted with the log-probabilities, as torch's)
        if label_smoothing > 0:
            t = t * (1 - label_smoothing) + label_smoothing / n_classes
        prod = logp * t if w is None else logp * t * w
        if reduction == "none":
            return -prod.sum(dim)
        total = -prod.sum()
        return total if reduction == "sum" else total / (input._data.size // n_classes)
    _, t, wa = _check_class_target(input, target, weight, ignore_index, "cross_entropy")
    if wa is not None and reduction == "mean" and t._data.dtype == np.uint8:
        # torch's smoothed mean gathers the class weights by the target: a uint8 index raises
        raise RuntimeError("cross_entropy: gather(): Expected dtype int32/int64 for index (a "
                           "uint8 target with label_smoothing, weight and reduction 'mean'); "
                           "use target.long()")
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    smooth = -(logp * w).sum(dim) if w is not None else -logp.sum(dim)
    valid = target != ignore_index  # ops, so a trace reads the new targets
    smooth = where(valid, smooth, 0.0)
    if reduction == "mean":
        valid = t != ignore_index
        if wa is not None:
            denom = (wa[where(valid, t, 0)] * valid.to(wa.dtype)).sum()
        else:
            denom = valid.sum().to(smooth.dtype)
        smooth = smooth.sum() / denom
    elif reduction == "sum":
        smooth = smooth.sum()
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / n_classes)


# ---- regression losses -----------------------------------------------------------------------
def _promoted(input, target, kernel=None):
    """input and target in their promoted dtype, which `kernel` (floating only) computes in,
    as torch's TensorIterator kernels (mse, smooth_l1) do: an int64 or bool operand beside a
    float one works, two integer ones raise. The two promote as tensors with dims, a 0-d one
    too: torch broadcasts them first (a float32 input and a 0-d float64 target: float64)."""
    if isinstance(input, Tensor) and isinstance(target, Tensor) and input.dtype != target.dtype:
        dtype = promote_types(input.dtype, target.dtype)
        input, target = input.to(dtype), target.to(dtype)
    if kernel is not None:
        check_kernel_dtype(input, kernel)
    return input, target


def _opmath(input, target, param, wide):
    """(input, target, param, None), or for a half-precision pair as torch's fused
    smooth_l1/huber kernels: `wide` (float16 huber, bfloat16 smooth_l1), float32 copies and
    its dtype, the loss computed in float32 and rounded once; else each step rounded, as
    flowgrad's ops, with `param` (delta, beta) rounded to the dtype as torch's scalar_t(param)
    (flowgrad's ops were 1 ulp off torch's on 5% of the elements)."""
    if not (isinstance(input, Tensor) and isinstance(target, Tensor) and
            input._data.dtype in HALF and target.dtype == input.dtype):
        return input, target, param, None
    if input.dtype in wide:
        return input.float(), target.float(), param, input.dtype
    return input, target, input.new_tensor(param).item(), None


def _rounded(loss, low):
    return loss if low is None else loss.to(low)


def _pair(input, target, name, reduction):
    check_reduction(reduction, name)
    if not isinstance(target, Tensor):
        raise TypeError(f"{name}: expected target to be a Tensor, got {type(target).__name__}")
    if input.shape != target.shape:
        warn(f"{name}: using a target size ({tuple(target.shape)}) that is different "
             f"to the input size ({tuple(input.shape)}); they will be broadcast, "
             f"which is likely wrong. Ensure they have the same size.", stacklevel=3)
        try:
            np.broadcast_shapes(tuple(input.shape), tuple(target.shape))
        except ValueError:
            raise RuntimeError(f"{name}: the size of input {tuple(input.shape)} and target "
                               f"{tuple(target.shape)} must match (or broadcast)") from None
    return input - target


@legacy_reduction
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error (sum or per element with `reduction`).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.mse_loss(flow.tensor([1.0, 2.0]), flow.tensor([0.0, 4.0]))
    tensor(2.5000)
    """
    # complex: torch refuses (d * d is no squared modulus)
    x, t = _promoted(input, target, "mse_cpu")
    d = _pair(x, t, "mse_loss", reduction)
    if weight is not None:  # (torch's weighted form is a composite: it saves no input)
        return _weighted(d * d, weight, x, reduction, "mse_loss", True)
    return kept(reduce_loss(d * d, reduction), input, target, node="MseLossBackward0")


@legacy_reduction
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.l1_loss(flow.tensor([1.0, 2.0]), flow.tensor([0.0, 4.0]))
    tensor(1.5000)
    """
    if "b" not in {t._data.dtype.kind for t in (input, target) if isinstance(t, Tensor)}:
        input, target = _promoted(input, target)  # (a bool one: the difference refuses)
    d = _pair(input, target, "l1_loss", reduction).abs()
    return _weighted(d, weight, input, reduction, "l1_loss", True)


@legacy_reduction
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d**2 / beta where |d| < beta, else |d| - 0.5 beta (beta=0: l1_loss).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.smooth_l1_loss(flow.tensor([0.5, 3.0]), flow.tensor([0.0, 0.0]), reduction="none")
    tensor([0.1250, 2.5000])
    """
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    input, target = _promoted(input, target, "smooth_l1_cpu")
    x, t, beta, low = _opmath(input, target, beta, (bfloat16,))
    d = _pair(x, t, "smooth_l1_loss", reduction)
    a = d.abs()
    if beta == 0:  # (torch's l1_loss: a composite)
        return reduce_loss(_rounded(a, low), reduction)
    small = a < beta
    loss = reduce_loss(_rounded(where(small, 0.5 * a * a / beta, a - 0.5 * beta), low),
                       reduction)
    return kept(loss, input, target, node="SmoothL1LossBackward0")


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d**2 where |d| < delta, else delta * (|d| - 0.5 delta).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.huber_loss(flow.tensor([0.5, 3.0]), flow.tensor([0.0, 0.0]), reduction="none", delta=2.0)
    tensor([0.1250, 4.0000])
    """
    if delta <= 0:
        raise RuntimeError(f"huber_loss: delta must be positive, got {delta}")
    if isinstance(input, Tensor) and isinstance(target, Tensor) and \
            input._data.dtype.kind in "biu" and target._data.dtype.kind in "fVc":
        # (the output takes the input's dtype in torch, and a float result can't be cast there)
        raise RuntimeError(f"huber_loss: result type {target.dtype} can't be cast to the "
                           f"desired output type {input.dtype} (the input's)")
    check_kernel_dtype(input, "huber_cpu")
    given = target
    if isinstance(target, Tensor) and isinstance(input, Tensor) and target.dtype != input.dtype:
        target = target.to(input.dtype)  # torch's kernel computes in the input's dtype
    x, t, delta, low = _opmath(input, target, delta, (float16,))
    d = _pair(x, t, "huber_loss", reduction)
    a = d.abs()
    small = a < delta
    loss = _rounded(where(small, d * d * 0.5, (a - 0.5 * delta) * delta), low)
    if weight is None:
        return kept(reduce_loss(loss, reduction), input, given, node="HuberLossBackward0")
    # (torch's weighted huber: its unweighted loss, 'none', keeps the inputs)
    loss = kept(loss, input, given, node="HuberLossBackward0")
    return _weighted(loss, weight, input, reduction, "huber_loss", False)
