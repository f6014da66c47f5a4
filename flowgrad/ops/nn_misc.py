"""Embedding lookups, dropout, one_hot and distances: embedding, embedding_bag, dropout,
dropout1d/2d/3d, alpha_dropout, feature_alpha_dropout, one_hot, cosine_similarity,
pairwise_distance, cdist.

Dropout is one op whose kernel draws its mask from the flowgrad.random Generator passed as
its `generator` attribute (the global one: `manual_seed` reproduces the masks), so each call,
or a recorded call replayed, draws a fresh mask; the mask is kept for the rule as an aux
output. Embedding takes its indices as an op input.

>>> import flowgrad as flow
>>> w = flow.eye(3, requires_grad=True)
>>> flow.nn.functional.embedding(flow.tensor([2, 0]), w)
tensor([[0., 0., 1.],
        [1., 0., 0.]], grad_fn=<EmbeddingBackward0>)
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from .._warn import warn
from ..autograd import grad_mode, levels
from ..autograd.inplace import run_inplace
from ..autograd.interpreter import check_read, require, varies_per_run
from ..device import array_module
from ..errors import (
    INT_INDEX_DTYPES,
    _broadcast_mismatch,
    check_kernel_dtype,
    check_same_dtype,
    expect_tensor,
)
from ..random import numpy_generator, resolve
from ..sparse import SparseTensor
from ..tensor import Tensor, _wrap_dim
from .activation import softmax
from .elementwise import _promote_pair, where
from .halfprec import upcast
from .kept import kept
from .normalization import dist_norm
from .reduce import float_input
from .registry import op
from .rules import all_finite
from .shape import cat

__all__ = ["embedding", "embedding_bag", "dropout", "dropout1d", "dropout2d", "dropout3d",
           "alpha_dropout", "feature_alpha_dropout", "one_hot", "cosine_similarity",
           "pairwise_distance", "cdist", "depend", "gumbel_softmax"]


# ---- embedding -----------------------------------------------------------------------------------
@op("embedding", jvp="linear", save="inputs[1]")
def _embedding(xp, weight, indices, *, padding_idx, scale_grad_by_freq, sparse=False):
    _check_rows(indices, weight.shape[0])
    return weight[indices]


def _check_rows(indices, n):
    """The wrapper's range check, again in the kernels: a compiled plan runs them alone (a
    negative index would wrap around, one past the end fail with NumPy's message)."""
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        bad = indices[(indices < 0) | (indices >= n)][0]
        raise IndexError(f"embedding: index out of range in self: index {int(bad)} is out of "
                         f"range for weight with {n} rows")


@_embedding.grad
def embedding_backward(ctx, dy):
    indices = ctx.inputs[1]
    if ctx.sparse:
        return _sparse_rows_grad(dy, indices, ctx.input_shapes[0], ctx.padding_idx,
                                 ctx.scale_grad_by_freq), None
    return _embedding_backward(dy, indices, num_weights=ctx.input_shapes[0][0],
                               padding_idx=ctx.padding_idx,
                               scale_grad_by_freq=ctx.scale_grad_by_freq), None


def _sparse_rows_grad(dy, indices, weight_shape, padding_idx, scale_grad_by_freq):
    """Embedding(sparse=True)'s weight gradient, as torch's: a sparse COO tensor with one entry
    per lookup (in lookup order, duplicates kept, uncoalesced), the lookups of padding_idx
    left out."""
    if scale_grad_by_freq:
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse "
                           "gradients; pass sparse=False or scale_grad_by_freq=False")
    rows = indices.reshape(-1)
    values = dy.reshape(rows.shape[0], *weight_shape[1:])
    if padding_idx is not None:
        keep = rows != padding_idx
        if varies_per_run(indices):  # (a compiled plan: how many lookups are padding varies
            # per run, so they stay as entries of zeros; the plan makes the gradient dense)
            values = values * keep.reshape(-1, *(1,) * (values.ndim - 1)).to(values.dtype)
        else:
            rows, values = rows[keep], values[keep]
    return SparseTensor(rows.reshape(1, -1), values, weight_shape)


def _freq_scale(xp, indices, num_weights, dtype):
    """scale_grad_by_freq: 1 / (how often each lookup's index occurs), per lookup."""
    counts = xp.bincount(indices.reshape(-1), minlength=num_weights)
    return (1.0 / counts[indices]).astype(dtype)


_ONE_HOT_MAX = 1 << 21  # vocabulary x lookups up to which the gradient is one GEMM (8 MB)


