"""The inputs of a reverse transform (func.grad, vjp): fresh aliases of the outer tensors.

A differentiated input is an alias on the outer tensor's storage and version counter
(`_InputOf`), so a write through it reaches the caller and the outer levels, and its
gradient keeps a graph into the outer tensor when an outer transform differentiates it.
`.data` and `detach_()` of an input strip its innermost level only (`_data_of`,
`_detach_keeping_outer`); after a write into such an alias, `_written` gives the tensor
it aliases the written history, as torch's `.data` there IS that tensor. `transforms`
builds the transforms themselves on these.
"""

import weakref

from ..autograd import forward_ad, grad_mode, inplace, levels
from ..autograd import interpreter as _interpreter
from ..autograd import meta as _meta
from ..autograd.function import Function
from ..autograd.inplace import TRANSFORM_INPUT_VIEWS, TRANSFORM_INPUTS, physical_of, rebase
from ..autograd.levels import TRANSFORMS, ReverseLevel
from ..autograd.meta import counter_of
from ..autograd.views import replay_view
from ..tensor import Tensor
from .batched import BatchedTensor, wrap, wrap_with_graph
from .vmap import VmapLevel


def _detached(x):
    """x.detach(), keeping x's tangents and batching at every level (and its level record)."""
    if type(x) is BatchedTensor:
        y = wrap(_detached(x._phys), x._level)
    else:
        y = x.detach()
    forward_ad.copy_tangents(x, y)
    return levels.stamp(y, levels.stamp_of(x))


def _handed_out(tensors):
    """What a transform returns to the level it was entered in: `tensors` with their graph
    where it reaches something outside the transforms that have returned (an outer level's
    input, a tensor requiring grad outside them all), else detached (with their tangents):
    a graph into the returned transforms' own inputs is no outer level's, and torch's result
    then does not require grad."""
    return [t if not (isinstance(t, Tensor) and t.requires_grad)
            or levels.reaches_live_leaf([t]) else _detached(t) for t in tensors]


forward_ad.detached = _detached  # forward AD's derived rules cut the reverse graph with it


class _DataOf(Function):
    """x.data inside a transform, for the levels outside it: the identity, whose gradient
    stops in the backward of the transform at depth `depth` (or one inside it) and passes
    in an outer one's, or autograd's own."""

    @staticmethod
    def forward(ctx, x, depth):
        ctx.depth = depth
        return _alias(x)

    @staticmethod
    def stops_backward(ctx, running):  # (levels.stops_at: the engine skips its edges then)
        return running.depth >= ctx.depth

    @staticmethod
    def backward(ctx, dy):
        running = levels.BACKWARD[0]
        return (None if running is not None and running.depth >= ctx.depth else dy), None


class _InputOf(Function):
    """The input of a func.grad/vjp that an outer level differentiates through: the
    identity, on x's own storage (`_fresh`)."""

    @staticmethod
    def forward(ctx, x):
        return _alias(x)

    @staticmethod
    def backward(ctx, dy):
        return dy


class _LevelMerge(Function):
    """x after a recorded write through its alias `x.data` stripping the level at `depth`:
    the identity whose gradient goes to x's own history in the backward of that level and of
    the levels inside it (which do not see the write, as torch's wrapper there), and to the
    written alias's history in the outer levels' and in autograd's own (torch's .data there
    IS x)."""

    @staticmethod
    def forward(ctx, x, written, depth):
        ctx.depth = depth
        return _alias(written)

    @staticmethod
    def backward(ctx, grad):
        running = levels.BACKWARD[0]  # (a level's backward runs once it has returned)
        if running is not None and running.depth >= ctx.depth:
            return grad, None, None
        return None, grad, None


