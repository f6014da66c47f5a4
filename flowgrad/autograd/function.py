"""Custom autograd functions: subclass `Function`, write static `forward` and `backward`.

>>> import flowgrad as flow
>>> class Cube(flow.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x ** 3
...     @staticmethod
...     def backward(ctx, dy):
...         (x,) = ctx.saved_tensors
...         return dy * 3 * x ** 2
>>> x = flow.tensor(2.0, requires_grad=True)
>>> Cube.apply(x).backward(); x.grad
tensor(12.)
"""
from __future__ import annotations

import functools

from . import grad_mode
from .interpreter import add_node
from .node import NodeName, SavedTensor


class FunctionCtx:
    """The `ctx` of a custom Function: saved tensors, flags, and any attributes you set."""

    def __init__(self):
        self._saved = ()
        self._node = None
        self.needs_input_grad = ()
        self.non_differentiable = set()
        self.dirty = set()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self._saved = tensors

    @property
    def saved_tensors(self):
        out = []
        for s in self._saved:
            if isinstance(s, SavedTensor):
                out.append(s.unpack(self._node))
            else:
                out.append(s)
        return tuple(out)

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        self.dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class _FunctionOp:
    """Plays the role of a registry entry for one custom Function class."""

    __slots__ = ("fn", "node_name", "save", "n_out")

    def __init__(self, fn):
        self.fn = fn
        self.node_name = NodeName(f"{fn.__name__}Backward")
        self.save, self.n_out = 0, 1

    def backward(self, state, *grads):
        ctx = state.attrs["ctx"]
        ctx._node = state.node
        if not ctx.materialize_grads:
            grads = tuple(None if g is None else g for g in grads)
        with grad_mode.enable_grad() if grad_mode.is_grad_enabled() else grad_mode.no_grad():
            result = self.fn.backward(ctx, *grads)
        result = result if isinstance(result, tuple) else (result,)
        n_in = len(state.attrs["positions"])
        n_args = state.attrs["n_args"]
        if len(result) != n_args:
            raise RuntimeError(
                f"function {self.fn.__name__}Backward returned an incorrect number of "
                f"gradients (expected {n_args}, got {len(result)}); return one per forward "
                f"argument (None for non-tensors)")
        return tuple(result[i] for i in state.attrs["positions"])[:n_in]


class Function:
    """Base class for ops written as a forward/backward pair in flowgrad code."""

    _op = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._op = _FunctionOp(cls)

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("subclasses of Function must implement forward")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("subclasses of Function must implement backward")

    @classmethod
    def apply(cls, *args, **kwargs):
        from ..tensor import Tensor

        ctx = FunctionCtx()
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in positions]
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        record = grad_mode.is_grad_enabled() and any(t.requires_grad for t in tensors)
        with grad_mode.no_grad():
            outputs = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        if record:
            # outputs that alias an input (returned as-is) get their own tensor object
            tensor_outs = []
            for o in outs:
                if isinstance(o, Tensor) and any(o is t for t in tensors) and \
                        id(o) not in ctx.dirty:
                    o = o.detach()
                tensor_outs.append(o)
            outs = tuple(tensor_outs)
            diff = [o for o in outs if isinstance(o, Tensor)
                    and id(o) not in ctx.non_differentiable]
            for o in outs:
                if isinstance(o, Tensor) and id(o) in ctx.dirty:
                    o._grad_fn = None
                    o._meta = None
            attrs = {"ctx": ctx, "positions": positions, "n_args": len(args)}
            node = add_node(cls._op, tensors, diff, attrs, ())
            ctx._node = node
            ctx._saved = tuple(
                SavedTensor(t, any(t is o for o in diff)) if isinstance(t, Tensor) else t
                for t in ctx._saved)
            node.saved_something = bool(ctx._saved)
        return outs[0] if single else outs


def once_differentiable(backward):
    """Mark a backward as not differentiable itself: it runs with grad mode off."""
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with grad_mode.no_grad():
            return backward(ctx, *grads)
    return wrapper
