"""BatchedTensor: what a function under `vmap` sees for a batched input.

It is a Tensor of the per-example (logical) shape: `_data` is a zero-stride placeholder of
that shape and dtype, so `shape`, `dim()`, `dtype` and the Python-level checks of every op
read the logical values, while the examples live in `_phys`, a tensor with the batch as its
leading dim (itself a BatchedTensor of an outer level under nested vmap). Reading values
(`item()`, `numpy()`, `bool()`) is refused, as torch's vmap refuses it.
"""
from __future__ import annotations

import textwrap

import numpy as np

from ..autograd import interpreter as _interpreter
from ..autograd import levels as _levels
from ..autograd.meta import counter_of
from ..overrides import _disabled_torch_function_impl
from ..tensor import Tensor


class Placeholder(np.ndarray):
    """The storage a BatchedTensor shows: its shape and dtype are the examples', its one
    element is no example's value. NumPy functions refuse it (except those that read only
    shape and dtype), so a Python function that computes on a batched tensor's `_data` with
    them (np.unique, np.searchsorted, np.allclose...) raises instead of computing on a
    placeholder. (Ufuncs still run: the input checks that compare `_data` with bounds.)"""

    def __array_function__(self, func, types, args, kwargs):
        if func not in _SHAPE_ONLY:
            raise _values_error(func.__name__)
        args = tuple(a.view(np.ndarray) if type(a) is Placeholder else a for a in args)
        result = func(*args, **kwargs)
        return result.view(Placeholder) if type(result) is np.ndarray else result

    # Python's conversions to a number read the one element too (int(t._data) of a batched
    # 0-d index gave every example index 0): refused as NumPy functions are. (bool() stays:
    # input checks compare the placeholder with bounds, as the ufuncs above)
    def __int__(self):
        raise _values_error("int()")

    def __index__(self):
        raise _values_error("operator.index()")

    def __float__(self):
        raise _values_error("float()")

    def __complex__(self):
        raise _values_error("complex()")

    def item(self, *args):
        raise _values_error("item()")

    def tolist(self):
        raise _values_error("tolist()")


# NumPy functions that read a placeholder's shape, dtype or memory, never its values
_SHAPE_ONLY = frozenset((
    np.shape, np.ndim, np.size, np.result_type, np.may_share_memory, np.shares_memory,
    np.zeros_like, np.empty_like, np.ones_like, np.full_like, np.reshape, np.transpose,
    np.moveaxis, np.swapaxes, np.expand_dims, np.squeeze, np.broadcast_to, np.atleast_1d,
    np.atleast_2d, np.atleast_3d, np.can_cast, np.min_scalar_type, np.copyto))


def _values_error(name):
    return RuntimeError(
        f"vmap: {name} read the values of a batched tensor's placeholder storage: a function "
        f"called inside vmap computes with NumPy on `._data` instead of calling flowgrad ops, "
        f"so it cannot be batched. Call it outside vmap, or write it with flowgrad ops")


def placeholder(shape, dtype):
    """A writable array of `shape` whose elements share one location (no memory per
    element): in-place ops may write it; nothing reads it."""
    shape = tuple(shape)  # (built directly: as_strided's Python wrapper cost 3x more)
    return np.ndarray.__new__(Placeholder, shape, dtype, buffer=np.zeros(1, dtype),
                              strides=(0,) * len(shape))


