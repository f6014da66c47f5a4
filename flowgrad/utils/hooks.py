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

from .._warn import warn
from ..hook_handles import RemovableHandle

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]


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
