"""as_strided and its family: any sizes, strides and offset into a tensor's storage.

A tensor's storage is its root base's array (the tensor itself when it is no view), its
positions counted in elements from the base's first one (`Tensor.storage_offset`). A
*geometry* is `(size, stride, offset)` in those positions, always plain tuples and ints.

Gradients are one linear op, `strided_regather`: scatter-add into a zero buffer at one
geometry, optionally divide by how often each position occurs in another (an expanded input
shares positions) or zero the positions of a third, and read at a last one. Its adjoint is
itself with the scatter and gather geometries swapped, so every order of derivative is
again that op.

>>> import flowgrad as flow
>>> flow.as_strided(flow.arange(6.0), (2, 2), (1, 2), 1)
tensor([[1., 3.],
        [2., 4.]])
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..autograd import grad_mode
from ..autograd import views as _views
from ..autograd.inplace import bump_version, check_inplace
from ..autograd.meta import carry_over_layout
from ..autograd.views import ViewInfo, mark_view
from ..device import STORAGES, memory_owner
from ..tensor import Tensor, tensor_method
from ..typed_tensors import contiguous_format
from .registry import op

__all__ = ["as_strided", "as_strided_copy", "as_strided_scatter"]

# ---- geometry ------------------------------------------------------------------------------
def _positions(xp, geometry):
    """The storage position of every element of `geometry`, as an int64 array of its size."""
    size, stride, offset = geometry
    pos = xp.asarray(offset, dtype=xp.int64)
    for n, s in zip(size, stride):
        pos = pos[..., None] + xp.arange(n, dtype=xp.int64) * s
    return pos


def _needed(size, stride, offset):
    """Storage elements a geometry needs (torch's computeStorageNbytes, in elements)."""
    if any(n == 0 for n in size):
        return 0
    return offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))


def _maybe_overlapping(size, stride):
    """torch's _maybe_overlapping_memory: whether two elements might share a position."""
    dims = sorted((s, n) for n, s in zip(size, stride) if n > 1)
    reach = 0
    for s, n in dims:
        if s <= reach:
            return True
        reach += (n - 1) * s
    return False


