"""Forward-mode AD: dual tensors carry a tangent through every op.

    >>> import flowgrad as flow
    >>> import flowgrad.autograd.forward_ad as fwAD
    >>> x = flow.tensor([1.0, 2.0])
    >>> with fwAD.dual_level():
    ...     y = fwAD.make_dual(x, flow.tensor([1.0, 0.0])).exp() * 2
    ...     fwAD.unpack_dual(y).tangent
    tensor([5.4366, 0.0000])

A level is an interpreter wrapping the one current when it was entered: an op with a dual
input runs one level down (so outer levels, autograd and vmap see it), then its output
tangent comes from the op's forward rule, run one level down as well (so an outer level
differentiates the rule: forward over forward). The rule is the op's row in `JVP_RULES`
(filled by flowgrad/ops/jvp_rules.py) when one is written, else it is derived from the
op's reverse rule: the VJP u -> J^T u is linear in u, so differentiating <J^T u, t> with
respect to u gives J t (the double-vjp trick). Ops with no dual input cost a dict lookup or
two (a view: its base's).
"""
from __future__ import annotations

import weakref
from collections import namedtuple

import numpy as _np

from .. import dtypes as _dtypes
from . import engine, grad_mode
from . import inplace as _inplace
from . import interpreter as _interpreter
from .function import FORWARD_AD_OFF, Function, _FunctionOp
from .inplace import memory_of, self_overlapping, write_into
from .levels import apply_full, delegate, pack, reverse_scope, writing_out
from .node import FunctionNode, SavedTensor
from .views import replay_view

