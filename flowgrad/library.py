"""torch.library: custom operators written in Python (`custom_op`), with their gradient
(`register_autograd`), a shape-only form for meta tensors (`register_fake`) and per-device
kernels (`register_kernel`), callable as the function returned or as `flowgrad.ops.<ns>.<name>`;
and the older schema-string API (`define`, `impl`, `Library`).

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

import ast
import inspect

import numpy as np

from . import ops as _ops
from ._warn import warn_once
from .autograd import grad_mode
from .autograd.function import Function
from .autograd.inplace import bump_version
from .tensor import Tensor

__all__ = ["custom_op", "CustomOpDef", "register_autograd", "register_fake", "register_kernel",
           "get_ctx", "define", "impl", "Library", "impl_abstract"]

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

    def __init__(self, qualname, fn, mutates_args, signature=None):
        self._namespace, self._name = qualname.split("::")
        self._qualname = qualname
        self._init_fn = fn  # (None for an op `define`d by a schema, until `impl` gives one)
        self._signature = signature or inspect.signature(fn)
        params = self._signature.parameters
        self._mutated = tuple(params) if mutates_args == "unknown" else tuple(mutates_args)
        unknown = [a for a in self._mutated if a not in params]
        if unknown:
            raise ValueError(f"custom_op({qualname!r}): mutates_args names {unknown}, which "
                             f"are not arguments of {qualname}{self._signature}")
        # a kernel registered for an Autograd key (or CompositeImplicitAutograd) runs with
        # grad on and is differentiated through; `_schema_op`: torch's deprecated fallback
        # for a defined op without a formula does the same, with a warning
        self._autograd_kernel = False
        self._schema_op = signature is not None
        self._kernels = {}
        self._fake = None
        self._backward = None
        self._setup_context = None
        self._function = None
        self.__name__ = self._name
        self.__doc__ = getattr(fn, "__doc__", None)
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
        needs_grad = grad_mode.is_grad_enabled() and any(
            isinstance(a, Tensor) and a.requires_grad for a in positional)
        if needs_grad and self._backward is None and (self._autograd_kernel or
                                                      self._schema_op):
            if not self._autograd_kernel:
                warn_once(f"{self._qualname}: an autograd kernel was not registered (use "
                          f"register_autograd, or impl with CompositeImplicitAutograd): "
                          f"backward goes through the kernel's own ops, as torch's "
                          f"deprecated fallback, which may not be the op's gradient")
            result = self._run(positional, keywords)
        elif needs_grad:
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
        if self._init_fn is None:
            raise NotImplementedError(f"{self._qualname}: defined, but no kernel was "
                                      f"registered; give one with torch.library.impl")
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


# ---- the schema-string API: define / impl / Library -------------------------------------------
# dispatch keys whose kernel serves every device; those marked True handle autograd themselves
_ANY_DEVICE = {"compositeimplicitautograd": True, "compositeexplicitautograd": False,
               "autograd": True, "": False, "default": False}
_DEVICE_KEYS = {"cpu": "cpu", "cuda": "cuda", "meta": "meta", "mps": "mps", "xpu": "xpu",
                "autogradcpu": "cpu", "autogradcuda": "cuda"}


def define(qualname, schema, *, lib=None, tags=()):
    """Declare the op `qualname` ("ns::name") by a schema string, "(Tensor x, float k=2.0)
    -> Tensor", as torch.library.define; `impl` gives its kernels. Arguments written
    `Tensor(a!)` are the ones it writes in place."""
    if not isinstance(qualname, str) or qualname.count("::") != 1:
        raise ValueError(f"define: the name must be 'namespace::op_name', got {qualname!r}")
    signature, mutated = _parse_schema(qualname, schema)
    op = CustomOpDef(qualname, None, mutated, signature=signature)
    if lib is not None:
        lib._ops.append(qualname)
    return op


def impl(qualname, types, func=None, *, lib=None):
    """Register `func` as the kernel of `qualname` for `types` ("cpu", a list of devices,
    "CompositeImplicitAutograd" (any device, differentiated through its ops),
    "CompositeExplicitAutograd" (any device, below autograd), "Autograd", "Meta"), as
    torch.library.impl; a decorator without `func`."""
    def register(func):
        op = _op(qualname)
        for key in (types,) if isinstance(types, str) else tuple(types):
            name = key.lower()
            if name == "meta":
                op.register_fake(func)
            elif name in _ANY_DEVICE:
                op._init_fn = func
                op._kernels.clear()
                op._autograd_kernel = _ANY_DEVICE[name]
            elif name in _DEVICE_KEYS:
                op._kernels[_DEVICE_KEYS[name]] = func
                op._autograd_kernel = op._autograd_kernel or name.startswith("autograd")
            else:
                raise ValueError(f"torch.library.impl({qualname!r}): unknown dispatch key "
                                 f"{key!r}; use a device ('cpu') or CompositeImplicitAutograd"
                                 f" / CompositeExplicitAutograd / Autograd / Meta")
        return func
    return register if func is None else register(func)


def impl_abstract(qualname, func=None, *, lib=None, _stacklevel=1):
    """torch.library.impl_abstract, register_fake's older name."""
    return register_fake(qualname, func)


