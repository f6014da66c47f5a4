"""Gather and scatter: gather, scatter, scatter_add, scatter_reduce, index_add, index_copy,
index_fill, index_put, take, masked_select, masked_scatter.

All of them reduce to two primitives on *flat positions* (int arrays of offsets into the
row-major input), computed with NumPy index bookkeeping:

    take_flat(x, flat)             -> x.ravel()[flat]
    put_flat(v, shape, flat, acc)  -> zeros(shape) with v written (or summed) at flat

Each is the other's gradient, so every op here has derivatives of any order.

>>> import flowgrad as flow
>>> x = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
>>> flow.gather(x, 1, flow.tensor([[1], [0]]))
tensor([[2.],
        [3.]])
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..autograd import grad_mode
from ..autograd.interpreter import varies_per_run
from ..device import array_module
from ..errors import INT_INDEX_DTYPES, check_same_dtype, checked_number, fill_scalar, int_arg
from ..tensor import Tensor, _wrap_dim, tensor_method
from .elementwise import where
from .halfprec import HALF, in_float32
from .index import _index, parse_index
from .index_functions import _fill_value
from .layout import empty_preserving
from .registry import op
from .shape import cat

__all__ = ["gather", "scatter", "scatter_add", "scatter_reduce", "index_add", "index_reduce",
           "index_copy", "index_fill", "index_put", "take", "take_along_dim", "masked_select",
           "masked_scatter", "put"]


# ---- the two primitives ---------------------------------------------------------------------
@op("take_flat", jvp="linear", save="inputs[1]")
def _take_flat(xp, x, flat):
    return xp.take(x, flat)


@_take_flat.grad
def take_flat_backward(ctx, dy):
    flat = ctx.inputs[1]
    return _put_flat(dy, flat, shape=ctx.input_shapes[0], accumulate=True), None


# gather, take_along_dim, take and masked_select: torch's nodes save self (for its sizes), so
# a write to it after the op fails their backward; take_flat (sort's and topk's values, whose
# nodes save the indices only) lets it run
@op("gather_flat", jvp="linear", save="inputs")
def _gather_kept(xp, x, flat):
    return xp.take(x, flat)


_gather_kept.grad(take_flat_backward)


@op("put_flat", jvp="linear", save="inputs[1]")
def _put_flat(xp, v, flat, *, shape, accumulate):
    vals = xp.broadcast_to(v, flat.shape).reshape(-1)
    if accumulate:  # repeated positions sum (fast in NumPy >= 2); half precision in float32
        half = v.dtype in HALF
        out = xp.zeros(int(xp.prod(shape)), xp.float32 if half else v.dtype)
        xp.add.at(out, flat.reshape(-1), vals)
        return (out.astype(v.dtype) if half else out).reshape(shape)
    out = xp.zeros(int(xp.prod(shape)), v.dtype)
    out[flat.reshape(-1)] = vals
    return out.reshape(shape)


@_put_flat.grad
def put_flat_backward(ctx, ddx):
    flat = ctx.inputs[1]
    return _take_flat(ddx, flat), None


# ---- index bookkeeping, as ops (no gradient) so a trace replays it on new indices ------------
@op("dim_flat", differentiable=False)
def _dim_flat(xp, idx, *, shape, dim, out_shape=None, check=None):
    """Flat positions in `shape` of the coordinates (grid..., idx along dim, grid...) over
    `out_shape` (default: idx's shape; idx broadcasts to it); negative indices wrap. `check`
    (name, negative indices allowed, error class): the range checked here too, where a
    compiled plan computes the index (`_plan_check`)."""
    if check is not None:
        _check_range(idx, shape[dim], check[0], dim, check[1], check[2])
    idx = xp.where(idx < 0, idx + shape[dim], idx).astype(xp.int64, copy=False)
    if len(shape) == 1:
        return idx if out_shape is None else xp.broadcast_to(idx, out_shape)
    grids = list(xp.indices(idx.shape if out_shape is None else out_shape, sparse=True))
    grids[dim] = idx
    flat = xp.ravel_multi_index(grids, shape)
    return flat if out_shape is None else xp.broadcast_to(flat, out_shape)


@op("flat_count", differentiable=False)
def _flat_count(xp, flat, *weights, shape):
    """How often (or with what summed weight) each position of `shape` occurs in flat."""
    size = 1
    for n in shape:
        size *= n
    w = xp.broadcast_to(weights[0], flat.shape).reshape(-1).astype(xp.float64) \
        if weights else None
    return xp.bincount(flat.reshape(-1), weights=w, minlength=size).reshape(shape)


@op("flat_mask", differentiable=False)
def _flat_mask(xp, flat, *like, shape):
    """True at the positions of `shape` that flat names; laid out as torch's clone of `like`
    where one is given (preserve_format: see _written_into)."""
    mask = xp.zeros(shape, bool)
    mask.reshape(-1)[flat.reshape(-1)] = True
    if like:
        out = empty_preserving(xp, like[0], bool)
        out[...] = mask
        return out
    return mask


def _mask_laid_out_as(input, flat):
    """The mask of the positions flat names in input's shape, laid out as torch's clone of
    input (preserve_format) where input is not C-contiguous: a where over it takes its
    layout, as torch's out-of-place writes into a clone of input do."""
    like = () if input._data.flags.c_contiguous else (input,)
    return _flat_mask(flat, *like, shape=input._data.shape)


def _written_into(input, flat, written):
    """input with `written` (a tensor of input's shape) at the positions flat names, laid out
    as torch's out-of-place writes lay it out (a clone of input written into)."""
    return where(_mask_laid_out_as(input, flat), written, input)


@op("masked_positions", differentiable=False)
def _masked_positions(xp, mask, *, shape, n):
    """masked_scatter's source index at each position of `shape`: the count of True in the
    mask (broadcast to `shape`) before it, in C order (0 where the mask is False), after
    checking that the n source elements are enough."""
    count = xp.cumsum(xp.broadcast_to(mask, shape).reshape(-1), dtype=xp.int64)
    k = int(count[-1]) if count.size else 0
    if k > n:
        raise RuntimeError(f"masked_scatter(): Number of elements of source < number of ones "
                           f"in mask ({n} < {k})")
    return xp.maximum(count - 1, 0).reshape(shape)


@op("flat_nonzero", differentiable=False)
def _flat_nonzero(xp, mask, *, shape):
    """Flat positions where `mask`, broadcast to `shape`, is True."""
    return xp.flatnonzero(xp.broadcast_to(mask, shape))


# ---- argument checks ----------------------------------------------------------------------------
INT64_ONLY = (np.dtype(np.int64),)
# the index dtypes torch takes where it takes fewer than int32 and int64, and the error it
# raises (index_fill's is an IndexError)
_INDEX_DTYPES = {"index_copy": (INT64_ONLY, RuntimeError), "index_fill": (INT64_ONLY, IndexError),
                 "take": (INT64_ONLY, RuntimeError), "put": (INT64_ONLY, RuntimeError),
                 "take_along_dim": (INT64_ONLY, RuntimeError)}


def _as_index(index, name, arg="index"):
    """The int64 array of the index tensor of op `name`, whose dtype must be one torch takes
    there (int32 or int64; int64 alone for the ops in _INDEX_DTYPES)."""
    if not isinstance(index, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(index).__name__}")
    allowed, error = _INDEX_DTYPES.get(name, (INT_INDEX_DTYPES, RuntimeError))
    if index._data.dtype not in allowed:
        raise error(f"{name}(): Expected dtype {' or '.join(d.name for d in allowed)} for "
                    f"{arg}, got {index.dtype}; convert it with .long()")
    return index._data.astype(np.int64, copy=False)


def _long(index):
    """The index tensor as int64 (an op, so a trace keeps reading the new indices)."""
    return index if index._data.dtype == np.int64 else index.to(_dt.int64)


def _plan_check(index, name, allow_negative=False, error=IndexError):
    """`_dim_flat`'s check: the range of an index a plan computes anew each call (eagerly and
    for a constant index, `_check_range` on its array is enough)."""
    return (name, allow_negative, error) if varies_per_run(index) else None


def _check_range(idx, size, name, dim, allow_negative=False, error=IndexError):
    lo = -size if allow_negative else 0
    if idx.size and (idx.min() < lo or idx.max() >= size):
        bad = idx[(idx < lo) | (idx >= size)].reshape(-1)[0]
        valid = f"[{lo}, {size - 1}]" if size else "none (the dimension is empty)"
        raise error(f"{name}(): index {bad} is out of bounds for dimension {dim} with "
                    f"size {size}; valid indices are {valid}")
    return idx  # (negative ones are wrapped by _dim_flat's kernel, an op)


def _gather_flat(input, dim, index, name, src=None, allow_negative=False):
    """Checks of gather/scatter (dims, sizes, range) -> (dim, flat positions); negative
    indices wrap once when `allow_negative` (take_along_dim)."""
    shape = input._data.shape
    nd = max(len(shape), 1)
    d = _wrap_dim(dim, len(shape), name)
    if isinstance(index, Tensor) and index._data.size == 0:  # torch checks nothing of an empty
        return d, _long(index)                                 # index (not even its dtype)
    idx = _as_index(index, name)
    if idx.ndim != len(shape) and not (idx.ndim <= 1 and len(shape) <= 1):
        raise RuntimeError(f"{name}(): Index tensor must have the same number of dimensions as "
                           f"input tensor (index {tuple(idx.shape)}, input {tuple(shape)})")
    if src is not None and max(src.ndim, 1) != max(idx.ndim, 1):
        raise RuntimeError(f"{name}(): Index tensor must have the same number of dimensions as "
                           f"src tensor (index {tuple(idx.shape)}, src {tuple(src.shape)})")
    ishape = shape if shape else (1,)
    idx_n = idx.reshape(-1) if idx.ndim == 0 or not shape else idx  # 0-d acts as 1-d
    for k in range(nd):
        if k != d and idx_n.shape[k] > ishape[k]:
            raise RuntimeError(f"{name}(): Size does not match at dimension {k} expected index "
                               f"{list(idx.shape)} to be smaller than self {list(shape)} apart "
                               f"from dimension {d}")
        if src is not None and idx_n.shape[k] > (src.shape or (1,))[k]:
            raise RuntimeError(f"{name}(): Expected index {list(idx.shape)} to be smaller than "
                               f"src {list(src.shape)} in every dimension")
    # (torch's gather/scatter/take_along_dim raise a RuntimeError for an index out of range)
    _check_range(idx_n, ishape[d], name, d, allow_negative, RuntimeError)
    t = _long(index)
    if idx.ndim == 0 or not shape:
        t = t.reshape(-1)
    flat = _dim_flat(t, shape=ishape, dim=d,
                     check=_plan_check(index, name, allow_negative, RuntimeError))
    return d, flat.reshape(idx.shape) if tuple(flat.shape) != idx.shape else flat


def _src_part(src, index_shape):
    """The leading index-shaped block of src (torch reads only that much of it)."""
    if tuple(src.shape) == tuple(index_shape):
        return src
    if 0 in tuple(index_shape):  # an empty index reads nothing (whatever the dims)
        return src.reshape(-1)[:0].reshape(tuple(index_shape))
    if src._data.ndim == 0:
        return src.reshape(index_shape)
    return src[tuple(slice(0, n) for n in index_shape)]


def _as_value(value, like):
    xp = array_module(like._data)
    if isinstance(value, Tensor):
        return value if value._data.dtype == like._data.dtype else value.to(like.dtype)
    # a number as torch's Scalar conversion takes it (-1 into uint8 is 255; 300 into int8
    # raises), not NumPy's (which refuses the first)
    return Tensor._wrap(xp.asarray(fill_scalar("scatter", value, like._data.dtype),
                                   like._data.dtype))


def _check_dtype(input, src, name):
    if isinstance(src, Tensor) and src._data.dtype != input._data.dtype:
        raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype, got "
                           f"{input.dtype} and {src.dtype}; convert src with .to(self.dtype)")


