"""vmap: run a function written for one example over a batch of them.

    >>> import flowgrad as flow
    >>> from flowgrad.func import vmap
    >>> vmap(lambda x: x.sum())(flow.ones(3, 4))
    tensor([4., 4., 4.])

Each call enters a `VmapLevel`, an interpreter wrapping the one that was current: inputs
are moved to a leading batch dim and wrapped as BatchedTensors (batched.py); an op with a
batched input runs its batching rule (batch_rules.py) one level down, on the physical
tensors; a per-example loop (`fallback`) serves ops without a rule. Autograd is recorded on
the physical tensors, so a backward outside vmap sees ordinary ops; while a reverse-mode
transform runs inside the level (func.grad, jacrev, a derived JVP) it is recorded on the
per-example tensors (a node per op whose rule runs batched), so gradients inside vmap are
per-example: `vmap(grad(loss))` gives per-sample gradients; on the physical tensors too
where something outside the vmap differentiates them (grad(vmap(grad(loss)))).
"""
from __future__ import annotations

import numpy as np

from ..autograd import function as _function
from ..autograd import grad_mode
from ..autograd import interpreter as _interpreter
from ..autograd.inplace import memory_of, physical_of, write_into
from ..autograd.levels import (
    DEAD_LEAVES,
    TRANSFORMS,
    VMAP_STACK,
    apply_full,
    delegate,
    entered,
    legacy,
    pack,
)
from ..autograd.meta import counter_of
from ..autograd.node import AccumulateGrad, SavedTensor, leading_to_node
from ..autograd.views import mark_view, sync_view
from ..return_types import sequence_of
from ..tensor import Tensor
from .batched import BatchedTensor, batched_at, wrap, wrap_with_graph
from .generated import generated_apply

RANDOM = frozenset(("bernoulli", "dropout", "rrelu", "normal", "uniform", "rand", "randn",
                    "randint", "randperm", "multinomial", "exponential", "cauchy",
                    "log_normal", "geometric", "random_integers", "bernoulli_number"))


class SavedBatched(SavedTensor):
    """A saved output of a per-example node: kept as (physical tensor, meta), rebuilt."""

    __slots__ = ()

    def __init__(self, tensor):
        super().__init__(tensor, True)
        self.data, self.grad_fn = tensor._phys, tensor._level

    def adopt(self, result, target):
        phys = getattr(target, "_phys", None)  # (the examples' storage)
        if phys is not None and self.data is getattr(result, "_phys", None):
            self.data, self.counter, self.version = phys, target._counter, target._counter.value

    def unpack(self, node):
        if self.counter.value != self.version:
            self.check(node)
        t = wrap(self.data, self.grad_fn)
        t._meta, t._grad_fn, t._counter = self.meta, node, self.counter
        return leading_to_node(t)


_function.SAVED_OUTPUT[BatchedTensor] = SavedBatched


class _VmapOp:
    """The op of a node recorded on per-example tensors: the op's own rule, run batched."""

    __slots__ = ("op", "name", "node_name", "save", "saved_inputs")

    def __init__(self, op):
        self.op, self.name, self.node_name = op, op.name, op.node_name
        self.save, self.saved_inputs = op.save, op.saved_inputs

    def backward(self, ctx, *grads):
        return self.op.backward(ctx, *grads)


