"""torch.library: custom operators written in Python (`custom_op`), with their gradient
(`register_autograd`), a shape-only form for meta tensors (`register_fake`) and per-device
kernels (`register_kernel`), callable as the function returned or as `flowgrad.ops.<ns>.<name>`.

An op runs its kernel below autograd, as torch's: grad mode is off inside (a kernel may read
its inputs' arrays, `x.numpy()` of an input that requires grad aside: use `x.detach()`); when
an input requires grad its result is recorded as one node whose backward is the registered
formula (a `autograd.Function` made for the op), and backward without one raises, naming the
op. Results may not be, or share memory with, an input (torch refuses them too); the
arguments named in `mutates_args` get their version bumped after the call, so a saved tensor
the op wrote is caught at backward.

>>> import flowgrad as flow
>>> import numpy as np
>>> @custom_op("demo::np_sin", mutates_args=())
... def np_sin(x: flow.Tensor) -> flow.Tensor:
...     return flow.from_numpy(np.sin(x.detach().numpy()))
>>> def save_x(ctx, inputs, output):
...     ctx.save_for_backward(inputs[0])
>>> np_sin.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0].cos(),
...                          setup_context=save_x)
>>> x = flow.tensor([0.0, 1.0], requires_grad=True)
>>> np_sin(x).sum().backward(); x.grad
tensor([1.0000, 0.5403])
>>> flow.ops.demo.np_sin(x.detach())
tensor([0.0000, 0.8415])
"""
from __future__ import annotations

import inspect

import numpy as np

from . import ops as _ops
from .autograd import grad_mode
from .autograd.function import Function
from .autograd.inplace import bump_version
from .tensor import Tensor

__all__ = ["custom_op", "CustomOpDef", "register_autograd", "register_fake", "register_kernel",
           "get_ctx"]

OPS = {}  # "namespace::name" -> CustomOpDef


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """Make the Python function `fn` the custom operator `name` ("namespace::op_name"), as
    torch.library.custom_op (also a decorator: `@custom_op("mylib::f", mutates_args=())`).
    `mutates_args`: the names of the arguments it writes in place, () for none, or
    "unknown". `device_types` ("cpu"): the kernel serves those devices only; `schema` is
    accepted and not parsed (flowgrad reads the arguments from the function)."""
    if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
        raise ValueError(f"custom_op: the name must be 'namespace::op_name', got {name!r}")
    if mutates_args != "unknown" and (isinstance(mutates_args, str) or
                                      not hasattr(mutates_args, "__iter__")):
        raise ValueError(f"custom_op({name!r}): mutates_args must be an iterable of argument "
                         f"names (or 'unknown'), got {mutates_args!r}")

    def make(fn):
        op = CustomOpDef(name, fn, mutates_args)
        if device_types is not None:
            op._kernels = {d: fn for d in _devices(device_types)}
        return op
    return make if fn is None else make(fn)


def _devices(device_types):
    return (device_types,) if isinstance(device_types, str) else tuple(device_types)


class CustomOpDef:
    """A custom operator made by `custom_op`: call it as the function it wraps."""

    def __init__(self, qualname, fn, mutates_args):
        self._namespace, self._name = qualname.split("::")
        self._qualname = qualname
        self._init_fn = fn
        self._signature = inspect.signature(fn)
        params = self._signature.parameters
        self._mutated = tuple(params) if mutates_args == "unknown" else tuple(mutates_args)
        unknown = [a for a in self._mutated if a not in params]
        if unknown:
            raise ValueError(f"custom_op({qualname!r}): mutates_args names {unknown}, which "
                             f"are not arguments of {fn.__name__}{self._signature}")
        self._kernels = {}
        self._fake = None
        self._backward = None
        self._setup_context = None
        self._function = None
        self.__name__ = self._name
        self.__doc__ = fn.__doc__
        OPS[qualname] = self

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"

    # ---- registration ---------------------------------------------------------------------
    def register_kernel(self, device_types, fn=None, /):
        """The kernel for `device_types` ("cpu", "cuda", ...); a decorator without `fn`."""
        def register(fn):
            for d in _devices(device_types):
                self._kernels[d] = fn
            return fn
        return register if fn is None else register(fn)

    def register_fake(self, fn, /):
        """The function computing the results' shapes and dtypes only, for meta tensors
        (torch's FakeTensor kernel): it runs when an input is on the 'meta' device."""
        self._fake = fn
        return fn

    def register_autograd(self, backward, /, *, setup_context=None):
        """The op's gradient: `backward(ctx, *grads)` returns one gradient (or None) per
        positional argument; `setup_context(ctx, inputs, output)` saves what it needs, as
        torch.autograd.Function's setup_context."""
        if not callable(backward) or (setup_context is not None and not callable(setup_context)):
            raise TypeError(f"register_autograd({self._qualname}): backward and setup_context "
                            f"must be callable")
        self._backward, self._setup_context = backward, setup_context

    # ---- calls ----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        positional, keywords = bound.args, bound.kwargs
        if grad_mode.is_grad_enabled() and any(
                isinstance(a, Tensor) and a.requires_grad for a in positional):
            function = self._function if not keywords else _function_for(self, keywords)
            if function is None:
                function = self._function = _function_for(self, {})
            result = function.apply(*positional)
        else:
            with grad_mode.no_grad():
                result = self._run(positional, keywords)
        self._bump_mutated(bound)
        return result

    def _kernel(self, positional):
        first = next((a for a in positional if isinstance(a, Tensor)), None)
        device = first.device.type if first is not None else "cpu"
        if device == "meta" and self._fake is not None:
            return self._fake
        if self._kernels:
            kernel = self._kernels.get(device)
            if kernel is None:
                raise NotImplementedError(
                    f"{self._qualname}: no kernel registered for device {device!r} (it has "
                    f"{sorted(self._kernels)}); register one with register_kernel")
            return kernel
        return self._init_fn

    def _run(self, positional, keywords):
        result = self._kernel(positional)(*positional, **keywords)
        self._check_no_alias(positional, result)
        return result

    def _check_no_alias(self, positional, result):
        outs = result if isinstance(result, (tuple, list)) else (result,)
        ins = [a for a in positional if isinstance(a, Tensor)]
        for out in outs:
            if isinstance(out, Tensor) and any(_shares_memory(out, a) for a in ins):
                raise RuntimeError(
                    f"{self._qualname}: a result of a custom op may not be, or share memory "
                    f"with, one of its inputs (its result {tuple(out.shape)} does); return a "
                    f"clone of the input instead (as torch's custom_op)")

    def _bump_mutated(self, bound):
        for name in self._mutated:
            value = bound.arguments.get(name)
            for t in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(t, Tensor):
                    bump_version(t)

    @property
    def default(self):
        """The op itself (torch's `torch.ops.ns.name.default` overload)."""
        return self