# ---- gather / take ---------------------------------------------------------------------------
@tensor_method()
def gather(input, dim, index, *, sparse_grad=False):
    """out[i][j] = input[index[i][j]][j] (dim=0): values picked along `dim` by `index`.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[1, 2], [3, 4]])
    >>> flow.gather(x, 1, flow.tensor([[0, 0], [1, 0]]))
    tensor([[1, 1],
            [4, 3]])
    """
    _, flat = _gather_flat(input, dim, index, "gather")
    return _gather_kept(input, flat)


def gather_values(input, dim, index):
    """gather whose node keeps the index alone (sort's and topk's values: torch's nodes
    save the indices, not self)."""
    _, flat = _gather_flat(input, dim, index, "gather")
    return _take_flat(input, flat)


@tensor_method()
def take_along_dim(input, indices, dim=None):
    """gather with broadcasting of input and indices (dim=None: over the flattened input).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[10.0, 30.0, 20.0], [60.0, 40.0, 50.0]])
    >>> flow.take_along_dim(x, x.argmax(dim=1, keepdim=True), dim=1)
    tensor([[30.],
            [60.]])
    """
    if dim is None:  # torch's: a gather from the flattened input
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    dim = int_arg(dim, "take_along_dim", "dim", 3)  # (parsed first, as torch's)
    _as_index(indices, "take_along_dim", "indices")
    d = _wrap_dim(dim, input._data.ndim, "take_along_dim")
    ishape, jshape = list(input.shape), list(indices.shape)
    ishape[d] = jshape[d] = 1
    try:
        b = np.broadcast_shapes(tuple(ishape), tuple(jshape))
    except ValueError:
        raise RuntimeError(f"take_along_dim: input {tuple(input.shape)} and indices "
                           f"{tuple(indices.shape)} do not broadcast outside dim {d}") from None
    x = input.expand(b[:d] + (input.shape[d],) + b[d + 1:])
    # torch wraps negative indices here (gather itself refuses them)
    _, flat = _gather_flat(x, d, indices.expand(b[:d] + (indices.shape[d],) + b[d + 1:]),
                           "take_along_dim", allow_negative=True)
    return _gather_kept(x, flat)


