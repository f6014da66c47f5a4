"""torch.overrides: the `__torch_function__` protocol, for Tensor subclasses and tensor-likes.

A Tensor subclass sees every flowgrad function and Tensor method called on it through its
`__torch_function__(func, types, args, kwargs)`; the default one (`Tensor.__torch_function__`)
runs `func` with the protocol off and gives results the subclass's type, as torch's. An object
of any other class with a `__torch_function__` (a tensor-like) gets the calls that fail on it.

Where it hooks in, at no cost to plain tensors:
- public functions (`flow.add`, `F.linear`, `flow.linalg.*`) and the guarded Tensor methods:
  the argument guard (`errors.guarded`) calls `dispatch` once a subclass that dispatches
  exists (`errors.EVERY_CALL`), and tries it on a call that failed otherwise;
- the methods, operators and properties of such a subclass's instances: wrappers put on the
  subclass when it is defined (`_subclass_defined`), which Python's reflected-operator rule
  also picks for `plain + sub`;
- the backward engine runs the gradient rules with the protocol off (`engine._run`), as
  torch's C++ backward does: rules see the tensors, not the user's override.

- a `TorchFunctionMode` sees every call while entered, plain tensors' and factories' too:
  entering the first one turns the guards' check on and puts dispatching forms of Tensor's
  unguarded methods, operators and properties on Tensor (`_ModeMethod`: read from the class
  they are still the methods themselves), which leaving the last one takes off again.

`nn.Parameter` and `nn.Buffer` opt out (`_disabled_torch_function_impl`), as torch's: ops on
them give plain tensors. Not here: `__torch_dispatch__` (flowgrad has no dispatcher below the
Python functions).

>>> import flowgrad as flow
>>> class Tagged(flow.Tensor):
...     pass
>>> t = flow.ones(2).as_subclass(Tagged)
>>> type(t + 1).__name__, type(flow.exp(t)).__name__, type(t.sum()).__name__
('Tagged', 'Tagged', 'Tagged')
"""
from __future__ import annotations

import functools
import threading
import types

from . import errors
from .tensor import Tensor

__all__ = ["TorchFunctionMode", "BaseTorchFunctionMode", "handle_torch_function",
           "has_torch_function", "has_torch_function_unary",
           "has_torch_function_variadic", "is_tensor_like", "get_default_nowrap_functions",
           "is_tensor_method_or_property", "get_ignored_functions"]


class _State(threading.local):
    """The protocol's switches, per thread as torch's (a backward in one thread leaves
    another thread's calls dispatching)."""

    def __init__(self):
        self.subclasses_off = 0  # > 0 inside DisableTorchFunctionSubclass
        self.all_off = 0  # > 0 inside DisableTorchFunction and the engine's runs


_STATE = _State()
_SUBCLASSED = []  # non-empty once a dispatching subclass was defined (EVERY_CALL stays on)
NOT_HANDLED = errors.NOT_HANDLED
_MODES = []  # the TorchFunctionMode stack, innermost last (one per process, torch's per thread)


class _Switch:
    """A context manager turning one of the thread's switches (`_State`'s `_field`) on."""

    _field = ""

    def __enter__(self):
        setattr(_STATE, self._field, getattr(_STATE, self._field) + 1)
        return self

    def __exit__(self, *exc):
        setattr(_STATE, self._field, getattr(_STATE, self._field) - 1)
        return False


class DisableTorchFunctionSubclass(_Switch):
    """Context manager (torch._C.DisableTorchFunctionSubclass): inside it, no subclass's
    `__torch_function__` is called (functions run on subclasses as on plain tensors); the
    active TorchFunctionModes still see the calls."""

    _field = "subclasses_off"


class DisableTorchFunction(_Switch):
    """Context manager (torch._C.DisableTorchFunction): the protocol off, modes included."""

    _field = "all_off"


def _disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """The `__torch_function__` of a class that opts out (nn.Parameter's): calls on it run as
    on a plain tensor and results keep the types the function gives."""
    with DisableTorchFunctionSubclass():
        return func(*args, **(kwargs or {}))


_NOWRAP = frozenset((Tensor._base.__get__, Tensor.grad.__get__))


def get_default_nowrap_functions():
    """The functions whose results `Tensor.__torch_function__` hands out as they are (the
    `.grad` and `._base` getters), as torch's."""
    return set(_NOWRAP)


