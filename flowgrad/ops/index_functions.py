"""index_select, nonzero/argwhere and masked_fill (and masked_fill_): the index functions
built on indexing (ops/index.py).

>>> import flowgrad as flow
>>> flow.tensor([0, 3, 0, 5]).nonzero().flatten()
tensor([1, 3])
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..autograd import grad_mode
from ..autograd import interpreter as _interpreter
from ..autograd.inplace import (
    check_inplace,
    expanded_view,
    run_inplace,
    self_overlapping,
    warn_expanded_write,
)
from ..device import array_module
from ..errors import INT_INDEX_DTYPES, check_number, checked_value_tensor, fill_scalar
from ..tensor import Tensor, _wrap_dim, tensor_method
from .index import ARRAY, getitem, setitem, write_elements
from .registry import op

__all__ = ["nonzero", "index_select", "masked_fill", "argwhere"]


@op("nonzero", differentiable=False)
def _nonzero(xp, x):
    # (n, ndim) with strides (1, n), as torch's: its columns (as_tuple) are contiguous, and
    # view(-1) of the matrix raises there too
    return xp.stack(xp.nonzero(x)).T if x.ndim else xp.zeros((int(x != 0), 0), xp.int64)


@tensor_method()
def nonzero(input, *, as_tuple=False):
    """Indices of non-zero elements: (n, ndim) int64, or a tuple of index vectors.

    >>> import flowgrad as flow
    >>> flow.nonzero(flow.tensor([[0, 1], [2, 0]]))
    tensor([[0, 1],
            [1, 0]])
    """
    if as_tuple and input._data.ndim == 0:  # (NumPy has no 0-d nonzero: as a 1-element one)
        return (_nonzero(input.reshape(1)).to(_dt.int64)[:, 0],)  # (a column: per run)
    if as_tuple:  # the op's columns (a plan computes them per run)
        found = _nonzero(input).to(_dt.int64)
        return tuple(found[:, k] for k in range(input._data.ndim))
    return _nonzero(input).to(_dt.int64)


@tensor_method()
def index_select(input, dim, index):
    """Entries of `input` along `dim` at the positions in the 1-D `index`.

    >>> import flowgrad as flow
    >>> flow.index_select(flow.arange(6).reshape(3, 2), 0, flow.tensor([2, 0]))
    tensor([[4, 5],
            [0, 1]])
    """
    d = _wrap_dim(dim, input._data.ndim, "index_select")
    if not isinstance(index, Tensor) or index._data.dtype not in INT_INDEX_DTYPES:
        got = index.dtype if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"index_select(): Expected dtype int32 or int64 for index, got "
                           f"{got}")
    if index._data.ndim > 1:
        raise IndexError(f"index_select(): Index is supposed to be a vector, got shape "
                         f"{tuple(index.shape)}")
    idx, size = index._data, input._data.shape[d] if input._data.ndim else 1
    if idx.size and (idx.min() < 0 or idx.max() >= size):  # no wrapping of -1, as torch
        bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
        raise IndexError(f"index_select(): index out of range in self: index {bad} for dim {d} "
                         f"of size {size} (input shape {tuple(input.shape)}); indices must be "
                         f"in [0, {size - 1}]")
    if _interpreter.varies_per_run(index):  # (a plan's index: checked on each call's)
        _interpreter.require((index >= 0) & (index < size), f"index_select(): index out of "
                             f"range in self for dim {d} of size {size}; indices must be in "
                             f"[0, {size - 1}]", IndexError)
    if input._data.ndim == 0:  # torch: one index (which must be 0) picks the scalar itself
        if idx.size != 1:
            raise IndexError(f"index_select(): Index to scalar can have only 1 value, got "
                             f"{idx.size} value(s)")
        return input.clone()
    if idx.ndim == 0:  # a 0-d index selects as a 1-element one (torch keeps the dim)
        index = index.reshape(1)
    # contiguous, as torch allocates index_select's output (an index keeps a strided layout)
    return getitem(input, (slice(None),) * d + (index,)).contiguous()


@tensor_method()
def masked_fill(input, mask, value):
    """`value` where mask is True, input elsewhere (mask broadcasts).

    >>> import flowgrad as flow
    >>> x = flow.tensor([1.0, -2.0, 3.0])
    >>> x.masked_fill(x < 0, 0.0)
    tensor([1., 0., 3.])
    """
    value = _fill_value(input, mask, value)
    # (Tensor.where: elementwise.py builds on this module); contiguous, as torch's clone first
    return value.where(mask, input).contiguous()


def _fill_value(input, mask, value):
    """masked_fill's value as a 0-d tensor of input's dtype, the mask and value checked."""
    xp = array_module(input._data)
    if not isinstance(mask, Tensor) or mask._data.dtype != np.bool_:
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_fill only supports boolean masks, but got mask with dtype "
                           f"{got}; use mask.bool()")
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError(f"masked_fill only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value._data.ndim} dimension(s)")
        value = checked_value_tensor("masked_fill", value, input)
        if _interpreter.varies_per_run(value) and input._data.dtype.kind != "b":
            value = _value_fits(value, op_name="masked_fill", dtype=input._data.dtype)
        value = value.to(input.dtype)
    else:
        check_number("masked_fill", value)
        value = Tensor._wrap(xp.asarray(fill_scalar("masked_fill", value, input._data.dtype),
                                        input._data.dtype))
    return value


@op("value_fits", jvp="linear")
def _value_fits(xp, value, *, op_name, dtype):
    """A 0-d value tensor that a compiled plan reads anew each call, checked to fit `dtype` as
    `checked_value_tensor` checks it eagerly (in the kernel: each call's value)."""
    fill_scalar(op_name, value.item(), dtype)
    return value.copy()


@_value_fits.grad
def value_fits_backward(ctx, dy):
    return dy


@tensor_method()
def argwhere(input):
    """Indices of the non-zero elements, (n, ndim) int64 (nonzero's matrix form)."""
    return nonzero(input)


def _masked_fill_(self, mask, value, name="masked_fill_"):
    """masked_fill in place; `name`, the op it writes for (index_fill_ of an expand too)."""
    if (grad_mode.is_grad_enabled() and self_overlapping(self._data) and isinstance(mask, Tensor)
            and (self.requires_grad or isinstance(value, Tensor) and value.requires_grad)):
        check_inplace(name, self)
        setitem(self, mask.expand(self._data.shape), value)  # element by element of the base
        return self
    warn_expanded_write(self._data, name, "tensor[mask] = scalar")
    if _interpreter.current is not _interpreter.AutogradInterpreter and expanded_view(self):
        # an expand, under an interpreter (a forward-AD level's tangent, vmap's examples): a
        # mask that differs between elements sharing a location still writes it once
        value = _fill_value(self, mask, value)
        write_elements(self, (ARRAY,), (mask.expand(self._data.shape),), value, name=name)
        return self
    return run_inplace(name, masked_fill, self, mask, value)


Tensor.masked_fill_ = _masked_fill_
