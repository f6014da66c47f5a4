"""Indexing: `x[index]` and `x[index] = value` with every NumPy/torch index form (ints,
slices, None, Ellipsis, index tensors, bool masks), narrow, select (index_select, nonzero and
masked_fill: ops/index_functions.py).

Basic indexing returns a view (shared storage and version counter); advanced indexing a
copy. Both have the same gradient: the output grad scattered back (summed on repeats).

An index is split in two: its static structure (`spec`, a tuple of slices, ints, None,
Ellipsis, bools and an `ARRAY` placeholder where each index array goes), an attribute, and
the index arrays themselves, passed to the op as extra (non-differentiable) input tensors.
A traced op thus reads its index arrays from its inputs, never from a frozen attribute.

>>> import flowgrad as flow
>>> x = flow.zeros(3, requires_grad=True)
>>> x[flow.tensor([0, 0, 2])].sum().backward(); x.grad
tensor([2., 0., 1.])
"""
from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as _dt
from .._warn import warn
from ..autograd import grad_mode
from ..autograd import interpreter as _interpreter
from ..autograd.inplace import (
    addresses,
    bump_version,
    check_capture,
    check_inplace,
    expanded_view,
    inplace_update,
    leave_moved_base,
    memory_of,
    overlap_error,
    overlap_status,
    same_elements,
    self_overlapping,
    shares_elements,
    warn_expanded_write,
    writable,
)
from ..autograd.interpreter import STAMP
from ..autograd.levels import writing_out
from ..autograd.meta import BEFORE_WRITE
from ..autograd.views import writable_alias
from ..device import ARRAY_MODULES, array_module, new_array
from ..errors import INT_INDEX_DTYPES, fill_scalar, int_arg
from ..tensor import Tensor, _wrap_dim, tensor_method
from .index_order import reads_what_it_wrote
from .layout import index_layout, row_major
from .registry import op
from .view_geometry import expanded, index_strides, restride

__all__ = ["narrow", "select"]


class _ArrayPlace:
    """Where an index array goes in an index spec (the array is an op input)."""

    __slots__ = ()

    def __repr__(self):
        return "ARRAY"

    def __reduce__(self):
        return "ARRAY"


ARRAY = _ArrayPlace()
# save the index arrays (inputs from `first` on; NumPy allows at most 64 index dims), so a
# second backward raises, as torch's, and an in-place write to an index array is caught
_MAX_ARRAYS = 64


def _save_from(first):
    return "inputs[" + ", ".join(str(i) for i in range(first, first + _MAX_ARRAYS)) + "]"


# (a byte tensor is a mask, as a bool one: torch's legacy reading)
_INDEX_TENSOR_DTYPES = INT_INDEX_DTYPES + (np.dtype(np.uint8), np.dtype(np.bool_))


def parse_index(index, select_ints=True):
    """Split an index into (spec, index tensors, advanced): tensors and lists become input
    tensors, their places in spec the ARRAY placeholder. 0-d integer tensors become ints
    (selects, as torch's) unless select_ints=False (index_put: they index as arrays)."""
    items = index if isinstance(index, tuple) else (index,)
    spec, arrays, advanced = [], [], False
    for item in items:
        if isinstance(item, range) or (isinstance(item, tuple) and items is index):
            item = list(item)  # a range, or a tuple inside the index tuple: torch's sequence
        if isinstance(item, Tensor):
            data = item._data
            if data.dtype not in _INDEX_TENSOR_DTYPES:
                raise IndexError(
                    f"tensors used as indices must be long, int, byte or bool tensors, got "
                    f"{data.dtype}")
            if data.ndim == 0 and data.dtype.kind != "b" and select_ints and \
                    getattr(item, "_phys", None) is None and \
                    not _interpreter.varies_per_run(item):
                # a 0-d index selects (a view), as torch's; not vmap's (one per example) nor
                # a traced one (a plan reads it per run): those index as arrays
                item = int(data)
            else:
                if data.dtype == np.uint8:  # torch reads byte tensors as masks
                    warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                         "torch.bool instead.")
                    item = item.to(_dt.bool)
                arrays.append(item)
                item = ARRAY
                advanced = True
        elif isinstance(item, (list, np.ndarray)):
            if isinstance(item, list) and any(isinstance(i, Tensor) for i in item):
                item = [i._data if isinstance(i, Tensor) else i for i in item]
            data = np.asarray(item)
            if data.size == 0 and data.dtype.kind == "f":  # `x[[]]` selects nothing
                data = data.astype(np.int64)
            if data.dtype.kind not in "iub":
                raise IndexError(f"lists used as indices must hold ints or bools, got "
                                 f"{data.dtype}")
            arrays.append(Tensor._wrap(data))
            item = ARRAY
            advanced = True
        elif isinstance(item, slice) and item.step is not None and item.step <= 0:
            raise ValueError(f"step must be greater than zero, got slice {item}; use "
                             f"flip() to reverse a dim")
        elif isinstance(item, (bool, np.bool_)):
            item = bool(item)
            advanced = True
        elif isinstance(item, np.integer):
            item = int(item)
        elif not (item is None or item is Ellipsis or isinstance(item, (int, slice))):
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or "
                             f"bool tensors are valid indices, got {type(item).__name__}")
        spec.append(item)
    return tuple(spec), arrays, advanced