def get_ignored_functions():
    """The public functions that never dispatch (torch lists its factories and utilities
    here; flowgrad's factories take no tensor to dispatch on): an empty set."""
    return set()


def _convert(result, cls):
    """`result` with each tensor in it of type `cls` (an alias, as torch's `as_subclass`)."""
    if isinstance(result, Tensor):
        return result if isinstance(result, cls) else result.as_subclass(cls)
    if isinstance(result, (tuple, list)):
        items = [_convert(r, cls) for r in result]
        if hasattr(result, "_make"):  # (return_types: max, sort, ...)
            return result._make(items)
        return type(result)(items)
    return result


def _torch_function(cls, func, types, args=(), kwargs=None):
    """Tensor.__torch_function__: `func(*args, **kwargs)` with the protocol off, its tensors
    made instances of `cls`; NotImplemented when some type in `types` is no base of `cls`
    (another subclass handles the call then)."""
    if kwargs is None:
        kwargs = {}
    if _STATE.subclasses_off or _STATE.all_off or not all(issubclass(cls, t) for t in types):
        # (called with the protocol off: by another library's dispatch, torch's given a
        # flowgrad tensor, which must fail as a type error, not recurse)
        return NotImplemented
    with DisableTorchFunctionSubclass():
        result = func(*args, **kwargs)
        if cls is Tensor or func in _NOWRAP:
            return result
        return _convert(result, cls)


def _handler(obj):
    """The `__torch_function__` of obj's class when it dispatches (None for a plain tensor,
    a Parameter and any class without one)."""
    cls = type(obj)
    if cls is Tensor:
        return None
    method = getattr(cls, "__torch_function__", None)
    if method is None or method is _disabled_torch_function_impl:
        return None
    return method


def _add_overloaded(found, obj):
    if _handler(obj) is None:
        return
    cls = type(obj)
    for i, other in enumerate(found):
        if type(other) is cls:
            return
        if issubclass(cls, type(other)):  # a subclass before its base, as torch's order
            found.insert(i, obj)
            return
    found.append(obj)


def _overloaded_args(args, kwargs):
    found = []
    for value in (*args, *kwargs.values()):
        if value.__class__ is Tensor or value is None:
            continue
        if isinstance(value, (list, tuple)):
            for item in value:
                _add_overloaded(found, item)
        else:
            _add_overloaded(found, value)
    return found


