"""ctc_loss: the connectionist temporal classification loss, a fused op. The forward
(alpha) and backward (beta) recursions run in log space, vectorised over the batch and the
label positions, with a loop over time steps.

The gradient is torch's: exp(log_probs) - posterior occupancy over each sample's frames, the
gradient with respect to the logits before a log_softmax (torch's kernel assumes one). After a
log_softmax the composed gradient is the same as the exact one's (-occupancy), but a leaf
log_probs (torch's own CTCLoss example), or log_probs that are not normalised, gets torch's.

>>> import flowgrad as flow
>>> lp = flow.zeros(2, 1, 2).log_softmax(2)         # T=2, N=1, C=2 (blank 0)
>>> round(flow.nn.functional.ctc_loss(lp, flow.tensor([[1]]), [2], [1]).item(), 4)
0.2877
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..autograd.interpreter import require, varies_per_run
from ..device import array_module
from ..tensor import Tensor
from .elementwise import where
from .loss import check_reduction
from .no_derivative import refuse_forward_rule
from .registry import op

__all__ = ["ctc_loss"]

_NEG = -np.inf


def _extended(xp, targets, target_lengths, blank):
    """Labels with blanks interleaved, (N, 2S+1), and where a skip over a blank is allowed."""
    n, s = targets.shape
    ext = xp.full((n, 2 * s + 1), blank, xp.int64)
    ext[:, 1::2] = targets
    skip = xp.zeros(ext.shape, bool)
    # a skip over s - 1 into a label differing from the one before it; torch's kernels check
    # no more (a blank written in the targets is a label there), nor does this
    skip[:, 2:] = ext[:, 2:] != ext[:, :-2]
    valid = xp.arange(2 * s + 1)[None, :] < (2 * target_lengths[:, None] + 1)
    return ext, skip, valid


def _shift(xp, a, k):
    out = xp.full_like(a, _NEG)
    out[:, k:] = a[:, :-k]
    return out


@op("ctc_loss", save="inputs")
def _ctc_loss(xp, lp, targets, input_lengths, target_lengths, *, blank, zero_infinity):
    t_max, n, c = lp.shape
    # the wrapper's checks of the values, again here: a compiled plan runs the kernel alone,
    # and a negative length or label would wrap around instead of raising
    if (input_lengths < 0).any() or (input_lengths > t_max).any() or \
            (target_lengths < 0).any() or (target_lengths > targets.shape[1]).any():
        raise RuntimeError(f"ctc_loss: input_lengths {input_lengths.tolist()} must lie in "
                           f"[0, {t_max}] and target_lengths {target_lengths.tolist()} in "
                           f"[0, {targets.shape[1]}]")
    if targets.size and (targets.min() < 0 or targets.max() >= c):
        raise IndexError(f"ctc_loss: target labels must lie in [0, {c}), got values in "
                         f"[{int(targets.min())}, {int(targets.max())}]")
    ext, skip, valid = _extended(xp, targets, target_lengths, blank)
    lpe = lp.astype(xp.float64)[xp.arange(t_max)[:, None, None], xp.arange(n)[None, :, None],
                                ext[None]]  # (T, N, S'): log-prob of each extended label
    alpha = xp.full(lpe.shape, _NEG)
    alpha[0, :, 0] = lpe[0, :, 0]
    has_label = target_lengths > 0
    alpha[0, has_label, 1] = lpe[0, has_label, 1]
    with xp.errstate(invalid="ignore"):
        for t in range(1, t_max):
            a = alpha[t - 1]
            acc = xp.logaddexp(a, _shift(xp, a, 1))
            acc = xp.logaddexp(acc, xp.where(skip, _shift(xp, a, 2), _NEG))
            alpha[t] = xp.where(valid, acc + lpe[t], _NEG)
    rows = xp.arange(n)
    last = alpha[input_lengths - 1, rows]  # (N, S') at each sample's last frame
    end = 2 * target_lengths
    ll = xp.logaddexp(last[rows, end], xp.where(has_label, last[rows, end - 1], _NEG))
    # no frames (input length 0; alpha[-1] above read the last one): the empty alignment of
    # an empty target, else impossible, as torch's
    ll = xp.where(input_lengths == 0, xp.where(has_label, _NEG, 0.0), ll)
    return (-ll).astype(lp.dtype), alpha  # alpha: aux, for the rule


@_ctc_loss.grad
def ctc_loss_backward(ctx, dy):
    lp, targets, input_lengths, target_lengths = ctx.inputs
    return _ctc_loss_grad(lp, ctx.aux[0], dy, targets, input_lengths, target_lengths,
                          blank=ctx.blank, zero_infinity=ctx.zero_infinity), None, None, None


@op("ctc_loss_grad")
def _ctc_loss_grad(xp, lp, alpha, dy, targets, input_lengths, target_lengths, *, blank,
                   zero_infinity):
    t_max, n, c = lp.shape
    ext, skip, valid = _extended(xp, targets, target_lengths, blank)
    lpe = lp.astype(xp.float64)[xp.arange(t_max)[:, None, None], xp.arange(n)[None, :, None],
                                ext[None]]
    rows = xp.arange(n)
    end = 2 * target_lengths
    init = xp.full(lpe.shape[1:], _NEG)
    init[rows, end] = 0.0
    has_label = target_lengths > 0
    init[rows[has_label], end[has_label] - 1] = 0.0
    skip_next = xp.zeros_like(skip)
    skip_next[:, :-2] = skip[:, 2:]  # from s, a skip lands on s + 2
    beta = xp.full(lpe.shape, _NEG)
    nxt = xp.full(lpe.shape[1:], _NEG)
    with xp.errstate(invalid="ignore"):
        for t in range(t_max - 1, -1, -1):
            acc = xp.logaddexp(nxt, xp.pad(nxt[:, 1:], ((0, 0), (0, 1)),
                                           constant_values=_NEG))
            acc = xp.logaddexp(acc, xp.where(skip_next, xp.pad(
                nxt[:, 2:], ((0, 0), (0, 2)), constant_values=_NEG), _NEG))
            first = (t == input_lengths - 1)[:, None]
            alive = (t < input_lengths - 1)[:, None]
            cur = xp.where(first, init, xp.where(alive, acc, _NEG))
            beta[t] = xp.where(valid, cur + lpe[t], _NEG)
            nxt = beta[t]
        log_ll = xp.logaddexp(beta[0, :, 0], xp.where(has_label, beta[0, :, 1], _NEG))
        # occupancy of each extended label at each frame, normalised by the path sum
        occ = xp.exp(alpha + beta - lpe - log_ll[None, :, None])
    possible = xp.isfinite(log_ll)
    occ = xp.where(possible[None, :, None], xp.nan_to_num(occ), 0.0)
    frames = xp.arange(t_max)[:, None] < input_lengths[None, :]  # (T, N)
    # torch's kernel: exp(lp) - occupancy on a sample's frames, 0 past them and (with
    # zero_infinity) over an impossible sample
    grad = xp.where((frames & possible[None, :])[:, :, None], xp.exp(lp.astype(xp.float64)),
                    0.0)
    xp.subtract.at(grad, (xp.arange(t_max)[:, None, None], rows[None, :, None], ext[None]),
                   occ)
    if not zero_infinity:  # an impossible alignment: nan over its frames (torch: inf - inf)
        grad[frames & ~possible[None, :]] = xp.nan
    return (grad * dy.astype(xp.float64)[None, :, None]).astype(lp.dtype)


@_ctc_loss_grad.grad
def ctc_loss_grad_backward(ctx, ddx):
    raise RuntimeError("ctc_loss: double backward is not implemented (nor is it in torch); "
                       "differentiate ctc_loss once only")


# (its derived rule would differentiate ctc_loss_grad, which refuses with a RuntimeError)
refuse_forward_rule("ctc_loss", "_ctc_loss", "its forward derivative is not implemented")


def _lengths(v, n, name):
    raw = np.asarray(v._data if isinstance(v, Tensor) else v)
    if raw.dtype.kind not in "iu":  # (a bool or float tensor, as torch)
        raise RuntimeError(f"ctc_loss: {name} must be integral, got {raw.dtype}")
    a = raw.astype(np.int64).reshape(-1)
    if a.shape[0] != n:
        raise RuntimeError(f"ctc_loss: {name} must have length {n} (the batch), got "
                           f"{a.shape[0]}")
    if (a < 0).any():
        raise RuntimeError(f"ctc_loss: {name} must be non-negative, got {a.tolist()}")
    return a


def _as_input(given, checked):
    """The checked int64 array as an op input: a given tensor converted by ops (an int32 one
    cast, a (1, S) one reshaped), so a trace reads each run's values, not the checked ones."""
    if not isinstance(given, Tensor):
        return Tensor._wrap(checked)
    t = given if given._data.dtype == np.int64 else given.to(dtypes.int64)
    return t if t._data.shape == checked.shape else t.reshape(checked.shape)


