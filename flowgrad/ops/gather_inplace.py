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

import numpy as np

from ..autograd.grad_mode import no_grad
from ..autograd.inplace import (
    addresses,
    check_inplace,
    check_no_overlap,
    expanded_view,
    memory_of,
    run_inplace,
    shares_elements,
    warn_expanded_write,
)
from ..dtypes import float64
from ..errors import fill_scalar
from ..tensor import Tensor
from .creation import full
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
        # (the index, or put_'s, and masked_scatter_'s mask, come first: the rest are read)
        first = 1 if name in ("put_", "masked_scatter_") else 2
        args = tuple(_source_apart(name, fn, self, a, args, kwargs) if i >= first else a
                     for i, a in enumerate(args))
        kwargs = {k: _source_apart(name, fn, self, a, args, kwargs) for k, a in kwargs.items()}
        return run_inplace(name, fn, self, *args, **kwargs)
    method.__name__ = name
    return method


def _source_apart(name, fn, self, source, args, kwargs):
    """`source` as the out-of-place kernel may read it: itself, or where it shares memory with
    self (torch's overlap checks let a strided pair run, `g.scatter_add_(1, i, g[:, 4:])`) a
    clone when none of the elements it reads is written: torch's loop reads them unwritten,
    as the kernel does. Where one is, torch's values depend on the order of its writes (and
    on its vector width): refused, as this kernel does not reproduce them."""
    if not isinstance(source, Tensor) or not shares_elements(memory_of(source),
                                                             memory_of(self)):
        return source
    data, read = memory_of(self), memory_of(source)
    if data is self._data and read is source._data and data.itemsize == read.itemsize:
        if name.startswith("scatter"):  # (its kernel reads src where the index reaches)
            index = args[1] if len(args) > 1 else kwargs.get("index")
            read = read[tuple(slice(0, n) for n in index.shape)]
        written = addresses(data)[_written(fn, self, source, args, kwargs)]
        if not np.isin(addresses(read), written).any():
            return source.clone()
    raise NotImplementedError(
        f"{name}: the source (shape {tuple(source.shape)}) shares memory with the tensor "
        f"written (shape {tuple(self.shape)}), and some of the elements it reads are written: "
        f"torch runs this, but its result then depends on the order of its writes; pass "
        f"source.clone()")


def _written(fn, self, source, args, kwargs):
    """Which elements of self the op writes (a bool array of self's shape): the op run on
    markers, self 0.5 and the source 2 (-2 for amin), under no_grad."""
    amin = "amin" in args or kwargs.get("reduce") == "amin"
    marker = full(tuple(source.shape), -2.0 if amin else 2.0, dtype=float64)
    swap = lambda a: marker if a is source else a  # noqa: E731
    kwargs = {k: 1 if k == "alpha" else swap(a) for k, a in kwargs.items()}
    with no_grad():
        out = fn(full(tuple(self.shape), 0.5, dtype=float64), *map(swap, args), **kwargs)
    return out._data != 0.5


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