class VmapLevel:
    """The interpreter of one vmap call: batch size, randomness mode, depth."""

    def __init__(self, inner, size, randomness, depth):
        self.inner, self.size, self.randomness, self.depth = inner, size, randomness, depth
        self.logical = 0  # > 0 while a reverse-mode transform runs inside this level
        self._inside_only = {}  # id -> node whose graph reaches inner leaves alone

    def apply(self, op, inputs, attrs):
        return pack(op, self.apply_full(op, inputs, attrs)[0])

    def apply_full(self, op, inputs, attrs):
        from .batch_rules import BATCH_RULES, fallback, same_randomness

        flags = [batched_at(t, self) for t in inputs]
        rule = BATCH_RULES.get(op.name, fallback)
        if op.name in RANDOM:
            rule = self._random_rule(op, inputs, flags, attrs, rule)
            if rule is same_randomness and not any(flags):
                return apply_full(self.inner, op, inputs, attrs)
        elif not any(flags):
            return apply_full(self.inner, op, inputs, attrs)
        if not any(flags):  # a random op, different per example: draw a batch
            if "shape" in attrs:
                attrs = dict(attrs, shape=(self.size,) + tuple(attrs["shape"]))
                with _interpreter.using_interpreter(self.inner):
                    outs, aux = apply_full(self.inner, op, inputs, attrs)
                return tuple(wrap(o, self) for o in outs), tuple(wrap(a, self) for a in aux)
            with _interpreter.using_interpreter(self.inner):
                first = inputs[0].unsqueeze(0).expand(self.size, *inputs[0].shape)
            inputs = [wrap(first, self)] + list(inputs[1:])
            flags = [True] + flags[1:]
        if self.logical and grad_mode._state.enabled and op.backward is not None:
            for t in inputs:  # a view whose base was written since: its history replayed
                # first, where eager_call replays it (its gradient missed the write)
                view = t._view
                if view is not None and view.version != t._counter.value:
                    sync_view(t)
        logical = (self.logical and grad_mode._state.enabled and op.backward is not None
                   and any(t.requires_grad and not _outside_graph(t) for t in inputs))
        phys = [t._phys if f else t for t, f in zip(inputs, flags)]
        with _interpreter.using_interpreter(self.inner):
            if logical and not self._differentiated_outside(inputs, flags):
                with grad_mode.no_grad():
                    outs, aux = rule(self, op, phys, flags, attrs)
            else:
                outs, aux = rule(self, op, phys, flags, attrs)
        # (autograd on the per-example tensors when logical, else on the physical ones)
        wrapped = tuple((wrap if logical else wrap_with_graph)(o, self) for o in outs)
        aux = tuple(wrap(a, self) for a in aux)
        if logical:
            self._record(op, inputs, wrapped, attrs, aux)
        if op.is_view and flags[0]:  # (made under no_grad too: torch
            _mark_views(inputs[0], wrapped, op, attrs)  # refuses some writes to those)
        return wrapped, aux

    def _differentiated_outside(self, inputs, flags):
        """Whether a level outside this one (an outer func.grad/vjp, or autograd around the
        transforms) differentiates through an op recorded per example: a batched input's
        whole batch requires grad, or an unbatched one has a graph to a leaf that no reverse
        transform inside this level made. The op is then recorded on the physical tensors
        too, so grad(vmap(grad(f))) and a backward() of per-example gradients see it."""
        for t, batched in zip(inputs, flags):
            if batched:
                if t._phys.requires_grad:
                    return True
            elif isinstance(t, Tensor) and t.requires_grad and self._reaches_outside(t):
                return True
        return False

    def _reaches_outside(self, t):
        """Whether t's graph reaches a live leaf made outside this level's reverse
        transforms (graphs found not to are remembered for the level's lifetime)."""
        inside = {id(m) for lv in TRANSFORMS[TRANSFORMS.index(self) + 1:]
                  for m in getattr(lv, "leaves", ())} if self in TRANSFORMS else set()

        def live(meta):
            return id(meta) not in inside and meta not in DEAD_LEAVES

        if t._grad_fn is None:
            return t._meta is None or not t._meta.requires_grad or live(t._meta)
        known = self._inside_only
        stack, seen = [t._grad_fn], {}
        while stack:
            node = stack.pop()
            if id(node) in seen or id(node) in known:
                continue
            seen[id(node)] = node
            if type(node) is AccumulateGrad and live(node.output_metas[0]):
                return True
            stack.extend(n for n in node.next_nodes if n is not None)
        known.update(seen)  # (the nodes kept too: no id of a freed one is reused here)
        return False

    def _random_rule(self, op, inputs, flags, attrs, rule):
        from .batch_rules import same_randomness

        if self.randomness == "error":
            raise RuntimeError(
                f"vmap: called random operation {op.name} while in randomness error mode. "
                f"Please either use the 'same' or 'different' randomness flags on vmap or "
                f"perform the randomness operation out of vmap")
        return same_randomness if self.randomness == "same" else rule

    def _record(self, op, inputs, outputs, attrs, aux):
        from ..autograd.interpreter import add_node

        inputs = [_per_example_constant(t, self) if _outside_graph(t) else t for t in inputs]
        node = add_node(_VmapOp(op), inputs, outputs, attrs, aux)
        if node._outputs:
            node._outputs = [SavedBatched(o) for o in outputs]

    # hooks the eager functions call on the current interpreter
    def writing(self, target, result):
        """An in-place op is about to write `result` into `target`: refused, before anything
        is written, where result is batched and target is not (torch's vmap error)."""
        if batched_at(result, self):
            self._refuse_unbatched(target)
        delegate(self.inner, "writing", target, result)

    def written(self, target, result):
        """An in-place op wrote `result` into `target`: target now holds result's examples."""
        if batched_at(result, self):
            self._refuse_unbatched(target)  # (writes that did not ask first)
            _write_examples(self, target, result)
        delegate(self.inner, "written", target, result)

    def _refuse_unbatched(self, target):
        if not batched_at(target, self):
            raise RuntimeError(
                f"vmap: an in-place operation would write a batched result into a tensor "
                f"that is not batched (shape {tuple(target.shape)}); use the out-of-place "
                f"op, or pass the tensor in as a batched input")

    def read(self, tensor, what):
        delegate(self.inner, "read", tensor, what)

    def value_check(self, ok, message, error=ValueError):
        """A check of values (`interpreter.require`): the inner interpreter's, on the physical
        tensor (every example's values): inside nn.Graph's build the plan checks each call's
        (checked once at trace time, a later call's bad values passed); False where none
        records it (the caller checks it eagerly)."""
        while type(ok) is BatchedTensor:
            ok = ok._phys
        return bool(delegate(self.inner, "value_check", ok, message, error))

    def varies(self, tensor):
        return delegate(self.inner, "varies", tensor)

    def inplace(self, tensor):
        delegate(self.inner, "inplace", tensor)

    def function_apply(self, cls, args, kwargs):
        """A custom Function under vmap: its `vmap` staticmethod, else (with
        generate_vmap_rule=True) torch's generated rule (`_generated_apply`). Where a reverse
        transform inside this level differentiates it, it is recorded per example by
        Function.apply (its forward batched by `function_forward`), as torch's grad level
        records it above the vmap."""
        if not any(batched_at(a, self) for a in args):
            return delegate(self.inner, "function_apply", cls, args, kwargs)
        generate = getattr(cls, "generate_vmap_rule", False)
        if self.logical and grad_mode._state.enabled and any(
                isinstance(a, Tensor) and a.requires_grad for a in args):
            return None
        if generate:
            return generated_apply(self, cls, args, kwargs)
        return self._vmap_rule(cls, args, kwargs)

    def function_forward(self, cls, args, kwargs):
        """The outputs of a custom Function's forward (setup_context style) on `args`."""
        if not any(batched_at(a, self) for a in args):
            inner = getattr(self.inner, "function_forward", None)
            return cls.forward(*args, **kwargs) if inner is None else inner(cls, args, kwargs)
        generate = getattr(cls, "generate_vmap_rule", False)
        tensors = [a for a in args if isinstance(a, Tensor)]
        if self._differentiated_outside(tensors, [batched_at(t, self) for t in tensors]):
            # (grad(vmap(grad(f)))): the physical outputs keep the graph the levels outside
            with grad_mode.enable_grad():  # differentiate, as apply_full's rule records it
                if generate:
                    return generated_apply(self, cls, args, kwargs)
                return self._vmap_rule(cls, args, kwargs)
        if generate:
            return cls.forward(*args, **kwargs)
        return self._vmap_rule(cls, args, kwargs)

    def _vmap_rule(self, cls, args, kwargs):
        in_dims = tuple(0 if batched_at(a, self) else None for a in args)
        phys = [a._phys if batched_at(a, self) else a for a in args]
        with _interpreter.using_interpreter(self.inner):
            out, out_dims = cls.vmap(VmapInfo(self.size, self.randomness), in_dims, *phys,
                                     **kwargs)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        dims = (out_dims,) * len(outs) if not isinstance(out_dims, tuple) else out_dims
        result = []
        with _interpreter.using_interpreter(self.inner):
            for o, d in zip(outs, dims):
                result.append(o if d is None or not isinstance(o, Tensor)
                              else wrap_with_graph(o.movedim(d, 0), self))
        return result[0] if single else tuple(result)

    def function_ran(self, cls, ctx, args, outputs):
        return delegate(self.inner, "function_ran", cls, ctx, args, outputs)

    def function_check(self, cls):
        """torch's refusal of a custom Function called under vmap without a batching rule
        (no vmap staticmethod, generate_vmap_rule False), whether or not its arguments are
        batched at this level or any (torch's legacy vmap, autograd.functional's and
        gradcheck's, runs forward's ops one by one)."""
        from ..autograd.function import Function

        own = cls.__module__.partition(".")[0] == __name__.partition(".")[0]  # (flowgrad's)
        if not own and not legacy(self) and not getattr(cls, "generate_vmap_rule", False) and \
                getattr(cls, "vmap", Function.vmap) is Function.vmap:
            raise RuntimeError(
                f"vmap: {cls.__name__}: to use an autograd.Function with vmap, you must either "
                f"override the vmap staticmethod or set generate_vmap_rule=True")
        delegate(self.inner, "function_check", cls)