def _call_overrides(func, overloaded, args, kwargs):
    types = tuple(type(a) for a in overloaded)
    for obj in overloaded:
        result = obj.__torch_function__(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    raise TypeError(f"no implementation found for '{name}' on types that implement "
                    f"__torch_function__: {[t for t in types]}")


def dispatch(func, args, kwargs):
    """`func(*args, **kwargs)` through the innermost TorchFunctionMode, else the
    `__torch_function__` of the subclasses and tensor-likes among the arguments (and one level
    into lists and tuples: `cat`), or NOT_HANDLED when there are none or the protocol is
    off."""
    if _STATE.all_off:
        return NOT_HANDLED
    if _MODES:
        return _through_mode(func, _overloaded_args(args, kwargs), args, kwargs)
    if _STATE.subclasses_off:
        return NOT_HANDLED
    overloaded = _overloaded_args(args, kwargs)
    if not overloaded:
        return NOT_HANDLED
    return _call_overrides(func, overloaded, args, kwargs)


def dispatch_on(func, relevant, args, kwargs):
    """`dispatch` looking for overrides among `relevant` alone (autograd.grad's outputs and
    inputs, as torch's)."""
    if _STATE.all_off:
        return NOT_HANDLED
    found = []
    for obj in relevant:
        _add_overloaded(found, obj)
    if _MODES:
        return _through_mode(func, found, args, kwargs)
    if _STATE.subclasses_off or not found:
        return NOT_HANDLED
    return _call_overrides(func, found, args, kwargs)


def _through_mode(func, overloaded, args, kwargs):
    """The innermost mode's __torch_function__, run with that mode off (calls it makes go to
    the modes outside it, then the subclasses); the subclasses' when it says NotImplemented."""
    mode = _MODES.pop()
    try:
        result = mode.__torch_function__(func, tuple(type(a) for a in overloaded), args,
                                         kwargs)
    finally:
        _MODES.append(mode)
    if result is not NotImplemented:
        return result
    if _STATE.subclasses_off or not overloaded:
        return NOT_HANDLED
    return _call_overrides(func, overloaded, args, kwargs)


def has_torch_function(relevant_args) -> bool:
    """Whether any object of `relevant_args` (a tuple) dispatches through __torch_function__.

    >>> import flowgrad as flow
    >>> has_torch_function((flow.ones(1),))
    False
    """
    return not _STATE.all_off and (bool(_MODES) or not _STATE.subclasses_off and any(
        _handler(a) is not None for a in relevant_args))


def has_torch_function_unary(obj) -> bool:
    """`has_torch_function((obj,))`."""
    return has_torch_function((obj,))


def has_torch_function_variadic(*args) -> bool:
    """`has_torch_function(args)`."""
    return has_torch_function(args)


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Call `public_api` through the `__torch_function__` of the objects in `relevant_args`
    that have one (a user function made overridable, as torch's).

    >>> import flowgrad as flow
    >>> class Tagged(flow.Tensor):
    ...     pass
    >>> def double(x):
    ...     if has_torch_function_unary(x):
    ...         return handle_torch_function(double, (x,), x)
    ...     return x * 2
    >>> type(double(flow.ones(1).as_subclass(Tagged))).__name__
    'Tagged'
    """
    handled = dispatch_on(public_api, relevant_args, args, kwargs)
    return public_api(*args, **kwargs) if handled is NOT_HANDLED else handled


def is_user_subclass(t) -> bool:
    """Whether `t` is a tensor of a Tensor subclass that dispatches (the user's own, not
    Parameter or Buffer): checkpoints record its type, as torch.save's."""
    return isinstance(t, Tensor) and _handler(t) is not None


def is_tensor_like(inp) -> bool:
    """Whether `inp` is a Tensor or has a `__torch_function__` (torch's test)."""
    return isinstance(inp, Tensor) or hasattr(type(inp), "__torch_function__")


def is_tensor_method_or_property(func) -> bool:
    """Whether `func` is a method or property getter of Tensor (its first argument is the
    tensor), as torch's."""
    return func in _method_originals().values() or \
        getattr(func, "__self__", None) in _properties().values()


# ---- the methods of a subclass that dispatches ------------------------------------------------
_NO_DISPATCH = frozenset((
    "as_subclass", "tolist", "item", "numpy", "data_ptr", "dim", "ndimension", "numel",
    "nelement", "size", "stride", "element_size", "is_contiguous", "is_complex",
    "is_floating_point", "is_signed", "get_device", "storage_offset", "register_hook",
    "register_post_accumulate_grad_hook", "retain_grad", "requires_grad_", "backward",
    "untyped_storage", "storage"))
# torch's operators go through __torch_function__ too, most as the method of the same
# computation (`t + 1` as Tensor.add, `2 * t` as Tensor.mul(t, 2)); `plain @ t` is
# matmul(plain, t). __iter__ does not dispatch (torch's neither: gh-54457); its unbind does.
_OPERATORS = {
    "__add__": "add", "__radd__": "add", "__sub__": "sub", "__rsub__": None, "__mul__": "mul",
    "__rmul__": "mul", "__truediv__": "div", "__rtruediv__": None, "__floordiv__": None,
    "__rfloordiv__": None, "__mod__": "remainder", "__rmod__": None, "__pow__": "pow",
    "__rpow__": None, "__matmul__": "matmul", "__rmatmul__": "matmul", "__neg__": "neg",
    "__pos__": "positive", "__abs__": "abs", "__invert__": None, "__and__": None,
    "__rand__": "bitwise_and", "__or__": None, "__ror__": "bitwise_or", "__xor__": None,
    "__rxor__": "bitwise_xor", "__lshift__": None, "__rlshift__": None, "__rshift__": None,
    "__rrshift__": None, "__eq__": None, "__ne__": "ne", "__lt__": "lt", "__le__": "le",
    "__gt__": "gt", "__ge__": "ge", "__iadd__": "add_", "__isub__": "sub_",
    "__imul__": "mul_", "__itruediv__": "div_", "__ifloordiv__": None, "__imod__": None,
    "__ipow__": None, "__iand__": None, "__ior__": None, "__ixor__": None, "__ilshift__": None,
    "__irshift__": None, "__getitem__": None, "__setitem__": None, "__reversed__": None}
_PROPERTY_NAMES = ("T", "mT", "H", "mH", "real", "imag", "data")


_ON_TENSOR = {}  # name -> (the dispatching wrapper put on Tensor while a mode is active, the
#                  attribute it replaced)


def _method_originals():
    """name -> Tensor's method (the one a mode's wrapper replaced, while a mode is active);
    read afresh each time: autocast replaces some of them when first entered."""
    found = {}
    for name, value in vars(Tensor).items():
        if name in _ON_TENSOR:
            value = _ON_TENSOR[name][1]
        if callable(value) and not isinstance(value, (type, classmethod, staticmethod)) and \
                (not name.startswith("_") or name in _OPERATORS) and name not in _NO_DISPATCH:
            found[name] = value
    return found


def _properties():
    """name -> Tensor's property, for the properties that dispatch (as _method_originals)."""
    found = {}
    for name in _PROPERTY_NAMES:
        value = _ON_TENSOR[name][1] if name in _ON_TENSOR else vars(Tensor).get(name)
        if isinstance(value, property):
            found[name] = value
    return found


def _dispatching_method(original, name):
    """`original(self, ...)` through the active mode and the overrides, which are told the
    public method torch names (Tensor.add for `__add__`; `plain @ t` as matmul(plain, t))."""
    public = _OPERATORS.get(name) or name
    swapped = name == "__rmatmul__"
    equality = name in ("__eq__", "__ne__")

    def method(self, *args, **kwargs):
        if equality and not _comparable(args[0]):
            return NotImplemented  # (t == None is False, as Python's default and torch's)
        operands = (args[0], self, *args[1:]) if swapped else (self, *args)
        # (the method as Tensor has it now: a mode's wrapper while one is active, which an
        # override compares with `torch.Tensor.add` there)
        handled = dispatch(getattr(Tensor, public), operands, kwargs)
        return original(self, *args, **kwargs) if handled is NOT_HANDLED else handled
    functools.update_wrapper(method, original)
    method._dispatches = True
    return method


def _comparable(other):
    """Whether `t == other` compares elementwise (Tensor.__eq__'s test in ops/operators.py)."""
    return isinstance(other, (Tensor, int, float, complex)) or hasattr(other, "__array__")


def _dispatching_property(prop):
    getter = prop.__get__

    def get(self):
        handled = dispatch(getter, (self,), {})
        return getter(self) if handled is NOT_HANDLED else handled
    return property(get, prop.fset, prop.fdel, prop.__doc__)


def _subclass_defined(cls, **kwargs):
    """Tensor.__init_subclass__: a subclass that dispatches gets a dispatching wrapper for
    each method, operator and property it does not define itself, and from then on the
    public functions look for subclasses among their arguments."""
    super(Tensor, cls).__init_subclass__(**kwargs)
    if getattr(cls, "__torch_function__") is _disabled_torch_function_impl:
        return
    if not _SUBCLASSED:
        _SUBCLASSED.append(True)
    if not errors.EVERY_CALL:
        errors.EVERY_CALL.append(dispatch)
    for name, original in _method_originals().items():
        if _inherited_from_tensor(cls, name, original):
            setattr(cls, name, _dispatching_method(original, name))
    for name, prop in _properties().items():
        if _inherited_from_tensor(cls, name, prop):
            setattr(cls, name, _dispatching_property(prop))


def _inherited_from_tensor(cls, name, original):
    """Whether cls's attribute `name` is Tensor's (not overridden, nor wrapped by a base)."""
    inherited = getattr(cls, name, None)  # (a _ModeMethod reads as the method itself)
    return inherited is original or name in _ON_TENSOR and inherited is _ON_TENSOR[name][0]


# ---- torch function modes ---------------------------------------------------------------------
class TorchFunctionMode:
    """torch.overrides.TorchFunctionMode: while entered (`with Mode():`), every flowgrad
    function and Tensor method called, on any tensors and by factories too, goes to the
    mode's `__torch_function__(func, types, args, kwargs)` instead, with the mode off while
    it runs (what it calls goes to the modes outside it, then to subclasses). The backward
    engine's rules do not (torch's C++ backward). Modes nest; the innermost sees a call
    first.

    >>> import flowgrad as flow
    >>> class Count(TorchFunctionMode):
    ...     calls = 0
    ...     def __torch_function__(self, func, types, args=(), kwargs=None):
    ...         Count.calls += 1
    ...         return func(*args, **(kwargs or {}))
    >>> with Count():
    ...     y = flow.ones(2) + 1
    >>> Count.calls, y.tolist()
    (2, [2.0, 2.0])
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError

    def __enter__(self):
        _push_mode(self)
        return self

    def __exit__(self, *exc):
        _pop_mode(self)
        return False


class BaseTorchFunctionMode(TorchFunctionMode):
    """A mode whose `__torch_function__` calls the function as it is (torch's base for modes
    that override only some functions)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _ModeMethod:
    """A Tensor method while a mode is active: called on a tensor, its dispatching wrapper;
    read from the class (`torch.Tensor.exp`, what an override compares `func` with), the
    method itself, so the function a mode is told is the one users name, in it or after."""

    __slots__ = ("original", "wrapper")

    def __init__(self, original, name):
        self.original = original
        self.wrapper = _dispatching_method(original, name)

    def __get__(self, obj, owner=None):
        return self.original if obj is None else types.MethodType(self.wrapper, obj)


def _push_mode(mode):
    if not _MODES:  # plain tensors' methods, operators and properties dispatch while in it
        # (a guarded method dispatches in its guard already)
        wrappers = {name: _ModeMethod(original, name)
                    for name, original in _method_originals().items()
                    if not getattr(original, "_guarded", False)}
        wrappers.update((name, _dispatching_property(prop))
                        for name, prop in _properties().items())
        for name, wrapper in wrappers.items():
            _ON_TENSOR[name] = (wrapper, vars(Tensor)[name])
            setattr(Tensor, name, wrapper)
        if not errors.EVERY_CALL:
            errors.EVERY_CALL.append(dispatch)
    _MODES.append(mode)


def _pop_mode(mode):
    if not _MODES or _MODES[-1] is not mode:
        raise RuntimeError("TorchFunctionMode: exited a mode that is not the innermost one "
                           "entered; exit modes in the reverse order of entering them")
    _MODES.pop()
    if not _MODES:
        for name, (_, original) in _ON_TENSOR.items():
            setattr(Tensor, name, original)
        _ON_TENSOR.clear()
        if not _SUBCLASSED:
            errors.EVERY_CALL.clear()


def _get_current_function_mode():
    """The innermost active TorchFunctionMode, or None."""
    return _MODES[-1] if _MODES else None


def _get_current_function_mode_stack():
    """The active TorchFunctionModes, outermost first."""
    return list(_MODES)


def _as_subclass(self, cls):
    """The same elements as a tensor of the Tensor subclass `cls` (its __init__ not run), an
    alias in autograd as torch's: gradients flow through it to `self`. It calls no
    `__torch_function__` (an override may call it to unwrap its arguments).

    >>> import flowgrad as flow
    >>> class Scaled(flow.Tensor):
    ...     pass
    >>> type(flow.ones(2).as_subclass(Scaled)).__name__
    'Scaled'
    """
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass(): argument 'cls' must be a subclass of Tensor, got "
                        f"{cls!r}")
    with DisableTorchFunction():
        alias = Tensor.view(self, self.shape)
    out = object.__new__(cls)
    for slot in ("_data", "_meta", "_grad_fn", "_counter", "_view"):
        setattr(out, slot, getattr(alias, slot))
    return out


def _make_subclass(cls, data, require_grad=False, **ignored):
    """Tensor._make_subclass: a new leaf of the Tensor subclass `cls` over `data`'s storage
    (its __init__ not run), requiring grad as asked; how torch's Parameter-like classes are
    built in `__new__`.

    >>> import flowgrad as flow
    >>> class Tagged(flow.Tensor):
    ...     pass
    >>> t = flow.Tensor._make_subclass(Tagged, flow.ones(2), True)
    >>> type(t).__name__, t.requires_grad, t.is_leaf
    ('Tagged', True, True)
    """
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"_make_subclass(): cls must be a subclass of Tensor, got {cls!r}")
    if not isinstance(data, Tensor):
        raise TypeError(f"_make_subclass(): data must be a Tensor, got {type(data).__name__}")
    t = object.__new__(cls)
    t._data = data._data
    t._meta = None
    t._grad_fn = None
    t._counter = data._counter
    t._view = None
    token = getattr(data, "_lvl", None)
    if token is not None:  # (made inside func transforms: at data's level, as torch's)
        t._lvl = token
    if require_grad:
        t._set_requires_grad(True)
    return t


Tensor.__torch_function__ = classmethod(_torch_function)
Tensor.__init_subclass__ = classmethod(_subclass_defined)
Tensor._make_subclass = staticmethod(_make_subclass)
Tensor.as_subclass = _as_subclass
errors.DISPATCH.append(dispatch)
