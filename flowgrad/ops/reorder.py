"""Reordering and repetition: flip, fliplr, flipud, roll, rot90, repeat, tile,
repeat_interleave.

>>> import flowgrad as flow
>>> flow.tensor([1, 2]).repeat(2)
tensor([1, 2, 1, 2])
"""
from __future__ import annotations

import numpy as np

from ..autograd.interpreter import check_read
from ..device import array_module
from ..errors import INT_INDEX_DTYPES, int_arg, int_args
from ..tensor import Tensor, _wrap_dim, tensor_method
from ..typed_tensors import contiguous_format
from .index_functions import index_select
from .layout import bool_bytes, empty_preserving, in_suggested_order, suggested_order
from .registry import op

__all__ = ["flip", "fliplr", "flipud", "roll", "rot90", "tile", "repeat_interleave"]


def _dims(dims, nd, name):
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    out = []
    for d in dims:  # (in order, as torch's: a repeat is refused before a later bad dim)
        out.append(_wrap_dim(d, nd, name))
        if out[-1] in out[:-1]:
            raise RuntimeError(f"{name}(): dim {out[-1]} appears multiple times in the list of "
                               f"dims {dims}")
    return tuple(out)


# ---- flip / roll / rot90 --------------------------------------------------------------------
@op("flip", jvp="linear")
def _flip(xp, x, *, dims):
    out = empty_preserving(xp, x)  # torch's flip returns a copy (not a view) laid out as x
    xp.copyto(out, xp.flip(x, dims))
    return bool_bytes(xp, out)


@_flip.grad
def flip_backward(ctx, dy):
    return _flip(dy, dims=ctx.dims)


def _varargs(args, keyword, op_name, name):
    """The ints given positionally (`x.flip(0, 1)`) or as torch's keyword (`dims=(0, 1)`)."""
    if keyword is None:
        return args
    if args:
        raise TypeError(f"{op_name}(): got '{name}' both positionally and as a keyword")
    return (keyword,)


@tensor_method()
def flip(input, *args, dims=None):
    """Reverse the order of elements along `dims` (a tuple, or ints as the method takes).

    >>> import flowgrad as flow
    >>> flow.arange(4).reshape(2, 2).flip(0)
    tensor([[2, 3],
            [0, 1]])
    >>> flow.flip(flow.arange(3), dims=(0,))
    tensor([2, 1, 0])
    """
    if not args and dims is None:  # (x.flip() reversing nothing would hide a mistake)
        raise TypeError('flip() missing 1 required positional arguments: "dims"')
    dims = _varargs(args, dims, "flip", "dims")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    nd = input._data.ndim
    d = _dims(dims, nd, "flip")
    d = d if nd else ()  # (a 0-d input: its dims -1 and 0 checked, nothing to reverse)
    return _flip(input, dims=d)


@tensor_method()
def fliplr(input):
    """Reverse dim 1 (left/right); input must be at least 2-D."""
    if input._data.ndim < 2:
        raise RuntimeError("fliplr(): Input must be >= 2-d.")
    return flip(input, 1)


@tensor_method()
def flipud(input):
    """Reverse dim 0 (up/down); input must be at least 1-D."""
    if input._data.ndim < 1:
        raise RuntimeError("flipud(): Input must be >= 1-d.")
    return flip(input, 0)


@op("roll", jvp="linear")
def _roll(xp, x, *, shifts, dims, order=None):
    # C order, as torch's, or the channels_last `order` x's strides suggest
    return in_suggested_order(xp, xp.roll(x, shifts, dims), order)


@_roll.grad
def roll_backward(ctx, dy):
    return _roll(dy, shifts=tuple(-s for s in ctx.shifts), dims=ctx.dims,
                 order=getattr(ctx, "order", None))


@tensor_method()
def roll(input, shifts, dims=None):
    """Shift elements along `dims` cyclically (over the flattened tensor when dims=None).

    >>> import flowgrad as flow
    >>> flow.roll(flow.arange(5), 2)
    tensor([3, 4, 0, 1, 2])
    """
    shifts = int_args(shifts, "roll", "shifts", 2)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll(): shifts {shifts} needs dims of the same length")
        return _roll(input.reshape(-1), shifts=shifts, dims=(0,)).reshape(input.shape)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll(): shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims: {len(dims)}")
    if input._data.size == 0:  # (torch's early return: an empty tensor's dims go unchecked)
        return input.clone()
    nd = input._data.ndim
    if nd == 0:  # (NumPy's roll would raise its AxisError)
        raise IndexError(f"roll(): Dimension specified as {dims[0]} but tensor has no "
                         f"dimensions; pass dims=None to roll a 0-d tensor")
    dims = tuple(_wrap_dim(d, nd, "roll") for d in dims)
    return _roll(input, shifts=tuple(int(s) for s in shifts), dims=dims,
                 order=suggested_order(input._data))