def _shares_memory(a, b):
    return a is b or (type(a._data) is np.ndarray and type(b._data) is np.ndarray and
                      np.shares_memory(a._data, b._data))


def _function_for(op, keywords):
    """The autograd.Function recording `op` called with the keyword-only arguments
    `keywords`: its kernel forward, its registered formula backward (or the error torch
    raises without one)."""
    def forward(*args):
        return op._run(args, keywords)

    def setup_context(ctx, inputs, output):
        if op._setup_context is not None:
            op._setup_context(ctx, inputs, output)

    def backward(ctx, *grads):
        if op._backward is None:
            raise RuntimeError(f"Trying to backward through {op._namespace}.{op._name}.default "
                               f"but no autograd formula was registered. Please use "
                               f"register_autograd to add one.")
        result = op._backward(ctx, *grads)
        return result if isinstance(result, tuple) else (result,)

    name = f"{op._namespace}_{op._name}_Backward"
    return type(name, (Function,), {"forward": staticmethod(forward),
                                    "setup_context": staticmethod(setup_context),
                                    "backward": staticmethod(backward)})


def _op(op):
    if isinstance(op, CustomOpDef):
        return op
    found = OPS.get(op) if isinstance(op, str) else None
    if found is None:
        raise ValueError(f"torch.library: {op!r} is not a custom op made by custom_op here")
    return found


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """`op.register_autograd(backward, setup_context=...)` for an op or its name."""
    _op(op).register_autograd(backward, setup_context=setup_context)


def register_fake(op, fn=None, /, *, lib=None, _stacklevel=1):
    """`op.register_fake(fn)` for an op or its name (a decorator without `fn`)."""
    target = _op(op)
    return target.register_fake if fn is None else target.register_fake(fn)


def register_kernel(op, device_types, fn=None, /, *, lib=None):
    """`op.register_kernel(device_types, fn)` for an op or its name."""
    return _op(op).register_kernel(device_types, fn)


def get_ctx():
    """torch.library.get_ctx (a fake kernel's context for data-dependent shapes): flowgrad's
    meta tensors need none; raises, saying so."""
    raise NotImplementedError("torch.library.get_ctx: flowgrad's fake kernels run on meta "
                              "tensors with no context; compute the shape from the inputs")


class _Namespace:
    """`flowgrad.ops.<namespace>`: the custom ops of one namespace, by name (torch.ops.*)."""

    def __init__(self, namespace):
        self._namespace = namespace

    def __getattr__(self, name):
        op = OPS.get(f"{self._namespace}::{name}")
        if op is None:
            raise AttributeError(f"'_OpNamespace' '{self._namespace}' object has no attribute "
                                 f"'{name}' (no custom op {self._namespace}::{name} is defined)")
        return op


def namespace(name):
    """The `_Namespace` of `name` when some custom op lives in it, else None."""
    prefix = name + "::"
    return _Namespace(name) if any(k.startswith(prefix) for k in OPS) else None


_ops.CUSTOM_NAMESPACES.append(namespace)
