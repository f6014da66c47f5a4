"""Indexing: `x[index]` and `x[index] = value` with every NumPy/torch index form (ints,
slices, None, Ellipsis, index tensors, bool masks), narrow, nonzero.

Basic indexing returns a view (shared storage and version counter); advanced indexing a
copy. Both have the same gradient: the output grad scattered back (summed on repeats).

>>> import flowgrad as flow
>>> x = flow.zeros(3, requires_grad=True)
>>> x[flow.tensor([0, 0, 2])].sum().backward(); x.grad
tensor([2., 0., 1.])
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..autograd import grad_mode
from ..autograd.interpreter import bump_version, inplace_update, self_overlapping, writable
from ..autograd.views import writable_alias
from ..tensor import Tensor, _wrap_dim, tensor_method
from .registry import op

__all__ = ["narrow", "select", "nonzero", "index_select", "masked_fill", "argwhere"]


def normalize_index(index, shape=None):
    """Tensors and lists in an index -> NumPy arrays; says whether indexing is advanced."""
    items = index if isinstance(index, tuple) else (index,)
    out, advanced = [], False
    for item in items:
        if isinstance(item, Tensor):
            item = item._data
            if item.dtype.kind not in "iub":
                raise IndexError(
                    f"tensors used as indices must be long, int, byte or bool tensors, got "
                    f"{item.dtype}")
            if item.dtype == np.uint8:  # torch reads byte tensors as masks
                item = item.astype(bool)
            if item.ndim == 0 and item.dtype.kind != "b":
                item = int(item)
            else:
                advanced = True
        elif isinstance(item, (list, np.ndarray)):
            if isinstance(item, list) and any(isinstance(i, Tensor) for i in item):
                item = [i._data if isinstance(i, Tensor) else i for i in item]
            item = np.asarray(item)
            if item.size == 0 and item.dtype.kind == "f":  # `x[[]]` selects nothing
                item = item.astype(np.int64)
            if item.dtype.kind not in "iub":
                raise IndexError(f"lists used as indices must hold ints or bools, got "
                                 f"{item.dtype}")
            advanced = True
        elif isinstance(item, slice) and item.step is not None and item.step <= 0:
            raise ValueError(f"step must be greater than zero, got slice {item}; use "
                             f"flip() to reverse a dim")
        elif isinstance(item, (bool, np.bool_)):
            advanced = True
        elif not (item is None or item is Ellipsis or isinstance(item, (int, slice,
                                                                          np.integer))):
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or "
                             f"bool tensors are valid indices, got {type(item).__name__}")
        out.append(item)
    return tuple(out), advanced


def _show(index):
    return tuple(f"tensor(shape={i.shape})" if isinstance(i, np.ndarray) else i
                 for i in index) if isinstance(index, tuple) else index


@op("getitem", is_view=True)
def _getitem(xp, x, *, index):
    out = x[index]
    if type(out) is not xp.ndarray:  # ints all the way down: a 0-d view, not a scalar copy
        out = x[(*index, Ellipsis) if type(index) is tuple else (index, Ellipsis)]
    return out


@op("index", save="attrs")  # the index arrays: a second backward raises, as torch's
def _index(xp, x, *, index):
    return x[index]


def _getitem_grad(ctx, dy):
    return _index_backward(dy, shape=ctx.input_shapes[0], index=ctx.index,
                           advanced=ctx.node.op is _index)


_getitem.grad(_getitem_grad)
_index.grad(_getitem_grad)


@op("index_backward")
def _index_backward(xp, dy, *, shape, index, advanced):
    dx = xp.zeros(shape, dy.dtype)
    if advanced:
        xp.add.at(dx, index, dy)  # repeated indices sum their grads
    else:
        dx[index] = dy
    return dx


@_index_backward.grad
def _(ctx, ddx):
    return (_index if ctx.advanced else _getitem)(ddx, index=ctx.index)


def _is_int(item):
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def torch_order(idx, shape):
    """NumPy counts an int beside an index array as advanced, which can move the result's
    dims; torch applies ints first as selects. Rewrite such an index as coordinates that
    give torch's result directly."""
    if not any(_is_int(i) for i in idx) or any(isinstance(i, (bool, np.bool_)) for i in idx):
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
        else:  # an index array (a bool mask spans one dim per mask dim)
            first.extend([slice(None)] * (item.ndim if item.dtype == np.bool_ else 1))
            then.append(item)
    positions = np.arange(int(np.prod(shape))).reshape(shape)
    try:
        positions = positions[tuple(first)][tuple(then)]
    except IndexError as e:
        raise IndexError(f"index {_show(idx)} is out of bounds for tensor of shape "
                         f"{tuple(shape)}: {e}") from None
    return np.unravel_index(positions, shape)