def normalize_index(index, shape=None):
    """The NumPy index of `index` (index arrays in place, in torch's order when `shape` is
    given) and whether it is advanced."""
    spec, arrays, advanced = parse_index(index)
    data = [a._data for a in arrays]
    if shape is None:
        it = iter(data)
        return tuple(next(it) if s is ARRAY else s for s in spec), advanced
    return build_index(np, spec, data, shape), advanced


def _is_advanced(spec):
    return any(s is ARRAY or type(s) is bool for s in spec)


def build_index(xp, spec, arrays, shape):
    """The NumPy index of `spec` with its index arrays put back, in torch's order (kernels)."""
    if len(spec) == 1:
        return arrays[0] if arrays else spec  # x[t]: the commonest advanced index
    if arrays:
        it = iter(arrays)
        spec = tuple(next(it) if s is ARRAY else s for s in spec)
    return torch_order(xp, _drop_empty_ellipsis(xp, spec, len(shape)), shape)


def _drop_empty_ellipsis(xp, spec, ndim):
    """An Ellipsis that stands for no dim is dropped: for torch the index arrays on either side
    of it stay adjacent (their dims stay in place), for NumPy it separates them (their dims
    move to the front, the same shape when the sizes agree, other values)."""
    if not any(s is Ellipsis for s in spec):
        return spec
    used = 0
    for s in spec:
        if hasattr(s, "ndim"):
            used += s.ndim if s.dtype == xp.bool_ else 1
        elif not (s is None or s is Ellipsis or type(s) is bool):
            used += 1
    return tuple(s for s in spec if s is not Ellipsis) if used == ndim else spec


def _show(index):
    return tuple(f"tensor(shape={i.shape})" if hasattr(i, "shape") else i
                 for i in index) if isinstance(index, tuple) else index


# basic indices only: a view, replayable from its attributes
@op("getitem", jvp="linear", is_view=True)
def _getitem(xp, x, *, index):
    return basic_view(xp, x, index)


def basic_view(xp, x, index):
    """The view x[index] of a basic index, with torch's strides."""
    out = x[index]
    if type(out) is not xp.ndarray:  # ints all the way down: a 0-d view, not a scalar copy
        out = x[(*index, Ellipsis) if type(index) is tuple else (index, Ellipsis)]
    elif (index is None or type(index) is tuple and None in index) and out.size:
        # (NumPy's new axis has stride 0: torch's unsqueeze stride)
        if out.size == x.size and 1 not in x.shape and x.flags.c_contiguous:
            return x.reshape(out.shape)  # (new dims of a row-major x, all of it: row-major)
        out = restride(xp, out, index_strides(
            x.shape, x.strides, index if type(index) is tuple else (index,), x.itemsize))
    return out


_WHOLE = (None, Ellipsis, slice(None))