@tensor_method()
def take(input, index):
    """Elements of the flattened input at `index` (negative indices count from the end)."""
    idx = _as_index(index, "take")
    _check_range(idx, input._data.size, "take", 0, allow_negative=True)
    return _gather_kept(input, _dim_flat(_long(index), shape=(input._data.size,), dim=0,
                                         check=_plan_check(index, "take", True)))


# ---- scatter family ----------------------------------------------------------------------------
_REDUCES = ("sum", "prod", "mean", "amax", "amin")


# complex=True: sum, prod and mean run on complex (amax/amin and include_self=False refuse as
# torch's kernels); no complex gradient ever reaches the rule: scatter_reduce and index_reduce
# refuse a complex input that records one, scatter(reduce=) has no derivative at all (torch's)
def _refuse_complex_kernel(reduce, include_self, caller, itemsize):
    """torch's CPU kernels with no complex version: amax/amin, and index_reduce's
    include_self=False (its init for every reduce)."""
    if caller == "index_reduce" and not include_self:
        kernel = "index_reduce_func_exclude_input_init"
    elif reduce not in ("amax", "amin"):
        return
    elif caller == "index_reduce":
        kernel = "maximum_cpu" if reduce == "amax" else "minimum_cpu"
    else:
        kernel = f"scatter_gather_tensor_cpu_reduce_{reduce}"
    name = "ComplexFloat" if itemsize == 8 else "ComplexDouble"
    raise NotImplementedError(f"\"{kernel}\" not implemented for '{name}'")