class BatchedTensor(Tensor):
    """A per-example view of `_phys` (batch at dim 0) at vmap level `_level`."""

    __slots__ = ("_phys", "_level")
    __torch_function__ = _disabled_torch_function_impl

    def _reduce(self):  # (copied and pickled as a plain tensor)
        return Tensor._wrap(self._data)._reduce()

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

    def __repr__(self):  # (torch's layout: the value indented by 4, ")" on its own line)
        value = textwrap.indent(repr(self._phys), " " * 4)
        return f"BatchedTensor(lvl={self._level.depth}, bdim=0, value=\n{value}\n)"

    __str__ = __repr__

    def view(self, *shape):
        """A reshape that refuses to copy, as torch's: the examples' storage is the batch
        tensor's, not this placeholder."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            if isinstance(shape[0], (tuple, list)):
                shape = tuple(shape[0])
            else:
                return super().view(*shape)  # a dtype view
        data = self._phys._data
        if type(data) is np.ndarray:
            try:
                data.reshape((data.shape[0],) + tuple(shape), copy=False)
            except ValueError as error:
                if "copy" in str(error):
                    raise RuntimeError(
                        f"view size is not compatible with input tensor's size and stride (at "
                        f"least one dimension spans across two contiguous subspaces): the "
                        f"examples of shape {tuple(self.shape)} cannot be viewed as "
                        f"{tuple(shape)}. Use .reshape(...) instead") from None
        return self.reshape(shape)

    def view_as(self, other):
        return self.reshape(other.shape)

    def is_contiguous(self, memory_format=None):
        return True

    def detach(self):
        """Shares the examples and the version counter (a write through it is seen by the
        saved tensors' checks, as an eager detach()'s)."""
        t = wrap(self._phys.detach(), self._level)
        t._counter = counter_of(self)
        if _levels.TOKENS:  # (made at the innermost transform's level, as an eager detach())
            t._lvl = _levels.alias_token(self, _levels.TOKENS[-1])
        return t

    @property
    def data(self):
        if self._innermost():  # (inside vmap(grad(f)) or vmap(jvp(f)), torch allows it)
            raise RuntimeError("accessing `data` under vmap transform is not allowed: use "
                               "detach() (torch's functorch refuses .data too)")
        if _levels.TRANSFORMS:  # (the innermost transform stripped: levels.data_of)
            return _levels.data_of(self)
        return wrap(self._phys.data, self._level)

    def _innermost(self):
        """Whether vmap is the innermost transform this tensor is seen through (no grad or
        jvp inside it), where torch refuses `.data` and `detach_()`."""
        return _interpreter.current is self._level and not self._level.logical

    def detach_(self):
        if self._innermost():  # (inside vmap(grad(f)): as an eager tensor's)
            raise RuntimeError("Can't detach views in-place (a tensor batched by vmap is a "
                               "view of its examples). Use detach() instead")
        return super().detach_()


def wrap(phys, level):
    """The BatchedTensor of `phys` (batch at dim 0) at `level`."""
    t = object.__new__(BatchedTensor)
    data = phys._data
    t._data = placeholder(data.shape[1:], data.dtype)
    t._meta = t._grad_fn = t._counter = t._view = None
    t._phys = phys
    t._level = level
    return t


def wrap_with_graph(phys, level):
    """`wrap(phys, level)` that autograd sees through phys's own history (autograd recorded
    on the physical tensors)."""
    t = wrap(phys, level)
    t._meta, t._grad_fn = phys._meta, phys._grad_fn
    return t


def batched_at(t, level):
    return type(t) is BatchedTensor and t._level is level


def every_example(condition):
    """bool(condition.all()) over every example of every vmap level `condition` is batched
    at: for a choice of a function's output's shape from its input values, which torch's
    batching rules make once on the whole batch (outside vmap: bool(condition.all())). It
    reads the value as bool() does (a graph trace refuses to freeze it); a check that raises
    on bad input is `check_every_example`.

    >>> import flowgrad as flow
    >>> from flowgrad.func import vmap
    >>> vmap(lambda x: x * every_example(x > 0))(flow.tensor([1.0, 2.0]))
    tensor([1., 2.])
    """
    while type(condition) is BatchedTensor:
        condition = condition._phys
    return bool(condition.all())


def check_every_example(condition, message, error=RuntimeError):
    """`if not every_example(condition): raise error(message)` for a check of a function's
    input values: inside nn.Graph's build a check node the plan makes on every call's values
    (a check read on the trace's arrays alone let later calls' bad values through)."""
    while type(condition) is BatchedTensor:
        condition = condition._phys
    check = getattr(_interpreter.current, "value_check", None)
    if check is not None and check(condition, message, error):
        return
    if not condition._data.all():  # (the array: a meta tensor's, or a constant inside build)
        raise error(message)
