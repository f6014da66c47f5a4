"""Index ops whose output size an argument fixes instead of the data: `nonzero_static`, the
nonzero a compiled program can plan for (its output shape never depends on the values).

>>> import flowgrad as flow
>>> flow.nonzero_static(flow.tensor([0, 3, 0, 5]), size=3)
tensor([[ 1],
        [ 3],
        [-1]])
"""
from __future__ import annotations

import numbers

from ..tensor import Tensor, tensor_method
from .no_derivative import refuse_forward
from .registry import op

__all__ = ["nonzero_static"]


# complex=True: nonzero only compares with zero (a complex element is non-zero where either
# part is); no gradient, as torch (an index output)
@op("nonzero_static", differentiable=False, complex=True)
def _nonzero_static(xp, x, *, size, fill_value):
    out = xp.full((size, x.ndim), fill_value, xp.int64)
    if x.ndim:
        found = xp.stack(xp.nonzero(x != 0), axis=-1)[:size]
        out[:found.shape[0]] = found
    return out


def _int_arg(value, arg):
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, Tensor)):
        return int(value)
    raise TypeError(f"nonzero_static(): argument '{arg}' must be int, not "
                    f"{type(value).__name__} ({value!r})")


@tensor_method()
def nonzero_static(input, *, size, fill_value=-1):
    """The first `size` indices of input's non-zero elements, as nonzero(): an (size, ndim)
    int64 tensor, its rows past the non-zero count filled with `fill_value`. No gradient.

    >>> import flowgrad as flow
    >>> flow.tensor([[1.0, 0.0], [0.0, 2.0]]).nonzero_static(size=1)
    tensor([[0, 0]])
    """
    size, fill_value = _int_arg(size, "size"), _int_arg(fill_value, "fill_value")
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got "
                           f"{size}")
    out = _nonzero_static(input, size=size, fill_value=fill_value)
    refuse_forward([input], "nonzero_static")  # (no tangent to give: torch refuses a dual)
    return out