@_getitem.grad
def getitem_backward(ctx, dy):
    index, shape = ctx.index, ctx.input_shapes[0]
    if index in _WHOLE or type(index) is tuple and all(i in _WHOLE for i in index):
        # every element, new size-1 dims at most (x[None], x[..., None]): torch's unsqueeze
        # and alias, whose gradient is a view of dy (a write to autograd.grad's result shows)
        return dy.reshape(shape)
    return _getitem_backward(dy, shape=shape, index=index)


@op("getitem_backward", jvp="linear")
def _getitem_backward(xp, dy, *, shape, index):
    dx = xp.zeros(shape, dy.dtype)
    dx[index] = dy
    return dx


@_getitem_backward.grad
def getitem_backward_backward(ctx, ddx):
    return _getitem(ddx, index=ctx.index)


# saves the index arrays: a second backward raises, as torch's
@op("index", jvp="linear", save=_save_from(1))
def _index(xp, x, *arrays, spec):
    out = x[build_index(xp, spec, arrays, x.shape)]
    if out.ndim < 2 or out.flags.c_contiguous and row_major(x) and all(
            row_major(a) for a in arrays):
        return out  # (NumPy's C order is torch's: x[t] of a row-major x mostly)
    it = iter(arrays)
    return index_layout(xp, out, x, tuple(next(it) if s is ARRAY else s for s in spec))


@_index.grad
def index_backward(ctx, dy):
    arrays = ctx.inputs[1:]
    return (_index_backward(dy, *arrays, shape=ctx.input_shapes[0], spec=ctx.spec),) + \
        (None,) * len(arrays)


@op("index_backward", jvp="linear", save=_save_from(1))
def _index_backward(xp, dy, *arrays, shape, spec):
    dx = xp.zeros(shape, dy.dtype)
    xp.add.at(dx, build_index(xp, spec, arrays, shape), dy)  # repeated indices sum
    return dx


@_index_backward.grad
def index_backward_backward(ctx, ddx):
    arrays = ctx.inputs[1:]
    return (_index(ddx, *arrays, spec=ctx.spec),) + (None,) * len(arrays)


def _is_int(item):
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def torch_order(xp, idx, shape):
    """NumPy counts an int beside an index array as advanced, which can move the result's
    dims; torch applies ints first as selects. Rewrite such an index as coordinates that
    give torch's result directly."""
    if type(idx) is not tuple or not any(_is_int(i) for i in idx) or \
            not any(hasattr(i, "ndim") or type(i) is bool for i in idx):
        return idx
    first, then = [], []
    for item in idx:
        if _is_int(item):
            first.append(item)
        elif item is None or isinstance(item, slice):
            first.append(item)
            then.append(slice(None))
        elif item is Ellipsis:
            first.append(item)
            then.append(item)
        elif type(item) is bool:  # torch's x[True]: unsqueeze, then index that dim
            then.append(item)
        else:  # an index array (a bool mask spans one dim per mask dim)
            first.extend([slice(None)] * (item.ndim if item.dtype == xp.bool_ else 1))
            then.append(item)
    n = 1
    for s in shape:
        n *= s
    positions = xp.arange(n).reshape(shape)
    try:
        positions = positions[tuple(first)][tuple(then)]
    except IndexError as e:
        raise IndexError(f"index {_show(idx)} is out of bounds for tensor of shape "
                         f"{tuple(shape)}: {e}") from None
    return xp.unravel_index(positions, shape)


def getitem(x, index):
    """x[index] (Tensor.__getitem__): basic indexing gives a view, advanced (tensor/list/bool)
    indexing a copy."""
    spec, arrays, advanced = parse_index(index)
    if advanced:
        return _index(x, *arrays, spec=spec)  # kernel errors come back naming the op
    return _getitem(x, index=spec[0] if len(spec) == 1 else spec)


def _take_index(x, spec, arrays):
    """x[spec] for a spec and its index arrays (the setitem rule's gradient of value)."""
    if _is_advanced(spec):
        return _index(x, *arrays, spec=spec)
    return _getitem(x, index=spec)


# torch's CopySlices: a second backward through it raises
# torch's x[index] = value is a CopySlices (or index_put_) node, which a second backward
# through a freed graph refuses whatever it saved: "attrs" makes this node refuse it too
@op("setitem", jvp="linear", save=_save_from(2) + " attrs")
def _setitem(xp, x, value, *arrays, spec):
    out = x.copy()
    out[build_index(xp, spec, arrays, x.shape)] = value
    return out


