"""What the function transforms (forward-mode AD, vmap) share: running an op one level
down and getting its auxiliary arrays back, and the stack of transform levels entered.

A transform is an interpreter (`interpreter.using_interpreter`) that wraps the one that was
current when it was entered (its `inner`): `Op.__call__` reaches the innermost transform
first, which handles its own tensors (dual or batched) and hands plain work down. Nothing
here runs unless a transform is in use.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..device import ARRAY_MODULES, HOST_XP
from ..errors import kernel_error
from . import grad_mode
from . import interpreter as _interpreter
from . import meta as _meta
from . import saved_hooks as _saved_hooks
from .node import AccumulateGrad
from .views import mark_view

# vmap levels currently entered, outermost first (see `reverse_scope`)
VMAP_STACK = []

# the func transforms entered, outermost first: vmap levels, the forward levels func.jvp
# enters and a `ReverseLevel` per func.grad/vjp, so `x.data` can strip the innermost one
# alone (torch's .data of a functorch wrapper wraps the same tensor of the level below)
TRANSFORMS = []
# the entries of TRANSFORMS that autograd.functional's forward mode entered itself (torch's
# legacy vmap and plain forward AD there are no functorch transforms: requires_grad_() is
# allowed, and a leaf made there is autograd's own); entered while LEGACY_SCOPE[0] is True
LEGACY = []
LEGACY_SCOPE = [False]
BACKWARD = [None]  # the ReverseLevel whose gradients a transform is computing (None: none)
# bound by flowgrad.func.transforms: x.data while TRANSFORMS is not empty, and x.detach_()'s
# history for the levels outside the innermost transform (False: none)
data_of = None
detach_keeping_outer = None


# The level record: while TRANSFORMS is not empty, every op's outputs are stamped with the
# `Token` of the innermost transform entered (`interpreter.STAMP`, read by Op.__call__ then
# alone: nothing is stamped, and nothing checked, outside func transforms). A tensor's own
# level is the live one its stamp resolves to: a transform that has returned hands its
# tensors to the level it was entered in, as torch's unwrapping does.
TOKENS = _interpreter.STAMP  # one per entry of TRANSFORMS, in the same order


class Token:
    """The stamp of the tensors made while a transform is the innermost: its level while it
    is entered (None after), and the token of the level it was entered in. A `frozen` one
    (a twin of the level's, `alias_token`) stamps the aliases made there of captured tensors,
    which in-place ops may not write while the level lasts; after it, they belong where the
    tensor they alias does (their `outer`)."""

    __slots__ = ("level", "outer", "frozen", "twins", "made")

    def __init__(self, level, outer, frozen=False):
        self.level, self.outer, self.frozen, self.twins = level, outer, frozen, None
        self.made = None  # the metas of the leaves `made_leaf` gave it


def stamp_of(t):
    """The token t was stamped with (a batched tensor made by vmap itself: its examples'),
    or None: made outside every func transform, or by no op."""
    while True:
        token = getattr(t, "_lvl", None)
        if token is not None or getattr(t, "_level", None) is None:
            return token
        t = t._phys


def stamp(t, token):
    """Give t (a tensor made inside transforms by no op: an alias, a detached copy) `token`
    (None: outside every transform, as a tensor captured from there)."""
    t._lvl = token
    return t


def own_depth(t):
    """The index in TRANSFORMS of the level t was made at (or handed to when the level it was
    made at returned); -1: outside every transform entered."""
    token = _live(stamp_of(t))
    return -1 if token is None else depth_of(token.level)


def depth_of(level):
    """The index in TRANSFORMS of the entered transform `level`."""
    return next(i for i, lv in enumerate(TRANSFORMS) if lv is level)


def innermost(t):
    """The innermost transform t is seen through, the one its .data and detach_() strip:
    t's own level (the one it was made at, or captured from: torch's functorch wrapper's
    level), past the vmap levels t is not batched at (a tensor from outside a vmap is not
    lifted to it, as torch's); None when there is none."""
    limit = own_depth(t)
    for i in range(len(TRANSFORMS) - 1, -1, -1):
        level = TRANSFORMS[i]
        if not any(level is v for v in VMAP_STACK):
            if i <= limit:
                return level
            continue
        x = t
        while getattr(x, "_level", None) is not None:  # (a BatchedTensor's levels)
            if x._level is level:
                return level
            x = x._phys
    return None


# id -> tensor: the arguments a func.grad/jacrev/jacfwd does not differentiate, while its
# function runs (`transforms._level_owns`): torch's wrappers of them at that level are no
# views there, whatever they are outside it (detach_() of one is allowed)
OWNED = {}
# the metas of func.grad's inputs inside another transform: aliases of the outer input
# (`inputs._InputOf`, no views: a view of one regenerates from it, not past it), which
# torch's functorch treats as leaves
TRANSFORM_INPUTS = weakref.WeakSet()


def level_leaf(meta, depth=None):
    """Whether `meta` is one a func.grad/vjp entered made a leaf of its input with (a leaf
    at that level, as torch's wrapper is, whatever history the levels outside give it); of
    the levels outside the one at `depth` alone when given."""
    return any(meta is leaf for lv in TRANSFORMS[:depth] for leaf in getattr(lv, "leaves", ()))


def legacy(level):
    """Whether `level` is one autograd.functional entered (`LEGACY`: torch's legacy vmap and
    plain dual level, where `.data` and `detach_()` are the plain ones)."""
    return any(level is lv for lv in LEGACY)


def made_leaf(t):
    """t (whose meta was just made to require grad) became a leaf inside func transforms.
    When it lives at a grad, vjp or jvp level (torch's wrapper at that level: made there,
    or under a vmap inside it), its requiring grad is that level's alone: the level's exit
    adds it to DEAD_LEAVES, so the levels outside see a constant there, as torch's do."""
    token = _live(stamp_of(t))
    while token is not None and any(token.level is v for v in (*VMAP_STACK, *LEGACY)):
        token = _live(token.outer)
    if token is not None:
        if token.made is None:
            token.made = []
        token.made.append(t._meta)


def _live(token):
    """The live token a stamp resolves to (None: outside every transform entered)."""
    while token is not None and token.level is None:
        token = token.outer
    return token


def last_differentiating():
    """The index in TRANSFORMS of the innermost grad, vjp or jvp level (-1: none, vmap's
    alone or nothing entered)."""
    last = len(TRANSFORMS) - 1
    while last >= 0 and any(TRANSFORMS[last] is v for v in VMAP_STACK):
        last -= 1
    return last


def captured(t):
    """Whether in-place ops may not write t, as torch.func's grad/jvp interpreters refuse: t
    lives outside the innermost grad, vjp or jvp level (captured from outside it, or made at
    an outer level), or it aliases such a tensor (a view, `detach()` or `.data` made of one
    inside: torch's immutable wrapper). A tensor made at a vmap level inside that level lives
    there. False when no grad, vjp or jvp level is entered."""
    last = last_differentiating()
    if last < 0:
        return False
    token = _live(stamp_of(t))
    if token is None or token.frozen:
        return True
    return depth_of(token.level) < last


def alias_token(src, token):
    """The stamp of an alias of `src` (a view, a detach()) made while `token` is the
    innermost: `token` itself, or its frozen twin when src is `captured` (its `outer`: src's
    own, so the alias is src's level's once this level returns)."""
    if not captured(src):
        return token
    outer = stamp_of(src)
    live = _live(outer)
    if live is not None and live.frozen:
        outer = live.outer  # (an alias of an alias: of the same captured tensor)
    twins = token.twins
    if twins is None:
        twins = token.twins = {}
    twin = twins.get(outer)
    if twin is None:
        twin = twins[outer] = Token(token.level, outer, frozen=True)
    return twin


class writing_out:
    """The block writes an `out=` argument, or a tangent in place (forward AD's own write):
    torch.func's interpreters check no capture there (an out= op is not an in-place op to
    them), so neither does `refuse_captured_write`."""

    depth = 0

    def __enter__(self):
        writing_out.depth += 1

    def __exit__(self, *exc):
        writing_out.depth -= 1


def refuse_captured_write(name, target):
    """torch.func's check of an in-place op (`name`) inside a grad, vjp or jvp transform:
    refused, before anything is written, where its target is `captured` (from outside the
    innermost such level, or an alias of such a tensor), with torch's RuntimeError. vmap
    levels alone check nothing (torch's vmap has rules of its own for writes into unbatched
    tensors). Called only while a transform is entered (`interpreter.STAMP` not empty)."""
    if not writing_out.depth and captured(target):
        raise RuntimeError(
            f"During a grad (vjp, jvp, grad, etc) transform, the function provided attempted "
            f"to call in-place operation ({name}) that would mutate a captured Tensor (shape "
            f"{tuple(target.shape)}, made outside the transform, or a view or detach() of "
            f"one). This is not supported (as in torch.func); please rewrite the function "
            f"being transformed to explicitly accept the mutated Tensor(s) as inputs, or "
            f"write into a clone() made inside it")


# `x.data` aliases made inside a grad/vjp/jvp level (inputs._data_of): id(alias) -> (x,
# the depth of the level the alias strips, a weak reference to the alias; `data_alias`).
# x is kept while the alias lives: a write through a temporary view's alias must still
# reach x's base. torch's .data of a functorch wrapper IS the tensor of the level below: a
# write through the alias is seen in x at the levels outside that one alone, and a write to
# x is seen in the alias. The alias has a version counter of its own; a write through it
# bumps x's too (and one to x, its aliases'), a bump the levels at and inside the stripped
# one do not see (`UNSEEN_WRITES`), and, unless x's history is rebound after it, one that
# leaves x's history as it was (`NEUTRAL_WRITES`: x's views need no replay). x's rebinding
# is `written`'s (bound by transforms).
DATA_ALIASES = {}
UNSEEN_WRITES = []  # (x's version counter, its value after the write, the stripped depth)
NEUTRAL_WRITES = []  # (x's version counter, its value after the write)
written = None


def add_data_alias(alias, x, depth):
    """Record `alias` as `x.data` stripping the level at `depth` (forgotten when alias is
    freed)."""
    key = id(alias)
    DATA_ALIASES[key] = (x, depth,
                         weakref.ref(alias, lambda _: DATA_ALIASES.pop(key, None)))


def data_alias(t):
    """(x, the stripped level's depth) when t is a live `x.data` alias, else None."""
    entry = DATA_ALIASES.get(id(t))
    if entry is None or entry[2]() is not t:
        return None
    return entry[0], entry[1]


def note_write(tensor):
    """An in-place write to `tensor` bumped its version (called inside transforms alone).
    Through an alias x.data (or a view of one), x's version moves too; to x, its aliases'
    do; both unseen by the levels at and inside the one stripped (torch's alias is the outer
    level's tensor, whose saved copies at the stripped level do not see writes to x)."""
    view = tensor._view
    alias = tensor if view is None else view.base
    entry, counter = data_alias(alias), tensor._counter
    while entry is not None:
        x, depth = entry
        counter = _bump_unseen(x, depth)
        entry = data_alias(x)
    for x, depth, alias_ref in list(DATA_ALIASES.values()):
        other = alias_ref()
        if other is not None and other is not alias and x._counter is counter:
            _bump_unseen(other, depth)


def _bump_unseen(t, depth):
    """Bump t's version, unseen by the levels at and inside `depth`, and neutral until t's
    history is rebound (`rebound`); its counter."""
    counter = _meta.counter_of(t)
    counter.value += 1
    UNSEEN_WRITES.append((counter, counter.value, depth))
    NEUTRAL_WRITES.append((counter, counter.value))
    return counter


def rebound(t):
    """t's history was rebound after an alias write: its last version bump is no neutral
    one (t's views replay it when next read)."""
    counter = t._counter
    for i in range(len(NEUTRAL_WRITES) - 1, -1, -1):
        if NEUTRAL_WRITES[i][0] is counter and NEUTRAL_WRITES[i][1] == counter.value:
            del NEUTRAL_WRITES[i]
            return


def _writes_unseen(counter, version):
    """`meta.writes_unseen` inside transforms: every write to `counter` since `version` is
    one through an alias stripping the running backward's level or one outside it. (A
    transform's backward runs once it has returned: levels are told apart by depth.)"""
    running = BACKWARD[0]
    if running is None or not UNSEEN_WRITES:
        return False
    unseen = sum(1 for c, value, depth in UNSEEN_WRITES
                 if c is counter and value > version and depth <= running.depth)
    return unseen == counter.value - version


def _writes_neutral(counter, version):
    """`meta.writes_neutral`: every write to `counter` since `version` is an unrecorded one
    through an alias (the tensor's history is as it was)."""
    if not NEUTRAL_WRITES:
        return False
    neutral = sum(1 for c, value in NEUTRAL_WRITES if c is counter and value > version)
    return neutral == counter.value - version


_meta.writes_unseen = _writes_unseen
_meta.writes_neutral = _writes_neutral


# a graph reaching only those leaves (and no other) is no outer level's to differentiate
DEAD_LEAVES = _meta.DEAD_LEAVES


def graph_nodes(roots, stop=None):
    """The nodes reachable from the nodes `roots`, each once, iteratively (no recursion: a
    long graph is fine); the edges of a node where `stop(node)` holds are not followed."""
    stack, seen = list(roots), {id(n) for n in roots}
    while stack:
        node = stack.pop()
        yield node
        if stop is not None and stop(node):
            continue
        for nxt in node.next_nodes:
            if nxt is not None and id(nxt) not in seen:
                seen.add(id(nxt))
                stack.append(nxt)


def _with_physical(tensors):
    """tensors, each followed by its physical tensors down its vmap levels (autograd outside
    a vmap records on those: grad(vmap(grad(f))))."""
    for t in tensors:
        while t is not None:
            yield t
            t = getattr(t, "_phys", None)


def reaches_live_leaf(tensors):
    """Whether the graph of any of `tensors` reaches a leaf that requires grad other than
    the inputs of the func transforms that have returned: something outside them (an outer
    transform's input, a tensor requiring grad outside every transform) differentiates
    through them. A walk of the graph, made when a transform returns."""
    roots = []
    for t in _with_physical(tensors):
        meta = getattr(t, "_meta", None)
        if meta is None or not meta.requires_grad:
            continue
        if t._grad_fn is None:
            if meta.is_leaf and meta not in DEAD_LEAVES:
                return True
            continue
        roots.append(t._grad_fn)
    return any(type(node) is AccumulateGrad and node.output_metas[0] not in DEAD_LEAVES
               for node in graph_nodes(roots))


def stripped(forward_levels, t):
    """The forward levels whose tangents t.detach_() drops: inside func transforms, torch's
    strips t's innermost transform alone (a grad's: no tangent goes), else every one."""
    inner = innermost(t) if TRANSFORMS else None
    if inner is None:
        return forward_levels
    if any(lv is inner for lv in forward_levels):
        return [inner]
    return [lv for lv in forward_levels if not any(lv is t for t in TRANSFORMS)]


class ReverseLevel:
    """One func.grad or vjp while its function runs: its depth in TRANSFORMS, whether an
    outer level (a transform or autograd itself) differentiates through its inputs, and the
    leaves it made of its inputs (`leaves`: metas)."""

    def __init__(self, keep):
        self.depth = len(TRANSFORMS)
        self.keep = keep
        self.leaves = []


_saved_hooks.TRANSFORMS, _saved_hooks.ReverseLevel = TRANSFORMS, ReverseLevel


class entered:
    """Push a transform's level onto TRANSFORMS for the block."""

    def __init__(self, level):
        self.level = level

    def __enter__(self):
        self.token = Token(self.level, TOKENS[-1] if TOKENS else None)
        TRANSFORMS.append(self.level)
        if LEGACY_SCOPE[0]:
            LEGACY.append(self.level)
        TOKENS.append(self.token)
        if len(TOKENS) == 1:  # Op.__call__ stamps its outputs from now on
            _interpreter.install(_interpreter.current)
        return self.level

    def __exit__(self, *exc):
        TRANSFORMS.remove(self.level)
        if any(lv is self.level for lv in LEGACY):
            LEGACY.remove(self.level)
        TOKENS.remove(self.token)
        for token in (self.token, *(self.token.twins or {}).values()):
            token.level = None
            DEAD_LEAVES.update(token.made or ())
        DEAD_LEAVES.update(getattr(self.level, "leaves", ()))
        if UNSEEN_WRITES:  # (the levels inside this one have run their backward)
            UNSEEN_WRITES[:] = [w for w in UNSEEN_WRITES if w[2] <= len(TRANSFORMS)]
        if not TRANSFORMS:
            NEUTRAL_WRITES.clear()
        if not TOKENS:
            _interpreter.install(_interpreter.current)


class _holding:
    """`slot[0]` holds `value` for the block, and what it held before after it."""

    def __init__(self, slot, value):
        self.slot, self.value = slot, value

    def __enter__(self):
        self.prev, self.slot[0] = self.slot[0], self.value

    def __exit__(self, *exc):
        self.slot[0] = self.prev


def legacy_scope(on):
    """The transforms entered in the block are LEGACY ones (`on`), or not (a user's function
    called from there)."""
    return _holding(LEGACY_SCOPE, on)


def stops_at(node, running):
    """Whether the backward of the transform `running` stops at `node` without following its
    edges: an alias kept for the levels outside it alone (`x.data`, `x.detach_()` inside a
    transform: inputs._DataOf), which at `running` has no history, as torch's wrapper
    there has none (so its producers are not visited, nor their saved tensors checked)."""
    stops = getattr(getattr(node.op, "fn", None), "stops_backward", None)
    return stops is not None and stops(node.attrs["ctx"], running)


def computing(level):
    """The block computes the gradients of `level` (its engine.grad call)."""
    return _holding(BACKWARD, level)


def eager_full(op, inputs, attrs):
    """The eager interpreter's apply, returning (outputs tuple, aux tuple): the aux arrays a
    kernel returns past its outputs (a dropout mask, a log-softmax) are what a rule reads."""
    interp = _interpreter.AutogradInterpreter
    state = grad_mode._state
    if state.enabled and op.backward is not None and _interpreter._needs_record(inputs):
        out = interp.apply(op, inputs, attrs)
        outs = out if type(out) is tuple else (out,)
        node = next((o._grad_fn for o in outs if o._grad_fn is not None), None)
        aux = node.aux if node is not None and node.aux else ()
        return outs, tuple(aux)
    Tensor = _interpreter.Tensor
    arrays = [t._data for t in inputs]
    xp = ARRAY_MODULES.get(type(arrays[0]), HOST_XP) if arrays else HOST_XP
    try:
        result = op.kernel(xp, *arrays, **attrs)
    except (ValueError, IndexError, TypeError) as error:
        raise kernel_error(op, inputs, error) from None
    single = op.n_out == 1 and type(result) is not tuple
    result = (result,) if type(result) is not tuple else result
    n_out = len(result) if op.n_out is None else op.n_out
    outs = tuple(Tensor._wrap(r) for r in result[:n_out])
    if op.is_view and inputs:
        for i, out in enumerate(outs):
            if out._data.size == 0 or np.may_share_memory(out._data, inputs[0]._data):
                mark_view(inputs[0], out, op, attrs, None if single or op.n_out == 1 else i)
    return outs, tuple(Tensor._wrap(r) for r in result[n_out:])


def apply_full(interp, op, inputs, attrs):
    """Run `op` with interpreter `interp`; return (outputs tuple, aux tuple)."""
    full = getattr(interp, "apply_full", None)
    if full is not None:
        return full(op, inputs, attrs)
    return eager_full(op, inputs, attrs)


def pack(op, outs):
    """What `Op.__call__` returns for these outputs: one tensor, or a tuple."""
    return outs[0] if op.n_out == 1 else tuple(outs)


class reverse_scope:
    """Reverse-mode AD is about to run inside the vmap levels entered so far (func.grad, a
    vjp, a jvp derived from a vjp): while it lasts they record autograd on their logical
    (per-example) tensors, so a backward run inside them is per-example too. `levels`: only
    those (the ones around the transform's forward, for its vjp_fn called later)."""

    def __init__(self, levels=None):
        self.levels = list(VMAP_STACK) if levels is None else [
            lv for lv in levels if lv in VMAP_STACK]

    def __enter__(self):
        for level in self.levels:
            level.logical += 1
        return self

    def __exit__(self, *exc):
        for level in self.levels:
            level.logical -= 1


def delegate(interp, hook, *args):
    """Call the hook (read, inplace, written, ...) of the interpreter below, if it has one."""
    fn = getattr(interp, hook, None)
    if fn is not None:
        return fn(*args)
    return None


_interpreter.alias_token = alias_token
