"""Named (values, indices) results of max/min/sort/topk/kthvalue/median/mode/cummax/cummin,
printed as torch prints its `torch.return_types.*`.

>>> import flowgrad as flow
>>> flow.tensor([[1.0, 5.0], [3.0, 2.0]]).max(dim=1)
flowgrad.return_types.max(
values=tensor([5., 3.]),
indices=tensor([1, 0]))
"""
from __future__ import annotations

from collections import namedtuple

_NAMES = ("max", "min", "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax",
          "cummin")


def sequence_of(kind, items):
    """A tuple or list of type `kind` holding `items` (rebuilding a nested result): a named
    tuple (topk's values and indices, linalg's results) takes them as arguments, the others
    as one iterable.

    >>> sequence_of(tuple, [3, 4]), sequence_of(list, iter([5]))
    ((3, 4), [5])
    """
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


def _make(name):
    base = namedtuple(name, ["values", "indices"])

    def __repr__(self):
        return f"flowgrad.return_types.{name}(\nvalues={self.values!r},\nindices={self.indices!r})"

    return type(name, (base,), {"__slots__": (), "__repr__": __repr__,
                                "__module__": "flowgrad.return_types"})


TYPES = {name: _make(name) for name in _NAMES}
globals().update(TYPES)  # (flowgrad.return_types.max...: where pickle finds each, as torch's)
# the other named results of torch.return_types (their ops take them from here)
histogram = namedtuple("histogram", ["hist", "bin_edges"], module=__name__)
histogramdd = namedtuple("histogramdd", ["hist", "bin_edges"], module=__name__)
aminmax = namedtuple("aminmax", ["min", "max"], module=__name__)
frexp = namedtuple("frexp", ["mantissa", "exponent"], module=__name__)


def values_indices(op_name, values, indices):
    """The named result of `op_name`: a tuple with `.values` and `.indices`."""
    return TYPES[op_name](values, indices)