def _written(root, recorded):
    """After an in-place write to `root` (a tensor that is no view, or the root base of the
    view written) inside transforms: when root is an alias `x.data` (`levels.DATA_ALIASES`),
    x, and x's base when x is a view, take `_LevelMerge`'s history when the write was
    `recorded`, and the alias's tangents at the forward levels outside the one it strips;
    and so on when x is itself an alias. Then, when recorded, the other aliases of the
    storage take their tensor's new history (`_DataOf` of it), as torch's .data there IS
    that tensor. (x's views replay the new history when next read: `levels.note_write`
    moved x's version.)"""
    alias, entry, owner = root, levels.data_alias(root), root
    while entry is not None:
        x, depth = entry
        if recorded and not _transform_input(x):  # (whose history is the level's target)
            with _interpreter.using_interpreter(_interpreter.AutogradInterpreter), \
                    grad_mode.enable_grad():
                rebase(x, lambda old, written=alias, depth=depth:
                       _LevelMerge.apply(old, written, depth))
            levels.rebound(x)
        if recorded:
            _rebind_physical(x, alias)
        _share_tangents(x, alias, depth)
        alias, entry, owner = x, levels.data_alias(x), x
    if not recorded:
        return
    for x, depth, alias_ref in list(levels.DATA_ALIASES.values()):
        alias = alias_ref()
        if alias is None or alias is root or x._counter is not owner._counter:
            continue
        x._sync()
        keep = depth < len(TRANSFORMS) and x.requires_grad and _outer_graph(TRANSFORMS[depth], x)
        with _interpreter.using_interpreter(_interpreter.AutogradInterpreter), \
                grad_mode.enable_grad():
            fresh = _DataOf.apply(x, depth) if keep else None
            if _written_through(alias):  # (at the stripped level torch's alias is a wrapper
                # of its own: the history of its own writes stays there and inside)
                fresh = _LevelMerge.apply(alias, _alias(x) if fresh is None else fresh, depth)
        if fresh is not None or alias.requires_grad:
            _rebind(alias, fresh if fresh is not None else _alias(x))
            levels.rebound(alias)
        _share_tangents(alias, x, depth)


def _rebind_physical(x, alias):
    """x's physical tensor takes the physical history of its alias `x.data` just written:
    outside the vmap levels `.data` IS x, so there x holds the write (grad(vmap(grad(f))) of
    an f writing through x.data: before, the outer grad missed the write, silently)."""
    top, shared = x, _physical(x)  # (x's own history is its physical tensor's)
    while type(x) is BatchedTensor and type(alias) is BatchedTensor:
        x, alias = x._phys, alias._phys  # (each level down, nested vmaps included)
        if x is not alias and x.requires_grad and alias.requires_grad:
            x._meta, x._grad_fn = alias._meta, alias._grad_fn
    if shared:
        top._meta, top._grad_fn = top._phys._meta, top._phys._grad_fn


def _written_through(alias):
    """Whether a recorded write through `alias` (an `x.data`) gave it a history of its own,
    more than the outer levels' view of x (`_DataOf`)."""
    alias._sync()
    node = alias._grad_fn
    return node is not None and getattr(node.op, "fn", None) is not _DataOf


def _transform_input(x):
    """Whether x is the input of a func.grad/vjp (a leaf there, its gradient's target), or a
    view of one."""
    if x._view is not None:
        x = x._view.base
    return x._meta is not None and (x._meta in TRANSFORM_INPUTS or levels.level_leaf(x._meta))


def _share_tangents(dst, src, depth):
    """dst takes src's tangents at the forward levels outside the one at `depth` (where an
    alias x.data stripping that one and x are one tensor). A view dst: through its base's
    tangent, whose views (dst's own among them) see it, as a write through a view does."""
    for lv in TRANSFORMS[:depth]:
        if not isinstance(lv, forward_ad.ForwardLevel):
            continue
        new, view = lv.tangent(src), dst._view
        base_tangent = None if view is None or new is None else lv.tangent(view.base)
        if base_tangent is None:
            lv._overwrite(dst, new)
            continue
        extra = {"overlapping": True} if inplace.self_overlapping(dst._data) else {}
        with _interpreter.using_interpreter(lv.inner):
            whole = inplace.view_scatter(base_tangent, new.to(base_tangent.dtype),
                                         chain=view.chain, **extra)
        lv._overwrite(view.base, whole)