@_setitem.grad
def setitem_backward(ctx, dy):
    need = ctx.needs_input_grad
    arrays = ctx.inputs[2:]
    dx = _setitem(dy, dy.new_zeros(()), *arrays, spec=ctx.spec) if need[0] else None
    dv = None
    if need[1]:
        dv = _take_index(dy, ctx.spec, arrays)
        extra = len(ctx.input_shapes[1]) - dv.dim()
        if extra > 0:  # NumPy/torch drop a value's leading size-1 dims; put them back
            dv = dv.reshape((1,) * extra + tuple(dv.shape))
    return (dx, dv) + (None,) * len(arrays)


# what `x[i] = value` takes besides a tensor: torch's numbers, and (beyond torch, which
# refuses them) NumPy arrays and nested lists of numbers
_ASSIGNABLE = (bool, int, float, complex, np.generic, np.ndarray, list, tuple)


def setitem(x, index, value):
    """`x[index] = value` in place; recorded (x is rebased) when value or x needs grad."""
    if STAMP or BEFORE_WRITE:  # (inside func transforms, or saved tensors kept: inline)
        check_capture("setitem", x)
    xp = array_module(x._data)
    spec, arrays, advanced = parse_index(index)
    if not isinstance(value, Tensor):
        if not isinstance(value, _ASSIGNABLE) and type(value) not in ARRAY_MODULES:
            # (NumPy would write None as nan into a float tensor)
            raise TypeError(f"setitem: can't assign a {type(value).__name__} to a tensor of "
                            f"dtype {x.dtype.name}; assign a number or a tensor")
        if value.__class__ is int and not -2 ** 63 <= value < 2 ** 63:
            raise ValueError(f"setitem: Overflow when unpacking long long: {value} does not "
                             f"fit int64 (torch reads an assigned int as one); assign a float")
        if isinstance(value, (bool, int, float, complex, np.generic)):
            # (torch writes inf for a number beyond a half dtype's range, and refuses one
            # beyond float32's)
            value = fill_scalar("setitem", value, x._data.dtype,
                                float_overflow=x._data.dtype.itemsize > 2)
        value = Tensor._wrap(xp.asarray(value, dtype=x._data.dtype))
    elif value._data.dtype != x._data.dtype:
        if advanced and not (value._data.size == 1 and all(a.dtype == _dt.bool for a in arrays)):
            # torch's index_put, unlike a copy into a view, casts nothing (one value under a
            # bool mask is its masked_fill: cast as a fill)
            raise RuntimeError(f"Index put requires the source and destination dtypes match, "
                               f"got {x.dtype.name} for the destination and "
                               f"{value.dtype.name} for the source; convert the value with "
                               f".to({x.dtype.name})")
        value = value.to(x.dtype)
    if not advanced:  # (torch's copy_to expands the value before copy_'s overlap check)
        refuse_unbroadcastable_value(x._data, spec, arrays, advanced, value)
    refuse_overlapping_value(x, spec, arrays, advanced, value)
    if advanced:  # (index_put_'s overlap check comes first)
        refuse_unbroadcastable_value(x._data, spec, arrays, advanced, value)
    data = x._data
    if value._data.ndim and value._data.shape[0] == 1 and not advanced:
        # torch drops a value's leading 1s; NumPy broadcasts them away except into fewer
        # dims (x[i, j] = a (1,) value): only those extra ones go (the value stays itself,
        # the same elements, where it fits: an alias of the region is written as before)
        try:
            extra = value._data.ndim - data[spec].ndim
        except IndexError:
            extra = 0  # (reported below, with the shapes)
        shape = value._data.shape
        if extra > 0 and all(n == 1 for n in shape[:extra]):
            value = value.reshape(shape[extra:])
    if not advanced and _is_whole(data, spec) and (
            same_elements(memory_of(value), memory_of(x), True) or value._data.ndim <= data.ndim
            and not np.may_share_memory(memory_of(value), memory_of(x))):
        # torch's slice covering all of x is x itself: x.copy_(value), no view of x written
        # (so no CopySlices node: a second backward through it runs, as torch's; `x[()] += v`
        # too); a value aliasing x otherwise takes the path below, which reads it first
        x.copy_(value)
        return
    if advanced:  # index_put_: torch warns where the expanded elements share memory
        warn_expanded_write(data, "index_put_", "tensor[indices] = tensor")
    elif not data.flags.writeable:
        # an expand: torch refuses a slice assignment only where the written region overlaps
        # itself (index tensors go through index_put_, which writes anyway), and the value
        # broadcast to it is not its very elements (`e[0, :2] = t` for e = t.expand(..):
        # torch's copy_ of the same data, which writes nothing where the strides agree,
        # size-1 dims' too, recorded as copy_'s; a 0-d value is torch's fill_, which refuses)
        try:
            region = basic_view(xp, data, spec)
            if 0 < value._data.ndim and _same_elements_broadcast(memory_of(value), region):
                if value._data.shape != region.shape:  # (torch's copy_to: leading 1s
                    shape = tuple(value.shape)   # dropped, then expanded: stride 0)
                    while shape and shape[0] == 1:
                        shape = shape[1:]
                    value = value.reshape(shape).expand(region.shape)
                _getitem(x, index=spec).copy_(value)
                return
            writable(region, "copy_")
        except IndexError:
            pass  # reported below, with the shapes
    if grad_mode.is_grad_enabled() and (value.requires_grad or x.requires_grad) or \
            _interpreter.current is not _interpreter.AutogradInterpreter:  # or a tracer: as an op
        # an expand whose elements share memory (a view, vmap's examples included; or an
        # alias x.data of one inside func transforms, written through a view of it below)
        if expanded_view(x) or not advanced and x._view is None and \
                self_overlapping(memory_of(x)):
            check_inplace("setitem", x)  # (the write goes to the base, maybe to no element)
            if advanced:
                write_elements(x, spec, arrays, value)
            else:  # write the region it selects (torch's x[i] = v is x[i].copy_(v); of a
                # 0-d v, x[i].fill_(v), which reads v first: v may be the region's element)
                region = _getitem(x, index=spec)
                region.fill_(value) if value._data.ndim == 0 else region.copy_(value)
            return
        target = x
        if x._view is not None:
            leave_moved_base("setitem", x)
        if x._view is not None and _selects_a_view(data, spec, arrays):
            # torch writes into the view the index's basic part makes (x[i] = v is
            # x[i].copy_(v)): the base is rebased, x is not, and x's history is regenerated
            # from the base when next read (none if the base stopped requiring grad)
            target = _getitem(x, index=Ellipsis)
        inplace_update("setitem", target,
                       lambda src: _setitem(src, value, *arrays, spec=spec), value.requires_grad)
        return
    idx = spec
    try:
        idx = build_index(np, spec, [a._data for a in arrays], data.shape)
        if not data.flags.writeable:
            data = writable_alias(data)
        data[idx] = value._data
    except (IndexError, ValueError) as e:
        raise type(e)(f"setitem: cannot assign value of shape {tuple(value.shape)} to index "
                      f"{_show(idx)} of tensor of shape {tuple(x.shape)}: {e}") from None
    bump_version(x)


