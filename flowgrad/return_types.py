"""Named (values, indices) results of max/min/sort/topk/kthvalue/median/mode/cummax/cummin,
printed as torch prints its `torch.return_types.*`.

>>> import flowgrad as flow
>>> flow.tensor([[1.0, 5.0], [3.0, 2.0]]).max(dim=1)
flowgrad.return_types.max(
values=tensor([5., 3.]),
indices=tensor([1, 0]))
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .device import array_module

_NAMES = ("max", "min", "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax",
          "cummin")


def _make(name):
    base = namedtuple(name, ["values", "indices"])

    def __repr__(self):
        return f"flowgrad.return_types.{name}(\nvalues={self.values!r},\nindices={self.indices!r})"

    return type(name, (base,), {"__slots__": (), "__repr__": __repr__,
                                "__module__": "flowgrad.return_types"})


TYPES = {name: _make(name) for name in _NAMES}


def values_indices(op_name, values, indices):
    """The named result of `op_name`: a tuple with `.values` and `.indices`."""
    return TYPES[op_name](values, indices)


def of_zero_dim(op_name, input):
    """The result on a 0-d input: the value itself, at index 0."""
    xp = array_module(input._data)
    from .tensor import Tensor

    return TYPES[op_name](input.clone(), Tensor._wrap(xp.zeros((), np.int64)))