@op("scatter_reduce_flat", save="inputs outputs", complex=True)
@in_float32  # a half-precision input accumulates in float32, as torch
def _scatter_reduce_flat(xp, x, s, flat, *, reduce, include_self, caller="scatter_reduce",
                         legacy=False):
    if x.dtype.kind == "c":
        _refuse_complex_kernel(reduce, include_self, caller, x.dtype.itemsize)
    out = x.reshape(-1).copy()
    f, v = flat.reshape(-1), xp.broadcast_to(s, flat.shape).reshape(-1)
    if reduce in ("sum", "mean"):
        if not include_self:
            out[f] = 0
        xp.add.at(out, f, v)
        if reduce == "mean":
            cnt = xp.bincount(f, minlength=out.size) + (1 if include_self else 0)
            touched = cnt > 0
            if out.dtype.kind in "fVc":
                out[touched] = out[touched] / cnt[touched]
            else:  # torch floors integer means
                out[touched] = out[touched] // cnt[touched]
    elif reduce == "prod":
        if not include_self:
            out[f] = 1
        xp.multiply.at(out, f, v)
    else:
        if not include_self and out.dtype == xp.bool_:
            out[f] = reduce == "amin"
        elif not include_self:
            info = xp.finfo if out.dtype.kind in "fV" else xp.iinfo
            out[f] = info(out.dtype).min if reduce == "amax" else info(out.dtype).max
        (xp.maximum if reduce == "amax" else xp.minimum).at(out, f, v)
    return out.reshape(x.shape)