def refuse_unbroadcastable_value(data, spec, arrays, advanced, value):
    """torch's RuntimeError for a value that does not broadcast to what the index selects
    (its leading 1s dropped first, as torch's setitem does); NumPy's was a ValueError, or no
    error at all into an empty region."""
    shape = value._data.shape
    while shape and shape[0] == 1:
        shape = shape[1:]
    if not shape:
        return
    try:
        if advanced:  # (the selection's shape, read from a zero-stride stand-in of data)
            xp = array_module(data)
            stand_in = xp.broadcast_to(xp.zeros((), xp.int8), data.shape)
            region = stand_in[build_index(xp, spec, [a._data for a in arrays], data.shape)]
        else:
            region = data[spec]
    except (IndexError, ValueError):
        return  # (the write reports it, with the shapes)
    target = getattr(region, "shape", ())
    if len(shape) <= len(target) and all(
            n == 1 or n == t for n, t in zip(reversed(shape), reversed(target))):
        return
    if advanced:
        raise RuntimeError(f"setitem: shape mismatch: value tensor of shape {list(shape)} cannot "
                           f"be broadcast to indexing result of shape {list(target)}")
    if len(shape) > len(target):
        raise RuntimeError(f"setitem: expand({list(shape)}, size={list(target)}): the number "
                           f"of sizes provided ({len(target)}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({len(shape)})")
    lead = len(target) - len(shape)
    dim = max(i for i in range(len(shape)) if shape[i] != 1 and shape[i] != target[lead + i])
    raise RuntimeError(f"setitem: The expanded size of the tensor ({target[lead + dim]}) must "
                       f"match the existing size ({shape[dim]}) at non-singleton dimension "
                       f"{lead + dim}.  Target sizes: {list(target)}.  Tensor sizes: "
                       f"{list(shape)}")


