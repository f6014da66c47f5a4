"""Saved-tensor hooks: decide how tensors saved for backward are stored.

Inside `saved_tensors_hooks(pack, unpack)`, every tensor an op saves for its gradient rule
is handed to `pack(tensor)` and only its result is kept; when backward needs the tensor it
calls `unpack(packed)`. The unpacked values get the saved tensor's autograd identity back
(its grad_fn and meta), so version checks and double backward work as without hooks.
Off, recording pays one check of a thread-local per op that saves something.

>>> import flowgrad as flow
>>> packed = []
>>> def pack(t):
...     packed.append(tuple(t.shape)); return t
>>> x = flow.ones(3, requires_grad=True)
>>> with flow.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
...     y = (x * x).sum()
>>> y.backward(); packed, x.grad
([(3,), (3,)], tensor([2., 2., 2.]))
"""
from __future__ import annotations

import threading

import numpy as np

from ..device import memory_owner
from ..errors import saved_tensor_error
from . import meta as _meta

Tensor = None  # bound by interpreter.bind_tensor_class (flowgrad.tensor imports this layer)


class _HookState(threading.local):
    stack = ()               # (pack, unpack) pairs, innermost last
    disabled_message = None  # set by disable_saved_tensors_hooks


state = _HookState()


class saved_tensors_hooks:  # noqa: N801 - torch's name
    """Context manager: tensors saved for backward inside go through `pack_hook` when saved
    and `unpack_hook` when backward reads them (the innermost pair applies)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        if state.disabled_message is not None:
            raise RuntimeError(state.disabled_message)
        state.stack = state.stack + ((self.pack_hook, self.unpack_hook),)
        return self

    def __exit__(self, *exc):
        state.stack = state.stack[:-1]
        return False


class save_on_cpu(saved_tensors_hooks):  # noqa: N801
    """Keep saved tensors on the CPU until backward (torch moves them off the GPU; flowgrad
    tensors already live on the CPU, so each is kept as it is, as torch keeps a CPU tensor,
    and `pin_memory` is accepted for compatibility).

    >>> import flowgrad as flow
    >>> x = flow.ones(2, requires_grad=True)
    >>> with flow.autograd.graph.save_on_cpu():
    ...     y = (x.exp() * x).sum()
    >>> y.backward(); x.grad
    tensor([5.4366, 5.4366])
    """

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            return (t.device, t.detach().cpu())

        def unpack(packed):
            device, t = packed
            return t.to(device)
        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:  # noqa: N801
    """Inside, entering `saved_tensors_hooks` raises RuntimeError(error_message); also as a
    decorator.

    >>> import flowgrad as flow
    >>> with flow.autograd.graph.disable_saved_tensors_hooks("not here"):
    ...     try:
    ...         flow.autograd.graph.save_on_cpu().__enter__()
    ...     except RuntimeError as e:
    ...         print(e)
    not here
    """

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        if state.stack:
            raise RuntimeError(self.error_message)
        self.prev, state.disabled_message = state.disabled_message, self.error_message

    def __exit__(self, *exc):
        state.disabled_message = self.prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.error_message):
                return fn(*args, **kwargs)
        return wrapper


class PackedTensor:
    """A saved tensor kept as whatever `pack` returned (in the place of node.SavedTensor).

    It keeps the saved tensor's autograd identity (meta, grad_fn, version counter) but not
    its data; `unpack(node)` rebuilds the tensor from `unpack_hook(packed)`.
    """

    __slots__ = ("packed", "unpack_hook", "meta", "grad_fn", "counter", "version",
                 "is_output", "tensor", "data", "copy")

    def __init__(self, saved, tensor, pack, unpack):
        self.counter, self.version, self.is_output = saved.counter, saved.version, saved.is_output
        self.meta = tensor._meta
        self.grad_fn = None if saved.is_output else tensor._grad_fn
        self.tensor = None
        self.data = _stand_in(tensor._data)  # zero bytes: shape and dtype for messages
        self.unpack_hook = unpack
        self.packed = pack(tensor)
        self.copy = _is_copy(self.packed, _root(tensor))

    def check(self, node):
        """A write into the saved tensor since it was packed raises, unless pack kept a copy
        (then backward reads the values the forward used, as torch's does). Where pack kept
        the tensor itself (or something opaque), torch reads the values written without a
        word, a gradient of other values than the forward's: this raises instead."""
        if self.counter.value != self.version and not self.copy and not _meta.writes_unseen(
                self.counter, self.version) and not getattr(self.packed, "copied", False):
            raise RuntimeError(f"{saved_tensor_error(node, self)} It was saved through a "
                               f"saved_tensors_hooks pack hook that kept the tensor itself: "
                               f"torch skips this check there and reads the values written; "
                               f"have pack return a copy (t.clone()) to read the forward's values")

    def adopt(self, result, target):
        """`node.SavedTensor.adopt`: the saved output `result`, written into target in place,
        is target, whose version a later write moves."""
        if self.is_output and self.counter is result._counter:
            self.counter, self.version = target._counter, target._counter.value

    def unpack(self, node):
        self.check(node)
        value = self.unpack_hook(self.packed)
        if not isinstance(value, Tensor):
            raise TypeError(f"{node.name}: the saved-tensor unpack hook must return a Tensor, "
                            f"got {type(value).__name__}")
        t = Tensor._wrap(value._data)
        t._meta = self.meta
        t._grad_fn = node if self.is_output else self.grad_fn
        t._counter = self.counter
        return t


class _Kept:
    """A tensor saved inside `allow_mutation_on_saved_tensors` (a detached alias: no cycle
    through its node), and its copy taken before the first in-place write into its memory."""

    __slots__ = ("tensor", "copy")

    def __init__(self, tensor):
        self.tensor, self.copy = tensor.detach(), None

    @property
    def copied(self):  # (PackedTensor.check: the value read predates the write)
        return self.copy is not None


def _is_copy(packed, root):
    """Whether what pack returned holds its own copy of the saved values: tensors or arrays
    (alone, or in a tuple or list beside other things: a device), none of them in the memory
    whose root array is `root`."""
    found = False
    for item in packed if type(packed) in (tuple, list) else (packed,):
        if isinstance(item, Tensor):
            item = _root(item)
        elif hasattr(item, "__array_interface__") or hasattr(item, "__cuda_array_interface__"):
            item = memory_owner(item)
        else:
            continue
        if item is root:
            return False
        found = True
    return found


def _root(t):
    """The array owning the memory of t's elements (a vmap example's: its physical one)."""
    while getattr(t, "_phys", None) is not None:
        t = t._phys
    return memory_owner(t._data)


_MUTATION_CONTEXT = [None]


class allow_mutation_on_saved_tensors:  # noqa: N801 - torch's name
    """Context manager: inside, an in-place write into the memory of a tensor saved for
    backward first copies that tensor, and backward reads the copy, so the write raises no
    version error and the gradient is the one of the values the forward used. Run backward
    inside too; the graph's saved values are gone once it exits. Unlike torch's, a write
    through another view of the same memory (a slice of it, its base) is copied for too:
    torch copies for writes to the saved tensor itself and reads the others' new values.

    >>> import flowgrad as flow
    >>> a = flow.tensor([1.0, 2.0], requires_grad=True)
    >>> with flow.autograd.graph.allow_mutation_on_saved_tensors():
    ...     b = a * 1
    ...     out = (b * b).sum()
    ...     _ = b.mul_(10)
    ...     out.backward()
    >>> a.grad
    tensor([2., 4.])
    """

    def __enter__(self):
        if _MUTATION_CONTEXT[0] is not None:
            raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
        self._kept = {}  # id(root array) -> (the array, [_Kept])
        self._hooks = saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        _MUTATION_CONTEXT[0] = self
        _meta.BEFORE_WRITE.append(self._before_write)
        return self

    def __exit__(self, *exc):
        _meta.BEFORE_WRITE.remove(self._before_write)
        _MUTATION_CONTEXT[0] = None
        self._hooks.__exit__(*exc)
        self._kept = None
        return False

    def _pack(self, tensor):
        kept = _Kept(tensor)
        root = _root(tensor)
        self._kept.setdefault(id(root), (root, []))[1].append(kept)
        return kept

    def _unpack(self, kept):
        if self._kept is None:
            raise RuntimeError("Trying to backward outside of the "
                               "'allow_mutation_on_saved_tensors' context in which the graph "
                               "was originally recorded; run backward inside it")
        return kept.tensor if kept.copy is None else kept.copy

    def _before_write(self, target):
        entry = self._kept.get(id(_root(target)))
        if entry is not None:
            for kept in entry[1]:
                if kept.copy is None:
                    kept.copy = kept.tensor.clone()


def _stand_in(data):
    return np.broadcast_to(np.zeros((), data.dtype), data.shape)


def _pack_list(saved, tensors, pack, unpack):
    return [None if s is None else PackedTensor(s, t, pack, unpack)
            for s, t in zip(saved, tensors)]


# the transforms entered and func.grad/vjp's level class: bound by levels (which imports
# this layer)
TRANSFORMS: list = []
ReverseLevel = None


def _refuse_in_reverse_transforms():
    """torch's refusal of saved-tensor hooks while func.grad/vjp runs (their graph would be
    packed by hooks that know nothing of its levels: vmap(grad(checkpoint(f))) came out
    zeros, silently)."""
    if TRANSFORMS and any(type(lv) is ReverseLevel for lv in TRANSFORMS):
        raise RuntimeError("torch.func.{grad, vjp, jacrev, hessian} don't yet support saved "
                           "tensor hooks (checkpoint, save_on_cpu, "
                           "allow_mutation_on_saved_tensors, saved_tensors_hooks): leave "
                           "them out of the function transformed, or use autograd.grad")


def pack_capture(ctx, inputs, outputs):
    """Pass what add_node saved in `ctx` through the innermost hooks (hooks are on)."""
    _refuse_in_reverse_transforms()
    pack, unpack = state.stack[-1]
    if ctx._inputs is not None:
        ctx._inputs = _pack_list(ctx._inputs, inputs, pack, unpack)
    if ctx._outputs is not None:
        ctx._outputs = _pack_list(ctx._outputs, outputs, pack, unpack)


def pack_saved(saved, tensors):
    """The same for a custom Function's `ctx.save_for_backward` list."""
    _refuse_in_reverse_transforms()
    pack, unpack = state.stack[-1]
    return _pack_list(saved, tensors, pack, unpack)
