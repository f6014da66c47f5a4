"""torch.segment_reduce: sum, mean, max, min or prod over consecutive segments of an axis,
given each segment's length (or the offsets between them).

>>> import flowgrad as flow
>>> data = flow.tensor([1.0, 2.0, 3.0, 4.0])
>>> flow.segment_reduce(data, "sum", lengths=flow.tensor([3, 0, 1]))
tensor([6., 0., 4.])
"""
from __future__ import annotations

import math

from ..func.batched import check_every_example
from .creation import zeros_like
from .elementwise import where
from .gather import gather
from .registry import op
from .shape import cat

__all__ = ["segment_reduce", "_segment_reduce"]

_REDUCES = {"sum": "sum", "mean": "mean", "max": "max", "amax": "max", "min": "min",
            "amin": "min", "prod": "prod"}
_EMPTY = {"sum": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf, "mean": math.nan}


def _bounds(xp, lengths):
    """Each segment's start and end, (B, S) int64, from lengths flattened to (B, S)."""
    ends = xp.cumsum(lengths.astype(xp.int64), axis=-1)
    return ends - lengths, ends


@op("segment_reduce", save="inputs outputs")
def _segment_reduce_op(xp, data, lengths, *, reduce, axis, initial):
    """The reduction of data (lead..., n, rest...) over the segments `lengths`
    (lead..., S) of axis len(lead); an empty segment gives `initial` (or the reduction's
    identity; mean: nan), a non-empty one folds `initial` in (mean: (initial + sum) / len)."""
    lead, n, rest = data.shape[:axis], data.shape[axis], data.shape[axis + 1:]
    b = math.prod(lead)
    flat = data.reshape((b, n) + rest)
    lens = lengths.reshape(b, -1)
    starts, ends = _bounds(xp, lens)
    ufunc = {"sum": xp.add, "mean": xp.add, "prod": xp.multiply, "max": xp.maximum,
             "min": xp.minimum}[reduce]
    out = xp.empty((b, lens.shape[1]) + rest, data.dtype)
    for i in range(b):  # one row of segments per leading index (usually one)
        full = lens[i] > 0
        row = out[i]
        row[...] = _EMPTY[reduce] if initial is None else initial
        if full.any():
            # (cut at the last end: unsafe lengths may leave a tail that is no segment's)
            got = ufunc.reduceat(flat[i][:ends[i][-1]], starts[i][full], axis=0)
            if initial is not None:
                got = ufunc(got, xp.asarray(initial, data.dtype))
            if reduce == "mean":
                got = got / lens[i][full].reshape((-1,) + (1,) * len(rest)).astype(data.dtype)
            row[full] = got
    return out.reshape(lead + (lens.shape[1],) + rest)


@op("segment_ids", n_out=2, differentiable=False)
def _segment_ids(xp, lengths, *, n):
    """The segment of each of the n positions along the axis, (lead..., n) int64 (0 where
    none), and whether a segment covers it at all (unsafe lengths may stop short)."""
    lens = lengths.reshape(-1, lengths.shape[-1]).astype(xp.int64)
    _, ends = _bounds(xp, lens)
    pos = xp.arange(n)
    ids = xp.stack([xp.searchsorted(e, pos, side="right") for e in ends]) if lens.size else \
        xp.zeros((lens.shape[0], n), xp.int64)
    covered = ids < lens.shape[1]
    ids = xp.where(covered, ids, 0)
    return ids.reshape(lengths.shape[:-1] + (n,)), covered.reshape(lengths.shape[:-1] + (n,))


def _spread(t, ids, axis, ndim):
    """A per-segment tensor (lead..., S, rest...) read back at each position along `axis`."""
    idx = ids.reshape(tuple(ids.shape) + (1,) * (ndim - axis - 1))
    shape = tuple(t.shape[:axis]) + (ids.shape[-1],) + tuple(t.shape[axis + 1:])
    return gather(t, axis, idx.expand(shape))


