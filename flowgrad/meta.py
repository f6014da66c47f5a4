"""The 'meta' device: tensors with a shape and a dtype and no values, as torch's.

A big model is built on it (`with flowgrad.device("meta"):`) without memory for its weights,
then given storage by `Module.to_empty(device="cpu")` and filled by `load_state_dict` or an
init. A meta tensor's array is a `MetaArray`: a NumPy array of zero strides over one element,
whose writes do nothing; ops on meta tensors run the CPU kernels on those arrays and keep
only the result's shape and dtype (so they cost the work, not the memory). Reading a value
(item, numpy, printing the values, moving to the CPU) raises, as torch's.

>>> import flowgrad as flow
>>> with flow.device("meta"):
...     layer = flow.nn.Linear(1024, 1024)
>>> layer.weight.is_meta, layer.weight.shape
(True, flowgrad.Size([1024, 1024]))
>>> layer.to_empty(device="cpu").weight.device
device(type='cpu')
"""
from __future__ import annotations

import types

import numpy as np

from .device import register_device

__all__ = ["MetaArray", "meta_array"]


def meta_array(shape, dtype):
    """A meta array of `shape` and `dtype`: no memory beyond one element (writable: a write
    lands on that element, whose value means nothing)."""
    shape = tuple(shape)
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape),
                                           writeable=True).view(MetaArray)


def _to_meta(result):
    """Arrays (and NumPy scalars) in a result as meta arrays of their shapes and dtypes."""
    if isinstance(result, np.ndarray):
        return result if type(result) is MetaArray and result.strides == (0,) * result.ndim \
            else meta_array(result.shape, result.dtype)
    if isinstance(result, np.generic):
        return meta_array((), result.dtype)
    if isinstance(result, tuple):
        return tuple(_to_meta(r) for r in result)
    if isinstance(result, list):
        return [_to_meta(r) for r in result]
    return result


def _plain(value):
    """MetaArrays (also inside lists, tuples and dicts) seen as plain NumPy arrays."""
    if isinstance(value, MetaArray):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class MetaArray(np.ndarray):
    """A meta tensor's array (see the module's docstring)."""

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if out is not None:
            if all(isinstance(o, MetaArray) for o in out):  # a write into no values
                return out[0] if len(out) == 1 else out
            kwargs["out"] = _plain(out)
        return _to_meta(getattr(ufunc, method)(*_plain(inputs), **kwargs))

    def __array_function__(self, func, types_, args, kwargs):
        return _to_meta(func(*_plain(args), **_plain(kwargs)))


def _shape_of(shape):
    return (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)


def _make(shape, dtype=float, **_):
    return meta_array(_shape_of(shape), dtype)


def _make_like(a, *fill_value, dtype=None, order="K", subok=True, shape=None):
    return meta_array(np.shape(a) if shape is None else _shape_of(shape),
                      np.asarray(a).dtype if dtype is None else dtype)


# the array-making functions: a meta array of the shape and dtype asked for, nothing allocated
_MAKERS = {
    "empty": _make, "zeros": _make, "ones": _make,
    "full": lambda shape, fill_value, dtype=None, **_: meta_array(
        _shape_of(shape), dtype if dtype is not None else np.asarray(fill_value).dtype),
    "empty_like": _make_like, "zeros_like": _make_like, "ones_like": _make_like,
    "full_like": _make_like,
}


class _MetaModule(types.ModuleType):
    """The array module of meta tensors' kernels: NumPy, whose array-making functions give
    meta arrays (those that only make one, allocating nothing)."""

    def __getattr__(self, name):
        maker = _MAKERS.get(name)
        if maker is not None:
            return maker
        value = getattr(np, name)
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)) and \
                not isinstance(value, np.ufunc):
            def call(*args, **kwargs):
                return _to_meta(value(*_plain(args), **_plain(kwargs)))
            call.__name__ = name
            setattr(self, name, call)
            return call
        return value


def _no_values(array):
    raise NotImplementedError("Cannot copy out of meta tensor; no data! Please use "
                              "torch.nn.Module.to_empty() instead of torch.nn.Module.to() when "
                              "moving module from meta to a different device.")


META_XP = _MetaModule("flowgrad.meta.xp")
META = register_device("meta", MetaArray, META_XP, _no_values)