@_scatter_reduce_flat.grad
def scatter_reduce_flat_backward(ctx, dy):
    if getattr(ctx, "legacy", False):  # scatter(reduce=): no derivative in torch, any dtype
        raise RuntimeError("derivative for aten::scatter is not implemented")
    (x, s, flat), out = ctx.inputs, ctx.out
    red, incl = ctx.reduce, ctx.include_self
    shape = ctx.input_shapes[0]
    dt = dy.dtype
    count = _flat_count(flat, shape=shape)
    keep = None if incl else count == 0  # where x still takes part in the result (None: all)
    need_x, need_s = ctx.needs_input_grad[:2]
    dx = ds = None
    kept = dy if incl else dy * keep.to(dt)
    if red == "sum":
        dx = kept if need_x else None
        ds = _take_flat(dy, flat) if need_s else None
    elif red == "mean":
        cnt = (count + 1 if incl else count + keep.to(count.dtype)).clamp(min=1).to(dt)
        dx = kept / cnt if need_x else None
        ds = _take_flat(dy / cnt, flat) if need_s else None
    elif red in ("amax", "amin"):
        # ties share the gradient evenly, as torch does
        xh = x == out if incl else (x == out) & keep
        sh = s.expand(tuple(flat.shape)) == _take_flat(out, flat)
        n = (_flat_count(flat, sh, shape=shape) + xh.to(count.dtype)).clamp(min=1).to(dt)
        dx = dy * xh.to(dt) / n if need_x else None
        ds = _take_flat(dy / n, flat) * sh.to(dt) if need_s else None
    else:  # prod, safe where factors are zero (torch's formula)
        if need_x:
            if incl:  # d out / d x = the product of the scattered values
                dx = dy * _scatter_reduce_flat(x.new_ones(shape), s, flat, reduce="prod",
                                               include_self=True)
            else:
                dx = kept
        if need_s:
            sv = s.expand(tuple(flat.shape)) if tuple(s.shape) != tuple(flat.shape) else s
            zero = sv == 0
            nz = _take_flat(_flat_count(flat, zero, shape=shape), flat)
            single = zero & (nz == 1)
            masked = where(single, 1.0, sv)
            r1 = _scatter_reduce_flat(x, masked, flat, reduce="prod", include_self=incl)
            g1 = _take_flat(dy * r1, flat)
            g2 = _take_flat(dy * out, flat) / where(zero, 1.0, sv)
            ds = where(single, g1, g2)
    return dx, ds, None


def _scatter_args(input, dim, index, src, name):
    if not isinstance(src, Tensor):
        _, flat = _gather_flat(input, dim, index, name)
        return flat, _as_value(src, input)
    _check_dtype(input, src, name)
    _, flat = _gather_flat(input, dim, index, name, src=src)
    return flat, _src_part(src, flat.shape)


