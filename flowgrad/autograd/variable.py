"""torch.autograd.Variable, the name tensors had before they carried autograd themselves:
`Variable(t, requires_grad=...)` is t detached (sharing its storage) requiring grad as
asked, and every tensor is a Variable, as in torch.

>>> import flowgrad as flow
>>> from flowgrad.autograd import Variable
>>> v = Variable(flow.ones(2), requires_grad=True)
>>> v.requires_grad, isinstance(flow.ones(1), Variable)
(True, True)
"""
from __future__ import annotations

from .._warn import warn
from ..tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """Legacy: `Variable(data, requires_grad=False)` returns `data.detach()` with
    requires_grad set (`volatile` has no effect, as in torch)."""

    def __new__(cls, data, requires_grad=False, volatile=False):
        if volatile:
            warn("volatile was removed and now has no effect. Use `with torch.no_grad():` "
                 "instead.")
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got "
                            f"{type(data).__name__}")
        return data.detach().requires_grad_(bool(requires_grad))
