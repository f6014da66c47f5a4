"""Activation checkpointing: trade compute for memory, as torch.utils.checkpoint.

`checkpoint(fn, *args)` runs `fn` keeping none of its intermediate values for backward;
backward runs `fn` again to get them. Two ways, as torch's:

- `use_reentrant=False` (recommended): the tensor arguments are saved for backward (as
  torch's: an in-place write into one before backward raises the version error, where the
  recomputation would silently run on the new values), then the forward runs under
  saved-tensor hooks whose pack keeps only a slot number; the first unpack in a backward run
  re-runs `fn` (with grad on, under hooks that collect what it saves) and hands out the
  recomputed tensors slot by slot. The re-run stops as soon as it has saved as many tensors
  as the forward did (early stop,
  as torch's: what `fn` does after its last saved tensor, a module's forward hook, does not
  run again), unless `early_stop=False` or `set_checkpoint_early_stop(False)`.
- `use_reentrant=True`: a custom Function whose forward runs `fn` under `no_grad` and whose
  backward re-runs it with grad on and calls `autograd.backward` inside (leaf grads land
  in `.grad`; `autograd.grad` cannot reach through it).

With `preserve_rng_state=True` (the default) the global generator is set back to its state
at forward time while recomputing, so dropout draws the same mask.

>>> import flowgrad as flow
>>> from flowgrad.utils.checkpoint import checkpoint
>>> lin = flow.nn.Linear(3, 3)
>>> x = flow.ones(2, 3, requires_grad=True)
>>> y = checkpoint(lambda t: lin(t).relu(), x, use_reentrant=False)
>>> y.sum().backward(); x.grad.shape
flowgrad.Size([2, 3])
"""
from __future__ import annotations

import contextlib

from .. import random as _random
from .._warn import warn
from ..autograd import grad_mode, saved_hooks
from ..autograd import interpreter as _interpreter
from ..autograd.function import Function
from ..autograd.graph import current_graph_task_id
from ..autograd.node import SavedTensor
from ..autograd.saved_hooks import PackedTensor, saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointFunction",
           "set_checkpoint_early_stop", "set_checkpoint_debug_enabled", "detach_variable",
           "check_backward_validity", "get_device_states", "set_device_states",
           "DefaultDeviceType", "noop_context_fn"]

_EARLY_STOP = [None]  # set_checkpoint_early_stop's value while its block runs (None: unset)
_DEBUG = [None]       # set_checkpoint_debug_enabled's


class CheckpointError(RuntimeError):
    """The recomputation of a non-reentrant checkpoint did not save what the forward saved."""


class _StopRecomputation(Exception):
    """Raised by the recomputation's pack hook once every slot is filled (early stop)."""


def set_checkpoint_early_stop(enable):
    """Whether the checkpoints whose forward runs inside the block stop their recomputation as
    soon as it has saved every tensor backward needs (the default), as torch's.

    >>> import flowgrad as flow
    >>> from flowgrad.utils.checkpoint import checkpoint, set_checkpoint_early_stop
    >>> x = flow.ones(2, requires_grad=True)
    >>> with set_checkpoint_early_stop(False):
    ...     y = checkpoint(lambda t: t.exp() * 2, x, use_reentrant=False)
    >>> y.sum().backward(); x.grad
    tensor([5.4366, 5.4366])
    """
    return _setting(_EARLY_STOP, bool(enable))


def set_checkpoint_debug_enabled(enabled):
    """Inside the block every non-reentrant checkpoint runs as with `debug=True` (`None`:
    each call's own `debug`): a recomputation that saves other tensors than the forward
    raises naming the shape and dtype of every tensor each of them saved.

    >>> from flowgrad.utils.checkpoint import set_checkpoint_debug_enabled
    >>> with set_checkpoint_debug_enabled(True):
    ...     pass
    """
    return _setting(_DEBUG, enabled)


@contextlib.contextmanager
def _setting(store, value):
    """`store[0]` (a module setting) is `value` while the block runs."""
    prev, store[0] = store[0], value
    try:
        yield
    finally:
        store[0] = prev


def detach_variable(inputs):
    """A tuple of `inputs` with each tensor detached, keeping its requires_grad (torch's
    helper for reentrant checkpoints).

    >>> import flowgrad as flow
    >>> from flowgrad.utils.checkpoint import detach_variable
    >>> x = flow.ones(2, requires_grad=True) * 2
    >>> y, n = detach_variable((x, 3)); (y.requires_grad, y.grad_fn, n)
    (True, None, 3)
    """
    from ..tensor import Tensor

    if not isinstance(inputs, tuple):
        raise RuntimeError(f"detach_variable: only a tuple of tensors is supported, got "
                           f"{type(inputs).__name__}")
    return tuple(x.detach().requires_grad_(x.requires_grad) if isinstance(x, Tensor) else x
                 for x in inputs)