def _outside_graph(t):
    """Whether autograd sees the batched t through its physical tensor's graph alone (made
    before the reverse transform inside its level began, from tensors differentiated
    outside the vmap): a constant to the per-example gradients."""
    return t._meta is not None and t._meta.requires_grad and physical_of(t) is not None


def _per_example_constant(t, level):
    """t without its physical graph, to a per-example node's inputs: the levels outside see
    t's graph through the physical op the node's op also ran."""
    c = wrap(t._phys, level)
    c._counter = counter_of(t)
    return c


def _mark_views(src, outs, op, attrs):
    """The outputs of a view op whose examples are views of src's become views of src
    (mark_view), as eager views are, so an in-place write through one takes the eager view
    path: inside vmap(grad(f)) it rebases src's history per example (torch's CopySlices;
    without it the gradient missed the write: other values than grad(f) per example), inside
    vmap(jvp(f)) it carries the tangent to src's."""
    base = memory_of(src)  # (under nested vmaps the outermost level's array: an inner
    for i, out in enumerate(outs):  # level's physical tensor is batched, its data a placeholder)
        data = memory_of(out)
        if data.size == 0 or np.may_share_memory(data, base):  # (as eager_call's _shares)
            mark_view(src, out, op, attrs, None if op.n_out == 1 else i)


