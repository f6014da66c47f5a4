"""torch.types: the type aliases torch's signatures use (a number, a device, a size), for
code that annotates its own functions with them.

>>> from flowgrad.types import Number
>>> def double(x: Number) -> Number:
...     return 2 * x
>>> double(1.5)
3.0
"""
import os
from collections.abc import Sequence
from typing import IO, TypeAlias

from .device import device as _device_class
from .dtypes import dtype as _dtype_class
from .tensor import Size, Tensor

_bool: TypeAlias = bool
_complex: TypeAlias = complex
_float: TypeAlias = float
_int: TypeAlias = int
_str: TypeAlias = str
_bytes: TypeAlias = bytes
_dtype: TypeAlias = _dtype_class
_device: TypeAlias = _device_class

_size: TypeAlias = Size | list[int] | tuple[int, ...]
_symsize: TypeAlias = _size
_TensorOrTensors: TypeAlias = Tensor | Sequence[Tensor]
_TensorOrOptionalTensors: TypeAlias = Tensor | Sequence[Tensor | None]

IntLikeType: TypeAlias = int
FloatLikeType: TypeAlias = float
BoolLikeType: TypeAlias = bool
Number: TypeAlias = int | float | bool
_Number = (int, float, bool)  # (isinstance checks, as torch's)
Device: TypeAlias = _device_class | str | int | None
FileLike: TypeAlias = str | os.PathLike[str] | IO[bytes]

__all__ = ["Number", "Device", "FileLike", "IntLikeType", "FloatLikeType", "BoolLikeType"]
