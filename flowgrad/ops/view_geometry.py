"""The strides torch gives a view's size-1 dims, where NumPy gives others.

A size-1 dim's stride never moves to another element, so NumPy picks its own (a new axis
gets 0, a reshape the extent of the dims after it); torch's view ops each have a rule
(ATen's computeStride, inferUnsqueezeGeometry, inferSqueezeGeometry, inferExpandGeometry).
It matters past `stride()`: preserve_format copies, the `*_like` factories and the
iterator's result layouts sort dims by every stride, and a later view's strides follow it.
Strides here are in bytes, as NumPy's.

>>> view_strides((4, 3), (8, 32), (4, 3, 1), 8)   # a transposed (3, 4): view(4, 3, 1)
(8, 32, 32)
>>> unsqueeze_strides((4, 3), (8, 32), 2, 8)      # its unsqueeze(-1)
(8, 32, 8)
"""
from __future__ import annotations

import numpy as np


def view_strides(shape, strides, new_shape, itemsize):
    """The strides of torch's view of (`shape`, `strides`) as `new_shape` (computeStride),
    None where torch cannot view it (its reshape copies, its view raises)."""
    if not shape:
        return (itemsize,) * len(new_shape)
    new = [0] * len(new_shape)
    view_d, base, numel, view_numel = len(new_shape) - 1, strides[-1], 1, 1
    for d in range(len(shape) - 1, -1, -1):
        numel *= shape[d]
        if d == 0 or shape[d - 1] != 1 and strides[d - 1] != numel * base:
            while view_d >= 0 and (view_numel < numel or new_shape[view_d] == 1):
                new[view_d] = view_numel * base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != numel:
                return None
            if d > 0:
                base, numel, view_numel = strides[d - 1], 1, 1
    return tuple(new) if view_d == -1 else None


def unsqueeze_strides(shape, strides, dim, itemsize):
    """torch's unsqueeze(dim): the new dim's stride is the extent of the dim it goes before
    (an element's size at the end)."""
    new = shape[dim] * strides[dim] if dim < len(shape) else itemsize
    return tuple(strides[:dim]) + (new,) + tuple(strides[dim:])


def expand_strides(shape, strides, target, itemsize=1):
    """The strides of torch's expand of (`shape`, `strides`) to `target` (inferExpandGeometry:
    an expanded dim's stride 0, a new leading dim's the next dim's extent, an element's size
    for the last; every stride 0 for a 0-d tensor's)."""
    out = [0] * len(target)
    if not shape:
        return tuple(out)
    lead = len(target) - len(shape)
    for i in range(len(target) - 1, -1, -1):
        d = i - lead
        size = shape[d] if d >= 0 else 1
        out[i] = 0 if size != target[i] else strides[d] if d >= 0 else (
            target[i + 1] * out[i + 1] if i + 1 < len(target) else itemsize)
    return tuple(out)


def index_strides(shape, strides, index, itemsize):
    """The strides of torch's basic index `index` (ints, slices, None, Ellipsis: a tuple) of
    (`shape`, `strides`), applied item by item as torch's applySlicing: None unsqueezes the
    dims as they stand then (a later slice has not cut the next dim yet)."""
    ndim, shape, strides = len(shape), list(shape), list(strides)
    dim = 0
    for item in index:
        if item is None:
            strides.insert(dim, shape[dim] * strides[dim] if dim < len(shape) else itemsize)
            shape.insert(dim, 1)
            dim += 1
        elif item is Ellipsis:
            dim += ndim - sum(1 for i in index if not (i is None or i is Ellipsis))
        elif type(item) is slice:
            start, stop, step = item.indices(shape[dim])
            shape[dim] = len(range(start, stop, step))
            strides[dim] *= step
            dim += 1
        else:  # an int: a select
            del shape[dim], strides[dim]
    return tuple(strides)


def expanded(xp, array, shape):
    """`array` broadcast to `shape` with torch's expand strides (a new leading size-1 dim's
    is the next dim's extent, where NumPy's broadcast_to gives 0)."""
    if array.shape == tuple(shape):
        return array
    view = xp.broadcast_to(array, shape)
    return restride(xp, view, expand_strides(array.shape, array.strides, shape, array.itemsize))


def reshape_view(xp, x, shape, squeeze=None, unsqueeze=None):
    """x in `shape`; a view with torch's strides for size-1 dims: view's (computeStride), or
    squeeze's (the dims `squeeze` dropped) or unsqueeze's (a new dim at `unsqueeze`), those
    two where x's shape still fits them (a graph may have merged reshapes)."""
    y = x.reshape(shape)
    if 1 not in shape or not y.size or 1 not in x.shape and x.flags.c_contiguous:
        return y  # (NumPy's strides are torch's: a row-major x's reshape is row-major)
    shp, st = x.shape, x.strides
    if unsqueeze is not None and shp[:unsqueeze] + (1,) + shp[unsqueeze:] == shape:
        strides = unsqueeze_strides(shp, st, unsqueeze, x.itemsize)
    elif squeeze is not None and all(shp[a] == 1 for a in squeeze) and len(shp) - len(
            squeeze) == len(shape):
        strides = tuple(s for a, s in enumerate(st) if a not in squeeze)
    else:
        strides = view_strides(shp, st, shape, x.itemsize)
        if strides is None:  # torch copies (NumPy may view: a stride-0 dim of size 1)
            return y if y.base is None else y.copy()
    if y.base is None and type(x) is xp.ndarray:  # NumPy copied where torch views
        return xp.lib.stride_tricks.as_strided(x, shape, strides, writeable=x.flags.writeable)
    return restride(xp, y, strides)


def restride(xp, view, strides):
    """`view` with `strides` (differing from its own in size-1 dims only): itself when they
    agree. A meta array keeps its own."""
    if view.strides == strides or type(view) is not np.ndarray:
        return view
    flags = view.flags
    if flags.c_contiguous or flags.f_contiguous:  # (a buffer from its first element: fast)
        return np.ndarray(view.shape, view.dtype, view, 0, strides)
    return xp.lib.stride_tricks.as_strided(view, view.shape, strides, writeable=flags.writeable)
