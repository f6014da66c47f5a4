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
import inspect

from ..errors import freed_graph_error
from . import grad_mode
from . import inplace as _inplace
from . import interpreter as _interpreter
from . import levels as _levels
from . import saved_hooks as _saved_hooks
from .inplace import CUSTOM_FUNCTION_VIEWS
from .interpreter import add_node
from .meta import carry_over
from .node import NodeName, SavedTensor
from .views import view_error

# tensor type -> the SavedTensor class its saved outputs take (flowgrad.func.vmap registers
# BatchedTensor's: a saved output's own data is a placeholder, its examples live elsewhere)
SAVED_OUTPUT = {}
# > 0 while a Function's forward runs: forward AD is off there, as torch's (no tangent is
# seen or made; the jvp staticmethod gives the outputs theirs)
FORWARD_AD_OFF = [0]


class FunctionCtx:
    """The `ctx` of a custom Function: saved tensors, flags, and any attributes you set.

    Once the node is recorded, the saved tensors live in the node's capture state (so a run
    without retain_graph frees them, and in-place changes to them are detected); the ctx
    reaches the node only while its backward runs, which keeps the graph free of cycles.
    """

    def __init__(self):
        self._saved = ()
        self._saved_forward = None  # save_for_forward's tensors, read by jvp
        self._state = None   # the recorded node (its captured state), while backward runs
        self.needs_input_grad = ()
        self.non_differentiable = set()
        self.dirty = set()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        """Keep tensors (or None) for backward; read them back with `ctx.saved_tensors`."""
        self._saved = tensors

    def save_for_forward(self, *tensors):
        """Keep tensors (or None) for the `jvp` staticmethod, which reads them back with
        `ctx.saved_tensors`."""
        self._saved_forward = tensors

    @property
    def saved_tensors(self):
        state = self._state
        if state is None:  # forward time (jvp included): not yet recorded
            if self._saved_forward is not None:
                return tuple(self._saved_forward)
            return tuple(self._saved or ())
        if state._inputs is None:
            if not state.saved_something:  # (nothing was saved: torch's empty tuple)
                return ()
            raise freed_graph_error(state)
        return state.inputs

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        self.dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class _FunctionOp:
    """Plays the role of a registry entry for one custom Function class."""

    __slots__ = ("fn", "node_name", "save", "n_out", "signature")

    def __init__(self, fn):
        self.fn = fn
        self.node_name = NodeName(f"{fn.__name__}Backward")
        self.save, self.n_out = 0, 1
        self.signature = False  # forward's, for binding its defaults (made on first use)

    def with_defaults(self, args):
        """`args` with forward's default arguments appended, as torch passes them to
        setup_context and vmap when forward takes no ctx."""
        if self.signature is False:
            signature = inspect.signature(self.fn.forward)
            self.signature = signature if any(
                p.default is not p.empty for p in signature.parameters.values()) else None
        if self.signature is None:
            return args
        bound = self.signature.bind(*args)
        bound.apply_defaults()
        return bound.args

    @staticmethod
    def materialize_grads(state):
        """Whether outputs that received no gradient reach backward as zeros (or None)."""
        return state.attrs["ctx"].materialize_grads

    def backward(self, state, *grads):
        ctx = state.attrs["ctx"]
        slots = state.attrs.get("out_slots")
        if slots is not None:  # non-tensor outputs too: each gets None, as torch passes
            n_outs, tensor_slots = slots
            full = [None] * n_outs
            for k, g in zip(tensor_slots, grads):
                full[k] = g
            grads = full
        ctx._state = state
        try:
            result = self.fn.backward(ctx, *grads)
        finally:
            ctx._state = None
        result = result if isinstance(result, tuple) else (result,)
        positions = state.attrs["positions"]
        n_args = state.attrs["n_args"]
        if len(result) > n_args and all(g is None for g in result[n_args:]):
            result = result[:n_args]  # (torch ignores trailing Nones)
        if len(result) != n_args:
            raise RuntimeError(
                f"function {self.node_name} returned an incorrect number of gradients "
                f"(expected {n_args}, got {len(result)}); return one per forward argument "
                f"(None for non-tensors)")
        tensor_args = set(positions)
        for i, g in enumerate(result):
            if g is not None and i not in tensor_args:
                raise RuntimeError(
                    f"function {self.node_name} returned a gradient different than None at "
                    f"position {i + 1}, but the corresponding forward input was not a Tensor; "
                    f"return None there")
        return tuple(result[i] for i in positions)


