"""A module's state dict: `state_dict`, `load_state_dict`, the extra-state protocol and the
state-dict hooks, as torch's (a mixin of nn.Module).

`state_dict()` runs each module's pre-hooks, writes its parameters, persistent buffers and
`_extra_state` (when the class defines `get_extra_state`), recurses, then runs its post-hooks;
`destination._metadata` holds each module's `_version` by prefix. `load_state_dict()` runs the
load pre-hooks (which may rename keys), checks every key and shape, runs the load post-hooks
(which may clear reported keys) and only then writes: a refused load changes nothing.

>>> import flowgrad as flow
>>> m = flow.nn.Linear(2, 1)
>>> handle = m.register_load_state_dict_pre_hook(
...     lambda mod, sd, prefix, *rest: sd.__setitem__(prefix + "bias", sd.pop(prefix + "b")))
>>> m.load_state_dict({"weight": flow.ones(1, 2), "b": flow.zeros(1)})
<All keys matched successfully>
"""
from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy as np

from .._warn import warn
from ..autograd.grad_mode import no_grad
from ..autograd.inplace import bump_version
from ..hook_handles import RemovableHandle
from ..meta import MetaArray
from ..tensor import Tensor
from .parameter import Parameter, is_lazy

_EXTRA = "_extra_state"


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What `load_state_dict` returns: the keys it missed and the keys it did not use."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"_IncompatibleKeys(missing_keys={self.missing_keys}, "
                f"unexpected_keys={self.unexpected_keys})")

    __str__ = __repr__


def _as_array(value, key):
    """A state-dict value as a NumPy array: flowgrad or torch tensors, arrays, numbers."""
    if isinstance(value, Tensor):
        return value._data
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        return value.detach().cpu().numpy()
    try:
        return np.asarray(value)
    except Exception as e:  # noqa: BLE001 - reported with the key
        raise TypeError(f"state_dict value for {key!r} is a {type(value).__name__}, which "
                        f"cannot be converted to an array; pass tensors or arrays") from e