levels.written = _written


def _alias(x):
    """x's storage in new array objects at every vmap level (no level's tangent or graph)."""
    if type(x) is BatchedTensor:
        return wrap(_alias(x._phys), x._level)
    return Tensor._wrap(x._data.view())


def _physical(x):
    """Whether autograd sees the batched x through its physical tensor (it shares its
    meta: no reverse transform inside x's vmap level records on the per-example tensors)."""
    return physical_of(x) is not None


def _outer_graph(inner, x):
    """Whether the levels outside the transform `inner` may keep a graph of x through it once
    that one is stripped: an outer reverse level (or autograd around the transforms)
    differentiates through it, and autograd records (on the per-example tensors of the vmap
    levels a func.grad runs in, or on the physical ones), under no_grad too."""
    interp = _interpreter.current
    while isinstance(interp, (forward_ad.ForwardLevel, VmapLevel)):
        interp = interp.inner
    if interp is not _interpreter.AutogradInterpreter:
        return False  # (not grad mode: torch's .data records nothing, it IS the outer tensor)
    depth = _depth(inner)
    if any(isinstance(lv, ReverseLevel) for lv in TRANSFORMS[:depth]):
        return True
    if isinstance(inner, ReverseLevel) and inner.keep:
        return True
    # autograd around the transforms: x's graph reaches a leaf no transform at `depth` or
    # inside it made (one captured from outside them)
    inside = [m for lv in TRANSFORMS[depth:] for m in getattr(lv, "leaves", ())]
    for meta in inside:
        levels.DEAD_LEAVES.add(meta)
    try:
        return levels.reaches_live_leaf([x])
    finally:
        for meta in inside:
            levels.DEAD_LEAVES.discard(meta)


_depth = levels.depth_of


def _strip_inner(x, graph, depth):
    """x as the levels outside the transform at `depth` see it: an alias of its storage with
    the graph (when `graph`: a _DataOf node on the tensor autograd records x with, the
    per-example or the physical one), without tangents."""
    if _physical(x):
        phys = _strip_inner(x._phys, graph, depth)
        return wrap_with_graph(phys, x._level)
    if not (graph and x.requires_grad):
        return levels.stamp(_alias(x), levels.stamp_of(x))
    with _interpreter.using_interpreter(_interpreter.AutogradInterpreter), \
            grad_mode.enable_grad():
        src = _regenerated(x)
        y = levels.stamp(_DataOf.apply(src, depth), levels.stamp_of(x))
    if type(src) is BatchedTensor and _physical_requires_grad(src):
        y._phys = _strip_inner(src._phys, graph, depth)  # (the levels outside the vmap:
    return y  # grad(vmap(grad(f))) of an f reading x.data, vmap_fuzz's seed 2770)


def _regenerated(x):
    """x with its history as its base has it now (a view whose base was written since: the
    outer levels' x is regenerated), x itself left stale: torch's .data does not touch x's
    grad_fn, so x regenerates when next read, from what its base is then (a base that
    detach_() strips meanwhile included)."""
    info = x._view
    if info is None or info.version == x._counter.value or info.creation \
            or not info.base.requires_grad or _meta.writes_neutral(x._counter, info.version):
        x._sync()
        return x
    if type(x) is BatchedTensor:  # (the per-example views: replayed by x's vmap level)
        with _interpreter.using_interpreter(x._level):
            return replay_view(info.base, info.chain)
    return replay_view(info.base, info.chain)


def _seen_by(x, level):
    """x as the transform `level` sees it: past the vmap levels entered inside it."""
    depth = _depth(level)
    while type(x) is BatchedTensor and any(lv is x._level for lv in TRANSFORMS[depth + 1:]):
        x = x._phys
    return x