def _write_examples(level, target, result):
    """target's examples become result's, written into target's physical tensor as torch's
    vmap does: views of target (their physical tensors are views of it) and the caller's
    tensor that target came from see the write. An expanded physical tensor (an unbatched
    tensor made batched, a physical leaf that requires grad) cannot take it: target is
    rebound to result's examples instead."""
    phys, new = target._phys, result._phys
    if phys is new:
        return
    with _interpreter.using_interpreter(level.inner):  # (a nested vmap's physical tensor:
        if write_into(phys, new):  # batched by the level outside, which writes its examples)
            return
    if not grad_mode._state.enabled and new._meta is None and phys._meta is not None:
        # (a write autograd does not record keeps the tensor's history, as an eager one:
        # the new examples had none, and the gradient through target was lost, silently)
        new._meta, new._grad_fn = phys._meta, phys._grad_fn
    target._phys = new


class VmapInfo:
    """What a custom Function's `vmap` staticmethod is told: batch_size, randomness."""

    def __init__(self, batch_size, randomness):
        self.batch_size, self.randomness = batch_size, randomness


# ---- entering and leaving a level ----------------------------------------------------------
def _map(fn, tree, dims, what):
    """Apply fn(leaf, dim) over a tuple/list/dict tree, with dims a matching tree or one value
    for a whole subtree."""
    if isinstance(tree, (tuple, list)):
        if isinstance(dims, (tuple, list)):
            if len(dims) != len(tree):
                raise ValueError(f"vmap: {what}={dims!r} has {len(dims)} entries but the "
                                 f"structure has {len(tree)}; give one per element")
            return sequence_of(type(tree), [_map(fn, t, d, what) for t, d in zip(tree, dims)])
        return sequence_of(type(tree), [_map(fn, t, dims, what) for t in tree])
    if isinstance(tree, dict):
        if isinstance(dims, dict):
            return {k: _map(fn, v, dims[k], what) for k, v in tree.items()}
        return {k: _map(fn, v, dims, what) for k, v in tree.items()}
    if isinstance(dims, (tuple, list, dict)):
        raise ValueError(f"vmap: {what}={dims!r} is a structure but the value it applies to is "
                         f"a {type(tree).__name__}")
    return fn(tree, dims)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """Vectorize `func` over dim `in_dims` of its inputs (None: not batched); the results
    are stacked along `out_dims`. `randomness`: 'error', 'same' or 'different' random draws
    across the batch. Nested vmap works; batching rules cover the common op families and a
    per-example loop the rest.

    >>> import flowgrad as flow
    >>> from flowgrad.func import vmap
    >>> x, w = flow.ones(5, 3), flow.ones(3, 2)
    >>> vmap(lambda v, m: v @ m, in_dims=(0, None))(x, w).shape
    flowgrad.Size([5, 2])
    """
    if randomness not in ("error", "same", "different"):
        raise ValueError(f"vmap: randomness must be 'error', 'same' or 'different', got "
                         f"{randomness!r}")

    def wrapped(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, (tuple, list)) or len(args) != 1 else (in_dims,)
        sizes = []

        def size_of(x, d):
            if d is None:
                return x
            if not isinstance(x, Tensor):
                raise ValueError(f"vmap: in_dim {d} given for an input of type "
                                 f"{type(x).__name__}; only tensors can be batched (use None)")
            if not -x.dim() <= d < max(x.dim(), 1) or x.dim() == 0:
                raise ValueError(f"vmap: in_dim {d} is out of range for an input of shape "
                                 f"{tuple(x.shape)}")
            sizes.append(x.shape[d])
            return x
        _map(size_of, list(args), list(dims) if isinstance(dims, (tuple, list)) else dims,
             "in_dims")
        if not sizes:
            raise ValueError("vmap: at least one input must be a Tensor batched along an "
                             "in_dim (in_dims are all None)")
        if len(set(sizes)) != 1:
            raise ValueError(f"vmap: expected all batched inputs to have the same size along "
                             f"their in_dims, got sizes {sizes}")
        level = VmapLevel(_interpreter.current, sizes[0], randomness, len(VMAP_STACK) + 1)
        # (an input batched along dim 0 is its own physical tensor, as torch's: a function
        # that returns it unchanged returns the caller's tensor itself, not a view of it)
        batched = _map(lambda x, d: x if d is None else wrap(
                           x if d % x.dim() == 0 else x.movedim(d, 0), level),
                       list(args), list(dims) if isinstance(dims, (tuple, list)) else dims,
                       "in_dims")
        VMAP_STACK.append(level)
        try:
            with _interpreter.using_interpreter(level), entered(level):
                out = func(*batched, **kwargs)
        finally:
            VMAP_STACK.remove(level)
        return _unwrap_tree(out, level, out_dims, getattr(func, "__name__", "func"))

    wrapped.__doc__ = getattr(func, "__doc__", None)
    return wrapped


