"""Parametrizations of a module's tensors, as torch.nn.utils.parametrize: after
`register_parametrization(module, "weight", P())`, `module.weight` is computed as
`P()(original)` each time it is read, and the trained tensor is
`module.parametrizations.weight.original` (state dict keys as torch's).

The module's class is swapped for a subclass holding one property per parametrized name,
as torch does, so reading `module.weight` runs the parametrization.

>>> import flowgrad as flow
>>> from flowgrad import nn
>>> class Symmetric(nn.Module):
...     def forward(self, X):
...         return X.triu() + X.triu(1).transpose(-1, -2)
>>> m = nn.Linear(3, 3)
>>> _ = register_parametrization(m, "weight", Symmetric())
>>> bool((m.weight == m.weight.T).all())
True
>>> sorted(m.state_dict())
['bias', 'parametrizations.weight.original']
"""
from __future__ import annotations

import contextlib
import copy

from ...autograd.grad_mode import no_grad
from ...tensor import Tensor
from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized",
           "cached", "ParametrizationList", "type_before_parametrizations",
           "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """Inside this context a parametrized tensor is computed once per module and name."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _as_original(value, like):
    """Wrap a right_inverse result as a Parameter when the original was one."""
    if isinstance(like, Parameter):
        return Parameter(value.detach(), like.requires_grad)
    return value.detach()


def _set(dest, src):
    """torch's dest.set_(src): `dest` stays the same object (an optimizer made before
    (un)registering keeps training the tensor in use) and takes the storage of `src`, so
    tensors computed from the old values keep them."""
    dest.data = src.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor and its `original` (or `original0`,
    `original1`, ... when the first right_inverse returns several tensors)."""

    def __init__(self, modules, original, unsafe=False):
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        with no_grad():
            new = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:  # as torch: keep the tensor as it is
                        pass
        if not isinstance(new, (Tensor, list, tuple)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != original.dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change "
                                 f"the dtype.\noriginal.dtype: {original.dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            if new is not original:
                _set(original, new)
            self._register("original", original)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of the "
                                     f"sequence with type {type(t).__name__}.")
                self._register(f"original{i}", _as_original(t, original))
        if not unsafe:
            with no_grad():
                _check_unchanged(self(), shape, dtype, "unparametrized", "parametrized")

    def _register(self, name, value):
        if isinstance(value, Parameter):
            self.register_parameter(name, value)
        else:
            self.register_buffer(name, value)

    def right_inverse(self, value):
        """Set the originals so that the parametrized tensor becomes `value`."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(
                        f"parametrization {type(module).__name__} does not implement "
                        "right_inverse: assigning to a parametrized tensor needs one (define "
                        "right_inverse(value) returning the original for `value`)")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                _set(self.original, value)
            else:
                if len(value) != self.ntensors:
                    raise ValueError("'right_inverse' must return a sequence of tensors of "
                                     f"length {self.ntensors}. Got a sequence of length "
                                     f"{len(value)}.")
                for i, t in enumerate(value):
                    original = getattr(self, f"original{i}")
                    if not isinstance(t, Tensor):
                        raise ValueError(f"'right_inverse' must return a sequence of tensors. "
                                         f"Got element {i} of type {type(t).__name__}.")
                    if t.dtype != original.dtype:
                        raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype "
                                         f"{t.dtype} while `original{i}` has dtype "
                                         f"{original.dtype}")
                    _set(original, t)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _check_unchanged(value, shape, dtype, before, after):
    """torch's checks of a safe (unsafe=False) parametrization: a tensor, of the
    unparametrized tensor's dtype and shape."""
    if not isinstance(value, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(value).__name__}.")
    if value.dtype != dtype:
        raise ValueError("Registering a parametrization may not change the dtype of the tensor, "
                         f"unless `unsafe` flag is enabled.\n{before} dtype: {dtype}\n{after} "
                         f"dtype: {value.dtype}")
    if tuple(value.shape) != shape:
        raise ValueError("Registering a parametrization may not change the shape of the tensor, "
                         f"unless `unsafe` flag is enabled.\n{before} shape: {shape}\n{after} "
                         f"shape: {tuple(value.shape)}")


def _get(module, name):
    if _cache_enabled:
        key = (id(module), name)
        if key not in _cache:
            _cache[key] = module.parametrizations[name]()
        return _cache[key]
    return module.parametrizations[name]()


