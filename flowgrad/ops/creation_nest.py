"""torch.tensor's reading of a nest of Python numbers whose structure is ragged, for the
error path of `tensor_data.as_array`: torch takes the shape from the first element at each
level, then stores the values in order, so the first thing it meets that does not fit is what
it refuses, with its exception class: a number where a list belongs (TypeError, "not a
sequence"), a list where a number belongs (TypeError), a list of another length (ValueError),
or a value the dtype cannot hold (a Python complex into a real dtype: TypeError; a number out
of an integer dtype's range: RuntimeError). A shape with no elements stores nothing, so torch
returns an empty tensor of it whatever the other elements are.

>>> import flowgrad as flow
>>> flow.tensor([[], [1.5], 2]).shape
flowgrad.Size([3, 0])
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor

_LISTS = (list, tuple)


def _plain(data):
    """(whether `data` nests only lists, tuples and numbers (Python's, NumPy's, 0-d tensors):
    torch reads those one value at a time, wider tensors and arrays inside take other paths;
    whether a list in it is empty). A nest deeper than 64 (or containing itself) is not:
    flowgrad's own error stands for it. Each list is looked into once (a list repeated in the
    nest, `[[1.0] * 100] * 100`, is one list)."""
    stack, empty, seen = [(data, 0)], False, set()
    while stack:
        x, depth = stack.pop()
        if isinstance(x, _LISTS):
            if depth > _MAX_DEPTH:
                return False, empty
            if id(x) in seen:
                continue
            seen.add(id(x))
            stack.extend((item, depth + 1) for item in x)
            empty = empty or not x
        elif not isinstance(x, (numbers.Number, np.generic)) and not (
                isinstance(x, Tensor) and x.ndim == 0):
            return False, empty
    return True, empty


def torch_reading(data, dtype, inferred, error, check_leaf):
    """torch's outcome for the nest `data` (lists/tuples) that flowgrad refused with `error`:
    an empty array when torch's shape has no elements, else torch's first refusal in its
    order (`check_leaf(x, dtype)` raises for a number the dtype cannot hold); `error` itself
    where the nest is not plain Python numbers or torch would refuse nothing flowgrad's walk
    knows. `inferred`: dtype was read from the numbers (torch's inference counts an empty
    list as the default dtype)."""
    plain, empty = _plain(data)
    if not plain:
        raise error
    if inferred and empty:
        dtype = _dt.promote_types(dtype, _dt.get_default_dtype())
    sizes, x = [], data
    while isinstance(x, _LISTS):
        sizes.append(len(x))
        if not x:
            break
        x = x[0]
    if math.prod(sizes) == 0:
        return np.empty(sizes, dtype.np)
    _store(data, sizes, 0, dtype, check_leaf, error, set())
    raise error


_MAX_DEPTH = 64  # (creation's limit on nesting)


def _store(obj, sizes, dim, dtype, check_leaf, error, stored):
    """Store `obj` at `dim` as torch would, raising its first refusal; `stored`: the ids of
    lists already stored without one (a repeated list at the same dim is read once)."""
    if dim == len(sizes):
        if isinstance(obj, _LISTS):
            raise TypeError(f"tensor(): expected a number at dim {dim} of a nest of shape "
                            f"{sizes} (read from its first elements), got a "
                            f"{type(obj).__name__}: the nest is ragged")
        if type(obj) is complex and dtype.category != 3:  # (NumPy's complex: by value)
            raise TypeError(f"tensor(): a Python complex number ({obj!r}) cannot be converted "
                            f"to type {dtype.name}; pass a complex dtype or real numbers")
        if isinstance(obj, Tensor) and obj.is_complex() and dtype.category != 3:
            raise error  # (flowgrad's own check of complex tensors refused the first one)
        check_leaf(obj, dtype)
        return
    if not isinstance(obj, _LISTS):
        raise TypeError(f"tensor(): not a sequence: {obj!r} at dim {dim} of a nest of shape "
                        f"{sizes} (read from its first elements): the nest is ragged")
    if len(obj) != sizes[dim]:
        raise ValueError(f"tensor(): expected sequence of length {sizes[dim]} at dim {dim} "
                         f"(got {len(obj)}): the nest is ragged")
    if (id(obj), dim) in stored:
        return
    for item in obj:
        _store(item, sizes, dim + 1, dtype, check_leaf, error, stored)
    stored.add((id(obj), dim))
