"""A tensor given another shape over its storage, as torch's resize_ and resize_output (the
resize of an `out=` argument of the wrong shape): contiguous from the same storage offset, in
the same memory when it holds enough elements, so views and aliases of the tensor see what is
written through it; a grown storage otherwise, the old bytes first. torch grows the storage
under every tensor over it; flowgrad's arrays cannot follow, so growing memory that other
tensors or arrays share is refused rather than leaving them on the old copy.

>>> import flowgrad as flow
>>> x = flow.zeros(3, 4)
>>> row = x[0]
>>> _ = x.resize_(2, 2).fill_(1.0)
>>> row
tensor([1., 1., 1., 1.])
"""
from __future__ import annotations

import math
import sys

import numpy as np

from ..autograd.inplace import bump_version
from ..autograd.views import shown_base
from ..device import STORAGES, array_module, memory_owner

# references to a storage array while `resize_storage` looks at it: the tensor's array (or
# its NumPy view's base), the local name and getrefcount's argument
_OWN_REFERENCES = 3


def resize_storage(tensor, shape, what):
    """Give `tensor` the contiguous shape `shape` in place (torch's resize_ without its
    checks, which the callers make): see the module's docstring."""
    n = math.prod(shape)
    root = memory_owner(tensor._data)
    flat_root = type(root) is np.ndarray and (root.flags.c_contiguous or root.flags.f_contiguous)
    if flat_root and (tensor.storage_offset() + n) * tensor._data.itemsize <= root.nbytes:
        # torch's: contiguous strides from the same storage offset, the storage kept (a view
        # stays one, and writes still reach every tensor over it)
        new = over_storage(root, tensor._data.dtype, tensor.storage_offset(), shape, None, what)
        STORAGES[id(root)] = root  # (its tensors report torch's storage offsets)
        bump_version(tensor)
        tensor._data = new
    elif flat_root and (tensor._view is None or shown_base(tensor) is None):
        if tensor._view is None and sys.getrefcount(root) > _OWN_REFERENCES:
            raise NotImplementedError(
                f"{what}: growing a tensor (shape {tuple(tensor.shape)} to {shape}) whose "
                f"memory other tensors or arrays share (its views, detach(), numpy()) is not "
                f"supported: torch grows the storage under all of them, flowgrad would leave "
                f"them on the old memory. Resize a .clone(), or pass an out= of the result's "
                f"shape")
        # torch's: a larger storage, the old bytes first, the tensor contiguous at its offset
        item, offset = tensor._data.itemsize, tensor.storage_offset()
        grown = np.zeros((offset + n) * item, np.uint8)
        grown[:root.nbytes] = root.ravel(order="K").view(np.uint8)
        STORAGES[id(grown)] = grown
        bump_version(tensor)
        tensor._data = grown.view(tensor._data.dtype)[offset:offset + n].reshape(shape)
        tensor._view = None  # (as_strided_'s hidden base: its storage is no longer this one)
    elif tensor._view is not None:
        raise NotImplementedError(
            f"{what}: growing a view of another tensor (shape {tuple(tensor.shape)} to "
            f"{shape}) past its storage is not supported (torch grows the storage under every "
            f"tensor over it); resize its base, or a .clone()")
    else:
        flat = tensor._data.ravel(order="K")  # (storage order)
        if n > flat.size:
            grown = array_module(flat).zeros((n,), flat.dtype)
            grown[:flat.size] = flat
            flat = grown
        bump_version(tensor)
        tensor._data = flat[:n].reshape(shape)


def over_storage(root, dtype, storage_offset, size, stride, what):
    """An array of `dtype` over the memory of array `root` (a storage) from element
    `storage_offset`: `size` and `stride` (contiguous by default), or the rest of it."""
    nbytes = root.nbytes
    if not (root.flags.c_contiguous or root.flags.f_contiguous):
        raise NotImplementedError(f"{what}: the storage array has gaps (strides "
                                  f"{root.strides}); set_ onto the tensor itself")
    memory = root.ravel(order="K").view(np.uint8)  # (its bytes in memory order: a view)
    offset = 0 if storage_offset is None else int(storage_offset)
    item = np.dtype(dtype).itemsize
    if size is None:
        size = (max(0, nbytes // item - offset),)
    size = tuple(int(n) for n in size)
    if stride is None:
        stride, step = [], 1
        for n in reversed(size):
            stride.insert(0, step)
            step *= max(n, 1)
    stride = tuple(int(n) for n in stride)
    if offset < 0 or len(stride) != len(size) or any(n < 0 for n in size):
        raise RuntimeError(f"{what}: storage offset {offset}, size {list(size)} and stride "
                           f"{list(stride)} do not make a tensor (non-negative offset and "
                           f"sizes, one stride per size)")
    extent = 0 if 0 in size else offset + 1 + sum((n - 1) * st for n, st in zip(size, stride))
    if extent * item > nbytes:
        raise RuntimeError(
            f"{what}: a tensor of size {list(size)} and stride {list(stride)} at storage "
            f"offset {offset} needs {extent * item} bytes, its storage has {nbytes} (torch "
            f"grows the storage; flowgrad does not: set_ onto a larger tensor)")
    if extent == 0:  # (no elements: NumPy keeps no place for them, see storage_offset)
        return memory[:0].view(dtype).reshape(size)
    new = np.ndarray(size, dtype, buffer=memory, offset=offset * item,
                     strides=tuple(st * item for st in stride))
    if any(n > 1 and st == 0 for n, st in zip(size, stride)):
        new.flags.writeable = False  # (torch refuses writes to overlapping elements, as expand)
    return new
