"""BatchedTensor: what a function under `vmap` sees for a batched input.

It is a Tensor of the per-example (logical) shape: `_data` is a zero-stride placeholder of
that shape and dtype, so `shape`, `dim()`, `dtype` and the Python-level checks of every op
read the logical values, while the examples live in `_phys`, a tensor with the batch as its
leading dim (itself a BatchedTensor of an outer level under nested vmap). Reading values
(`item()`, `numpy()`, `bool()`) is refused, as torch's vmap refuses it.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor


def placeholder(shape, dtype):
    """A writable array of `shape` whose elements share one location (no memory per
    element): in-place ops may write it; nothing reads it."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), tuple(shape), (0,) * len(shape))


class BatchedTensor(Tensor):
    """A per-example view of `_phys` (batch at dim 0) at vmap level `_level`."""

    __slots__ = ("_phys", "_level")

    def _refuse(self, what):
        raise RuntimeError(
            f"vmap: {what} on a batched tensor (per-example shape {tuple(self.shape)}) is not "
            f"possible: its value differs between examples. Return the tensor from the "
            f"vmapped function instead, or use torch-style ops that do not read values")

    def item(self):
        self._refuse("item()")

    def tolist(self):
        self._refuse("tolist()")

    def numpy(self, force=False):
        self._refuse("numpy()")

    def __bool__(self):
        self._refuse("bool() (data-dependent control flow)")

    def __array__(self, dtype=None, copy=None):
        self._refuse("conversion to a NumPy array")

    def __float__(self):
        self._refuse("float()")

    def __int__(self):
        self._refuse("int()")

    def __repr__(self):
        return f"BatchedTensor(lvl={self._level.depth}, bdim=0, value=\n{self._phys!r})"

    __str__ = __repr__

    def view(self, *shape):
        """A reshape: the examples' storage is the batch tensor's, not this placeholder."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            if isinstance(shape[0], (tuple, list)):
                shape = tuple(shape[0])
            else:
                return super().view(*shape)  # a dtype view
        return self.reshape(*shape)

    def view_as(self, other):
        return self.reshape(*other.shape)

    def is_contiguous(self, memory_format=None):
        return True

    def detach(self):
        return wrap(self._phys.detach(), self._level)

    @property
    def data(self):
        return wrap(self._phys.data, self._level)


def wrap(phys, level):
    """The BatchedTensor of `phys` (batch at dim 0) at `level`."""
    t = object.__new__(BatchedTensor)
    data = phys._data
    t._data = placeholder(data.shape[1:], data.dtype)
    t._meta = t._grad_fn = t._version = t._view = None
    t._phys = phys
    t._level = level
    return t


def batched_at(t, level):
    return type(t) is BatchedTensor and t._level is level


def every_example(condition, *, guard=False):
    """bool(condition.all()) over every example of every vmap level `condition` is batched
    at: for a function's check of its input values or a choice of its output's shape, which
    torch's batching rules make once on the whole batch (outside vmap: bool(condition.all())).
    A shape choice reads the value as bool() does (a graph trace refuses to freeze it); a
    `guard` (a check that raises on bad input) is only checked, at trace time under a trace.

    >>> import flowgrad as flow
    >>> from flowgrad.func import vmap
    >>> vmap(lambda x: x * every_example(x > 0))(flow.tensor([1.0, 2.0]))
    tensor([1., 2.])
    """
    while type(condition) is BatchedTensor:
        condition = condition._phys
    return bool(condition._data.all()) if guard else bool(condition.all())
