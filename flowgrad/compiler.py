"""`flow.compile` (torch.compile's place) on the nn.Graph compiler, and `flow.compiler`.

`flow.compile(model)` returns a module whose calls run compiled plans: the forward is one
traced `nn.Graph`; when a gradient is needed, the call is a custom autograd Function whose
backward is a second graph (the forward recomputed, then the autograd pass) run with the
random generator state the forward had, so dropout masks match and `loss.backward()` outside
works as eagerly. A model the tracer cannot follow (reading values with `.item()`, Python
branches on data, non-tensor arguments) runs eagerly instead, with a warning saying why.

>>> import flowgrad as flow
>>> model = flow.compile(flow.nn.Linear(3, 1))
>>> x = flow.ones(2, 3)
>>> model(x).sum().backward()
>>> model.weight.grad.shape
flowgrad.Size([1, 3])
"""
from __future__ import annotations

import contextlib
import functools

from . import dtypes as _dtypes
from ._warn import warn
from .amp.autocast_mode import autocast
from .autograd import grad_mode
from .autograd.function import Function
from .graph.call_args import captured_by
from .graph.plan_checks import ambient
from .nn.module import Module
from .tensor import Tensor

__all__ = ["compile", "reset", "disable", "is_compiling", "is_dynamo_compiling",
           "allow_in_graph", "assume_constant_result"]

_compiling = [False]


def is_compiling() -> bool:
    """True while flowgrad traces a compiled call (as torch.compiler.is_compiling)."""
    return _compiling[0]


is_dynamo_compiling = is_compiling


def reset() -> None:
    """Nothing to clear: each compiled module keeps its own plans."""


def disable(fn=None, recursive=True):
    """Decorator: run `fn` eagerly (every function runs eagerly unless compiled)."""
    return fn if fn is not None else (lambda f: f)


def allow_in_graph(fn):
    """Accepted for torch compatibility: flowgrad traces every op of `fn` anyway."""
    return fn


def assume_constant_result(fn):
    """Accepted for torch compatibility; returns `fn`."""
    return fn


def _graphs():
    from .graph.call_args import flatten_outputs
    from .graph.graph import Graph

    @Graph.with_dynamic_input_shape(size=8)
    class Forward(Graph):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def build(self, *args):
            return self.model(*args)

    @Graph.with_dynamic_input_shape(size=8)
    class Backward(Graph):
        """The forward again, then the gradients of its outputs for the inputs that need
        them and the parameters (None where none flows)."""

        def __init__(self, model, needs):
            super().__init__()
            self.model, self.needs = model, needs

        def build(self, *args):
            n = len(self.needs)
            inputs, out_grads = args[:n], args[n:]
            with grad_mode.enable_grad():
                outs = flatten_outputs(self.model(*inputs))[0]
                wrt = [x for x, need in zip(inputs, self.needs) if need] + _params(self.model)
                # (outputs no gradient flows from: autograd.grad refuses them, as eagerly)
                pairs = [(o, g) for o, g in zip(outs, out_grads) if o.requires_grad]
                grads = _grad_fn()([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                   allow_unused=True) if pairs else [None] * len(wrt)
            return list(grads)  # (None where none flows: .grad stays None, as eagerly)

    return Forward, Backward


def _grad_fn():
    from .autograd import grad

    return grad


def _params(model):
    """The tensors a compiled call's gradients are taken for besides its inputs: the model's
    parameters, and for a function the tensors requiring grad it captured."""
    return [p for p in model.parameters() if p.requires_grad] + [
        t for t in getattr(model, "captured_tensors", ()) if t.requires_grad]


class _CompiledCall(Function):
    """One call of the compiled model inside eager autograd."""

    @staticmethod
    def forward(ctx, owner, n_inputs, *tensors):
        from .random import get_rng_state

        inputs = tensors[:n_inputs]
        ctx.owner, ctx.inputs = owner, [x.detach() for x in inputs]
        ctx.needs = tuple(x.requires_grad for x in inputs)
        ctx.rng = get_rng_state()
        ctx.ambient = ambient(False)[:2]  # (the backward recomputes the forward under it)
        ctx.save_for_backward(*inputs)  # (for a backward that is differentiated)
        outs, ctx.rebuild = owner._run_forward(inputs)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *out_grads):
        if grad_mode.is_grad_enabled():  # create_graph=True (a gradient penalty): the plans'
            # gradients have no graph of their own, which the next backward would miss
            grads = ctx.owner._eager_backward(ctx.saved_tensors, ctx.needs, ctx.rng,
                                              ctx.ambient, out_grads)
        else:
            grads = ctx.owner._run_backward(ctx.inputs, ctx.needs, ctx.rng, ctx.ambient,
                                            out_grads)
        it = iter(grads)
        return (None, None, *[next(it) if need else None for need in ctx.needs],
                *it)