def _split_targets(targets, tg, lengths, blank):
    """1-D concatenated targets as rows of `lengths` (an int64 tensor) labels padded with
    blank, made by ops so that a trace reads each run's labels and lengths. Where the lengths
    vary per run the rows are as long as all labels together: the longest is a value, and a
    compiled plan keeps the shapes it traced."""
    tg_len = lengths._data
    smax = tg.shape[0] if varies_per_run(lengths) else int(tg_len.max())
    ar = Tensor._wrap(array_module(tg_len).arange(smax, dtype=np.int64))
    pos = (lengths.cumsum(0) - lengths).unsqueeze(1) + ar.unsqueeze(0)
    flat = _as_input(targets, tg)
    return where(ar.unsqueeze(0) < lengths.unsqueeze(1), flat[pos.clamp(max=tg.shape[0] - 1)],
                 blank)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """CTC loss of log_probs (T, N, C) or (T, C) against targets (N, S) padded, or 1-D
    concatenated. 'mean' divides each loss by its target length, then averages the batch.
    zero_infinity: impossible alignments give 0 (and zero gradient) instead of inf (and a nan
    gradient over their frames, as torch's)."""
    check_reduction(reduction, "ctc_loss")
    lp = log_probs
    if lp._data.dtype.kind not in "fV":  # (torch: its kernel has no integer instance)
        raise NotImplementedError(f"ctc_loss: \"ctc_loss_cpu\" not implemented for "
                                  f"{lp.dtype}: expected floating point log_probs")
    batched = lp._data.ndim == 3
    if lp._data.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss: log_probs must be (T, N, C) or (T, C), got shape "
                         f"{tuple(lp.shape)}")
    if not batched:
        lp = lp.unsqueeze(1)
    if lp._data.size == 0:  # (an empty batch too, as torch's)
        raise RuntimeError(f"ctc_loss: log_probs tensor must not be empty, got shape "
                           f"{tuple(log_probs.shape)}")
    t_max, n, c = lp._data.shape
    if not 0 <= blank < c:
        raise RuntimeError(f"ctc_loss: blank must be in label range: a class index in "
                           f"[0, {c}), got {blank}")
    in_len = _lengths(input_lengths, n, "input_lengths")
    tg_len = _lengths(target_lengths, n, "target_lengths")
    if (in_len > t_max).any():
        i = int(np.argmax(in_len > t_max))
        raise RuntimeError(f"ctc_loss: input_lengths[{i}] = {in_len[i]} exceeds the {t_max} "
                           f"time steps of log_probs")
    tg = np.asarray(targets._data if isinstance(targets, Tensor) else targets, np.int64)
    tg_len_t = _as_input(target_lengths, tg_len)
    concatenated = tg.ndim == 1 and batched and tg.shape[0] > 0
    if varies_per_run(tg_len_t) and (concatenated or not batched):  # (a plan's lengths: the
        # checks below see the trace's only)
        require(tg_len_t.sum() == tg.size, f"ctc_loss: the targets' {tg.size} labels must be "
                f"sum(target_lengths)" if batched else f"ctc_loss: expected the unbatched "
                f"targets to have size target_lengths at dimension 0, but got size {tg.size}",
                RuntimeError)
    if not batched:
        if tg.size != tg_len[0]:  # (an unbatched target is exactly its length, as torch's)
            raise RuntimeError(f"ctc_loss: expected the unbatched targets to have size "
                               f"{int(tg_len[0])} (target_lengths) at dimension 0, but got "
                               f"size {tg.size}")
        tg = tg.reshape(1, -1)
    if tg.ndim == 1:  # concatenated targets: split by target_lengths, pad to the longest
        if tg.shape[0] != tg_len.sum():
            raise RuntimeError(f"ctc_loss: 1-D targets must hold sum(target_lengths) = "
                               f"{int(tg_len.sum())} labels, got {tg.shape[0]}")
        smax = int(tg_len.max()) if n else 0
        starts = np.concatenate([[0], np.cumsum(tg_len)[:-1]])
        pos = starts[:, None] + np.arange(smax)[None, :]
        tg = np.where(np.arange(smax)[None, :] < tg_len[:, None],
                      tg[np.minimum(pos, max(tg.shape[0] - 1, 0))], blank)
    elif tg.shape[0] != n or (tg.shape[1] < tg_len.max() if n else False):
        raise RuntimeError(f"ctc_loss: targets of shape {tg.shape} don't fit batch {n} with "
                           f"target_lengths {tg_len.tolist()}")
    padding_column = tg.shape[1] == 0
    if padding_column:  # every target empty: a padding column (2S+1 = 3 labels, not 1)
        tg = np.full((n, 1), blank, np.int64)
    elif tg.size and (tg.min() < 0 or tg.max() >= c):
        raise IndexError(f"ctc_loss: target labels must lie in [0, {c}), got values in "
                         f"[{int(tg.min())}, {int(tg.max())}]")
    if concatenated:
        tg_in = _split_targets(targets, np.asarray(targets._data if isinstance(
            targets, Tensor) else targets, np.int64), tg_len_t, blank)
    elif padding_column:
        tg_in = Tensor._wrap(tg)
    else:
        tg_in = _as_input(targets, tg)
    loss = _ctc_loss(lp, tg_in, _as_input(input_lengths, in_len), tg_len_t,
                     blank=blank, zero_infinity=bool(zero_infinity))
    if zero_infinity:
        loss = where(loss.abs() == float("inf"), 0.0, loss)
    if reduction == "mean":
        return (loss / tg_len_t.clamp(min=1).to(loss.dtype)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.squeeze(0)