def check_backward_validity(inputs):
    """Warn when no tensor of `inputs` requires grad: the checkpoint's gradients will be None.

    >>> import flowgrad as flow
    >>> from flowgrad.utils.checkpoint import check_backward_validity
    >>> check_backward_validity((flow.ones(1, requires_grad=True),))
    """
    from ..tensor import Tensor

    if not any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        warn("None of the inputs have requires_grad=True. Gradients will be None",
             stacklevel=3)


def get_device_states(*args):
    """The RNG states of the accelerators the tensor arguments live on, to restore with
    `set_device_states`: flowgrad's tensors are on the CPU, whose generator the checkpoint
    keeps itself, so none (two empty lists, as torch's without GPU tensors).

    >>> from flowgrad.utils.checkpoint import get_device_states
    >>> get_device_states()
    ([], [])
    """
    return [], []


def set_device_states(devices, states, *, device_type=None):
    """Restore accelerator RNG states from `get_device_states`; there are none to restore on
    a CPU-only flowgrad (a non-empty list raises).

    >>> from flowgrad.utils.checkpoint import set_device_states
    >>> set_device_states([], [])
    """
    if list(devices) or list(states):
        raise RuntimeError(f"set_device_states: flowgrad has no {device_type or 'accelerator'} "
                           f"device whose RNG state could be set")


class DefaultDeviceType:
    """The device type whose RNG state checkpoints preserve besides the CPU's: the current
    accelerator's, else 'cpu' (torch's rule; flowgrad's tensors are on the CPU).

    >>> from flowgrad.utils.checkpoint import DefaultDeviceType
    >>> DefaultDeviceType.get_device_type()
    'cpu'
    """

    _default_device_type = None

    @staticmethod
    def set_device_type(device="cuda"):
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type():
        if not DefaultDeviceType._default_device_type:
            from .. import accelerator

            acc = accelerator.current_accelerator(True)
            DefaultDeviceType._default_device_type = acc.type if acc else "cpu"
        return DefaultDeviceType._default_device_type


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def _autocast_as_now():
    """A context that recomputes under the autocast state of now (the forward's), as torch's
    checkpoint: run in a backward outside `autocast`, a recomputation in float32 would save
    other dtypes than the bfloat16 forward saved."""
    from ..amp import autocast_mode as amp

    kwargs = dict(dtype=amp.get_autocast_dtype("cpu"), enabled=amp.is_autocast_enabled("cpu"),
                  cache_enabled=amp.is_autocast_cache_enabled())
    return lambda: amp.autocast("cpu", **kwargs)


@contextlib.contextmanager
def _rng_as_at(state):
    """Run the block with the global generator at `state`, then put it back."""
    if state is None:
        yield
        return
    now = _random.get_rng_state()
    _random.set_rng_state(state)
    try:
        yield
    finally:
        _random.set_rng_state(now)


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check="default", debug=False, early_stop=True,
               preserve_rng_state=True, **kwargs):
    """Run `function(*args, **kwargs)` without keeping its intermediate values; backward
    recomputes them. `use_reentrant` should be passed (None warns and means True, as
    torch 2.x).

    >>> import flowgrad as flow
    >>> from flowgrad.utils.checkpoint import checkpoint
    >>> x = flow.tensor([1.0, 2.0], requires_grad=True)
    >>> checkpoint(lambda t: (t.exp() * t).sum(), x, use_reentrant=True).backward()
    >>> x.grad
    tensor([ 5.4366, 22.1672])
    """
    if use_reentrant is None:
        warn("flowgrad.utils.checkpoint: the use_reentrant parameter should be passed "
             "explicitly; use_reentrant=False is recommended. It defaults to True, as "
             "torch's does.", stacklevel=2)
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check must be 'default' or 'none', got "
                         f"{determinism_check!r}")
    traced = getattr(_interpreter.current, "checkpointed", None)  # (nn.Graph's build)
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError("checkpoint: passing context_fn or debug is only supported when "
                             "use_reentrant=False")
        if kwargs:
            raise ValueError("checkpoint: keyword arguments to the function are only "
                             "supported when use_reentrant=False")
        if traced is not None and grad_mode.is_grad_enabled() and any(
                getattr(a, "requires_grad", False) for a in args):
            return traced(function, args, {})
        return _ReentrantCheckpoint.apply(function, preserve_rng_state, *args)
    if _EARLY_STOP[0] is not None:  # (the block's setting wins over the argument, as torch's)
        early_stop = _EARLY_STOP[0]
    if _DEBUG[0] is not None:
        debug = _DEBUG[0]
    if debug and context_fn is not noop_context_fn:  # (torch's debug logs through its own)
        raise ValueError("checkpoint: debug=True is incompatible with non-default context_fn")
    if traced is not None and grad_mode.is_grad_enabled():
        forward_context, _ = context_fn()
        with forward_context:
            return traced(function, args, kwargs)
    return _checkpoint_with_hooks(function, preserve_rng_state, context_fn,
                                  determinism_check == "default", early_stop, debug, args,
                                  kwargs)