@tensor_method()
def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of input with `src` (or `value`) written at `index` along `dim`.

    >>> import flowgrad as flow
    >>> index = flow.tensor([[0, 1, 2]])
    >>> flow.zeros(3, 3).scatter(0, index, flow.ones(1, 3))
    tensor([[1., 0., 0.],
            [0., 1., 0.],
            [0., 0., 1.]])
    """
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter(): pass src (a Tensor) or value (a number)")
    if reduce is not None:
        modes = {"add": "sum", "multiply": "prod"}
        if reduce not in modes:
            raise RuntimeError(f"scatter(): reduce argument must be either add or multiply, "
                               f"got {reduce!r}")
        src = src if isinstance(src, Tensor) else _as_value(src, input).expand(index.shape)
        flat, s = _scatter_args(input, dim, index, src, "scatter")
        return _scatter_reduce_flat(input, s, flat, reduce=modes[reduce], include_self=True,
                                    caller="scatter", legacy=True)
    flat, s = _scatter_args(input, dim, index, src, "scatter")
    written = _put_flat(s, flat, shape=input._data.shape, accumulate=False)
    return where(_flat_mask(flat, shape=input._data.shape), written, input)


@tensor_method()
def scatter_add(input, dim, index, src):
    """A copy of input with `src` added at `index` along `dim` (repeats accumulate).

    >>> import flowgrad as flow
    >>> flow.zeros(3).scatter_add(0, flow.tensor([0, 2, 0]), flow.tensor([1.0, 2.0, 3.0]))
    tensor([4., 0., 2.])
    """
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_add(): argument 'src' must be Tensor, not "
                        f"{type(src).__name__}")
    flat, s = _scatter_args(input, dim, index, src, "scatter_add")
    # (the C-ordered sum first: the result's layout is its, as torch's contiguous clone)
    return _put_flat(s, flat, shape=input._data.shape, accumulate=True) + input


@tensor_method()
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """Reduce `src` into a copy of input at `index` along `dim` with sum, prod, mean, amax or
    amin; include_self=False leaves input's own values at scattered positions out."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"scatter_reduce(): reduce argument must be one of {_REDUCES}, got "
                           f"{reduce!r}")
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce(): argument 'src' must be Tensor, not "
                        f"{type(src).__name__}")
    flat, s = _scatter_args(input, dim, index, src, "scatter_reduce")
    _refuse_complex(input, s, "scatter_reduce", reduce, bool(include_self))
    return _scatter_reduce_flat(input, s, flat, reduce=reduce,
                                include_self=bool(include_self))


def _refuse_complex(input, src, name, reduce, include_self):
    """torch's scatter_reduce/index_reduce have no complex derivative: they refuse a complex
    call that would record one (rather than a gradient without the conjugates), once the
    kernel has taken the dtype."""
    if not input.is_complex():
        return
    _refuse_complex_kernel(reduce, include_self, name, input._data.dtype.itemsize)
    if grad_mode.is_grad_enabled() and (input.requires_grad or src.requires_grad):
        raise RuntimeError(f"{name} does not support automatic differentiation for outputs "
                           f"with complex dtype.")


# ---- index_* along one dim ----------------------------------------------------------------------
def _index_dim(input, dim, index, name, source=None, allow_negative=False, error=IndexError):
    """index_add/copy/fill checks -> flat positions of shape source.shape. As in torch, only
    index_fill takes negative indices; index_add of a matrix raises RuntimeError, the others
    IndexError."""
    shape = input._data.shape
    d = _wrap_dim(dim, len(shape), name)
    idx = _as_index(index, name)
    if idx.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector, got shape "
                         f"{tuple(idx.shape)}")
    idx = idx.reshape(-1)
    size = shape[d] if shape else 1
    idx = _check_range(idx, size, name, d, allow_negative, error)
    ishape = shape if shape else (1,)
    want = ishape[:d] + (idx.size,) + ishape[d + 1:]
    if source is not None and not source._data.ndim and shape:
        _refuse_scalar_source(name, d, idx.size, len(shape))
    if source is not None and source._data.ndim and tuple(source.shape) != want:
        raise RuntimeError(f"{name}(): source of shape {tuple(source.shape)} does not match "
                           f"the expected shape {want} (self {tuple(shape)} with dim {d} "
                           f"replaced by the index length {idx.size})")
    t = _long(index).reshape((1,) * d + (-1,) + (1,) * (len(ishape) - d - 1))
    return _dim_flat(t, shape=ishape, dim=d, out_shape=want,
                     check=_plan_check(index, name, allow_negative, error))


def _refuse_scalar_source(name, d, n_index, ndim):
    """torch's refusals of a 0-d source into a tensor with dims (only index_copy of a vector
    at one index takes one; flowgrad broadcast it)."""
    if name == "index_copy":
        if n_index != 1:
            raise IndexError(f"index_copy_(): When source is scalar, index should have one "
                             f"element (got {n_index}); pass a source of the selected shape")
        if ndim > 1:
            raise RuntimeError("index_copy_(): Source/destination tensor must have same slice "
                               "shapes: a 0-d source into a tensor of several dims; pass a "
                               "source of the selected shape")
        return
    if d > 0:
        raise RuntimeError(f"{name}_(): Indexing dim {d} is out of bounds of the source tensor "
                           f"with dim 0; pass a source of the selected shape")
    if n_index != 1:
        raise IndexError(f"{name}_(): Dimension specified as 0 but the source tensor has no "
                         f"dimensions; pass a source of the selected shape")
    raise RuntimeError(f"{name}_(): source tensor shape must match self tensor shape, "
                       f"excluding the specified dimension: a 0-d source; pass a source of "
                       f"the selected shape")


