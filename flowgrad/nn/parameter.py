"""nn.Parameter: a leaf tensor that a Module registers as one of its parameters."""
from __future__ import annotations

from ..autograd.interpreter import check_read
from ..overrides import _disabled_torch_function_impl, is_user_subclass
from ..tensor import Tensor, attributes_of


def _sharing(cls, data, requires_grad):
    """A new `cls` leaf over `data`'s storage and version counter (empty when data is None),
    requiring grad as asked: how Parameter, Buffer and the lazy placeholders wrap a tensor."""
    if data is None:
        from ..ops.creation import empty

        data = empty(0)
    return Tensor._make_subclass(cls, data, requires_grad)


def _rebuild_parameter(data, requires_grad, state=None):
    p = Parameter(data, requires_grad)
    if state:
        p.__dict__.update(state)
    return p


class _ParameterMeta(type):
    """isinstance(t, Parameter) is also True for a tensor of a dispatching Tensor subclass
    made a parameter (`Parameter(custom)` keeps its type and marks it `_is_param`), as
    torch's."""

    def __instancecheck__(cls, instance):
        if cls is Parameter and getattr(instance, "_is_param", False) and \
                isinstance(instance, Tensor):
            return True
        return super().__instancecheck__(instance)


class Parameter(Tensor, metaclass=_ParameterMeta):
    """A Tensor that requires grad by default and is collected by `Module.parameters()`.

    Shares storage with the tensor it wraps, as torch's does.

    >>> import flowgrad as flow
    >>> p = flow.nn.Parameter(flow.zeros(2))
    >>> p.requires_grad, p.is_leaf
    (True, True)
    """

    __torch_function__ = _disabled_torch_function_impl  # (ops on it give plain tensors)

    def __new__(cls, data=None, requires_grad=True):
        if data is not None and is_user_subclass(data):
            # a tensor of a subclass with its own __torch_function__ stays of its type,
            # marked a parameter, as torch's
            t = data.detach().requires_grad_(requires_grad)
            if type(t) is not type(data):
                raise RuntimeError(
                    f"Creating a Parameter from an instance of type {type(data).__name__} "
                    f"requires that detach() returns an instance of the same type, but "
                    f"return type {type(t).__name__} was found instead; make its "
                    f"__torch_function__ keep the type for detach()")
            t._is_param = True
            return t
        return _sharing(cls, data, requires_grad)

    def __init__(self, data=None, requires_grad=True):
        pass  # everything happens in __new__

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def _reduce(self):  # (a user's attributes too, as torch's _rebuild_parameter_with_state)
        return _rebuild_parameter, (Tensor._wrap(self._data), self.requires_grad,
                                    attributes_of(self))

    def __deepcopy__(self, memo):  # (torch's: a clone in the same layout, no attributes)
        check_read(self, "copy.deepcopy()")
        p = Parameter(Tensor._wrap(self._data.copy(order="K")), self.requires_grad)
        memo[id(self)] = p
        return p


class Buffer(Tensor):
    """A tensor that a Module registers as a buffer when assigned as an attribute (torch's
    `nn.Buffer`): `self.steps = nn.Buffer(flow.zeros(()))` is `register_buffer("steps", ...)`;
    `persistent=False` keeps it out of `state_dict`. Shares storage with `data`.

    >>> import flowgrad as flow
    >>> m = flow.nn.Module()
    >>> m.steps = flow.nn.Buffer(flow.zeros(()), persistent=False)
    >>> list(dict(m.named_buffers())), list(m.state_dict())
    (['steps'], [])
    """

    __slots__ = ("persistent",)
    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, data=None, *, persistent=True):
        if data is not None and not isinstance(data, Tensor):
            raise TypeError(f"nn.Buffer: expected a Tensor, got {type(data).__name__}")
        b = _sharing(cls, data, data is not None and data.requires_grad)
        b.persistent = bool(persistent)
        return b

    def __init__(self, data=None, *, persistent=True):
        pass  # everything happens in __new__

    def _reduce(self):
        return Tensor._wrap(self._data)._reduce()

    def __deepcopy__(self, memo):
        check_read(self, "copy.deepcopy()")
        b = Buffer(Tensor._wrap(self._data.copy(order="K")), persistent=self.persistent)
        if self.requires_grad:
            b.requires_grad_(True)
        memo[id(self)] = b
        return b


# ---- lazy modules' placeholders --------------------------------------------------------------
_UNINITIALIZED = (
    "Can't access the shape of an uninitialized parameter or buffer. This error usually "
    "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
    "initialized one. Call `forward` to initialize the parameters before accessing their "
    "attributes.")


class UninitializedTensorMixin:
    """A lazy module's parameter or buffer before its first forward: no shape yet (reading it
    raises) until `materialize(shape)` gives it storage and makes it a plain `cls_to_become`
    (the same object: optimizers and hooks holding it see the change)."""

    __slots__ = ()
    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        """Give the placeholder an (uninitialised) array of `shape`, in `dtype` (by default
        the dtype it was made with, or was cast to by `Module.to`)."""
        from ..ops.creation import empty

        dtype = dtype if dtype is not None else self.dtype
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self._data = empty(shape, dtype=dtype, device=device)._data
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(_UNINITIALIZED)

    def size(self, dim=None):
        raise RuntimeError(_UNINITIALIZED)

    def dim(self):
        raise RuntimeError(_UNINITIALIZED)

    def numel(self):
        raise RuntimeError(_UNINITIALIZED)

    ndim = property(dim)

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def __reduce_ex__(self, protocol):
        return (type(self), (self.requires_grad, None, self.dtype))

    def __deepcopy__(self, memo):
        copy = type(self)(self.requires_grad, None, self.dtype)
        memo[id(self)] = copy
        return copy


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A lazy module's parameter before its first forward (torch's); becomes a Parameter.

    >>> import flowgrad as flow
    >>> p = flow.nn.UninitializedParameter()
    >>> p.materialize((2, 3))
    >>> type(p).__name__, tuple(p.shape)
    ('Parameter', (2, 3))
    """

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        from ..ops.creation import empty

        p = Parameter.__new__(cls, empty(0, dtype=dtype, device=device), requires_grad)
        return p

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A lazy module's buffer before its first forward (torch's); becomes a Tensor."""

    __slots__ = ()
    __torch_function__ = _disabled_torch_function_impl
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        from ..ops.creation import empty

        return _sharing(cls, empty(0, dtype=dtype, device=device), requires_grad)

    def __init__(self, requires_grad=False, device=None, dtype=None):
        pass


def is_lazy(param):
    """Whether `param` is a lazy module's placeholder not yet materialized."""
    return isinstance(param, UninitializedTensorMixin)
