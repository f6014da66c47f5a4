"""Broadcasting helpers: broadcast_shapes, broadcast_tensors, and meshgrid (a grid of
broadcast coordinates).

>>> import flowgrad as flow
>>> a, b = flow.broadcast_tensors(flow.ones(2, 1), flow.zeros(3))
>>> a.shape, b.shape
(flowgrad.Size([2, 3]), flowgrad.Size([2, 3]))
"""
from __future__ import annotations

import numpy as np

from .._warn import warn_once
from ..errors import check_same_dtype
from ..tensor import Size
from .shape import expand

__all__ = ["broadcast_shapes", "broadcast_tensors", "meshgrid"]


def broadcast_shapes(*shapes):
    """The shape all `shapes` broadcast to."""
    if any(hasattr(s, "_data") for s in shapes):
        raise RuntimeError("broadcast_shapes: Input shapes should be of type ints, a tuple of "
                           "ints, or a list of ints, got a tensor; pass its .shape")
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    try:
        return Size(np.broadcast_shapes(*shapes))
    except ValueError:
        raise RuntimeError(f"broadcast_shapes: shapes {shapes} cannot be broadcast together; "
                           f"sizes must match or be 1 in each trailing dim") from None


def broadcast_tensors(*tensors):
    """The tensors expanded (views) to their common broadcast shape."""
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    try:
        shape = np.broadcast_shapes(*(t_._data.shape for t_ in ts))
    except ValueError:
        raise RuntimeError(f"broadcast_tensors: shapes {[tuple(t_.shape) for t_ in ts]} cannot "
                           f"be broadcast together") from None
    return tuple(t_ if t_._data.shape == shape else expand(t_, shape) for t_ in ts)  # torch's


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors: indexing='ij' (matrix) or 'xy' (Cartesian).

    >>> import flowgrad as flow
    >>> xs, ys = flow.meshgrid(flow.tensor([1, 2]), flow.tensor([3, 4, 5]), indexing="ij")
    >>> xs
    tensor([[1, 1, 1],
            [2, 2, 2]])
    >>> ys
    tensor([[3, 4, 5],
            [3, 4, 5]])
    """
    ts = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) \
        else list(tensors)
    if not ts:
        raise RuntimeError("meshgrid expects a non-empty TensorList: pass one or more 1-D "
                           "tensors")
    if indexing is None:
        warn_once("torch.meshgrid: in an upcoming release, it will be required to pass the "
                  "indexing argument.")
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"meshgrid: indexing must be one of 'xy' or 'ij', but received: "
                           f"{indexing}")
    for i, t_ in enumerate(ts):
        if t_._data.ndim > 1:
            raise RuntimeError(f"meshgrid: Expected 0D or 1D tensor in the tensor list but got "
                               f"{t_._data.ndim}D at position {i}")
        check_same_dtype("meshgrid", ts[0], **{f"tensor {i}": t_})
    ts = [t_.reshape(-1) for t_ in ts]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t_._data.shape[0] for t_ in ts)
    n = len(ts)
    out = [expand(t_.reshape((1,) * i + (-1,) + (1,) * (n - i - 1)), shape)
           for i, t_ in enumerate(ts)]
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)
