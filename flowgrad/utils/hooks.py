"""torch.utils.hooks: the handle hook registrations return, for code that keeps hooks in its
own dicts, and the mark of a hook that a saved tensor need not keep.

>>> from collections import OrderedDict
>>> from flowgrad.utils.hooks import RemovableHandle
>>> hooks = OrderedDict()
>>> handle = RemovableHandle(hooks)
>>> hooks[handle.id] = print
>>> handle.remove(); len(hooks)
0
"""
from __future__ import annotations

import weakref

from .._warn import warn

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]


def _dead():
    return None


class RemovableHandle:
    """A hook's handle: `remove()` deletes its id from `hooks_dict` (and from each of
    `extra_dict`, a dict or a list of them), which it holds weakly, as torch's."""

    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        extras = [extra_dict] if isinstance(extra_dict, dict) else list(extra_dict or ())
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras)

    def remove(self):
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __getstate__(self):
        return (self.hooks_dict_ref(), self.id, tuple(ref() for ref in self.extra_dict_ref))

    def __setstate__(self, state):
        # (no dict: a dead reference, as torch's)
        self.hooks_dict_ref = weakref.ref(state[0]) if state[0] is not None else _dead
        self.id = state[1]
        RemovableHandle.next_id = max(RemovableHandle.next_id, self.id + 1)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in (state[2] if len(state) > 2
                                                              and state[2] else ()))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def unserializable_hook(f):
    """Mark `f`, a tensor hook, as one not to be serialized (warn_if_has_hooks skips it)."""
    f.__torch_unserializable__ = True
    return f


def warn_if_has_hooks(tensor):
    """Warn for each hook registered on `tensor` (register_hook) that serializing the tensor
    will not keep, unless marked by `unserializable_hook`."""
    meta = tensor._meta
    for hook in (meta.hooks or ()) if meta is not None else ():
        if not hasattr(hook, "__torch_unserializable__"):
            warn(f"backward hook {hook!r} on tensor will not be serialized.  If this is "
                 f"expected, you can decorate the function with "
                 f"@torch.utils.hooks.unserializable_hook to suppress this warning")
