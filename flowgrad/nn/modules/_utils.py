"""Small helpers shared by the layer modules."""
from __future__ import annotations

import collections.abc
from itertools import repeat

from ... import dtypes as _dt
from ...device import check_device
from ...ops.creation import empty
from ..parameter import Parameter


def _ntuple(n, name="parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")


def _reverse_repeat_tuple(t, n):
    """(a, b) -> (b, b, a, a) for n=2: F.pad's order from a conv's per-dim padding."""
    return tuple(x for x in reversed(t) for _ in range(n))


def new_param(*shape, dtype=None, requires_grad=True, device=None):
    """An uninitialised Parameter of the given shape and (default float) dtype on `device`
    (the layer's device= argument ends here; an unavailable device raises)."""
    check_device(device, "nn.Module")
    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    return Parameter(empty(*shape, dtype=dt, device=device), requires_grad=requires_grad)


def new_tensor(*shape, dtype=None, fill=0.0):
    """A fresh tensor of `shape` filled with `fill`, in `dtype` (default: the default float dtype);
    used to create parameters."""
    from ...ops.creation import full

    dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    return full(tuple(shape), fill, dtype=dt)