class OptimizedModule(Module):
    """What `flow.compile(module)` returns: the module (`_orig_mod`) called through compiled
    graphs; its parameters and state_dict are the module's (keys prefixed `_orig_mod.`, as
    torch's)."""

    def __init__(self, module, fullgraph=False):
        super().__init__()
        self._orig_mod = module
        object.__setattr__(self, "_fullgraph", fullgraph)
        object.__setattr__(self, "_graphs", {})  # (training, needs) -> Graph
        object.__setattr__(self, "_eager_reason", None)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    def forward(self, *args, **kwargs):
        model = self._orig_mod
        if self._eager_reason is None and (kwargs or not args or not all(
                isinstance(a, Tensor) for a in args)):
            self._fall_back("only positional tensor arguments are compiled")
        if self._eager_reason is not None:
            return model(*args, **kwargs)
        if type(model) is _FunctionModule and model.recapture():  # a closure or global
            self._graphs.clear()                                  # now holds another one
        try:
            if grad_mode.is_grad_enabled() and (
                    any(a.requires_grad for a in args) or _params(model)):
                outs = _CompiledCall.apply(self, len(args), *args, *_params(model))
                return self._rebuild(list(outs))
            outs, rebuild = self._run_forward(args)
            return rebuild(outs)
        except _TraceFailure as failure:
            self._fall_back(str(failure.__cause__))
            return model(*args, **kwargs)

    def _fall_back(self, reason):
        if self._fullgraph:
            raise RuntimeError(f"flowgrad.compile(fullgraph=True): {reason}")
        object.__setattr__(self, "_eager_reason", reason)
        warn(f"flowgrad.compile: running {type(self._orig_mod).__name__} eagerly: "
             f"{reason}", UserWarning, stacklevel=3)

    def _graph(self, key, make):
        graph = self._graphs.get(key)
        first = graph is None
        if first:
            graph = self._graphs[key] = make()
        return graph, first

    def _call_graph(self, key, make, args):
        from .graph.graph import StalePlanError

        graph, first = self._graph(key, make)
        _compiling[0] = True
        try:
            try:
                return graph(*args)
            except StalePlanError:  # the model changed since it compiled: trace anew
                self._graphs.pop(key, None)
                graph, first = self._graph(key, make)
                return graph(*args)
        except Exception as exc:
            if first or not graph.is_compiled:
                self._graphs.pop(key, None)
                raise _TraceFailure() from exc
            raise
        finally:
            _compiling[0] = False

    def _run_forward(self, inputs):
        from .graph.call_args import flatten_outputs

        Forward, _ = _graphs()
        model = self._orig_mod
        # (a plan per default dtype and autocast region too, as torch.compile guards them)
        out = self._call_graph(("forward", model.training, ambient(False)[:2]),
                               lambda: Forward(model), inputs)
        outs, rebuild = flatten_outputs(out)
        object.__setattr__(self, "_rebuild", rebuild)
        return outs, rebuild

    def _run_backward(self, inputs, needs, rng, state, out_grads):
        _, Backward = _graphs()
        model = self._orig_mod
        # the recomputed forward must neither draw other random numbers nor update buffers
        # (BatchNorm's running stats) a second time, and runs in the forward's default dtype
        # and autocast region (the backward usually runs outside it): its casts are the
        # forward's, and its gradients eager's
        with _recomputing(model, rng, state), grad_mode.no_grad():
            inputs = [x.detach()._set_requires_grad(need) for x, need in zip(inputs, needs)]
            return self._call_graph(("backward", model.training, needs, state),
                                    lambda: Backward(model, needs), [*inputs, *out_grads])

    def _eager_backward(self, inputs, needs, rng, state, out_grads):
        """The gradients of a backward that is itself differentiated (create_graph=True): the
        forward recomputed eagerly, as the forward ran, and differentiated with
        create_graph, so the next backward reaches the inputs and parameters through them."""
        from .autograd import grad
        from .graph.call_args import flatten_outputs

        model = self._orig_mod
        with _recomputing(model, rng, state):
            outs = flatten_outputs(model(*inputs))[0]
        wrt = [x for x, need in zip(inputs, needs) if need] + _params(model)
        pairs = [(o, g) for o, g in zip(outs, out_grads) if o.requires_grad]
        if not pairs:
            return [None] * len(wrt)
        return list(grad([o for o, _ in pairs], wrt, [g for _, g in pairs], create_graph=True,
                         allow_unused=True))