def _data_of(x):
    """`x.data` inside func transforms. torch's `.data` of a functorch wrapper wraps the
    same tensor of the level below: it strips the innermost transform alone, so an outer
    grad or jvp still differentiates through it (grad(grad(f)) and jvp(grad(f)) of an f
    reading x.data: vmap_fuzz's hvp seeds 1823, 2770), as does autograd around the transforms
    (`detach()` strips every level, as torch's), and the vmap levels keep their batching
    (vmap(grad(grad(f))): before, .data there cut every level). The transform stripped is
    x's own innermost (`levels.innermost`)."""
    inner = levels.innermost(x)
    if inner is None or levels.legacy(inner):
        # (inside vmap levels x is not batched at; or autograd.functional's levels, torch's
        # legacy vmap and plain dual level, where .data is plain: no tangent, no graph)
        return levels.stamp(_alias(x), levels.stamp_of(x))
    if isinstance(inner, VmapLevel):  # (x's own level is a vmap's, captured by a grad/jvp)
        raise RuntimeError("accessing `data` under vmap transform is not allowed: use "
                           "detach() (torch's functorch refuses .data of a tensor batched by "
                           "vmap, captured into an inner grad or jvp too)")
    depth = _depth(inner)
    y = levels.stamp(_strip_inner(x, _outer_graph(inner, x), depth), levels.stamp_of(x))
    if type(x) is type(y):  # (a write through y: levels.DATA_ALIASES)
        owner = levels.data_alias(x)  # (x.data.data: x's alias, as torch's .data of it)
        levels.add_data_alias(y, owner[0] if owner and owner[1] == depth else x, depth)
    source = _SOURCE_OF.get(x._meta) if x._meta is not None else None
    if source is not None and y._meta is not None:  # (x.data is the tensor the levels outside
        _as_leaf_writes(y, source)  # see: a write refused where that is a leaf, or a view)
    elif y._meta is not None and (x._meta in TRANSFORM_INPUTS  # the outer level's input
                                or levels.level_leaf(x._meta, depth)):
        TRANSFORM_INPUTS.add(y._meta)  # itself, in torch: a leaf to in-place writes
    elif x._view is not None and y._meta is not None and (
            x._view.base._meta in TRANSFORM_INPUTS or isinstance(inner, forward_ad.ForwardLevel)
            and x._view.base._grad_fn is None and x._view.base.requires_grad):
        # (a view of that leaf, in torch; or jvp's input, make_dual's view of a leaf that
        # requires grad below the jvp: its .data is that view there)
        TRANSFORM_INPUT_VIEWS.add(y._meta)
    _take_tangents(y, x, TRANSFORMS[:depth])
    return y


def _as_leaf_writes(y, source):
    """In-place writes to y refused as torch's to `source`: a leaf that requires grad (an
    outer func.grad input included), or a view of one."""
    def leaf(t):
        return t.requires_grad and (t._grad_fn is None or t._meta in TRANSFORM_INPUTS)
    view = source._view
    if view is None and leaf(source):
        TRANSFORM_INPUTS.add(y._meta)
    elif view is not None and leaf(view.base):
        TRANSFORM_INPUT_VIEWS.add(y._meta)


def _take_tangents(alias, x, transforms):
    """alias (on x's storage) takes x's tangent itself at each forward level of
    `transforms`: one tensor there, as torch's wrapper."""
    for lv in transforms:
        if isinstance(lv, forward_ad.ForwardLevel):
            tangent = lv.tangent(_seen_by(x, lv))
            if tangent is not None:
                lv.set_tangent(_seen_by(alias, lv), tangent)


def _rebind(x, y):
    """x takes y's history, at every vmap level autograd records x through."""
    if _physical(x):
        _rebind(x._phys, y._phys)
    x._meta, x._grad_fn = y._meta, y._grad_fn


