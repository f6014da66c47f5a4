"""The in-place index and scatter writes (Tensor.scatter_, scatter_add_, scatter_reduce_,
index_add_, index_copy_, index_reduce_, index_fill_, index_put_, masked_scatter_, put_): torch's
refusals of operands sharing memory with the written tensor come first, then the out-of-place
op of gather.py written in place (`run_inplace`); an expand written takes each memory location
once, as torch's.

>>> import flowgrad as flow
>>> flow.zeros(3).index_add_(0, flow.tensor([0, 2]), flow.ones(2))
tensor([1., 0., 1.])
"""
from __future__ import annotations

from ..autograd.inplace import (
    check_inplace,
    check_no_overlap,
    expanded_view,
    memory_of,
    run_inplace,
    shares_elements,
    warn_expanded_write,
)
from ..errors import fill_scalar
from ..tensor import Tensor
from .gather import (
    _flat_mask,
    _index_dim,
    _put_args,
    index_add,
    index_copy,
    index_fill,
    index_put,
    index_reduce,
    masked_scatter,
    put,
    scatter,
    scatter_add,
    scatter_reduce,
)
from .index import ARRAY, refuse_overlapping_value, write_elements
from .index_functions import _masked_fill_

# (torch's index and scatter metas and put_ refuse an index or source sharing any memory
# with self; masked_scatter_ reads its source as it writes, index_put_ has its own checks)
_NO_OVERLAP = frozenset(("scatter_", "scatter_add_", "scatter_reduce_", "index_add_",
                         "index_copy_", "index_reduce_", "put_"))


def _inplace(name, fn):
    def method(self, *args, **kwargs):
        if name in _NO_OVERLAP:
            check_no_overlap(name, self, (*args, *kwargs.values()))
        elif name == "masked_scatter_":
            _refuse_source_in_self(self, *args, **kwargs)
        return run_inplace(name, fn, self, *args, **kwargs)
    method.__name__ = name
    return method


def _refuse_source_in_self(self, mask=None, source=None):
    """torch's masked_scatter_ reads its source while it writes: a source sharing memory with
    self gives the values of its loop's order (elements it wrote, read again), which this
    out-of-place kernel does not reproduce; refused instead of giving other values."""
    if isinstance(source, Tensor) and shares_elements(memory_of(source), memory_of(self)):
        raise NotImplementedError(
            f"masked_scatter_: the source (shape {tuple(source.shape)}) shares memory with "
            f"the tensor written (shape {tuple(self.shape)}): torch's result then depends on "
            f"the order of its writes; pass source.clone()")


def _index_put_(self, indices, values, accumulate=False):
    if expanded_view(self):
        # an expand: torch writes each memory location once, with a warning
        _, values, spec, arrays = _put_args(self, indices, values)
        warn_expanded_write(self._data, "index_put_", "tensor[indices] = tensor")
        check_inplace("index_put_", self)
        write_elements(self, spec, arrays, values, bool(accumulate), name="index_put_")
        return self
    if isinstance(values, Tensor) and isinstance(indices, (tuple, list)) and all(
            isinstance(i, Tensor) for i in indices) and refuse_overlapping_value(
            self, (ARRAY,) * len(indices), list(indices), True, values, bool(accumulate)):
        values = values.clone()  # (its masked_fill_: the value is read before the write)
    return run_inplace("index_put_", index_put, self, indices, values, accumulate)


def _index_fill_(self, dim, index, value):
    if expanded_view(self):
        # an expand: torch fills the selected elements (each memory location once), with a
        # warning, as masked_fill_
        flat = _index_dim(self, dim, index, "index_fill", allow_negative=True)
        if not isinstance(value, Tensor):
            fill_scalar("index_fill", value, self._data.dtype)
        mask = _flat_mask(flat, shape=self._data.shape if self._data.shape else (1,))
        return _masked_fill_(self, mask.reshape(tuple(self.shape)), value, name="index_fill_")
    check_no_overlap("index_fill_", self, (index,))  # (a 0-d value is read first: allowed)
    return run_inplace("index_fill_", index_fill, self, dim, index, value)


Tensor.index_put_ = _index_put_
Tensor.index_fill_ = _index_fill_
for _name, _fn in (("scatter_", scatter), ("scatter_add_", scatter_add),
                   ("scatter_reduce_", scatter_reduce), ("index_add_", index_add),
                   ("index_copy_", index_copy),
                   ("index_reduce_", index_reduce),
                   ("masked_scatter_", masked_scatter),
                   ("put_", put)):
    setattr(Tensor, _name, _inplace(_name, _fn))
