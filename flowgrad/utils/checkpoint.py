"""Activation checkpointing: trade compute for memory, as torch.utils.checkpoint.

`checkpoint(fn, *args)` runs `fn` keeping none of its intermediate values for backward;
backward runs `fn` again to get them. Two ways, as torch's:

- `use_reentrant=False` (recommended): the forward runs under saved-tensor hooks whose pack
  keeps only a slot number; the first unpack in backward re-runs `fn` (with grad on, under
  hooks that collect what it saves) and hands out the recomputed tensors slot by slot.
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
from ..autograd import grad_mode
from ..autograd.function import Function
from ..autograd.saved_hooks import saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential"]


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
               determinism_check="default", debug=False, preserve_rng_state=True, **kwargs):
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
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError("checkpoint: passing context_fn or debug is only supported when "
                             "use_reentrant=False")
        if kwargs:
            raise ValueError("checkpoint: keyword arguments to the function are only "
                             "supported when use_reentrant=False")
        return _ReentrantCheckpoint.apply(function, preserve_rng_state, *args)
    return _checkpoint_with_hooks(function, preserve_rng_state, context_fn,
                                  determinism_check == "default", args, kwargs)


class _ReentrantCheckpoint(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        from ..tensor import Tensor

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


class _Recomputation:
    """One checkpointed call: its forward's slots and the values a recomputation filled."""

    def __init__(self, function, args, kwargs, rng_state, context_fn, check):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.rng_state, self.context_fn, self.check = rng_state, context_fn, check
        self.autocast = _autocast_as_now()
        self.metadata = []   # (shape, dtype) per slot, from the forward
        self.values = {}     # slot -> recomputed tensor, until backward takes it

    def pack(self, tensor):
        self.metadata.append((tuple(tensor.shape), tensor.dtype))
        return len(self.metadata) - 1

    def unpack(self, slot):
        value = self.values.pop(slot, None)
        if value is None:  # first use in this backward (or a second backward): recompute
            self.recompute()
            value = self.values.pop(slot)
        return value

    def recompute(self):
        recomputed = []

        def keep(t):
            recomputed.append(t.detach())

        def refuse(_):
            raise RuntimeError("checkpoint: a tensor saved while recomputing was unpacked")

        _, recompute_context = self.context_fn()
        with _rng_as_at(self.rng_state), grad_mode.enable_grad(), self.autocast(), \
                recompute_context, saved_tensors_hooks(keep, refuse):
            self.function(*self.args, **self.kwargs)
        if len(recomputed) != len(self.metadata):
            raise RuntimeError(
                f"flowgrad.utils.checkpoint: the recomputation saved {len(recomputed)} "
                f"tensors, the forward saved {len(self.metadata)}; the checkpointed function "
                f"must run the same ops both times (no branches on global state)")
        for slot, t in enumerate(recomputed):
            if self.check and (tuple(t.shape), t.dtype) != self.metadata[slot]:
                raise RuntimeError(
                    f"flowgrad.utils.checkpoint: recomputed tensor {slot} has shape "
                    f"{tuple(t.shape)} and dtype {t.dtype}, the forward saved "
                    f"{self.metadata[slot][0]} {self.metadata[slot][1]}")
            self.values[slot] = t


def _checkpoint_with_hooks(function, preserve_rng_state, context_fn, check, args, kwargs):
    rng_state = _random.get_rng_state() if preserve_rng_state else None
    frame = _Recomputation(function, args, kwargs, rng_state, context_fn, check)
    forward_context, _ = context_fn()
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        return function(*args, **kwargs)


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
