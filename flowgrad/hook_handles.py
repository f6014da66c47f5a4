"""The handle every hook registration returns (torch.utils.hooks.RemovableHandle, as torch's
own registrations return it): `remove()` unregisters the hook, and the handle is a context
manager that removes it on exit.

Hooks kept by id in dicts (modules, optimizers, the global module hooks, a user's own dicts)
get a `RemovableHandle`, which holds those dicts weakly; hooks kept in lists (a tensor's, a
node's: iterated on the backward's hot path) get a `ListHandle`; several handles removed as
one are a `MultiHandle`. All three are RemovableHandles.

>>> from collections import OrderedDict
>>> hooks = OrderedDict()
>>> handle = RemovableHandle(hooks)
>>> hooks[handle.id] = print
>>> with handle:
...     len(hooks)
1
>>> len(hooks)
0
"""
from __future__ import annotations

import weakref

__all__ = ["RemovableHandle", "ListHandle", "MultiHandle"]


def _dead():
    return None


def _new_id():
    """The next handle id (one sequence for every kind of handle, as torch's)."""
    RemovableHandle.next_id += 1
    return RemovableHandle.next_id - 1


class RemovableHandle:
    """A hook's handle: `remove()` deletes its id from `hooks_dict` (and from each of
    `extra_dict`, a dict or a list of them), which it holds weakly, as torch's."""

    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = _new_id()
        extras = [extra_dict] if isinstance(extra_dict, dict) else list(extra_dict or ())
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras)

    def _also_in(self, extra):
        """Mark the hook in one more dict `extra` (id -> True), which remove() clears too."""
        extra[self.id] = True
        self.extra_dict_ref += (weakref.ref(extra),)

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


class ListHandle(RemovableHandle):
    """The handle of `hook`, appended to the list `hooks` (held strongly: a list cannot be
    referenced weakly, and the tensor or node owning it may be gone by remove())."""

    def __init__(self, hooks, hook):
        self.id = _new_id()
        self.hooks_dict_ref, self.extra_dict_ref = _dead, ()
        self._hooks, self._hook = hooks, hook
        hooks.append(hook)

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)

    def __getstate__(self):
        return (None, self.id, ())


class MultiHandle(RemovableHandle):
    """Several hook handles removed as one (torch.autograd.graph's _MultiHandle)."""

    def __init__(self, handles):
        self.id = _new_id()
        self.hooks_dict_ref, self.extra_dict_ref = _dead, ()
        self.handles = handles

    def remove(self):
        for h in self.handles:
            h.remove()

    def __getstate__(self):
        return self.handles

    def __setstate__(self, state):
        self.handles = state