def _refuse_pickle(self):
    raise RuntimeError(
        "Serialization of parametrized modules is only supported through state_dict(). See:\n"
        "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
        "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training")


def _deepcopy(self, memo):
    """A plain deepcopy (what __getstate__'s refusal would stop), as torch's."""
    replica = memo.get(id(self))
    if replica is None:
        replica = memo[id(self)] = self.__new__(type(self))
        replica.__dict__ = copy.deepcopy(self.__dict__, memo)
    return replica


def _inject(module, name):
    cls = type(module)
    if not getattr(cls, "_is_parametrized_class", False):
        # (the class is made here, so pickle cannot find it by name: torch refuses with a
        # RuntimeError pointing at state_dict, and deepcopies)
        extra = {} if hasattr(cls, "__deepcopy__") else {"__deepcopy__": _deepcopy}
        cls = type(f"Parametrized{cls.__name__}", (cls,), {
            "_is_parametrized_class": True, "_original_class": cls,
            "__getstate__": _refuse_pickle, **extra})
        module.__class__ = cls
    setattr(cls, name, property(lambda self: _get(self, name),
                                lambda self, value: self.parametrizations[name]
                                .right_inverse(value)))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make `module.<tensor_name>` computed by `parametrization` from a stored original;
    a second call on the same name chains the parametrizations. See the module example."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            with no_grad():
                y = getattr(module, tensor_name)
                x = parametrization(y)
                _check_unchanged(x, tuple(y.shape), y.dtype, f"module.{tensor_name}",
                                 f"parametrization(module.{tensor_name})")
                if hasattr(parametrization, "right_inverse"):
                    try:
                        z = parametrization.right_inverse(x)
                    except NotImplementedError:
                        z = None
                    if z is not None:
                        _check_unchanged(z, tuple(y.shape), y.dtype, f"module.{tensor_name}",
                                         "parametrization.right_inverse(...)")
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    original = getattr(module, tensor_name)
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = plist
    _inject(module, tensor_name)
    return module


def is_parametrized(module, tensor_name=None):
    """Whether `module` has parametrizations (on `tensor_name`, if given)."""
    plist = module.__dict__["_modules"].get("parametrizations")
    if plist is None or not isinstance(plist, ModuleDict):
        return False
    return len(plist) > 0 if tensor_name is None else tensor_name in plist._modules


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Drop the parametrizations of `tensor_name`; the tensor becomes a plain parameter
    again, holding the parametrized value (or the original with leave_parametrized=False)."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
            if value.dtype != original.dtype:  # (torch's set_ keeps the dtype: it raises)
                raise RuntimeError(
                    f"remove_parametrizations(leave_parametrized=True): the parametrized "
                    f"{tensor_name} is {value.dtype} but its original is {original.dtype}; "
                    f"the original keeps its dtype, so it cannot take the value. Pass "
                    f"leave_parametrized=False, or make the parametrization keep the dtype")
            _set(original, value)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                             "that is parametrized in terms of a sequence of tensors.")
        # computed with autograd on, as torch: the new tensor is a trainable Parameter when
        # the parametrized value required grad (weight_norm's g and v do), else a buffer
        value = getattr(module, tensor_name)
        original = Parameter(value.detach()) if value.requires_grad else value.detach()
    cls = type(module)
    delattr(cls, tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(original, Parameter):
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = cls._original_class
    return module


def type_before_parametrizations(module):
    """The module's class before parametrizations swapped it."""
    cls = type(module)
    return cls._original_class if getattr(cls, "_is_parametrized_class", False) else cls


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Register the parametrizations of `from_module` (all, or `tensor_name`'s) on
    `to_module` too, as torch's: the same parametrization modules, appended to any it has,
    and the same original tensors (shared, not copied: training one module trains the
    other); a tensor `to_module` lacks is first set to the parametrized value. Nothing
    happens when `from_module` is not parametrized."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        plist = from_module.parametrizations[name]
        for p in plist:
            register_parametrization(to_module, name, p)
        target = to_module.parametrizations[name]
        if hasattr(plist, "original"):
            target.original = plist.original
        else:
            for i in range(plist.ntensors):
                setattr(target, f"original{i}", getattr(plist, f"original{i}"))
    return to_module