def refuse_overlapping_value(x, spec, arrays, advanced, value, accumulate=False):
    """torch's checks on `x[index] = value` where value shares x's memory. A basic index is
    x[index].copy_(value) (a 0-d value its fill_, read first): refused where both are dense
    and value holds some, not all, of the written elements (`x[1:4] = x[0:3]`; a strided pair
    torch lets be, and so does this). An advanced one is index_put_ into what the basic part
    selects: refused where value shares any memory with it (`x[[0, 1]] = x[1:3]`), unless it
    is one value under one boolean mask (its masked_fill_, which reads the value first: True
    is returned then, for the caller to read it first)."""
    data, values = memory_of(x), memory_of(value)
    if advanced and value is x and not (accumulate or value._data.size == 1 and len(
            arrays) == 1 and arrays[0]._data.dtype == np.bool_) and not _selects_a_view(
            data, spec, arrays) and not (data.ndim and data.shape[0] == 1):
        # (torch's index_put_ into x itself refuses x as its value, an empty x too; with a
        # leading 1, torch's setitem passes a view of x without it: another tensor)
        raise RuntimeError(f"index_put_: unsupported operation: the value is the tensor it "
                           f"is written into (shape {tuple(x.shape)}); clone() the value first")
    if data is not x._data or values is not value._data or \
            not np.may_share_memory(data, values):
        return False  # (vmap's batched tensors: their checks are the batching rules')
    try:
        if not advanced:
            region = basic_view(array_module(data), data, spec)
            if values.ndim and values.size == region.size and \
                    np.broadcast_shapes(values.shape, region.shape) == region.shape and \
                    overlap_status(region, expanded(array_module(values), values,
                                                    region.shape)) == "partial":
                # (torch's check alone: it expands a smaller value, stride 0, not dense, which
                # it lets be, as a strided pair; leading 1s it adds are the same elements)
                raise overlap_error("copy_", value.shape, region.shape)
            return False
        masks = iter(a._data.ndim if a._data.dtype == np.bool_ else 1 for a in arrays)
        sliced = data[tuple(s for item in spec for s in (
            (slice(None),) * next(masks) if item is ARRAY else (item,)))]
    except (IndexError, ValueError):
        return False  # (the write reports it, with the shapes)
    if not accumulate and value._data.size == 1 and len(arrays) == 1 and \
            arrays[0]._data.dtype == np.bool_:
        return True
    status = overlap_status(sliced, values)
    if status in ("partial", "full") or status == "too hard" and shares_elements(
            sliced, values) and _reads_what_it_wrote(data, spec, arrays, values, not
                                                        self_overlapping(sliced), accumulate):
        # (torch's loop may read a value it has already written (into an expand, through the
        # aliased elements; or dense pairs it cannot compare, `t[0][[1, 2]] = t[0, :2]` of a
        # transposed t): its result is its loop order's; refused as a partial overlap)
        raise RuntimeError(
            f"index_put_: unsupported operation: the value (shape {tuple(value.shape)}) "
            f"shares memory with the tensor it is written into (shape {tuple(x.shape)}); "
            f"clone() the value first")
    return False