def _sums_pay(rows, lookups, width):
    """Whether `_index_sums` beats the one-hot GEMM, by a cost model fitted on a Zen 4 core:
    the GEMM's time grows with rows x lookups x width (1 us per 45k), the sums' with
    (lookups + rows) x width (1 us per 1000) plus ~40 us. (2048 lookups of 128 values into 96
    rows: GEMM 523 us, sums 315; 64 into 64 rows: 14 against 42.) Past _ONE_HOT_MAX (and
    for a non-finite gradient) the sums run all the same: ufunc.at is slower still."""
    return rows * lookups * width > 45 * ((lookups + rows) * width + 40_000) or \
        rows * lookups > _ONE_HOT_MAX


def _index_sums(xp, rows, index, n):
    """rows (N, D) summed by index (N,) into (n, D): the lookups sorted by index (stable,
    so each index's rows add in lookup order), then one add.reduceat over the runs. A non-
    finite row reaches its own index alone (unlike the one-hot GEMM's zeros times inf)."""
    order = xp.argsort(index, kind="stable")
    ordered = index[order]
    starts = xp.flatnonzero(xp.concatenate((xp.ones(1, bool), ordered[1:] != ordered[:-1])))
    out = xp.zeros((n, rows.shape[1]), rows.dtype)
    out[ordered[starts]] = xp.add.reduceat(rows[order], starts, axis=0)
    return out


@op("embedding_backward", jvp="linear", save="inputs[1]")
def _embedding_backward(xp, dy, indices, *, num_weights, padding_idx, scale_grad_by_freq):
    row = dy.shape[indices.ndim:]
    if scale_grad_by_freq and indices.size:  # each lookup's row / its index's count
        freq = _freq_scale(xp, indices, num_weights, dy.dtype)
        dy = dy * freq.reshape(indices.shape + (1,) * (dy.ndim - indices.ndim))
    width = math.prod(row)
    if dy.dtype.char in "fd" and dy.size:
        if not _sums_pay(num_weights, indices.size, width) and all_finite(xp, dy):
            # one GEMM with the one-hot matrix of the lookups: ufunc.at adds row by row (a
            # vocabulary of 96 and 2048 lookups: 1.6 ms against 0.3); a finite dy only, as
            # the matrix's zeros times an inf would put nan in rows that lookup never touched
            hot = xp.zeros((num_weights, indices.size), dy.dtype)
            hot[indices.reshape(-1), xp.arange(indices.size)] = 1
            dw = xp.matmul(hot, dy.reshape(indices.size, width))
        else:
            dw = _index_sums(xp, dy.reshape(indices.size, width), indices.reshape(-1),
                             num_weights)
        dw = dw.reshape((num_weights,) + row)
    else:
        dw = xp.zeros((num_weights,) + row, dy.dtype)
        xp.add.at(dw, indices, dy)  # repeated indices sum their rows
    if padding_idx is not None:
        dw[padding_idx] = 0  # the padding row never learns
    return dw


@_embedding_backward.grad
def embedding_backward_backward(ctx, ddw):
    indices = ctx.inputs[1]
    out = _embedding(ddw, indices, padding_idx=None, scale_grad_by_freq=False)
    if ctx.padding_idx is not None or (ctx.scale_grad_by_freq and indices.numel()):
        keep = _embedding_row_weights(indices, num_weights=ctx.num_weights,
                                      padding_idx=ctx.padding_idx,
                                      scale_grad_by_freq=ctx.scale_grad_by_freq)
        shape = tuple(indices.shape) + (1,) * (out.dim() - indices.dim())
        out = out * keep.to(ddw.dtype).reshape(shape)
    return out, None


@op("embedding_row_weights", differentiable=False)
def _embedding_row_weights(xp, indices, *, num_weights, padding_idx, scale_grad_by_freq):
    """What embedding_backward multiplies each looked-up row by: 0 at padding_idx, and
    1 / count with scale_grad_by_freq (float64; the rule casts it)."""
    keep = xp.ones(indices.shape, xp.float64)
    if padding_idx is not None:
        keep = keep * (indices != padding_idx)
    if scale_grad_by_freq and indices.size:
        keep = keep * _freq_scale(xp, indices, num_weights, xp.float64)
    return keep