def _storage(tensor):
    """(root base, storage length in elements): the root's array from its first element to
    its last byte (a strided root, as from_numpy of a slice, spans its gaps too)."""
    view = tensor._view
    root = tensor if view is None else view.base
    data = root._data
    if data.size == 0:
        return root, 0
    item = data.itemsize
    if type(data) is np.ndarray:
        owner = memory_owner(data)
        if STORAGES.get(id(owner)) is owner:  # (a detached view, a set_ or resized tensor and
            #                              their views: the whole registered array, as torch's)
            return root, owner.nbytes // tensor._data.itemsize
    # (in the tensor's elements: .real/.imag of a complex root have half its size)
    return root, (1 + sum((n - 1) * (s // item) for n, s in zip(data.shape, data.strides)
                          if s > 0)) * item // tensor._data.itemsize


def _contiguous(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _source(tensor):
    """(root base, storage length, tensor's geometry); under vmap (a batched tensor: no root)
    each example is its own contiguous storage, as torch's batching rule has it."""
    shape = tuple(tensor._data.shape)
    if getattr(tensor, "_phys", None) is not None:
        return None, math.prod(shape), (shape, _contiguous(shape), 0)
    root, length = _storage(tensor)
    return root, length, (shape, tensor.stride(), tensor.storage_offset())


def _owner(x):
    """The array that owns x's memory: x's bases followed through arrays and the interface
    objects views are made of (this module's, `writable_alias`'s)."""
    while True:
        base = x.base
        if not isinstance(base, np.ndarray):
            base = getattr(base, "base", None) if hasattr(base, "__array_interface__") else None
            if not isinstance(base, np.ndarray):
                return x
        x = base


def _bounds(a):
    """The first and one-past-last byte address of array a's elements."""
    ptr = a.__array_interface__["data"][0]
    if a.size == 0:
        return ptr, ptr
    reach = [(n - 1) * s for n, s in zip(a.shape, a.strides)]
    return (ptr + sum(r for r in reach if r < 0),
            ptr + sum(r for r in reach if r > 0) + a.itemsize)


class _Interface:
    """Hands NumPy an array interface (and keeps the memory's owner alive)."""

    def __init__(self, interface, owner):
        self.__array_interface__ = interface
        self.base = owner


def _storage_view(x, source, size, stride, offset):
    """The array over x's storage at (size, stride, offset), where x's memory is laid out as
    `source` = (x's size, stride, storage offset, storage length) says and the whole storage
    lies inside the memory x belongs to; None otherwise (x is a copy of the input in another
    layout, a gradient or a tangent: the caller falls back to a buffer)."""
    xsize, xstride, xoffset, length = source
    if not isinstance(x, np.ndarray) or x.shape != tuple(xsize) or x.size == 0:
        return None
    item = x.itemsize
    if any(n > 1 and s != t * item for n, s, t in zip(x.shape, x.strides, xstride)):
        return None
    owner = _owner(x)
    low, high = _bounds(owner)
    start = x.__array_interface__["data"][0] - xoffset * item
    if start < low or start + length * item > high:
        return None
    # torch refuses in-place writes (but fill_) to a view with a stride-0 dim, as flowgrad
    # does for a read-only expand; any other geometry is written like torch, overlap or not
    readonly = not owner.flags.writeable or any(n > 1 and s == 0 for n, s in zip(size, stride))
    interface = dict(x.__array_interface__)
    interface.update(data=(start + offset * item, readonly), shape=tuple(size),
                     strides=tuple(s * item for s in stride))
    interface.pop("mask", None)
    view = np.asarray(_Interface(interface, x))
    # (an array interface spells bfloat16 as raw bytes, 'V2': its dtype is put back)
    return view if view.dtype == x.dtype else view.view(x.dtype)


def _buffer(xp, x, geometry, length):
    """A zero storage of `length` elements with x written at its geometry, and which positions
    x covers."""
    buf = xp.zeros(length, x.dtype)
    pos = _positions(xp, geometry)
    buf[pos] = x
    covered = xp.zeros(length, bool)
    covered[pos] = True
    return buf, covered


# ---- ops -----------------------------------------------------------------------------------
@op("as_strided", jvp="linear", is_view=True, complex=True)
def _as_strided(xp, x, *, size, stride, offset, source):
    view = _storage_view(x, source, size, stride, offset)
    if view is not None:
        return view
    # x is not the storage's memory (a gradient, a tangent, a copy in another layout, an
    # nn.Graph value): its own elements are all of the storage that is known here
    buf, covered = _buffer(xp, x, source[:3], source[3])
    pos = _positions(xp, (size, stride, offset))
    if not bool(covered[pos].all()):
        raise RuntimeError(
            f"as_strided: sizes {list(size)}, strides {list(stride)}, storage offset {offset} "
            f"read storage elements outside the input (shape {tuple(x.shape)}), and the input "
            f"here is a copy, not its storage (a gradient, a tangent or an nn.Graph value); "
            f"read only the input's own elements, or call as_strided on the base tensor")
    return buf[pos]


@_as_strided.grad
def as_strided_backward(ctx, dy):
    size, stride, offset = ctx.size, ctx.stride, ctx.offset
    inp = ctx.source[:3]
    if 0 in size:  # torch's: zeros with no history (under create_graph too)
        return dy.new_zeros(inp[0])
    shift = min(inp[2], offset)  # torch's shared_offset: the buffer starts at the lower one
    out = (size, stride, offset - shift)
    inp = (inp[0], inp[1], inp[2] - shift)
    length = max(_needed(*out), _needed(*inp))
    divide = inp if _maybe_overlapping(inp[0], inp[1]) else None
    return _regather(dy, length=length, scatter=out, gather=inp, divide=divide, zero=None)


@op("strided_regather", jvp="linear", complex=True)
def _regather(xp, g, *, length, scatter, gather, divide, zero):
    """Scatter-add g at geometry `scatter` into `length` zeros, divide each position by how
    often `divide` holds it (0 where never), zero the positions of `zero`, read at `gather`."""
    buf = xp.zeros(length, g.dtype)
    xp.add.at(buf, _positions(xp, scatter).reshape(-1), g.reshape(-1))
    if divide is not None:
        count = xp.bincount(_positions(xp, divide).reshape(-1), minlength=length)
        buf = xp.where(count > 0, buf / xp.maximum(count, 1), 0).astype(g.dtype, copy=False)
    if zero is not None:
        buf[_positions(xp, zero)] = 0
    return buf[_positions(xp, gather)]


@_regather.grad
def strided_regather_backward(ctx, dg):
    # G_a Z D S_b with Z, D diagonal: its adjoint is G_b D Z S_a
    return _regather(dg, length=ctx.length, scatter=ctx.gather, gather=ctx.scatter,
                     divide=ctx.divide, zero=ctx.zero)


@op("as_strided_scatter", jvp="linear", complex=True)
def _as_strided_scatter(xp, x, src, *, length, target, region):
    """x's storage with src written at `region`, read at x's own geometry `target`."""
    buf = xp.zeros(length, x.dtype)
    buf[_positions(xp, target)] = x
    buf[_positions(xp, region)] = src
    size, stride, offset = target
    # torch clones the whole storage, so the result keeps the input's strides
    out = xp.lib.stride_tricks.as_strided(buf[offset:], size, [s * buf.itemsize for s in stride])
    return out if out.dtype == buf.dtype else out.view(buf.dtype)  # (bfloat16: see above)


@_as_strided_scatter.grad
def as_strided_scatter_backward(ctx, dy):
    need = ctx.needs_input_grad
    target, region, length = ctx.target, ctx.region, ctx.length
    return (_regather(dy, length=length, scatter=target, gather=target, divide=None,
                      zero=region) if need[0] else None,
            _regather(dy, length=length, scatter=target, gather=region, divide=None,
                      zero=None) if need[1] else None)


# ---- the public functions --------------------------------------------------------------------
def _ints(name, what, values):
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{name}(): argument '{what}' must be a tuple of ints, but got "
                        f"{values!r}") from None


def _check(name, size, stride, offset, length, itemsize):
    """torch's setStrided checks, in its order, with its messages (prefixed by the op)."""
    size, stride = _ints(name, "size", size), _ints(name, "stride", stride)
    if len(size) != len(stride):
        raise RuntimeError(f"{name}: mismatch in length of strides and shape (sizes "
                           f"{list(size)}, strides {list(stride)})")
    if any(s < 0 for s in stride):
        prefix = "" if name == "as_strided" else f"{name}: "  # torch's text names as_strided
        raise RuntimeError(f"{prefix}as_strided: Negative strides are not supported at the "
                           f"moment, got strides: {list(stride)}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"{name}: Storage size calculation overflowed with sizes="
                           f"{list(size)} and strides={list(stride)}")
    if offset < 0:
        raise RuntimeError(f"{name}: Tensor: invalid storage offset {offset}")
    needed = _needed(size, stride, offset)
    if needed > length:
        raise RuntimeError(
            f"{name}: setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
            f"{offset}, and itemsize {itemsize} requiring a storage size of "
            f"{needed * itemsize} are out of bounds for storage of size {length * itemsize}")
    return size, stride


def _offset(name, storage_offset, default):
    if storage_offset is None:
        return default
    try:
        return operator.index(storage_offset)
    except TypeError:
        raise TypeError(f"{name}(): argument 'storage_offset' must be an int or None, but got "
                        f"{type(storage_offset).__name__}") from None


@tensor_method()
def as_strided(input, size, stride, storage_offset=None):
    """A view of input's storage with the given sizes, strides and offset, in elements of the
    storage (input's base when input is a view); the offset defaults to input's own.

    >>> import flowgrad as flow
    >>> b = flow.arange(9.0)
    >>> v = b[2:].as_strided((2, 2), (3, 1))   # from storage position 2
    >>> v
    tensor([[2., 3.],
            [5., 6.]])
    >>> b.as_strided((3,), (4,), 0).storage_offset(), v.storage_offset()
    (0, 2)
    """
    root, length, (shape, strides, mine) = _source(input)
    offset = _offset("as_strided", storage_offset, mine)
    size, stride = _check("as_strided", size, stride, offset, length, input._data.itemsize)
    out = _as_strided(input, size=size, stride=stride, offset=offset,
                      source=(shape, strides, mine, length))
    if root is None:
        return out
    if out._view is None and (out._data.size == 0
                              or np.may_share_memory(out._data, root._data)
                              or type(out._data) is np.ndarray and  # (past a resized root)
                              _owner(out._data) is _owner(root._data)):
        mark_view(input, out, _as_strided, {}, None)  # outside input's own bytes: a view too
    if out._view is not None:
        # replayed from the root (in-place writes, regenerated histories), as torch replays
        # any view: the storage is the same whatever path led to input
        info = out._view
        step = {"size": size, "stride": stride, "offset": offset,
                "source": (tuple(root._data.shape), root.stride(),
                           root.storage_offset(), length)}
        out._view = ViewInfo(info.base, ((_as_strided, step, None),), info.creation,
                             info.version)
    return out


def _as_strided_(self, size, stride, storage_offset=None):
    """In place: self becomes `self.as_strided(size, stride, storage_offset)`, the same
    storage at a new geometry (its version bumped), as torch's as_strided_.

    >>> import flowgrad as flow
    >>> x = flow.arange(6.0)
    >>> x.as_strided_((2, 2), (1, 2), 1)
    tensor([[1., 3.],
            [2., 4.]])
    >>> x.storage_offset(), x.stride()
    (1, (1, 2))
    """
    check_inplace("as_strided_", self)
    new = as_strided(self, size, stride, storage_offset)
    info = new._view
    if info is None:  # a batched tensor (as torch's vmap, which refuses in-place views)
        raise RuntimeError(f"as_strided_: changing the geometry in place of a tensor with no "
                           f"storage of its own here (shape {tuple(self.shape)}: under vmap) "
                           f"is not supported; use x = x.as_strided(...)")
    if self._view is None:
        # the old self is the storage's owner: a hidden base keeps its array and history, so
        # storage_offset(), later as_strided calls and in-place writes see the storage
        base = Tensor._wrap(self._data)
        base._meta, base._grad_fn, base._counter = self._meta, self._grad_fn, self._counter
        _views.hide_base(base, self)  # (its _base: None, as torch's)
    else:
        base = info.base
    if self._meta is not None and new._meta is not None:
        carry_over_layout(self._meta, new._meta, self)
    self._data, self._meta, self._grad_fn = new._data, new._meta, new._grad_fn
    bump_version(self)
    creation = info.creation
    self._view = ViewInfo(base, info.chain, creation, self._counter.value)
    return self


Tensor.as_strided_ = _as_strided_


def as_strided_copy(input, size, stride, storage_offset=None):
    """input.as_strided(size, stride, storage_offset), copied into a new contiguous tensor.

    >>> import flowgrad as flow
    >>> flow.as_strided_copy(flow.arange(4.0), (2, 2), (1, 1)).is_contiguous()
    True
    """
    return as_strided(input, size, stride, storage_offset).clone(
        memory_format=contiguous_format)


@tensor_method()
def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of input's storage with src written at (size, stride, storage_offset), seen at
    input's geometry (torch.as_strided_scatter); the offset defaults to input's own.

    >>> import flowgrad as flow
    >>> flow.as_strided_scatter(flow.zeros(2, 3), flow.ones(3), (3,), (2,), 0)
    tensor([[1., 0., 1.],
            [0., 1., 0.]])
    """
    if not isinstance(src, Tensor):
        raise TypeError(f"as_strided_scatter(): argument 'src' must be Tensor, not "
                        f"{type(src).__name__}")
    if input.requires_grad and grad_mode._state.enabled and not input.is_contiguous():
        raise RuntimeError(
            f"as_strided_scatter: an input that requires grad must be contiguous, as torch's "
            f"(input shape {tuple(input.shape)}, strides {input.stride()}); call "
            f".contiguous() on it first")
    _, length, target = _source(input)
    if any(n > 1 and s == 0 for n, s in zip(target[0], target[1])):
        # elements share positions (an expand): torch scatters into a plain clone of it
        input = input.clone(memory_format=contiguous_format)
        _, length, target = _source(input)
    offset = _offset("as_strided_scatter", storage_offset, target[2])
    size, stride = _check("as_strided_scatter", size, stride, offset, length,
                          input._data.itemsize)
    if tuple(src.shape) != size:
        raise RuntimeError(f"as_strided_scatter: expected src to have a size equal to the "
                           f"slice of self. src size = {list(src.shape)}, slice size = "
                           f"{list(size)}")
    if src.dtype != input.dtype:
        src = src.to(input.dtype)  # torch copies src into the slice: cast to input's dtype
    return _as_strided_scatter(input, src, length=length, target=target,
                               region=(size, stride, offset))


def _storage_chain(base, view):
    """A view chain of one as_strided step that finds `view`'s elements in `base`'s storage at
    base's current layout (`views.sync_view`, after base's layout changed in place)."""
    _, length, _ = _source(base)
    step = {"size": tuple(view.shape), "stride": view.stride(),
            "offset": view.storage_offset(),
            "source": (tuple(base._data.shape), base.stride(), 0, length)}
    return ((_as_strided, step, None),)


_views.STORAGE_CHAIN = _storage_chain