class _ReentrantCheckpoint(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        from ..tensor import Tensor

        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.rng_state = _random.get_rng_state() if preserve_rng_state else None
        ctx.autocast = _autocast_as_now()
        ctx.positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.args = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.positions))
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        from ..autograd.engine import _is_checkpoint_valid
        from ..autograd.engine import backward as run_backward

        if not _is_checkpoint_valid():  # its inner backward would fill unasked-for .grads
            raise RuntimeError(
                "When use_reentrant=True, flowgrad.utils.checkpoint is incompatible with "
                ".grad() or passing an `inputs` parameter to .backward(). To resolve this "
                "error, you can either set use_reentrant=False, or call .backward() without "
                "passing the `inputs` argument.")
        args = list(ctx.args)
        saved = ctx.saved_tensors
        for i, t in zip(ctx.positions, saved):
            args[i] = t.detach()._set_requires_grad(t.requires_grad)
        with _rng_as_at(ctx.rng_state), grad_mode.enable_grad(), ctx.autocast():
            outputs = ctx.run_function(*args)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if hasattr(o, "requires_grad") and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("checkpoint: none of the function's outputs requires grad, so "
                               "there is nothing to backpropagate through the checkpoint")
        run_backward([o for o, _ in pairs], [g for _, g in pairs])
        result = [None] * len(args)
        for i in ctx.positions:
            result[i] = args[i].grad if args[i].requires_grad else None
        return (None, None, *result)


CheckpointFunction = _ReentrantCheckpoint  # torch's name for the reentrant Function


class _Recomputation:
    """One checkpointed call: its forward's slots and the values a recomputation filled, for
    the backward run that recomputed them (`task`)."""

    name = "checkpoint"  # (what the saved-tensor errors call the saver of the arguments)

    def __init__(self, function, args, kwargs, rng_state, recompute_context, check,
                 early_stop, debug):
        self.function, self.kwargs = function, kwargs
        self.args = _save_inputs(args)
        self.rng_state, self.recompute_context, self.check = rng_state, recompute_context, check
        self.early_stop, self.debug = early_stop, debug
        self.autocast = _autocast_as_now()
        self.metadata = []   # (shape, dtype) per slot, from the forward
        self.values = {}     # slot -> recomputed tensor, until backward takes it
        self.task = None     # the backward run the values were recomputed for
        self.forward_completed = False

    def pack(self, tensor):
        self.metadata.append((tuple(tensor.shape), tensor.dtype))
        return _Slot(len(self.metadata) - 1)

    def unpack(self, slot):
        task = current_graph_task_id()
        if task != self.task:  # each backward run recomputes, as torch's (the values of an
            # earlier run that took only some are stale: parameters may have changed since);
            # reads outside an eager backward (nn.Graph's autograd pass) share one set
            self.values.clear()
            self.task = task
        value = self.values.pop(slot, None)
        if value is None:  # first use in this backward (or a second read of the slot)
            self.recompute()
            value = self.values.pop(slot)
        return value

    def recompute(self):
        recomputed, versions = [], []
        n = len(self.metadata)
        mismatch_allowed = False

        def keep(t):
            nonlocal mismatch_allowed
            if len(recomputed) >= n:
                if self.forward_completed:
                    raise CheckpointError(
                        "flowgrad.utils.checkpoint: trying to save more tensors during "
                        "recomputation than during the original forward pass" + self._log(
                            recomputed + [t.detach()]))
                mismatch_allowed = True  # (a backward inside the checkpointed function
                # itself: its forward has not saved everything yet)
            recomputed.append(t.detach())
            versions.append(t._version)
            if self.early_stop and len(recomputed) == n:
                raise _StopRecomputation

        def refuse(_):
            raise RuntimeError("checkpoint: a tensor saved while recomputing was unpacked")

        args = self.saved_args()  # (before the contexts, as torch's)
        try:
            with _rng_as_at(self.rng_state), grad_mode.enable_grad(), self.autocast(), \
                    self.recompute_context, saved_tensors_hooks(keep, refuse):
                self.function(*args, **self.kwargs)
        except _StopRecomputation:
            pass
        if len(recomputed) < n or (len(recomputed) > n and not mismatch_allowed):
            raise CheckpointError(
                f"flowgrad.utils.checkpoint: a different number of tensors was saved during "
                f"the original forward ({n}) and the recomputation ({len(recomputed)}); the "
                f"checkpointed function must run the same ops both times (no branches on "
                f"global state)" + self._log(recomputed))
        for slot, t in enumerate(recomputed[:n]):
            if self.check and (tuple(t.shape), t.dtype) != self.metadata[slot]:
                raise CheckpointError(
                    f"flowgrad.utils.checkpoint: recomputed tensor {slot} has shape "
                    f"{tuple(t.shape)} and dtype {t.dtype}, the forward saved "
                    f"{self.metadata[slot][0]} {self.metadata[slot][1]}" + self._log(
                        recomputed))
            if t._version != versions[slot]:
                raise RuntimeError(
                    f"flowgrad.utils.checkpoint: tensor {slot} saved while recomputing (shape "
                    f"{tuple(t.shape)}, {t.dtype}) was modified by an in-place operation later "
                    f"in the recomputation, so backward would read the written values, not "
                    f"those the forward used (torch reads them without a word). Write into a "
                    f"copy (x = x.clone()) or out of place instead.")
            self.values[slot] = t

    def saved_args(self):
        """The arguments, each tensor unpacked (through the hooks that packed it)."""
        return [a.unpack(self) if isinstance(a, (SavedTensor, PackedTensor)) else a
                for a in self.args]

    def _log(self, recomputed):
        """With debug: what each run saved, slot by slot."""
        if not self.debug:
            return ""
        forward = "\n".join(f"  {i}: {shape} {dtype}" for i, (shape, dtype)
                             in enumerate(self.metadata))
        again = "\n".join(f"  {i}: {tuple(t.shape)} {t.dtype}" for i, t in enumerate(recomputed))
        return (f"\nTensors saved during the original forward:\n{forward}\n"
                f"Tensors saved during recomputation:\n{again}")