@tensor_method()
def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees k times in the plane of `dims` (from dims[0] towards dims[1])."""
    nd = input._data.ndim
    if len(dims) != 2:
        raise RuntimeError(f"rot90(): expected total rotation dims == 2, but got dims = "
                           f"{len(dims)}")
    if nd < 2:
        raise RuntimeError(f"rot90(): expected total dims >= 2, but got total dims = {nd}")
    a, b = _wrap_dim(dims[0], nd, "rot90"), _wrap_dim(dims[1], nd, "rot90")
    if a == b:
        raise RuntimeError(f"rot90(): expected rotation dims to be different, but got dim0 = "
                           f"{a} and dim1 = {b}")
    k = int_arg(k, "rot90", "k", 2) % 4
    if k == 1:
        return flip(input, b).transpose(a, b)
    if k == 2:
        return flip(input, (a, b))
    if k == 3:
        return flip(input, a).transpose(a, b)
    return input.clone(memory_format=contiguous_format)  # (C-ordered, as torch's)


# ---- repeat / tile ------------------------------------------------------------------------------
@op("repeat", jvp="linear", layout="contiguous")  # (np.tile keeps a layout torch does not)
def _repeat(xp, x, *, reps):
    lead = len(reps) - x.ndim
    return xp.tile(x.reshape((1,) * lead + x.shape), reps)


@_repeat.grad
def repeat_backward(ctx, dy):
    # view the output as (r0, s0, r1, s1, ...) and sum the copies
    reps = ctx.reps
    src = (1,) * (len(reps) - len(ctx.input_shapes[0])) + tuple(ctx.input_shapes[0])
    inter = tuple(v for r, s in zip(reps, src) for v in (r, s))
    return dy.reshape(inter).sum(tuple(range(0, len(inter), 2))).reshape(src)


@tensor_method("repeat")
def repeat(input, *sizes, repeats=None):
    """Tile the tensor: sizes[i] copies along dim i (sizes may add leading dims).

    >>> import flowgrad as flow
    >>> flow.tensor([1, 2]).repeat(repeats=(2, 1))
    tensor([[1, 2],
            [1, 2]])
    """
    if not sizes and repeats is None:
        raise TypeError('repeat() missing 1 required positional arguments: "repeats" (give a '
                        'count per dim, e.g. x.repeat(2, 1))')
    sizes = _varargs(sizes, repeats, "repeat", "repeats")
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    sizes = int_args(sizes, "repeat", "repeats", 1)
    if len(sizes) < input._data.ndim:
        raise RuntimeError(f"repeat(): Number of dimensions of repeat dims ({len(sizes)}) can "
                           f"not be smaller than number of dimensions of tensor "
                           f"({input._data.ndim})")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"repeat(): repeats must be non-negative, got {list(sizes)}")
    return _repeat(input, reps=sizes)


def tile(input, dims):
    """repeat, with `dims` padded with leading 1s when shorter than input.ndim.

    >>> import flowgrad as flow
    >>> flow.tile(flow.tensor([1, 2]), (2, 2))
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    dims = int_args(dims, "tile", "dims", 2)
    dims = (1,) * (input._data.ndim - len(dims)) + dims
    return repeat(input, dims)


@tensor_method("tile")
def _tile_method(self, *dims, **keywords):
    """`x.tile(2, 2)`, `x.tile((2, 2))` or `x.tile(dims=(2, 2))`: torch's method takes each
    (its function a sequence)."""
    if keywords:
        return tile(self, *dims, **keywords)
    return tile(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims)


def _check_repeats_dtype(counts):
    if counts.dtype not in INT_INDEX_DTYPES:  # torch's kernel has these two
        raise NotImplementedError(f"repeat_interleave(): repeats must be an int64 or int32 "
                                  f"tensor, got {counts.dtype}; convert it with .long()")


def _check_output_size(output_size, size):
    if output_size is not None and output_size != size:  # (torch's message)
        raise RuntimeError(f"repeat_interleave(): allocated size does not match required size "
                           f"(output_size={output_size}, the repeats sum to {size})")


@tensor_method()
def repeat_interleave(input=None, repeats=None, dim=None, *, output_size=None):
    """Repeat each element `repeats` times along `dim` (flattened when dim=None).
    `repeat_interleave(counts)` alone gives [0]*counts[0] + [1]*counts[1] + ...

    >>> import flowgrad as flow
    >>> flow.repeat_interleave(flow.tensor([1, 2]), 2)
    tensor([1, 1, 2, 2])
    """
    if input is None and isinstance(repeats, Tensor):  # repeat_interleave(repeats=counts)
        input, repeats = repeats, None
    if not isinstance(input, Tensor):
        raise TypeError(f"repeat_interleave(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    xp = array_module(input._data)
    # (the output's size comes from the repeats' values: a plan could not repeat it)
    if repeats is None:  # the index form
        check_read(input, "repeat_interleave's repeats")
        counts = input._data
        _check_repeats_dtype(counts)
        if counts.ndim != 1:
            raise RuntimeError("repeat_interleave(): repeats must be a 1-D integer tensor")
        if (counts < 0).any():  # (NumPy's repeat would raise a ValueError)
            raise RuntimeError("repeat_interleave(): repeats can not be negative")
        out = xp.repeat(xp.arange(counts.size), counts).astype(counts.dtype)
        _check_output_size(output_size, out.size)
        return Tensor._wrap(out)
    if dim is not None and not input._data.ndim:  # (torch: no dim is valid for a 0-d input)
        raise IndexError(f"repeat_interleave: Dimension specified as {dim} but tensor has no "
                         f"dimensions; leave dim=None for a 0-d input")
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _wrap_dim(dim, input._data.ndim, "repeat_interleave")
    n = x._data.shape[d] if x._data.ndim else 1
    if isinstance(repeats, Tensor):
        check_read(repeats, "repeat_interleave's repeats")
    reps = repeats._data if isinstance(repeats, Tensor) else xp.asarray(repeats)
    if isinstance(repeats, Tensor):
        _check_repeats_dtype(reps)
    if reps.ndim > 1 or (reps.ndim == 1 and reps.size not in (1, n)):
        raise RuntimeError(f"repeat_interleave(): repeats must have the same size as input "
                           f"along dim {d}: got {reps.size} repeats for size {n}")
    if (reps < 0).any():
        raise RuntimeError("repeat_interleave(): repeats can not be negative")
    idx = xp.repeat(xp.arange(n), xp.broadcast_to(reps.reshape(-1), (n,)))
    _check_output_size(output_size, idx.size)
    return index_select(x, d, Tensor._wrap(idx.astype(np.int64)))