def _unwrap_tree(out, level, out_dims, name):
    def unwrap(x, d):
        if not isinstance(x, Tensor):
            if d is None:  # (torch's: a non-tensor output is handed back where out_dims is None)
                return x
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                             f"{type(x)}. Did you mean to set out_dims= to None for output?")
        if d is not None and not -x.dim() - 1 <= d <= x.dim():  # (the result's dims: as torch's)
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-x.dim() - 1}, {x.dim()}], but got {d})")
        if batched_at(x, level):
            if d is None:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                                 f"when out_dim is None")
            return x._phys if d % x._phys.dim() == 0 else x._phys.movedim(0, d)
        if d is None:
            return x
        return x.unsqueeze(d).expand(*x.shape[:d % (x.dim() + 1)], level.size,
                                     *x.shape[d % (x.dim() + 1):])
    single = not isinstance(out, (tuple, list, dict))
    return _map(unwrap, out, out_dims, "out_dims") if not single else unwrap(out, out_dims)


def debug_unwrap(tensor, *, recurse=True):
    """The tensor under a vmap's per-example view (its physical tensor, the batch dimension
    first), for looking at in a debugger; all levels down with `recurse`. A tensor vmap does
    not batch is returned as it is (flowgrad's grad and jvp levels wrap nothing). Using the
    result inside the transformed function is undefined, as torch's.

    >>> import flowgrad as flow
    >>> shapes = []
    >>> _ = flow.func.vmap(lambda x: shapes.append(debug_unwrap(x).shape) or x)(flow.ones(3, 2))
    >>> shapes
    [flowgrad.Size([3, 2])]
    """
    while type(tensor) is BatchedTensor:
        tensor = tensor._phys
        if not recurse:
            break
    return tensor