def getitem(x, index):
    """x[index] (Tensor.__getitem__): basic indexing gives a view, advanced (tensor/list/bool)
    indexing a copy."""
    idx, advanced = normalize_index(index)
    if advanced:
        idx = torch_order(idx, x._data.shape)
    if len(idx) == 1:
        idx = idx[0]
    fn = _index if advanced else _getitem
    return fn(x, index=idx)  # kernel errors come back naming the op and the input


@op("setitem", save="attrs")  # torch's CopySlices: a second backward through it raises
def _setitem(xp, x, value, *, index):
    out = x.copy()
    out[index] = value
    return out


@_setitem.grad
def _(ctx, dy):
    need = ctx.needs_input_grad
    dx = _setitem(dy, dy.new_zeros(()), index=ctx.index) if need[0] else None
    dv = None
    if need[1]:
        dv = getitem(dy, ctx.index)
        extra = len(ctx.input_shapes[1]) - dv._data.ndim
        if extra > 0:  # NumPy/torch drop a value's leading size-1 dims; put them back
            dv = dv.reshape((1,) * extra + dv._data.shape)
    return dx, dv


def setitem(x, index, value):
    """`x[index] = value` in place; recorded (x is rebased) when value or x needs grad."""
    idx, advanced = normalize_index(index)
    if advanced:
        idx = torch_order(idx, x._data.shape)
    if len(idx) == 1:
        idx = idx[0]
    if not isinstance(value, Tensor):
        value = Tensor._wrap(np.asarray(value, dtype=x._data.dtype))
    elif value._data.dtype != x._data.dtype:
        value = value.to(x.dtype)
    data = x._data
    if value is x and not advanced and _is_whole(data, idx):
        x.copy_(x)  # x[:] = x: torch's slice covering all of x is x itself
        return
    if not data.flags.writeable and not advanced:
        # an expand: torch refuses a slice assignment only where the written region overlaps
        # itself (index tensors go through index_put_, which writes anyway)
        try:
            writable(data[idx], "copy_")
        except IndexError:
            pass  # reported below, with the shapes
    if grad_mode.is_grad_enabled() and (value.requires_grad or x.requires_grad):
        if self_overlapping(data):  # an expand whose elements share memory
            if advanced:
                _write_base_elements(x, idx, value)
            else:  # write the region it selects (torch's x[i] = v is x[i].copy_(v))
                _getitem(x, index=idx).copy_(value)
            return
        inplace_update("setitem", x, lambda src: _setitem(src, value, index=idx),
                       value.requires_grad)
        return
    try:
        if not data.flags.writeable:
            data = writable_alias(data)
        data[idx] = value._data
    except (IndexError, ValueError) as e:
        raise type(e)(f"setitem: cannot assign value of shape {tuple(value.shape)} to index "
                      f"{_show(idx)} of tensor of shape {tuple(x.shape)}: {e}") from None
    bump_version(x)


def _write_base_elements(x, idx, value):
    """x[idx] = value for an expand x whose elements share memory, addressed to the elements
    of its base instead, so that each memory location is written, and differentiated, once."""
    info = x._view
    base = info.base
    positions = np.arange(base._data.size).reshape(base._data.shape)
    for view_op, attrs, index in info.chain:
        positions = view_op.kernel(np, positions, **attrs)
        if index is not None:
            positions = positions[index]
    positions = positions[idx]
    if value._data.shape != positions.shape:
        value = value.reshape(value._data.shape[-positions.ndim:] if positions.ndim else ())
        value = value.expand(positions.shape)
    if base._data.ndim == 0:  # every position is the one element: the last write wins
        if positions.size:
            setitem(base, (), value.reshape(-1)[-1])
        return
    setitem(base, np.unravel_index(positions, base._data.shape), value)


def _is_whole(data, idx):
    try:
        region = data[idx]
    except IndexError:
        return False
    return (region.shape == data.shape and region.strides == data.strides
            and region.__array_interface__["data"][0] == data.__array_interface__["data"][0])


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem


