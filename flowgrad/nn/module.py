"""nn.Module: the base class of layers. Attributes that are Parameters, buffers or Modules
are registered on assignment, so `parameters()`, `state_dict()`, `to()` and `train()` find
them; `__call__` runs forward pre-hooks, `forward`, forward hooks and sets up backward hooks.

>>> import flowgrad as flow
>>> class Affine(flow.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.scale = flow.nn.Parameter(flow.ones(2))
...         self.register_buffer("shift", flow.zeros(2))
...     def forward(self, x):
...         return x * self.scale + self.shift
>>> m = Affine()
>>> [n for n, _ in m.named_parameters()], list(m.state_dict())
(['scale'], ['scale', 'shift'])
"""
from __future__ import annotations

from collections import OrderedDict

from .. import dtypes as _dt
from .._warn import warn
from ..autograd import interpreter as _interpreter
from ..autograd.inplace import bump_version
from ..device import array_module, device, resolve_device, to_device
from ..hook_handles import RemovableHandle
from ..ops.layout import in_format
from ..tensor import Tensor
from ..torch_format import loadable
from ..typed_tensors import format_rank
from . import backward_hooks as _backward_hooks
from . import module_hooks as _global
from .module_state import StateDict
from .parameter import Buffer, Parameter

__all__ = ["Module", "RemovableHandle"]


_NON_FULL_HOOK = (
    "register_backward_hook is deprecated: flowgrad runs the hook as "
    "register_full_backward_hook (grad_input holds the gradients of the module's forward "
    "inputs), where torch's deprecated form passes the gradients of the inputs of the module's "
    "last autograd node. Use register_full_backward_hook.")

def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _children_first(module, seen):
    """`module`'s submodules, each once, every one after its children (torch's _apply)."""
    if id(module) not in seen:
        seen.add(id(module))
        for child in module._modules.values():
            if child is not None:
                yield from _children_first(child, seen)
        yield module


def _note_rebinding(module, kind, name):
    """A parameter, buffer (`kind`: its store's name) or plain tensor attribute (None) is
    about to be assigned anew: nn.Graph's tracer, when it runs build, hears of it (its plan
    reads the tensors it traced)."""
    if _interpreter.current is not _interpreter.AutogradInterpreter:
        note = getattr(_interpreter.current, "rebinding", None)
        if note is not None:
            note(module.__dict__[kind] if kind else module.__dict__,
                 f"{type(module).__name__}.{name}", name)


def _type_name(value):
    return type(value).__module__ + "." + type(value).__qualname__


