"""Stacks of 1-D/2-D pieces: atleast_Nd and the h/v/d/column stacks, all joined by `cat`.

>>> import flowgrad as flow
>>> flow.vstack([flow.tensor([1, 2]), flow.tensor([3, 4])])
tensor([[1, 2],
        [3, 4]])
"""
from __future__ import annotations

from ..tensor import Tensor
from .shape import cat, not_a_sequence

__all__ = ["hstack", "vstack", "row_stack", "dstack", "column_stack", "atleast_1d",
           "atleast_2d", "atleast_3d"]


def atleast_1d(*tensors):
    """Each tensor with at least 1 dim (scalars become shape (1,))."""
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = [t_.reshape(1) if t_._data.ndim == 0 else t_ for t_ in ts]
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else tuple(out)


def atleast_2d(*tensors):
    """Each tensor with at least 2 dims (1-D becomes a row)."""
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = [t_.reshape((1,) * (2 - t_._data.ndim) + t_._data.shape) if t_._data.ndim < 2
           else t_ for t_ in ts]
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else tuple(out)


def atleast_3d(*tensors):
    """Each tensor with at least 3 dims ((n,) -> (1, n, 1), (m, n) -> (m, n, 1))."""
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = []
    for t_ in ts:
        shp = t_._data.shape
        new = {0: (1, 1, 1), 1: (1,) + shp + (1,), 2: shp + (1,)}.get(len(shp), shp)
        out.append(t_.reshape(new) if new != shp else t_)
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else tuple(out)


def _seq(tensors, name):
    not_a_sequence(tensors, name)
    if not tensors:
        raise RuntimeError(f"{name}(): expected a non-empty list of Tensors")
    return list(tensors)


def hstack(tensors, *, out=None):
    """cat along dim 1 (dim 0 for 1-D tensors).

    >>> import flowgrad as flow
    >>> flow.hstack([flow.tensor([1, 2]), flow.tensor([3])])
    tensor([1, 2, 3])
    """
    ts = atleast_1d(_seq(tensors, "hstack"))
    return cat(ts, 0 if ts[0]._data.ndim == 1 else 1, out=out)


def vstack(tensors, *, out=None):
    """cat of the tensors as rows (1-D tensors become (1, n))."""
    return cat(atleast_2d(_seq(tensors, "vstack")), 0, out=out)


row_stack = vstack


def dstack(tensors, *, out=None):
    """cat along dim 2 of the tensors made at least 3-D."""
    return cat(atleast_3d(_seq(tensors, "dstack")), 2, out=out)


def column_stack(tensors, *, out=None):
    """The tensors as columns (0-D/1-D become (n, 1)), joined along dim 1."""
    ts = [t_.reshape(t_._data.size, 1) if t_._data.ndim <= 1 else t_
          for t_ in _seq(tensors, "column_stack")]
    return cat(ts, 1, out=out)
