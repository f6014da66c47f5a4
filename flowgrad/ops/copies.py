"""torch's `*_copy` functions: a view op's values in a new, contiguous tensor (what a
functionalized program calls instead of the view), and the `unsafe_*` spellings of split and
chunk. Each is the view op then a copy, so gradients are the view op's.

>>> import flowgrad as flow
>>> y = flow.permute_copy(flow.arange(6.0).reshape(2, 3), (1, 0))
>>> y.is_contiguous(), y.shape
(True, flowgrad.Size([3, 2]))
"""
from __future__ import annotations

import numbers

from ..tensor import Tensor, _wrap_dim, tensor_method
from ..typed_tensors import contiguous_format
from . import pad as _pad
from . import shape as _shape
from . import split as _split

__all__ = ["alias_copy", "diagonal_copy", "permute_copy", "slice_copy", "squeeze_copy", "t_copy",
           "transpose_copy", "unbind_copy", "unfold_copy", "unsqueeze_copy", "view_copy",
           "split_with_sizes_copy", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
           "constant_pad_nd"]


def _fresh(view):
    return view.clone(memory_format=contiguous_format)


def alias_copy(input):
    """A copy of input (torch.alias_copy)."""
    return _fresh(input)


def diagonal_copy(input, offset=0, dim1=0, dim2=1):
    """input.diagonal(offset, dim1, dim2), copied."""
    return _fresh(input.diagonal(offset, dim1, dim2))


def permute_copy(input, dims):
    """input.permute(dims), copied."""
    return _fresh(input.permute(dims))  # (dims as one argument: () for a 0-d tensor)


def _slice_bound(value, arg):
    """A slice bound as torch's SymInt argument: an int, or an integer 0-d tensor."""
    if isinstance(value, Tensor) and value._data.ndim == 0 and value._data.dtype.kind in "iu":
        return int(value.item())
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, Tensor)):
        return int(value)
    raise TypeError(f"slice_copy(): argument '{arg}' must be int, not {type(value).__name__} "
                    f"({value!r})")


def slice_copy(input, dim=0, start=None, end=None, step=1):
    """input[..., start:end:step, ...] along `dim` (a positive step; bounds clamp as in
    Python), copied: torch.slice_copy, the copy of aten's slice view.

    >>> import flowgrad as flow
    >>> flow.slice_copy(flow.arange(6.0).reshape(2, 3), 1, 1, None, 1)
    tensor([[1., 2.],
            [4., 5.]])
    """
    if input._data.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input._data.ndim, "slice_copy")
    start = None if start is None else _slice_bound(start, "start")
    end = None if end is None else _slice_bound(end, "end")
    step = _slice_bound(step, "step")
    if step <= 0:
        raise RuntimeError(f"slice_copy(): slice step must be positive, got {step}; flip the "
                           f"tensor (flowgrad.flip) to step backwards")
    return _fresh(input[(slice(None),) * d + (slice(start, end, step),)])


def squeeze_copy(input, dim=None):
    """input.squeeze(dim), copied."""
    return _fresh(_shape.squeeze(input, dim))


def t_copy(input):
    """input.t(), copied."""
    return _fresh(input.t())


def transpose_copy(input, dim0, dim1):
    """input.transpose(dim0, dim1), copied."""
    return _fresh(input.transpose(dim0, dim1))


def unbind_copy(input, dim=0):
    """input.unbind(dim), each copied."""
    return tuple(_fresh(part) for part in input.unbind(dim))


def unfold_copy(input, dimension, size, step):
    """input.unfold(dimension, size, step), copied."""
    return _fresh(input.unfold(dimension, size, step))


def unsqueeze_copy(input, dim):
    """input.unsqueeze(dim), copied."""
    return _fresh(input.unsqueeze(dim))


def view_copy(input, size=None, *, dtype=None):
    """input.view(size), or input.view(dtype) (a reinterpretation), copied; a size needs no
    viewable strides (torch's copies a transposed input as reshape would)."""
    if (size is None) == (dtype is None):
        raise TypeError("view_copy() takes a size or a dtype (dtype=), exactly one")
    return _fresh(input.reshape(size) if dtype is None else input.view(dtype))


def split_with_sizes_copy(input, split_sizes, dim=0):
    """input.split(split_sizes, dim) with a list of sizes, each copied."""
    return [_fresh(part) for part in _split.split(input, list(split_sizes), dim)]


@tensor_method()
def unsafe_chunk(input, chunks, dim=0):
    """torch.unsafe_chunk: chunk (flowgrad's views are always safe to write)."""
    return _split.chunk(input, chunks, dim)


@tensor_method()
def unsafe_split(input, split_size, dim=0):
    """torch.unsafe_split: split."""
    return _split.split(input, split_size, dim)


@tensor_method()
def unsafe_split_with_sizes(input, split_sizes, dim=0):
    """torch.unsafe_split_with_sizes: split by a list of sizes."""
    return _split.split(input, list(split_sizes), dim)


def constant_pad_nd(input, pad, value=0):
    """F.pad(input, pad, value=value) (torch.constant_pad_nd), which also takes a complex
    value for a complex input."""
    if isinstance(value, complex) and not input.is_complex():
        raise RuntimeError(f"constant_pad_nd: value {value!r} cannot be converted to type "
                           f"{input.dtype} without overflow; pass a real value")
    return _pad.padded(input, pad, "constant", value, complex_value=True)