@loadable  # (load(weights_only=False) rebuilds it)
class Module(StateDict):
    """Base class for all neural network modules; subclasses define `forward`."""

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got unexpected arguments; Module.__init__ "
                f"takes none")
        sa = object.__setattr__
        sa(self, "training", True)
        sa(self, "_parameters", {})
        sa(self, "_buffers", {})
        sa(self, "_non_persistent_buffers_set", set())
        sa(self, "_modules", {})
        sa(self, "_forward_pre_hooks", OrderedDict())
        sa(self, "_forward_pre_hooks_with_kwargs", OrderedDict())
        sa(self, "_forward_hooks", OrderedDict())
        sa(self, "_forward_hooks_with_kwargs", OrderedDict())
        sa(self, "_backward_hooks", OrderedDict())
        sa(self, "_backward_pre_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---- registration -------------------------------------------------------------------
    def _check_name(self, name, kind):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def register_parameter(self, name, param):
        """Add a Parameter (or None) under `name`."""
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_type_name(param)}' object to parameter '{name}' "
                            f"(flowgrad.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must "
                f"be created explicitly. To express '{name}' as a function of another Tensor, "
                f"compute the value in the forward() method.")
        param = _global.registered(_global.PARAMETER_REGISTRATION, self, name, param)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a buffer: state that is not a parameter (running stats). Non-persistent
        buffers are left out of `state_dict`.

        >>> import flowgrad as flow
        >>> from flowgrad import nn
        >>> m = nn.Module()
        >>> m.register_buffer("steps", flow.zeros(()))
        >>> list(m.state_dict()), list(m.parameters())
        (['steps'], [])
        """
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_type_name(tensor)}' object to buffer '{name}' "
                            f"(flowgrad Tensor or None required)")
        tensor = _global.registered(_global.BUFFER_REGISTRATION, self, name, tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add a child module under `name`."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        module = _global.registered(_global.MODULE_REGISTRATION, self, name, module)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            for store in (d, self._buffers, self._modules):
                store.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
            if name in params:
                _note_rebinding(self, "_parameters", name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as parameter '{name}' "
                                f"(flowgrad.nn.Parameter or None expected)")
            _note_rebinding(self, "_parameters", name)
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            for store in (d, params, self._buffers):
                store.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
            value = _global.registered(_global.MODULE_REGISTRATION, self, name, value)
            self._modules[name] = value
        elif d.get("_modules") is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as child module "
                                f"'{name}' (flowgrad.nn.Module or None expected)")
            value = _global.registered(_global.MODULE_REGISTRATION, self, name, value)
            self._modules[name] = value
        elif isinstance(value, Buffer):  # torch's nn.Buffer: registers itself
            if d.get("_buffers") is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            for store in (d, self._parameters, self._modules, self._buffers):
                store.pop(name, None)
            self.register_buffer(name, value, value.persistent)
        elif d.get("_buffers") is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_type_name(value)}' as buffer '{name}' "
                                f"(flowgrad Tensor or None expected)")
            value = _global.registered(_global.BUFFER_REGISTRATION, self, name, value)
            _note_rebinding(self, "_buffers", name)
            self._buffers[name] = value
        else:
            if isinstance(value, Tensor) or isinstance(d.get(name), Tensor):  # (a plain
                _note_rebinding(self, None, name)  # tensor attribute: self.hidden = h)
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters) + list(self._buffers) + \
            list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state):
        self.__dict__.update(state)

    def get_submodule(self, target):
        """The submodule at dotted path `target` ("" is self)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def set_submodule(self, target, module, strict=False):
        """Put `module` at dotted path `target` (its parent must exist; with strict, so must
        the attribute it replaces)."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target):
        """The Parameter at dotted path `target` (a None parameter is not one)."""
        param = getattr(*self._get_attribute(target))
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{target.rpartition('.')[2]}` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        """The buffer at dotted path `target` (None for one registered as None)."""
        mod, name = self._get_attribute(target)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    def _get_attribute(self, target):
        mod_path, _, name = target.rpartition(".")
        if not hasattr(mod := self.get_submodule(mod_path), name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        return mod, name

    # ---- traversal ----------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Yield (dotted name, module) for self and every descendant, each once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        """Yield self and every descendant module (pre-order), each once.

        >>> import flowgrad as flow
        >>> from flowgrad import nn
        >>> m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU()))
        >>> [type(c).__name__ for c in m.modules()]
        ['Sequential', 'Linear', 'Sequential', 'ReLU']
        """
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def children(self):
        """Yield the direct submodules, each once.

        >>> import flowgrad as flow
        >>> from flowgrad import nn
        >>> m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU()))
        >>> [type(c).__name__ for c in m.children()]
        ['Linear', 'Sequential']
        """
        for _, m in self.named_children():
            yield m

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                if recurse else [(prefix, self)])
        for mod_prefix, mod in mods:
            for k, v in get_members(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + k, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """Yield (dotted name, parameter); shared parameters once unless
        remove_duplicate=False.

        >>> import flowgrad as flow
        >>> from flowgrad import nn
        >>> m = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1, bias=False))
        >>> [(name, tuple(p.shape)) for name, p in m.named_parameters()]
        [('0.weight', (2, 3)), ('0.bias', (2,)), ('1.weight', (1, 2))]
        """
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def parameters(self, recurse=True):
        """Yield every parameter of this module and (with recurse) its descendants, each once.

        >>> import flowgrad as flow
        >>> from flowgrad import nn
        >>> m = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
        >>> [tuple(p.shape) for p in m.parameters()]
        [(2, 3), (2,), (1, 2), (1,)]
        """
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- modes and conversion ---------------------------------------------------------------
    def train(self, mode=True):
        """Set training mode on self and all descendants; returns self.

        >>> import flowgrad as flow
        >>> from flowgrad import nn
        >>> m = nn.Sequential(nn.Dropout(0.5))
        >>> m.eval()[0].training, m.train()[0].training
        (False, True)
        """
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        """Evaluation mode (dropout off, batch norm uses running stats); returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters: to None by default, else to zeros.

        >>> import flowgrad as flow
        >>> from flowgrad import nn
        >>> m = nn.Linear(2, 1)
        >>> m(flow.ones(1, 2)).sum().backward()
        >>> m.bias.grad
        tensor([1.])
        >>> m.zero_grad()
        >>> m.bias.grad is None
        True
        """
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                elif p.grad.is_sparse:
                    p.grad.zero_()  # (no entries left: torch's zero_() of a sparse gradient)
                else:
                    g = p.grad
                    if g.grad_fn is not None:
                        g = g.detach()
                        p.grad = g
                    g._data[...] = 0
                    bump_version(g)

    def apply(self, fn):
        """Call `fn(m)` on every submodule (children first) and self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        """Convert every parameter, its grad and every buffer's storage with `fn(array)`;
        parameters keep their identity. A buffer whose dtype or device changes is a new
        tensor, as torch's (the one given to register_buffer, a loss's class weights say,
        may be the caller's own and keeps its dtype); an unchanged one stays itself.
        Children first, as torch's (a child's Parameter that is also a buffer stays one)."""
        for m in _children_first(self, set()):
            for p in m._parameters.values():
                if p is not None:
                    p._data = fn(p._data)
                    if p.grad is not None:
                        p.grad._data = fn(p.grad._data)
            for name, b in list(m._buffers.items()):
                if b is None:
                    continue
                new = fn(b._data)
                if new.dtype == b._data.dtype and type(new) is type(b._data):
                    b._data = new
                else:
                    converted = Tensor._wrap(new)
                    if b.requires_grad:
                        converted.requires_grad_(True)
                    m._buffers[name] = converted
        return self

    def to_empty(self, *, device, recurse=True):
        """Give every parameter and buffer (of the submodules too, unless `recurse=False`) new
        uninitialized storage on `device`, keeping their identity, shape and dtype: a module
        built on the 'meta' device, before load_state_dict or an init fills it.

        >>> import flowgrad as flow
        >>> layer = flow.nn.Linear(2, 3, device="meta")
        >>> layer.to_empty(device="cpu").weight.device, layer.weight.shape
        (device(type='cpu'), flowgrad.Size([3, 2]))
        """
        dev = resolve_device(device, "Module.to_empty")
        for m in (self.modules() if recurse else (self,)):
            for t in [*m._parameters.values(), *m._buffers.values()]:
                if t is not None:
                    t._data = dev.xp.empty(t._data.shape, t._data.dtype)
                    if t.grad is not None:
                        t.grad._data = dev.xp.empty(t.grad._data.shape, t.grad._data.dtype)
        return self

    def to(self, *args, **kwargs):
        """`to(dtype)`, `to(device)`, `to(tensor)` or keywords: floating parameters and
        buffers are cast to the dtype and moved to the device (the CPU or a registered one,
        flowgrad.device.register_device), keeping their identity."""
        dtype = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        dev = None if dev is None else resolve_device(dev, "Module.to")
        kwargs.pop("non_blocking", None)
        fmt = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, (str, device)):
                dev = resolve_device(a, "Module.to")
            elif isinstance(a, _dt.dtype) or (a is not None and not isinstance(a, str) and
                                              not type(a).__name__ == "device"):
                try:
                    dtype = _dt.as_dtype(a)
                except (TypeError, KeyError, ValueError):
                    pass
        if dev is not None:
            self._apply(lambda a: to_device(a, dev))
        if fmt is not None:  # torch's: 4-d and 5-d parameters and buffers take the format
            self._apply(lambda a: _in_memory_format(a, fmt))
        if dtype is None:
            return self
        dtype = _dt.as_dtype(dtype)
        if not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")
        target = dtype.np
        # floating and complex tensors take the dtype (a complex one cast to a real dtype
        # keeps its real part, as torch's), integer and bool ones stay
        return self._apply(lambda a: (a.real if a.dtype.kind == "c" and target.kind != "c"
                                      else a).astype(target) if a.dtype.kind in "fVc" else a)

    def float(self):
        return self.to(_dt.float32)

    def double(self):
        return self.to(_dt.float64)

    def half(self):
        return self.to(_dt.float16)

    def bfloat16(self):
        return self.to(_dt.bfloat16)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        raise RuntimeError("flowgrad runs on the CPU only; there is no CUDA device")

    def type(self, dst_type):
        return self.to(dst_type)

    def share_memory(self):
        """Move every parameter, its grad, and every buffer to shared memory
        (`Tensor.share_memory_`): processes given the module (Hogwild training) update one
        set of weights."""
        for p in self.parameters():
            p.share_memory_()
            if p.grad is not None:
                p.grad.share_memory_()
        for b in self.buffers():
            b.share_memory_()
        return self

    # ---- hooks --------------------------------------------------------------------------------
    @staticmethod
    def _add_hook(store, hook, prepend, extra=None, extra_value=None):
        handle = RemovableHandle(store, extra_dict=extra)
        store[handle.id] = hook
        if extra is not None and extra_value:
            extra[handle.id] = True
        if prepend:
            store.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """`hook(module, args)` (or `(module, args, kwargs)` with with_kwargs) runs before
        forward; a non-None result replaces the args. Returns a removable handle."""
        return self._add_hook(self._forward_pre_hooks, hook, prepend,
                              self._forward_pre_hooks_with_kwargs, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """`hook(module, args, output)` runs after forward; a non-None result replaces
        the output. Returns a removable handle.

        >>> import flowgrad as flow
        >>> from flowgrad import nn
        >>> m = nn.Linear(2, 3)
        >>> seen = []
        >>> handle = m.register_forward_hook(lambda mod, args, out: seen.append(tuple(out.shape)))
        >>> _ = m(flow.zeros(4, 2))
        >>> handle.remove()
        >>> _ = m(flow.zeros(1, 2))
        >>> seen
        [(4, 3)]
        """
        handle = self._add_hook(self._forward_hooks, hook, prepend,
                                self._forward_hooks_with_kwargs, with_kwargs)
        if always_call:  # run even when forward (or a pre-hook) raises, as torch's
            handle._also_in(self.__dict__.setdefault("_forward_hooks_always_called",
                                                     OrderedDict()))
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """`hook(module, grad_input, grad_output)` runs when the gradients with respect to
        the module's inputs are computed; it may return a replacement grad_input."""
        return self._add_hook(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """`hook(module, grad_output)` runs when the output gradients are known; it may
        return a replacement grad_output."""
        return self._add_hook(self._backward_pre_hooks, hook, prepend)

    def register_backward_hook(self, hook):
        """torch's deprecated non-full hook, run here as `register_full_backward_hook` (and
        warned of: torch's passes the gradients of the inputs of the module's last autograd
        node, which flowgrad's nodes do not match)."""
        warn(_NON_FULL_HOOK, FutureWarning)
        return self.register_full_backward_hook(hook)

    def __call__(self, *args, **kwargs):
        if not (_global.CALL_HOOKS or self._forward_pre_hooks or self._forward_hooks or
                self._backward_hooks or self._backward_pre_hooks):
            return self.forward(*args, **kwargs)
        always = self.__dict__.get("_forward_hooks_always_called") or ()
        if not (always or _global.FORWARD_ALWAYS):
            return self._call_with_hooks(args, kwargs)
        seen = {"args": args, "kwargs": kwargs, "result": None, "called": set()}
        try:
            return self._call_with_hooks(args, kwargs, seen)
        except Exception:  # the always-call hooks not yet run, on the latest args and result
            args, kwargs, result = seen["args"], seen["kwargs"], seen["result"]
            for hid, hook, with_kwargs in self._forward_hook_list():
                if (hid in always or hid in _global.FORWARD_ALWAYS) and hid not in seen["called"]:
                    try:
                        res = hook(self, args, kwargs, result) if with_kwargs else \
                            hook(self, args, result)
                        result = result if res is None else res
                    except Exception:  # noqa: BLE001 - forward's own error is the one raised
                        pass
            raise

    def _forward_hook_list(self):
        """(id, hook, takes kwargs) of the forward hooks a call runs: the global ones first,
        as torch's."""
        return [*((hid, hook, hid in _global.FORWARD_WITH_KWARGS)
                  for hid, hook in _global.FORWARD.items()),
                *((hid, hook, hid in self._forward_hooks_with_kwargs)
                  for hid, hook in self._forward_hooks.items())]

    def _call_with_hooks(self, args, kwargs, seen=None):
        seen = {"called": set()} if seen is None else seen  # (what __call__'s except sees)
        for hook in list(_global.FORWARD_PRE.values()):
            res = hook(self, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError(
                            "forward pre-hook must return None or a tuple of (new_args, "
                            f"new_kwargs), but got {res}.")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        state = None
        if self._backward_hooks or self._backward_pre_hooks or _global.BACKWARD or \
                _global.BACKWARD_PRE:
            args, state = _backward_hooks.wrap_inputs(self, args)
        seen.update(args=args, kwargs=kwargs)
        result = seen["result"] = self.forward(*args, **kwargs)
        for hid, hook, with_kwargs in self._forward_hook_list():
            seen["called"].add(hid)
            if with_kwargs:
                res = hook(self, args, kwargs, result)
            else:
                res = hook(self, args, result)
            if res is not None:
                result = seen["result"] = res
        if state is not None:
            result = _backward_hooks.wrap_outputs(result, state)
        return result

    # ---- printing ------------------------------------------------------------------------------
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The layer's own settings, shown inside its repr; override in subclasses."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(m), 2)
                       for key, m in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _in_memory_format(a, fmt):
    """Array `a` (a parameter's or buffer's) as Module.to(memory_format=fmt) leaves it:
    a 4-d or 5-d one laid out in that format (a wrong rank raises, as torch), others as
    they are."""
    if a.ndim not in (4, 5):
        return a
    rank = format_rank(fmt, a.ndim, "Module.to")
    return a if rank is None else in_format(array_module(a), a, rank)