def _detach_keeping_outer(x):
    """`x.detach_()` inside func transforms, as torch's: it strips the innermost transform
    alone (`levels.stripped` keeps the outer tangents); True when x kept a history for the
    outer levels (else detach_ makes it a leaf)."""
    inner = levels.innermost(x)
    _refuse_captured(x)
    alias = levels.data_alias(x)
    if alias is not None and alias[1] >= levels.last_differentiating() and x.requires_grad:
        # (x is y.data inside the innermost grad level, an outer level's tensor there:
        # torch's detach_ strips that innermost level, where x has no history but the one a
        # recorded write through x gave it, which goes: the outer levels' view of y stays)
        if not _written_through(x):
            return True
        owner, depth = alias
        owner._sync()
        if not _outer_graph(TRANSFORMS[depth], owner):
            return False
        y = _strip_inner(owner, True, depth)  # (x takes the outer levels' view of y)
        if not y.requires_grad:
            return False
        _rebind(x, y)
        levels.rebound(x)
        return True
    if inner is None or levels.legacy(inner) or not _outer_graph(inner, x):
        return False  # (autograd.functional's levels included: a plain detach_)
    input_copy, old = x._meta in TRANSFORM_INPUTS, x._meta
    y = _strip_inner(x, True, _depth(inner))
    if not y.requires_grad:
        return False
    _rebind(x, y)
    if input_copy:  # (an inner func.grad's input: at the outer levels it is the tensor
        source = _SOURCE_OF.get(old)  # they gave, a leaf to recorded in-place writes where
        if source is None:  # that is one; its own level's gradient of it raises, as torch's)
            TRANSFORM_INPUTS.add(x._meta)
        else:
            _as_leaf_writes(x, source)
        _DETACHED_INPUTS[id(x)] = (weakref.ref(
            x, lambda _, key=id(x): _DETACHED_INPUTS.pop(key, None)), old)
    return True


# id(input) -> (a weak reference to it, its meta before detach_()): an inner func.grad/vjp
# input that detach_() rebound to its outer levels' history (`_detach_keeping_outer`), kept
# by the input itself, whose meta a later in-place write replaces again
_DETACHED_INPUTS = {}


def _meta_before_detach(x):
    """The meta a func.grad input had before its function detach_()ed it, whatever was
    written into it since (a write of a constant leaves it detached at its own level, where
    the outer levels record it); None where it was not detach_()ed."""
    entry = _DETACHED_INPUTS.get(id(x))
    return entry[1] if entry is not None and entry[0]() is x else None


def _reaches_inputs(outputs, inputs, level):
    """Whether the graph of `outputs` at `level` reaches one of its inputs (as they were when
    it was entered: a detach_()ed one by its old meta)."""
    targets = {id(_meta_before_detach(x) or x._meta) for x in inputs}
    roots = [o._grad_fn for o in outputs if o._grad_fn is not None]
    return any(id(m) in targets
               for node in levels.graph_nodes(roots, lambda n: levels.stops_at(n, level))
               for m in node.output_metas)


def _refuse_captured(x):
    """detach_() of the input of a func.grad/vjp around a vmap around the innermost level:
    torch.func detaches it for the outer levels too, flowgrad would not. (A tensor captured
    into a grad or jvp transform was refused before: `levels.refuse_captured_write`.)"""
    last = levels.last_differentiating()
    if 0 <= last < len(TRANSFORMS) - 1 and x._meta is not None and levels.level_leaf(x._meta):
        raise NotImplementedError(
            "func transforms: x.detach_() inside vmap of the input of a func.grad/vjp around "
            "the vmap (grad(grad(vmap(f))) and the like) is not supported: "
            "torch.func detaches it for the outer levels too, flowgrad would not. Use "
            "x.detach() instead")


levels.detach_keeping_outer = _detach_keeping_outer
levels.data_of = _data_of