def _reads_what_it_wrote(data, spec, arrays, values, ordered=False, accumulate=False,
                         limit=1 << 20):
    """index_order.reads_what_it_wrote of an index write of `values` into `data`."""
    try:
        written = addresses(data)[build_index(np, spec, [a._data for a in arrays], data.shape)]
        if written.size > limit:
            return True
        return reads_what_it_wrote(written, addresses(values), ordered, accumulate)
    except (IndexError, ValueError):
        return True


def _same_elements_broadcast(values, region):
    """Whether `values` broadcast to region's shape are region's very elements."""
    if values.dtype != region.dtype or not isinstance(region, type(values)):
        return False
    try:
        return same_elements(array_module(values).broadcast_to(values, region.shape), region)
    except ValueError:
        return False


def _base_positions(x):
    """The flat position in x's root base of each element of x (a view): an int array of
    x's shape, its repeats the elements that share memory."""
    info = x._view
    base = info.base._data
    positions = array_module(x._data).arange(base.size).reshape(base.shape)
    for view_op, attrs, index in info.chain:
        positions = view_op.kernel(np, positions, **attrs)
        if index is not None:
            positions = positions[index]
    return positions


def write_elements(x, spec, arrays, value, accumulate=False, name="setitem"):
    """x[idx] = value (or += value) for an expand x whose elements share memory, as torch's
    index_put_ writes it: each memory location once, in index order (the last write to a
    location wins). Recorded, it goes to the elements of the root base; else through x
    itself, as any write through a view (so a forward-AD level updates x's tangent too, a
    view's over a plain base included: make_dual's)."""
    if grad_mode.is_grad_enabled() and (value.requires_grad or x.requires_grad):
        def write_base():
            with writing_out():  # (x was checked: its base may be a transform's capture)
                _write_base_elements(x, spec, arrays, value, accumulate)

        def write_tangent(tangent, tangent_of):  # (forward AD: x's own tangent, written too)
            written = tangent_of(value)
            if written is None and accumulate:
                return
            if written is None:
                written = value.new_zeros(()).expand(tuple(value.shape))
            write_elements(tangent, spec, arrays, written, accumulate, name)

        current = _interpreter.current
        hook = None if current is _interpreter.AutogradInterpreter else \
            getattr(current, "write_elements", None)
        if hook is None:
            write_base()
        else:
            hook(x, value, write_base, write_tangent)
        return
    positions = _base_positions(x)
    size = x._view.base._data.size
    mask = arrays[0] if len(arrays) == 1 and spec == (ARRAY,) and \
        arrays[0]._data.dtype == np.bool_ and arrays[0]._data.shape == x._data.shape else None

    def consistent(src):
        # the written values of x, the same in every element sharing a location: those of
        # its location's last write (or src plus all writes to it): the write through x
        # then writes each location once, its tangent alike
        pos = Tensor._wrap(positions)
        if mask is not None and value._data.size == 1 and not accumulate:
            # (by mask, not by the positions it selects: a batched mask has no one count)
            hits = _index_backward(mask.to(_dt.int64), pos, shape=(size,), spec=(ARRAY,))
            return value.reshape(()).where(_index(hits, pos, spec=(ARRAY,)) > 0, src)
        flat = _index(pos, *arrays, spec=spec)
        values = _fit_value(value, tuple(flat.shape)).reshape(-1)
        flat = flat.reshape(-1)
        if accumulate:
            sums = _index_backward(values, flat, shape=(size,), spec=(ARRAY,))
            return src + _index(sums, pos, spec=(ARRAY,))
        hits = _index_backward(flat.new_ones(()).expand(flat.shape), flat, shape=(size,),
                               spec=(ARRAY,))
        last = _setitem(src.new_zeros(size), values, flat, spec=(ARRAY,))
        return _index(last, pos, spec=(ARRAY,)).where(_index(hits, pos, spec=(ARRAY,)) > 0, src)
    inplace_update(name, x, consistent, value.requires_grad)


def _fit_value(value, shape):
    """value broadcast to the shape of the elements it is written into (torch drops its
    leading size-1 dims)."""
    if tuple(value.shape) != shape:
        value = value.reshape(tuple(value.shape)[-len(shape):] if shape else ())
        value = value.expand(shape)
    return value