@tensor_method()
def index_add(input, dim, index, source, *, alpha=1):
    """input with alpha * source added at `index` along `dim`.

    >>> import flowgrad as flow
    >>> flow.zeros(3, 2).index_add(0, flow.tensor([0, 2]), flow.ones(2, 2))
    tensor([[1., 1.],
            [0., 0.],
            [1., 1.]])
    """
    _check_dtype(input, source, "index_add")
    # (torch's index_add of a vector goes through index_put's checks: IndexError)
    flat = _index_dim(input, dim, index, "index_add", source,
                      error=IndexError if input._data.ndim <= 1 else RuntimeError)
    if input._data.dtype.kind == "b":  # bool arithmetic, as add's: alpha * b is b (or False)
        src = source if alpha else source & False
    else:  # torch's Scalar conversion of alpha to the input's dtype (256 does not fit int8)
        alpha = checked_number("index_add", alpha, input._data.dtype, "alpha")
        src = source if alpha == 1 else source * alpha
    # (the sums first: C-ordered as torch's, whatever input's layout)
    return _put_flat(src, flat, shape=input._data.shape, accumulate=True) + input


@tensor_method()
def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """input with the slices of source reduced (prod, mean, amax or amin) into the slices at
    `index` along `dim`; include_self=False leaves input's own values at those slices out.

    >>> import flowgrad as flow
    >>> flow.ones(3, 2).index_reduce(0, flow.tensor([0, 0]), flow.full((2, 2), 3.0), "prod")
    tensor([[9., 9.],
            [1., 1.],
            [1., 1.]])
    """
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce argument to be one of prod, mean, "
                           f"amax or amin, got {reduce}.")
    _check_dtype(input, source, "index_reduce")
    if source._data.ndim and source._data.ndim != input._data.ndim:  # (0-d: _index_dim's)
        raise RuntimeError(f"index_reduce(): source tensor shape must match self tensor shape, "
                           f"excluding the specified dimension. Got self.shape = "
                           f"{list(input.shape)} source.shape = {list(source.shape)}")
    flat = _index_dim(input, dim, index, "index_reduce", source)
    _refuse_complex(input, source, "index_reduce", reduce, bool(include_self))
    return _scatter_reduce_flat(input, source, flat, reduce=reduce,
                                include_self=bool(include_self), caller="index_reduce")


@tensor_method()
def index_copy(input, dim, index, source):
    """input with the slices of source written at `index` along `dim`."""
    _check_dtype(input, source, "index_copy")
    flat = _index_dim(input, dim, index, "index_copy", source)
    written = _put_flat(source, flat, shape=input._data.shape, accumulate=False)
    return where(_flat_mask(flat, shape=input._data.shape), written, input)


@tensor_method()
def index_fill(input, dim, index, value):
    """input with `value` at `index` along `dim`."""
    flat = _index_dim(input, dim, index, "index_fill", allow_negative=True)
    if not isinstance(value, Tensor):  # (checked here, so the error names index_fill)
        fill_scalar("index_fill", value, input._data.dtype)
    # (laid out as input, as torch's clone of it written into: not masked_fill's C order)
    mask = _mask_laid_out_as(input, flat)
    return _fill_value(input, mask, value).where(mask, input)


@tensor_method()
def index_put(input, indices, values, accumulate=False):
    """input with `values` at `input[indices]` (a tuple of index tensors), summed when
    accumulate=True."""
    flat, values, _, _ = _put_args(input, indices, values)
    written = _put_flat(values, flat, shape=input._data.shape, accumulate=accumulate)
    if accumulate:
        return input + written
    return _written_into(input, flat, written)