# meta of an alias `_input_alias` made -> the tensor the levels outside see it as (x, or for
# a new leaf per example the physical tensor of its batch): what its `.data`, and the alias
# itself after detach_(), is to in-place writes there (`_data_of`, `_detach_keeping_outer`)
_SOURCE_OF = weakref.WeakKeyDictionary()


def _input_alias(x):
    """`_InputOf(x)` sharing x's version counter; for a batched x whose whole batch requires
    grad below its vmap level (an outer func.grad, or autograd around the transforms), on an
    `_InputOf` of its physical tensor too, so the physical graph the vmap level records goes
    on to x's (grad(vmap(grad(f))): per-example gradients that an outer level differentiates).
    Where only the physical tensor requires grad, the alias is a new leaf per example."""
    phys = _input_alias(x._phys) if type(x) is BatchedTensor and \
        _physical_requires_grad(x) else None
    if phys is not None and (not x.requires_grad or _physical(x)):
        copy = wrap(phys, x._level)._set_requires_grad(True)
        _SOURCE_OF[copy._meta] = x._phys
    else:
        with _interpreter.using_interpreter(_interpreter.AutogradInterpreter), \
                grad_mode.enable_grad():
            copy = _InputOf.apply(x)
        if phys is not None:
            copy._phys = phys
        _SOURCE_OF[copy._meta] = x
    copy._counter = counter_of(x)
    return copy


def _fresh(x):
    """What autograd.grad can target for x: a differentiable alias of x (`_InputOf`: its
    storage and version counter, no view) when x already requires grad (an outer transform
    differentiates through it), else a new leaf. (A view of x was
    that copy before: a view read after a write under no_grad was regenerated from x's own
    base, past the inner input, and grad(grad(f)) came out wrong, silently.)"""
    if not isinstance(x, Tensor):
        return x
    if x.requires_grad or _physical_requires_grad(x):
        if type(x) in (Tensor, BatchedTensor):  # (on x's storage and version counter, as
            # torch's wrapper of x: a write to it under no_grad is a write to x, which the
            # outer levels read; a copy kept the old values there, silently)
            copy = _input_alias(x)
            # (and x's tangents: made under autograd's interpreter, the alias had none, so
            # grad(jvp(grad(f))) and jvp(grad(grad(f))) came out 0, silently)
            _take_tangents(copy, x, TRANSFORMS)
        else:
            copy = x.clone()
        TRANSFORM_INPUTS.add(copy._meta)  # (in-place writes refused, as to a leaf: torch's)
        return copy
    if not x.is_floating_point():
        raise RuntimeError(f"func transforms: can only differentiate floating point inputs, "
                           f"got one of dtype {x.dtype}; convert it with .float()")
    return _normal(_detached(x))._set_requires_grad(True)


def _normal(x):
    """x, or for an inference tensor an alias with a version counter of its own: torch.func
    differentiates inference tensors through normal tensors wrapping them."""
    if isinstance(x, Tensor) and x._counter is not None and \
            x._counter.__class__ is not _meta.VersionCounter:
        x = x.detach()
        x._counter = _meta.VersionCounter()
    return x


def _made_at(level, inputs):
    """The differentiated inputs of func.grad/vjp live at its level (`_fresh` made them before
    it was entered); the leaves it made of them are its own (`ReverseLevel.leaves`)."""
    token = levels.TOKENS[-1]
    for x in inputs:
        if isinstance(x, Tensor):
            levels.stamp(x, token)
            if x._meta is not None and x._grad_fn is None:
                level.leaves.append(x._meta)


def _differentiated(x):
    """Whether a level outside the transform differentiates through the input x: x requires
    grad, or (batched) its whole batch does below its vmap level."""
    return isinstance(x, Tensor) and (x.requires_grad or _physical_requires_grad(x))


def _physical_requires_grad(x):
    """Whether a level below the batched x (its whole-batch tensor) requires grad."""
    while type(x) is BatchedTensor:
        x = x._phys
        if x.requires_grad:
            return True
    return False