class Library:
    """torch.library.Library("ns", "DEF" | "IMPL" | "FRAGMENT"): `define` ops of the
    namespace by schema and `impl` their kernels; `_destroy()` forgets the ops it defined."""

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in ("DEF", "IMPL", "FRAGMENT"):
            raise ValueError(f"Library: kind must be DEF, IMPL or FRAGMENT, got {kind!r}")
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._ops = []

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})"

    def define(self, schema, alias_analysis="", *, tags=()):
        """Declare `name(args) -> returns` in this namespace; returns the name."""
        name = schema.split("(", 1)[0].strip()
        if not name or self.kind == "IMPL":
            raise RuntimeError(f"Library({self.ns!r}).define({schema!r}): "
                               + ("an IMPL library cannot define ops" if name else
                                  "the schema must start with the op's name"))
        define(f"{self.ns}::{name}", schema[len(schema.split('(', 1)[0]):], lib=self)
        return name

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False, allow_override=False):
        """Register `fn` as the kernel of this namespace's `op_name` for `dispatch_key`
        (the library's own, else CompositeImplicitAutograd)."""
        name = op_name if isinstance(op_name, str) else op_name._name
        impl(f"{self.ns}::{name}", dispatch_key or self.dispatch_key or
             "CompositeImplicitAutograd", fn)

    def _destroy(self):
        for qualname in self._ops:
            OPS.pop(qualname, None)
        self._ops.clear()


def _parse_schema(qualname, schema):
    """(inspect.Signature, names of the arguments written in place) of "(Tensor x, *,
    float a=1.0) -> Tensor"; the types are not checked."""
    text = schema.strip()
    if not text.startswith("("):
        raise ValueError(f"define({qualname!r}): the schema must be '(args) -> returns', "
                         f"got {schema!r}")
    depth, end = 0, None
    for i, ch in enumerate(text):
        depth += 1 if ch in "([" else -1 if ch in ")]" else 0
        if depth == 0:
            end = i
            break
    if end is None:
        raise ValueError(f"define({qualname!r}): unbalanced parentheses in {schema!r}")
    params, mutated, kind = [], [], inspect.Parameter.POSITIONAL_OR_KEYWORD
    for arg in _split_top_level(text[1:end]):
        if arg == "*":
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        declaration, _, default = arg.partition("=")
        type_name, _, name = declaration.strip().rpartition(" ")
        if not name.isidentifier() or not type_name:
            raise ValueError(f"define({qualname!r}): cannot read the argument {arg!r}")
        if "!" in type_name:
            mutated.append(name)
        value = inspect.Parameter.empty if not default else _literal(default.strip(), qualname)
        params.append(inspect.Parameter(name, kind, default=value))
    return inspect.Signature(params), mutated


def _split_top_level(text):
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += 1 if ch in "([" else -1 if ch in ")]" else 0
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    return parts + [last] if last else parts


def _literal(text, qualname):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f"define({qualname!r}): cannot read the default {text!r}") from None


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