@_segment_reduce_op.grad
def segment_reduce_backward(ctx, dy):
    data, lengths = ctx.inputs
    out, reduce, axis, initial = ctx.out, ctx.reduce, ctx.axis, ctx.initial
    if dy.shape[axis] == 0:  # no segments: no gradient reaches the data
        return zeros_like(data), None
    ids, covered = _segment_ids(lengths, n=data.shape[axis])
    nd = data.ndim
    mask = covered.reshape(tuple(covered.shape) + (1,) * (nd - axis - 1))
    g = _spread(dy, ids, axis, nd)
    if reduce == "mean":
        g = g / _spread(lengths.to(data.dtype), ids, axis, axis + 1).reshape(mask.shape)
    elif reduce in ("max", "min"):
        y = _spread(out, ids, axis, nd)
        hit = ((data == y) | (data.isnan() & y.isnan())).to(data.dtype)
        count = _segment_reduce_op(hit, lengths, reduce="sum", axis=axis, initial=None)
        # (a segment whose extreme is `initial` has no hit: its count is 0, its gradient 0)
        g = g * hit / _spread(count.clamp(min=1.0), ids, axis, nd)
    elif reduce == "prod":  # torch's rule: the product of the others, exact at zeros
        zero = data == 0
        nonzero = where(zero, 1.0, data)
        others = _segment_reduce_op(nonzero, lengths, reduce="prod", axis=axis,
                                    initial=initial)
        zeros = _segment_reduce_op(zero.to(data.dtype), lengths, reduce="sum", axis=axis,
                                   initial=None)
        nz = _spread(zeros, ids, axis, nd)
        g = g * where(zero, where(nz == 1, _spread(others, ids, axis, nd), 0.0),
                      where(nz == 0, _spread(out, ids, axis, nd) / nonzero, 0.0))
    return where(mask, g, 0.0), None


def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """Reduce `data` over consecutive segments of `axis`: reduce is 'sum', 'mean', 'max',
    'min' or 'prod' ('amax'/'amin' too); the segments are given by `lengths` (lead..., S)
    (its last dim is `axis`; the lengths of a row sum to data.shape[axis] unless `unsafe`)
    or `offsets` (lead..., S + 1). An empty segment gives `initial`, or the reduction's
    identity (mean: nan). Differentiable in data, as torch's.

    >>> import flowgrad as flow
    >>> data = flow.tensor([[1.0, 2.0], [5.0, 0.0], [3.0, 4.0]])
    >>> flow.segment_reduce(data, "max", lengths=flow.tensor([2, 1]))
    tensor([[5., 2.],
            [3., 4.]])
    """
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    reduce = _REDUCES[reduce]
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    if data._data.dtype.kind not in "fV":
        raise NotImplementedError(f"segment_reduce: not implemented for {data.dtype}; the "
                                  f"data must be a floating point tensor (.double())")
    given = lengths if lengths is not None else offsets
    name = "lengths" if lengths is not None else "offsets"
    if given._data.dtype.name not in ("int64", "int32"):
        raise NotImplementedError(f"segment_reduce: {name} must be int64 or int32, got "
                                  f"{given.dtype}")
    if given.dim() == 0:
        raise RuntimeError(f"segment_reduce(): {name} must have at least one dimension (the "
                           f"segments along axis), got a 0-d tensor")
    axis = axis + data.dim() if axis < 0 else axis
    if axis != given.dim() - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of "
                           f"{name} but got {axis}.")
    if tuple(given.shape[:-1]) != tuple(data.shape[:axis]):
        raise RuntimeError(f"segment_reduce(): {name} of shape {tuple(given.shape)} must have "
                           f"the leading dims of data {tuple(data.shape[:axis])}")
    n = data.shape[axis]
    # (checks by ops over every example: under vmap `_data` is a placeholder)
    if offsets is not None and lengths is None:
        if given.shape[-1] == 0:
            raise RuntimeError("segment_reduce(): offsets must hold at least one value (the "
                               "start of the first segment)")
        check_every_example(given[..., 1:] >= given[..., :-1], "segment_reduce(): offsets "
                            "must be non-decreasing (segment lengths >= 0)")
        check_every_example((given >= 0) & (given <= n), f"segment_reduce(): offsets must "
                            f"lie in [0, {n}] (the size of data along axis {axis})")
        # the positions before offsets[0] belong to no segment: a leading one, dropped after
        # (by ops: offsets that are an input of nn.Graph are traced)
        lengths = cat([offsets[..., :1], offsets[..., 1:] - offsets[..., :-1]], -1)
    check_every_example(lengths >= 0, "lengths contains negative value!")
    totals = lengths.sum(-1)
    if not unsafe and offsets is None:
        check_every_example(totals == n, "segment_reduce(): Expected all rows of lengths "
                            "along axis to sum to data.size(lengths.dim()-1) when !unsafe.")
    check_every_example(totals <= n, f"segment_reduce(): the lengths sum to more than the {n} "
                        f"elements of data along axis {axis}")
    out = _segment_reduce_op(data, lengths, reduce=reduce, axis=axis,
                             initial=None if initial is None else float(initial))
    if given is not offsets:
        return out
    # a new row-major result, as torch's (the narrowed rows of a larger one had gaps)
    return out.narrow(axis, 1, out.shape[axis] - 1).contiguous()


_segment_reduce = segment_reduce