__all__ = ["dual_level", "make_dual", "unpack_dual", "enter_dual_level", "exit_dual_level",
           "UnpackedDualTensor"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

_LEVELS = []  # forward levels entered, outermost first


def _key(t):
    """Tangents are keyed by storage: the array (of the examples of a BatchedTensor: a level
    outside a vmap sees only the physical tensors, and an in-place write through the batched
    one is told with it), so a saved output rebuilt by a rule keeps its tangent (detach() wraps
    a new array object while a level is entered: it drops the tangent, as torch's)."""
    phys = getattr(t, "_phys", None)
    return t._data if phys is None else phys._data


_DIFF = "fcV"  # dtype kinds that carry tangents: floating and complex

# Filled at import by the layers above, which import this module: the written forward rules
# by op name, the rules by the shape an op declares (`@op(..., jvp="linear")`), and the ops
# whose rule is for real values only (flowgrad.ops.jvp_rules); x.detach()
# keeping x's tangents, batched tensors included (flowgrad.func.transforms)
JVP_RULES: dict = {}
JVP_KINDS: dict = {}
REAL_ONLY: set = set()
detached = None


def _refuses_complex(op, inputs, tans, outs):
    """Whether a tangent would enter or leave complex values through an op whose forward
    rule is not written for them (a wrong tangent is never returned: refused)."""
    if op.name not in REAL_ONLY:
        return False
    if any(t is not None and x._data.dtype.kind == "c" for x, t in zip(inputs, tans)):
        return True
    return any(o._data.dtype.kind == "c" for o in outs)  # (an input has a tangent here)


def _zeros_laid_out_as(t):
    """Zeros shaped as t, an expand of a tensor with one element per distinct memory
    location of t's (a dim t strides by 0 has size 1 there); made by ops, so a batched t
    gets batched zeros."""
    return _distinct(t.detach(), t).clone().zero_().expand(tuple(t.shape))


def _shared_dims(like):
    """The dims in which like's elements share memory: strided by 0, of size 2 or more."""
    memory = memory_of(like)
    strides = memory.strides[memory.ndim - like.ndim:]
    return [d for d, (stride, n) in enumerate(zip(strides, like.shape)) if stride == 0 and n > 1]


def _distinct(t, like):
    """t narrowed to one element per distinct memory location of `like` (of t's shape): size
    1 in each dim that like strides by 0."""
    for dim in _shared_dims(like):
        t = t.narrow(dim, 0, 1)
    return t


def _laid_out_as(tangent, like):
    """`tangent` (like's shape and dtype) in like's memory layout, as torch keeps every
    tangent (a copy where a rule's output is laid out otherwise, a transpose say): a view of
    `like` then takes a view of its tangent, which later writes into the tangent reach.
    Only a dense, unbatched `like` is laid out (an expand's tangent is made elsewhere)."""
    data, values = like._data, tangent._data
    if _same_layout(values, data) or getattr(like, "_phys", None) is not None or \
            getattr(tangent, "_phys", None) is not None or not _inplace.dense(data):
        return tangent
    # (by ops, so an inner level's tangent of the tangent follows)
    order = sorted(range(data.ndim), key=lambda d: -data.strides[d])
    laid = tangent.permute(order).contiguous().permute(_np.argsort(order).tolist())
    return laid if _same_layout(laid._data, data) else tangent


def _last_written(new, old):
    """`new` (of old's shape) narrowed to one element per memory location of `old` (an
    expand's tangent): at each location the last element whose value differs from old's,
    which a raw write of new into that memory would leave (the first where none does)."""
    for dim in _shared_dims(old):
        n = old.shape[dim]
        old = old.narrow(dim, 0, 1)
        order = new.new_tensor(range(n), dtype=_dtypes.int64).reshape(
            [n if d == dim else 1 for d in range(new.ndim)])
        new = new.gather(dim, ((new != old) * order).amax(dim, keepdim=True))
    return new


def _same_layout(a, b):
    return all(x == y for x, y, n in zip(a.strides, b.strides, a.shape) if n > 1)


class ForwardLevel:
    """The interpreter of one forward-AD level: a table storage -> tangent."""

    def __init__(self, inner, index):
        self.inner = inner
        self.index = index
        self.tangents = {}
        self.plain = {}  # views with no tangent of their base's (unpack_dual's primal)
        self.public = True  # entered by dual_level (False: by func.jvp)

    def tangent(self, t):
        if FORWARD_AD_OFF[0]:
            return None
        entry = self.tangents.get(id(_key(t)))
        if entry is not None:
            return entry[1]
        view = t._view
        if view is None or not self.tangents:
            return None
        # a view made before its base got a tangent (a dual value written into the base):
        # torch's view of the base's tangent, made when first asked for
        entry = self.tangents.get(id(_key(view.base)))
        if entry is None or id(t._data) in self.plain:
            return None
        with _interpreter.using_interpreter(self.inner):
            tangent = replay_view(entry[1], view.chain)
        self.set_tangent(t, tangent)
        return tangent

    def set_tangent(self, t, tangent):
        store = _key(t)
        table, key = self.tangents, id(store)
        if tangent is None:
            table.pop(key, None)
            return
        table[key] = (weakref.ref(store, lambda _, key=key: table.pop(key, None)), tangent)

    def _reads_dual(self, inputs):
        """Whether an input has a tangent: one of its own, or one its view of a dual base
        makes when first read (a view made before a dual value was written into its base)."""
        table = self.tangents
        if not table or FORWARD_AD_OFF[0]:
            return False
        for t in inputs:
            if id(_key(t)) in table:
                return True
            view = t._view
            if view is not None and id(_key(view.base)) in table and \
                    id(t._data) not in self.plain:
                return True
        return False

    def apply(self, op, inputs, attrs):
        if not self._reads_dual(inputs):
            return self.inner.apply(op, inputs, attrs)
        return pack(op, self.apply_full(op, inputs, attrs)[0])

    def apply_full(self, op, inputs, attrs):
        if not self._reads_dual(inputs):
            return apply_full(self.inner, op, inputs, attrs)
        outs, aux = apply_full(self.inner, op, inputs, attrs)
        tans = [self.tangent(t) for t in inputs]
        if op.differentiable and _refuses_complex(op, inputs, tans, outs):
            raise NotImplementedError(
                f"forward-mode AD through {op.name} with complex tensors is not supported yet "
                f"(its tangent would be wrong); differentiate with reverse mode instead "
                f"(autograd.grad, flow.func.jacrev or vjp)")
        if op.differentiable:
            with _interpreter.using_interpreter(self.inner):
                out_tans = output_tangents(op, inputs, outs, tans, attrs, aux)
                for o, t in zip(outs, out_tans):
                    if t is not None and o._data.dtype.kind in _DIFF:
                        t = _fit(t, o)
                        if o._view is None:
                            if _aliases(t, tans):
                                t = t.clone()  # (an identity rule's: in-place updates of
                                # one output's tangent must not reach an input's)
                            t = _laid_out_as(t, o)
                        self.set_tangent(o, t)
        return outs, aux

    # hooks the eager functions call on the current interpreter
    def writing(self, target, result):
        self._check_shared_elements(target, result)
        delegate(self.inner, "writing", target, result)  # (a vmap inside refuses early)

    def _check_shared_elements(self, target, value):
        """torch refuses to write a dual value into a tensor with no tangent some of whose
        elements share memory (an expand, or an alias of one): the zero tangent it would get
        is no expand, so its elements could not stay one. Refused before the write."""
        if self_overlapping(memory_of(target)) and self._reads_dual((value,)) and \
                self.tangent(target) is None:
            raise _inplace.expand_write_error(
                "forward AD", target.shape, fix="a dual value cannot be written into it, as it "
                "has no tangent; clone() it first, or make it dual (make_dual) before the write")

    def written(self, target, result):
        """An in-place op wrote `result` into `target`: target's tangent takes result's."""
        self._overwrite(target, self.tangent(result))
        delegate(self.inner, "written", target, result)

    def write_elements(self, target, value, write_base, write_tangent):
        """A recorded write into the elements of the expand `target` goes to the elements of
        its root base (`write_base`, from `index.write_elements`). A view with a tangent of its
        own over a plain base (make_dual's) never hears it: the base stays plain (torch's) and
        `write_tangent(tangent, tangent_of)` writes the written values' tangents (zeros where
        they have none) into target's, a view of that view's."""
        own = self.tangent(target) is not None and self.tangent(target._view.base) is None
        self._check_shared_elements(target, value)
        inner = getattr(self.inner, "write_elements", None)
        if inner is None:
            write_base()
        else:
            inner(target, value, write_base, write_tangent)
        if own:
            self.set_tangent(target._view.base, None)  # (a dual value made it dual)
            with _interpreter.using_interpreter(self.inner), writing_out():
                write_tangent(self.tangent(target), self.tangent)

    def replayed(self, target, region):
        """An in-place write through the view `target` computes on `region`, the view replayed
        on a copy of its base: it gets target's tangent where the base has none (make_dual's
        result over a plain tensor)."""
        tangent = self.tangent(target)
        if tangent is not None and self.tangent(region) is None:
            self.set_tangent(region, tangent)
        delegate(self.inner, "replayed", target, region)

    def written_view(self, base, new_base, target, rebased):
        """An in-place op wrote through the view `target` of `base` (now holding `new_base`'s
        values, target `rebased`'s), as torch's tangents follow it: a dual base's tangent is
        updated in place (the tangents of its views, target's among them, are views of it);
        a view with a tangent of its own over a plain base (make_dual's) keeps the base plain;
        a dual value written into a plain base makes the base dual, zeros elsewhere."""
        base_tangent, own = self.tangent(base), self.tangent(target)
        if base_tangent is None and own is None and self.tangent(rebased) is not None and \
                self_overlapping(memory_of(base)):
            # a plain expanded base (an alias of an expand) made dual: its zero tangent is
            # laid out as the base, so its aliased elements see the write, as torch's
            with _interpreter.using_interpreter(self.inner):
                base_tangent = _zeros_laid_out_as(base)
            self.set_tangent(base, base_tangent)
        if base_tangent is not None and base_tangent._view is not None \
                and self_overlapping(memory_of(base_tangent)):
            # an expanded base tangent (of an alias x.data of an expand) cannot be written
            # whole: the region is written into the tangent it is a view of
            info = base_tangent._view
            region = self.tangent(rebased)
            with _interpreter.using_interpreter(self.inner):
                if region is None:
                    region = base_tangent.new_zeros(tuple(target.shape))
                whole = _inplace.view_scatter(info.base, region, overlapping=True,
                                              chain=info.chain + target._view.chain)
                write_into(info.base, whole)
        elif base_tangent is not None:
            self._overwrite(base, self.tangent(new_base))
            now = self.tangent(base)
            if own is not None and now is not base_tangent and _shares(own, base_tangent):
                # (the base's tangent was replaced, not written: the view's, a view of the
                # old one, would keep the old values) a view of the new one
                with _interpreter.using_interpreter(self.inner):
                    self.set_tangent(target, replay_view(now, target._view.chain))
            elif own is not None and not _shares(own, base_tangent):
                self._overwrite(target, self.tangent(rebased))
        elif own is not None:
            self._overwrite(target, self.tangent(rebased))
        elif self.tangent(rebased) is not None:
            base_tangent = self.tangent(new_base)
            self.set_tangent(base, base_tangent)
            with _interpreter.using_interpreter(self.inner):
                self.set_tangent(target, replay_view(base_tangent, target._view.chain))
        hook = getattr(self.inner, "written_view", None)
        if hook is not None:
            hook(base, new_base, target, rebased)
        else:
            delegate(self.inner, "written", base, new_base)
            delegate(self.inner, "written", target, rebased)

    def _overwrite(self, target, new):
        """Give `target` the tangent `new` (zeros for None where it had one) by writing into
        the tangent it has, as torch does: a view of that tangent (the tangent of a view of
        target) and a tangent the user holds see the write."""
        old = self.tangent(target)
        if old is None:
            if new is not None:  # (a copy: another tensor's tangent may be this one)
                with _interpreter.using_interpreter(self.inner):
                    self.set_tangent(target, _laid_out_as(_fit(new, target).clone(), target))
            return
        if new is old:
            return
        with _interpreter.using_interpreter(self.inner):
            if new is None:
                new = old.new_zeros(old.shape)
            elif _shares(new, old):
                new = new.clone()
            dst = old
            if old._view is not None and self_overlapping(memory_of(old)):
                # an expand's tangent (a view of the expanded tensor's): its elements sharing
                # a location hold one value, written once (by ops: an outer level follows)
                dst, new = _distinct(old, old), _last_written(_fit(new, old), old)
            with writing_out():  # (a tangent made outside a grad transform is no capture:
                written = write_into(dst, new)  # its write is forward AD's own)
            if written:
                return
        self.set_tangent(target, _fit(new, target))

    def read(self, tensor, what):
        delegate(self.inner, "read", tensor, what)

    def varies(self, tensor):
        return delegate(self.inner, "varies", tensor)

    def inplace(self, tensor):
        delegate(self.inner, "inplace", tensor)

    def function_check(self, cls):
        """A custom Function is applied: the levels below may refuse it (vmap without a rule)."""
        delegate(self.inner, "function_check", cls)

    def function_ran(self, cls, ctx, args, outputs):
        """A custom Function ran: with a `jvp` staticmethod, its output tangents come from
        it (else from the ops its forward ran, which this level saw)."""
        Tensor = _interpreter.Tensor
        if not any(isinstance(a, Tensor) and self.tangent(a) is not None for a in args):
            return delegate(self.inner, "function_ran", cls, ctx, args, outputs)
        if getattr(cls, "jvp", Function.jvp) is Function.jvp:  # (its forward may leave
            # flowgrad's ops, as NumPy kernels do: a tangent made from them would be wrong)
            raise NotImplementedError(
                f"You must implement the jvp function for custom autograd.Function to use it "
                f"with forward mode AD ({getattr(cls, 'vmapped', cls).__name__} has none: "
                f"define its jvp staticmethod)")

        tans = [self.tangent(a) if isinstance(a, Tensor) else None for a in args]
        if ctx.materialize_grads:  # (as torch: a tensor input without a tangent gives zeros)
            tans = [a.new_zeros(a.shape) if t is None and isinstance(a, Tensor) and
                    a.dtype.is_floating_point else t for a, t in zip(args, tans)]
        versions = [None if t is None else t._version for t in tans]
        with _interpreter.using_interpreter(self.inner):
            t_out = cls.jvp(ctx, *tans)
        outs = outputs if isinstance(outputs, tuple) else (outputs,)
        t_outs = t_out if isinstance(t_out, tuple) else (t_out,)
        _check_jvp_result(cls, ctx, outs, t_outs)
        _check_dirty_tangents(cls, ctx, args, outs, t_outs, tans, versions)
        for o, t in zip(outs, t_outs):
            if isinstance(o, Tensor):
                self.set_tangent(o, None if t is None else _fit(t, o))
        return delegate(self.inner, "function_ran", cls, ctx, args, outputs)


def _check_jvp_result(cls, ctx, outs, t_outs):
    """torch's checks of what a jvp staticmethod returned: one tangent per forward output, a
    tensor of the output's shape for each differentiable one, None for the others."""
    Tensor = _interpreter.Tensor
    if len(t_outs) != len(outs):
        raise RuntimeError(
            f"{cls.__name__}'s jvp returned an invalid number of forward gradients (expected "
            f"{len(outs)} but got {len(t_outs)}); return one per output of forward (None for "
            f"those that are not differentiable tensors)")
    for k, (o, t) in enumerate(zip(outs, t_outs)):
        diff = isinstance(o, Tensor) and o._data.dtype.kind in _DIFF and \
            id(o) not in ctx.non_differentiable
        if not diff:
            if t is not None:
                raise RuntimeError(
                    f"{cls.__name__}'s jvp returned a gradient at position {k}, but the "
                    f"corresponding forward output is not a differentiable Tensor; return "
                    f"None at that position instead")
            continue
        if not isinstance(t, Tensor):
            raise RuntimeError(
                f"{cls.__name__}'s jvp returned {type(t).__name__} at position {k} for a "
                f"differentiable output of shape {tuple(o.shape)}; return its tangent, a "
                f"tensor of that shape")
        if tuple(t.shape) != tuple(o.shape):
            raise RuntimeError(
                f"{cls.__name__}'s jvp: trying to set a forward gradient that has a different "
                f"size than that of the original Tensor: output {k} is of size "
                f"{tuple(o.shape)} while the given forward gradient is of size "
                f"{tuple(t.shape)}; return a tangent of the output's shape")


def _check_dirty_tangents(cls, ctx, args, outs, t_outs, tans, versions):
    """torch's rule for an input forward wrote in place (mark_dirty): jvp writes its tangent
    in place and returns that tensor as-is."""
    for o, t in zip(outs, t_outs):
        if id(o) not in ctx.dirty:
            continue
        for a, tan, version in zip(args, tans, versions):
            if a is not o or tan is None:
                continue
            if tan._version == version:
                raise RuntimeError(
                    f"{cls.__name__}: an inplace custom Function is not modifying the forward "
                    f"mode gradients inplace. If the forward is modifying an input inplace, "
                    f"then the jvp function must modify the corresponding gradient inplace")
            if t is not tan:
                raise RuntimeError(
                    f"{cls.__name__}: an inplace custom Function is not returning the forward "
                    f"mode gradients as-is. If the forward is modifying an input inplace, then "
                    f"the jvp function must return the modified gradient itself")


def _aliases(t, tangents):
    """Whether tangent `t` is, or is a view into, one of `tangents`."""
    if getattr(t._data, "base", None) is None:  # (owns its memory: new, unless an input's)
        for i in tangents:
            if t is i:
                return True
        return False
    for i in tangents:
        if i is not None and _shares(t, i):
            return True
    return False


def _shares(a, b):
    """Whether two tangents' arrays may overlap in memory."""
    return _np.may_share_memory(a._data, b._data)


def _fit(t, like):
    """A tangent of exactly `like`'s shape and dtype (rules may return broadcastable ones)."""
    if tuple(t.shape) != tuple(like.shape):
        t = t.expand(like.shape)
    if t.dtype != like.dtype:
        t = t.to(like.dtype)
    return t


def output_tangents(op, inputs, outs, tans, attrs, aux):
    """The tangents of an op's outputs: its written rule, else the one derived from its
    reverse rule. Returns one tangent (or None) per output."""
    rule = JVP_RULES.get(op.name) or JVP_KINDS.get(getattr(op, "jvp", None))
    if rule is not None:
        result = rule(op, inputs, outs, tans, attrs, aux)
        if result is not NotImplemented:
            return result if isinstance(result, (tuple, list)) else (result,)
    return derived_jvp(op, inputs, outs, tans, attrs, aux)


def capture(op, inputs, outs, attrs, aux, needs):
    """A node as the op's forward would have recorded (linked to nothing), for calling its
    reverse rule directly."""
    infos = tuple((t._data.shape, t._data.dtype) for t in inputs)
    node = FunctionNode(op, attrs, [None] * len(inputs), [None] * len(inputs), infos)
    node.needs_input_grad = needs
    node._inputs = [SavedTensor(t, False) for t in inputs]
    node._outputs = [SavedTensor(o, False) for o in outs]
    node.aux = tuple(aux) or None
    return node


def call_rule(op, node, grads):
    result = op.backward(node, *grads)
    return result if isinstance(result, (tuple, list)) else (result,)


def _pairing(g, t):
    """<g, t> as real vectors of (re, im) pairs: sum(Re(conj(g) t)). Reverse rules follow
    torch's convention (a gradient is dL/dx + i dL/dy, the real transpose J^T u), so the
    gradient of <J^T u, t> = <u, J t> with respect to u is J t, complex or real."""
    if g.is_complex():
        return (g.conj() * t).real.sum()
    if t.is_complex():
        return (g * t.real).sum()
    return (g * t).sum()


def derived_jvp(op, inputs, outs, tans, attrs, aux):
    """J t from the reverse rule: d/du <vjp(u), t> at any u (zero here)."""
    if isinstance(op, _FunctionOp):
        raise RuntimeError(
            f"forward-mode AD through the custom Function {op.fn.__name__}: it defines no "
            f"`jvp` staticmethod; add one (jvp(ctx, *input_tangents) -> output tangents)")
    Tensor = _interpreter.Tensor
    needs = [t is not None and x._data.dtype.kind in _DIFF for x, t in zip(inputs, tans)]
    node = capture(op, inputs, outs, attrs, aux, needs)
    # the tangent keeps a graph only where grad mode was on and something it depends on
    # requires grad (as torch's); the rule itself always runs recording, to be differentiated
    keep = grad_mode._state.enabled and (any(t.requires_grad for t in inputs) or any(
        t is not None and t.requires_grad for t in tans))
    with grad_mode.enable_grad(), reverse_scope():
        us = [Tensor._zeros(o._data.shape, o._data.dtype, o) for o in outs]
        for u in us:
            if u._data.dtype.kind in _DIFF:
                u._set_requires_grad(True)
        grads = call_rule(op, node, us)
        total = None
        for g, t, need in zip(grads, tans, needs):
            if need and g is not None and g.requires_grad:
                term = _pairing(g, t)
                total = term if total is None else total + term
        diff = [u for u in us if u.requires_grad]
        if total is None or not diff:
            return [None] * len(outs)
        # an outer forward level differentiates the result: engine.grad must not detach it
        got = iter(engine.grad(total, diff, allow_unused=True,
                               create_graph=keep or len(_LEVELS) > 1))
    result = []
    for u in us:
        g = next(got) if u.requires_grad else None
        if g is not None and not keep:
            g = detached(g)  # only the reverse graph is cut: outer levels' tangents stay
        result.append(g)
    return result


# ---- the public API: torch.autograd.forward_ad -----------------------------------------------
def enter_dual_level():
    """Enter a new forward-AD level and return its index (prefer `with dual_level()`).
    Only one at a time, as torch's (func.jvp nests its own levels instead)."""
    if _LEVELS:
        raise RuntimeError("Nested forward mode AD is not supported at the moment: a "
                           "forward-AD level (dual_level or func.jvp) is already entered; "
                           "use torch.func.jvp inside torch.func.jvp to nest")
    return _enter(public=True)


def _enter(public):
    """Enter a forward-AD level; func.jvp's (`public=False`) nest only inside func.jvp's."""
    if any(lvl.public for lvl in _LEVELS):
        raise RuntimeError("Nested forward mode AD is not supported at the moment: func.jvp "
                           "inside a dual_level; leave the dual_level first")
    level = ForwardLevel(_interpreter.current, len(_LEVELS))
    level.public = public
    level._ctx = _interpreter.using_interpreter(level)
    level._ctx.__enter__()
    _LEVELS.append(level)
    return level.index


def exit_dual_level(*, level=None):
    """Leave the innermost forward-AD level: its dual tensors become plain tensors."""
    if not _LEVELS or (level is not None and level != _LEVELS[-1].index):
        raise RuntimeError("exit_dual_level: no such forward-AD level is entered (levels "
                           "must be exited innermost first)")
    lvl = _LEVELS.pop()
    lvl.tangents.clear()
    lvl._ctx.__exit__(None, None, None)


class dual_level:
    """Context manager for forward-mode AD: tangents set with `make_dual` inside it flow
    through every op, and are dropped when it ends.

    >>> import flowgrad as flow
    >>> import flowgrad.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(flow.tensor(3.0), flow.tensor(1.0))
    ...     fwAD.unpack_dual(x * x).tangent
    tensor(6.)
    """

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


class transform_level(dual_level):  # noqa: N801
    """The level of one func.jvp call: func.jvp calls nest, a dual_level around or inside
    one raises, as torch's."""

    def __enter__(self):
        return _enter(public=False)


def _level(level, what):
    if not _LEVELS:
        raise RuntimeError(f"{what}: no forward-AD level is entered; use it inside "
                           f"`with flowgrad.autograd.forward_ad.dual_level():`")
    if level is None:
        return _LEVELS[-1]
    for lvl in _LEVELS:
        if lvl.index == level:
            return lvl
    raise RuntimeError(f"{what}: forward-AD level {level} is not entered")


def make_dual(tensor, tangent, *, level=None):
    """A view of `tensor` carrying `tangent` (same shape, a floating or complex dtype) at the
    level.

    >>> import flowgrad as flow
    >>> import flowgrad.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     d = fwAD.make_dual(flow.ones(2), flow.tensor([1.0, 2.0]))
    ...     fwAD.unpack_dual(d.sin()).tangent
    tensor([0.5403, 1.0806])
    """
    lvl = _level(level, "make_dual")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(
            f"make_dual: trying to set a forward gradient that has a different size than "
            f"that of the original Tensor: primal shape {tuple(tensor.shape)}, tangent shape "
            f"{tuple(tangent.shape)}; pass a tangent shaped like the primal")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"make_dual: expected a floating point or complex primal, got "
                         f"{tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"make_dual: expected a floating point or complex tangent, got "
                         f"{tangent.dtype}")
    with _interpreter.using_interpreter(lvl.inner):
        dual = tensor.reshape(tensor.shape)
        # (torch's: the tangent keeps its dtype, ops' tangents take their outputs'; one laid
        # out otherwise than the primal is copied to the primal's strides)
        tangent = _laid_out_as(tangent, dual)
    lvl.set_tangent(dual, tangent)
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of a dual tensor; tangent is None for a plain tensor."""
    lvl = _level(level, "unpack_dual") if _LEVELS or level is not None else None
    if lvl is None:
        return UnpackedDualTensor(tensor, None)
    tangent = lvl.tangent(tensor)  # (with or without one, the primal is a view, as torch's
    with _interpreter.using_interpreter(lvl.inner):  # _fw_primal: a stale view replays)
        primal = tensor.reshape(tensor.shape)
    store, plain = primal._data, lvl.plain  # (a view of the dual that never has its tangent)
    plain[id(store)] = weakref.ref(store, lambda _, key=id(store): plain.pop(key, None))
    return UnpackedDualTensor(primal, tangent)


def copy_tangents(src, dst):
    """Give `dst` the tangents `src` has at every entered level (a detached alias that must
    stay dual: func.grad's inputs)."""
    for lvl in _LEVELS:
        t = lvl.tangent(src)
        if t is not None:
            lvl.set_tangent(dst, t)


def active_levels():
    return tuple(_LEVELS)
