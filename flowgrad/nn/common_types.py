"""torch.nn.common_types: the type aliases layers annotate their arguments with (a kernel
size given as an int or a tuple, ...), for code that imports them into its own layers.

>>> from flowgrad.nn.common_types import _size_2_t
>>> def pad(size: _size_2_t) -> tuple:
...     return size if isinstance(size, tuple) else (size, size)
>>> pad(3)
(3, 3)
"""
from typing import TypeAlias as _TypeAlias
from typing import TypeVar

from ..tensor import Tensor

T = TypeVar("T")
# an argument given as one value (which the op repeats) or a tuple of them
_scalar_or_tuple_any_t: _TypeAlias = T | tuple[T, ...]
_scalar_or_tuple_1_t: _TypeAlias = T | tuple[T]
_scalar_or_tuple_2_t: _TypeAlias = T | tuple[T, T]
_scalar_or_tuple_3_t: _TypeAlias = T | tuple[T, T, T]
_scalar_or_tuple_4_t: _TypeAlias = T | tuple[T, T, T, T]
_scalar_or_tuple_5_t: _TypeAlias = T | tuple[T, T, T, T, T]
_scalar_or_tuple_6_t: _TypeAlias = T | tuple[T, T, T, T, T, T]

# sizes (kernel size, stride, padding, ...)
_size_any_t: _TypeAlias = _scalar_or_tuple_any_t[int]
_size_1_t: _TypeAlias = _scalar_or_tuple_1_t[int]
_size_2_t: _TypeAlias = _scalar_or_tuple_2_t[int]
_size_3_t: _TypeAlias = _scalar_or_tuple_3_t[int]
_size_4_t: _TypeAlias = _scalar_or_tuple_4_t[int]
_size_5_t: _TypeAlias = _scalar_or_tuple_5_t[int]
_size_6_t: _TypeAlias = _scalar_or_tuple_6_t[int]

# optional sizes (adaptive pooling's output size)
_size_any_opt_t: _TypeAlias = _scalar_or_tuple_any_t[int | None]
_size_2_opt_t: _TypeAlias = _scalar_or_tuple_2_t[int | None]
_size_3_opt_t: _TypeAlias = _scalar_or_tuple_3_t[int | None]

# ratios per dim (upsampling's scale factors)
_ratio_2_t: _TypeAlias = _scalar_or_tuple_2_t[float]
_ratio_3_t: _TypeAlias = _scalar_or_tuple_3_t[float]
_ratio_any_t: _TypeAlias = _scalar_or_tuple_any_t[float]

_tensor_list_t: _TypeAlias = _scalar_or_tuple_any_t[Tensor]

# a max pooling's result, with or without its indices
_maybe_indices_t: _TypeAlias = _scalar_or_tuple_2_t[Tensor]
