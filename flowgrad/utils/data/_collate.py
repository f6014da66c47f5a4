"""default_collate: turn a list of samples into a batch, as torch's does.

Tensors, NumPy arrays and numbers are stacked into tensors (Python floats as float64,
ints as int64); dicts, named tuples and sequences are collated field by field (tuples
become lists, as in torch); strings pass through as lists.

>>> import flowgrad as flow
>>> from flowgrad.utils.data import default_collate
>>> default_collate([(flow.zeros(2), 1), (flow.ones(2), 2)])
[tensor([[0., 0.],
        [1., 1.]]), tensor([1, 2])]
"""
from __future__ import annotations

import collections.abc as abc

import numpy as np

from ...tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_BAD = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        "found {}")


def _stack(arrays_or_tensors):
    from ...ops.shape import stack

    return stack(arrays_or_tensors, 0)


def default_collate(batch):
    """Collate a list of samples into a batch (see the module docstring)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack(list(batch))
    if isinstance(elem, np.ndarray) or isinstance(elem, np.generic):
        if elem.dtype.kind in "SaUO":
            raise TypeError(_BAD.format(elem.dtype))
        if isinstance(elem, np.ndarray) and elem.ndim > 0:
            return Tensor._wrap(np.stack([np.asarray(b) for b in batch]))
        return Tensor._wrap(np.array(batch, dtype=elem.dtype))
    if isinstance(elem, bool):
        return Tensor._wrap(np.array(batch, dtype=np.bool_))
    if isinstance(elem, float):
        return Tensor._wrap(np.array(batch, dtype=np.float64))
    if isinstance(elem, int):
        return Tensor._wrap(np.array(batch, dtype=np.int64))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated) if type(elem) is not dict else collated
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        size = len(elem)
        if not all(len(e) == size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = [list(s) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return [default_collate(s) for s in transposed]  # lists, as torch
        try:
            return type(elem)([default_collate(s) for s in transposed])
        except TypeError:
            return [default_collate(s) for s in transposed]
    raise TypeError(_BAD.format(type(elem)))


def default_convert(data):
    """Without batching (batch_size=None): NumPy arrays become tensors, containers are
    converted element-wise, everything else is left alone."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        if data.dtype.kind in "SaUO":
            return data
        return Tensor._wrap(np.asarray(data))
    if isinstance(data, abc.Mapping):
        converted = {k: default_convert(v) for k, v in data.items()}
        try:
            return type(data)(converted) if type(data) is not dict else converted
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
