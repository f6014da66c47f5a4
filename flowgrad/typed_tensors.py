"""torch's legacy typed tensor classes (`flow.FloatTensor`, `flow.LongTensor`, ...) and
memory formats (`flow.channels_last`, ...).

A typed class constructs a tensor of its dtype from data or sizes, and `isinstance(t,
flow.FloatTensor)` is True exactly when `t.dtype` is float32, as torch's. The memory formats
lay a tensor's memory out as torch's (`t.contiguous(memory_format=flow.channels_last)`: the
channels innermost, strides (H * W * C, 1, W * C, C)); is_contiguous(memory_format=) reads the
strides, as torch's (ops/layout.py).

>>> import flowgrad as flow
>>> x = flow.FloatTensor([1, 2])
>>> x, isinstance(x, flow.FloatTensor), isinstance(x, flow.LongTensor)
(tensor([1., 2.]), True, False)
>>> flow.LongTensor(2, 3).shape, x.type(), x.type("torch.LongTensor")
(flowgrad.Size([2, 3]), 'flowgrad.FloatTensor', tensor([1, 2]))
"""
from __future__ import annotations

import warnings

from . import dtypes as _dt
from .ops.layout import format_contiguous
from .overrides import _disabled_torch_function_impl
from .tensor import Tensor, bind_late

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
           "memory_format", "contiguous_format", "channels_last", "channels_last_3d",
           "preserve_format", "set_default_tensor_type"]

_CLASS_NAMES = {name: f"{torch_name}Tensor" for name, torch_name in _dt.TORCH_SCALAR_NAMES.items()
                if not name.startswith("complex")}


class _TypedTensorMeta(type):
    """Calling the class makes a plain Tensor of its dtype; isinstance compares dtypes."""

    def __call__(cls, *args, **kwargs):
        if "dtype" in kwargs:
            raise TypeError(f"{cls.__name__}(): the dtype is {cls.dtype}; don't pass dtype=")
        if len(args) == 1 and isinstance(args[0], Tensor):
            return args[0].to(cls.dtype)
        return Tensor(*args, dtype=cls.dtype, **kwargs)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __repr__(cls):
        return f"<class 'flowgrad.{cls.__name__}'>"


def _make(dtype_name):
    name = _CLASS_NAMES[dtype_name]
    dtype = _dt._BY_NAME.get(dtype_name)
    doc = f"Tensors of dtype {dtype}: `{name}(data)` or `{name}(*sizes)` (uninitialised)."
    return _TypedTensorMeta(name, (Tensor,), {"__slots__": (), "dtype": dtype, "__doc__": doc,
                                              "__module__": "flowgrad",
                                              "__torch_function__": _disabled_torch_function_impl})


FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor, \
    CharTensor, ByteTensor, BoolTensor = (_make(n) for n in _CLASS_NAMES)
_BY_CLASS_NAME = {name: _dt._BY_NAME.get(d) for d, name in _CLASS_NAMES.items()}


def type_name(dtype) -> str:
    """'flowgrad.FloatTensor' for float32, etc. (what `Tensor.type()` returns)."""
    return f"flowgrad.{_CLASS_NAMES.get(dtype.name, dtype.name.capitalize() + 'Tensor')}"


def as_tensor_dtype(spec):
    """The dtype a `Tensor.type(spec)` argument names: a dtype, a typed class, or a name
    ('torch.FloatTensor', 'flowgrad.LongTensor', 'torch.float64')."""
    if isinstance(spec, _TypedTensorMeta):
        return spec.dtype
    if isinstance(spec, str):
        if ".cuda." in spec:
            raise RuntimeError(f"type({spec!r}): flowgrad has no CUDA device; use the CPU "
                               f"type {spec.replace('.cuda', '')!r}")
        short = spec.rsplit(".", 1)[-1]
        if short in _BY_CLASS_NAME:
            return _BY_CLASS_NAME[short]
    return _dt.as_dtype(spec)


def set_default_tensor_type(t):
    """torch's deprecated `set_default_tensor_type(flow.DoubleTensor)` (or a name such as
    'torch.DoubleTensor'): sets the default dtype; floating types only, as torch."""
    warnings.warn("set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "set_default_dtype() and set_default_device() as alternatives.",
                  UserWarning, stacklevel=2)
    if isinstance(t, str):
        if t.rsplit(".", 1)[-1] not in _BY_CLASS_NAME:
            raise AttributeError(f"set_default_tensor_type: no tensor type named {t!r} (use "
                                 f"a name such as 'torch.DoubleTensor')")
        dtype = as_tensor_dtype(t)
    elif isinstance(t, _TypedTensorMeta):
        dtype = t.dtype
    else:
        raise TypeError(f"invalid type object: only floating-point types are supported as "
                        f"the default type (got {t!r}; pass flowgrad.DoubleTensor or use "
                        f"set_default_dtype)")
    if not dtype.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type (got "
                        f"{type_name(dtype)})")
    _dt.set_default_dtype(dtype)


class memory_format:  # noqa: N801 - torch's name
    """A memory layout torch can give a tensor (channels_last: the channels' dim innermost in
    memory)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"flowgrad.{self.name}"

    def __reduce__(self):
        return (_format_by_name, (self.name,))


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
_FORMATS = {f.name: f for f in (contiguous_format, channels_last, channels_last_3d,
                                preserve_format)}
def _format_by_name(name):
    return _FORMATS[name]


def format_rank(fmt, ndim, op_name="contiguous"):
    """The rank `fmt` lays out: 4 for channels_last, 5 for channels_last_3d, 0 for
    contiguous_format, None for preserve_format (or None: not given); a format for a tensor of
    another rank raises, as torch."""
    if fmt is None or fmt is preserve_format:
        return None
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{op_name}(): memory_format must be a flowgrad.memory_format such as "
                        f"flowgrad.channels_last, got {fmt!r}")
    rank = 4 if fmt is channels_last else 5 if fmt is channels_last_3d else 0
    if rank and ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format ({op_name} of "
                           f"a {ndim}-d tensor)")
    return rank


def _is_contiguous_as(tensor, fmt):
    """Tensor.is_contiguous(memory_format=fmt) for channels_last(_3d), as torch computes it
    from the strides."""
    return format_contiguous(tensor._data, 4 if fmt is channels_last else 5)


bind_late(is_contiguous_as=_is_contiguous_as)  # Tensor.is_contiguous calls it