def _write_base_elements(x, spec, arrays, value, accumulate=False):
    """x[idx] = value for an expand x whose elements share memory, addressed to the elements
    of its base instead, so that each memory location is written, and differentiated, once."""
    xp = array_module(x._data)
    base = x._view.base
    positions = _base_positions(x)
    positions = positions[build_index(np, spec, [a._data for a in arrays], x._data.shape)]
    value = _fit_value(value, positions.shape)
    if base._data.ndim == 0:  # every position is the one element: the last write wins
        if positions.size:
            if accumulate:
                base.add_(value.sum())
            else:
                setitem(base, (), value.reshape(-1)[-1])
        return
    if not accumulate:
        # one write per memory location, its last: the values it overwrites (the earlier
        # writes to the location) get no gradient, as no output depends on them
        flat = positions.reshape(-1)
        _, last = np.unique(flat[::-1], return_index=True)
        if last.size < flat.size:
            last = np.sort(flat.size - 1 - last)
            positions = flat[last]
            value = value.reshape(-1)[Tensor._wrap(new_array(x._data, last))]
    where = xp.unravel_index(positions, base._data.shape)
    if accumulate:
        base.index_put_(tuple(Tensor._wrap(w) for w in where), value, accumulate=True)
    else:
        setitem(base, where, value)


def _selects_a_view(data, spec, arrays):
    """Whether the basic part of an index (ints, slices narrowing a dim, None, bools; an index
    tensor read as the whole dims it spans) selects a view other than all of `data`."""
    basic, tensors = [], iter(arrays)
    for item in spec if isinstance(spec, (tuple, list)) else (spec,):
        if item is ARRAY:
            array = next(tensors)._data
            basic += [slice(None)] * (array.ndim if array.dtype == np.bool_ else 1)
        else:
            basic.append(item)
    return not _is_whole(data, tuple(basic))


def _is_whole(data, idx):
    try:
        region = data[idx]
    except IndexError:
        return False
    if type(region) is not type(data):  # a scalar: x[()] of a 0-d x is x itself
        return data.ndim == 0
    return (region.shape == data.shape and region.strides == data.strides
            and region.__array_interface__["data"][0] == data.__array_interface__["data"][0])


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem


def _narrow_arg(value, arg):
    """narrow's start or length as an int: an int, or a 0-d integer tensor (not a bool, a
    float or a tensor of more elements, which torch refuses)."""
    if isinstance(value, Tensor):
        if value._data.ndim or value._data.dtype.kind not in "iu":
            raise RuntimeError(f"{arg} must be an 0-dim integral Tensor.")
        _interpreter.check_read(value, f"narrow's {arg}")  # (a plan would keep the trace's)
        return int(value._data)
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"narrow(): argument '{arg}' must be int, not {type(value).__name__}")
    return operator.index(value)


@tensor_method()
def narrow(input, dim, start, length):
    """The slice start:start+length along dim (a view).

    >>> import flowgrad as flow
    >>> flow.narrow(flow.arange(6).reshape(2, 3), 1, 1, 2)
    tensor([[1, 2],
            [4, 5]])
    """
    if input._data.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input._data.ndim, "narrow")
    size = input._data.shape[d]
    start, length = _narrow_arg(start, "start"), _narrow_arg(length, "length")
    # torch's checks and exception types: start in [-size, size] (IndexError), then length
    if not -size <= start <= size:
        raise IndexError(f"narrow: start out of range (expected to be in range of [{-size}, "
                         f"{size}], but got {start}) for dim {d} of size {size}")
    if start < 0:
        start += size
    if length < 0:
        raise RuntimeError(f"narrow(): length must be non-negative, got {length}")
    if start + length > size:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size "
                           f"({size}) of dim {d}")
    return _getitem(input, index=(slice(None),) * d + (slice(start, start + length),))


@tensor_method()
def select(input, dim, index):
    """The slice at `index` along `dim`, without that dim (a view)."""
    nd = input._data.ndim
    if nd == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, nd, "select")
    index = int_arg(index, "select", "index", 3)
    size = input._data.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{tuple(input.shape)} at dimension {d}")
    return _getitem(input, index=(slice(None),) * d + (index % size,))