def _put_args(input, indices, values):
    """index_put's arguments checked: the flat positions written, the values (a tensor of
    input's dtype), the index's spec and arrays."""
    xp = array_module(input._data)
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' must be a tuple of Tensors, not "
                        f"{type(indices).__name__}")
    spec, arrays, _ = parse_index(tuple(indices), select_ints=False)
    positions = Tensor._wrap(xp.arange(input._data.size).reshape(input._data.shape))
    try:
        flat = _index(positions, *arrays, spec=spec)  # an op: a trace reads the new indices
    except IndexError as e:
        raise IndexError(f"index_put(): {e} (self has shape {tuple(input.shape)})") from None
    check_same_dtype("index_put", input, values=values)
    values = _as_value(values, input)
    fshape = tuple(flat.shape)
    try:
        np.broadcast_shapes(values._data.shape, fshape)
        if len(values._data.shape) > len(fshape):
            raise ValueError
    except ValueError:
        raise RuntimeError(f"index_put(): shape mismatch: value tensor of shape "
                           f"{list(values.shape)} cannot be broadcast to indexing result of "
                           f"shape {list(fshape)}") from None
    return flat, values, spec, arrays


# ---- masks --------------------------------------------------------------------------------------
def _bool_mask(mask, name):
    if not isinstance(mask, Tensor) or mask._data.dtype != np.bool_:
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"{name}: expected BoolTensor for mask, got {got}; use mask.bool()")
    return mask


@tensor_method()
def masked_select(input, mask):
    """The elements of input where mask (broadcast) is True, as a 1-D tensor.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[1.0, -2.0], [-3.0, 4.0]])
    >>> flow.masked_select(x, x > 0)
    tensor([1., 4.])
    """
    _bool_mask(mask, "masked_select")
    try:
        shape = np.broadcast_shapes(input._data.shape, mask._data.shape)
    except ValueError:
        raise RuntimeError(f"masked_select(): the shape of the mask {tuple(mask.shape)} must "
                           f"broadcast with the input shape {tuple(input.shape)}") from None
    flat = _flat_nonzero(mask, shape=shape)
    if input._data.shape != shape:
        input = input.expand(shape)
    return _gather_kept(input, flat)


@tensor_method()
def masked_scatter(input, mask, source):
    """input with the leading elements of `source` written, in order, where mask is True."""
    _bool_mask(mask, "masked_scatter")
    try:  # (input and mask broadcast together, as torch's out-of-place masked_scatter)
        shape = np.broadcast_shapes(mask._data.shape, input._data.shape)
    except ValueError:
        raise RuntimeError(f"masked_scatter(): the shape of the mask {tuple(mask.shape)} must "
                           f"broadcast with the input shape {tuple(input.shape)}") from None
    if shape != input._data.shape:
        input = input.expand(shape)
    _check_dtype(input, source, "masked_scatter")
    # each position's source element: its size is the input's whatever the mask's count, so
    # a plan runs it for any mask (the positions of the True ones would be value-shaped)
    # (an empty source: the mask must be all False, and input's own elements are taken)
    src = source.reshape(-1) if source._data.size else cat([source.reshape(-1),
                                                            input.reshape(-1)])
    written = _take_flat(src, _masked_positions(mask, shape=shape, n=source._data.size))
    # (C-ordered as torch's, which writes into a contiguous clone of input)
    return where(mask if tuple(mask.shape) == shape else mask.expand(shape), written,
                 input).contiguous()


@tensor_method()
def put(input, index, source, accumulate=False):
    """input with `source` written (accumulate=True: added) at the positions `index` of the
    flattened input (negative indices count from the end).

    >>> import flowgrad as flow
    >>> flow.zeros(2, 2).put(flow.tensor([0, -1]), flow.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    _check_dtype(input, source, "put")
    idx = _as_index(index, "put")
    _check_range(idx, input._data.size, "put", 0, allow_negative=True)
    if source._data.size != idx.size:
        raise RuntimeError(f"put(): expected source to have as many elements as index "
                           f"({idx.size}), got source of shape {tuple(source.shape)}")
    shape = input._data.shape
    flat = _dim_flat(_long(index).reshape(-1), shape=(input._data.size,), dim=0,
                     check=_plan_check(index, "put", True))
    src = source.reshape(-1)
    if accumulate:
        return input + _put_flat(src, flat, shape=shape, accumulate=True)
    return _written_into(input, flat, _put_flat(src, flat, shape=shape, accumulate=False))


# the in-place forms (Tensor.scatter_, index_add_, put_, ...): gather_inplace.py, imported
# last (it reads the functions above)
from . import gather_inplace  # noqa: E402,F401