class Function:
    """Base class for ops written as a forward/backward pair in flowgrad code.

    >>> import flowgrad as flow
    >>> class Exp(flow.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = x.exp()
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     def backward(ctx, dy):
    ...         (y,) = ctx.saved_tensors
    ...         return dy * y
    >>> x = flow.tensor([0.0, 1.0], requires_grad=True)
    >>> Exp.apply(x).sum().backward(); x.grad
    tensor([1.0000, 2.7183])
    """

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

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Override (with a `forward` that takes no ctx) to save what backward needs from
        the forward's `inputs` (a tuple) and `output`, as torch's setup_context style.

        >>> import flowgrad as flow
        >>> class Square(flow.autograd.Function):
        ...     @staticmethod
        ...     def forward(x):
        ...         return x * x
        ...     @staticmethod
        ...     def setup_context(ctx, inputs, output):
        ...         ctx.save_for_backward(inputs[0])
        ...     @staticmethod
        ...     def backward(ctx, dy):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * dy
        >>> x = flow.tensor(3.0, requires_grad=True)
        >>> Square.apply(x).backward(); x.grad
        tensor(6.)
        """
        raise NotImplementedError("setup_context is overridden together with a forward that "
                                  "takes no ctx")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """Forward mode: output tangents from input tangents (override to support it)."""
        raise NotImplementedError("to use forward-mode AD through this Function, define its "
                                  "jvp staticmethod")

    @staticmethod
    def vmap(info, in_dims, *args):
        """Batching rule under func.vmap: (outputs, out_dims) from the batched arguments
        (override, or set generate_vmap_rule = True to batch forward's ops one by one)."""
        raise NotImplementedError("to use this Function with vmap, override its vmap "
                                  "staticmethod or set generate_vmap_rule = True")

    generate_vmap_rule = False

    @classmethod
    def apply(cls, *args, **kwargs):
        Tensor = _interpreter.Tensor
        if _levels.TRANSFORMS and cls.setup_context is Function.setup_context:
            _refuse_in_transforms(cls)
        if cls.setup_context is not Function.setup_context and not kwargs:
            args = cls._op.with_defaults(args)
        transform = _interpreter.current  # a func transform (vmap, forward AD) may take over
        check = getattr(transform, "function_check", None)
        if check is not None:  # (vmap refuses a Function without a rule, batched or not)
            check(cls)
        hook = getattr(transform, "function_apply", None)
        if hook is not None:
            done = hook(cls, args, kwargs)
            if done is not None:
                return done
        ctx = FunctionCtx()
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in positions]
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        record = grad_mode.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if record:  # torch reads each input's grad_fn before forward: a view whose base was
            for t in tensors:  # written since regenerates (a multi-output one raises)
                t._sync()
        run = getattr(transform, "function_forward", None)  # (vmap: its batching rule)
        FORWARD_AD_OFF[0] += 1
        try:
            with grad_mode.no_grad():
                if cls.setup_context is Function.setup_context:
                    outputs = cls.forward(ctx, *args, **kwargs)
                else:  # torch's newer style: forward(*args) without ctx, then setup_context
                    outputs = cls.forward(*args, **kwargs) if run is None else \
                        run(cls, args, kwargs)
                    cls.setup_context(ctx, args, outputs)
        finally:
            FORWARD_AD_OFF[0] -= 1
        ran = getattr(transform, "function_ran", None)
        if ran is not None:  # forward AD: tangents from the jvp staticmethod
            ran(cls, ctx, args, outputs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        dirty = [o for o in outs if isinstance(o, Tensor) and id(o) in ctx.dirty]
        for o in dirty:  # (torch's mark_dirty counts a write of its own)
            _inplace.bump_version(o)
        if not record:
            if not any(o is t for o in outs for t in tensors):
                return outputs
            outs = tuple(_unrecorded(o, ctx, tensors) for o in outs)
            return outs[0] if single else outs
        for o in dirty:
            _check_dirty(cls, o, len(outs))
        written = [(o, o._meta) for o in dirty]  # (their metas: what carries over)
        # an output that is an input returned as-is (not modified) becomes a new tensor
        # sharing its storage, as torch returns a view: the input keeps its own history
        as_is = [k for k, o in enumerate(outs) if isinstance(o, Tensor)
                 and id(o) not in ctx.dirty and any(o is t for t in tensors)]
        if as_is:
            outs = tuple(_as_output(o, ctx) if k in as_is else o for k, o in enumerate(outs))
        tensor_outs = [o for o in outs if isinstance(o, Tensor)]
        attrs = {"ctx": ctx, "positions": positions, "n_args": len(args)}
        if len(tensor_outs) != len(outs):
            attrs["out_slots"] = (len(outs), [k for k, o in enumerate(outs)
                                              if isinstance(o, Tensor)])
        node = add_node(cls._op, tensors, tensor_outs, attrs, ())
        for o, old in written:  # retain_grad stays, as an op's in-place write keeps it;
            carry_over(old, o._meta)  # the .grad retained so far does not (torch's Function
            o._meta.acc_grad = None   # resets it: the new history's gradient alone)
        for o in dirty:
            if o._view is not None and o._grad_fn is node:
                _rebase_base(o)
                if len(tensor_outs) == 1:  # torch's CopySlices calls it: not with no grad
                    node.copy_slices = True
        for o in tensor_outs:
            if id(o) in ctx.non_differentiable:
                o._meta, o._grad_fn = None, None  # its grad arrives as zeros
        diff = [o for o in tensor_outs if o._grad_fn is node]
        for k in as_is:  # torch's views made in a custom Function: no in-place write to them
            if outs[k]._grad_fn is node:
                CUSTOM_FUNCTION_VIEWS[outs[k]._meta] = (k, cls.__name__)
        saved = ctx._saved
        if saved:
            node._inputs = [None if t is None else _saved(t, any(t is o for o in diff))
                            for t in saved]
            node.saved_something = True
            if _saved_hooks.state.stack:
                node._inputs = _saved_hooks.pack_saved(node._inputs, saved)
        ctx._saved = None
        tracer = getattr(_interpreter.current, "function_node", None)
        if tracer is not None:  # nn.Graph: the autograd pass must run this backward
            tracer(node, tensors, diff)
        return outs[0] if single else outs


def _refuse_in_transforms(cls):
    """torch's func transforms (grad, vjp, jvp, vmap, jacrev, ...) take only Functions of the
    setup_context style (flowgrad's own, which it runs there itself, excepted); not
    autograd.functional's levels, which are no func transforms."""
    if cls.__module__.partition(".")[0] == __name__.partition(".")[0]:
        return
    if all(_levels.legacy(level) for level in _levels.TRANSFORMS):
        return
    raise RuntimeError(
        f"{cls.__name__}: in order to use an autograd.Function with functorch transforms "
        f"(vmap, grad, jvp, jacrev, ...), it must override the setup_context staticmethod: "
        f"write forward(*args) without ctx and setup_context(ctx, inputs, output) to save what "
        f"backward needs")


def _as_output(o, ctx):
    """The new tensor an input returned as-is becomes (marked non-differentiable where the
    input was)."""
    d = o.detach()
    if id(o) in ctx.non_differentiable:
        ctx.non_differentiable.add(id(d))
    return d


def _unrecorded(o, ctx, tensors):
    """An output of a Function not recorded (grad mode off, or no input requiring grad), as
    torch's: an input returned (written or not) that requires grad comes back as a detached
    alias, not itself; one that does not, unwritten, as a view of itself."""
    if not any(o is t for t in tensors):
        return o
    if o.requires_grad:
        return o.detach()
    if id(o) in ctx.dirty:
        return o
    with grad_mode.no_grad():
        return o.view(o.shape)


def _check_dirty(cls, o, n_outs):
    """torch's checks of an input forward wrote in place (mark_dirty), whose history would
    be rebased onto the Function's node."""
    view = o._view
    if view is not None and view.creation:  # (a multi-output view, one made under no_grad)
        raise view_error(o, view.creation, "is being modified inplace")
    if view is None and o.requires_grad and o._grad_fn is None:
        raise RuntimeError(
            f"{cls.__name__}: a leaf tensor that requires grad (shape {tuple(o.shape)}) was "
            f"modified in place by forward (mark_dirty); clone() it before passing it in")
    if view is None or not (o.requires_grad or view.base.requires_grad):
        return
    if view.base._grad_fn is None:  # (the base may since have stopped requiring grad)
        raise RuntimeError(
            f"{cls.__name__}: a view of a leaf tensor that requires grad (base shape "
            f"{tuple(view.base.shape)}, view shape {tuple(o.shape)}) was modified in place by "
            f"forward (mark_dirty); clone() the base before taking the view")
    if n_outs > 1:
        raise RuntimeError(
            f"{cls.__name__}: forward modified in place (mark_dirty) an input that is a view "
            f"of another tensor, and returns {n_outs} outputs; a Function that writes a "
            f"view in place can return only that one tensor (return the others from another "
            f"Function, or clone() the view first)")


def _rebase_base(o):
    """The view `o`, written in place by forward and now the Function's output: its root
    base takes the write into its history, as torch's CopySlices (the gradient of the view's
    region goes through the Function, the rest to the base's old history)."""
    o._view.version = o._counter.value  # (its values are forward's: no replay from the base)
    _inplace.rebase(o, lambda _old_region: o)


def _saved(t, is_output):
    saver = SAVED_OUTPUT.get(type(t)) if is_output else None
    return SavedTensor(t, is_output) if saver is None else saver(t)


def once_differentiable(backward):
    """Mark a backward as not differentiable itself: it runs with grad mode off; under
    create_graph its results require grad through a node that refuses a second backward, as
    torch's (DelayedError)."""
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with grad_mode.no_grad():
            outputs = backward(ctx, *grads)
        Tensor = _interpreter.Tensor
        if not grad_mode.is_grad_enabled() or _levels.TRANSFORMS or not any(
                isinstance(g, Tensor) and g.requires_grad for g in grads):
            return outputs  # (func transforms: their levels differentiate it themselves)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        tensors = [o.detach().requires_grad_() for o in outs if isinstance(o, Tensor)]
        refused = iter(_DelayedError.apply(*tensors))
        outs = tuple(next(refused) if isinstance(o, Tensor) else o for o in outs)
        return outs[0] if single else outs
    return wrapper


class _DelayedError(Function):
    """The results of a once_differentiable backward under create_graph: their backward
    raises."""

    @staticmethod
    def forward(ctx, *tensors):
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")
