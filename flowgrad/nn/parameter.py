"""nn.Parameter: a leaf tensor that a Module registers as one of its parameters."""
from __future__ import annotations

from ..tensor import Tensor


class Parameter(Tensor):
    """A Tensor that requires grad by default and is collected by `Module.parameters()`.

    Shares storage with the tensor it wraps, as torch's does.

    >>> import flowgrad as flow
    >>> p = flow.nn.Parameter(flow.zeros(2))
    >>> p.requires_grad, p.is_leaf
    (True, True)
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            from ..ops.creation import empty

            data = empty(0)
        p = object.__new__(cls)
        p._data = data._data
        p._meta = None
        p._grad_fn = None
        p._version = data._version
        p._view = None
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass  # everything happens in __new__

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (Parameter, (Tensor._wrap(self._data), self.requires_grad))

    def __deepcopy__(self, memo):
        p = Parameter(Tensor._wrap(self._data.copy()), self.requires_grad)
        memo[id(self)] = p
        return p