class _Slot(int):
    """What the forward's pack keeps: a slot number. Its values come from the recomputation,
    so a write into the forward's tensor after it was saved does not matter (`copied`: the
    saved-tensor version check passes, as torch's skips it for hooks)."""

    copied = True


def _save_inputs(args):
    """`args` with each tensor saved for backward as an op's input (torch's checkpoint saves
    them so: its outer saved-tensor hooks pack each, an inference tensor is refused)."""
    from ..tensor import Tensor

    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    tensors = [args[i] for i in positions]
    saved = [SavedTensor(t, is_output=False) for t in tensors]
    if saved_hooks.state.stack:
        saved = saved_hooks.pack_saved(saved, tensors)
    args = list(args)
    for i, s in zip(positions, saved):
        args[i] = s
    return args


def _checkpoint_with_hooks(function, preserve_rng_state, context_fn, check, early_stop, debug,
                           args, kwargs):
    forward_context, recompute_context = context_fn()  # once: each recomputation enters
    # the same context, as torch's
    if not grad_mode.is_grad_enabled():  # nothing is recorded, so nothing to recompute (torch
        return function(*args, **kwargs)  # enters neither context then either)
    rng_state = _random.get_rng_state() if preserve_rng_state else None
    frame = _Recomputation(function, args, kwargs, rng_state, recompute_context, check,
                           early_stop, debug)
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        out = function(*args, **kwargs)
    frame.forward_completed = True
    return out


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run a Sequential (or a list of modules/functions) in `segments` checkpointed pieces;
    the last piece runs normally, as torch's.

    >>> import flowgrad as flow
    >>> from flowgrad.utils.checkpoint import checkpoint_sequential
    >>> model = flow.nn.Sequential(flow.nn.Linear(2, 2), flow.nn.ReLU(), flow.nn.Linear(2, 1))
    >>> x = flow.ones(4, 2, requires_grad=True)
    >>> checkpoint_sequential(model, 2, x, use_reentrant=False).shape
    flowgrad.Size([4, 1])
    """
    if use_reentrant is None:
        warn("flowgrad.utils.checkpoint.checkpoint_sequential: the use_reentrant "
             "parameter should be passed explicitly; it defaults to True, as torch's "
             "does.", stacklevel=2)
        use_reentrant = True
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
    if not 0 < segments <= max(len(functions), 1):
        raise ValueError(f"checkpoint_sequential: segments must be between 1 and the number "
                         f"of functions ({len(functions)}), got {segments}")
    size = len(functions) // segments

    def run(start, end):
        def forward(x):
            for fn in functions[start:end + 1]:
                x = fn(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(functions) - 1)(input)