class StateDict:
    """state_dict / load_state_dict and their hooks (see the module docstring)."""

    def _hooks(self, kind):
        return self.__dict__.get(kind) or {}

    def _register(self, kind, hook):
        store = self.__dict__.setdefault(kind, OrderedDict())
        handle = RemovableHandle(store)
        store[handle.id] = hook
        return handle

    def register_state_dict_pre_hook(self, hook):
        """`hook(module, prefix, keep_vars)` before this module writes its state."""
        return self._register("_state_dict_pre_hooks", hook)

    def register_state_dict_post_hook(self, hook):
        """`hook(module, state_dict, prefix, local_metadata)` after this module and its
        children wrote their state; it may change `state_dict` in place, and returns None
        (a value returned raises, as torch's)."""
        return self._register("_state_dict_hooks", (hook, True))

    def _register_state_dict_hook(self, hook):
        """torch's older form: a dict the hook returns replaces the state dict."""
        return self._register("_state_dict_hooks", (hook, False))

    def register_load_state_dict_pre_hook(self, hook):
        """`hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)` before the load reads this module's keys; it may
        rename or convert them in `state_dict`."""
        return self._register("_load_state_dict_pre_hooks", (hook, True))

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """torch's older form: `hook(state_dict, prefix, ...)`, the module first only with
        `with_module=True`."""
        return self._register("_load_state_dict_pre_hooks", (hook, with_module))

    def register_load_state_dict_post_hook(self, hook):
        """`hook(module, incompatible_keys)` after the keys are matched; it may remove keys
        from `incompatible_keys.missing_keys` / `unexpected_keys` (so strict passes)."""
        return self._register("_load_state_dict_post_hooks", hook)

    def get_extra_state(self):
        """Extra state to save under `<prefix>_extra_state` (override with set_extra_state)."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never "
                           "be called; override get_extra_state() and set_extra_state()")

    def set_extra_state(self, state):
        """Restore what `get_extra_state` returned."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never "
                           "be called; override get_extra_state() and set_extra_state()")

    def _upgrade_state_dict(self, state_dict, prefix, local_metadata):
        """Bring an older version's entries (`local_metadata["version"]`, None when the dict
        has no versions) up to this class's `_version`, in `state_dict`; a class whose state
        changed overrides it (torch's `_load_from_state_dict` does it there)."""

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """This module's turn before the load: upgrade old versions' entries and run the load
        pre-hooks. A subclass may override it to rename or convert its keys in `state_dict`
        (then call super), as with torch; the copying itself happens after every module had
        its turn, so a refused load changes nothing."""
        self._upgrade_state_dict(state_dict, prefix, local_metadata)
        for hook, with_module in self._hooks("_load_state_dict_pre_hooks").values():
            args = (state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                    error_msgs)
            hook(self, *args) if with_module else hook(*args)
        if strict:  # this module's own keys, as torch reports them (an override may edit)
            self._report_keys(state_dict, prefix, missing_keys, unexpected_keys)

    def _report_keys(self, state_dict, prefix, missing_keys, unexpected_keys):
        local = [name for name, p in self._parameters.items() if p is not None]
        local += [name for name, b in self._buffers.items()
                  if b is not None and name not in self._non_persistent_buffers_set]
        extra = prefix + _EXTRA
        missing_keys.extend(prefix + name for name in local if prefix + name not in state_dict)
        if self._has_extra_state() and extra not in state_dict:
            missing_keys.append(extra)
        for key in state_dict.keys():
            if key.startswith(prefix) and key != extra:
                head, *rest = key[len(prefix):].split(".", 1)
                if head not in (self._modules if rest else local):
                    unexpected_keys.append(key)

    def _has_extra_state(self):
        return type(self).get_extra_state is not StateDict.get_extra_state

    # ---- saving ---------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # (a lazy module's placeholder goes in as it is, as torch's: loading it elsewhere
        # leaves that one lazy too)
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars or is_lazy(p) else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars or is_lazy(b) else b.detach()
        if self._has_extra_state():
            destination[prefix + _EXTRA] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of every parameter and persistent buffer by dotted name; values
        share storage with the module's tensors (detached unless keep_vars).

        >>> import flowgrad as flow
        >>> from flowgrad import nn
        >>> m = nn.BatchNorm1d(2)
        >>> list(m.state_dict())
        ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
        >>> m.state_dict()["running_var"]
        tensor([1., 1.])
        """
        if args:  # torch's deprecated positional form (destination, prefix, keep_vars)
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._hooks("_state_dict_pre_hooks").values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        for hook, public in self._hooks("_state_dict_hooks").values():
            result = hook(self, destination, prefix, local_metadata)
            if result is not None:  # (torch's older hooks may return a new dict)
                if public:
                    raise RuntimeError("state_dict post-hook must return None: a hook from "
                                       "register_state_dict_post_hook changes the state "
                                       "dict in place")
                destination = result
        return destination

    # ---- loading ----------------------------------------------------------------------------
    def _state_entries(self, pre="", out=None):
        """(key, owning module, attribute name, kind) for every state_dict entry, keyed as
        state_dict keys them (a child named "" under the root gives ".weight")."""
        out = [] if out is None else out
        for name, p in self._parameters.items():
            if p is not None:
                out.append((pre + name, self, name, "param"))
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                out.append((pre + name, self, name, "buffer"))
        if self._has_extra_state():
            out.append((pre + _EXTRA, self, _EXTRA, "extra"))
        for name, child in self._modules.items():
            if child is not None:
                child._state_entries(pre + name + ".", out)
        return out

    def _load_keys(self, state_dict, prefix, metadata, keys, errors):
        """This module's and its children's turns (their pre-hooks, the keys they report),
        then this module's load post-hooks, which see the keys reported so far (as torch's,
        whose post-hooks run as each module's subtree is loaded)."""
        local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
        # (torch passes strict=True here whatever the caller's strict)
        self._load_from_state_dict(state_dict, prefix, local_metadata, True, keys.missing_keys,
                                   keys.unexpected_keys, errors)
        for name, child in self._modules.items():
            if child is not None:
                child._load_keys(state_dict, prefix + name + ".", metadata, keys, errors)
        for hook in self._hooks("_load_state_dict_post_hooks").values():
            if hook(self, keys) is not None:  # (torch's assertion)
                raise AssertionError("Hooks registered with "
                                     "``register_load_state_dict_post_hook`` are not "
                                     "expected to return new values; change "
                                     "incompatible_keys in place instead")

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values into this module's parameters and buffers (the same objects keep
        their identity; with `assign=True` the given tensors become them). Returns
        (missing_keys, unexpected_keys); with strict=True either kind raises, after the load
        post-hooks had their say. A refused load (strict keys, a shape) changes nothing.

        >>> import flowgrad as flow
        >>> from flowgrad import nn
        >>> m = nn.Linear(2, 1)
        >>> m.load_state_dict({"weight": flow.tensor([[1.0, 2.0]]), "bias": flow.tensor([0.5])})
        <All keys matched successfully>
        >>> m(flow.tensor([[1.0, 1.0]]))
        tensor([[3.5000]], grad_fn=<AddmmBackward0>)
        >>> m.load_state_dict({"weight": flow.zeros(1, 2)}, strict=False).missing_keys
        ['bias']
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # the pre-hooks may change it: the caller's stays
        errors, missing, unexpected = [], [], []
        keys = _IncompatibleKeys(missing, unexpected)
        self._load_keys(state_dict, "", metadata, keys, errors)
        entries = self._state_entries()
        plan = []
        for key, mod, name, kind in entries:
            if key not in state_dict:
                continue
            if kind == "extra":
                plan.append((mod, name, kind, None, state_dict[key], key))
                continue
            current = getattr(mod, name)
            if is_lazy(state_dict[key]):
                if not is_lazy(current):
                    errors.append(f"cannot load the uninitialized parameter or buffer {key} "
                                  f"(a lazy module's, before its first forward) into an "
                                  f"initialized one; run the lazy module on a batch first")
                continue  # lazy into lazy: stays lazy
            arr = _as_array(state_dict[key], key)
            if is_lazy(current):  # a lazy module takes the checkpoint's shape (below)
                plan.append((mod, name, kind, current, arr, key))
                continue
            if tuple(arr.shape) != tuple(current.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape "
                    f"flowgrad.Size({list(arr.shape)}) from checkpoint, the shape in current "
                    f"model is flowgrad.Size({list(current.shape)}).")
                continue
            plan.append((mod, name, kind, current, arr, key))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" +
                               "\n\t".join(errors))
        with no_grad():
            for mod, name, kind, current, arr, key in plan:
                if kind == "extra":
                    mod.set_extra_state(arr)
                    continue
                if is_lazy(current):
                    current.materialize(arr.shape)
                if assign:  # the given tensor itself (torch's Parameter(t) shares storage)
                    given = state_dict[key]
                    t = given if isinstance(given, Tensor) else Tensor._wrap(arr)
                    # (a Parameter registered as a buffer becomes a parameter, as torch's
                    # setattr makes it: torch asks the current value, not its store)
                    if isinstance(current, Parameter):
                        if isinstance(t, Parameter):  # kept, with the module's requires_grad
                            t.requires_grad_(current.requires_grad)
                        else:
                            t = Parameter(t, current.requires_grad)
                    setattr(mod, name, t)
                elif current._data.__class__ is MetaArray:  # (a meta tensor has no values)
                    warn(f"for {key}: copying from a non-meta "
                         f"parameter in the checkpoint to a meta parameter in the current "
                         f"model, which is a no-op. (Did you mean to pass `assign=True` to "
                         f"assign items in the state dictionary to their corresponding key "
                         f"in the module instead of copying them in place?)")
                else:
                    current._data[...] = arr.astype(current._data.dtype, copy=False)
                    bump_version(current)
        return keys