def _indices(input, name, dtypes=("int64", "int32")):
    """The index array of `input`, whose dtype must be one of `dtypes` (torch takes Long or
    Int indices; one_hot Long only)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: expected input to be a Tensor of indices, got "
                        f"{type(input).__name__}")
    if input._data.dtype.name not in dtypes:
        raise RuntimeError(f"{name}: expected indices of dtype {' or '.join(dtypes)}, got "
                           f"{input.dtype}; use .long()")
    return input._data


def _padding_idx(padding_idx, n, name):
    if padding_idx is None:
        return None
    if not -n <= padding_idx < n:  # (F.embedding's assert; embedding_bag's kernel check)
        raise (RuntimeError if name == "embedding_bag" else AssertionError)(
            f"{name}: padding_idx must be within the number of embeddings, {-n} through "
            f"{n - 1}, but got {padding_idx}")
    return padding_idx + n if padding_idx < 0 else padding_idx


@op("embedding_renorm_rows", n_out=2, differentiable=False)
def _embedding_renorm_rows(xp, w, idx, *, max_norm, norm_type):
    """The looked-up rows whose norm exceeds max_norm, and those rows rescaled to it, as
    torch's embedding_renorm_: each row's norm in the weight's dtype (half precision computed
    in float32, rounded), the scale max_norm / (norm + 1e-7) in double, and the row
    multiplied by that scale rounded to the dtype it computes in (float64 throughout gave
    rows 1 ulp off torch's in float32, enough to flip a later max)."""
    _check_rows(idx, w.shape[0])
    rows = xp.unique(idx.reshape(-1))
    wide = (xp.float32, xp.float64, xp.complex64, xp.complex128)  # (half: float32, as torch)
    acc = w.dtype if w.dtype in wide else xp.dtype(xp.float32)
    norms = xp.linalg.norm(w[rows].astype(acc), ord=norm_type, axis=1)
    norms = norms.astype(w.dtype).astype(xp.float64)  # (torch's norm tensor, read as double)
    big = rows[norms > max_norm]
    # (row *= scale: the double scale becomes the row's dtype first, as a wrapped number of
    # torch's does, then multiplies in float32 for half precision: rounded twice)
    scale = (max_norm / (norms[norms > max_norm] + 1e-7)).astype(w.dtype).astype(acc)
    return big, (w[big].astype(acc) * scale[:, None]).astype(w.dtype)


def _renorm_rows(weight, input, max_norm, norm_type):
    """torch's embedding_renorm_: rescale the looked-up rows of weight to norm <= max_norm,
    in place and outside autograd. Ops, not a write into the array: a compiled graph repeats
    it for each call's indices."""
    rows, scaled = _embedding_renorm_rows(weight, input, max_norm=float(max_norm),
                                          norm_type=float(norm_type))
    with grad_mode.no_grad():  # (always: whether rows are empty is the data's business)
        weight.index_put_((rows,), scaled)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` (num_embeddings, dim) picked by the integer `input`; the
    padding_idx row gets no gradient; with scale_grad_by_freq each row's gradient is divided
    by how often its index occurs in `input`; with max_norm the picked rows are renormalised in
    place first; with sparse=True the weight's gradient is a sparse COO tensor (one entry per
    lookup), as torch does.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> weight = flow.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
    >>> F.embedding(flow.tensor([[1, 2], [0, 1]]), weight)
    tensor([[[1., 2.],
             [3., 4.]],
    <BLANKLINE>
            [[0., 0.],
             [1., 2.]]])
    """
    idx = _indices(input, "embedding")
    if weight._data.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), "
                           f"got shape {tuple(weight.shape)}")
    n = weight._data.shape[0]
    pad = _padding_idx(padding_idx, n, "embedding")  # (torch's Python check: first)
    if idx.size and (idx.min() < 0 or idx.max() >= n):  # torch: negatives do not wrap
        bad = idx[(idx < 0) | (idx >= n)][0]
        raise IndexError(f"embedding: index out of range in self: index {int(bad)} is out of "
                         f"range for weight with {n} rows (shape {tuple(weight.shape)}); "
                         f"indices must be in [0, {n - 1}]")
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    # (sparse: a sparse weight gradient from the eager engine; inside func transforms the
    # gradient stays dense, and nn.Graph's autograd pass makes it dense)
    return _embedding(weight, input, padding_idx=pad,
                      scale_grad_by_freq=bool(scale_grad_by_freq),
                      sparse=bool(sparse) and not levels.TRANSFORMS)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """Sum, mean or max of the embeddings in each bag. `input` is 2-D (B, L: fixed bags) or
    1-D with `offsets` (start of each bag). Empty bags give zeros.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> w = flow.tensor([[1.0, 1.0], [2.0, 4.0], [3.0, 9.0]])
    >>> F.embedding_bag(flow.tensor([[0, 1], [1, 2]]), w, mode="mean")
    tensor([[1.5000, 2.5000],
            [2.5000, 6.5000]])
    """
    xp = array_module(weight._data)
    if isinstance(input, Tensor) and isinstance(offsets, Tensor) and input._data.ndim == 1:
        # torch promotes indices and offsets to one dtype, which must be int64 or int32
        common = np.promote_types(input._data.dtype, offsets._data.dtype)
        if common not in INT_INDEX_DTYPES:
            raise RuntimeError(f"embedding_bag: indices ({input.dtype}) and offsets "
                               f"({offsets.dtype}) promote to {common}, not int64 or int32; "
                               f"use .long() for both")
        input = input.to(_dt.from_numpy_dtype(common)) if input._data.dtype != common else input
    idx = _indices(input, "embedding_bag")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if sparse and mode == "max":
        raise ValueError("max mode does not support sparse weights; use mode='sum' or 'mean', "
                         "or sparse=False")
    check_same_dtype("embedding_bag", weight, per_sample_weights=per_sample_weights)
    if scale_grad_by_freq and mode == "max":
        raise ValueError("embedding_bag: max mode does not support scaling the gradient by the "
                         "frequency (scale_grad_by_freq=True); use mode='sum' or 'mean'")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights is only supported for "
                                  f"mode='sum' (got mode={mode!r})")
    if per_sample_weights is not None and tuple(per_sample_weights.shape) != tuple(idx.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is "
                         f"not None, then it must have the same shape as the input "
                         f"({input.shape})")
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None, as "
                             "input is treated is a mini-batch of fixed length sequences")
        b, length = idx.shape
        starts = Tensor._wrap(xp.arange(b, dtype=np.int64) * length)  # from the shape only
        flat = input.reshape(-1)
        psw = per_sample_weights.reshape(-1) if per_sample_weights is not None else None
        last, longest = False, None
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError("embedding_bag: offsets has to be a 1D Tensor but got None")
        if offsets._data.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        if varies_per_run(offsets) and offsets._data.size:  # inside build: the plan checks
            _require_offsets(offsets, idx.shape[0])          # each call's offsets
        first = xp.asarray(offsets._data).reshape(-1)[:1]
        if first.size == 0 or first[0] != 0:
            raise ValueError(f"embedding_bag: offsets[0] has to be 0, i.e., the first sequence "
                             f"in the mini-batch has to start from position 0, got "
                             f"{first.tolist()}")
        off = xp.asarray(offsets._data).reshape(-1)
        if int(off[-1]) > idx.shape[0]:
            raise RuntimeError(f"embedding_bag: offsets[-1] can not be greater than input's "
                               f"length {idx.shape[0]} but got offsets[-1] of {int(off[-1])}")
        if (off[1:] < off[:-1]).any():
            raise RuntimeError(f"embedding_bag: offsets must be non-decreasing (each bag's "
                               f"start in input), got {off.tolist()}")
        starts, flat, psw, last = offsets.reshape(-1), input, per_sample_weights, \
            bool(include_last_offset)
        # offsets a compiled plan reads anew each run: the longest bag is a value, and the
        # plan keeps the shapes it traced; pad every bag to the whole input instead
        longest = idx.shape[0] if varies_per_run(offsets) else None
    else:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of "
                         f"dimension {idx.ndim}")
    n = weight._data.shape[0]
    pad = _padding_idx(padding_idx, n, "embedding_bag")  # (torch's Python check: first)
    if idx.size and (idx.min() < 0 or idx.max() >= n):  # torch's bag kernel: RuntimeError
        at = int(xp.flatnonzero((idx.reshape(-1) < 0) | (idx.reshape(-1) >= n))[0])
        raise RuntimeError(f"Index {at} of input takes value {int(idx.reshape(-1)[at])} which "
                           f"is not in the valid range [0, {n})")
    if varies_per_run(input) and idx.size:  # (a plan's: checked on each call's, as RuntimeError)
        require((input >= 0) & (input < n), f"embedding_bag: an index of input is not in the "
                                            f"valid range [0, {n})", RuntimeError)
    emb = embedding(flat, weight, padding_idx=pad, max_norm=max_norm, norm_type=norm_type,
                    scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
    if idx.size == 0:
        return weight.new_zeros((starts.shape[0] - last, weight._data.shape[1]))
    # the bags padded to one length: positions (bags, longest) into the flat rows, and a mask
    pos, mask = _bag_layout(flat, starts, include_last_offset=last, padding_idx=pad,
                            longest=longest)
    rows = emb[pos]  # (bags, longest, dim)
    if mode == "max":
        # torch's kernel keeps a bag's first row, then takes a row only where it is strictly
        # greater: the first of equal maxima gets the gradient, and a nan counts only first
        real = mask.unsqueeze(-1)
        first = real & (mask.long().cumsum(1) == 1).unsqueeze(-1)
        vals = where(real, rows.detach(), -math.inf)
        vals = where(vals.isnan() & ~first, -math.inf, vals)
        rows = rows.gather(1, vals.argmax(1, keepdim=True)).squeeze(1)
        return where(mask.any(1).unsqueeze(-1), rows, 0.0)
    wts = mask.unsqueeze(-1).to(weight.dtype)
    if psw is not None:
        wts = wts * psw.to(weight.dtype)[pos].unsqueeze(-1)
    total = (rows * wts).sum(1)
    if mode == "sum":
        return total
    return total / mask.sum(1, keepdim=True).clamp(min=1).to(weight.dtype)


def _require_offsets(offsets, length):
    """embedding_bag's checks of its offsets' values, with ops: a compiled plan checks each
    call's (the checks below, on arrays, see the trace's only)."""
    off = offsets.reshape(-1)
    require(off[:1] == 0, "embedding_bag: offsets[0] has to be 0, i.e., the first sequence in "
                          "the mini-batch has to start from position 0")
    require(off[-1:] <= length, f"embedding_bag: offsets[-1] can not be greater than input's "
                                f"length {length}", RuntimeError)
    require(off[1:] >= off[:-1], "embedding_bag: offsets must be non-decreasing (each bag's "
                                 "start in input)", RuntimeError)


@op("embedding_bag_layout", n_out=2, differentiable=False)
def _bag_layout(xp, flat, starts, *, include_last_offset, padding_idx, longest=None):
    """Each bag's positions in the flat indices, padded to `longest` (None: the longest
    bag's length), and the mask of real (non-padding) entries; from the indices and the
    bags' starts."""
    starts = starts.astype(xp.int64)
    if include_last_offset:
        starts, ends = starts[:-1], xp.minimum(starts[1:], flat.size)
    else:
        ends = xp.append(starts[1:], flat.size)
    lengths = ends - starts
    if longest is None:
        longest = int(lengths.max()) if lengths.size else 0
    longest = max(longest, 1)
    pos = starts[:, None] + xp.arange(longest)[None, :]
    mask = xp.arange(longest)[None, :] < lengths[:, None]
    if padding_idx is not None:
        mask &= flat[xp.minimum(pos, max(flat.size - 1, 0))] != padding_idx
    return xp.where(mask, pos, 0), mask


# ---- dropout ------------------------------------------------------------------------------------
def _check_p(p, name):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: dropout probability has to be between 0 and 1, but got {p}")


_ALPHA = 1.7580993408473766  # torch's alpha dropout keeps the SELU fixed point: mean 0, var 1


@op("dropout", jvp="diagonal", n_out=1, layout="elementwise")
def _dropout(xp, x, *, p, feature_dims, alpha, generator):
    """x times a Bernoulli(1 - p) keep-mask drawn from `generator` (a flowgrad Generator), per
    element, or per (sample, channel) for feature dropout (`feature_dims` set), scaled by
    1 / (1 - p); alpha dropout maps dropped values to SELU's saturation and keeps mean and
    variance. Returns the output and the multiplier (an aux output: the rule's gradient)."""
    shape = x.shape
    if feature_dims is not None:
        lead = 2 if x.ndim == feature_dims + 2 else 1
        shape = shape[:lead] + (1,) * (len(shape) - lead)
    # the mask in x's dtype, scaled in float32 (at least) and rounded once, as torch's
    # opmath: in float16 NumPy would round 1 - p to float16 first (1 / 0.7 one ulp low)
    work = x.dtype if x.dtype.itemsize >= 4 else xp.float32
    noise = (xp.asarray(numpy_generator(generator).random(shape)) >= p).astype(work)
    if not alpha:
        scale = (noise / (1 - p)).astype(x.dtype, copy=False)
        return x * scale, scale
    a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
    b = (noise - 1) * (_ALPHA * a) + _ALPHA * a * p
    scale = (noise * a).astype(x.dtype, copy=False)
    return (x * scale + b.astype(x.dtype)).astype(x.dtype, copy=False), scale


@_dropout.grad
def dropout_backward(ctx, dy):
    return dy * ctx.aux[0]


def _dropout_impl(input, p, training, inplace, name, alpha=False, feature_dims=None):
    _check_p(p, name)
    if not training or p == 0 or not input._data.size:  # (torch's: the input itself)
        return input
    if input._data.dtype.kind not in "fV":
        raise RuntimeError(f"{name}: expected a floating point input, got {input.dtype}")

    gen = resolve()

    def apply(x):
        if p == 1:
            return x * 0.0
        return _dropout(x, p=p, feature_dims=feature_dims, alpha=alpha, generator=gen)

    return run_inplace(name + "_", apply, input) if inplace else apply(input)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p (in training) and scale the rest by 1/(1-p).

    >>> import flowgrad as flow
    >>> x = flow.ones(4)
    >>> bool((flow.nn.functional.dropout(x, 0.5, training=False) == x).all())
    True
    """
    return _dropout_impl(input, p, training, inplace, "dropout")


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) input with probability p."""
    _check_p(p, "dropout1d")
    if input._data.ndim not in (2, 3):  # torch checks in eval mode too
        raise RuntimeError(f"dropout1d: expected 2D or 3D input, got input of shape "
                           f"{tuple(input.shape)}; dropout1d drops channels of inputs with 1 "
                           f"spatial dimension")
    return _unbatched(_dropout_impl(input, p, training, inplace, "dropout1d", feature_dims=1),
                      input, input._data.ndim == 2 and not inplace)


def _unbatched(out, input, unbatched):
    """torch's dropout1d/3d unsqueeze an unbatched input and squeeze the result: when nothing
    is dropped (eval, p = 0) that is a view of the input, not the input itself (in place: the
    input, unsqueezed and squeezed back)."""
    return input.view_as(input) if out is input and unbatched else out


def _check_feature_dims(name, input, p, training, ndim):
    """torch's feature dropouts need (N, C, ...) where they draw a mask: in training with
    0 < p < 1 on a non-empty input (p = 1 zeroes anything; `ndim` counts the batch dim
    dropout3d adds to an unbatched input)."""
    if training and 0 < p < 1 and ndim < 2 and input._data.size:
        raise RuntimeError(f"{name}: feature dropout requires at least 2 dimensions in the "
                           f"input, got input of shape {tuple(input.shape)}")


def _feature_warning(name, input, dims):
    nd = input._data.ndim
    if nd not in (dims + 1, dims + 2):
        warn(f"{name}: Received a {nd}-D input to {name}, which is deprecated and will "
             f"result in an error in a future release. To retain the behavior and "
             f"silence this warning, please use dropout instead.", stacklevel=3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) input with probability p. As torch's, any other
    input (with a warning) drops along its first two dims: a 3-D input is read as (N, C, L),
    not as an unbatched (C, H, W)."""
    _check_p(p, "dropout2d")
    _feature_warning("dropout2d", input, 2)
    if input._data.ndim == 3:
        warn("dropout2d: Received a 3D input to dropout2d and assuming that "
             "channel-wise 1D dropout behavior is desired - input is interpreted as "
             "shape (N, C, L), where C is the channel dim. To maintain the 1D "
             "channel-wise dropout behavior, please switch to using dropout1d "
             "instead.", stacklevel=2)
    _check_feature_dims("dropout2d", input, p, training, input._data.ndim)
    return _dropout_impl(input, p, training, inplace, "dropout2d",
                         feature_dims=max(input._data.ndim - 2, 0))


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input with probability p; any
    other input but a 5-D one is unbatched (with a warning, as torch's)."""
    _check_p(p, "dropout3d")
    _feature_warning("dropout3d", input, 3)
    nd = input._data.ndim
    _check_feature_dims("dropout3d", input, p, training, nd + (nd != 5))
    return _unbatched(_dropout_impl(input, p, training, inplace, "dropout3d",
                                    feature_dims=3 if nd == 5 else nd - 1), input,
                      nd != 5 and not inplace)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped values go to SELU's negative saturation, then an
    affine map keeps mean and variance."""
    expect_tensor("alpha_dropout", input)
    return _dropout_impl(input, p, training, inplace, "alpha_dropout", alpha=True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels (dims 0 and 1 of the input keep their own mask)."""
    _check_p(p, "feature_alpha_dropout")
    _check_feature_dims("feature_alpha_dropout", input, p, training, input._data.ndim)
    return _dropout_impl(input, p, training, inplace, "feature_alpha_dropout", alpha=True,
                         feature_dims=max(input._data.ndim - 2, 0))


# ---- one_hot ------------------------------------------------------------------------------
def one_hot(input, num_classes=-1):
    """int64 one-hot encoding along a new last dim (num_classes=-1: max + 1).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.one_hot(flow.tensor([0, 2, 1]), num_classes=4)
    tensor([[1, 0, 0, 0],
            [0, 0, 1, 0],
            [0, 1, 0, 0]])
    """
    idx = _indices(input, "one_hot", ("int64",))
    if num_classes == -1:  # the output's shape from the values: a graph cannot repeat it
        check_read(input, "one_hot(num_classes=-1)")
        if idx.size == 0:
            raise RuntimeError("one_hot: can not infer total number of classes from empty "
                               "tensor; pass num_classes")
        num_classes = max(int(idx.max()), -1) + 1
    elif num_classes < 1 and idx.size == 0:  # torch's check of an empty input (its shape)
        raise RuntimeError(f"one_hot: can not infer total number of classes from empty "
                           f"tensor (num_classes={num_classes}); pass num_classes >= 1")
    return _one_hot(input, num_classes=num_classes)


@op("one_hot", differentiable=False)  # an op: nn.Graph and vmap see the indices as an input
def _one_hot(xp, idx, *, num_classes):
    if idx.size and idx.min() < 0:  # (checked on every run of a compiled plan too)
        raise RuntimeError(f"one_hot: class values must be non-negative, got {int(idx.min())}")
    if idx.size and idx.max() >= num_classes:
        raise RuntimeError(f"one_hot: class values must be smaller than num_classes "
                           f"({num_classes}), got {int(idx.max())}")
    return (idx[..., None] == xp.arange(num_classes)).astype(xp.int64, order="C")


# ---- gumbel_softmax ---------------------------------------------------------------------------
def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """Samples of the Gumbel-softmax (Concrete) distribution: softmax((logits + g) / tau) with
    g = -log(E), E ~ Exp(1) drawn by `exponential_`; `hard=True` returns the one-hot of each
    sample's argmax whose gradient is the soft sample's (straight-through). `eps` is unused,
    as in torch.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> y = F.gumbel_softmax(flow.zeros(2, 3), hard=True)
    >>> y.sum(-1).tolist()
    [1.0, 1.0]
    """
    noise = -logits.new_empty(logits.shape).exponential_().log()
    soft = softmax((logits + noise) / tau, dim)
    if not hard:
        return soft
    index = soft.argmax(dim, keepdim=True)
    one_hot_rows = logits.new_zeros(logits.shape).scatter_(dim, index, 1.0)
    return one_hot_rows - soft.detach() + soft


# ---- distances ------------------------------------------------------------------------------
def _float_pair(x1, x2, name, complex_ok=False):
    a, b = _promote_pair(x1, x2, name)
    # complex: refused (not cast to real) unless the op takes it
    return float_input(a, name, complex_ok), float_input(b, name, complex_ok)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) along dim (broadcasting)."""
    if isinstance(eps, (int, float)) and eps < 0:
        raise RuntimeError(f"cosine_similarity: eps must be non-negative, got: {eps}")
    a, b = _promote_pair(x1, x2, "cosine_similarity")
    if isinstance(x1, Tensor) and isinstance(x2, Tensor) and x1.dtype != x2.dtype:
        # (torch expands both first: a 0-d operand promotes as one with dims)
        common = _dt.promote_types(x1.dtype, x2.dtype)
        a, b = x1.to(common), x2.to(common)
    if a._data.dtype.kind in "iub":  # torch's check, before any cast
        raise RuntimeError(f"cosine_similarity: expected common dtype to be floating point, yet "
                           f"common dtype is {a.dtype}; convert the inputs with .float()")
    a, b = _float_pair(a, b, "cosine_similarity")
    mismatch = _broadcast_mismatch([a._data.shape, b._data.shape])
    if mismatch is not None:  # (NumPy's ValueError would leak)
        raise RuntimeError(f"cosine_similarity: {mismatch} (x1 {tuple(a.shape)}, x2 "
                           f"{tuple(b.shape)}); the inputs must broadcast")
    shape = np.broadcast_shapes(a._data.shape, b._data.shape)
    a, b = a.expand(shape), b.expand(shape)
    d = _wrap_dim(dim, len(shape), "cosine_similarity")
    na, nb = dist_norm(a, 2, d, keepdim=True), dist_norm(b, 2, d, keepdim=True)
    # torch clamps the norms at eps under no_grad: the value moves, the gradient still flows
    # through the norm as if unclamped
    na = na + (na.clamp(min=eps) - na).detach()
    nb = nb + (nb.clamp(min=eps) - nb).detach()
    return ((a / na) * (b / nb)).sum(d)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p along the last dim (broadcasting); complex inputs give a real
    distance (the norm of their complex differences), as torch."""
    if x1.dtype == x2.dtype and x1._data.dtype.kind == "b":  # (torch's x1 - x2 refuses them)
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if "b" in (x1._data.dtype.kind, x2._data.dtype.kind):
        raise RuntimeError("pairwise_distance: Subtraction, the `-` operator, with a bool tensor "
                           "is not supported; convert it with .float() first")
    a, b = _float_pair(x1, x2, "pairwise_distance", complex_ok=True)
    diff = a - b + eps
    if diff._data.ndim == 0:
        diff = diff.unsqueeze(0)
    return dist_norm(diff, p, -1, keepdim=keepdim)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between each row of x1 (B, P, M) and each row of x2 (B, R, M).

    For p=2 with more than 25 rows on a side, uses ||a||^2 + ||b||^2 - 2 a.b (matmul) as
    torch does by default; otherwise the direct differences (a node saving x1, x2, result)."""
    if x1._data.ndim < 2 or x2._data.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: "
                           f"{x1._data.ndim}D, X2 got: {x2._data.ndim}D")
    if x1._data.shape[-1] != x2._data.shape[-1]:
        raise RuntimeError(f"cdist: X1 and X2 must have the same number of columns. X1: "
                           f"{x1._data.shape[-1]} X2: {x2._data.shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    for t, arg in ((x1, "X1"), (x2, "X2")):
        if t._data.dtype.kind in "iub":  # (complex: refused below, naming it)
            raise RuntimeError(f"cdist only supports floating-point dtypes, {arg} got: "
                               f"{t.dtype}")
    check_same_dtype("cdist", x1, x2=x2)
    modes = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
             "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise ValueError(f"cdist: {compute_mode!r} is not a valid value for compute_mode; "
                         f"use one of {modes}")
    a, b = _float_pair(x1, x2, "cdist")
    rows1, rows2 = a._data.shape[-2], b._data.shape[-2]
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == modes[0] and (rows1 > 25 or rows2 > 25)))
    if use_mm:  # (half precision too, as torch's, in float32 rounded once: x * x overflowed)
        low, (a, b) = upcast(a, b)
        # torch's _euclidean_dist: one product of [-2 a, |a|^2, 1] and [b, 1, |b|^2], each
        # distance one dot product (adding the norms after a @ b.T rounded twice more: its
        # float32 gradients of close points 10 times torch's error, functional_fuzz seed
        # 9406826); sqrt of the product clamped at 0, a zero distance's gradient 0
        na, nb = (a * a).sum(-1, keepdim=True), (b * b).sum(-1, keepdim=True)
        sq = cat([a * -2, na, na.new_ones(na.shape)], -1) @ \
            cat([b, nb.new_ones(nb.shape), nb], -1).transpose(-1, -2)
        pos = sq > 0
        d = where(pos, where(pos, sq, 1.0).sqrt(), 0.0)
        return d if low is None else d.to(low)
    # torch's CPU kernel: float32 and float64 only, as pdist (half precision: the mm form only)
    check_kernel_dtype(x1, "cdist", kinds="fc" if x1._data.dtype.itemsize >= 4 else "")
    diff = a.unsqueeze(-2) - b.unsqueeze(-3)
    if p == math.inf:  # torch's kernel: agg = max(agg, |d|) from 0, which passes over a nan
        diff = where(diff.isnan(), 0.0, diff)
    return kept(dist_norm(diff, p, -1, every_tie=True), x1, x2, node="CdistBackward0", result=True)


# ---- control dependencies (OneFlow's nn.functional.depend) ----------------------------------
@op("depend", is_view=True)
def _depend(xp, x, *dependencies):
    return x.view()  # the dependencies are inputs only so that a compiled plan keeps them


@_depend.grad
def depend_backward(ctx, dy):
    return (dy,) + (None,) * (len(ctx.input_shapes) - 1)


def depend(input, depend):
    """`input` (a view of it), computed after `depend` (a tensor or a list of tensors): in an
    nn.Graph the plan keeps and orders those ops even when nothing else uses them; eagerly
    they ran already.

    >>> import flowgrad as flow
    >>> x = flow.ones(2)
    >>> flow.nn.functional.depend(x, [x * 2]).tolist()
    [1.0, 1.0]
    """
    deps = list(depend) if isinstance(depend, (list, tuple)) else [depend]
    for i, d in enumerate(deps):
        if not isinstance(d, Tensor):
            raise TypeError(f"depend(): dependency {i} must be a Tensor, got "
                            f"{type(d).__name__}")
    return _depend(input, *deps)