def _recomputing(model, rng, state):
    """Run the block in the forward's random state, default dtype and autocast region, and
    put back the generator, the default dtype and the model's buffers after it."""
    from .random import get_rng_state, set_rng_state

    buffers = [(b, b._data.copy()) for b in model.buffers()]
    now, default = get_rng_state(), _dtypes.get_default_dtype()
    set_rng_state(rng)
    _dtypes.set_default_dtype(state[0])
    try:
        with autocast("cpu", state[1], state[1] is not None):
            yield
    finally:
        set_rng_state(now)
        _dtypes.set_default_dtype(default)
        for b, saved in buffers:
            b._data[...] = saved


_recomputing = contextlib.contextmanager(_recomputing)


class _TraceFailure(Exception):
    """Tracing or compiling a graph failed: the caller runs the model eagerly."""


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,
            options=None, name=None, disable=False, recompile_limit=None,
            isolate_recompiles=False, shapes_spec=None):
    """torch.compile on flowgrad's graph compiler: a module comes back as an
    `OptimizedModule`, a function as a compiled function (forward only, see the module
    docstring). `fullgraph=True` raises where the eager fallback would be taken; the other
    options (backend, mode, dynamic: plans are kept per input shape anyway) are accepted
    and ignored. Usable as a decorator, with or without arguments.

    >>> import flowgrad as flow
    >>> @flow.compile
    ... def f(x):
    ...     return (x * 2).relu()
    >>> f(flow.tensor([-1.0, 3.0]))
    tensor([0., 6.])
    """
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, disable=disable)
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model, fullgraph)
    wrapper = OptimizedModule(_FunctionModule(model), fullgraph)

    @functools.wraps(model)
    def compiled(*args, **kwargs):
        return wrapper(*args, **kwargs)

    compiled._torchdynamo_orig_callable = model
    return compiled


class _FunctionModule(Module):
    """A function as the model of compiled graphs. The modules it reaches through its
    closure, globals, defaults or bound self (directly, or in a list, tuple or dict) are its
    submodules, so a compiled call's gradients reach their parameters and a change to them
    (a setting, a replaced parameter) traces anew, as for a compiled module; the tensors
    requiring grad it reaches get their gradients too."""

    def __init__(self, fn):
        super().__init__()
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "captured", ())
        self.recapture()

    def recapture(self):
        """Find what the function reaches now; True when that changed since the last look."""
        found = tuple(captured_by(self.fn))
        if len(found) == len(self.captured) and all(
                a is b for a, b in zip(found, self.captured)):
            return False
        object.__setattr__(self, "captured", found)
        self._modules.clear()
        for i, module in enumerate(m for m in found if isinstance(m, Module)):
            self._modules[f"captured_{i}"] = module
        object.__setattr__(self, "captured_tensors",
                           [t for t in found if isinstance(t, Tensor)])
        return True

    def forward(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

