"""default_collate: turn a list of samples into a batch, as torch's does.

Tensors, NumPy arrays and numbers are stacked into tensors (Python floats as float64,
ints as `tensor(batch)` infers); dicts, named tuples and sequences are collated field by
field (tuples become lists, as in torch; other containers keep their type); strings pass
through as lists. `collate(batch, collate_fn_map=...)` is the extensible form: a map from
element type to a function `fn(batch, *, collate_fn_map)`.

>>> import flowgrad as flow
>>> from flowgrad.utils.data import default_collate
>>> default_collate([(flow.zeros(2), 1), (flow.ones(2), 2)])
[tensor([[0., 0.],
        [1., 1.]]), tensor([1, 2])]
"""
from __future__ import annotations

import collections.abc as abc
import copy
import re

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor

__all__ = ["default_collate", "default_convert", "collate", "default_collate_fn_map",
           "default_collate_err_msg_format"]

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
    "found {}")
_STR_OBJ = re.compile(r"[SaUO]")  # NumPy dtype codes of strings, bytes and objects


def _as_tensor(data):
    from ...ops.creation import as_tensor

    return as_tensor(data)


def _tensor(data, dtype=None):
    from ...ops.creation import tensor

    return tensor(data, dtype=dtype)


def collate_tensor_fn(batch, *, collate_fn_map=None):
    from ... import stack  # (the public function: a Tensor subclass's batch keeps its type)

    return stack(batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if _STR_OBJ.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    return collate([_as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    for b in batch:  # a list of unsupported scalars (uint16, ...) would silently be int64
        if isinstance(b, np.generic):
            _dt.from_numpy_dtype(b.dtype)
    return _as_tensor(batch)


def collate_float_fn(batch, *, collate_fn_map=None):
    return _tensor(batch, dtype=_dt.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return _tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def _rebuild_mapping(elem, values):
    """`values` (a dict) in the type of the mapping `elem`: a mutable one is copied and
    updated, so subclasses with extra state (defaultdict's factory) keep it."""
    try:
        if isinstance(elem, abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(values)
            return clone
        return type(elem)(values)
    except TypeError:  # no copy()/update() or no __init__(mapping)
        return values


def _rebuild_sequence(elem, values):
    """`values` (a list) in the type of the sequence `elem`, else a list (as torch)."""
    try:
        if isinstance(elem, abc.MutableSequence):
            clone = copy.copy(elem)
            for i, v in enumerate(values):
                clone[i] = v
            return clone
        return type(elem)(values)
    except TypeError:  # no copy()/__setitem__ or no __init__(iterable), as range
        return values


def collate(batch, *, collate_fn_map=None):
    """Collate `batch` (a sequence of samples), dispatching on the type of its first
    element through `collate_fn_map`, recursing into mappings and sequences."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, abc.Mapping):
        return _rebuild_mapping(
            elem, {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                   for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map)
                           for samples in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        it = iter(batch)
        size = len(next(it))
        if not all(len(e) == size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        collated = [collate(samples, collate_fn_map=collate_fn_map)
                    for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return collated  # lists, for backwards compatibility (as torch)
        return _rebuild_sequence(elem, collated)
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def default_collate(batch):
    """Collate a list of samples into a batch (see the module docstring)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data):
    """Without batching (batch_size=None): NumPy arrays and scalars become tensors,
    containers are converted element-wise, everything else is left alone."""
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if isinstance(data, np.ndarray) and _STR_OBJ.search(data.dtype.str) is not None:
            return data
        return _as_tensor(data)
    if isinstance(data, abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # lists, for backwards compatibility
    if isinstance(data, abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data