@tensor_method()
def narrow(input, dim, start, length):
    """The slice start:start+length along dim (a view).

    >>> import flowgrad as flow
    >>> flow.narrow(flow.arange(6).reshape(2, 3), 1, 1, 2)
    tensor([[1, 2],
            [4, 5]])
    """
    d = _wrap_dim(dim, input._data.ndim, "narrow")
    size = input._data.shape[d]
    if start < 0:
        start += size
    if not (0 <= start and start + length <= size and length >= 0):
        raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds dimension size "
                         f"({size}) of dim {d}")
    return _getitem(input, index=(slice(None),) * d + (slice(start, start + length),))


@tensor_method()
def select(input, dim, index):
    """The slice at `index` along `dim`, without that dim (a view)."""
    nd = input._data.ndim
    if nd == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, nd, "select")
    size = input._data.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{tuple(input.shape)} at dimension {d}")
    return _getitem(input, index=(slice(None),) * d + (int(index) % size,))


@op("nonzero", differentiable=False)
def _nonzero(xp, x):
    return xp.stack(xp.nonzero(x), axis=-1) if x.ndim else xp.zeros((int(x != 0), 0), xp.int64)


@tensor_method()
def nonzero(input, *, as_tuple=False):
    """Indices of non-zero elements: (n, ndim) int64, or a tuple of index vectors.

    >>> import flowgrad as flow
    >>> flow.nonzero(flow.tensor([[0, 1], [2, 0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    if as_tuple:
        return tuple(Tensor._wrap(i.astype(np.int64)) for i in np.nonzero(input._data))
    return _nonzero(input).to(_dt.int64)


@tensor_method()
def index_select(input, dim, index):
    """Entries of `input` along `dim` at the positions in the 1-D `index`.

    >>> import flowgrad as flow
    >>> flow.index_select(flow.arange(6).reshape(3, 2), 0, flow.tensor([2, 0]))
    tensor([[4, 5],
            [0, 1]])
    """
    d = _wrap_dim(dim, input._data.ndim, "index_select")
    if not isinstance(index, Tensor) or index._data.dtype.kind not in "iu":
        got = index.dtype if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"index_select(): Expected dtype int32 or int64 for index, got "
                           f"{got}")
    if index._data.ndim > 1:
        raise IndexError(f"index_select(): Index is supposed to be a vector, got shape "
                         f"{tuple(index.shape)}")
    idx, size = index._data, input._data.shape[d] if input._data.ndim else 1
    if idx.size and (idx.min() < 0 or idx.max() >= size):  # no wrapping of -1, as torch
        bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
        raise IndexError(f"index_select(): index out of range in self: index {bad} for dim {d} "
                         f"of size {size} (input shape {tuple(input.shape)}); indices must be "
                         f"in [0, {size - 1}]")
    return getitem(input, (slice(None),) * d + (index,))


@tensor_method()
def masked_fill(input, mask, value):
    """`value` where mask is True, input elsewhere (mask broadcasts).

    >>> import flowgrad as flow
    >>> x = flow.tensor([1.0, -2.0, 3.0])
    >>> x.masked_fill(x < 0, 0.0)
    tensor([1., 0., 3.])
    """
    from .elementwise import where

    if not isinstance(mask, Tensor) or mask._data.dtype != np.bool_:
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_fill only supports boolean masks, but got mask with dtype "
                           f"{got}; use mask.bool()")
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError(f"masked_fill only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value._data.ndim} dimension(s)")
        value = value.to(input.dtype)
    else:
        value = Tensor._wrap(np.asarray(value, input._data.dtype))
    return where(mask, value, input)


@tensor_method()
def argwhere(input):
    """Indices of the non-zero elements, (n, ndim) int64 (nonzero's matrix form)."""
    return nonzero(input)


def _masked_fill_(self, mask, value):
    from ..autograd.interpreter import run_inplace

    if (grad_mode.is_grad_enabled() and self_overlapping(self._data) and isinstance(mask, Tensor)
            and (self.requires_grad or isinstance(value, Tensor) and value.requires_grad)):
        setitem(self, mask.expand(self._data.shape), value)  # element by element of the base
        return self
    return run_inplace("masked_fill_", masked_fill, self, mask, value)


Tensor.masked_fill_ = _masked_fill_
