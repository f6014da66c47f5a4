"""In-place writes with autograd: torch's checks, the write, the version bump, the rebase.

An in-place op (`x.add_(y)`, `x[i] = v`, `relu_`) computes its result out of place (on a
clone of the old value when autograd records it, as its rule may need that value), copies it
into the tensor's storage (views and `detach()` see it), bumps the shared `VersionCounter` and
rebases the tensor onto the op's node. Writing through a view rebases the view's root base
too, as torch's CopySlices does (the `view_scatter` op, bound here by `flowgrad.ops.shape`).

>>> import flowgrad as flow
>>> a = flow.ones(2, requires_grad=True)
>>> x = a * 1
>>> _ = x[:1].mul_(3)   # through a view: x, its base, is rebased too
>>> x.sum().backward(); a.grad
tensor([3., 1.])
"""
from __future__ import annotations

import weakref

import numpy as np

from .._warn import warn
from ..dtypes import can_cast_array
from . import grad_mode
from . import interpreter as _interpreter
from . import levels as _levels
from .inference import check_write
from .interpreter import STAMP, AutogradInterpreter
from .levels import TRANSFORM_INPUTS, refuse_captured_write
from .meta import (
    BEFORE_WRITE,
    VersionCounter,
    carry_over,
    carry_over_layout,
    counter_of,
    leave_leaf,
)
from .views import (
    moved_from_base,
    regenerate,
    replay_view,
    sync_view,
    view_error,
    writable_alias,
)

_state = grad_mode._state
view_scatter = None  # the op that writes a region into a base: bound by flowgrad.ops.shape


def bump_version(tensor):
    """Mark an in-place write to `tensor`: bump its version counter (created on first write)."""
    current = _interpreter.current
    if current is not AutogradInterpreter:
        hook = getattr(current, "inplace", None)  # a tracer refuses what it cannot record
        if hook is not None:
            hook(tensor)
    counter = tensor._counter
    if counter is None:
        counter = tensor._counter = VersionCounter()
    elif counter.__class__ is not VersionCounter:  # an inference tensor's
        check_write(tensor)
    counter.value += 1
    if STAMP:  # (inside func transforms: a write through an x.data alias)
        _levels.note_write(tensor)


def check_capture(name, target):
    """Inside func transforms, refuse an in-place write (op `name`) to a tensor captured from
    outside the innermost grad/vjp/jvp (`levels.refuse_captured_write`), before anything is
    written: every in-place op checks here first (`inplace_update`, `check_inplace`, and the
    writes that take neither path). Outside transforms: one test of an empty list."""
    if STAMP:
        refuse_captured_write(name, target)
    if BEFORE_WRITE:
        before_write(target)


def before_write(target):
    """Tell the BEFORE_WRITE functions that `target`'s memory is about to be written."""
    for hook in BEFORE_WRITE:
        hook(target)


def run_inplace(name, fn, target, *args, **kwargs):
    """`target.<name>(*args)`: compute `fn(target, *args)` out of place, then write the result
    into target's storage (views and detach() see it) and bump its version."""
    tensor_class = _interpreter.Tensor
    args_need_grad = False
    memory = memory_of(target)
    for a in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(a, tensor_class):
            args_need_grad = args_need_grad or a.requires_grad
            if name not in READS_VALUE_FIRST or a.ndim:
                _check_no_partial_overlap(name, memory, memory_of(a), target, a)
    return inplace_update(name, target, lambda src: fn(src, *args, **kwargs), args_need_grad)


def _aligned(other, operand, data, target):
    """The array `other` holding `operand`'s elements, with size-1 dims inserted after its
    vmap batch dims to line it up with `data`, target's (both batched alike: broadcasting
    aligns the per-example dims, not the physical ones)."""
    lead = data.ndim - target.ndim
    if not lead or other.ndim - operand.ndim != lead or other.ndim >= data.ndim:
        return other
    return other.reshape(other.shape[:lead] + (1,) * (data.ndim - other.ndim) +
                         other.shape[lead:])


def physical_of(t):
    """t's physical tensor where t is batched by vmap and autograd sees it through that
    tensor (they share a meta, or t has none: no reverse transform inside t's vmap level
    records on the per-example tensors); else None."""
    phys = getattr(t, "_phys", None)
    if phys is not None and (t._meta is None or t._meta is phys._meta):
        return phys
    return None


def memory_of(t):
    """The array holding t's elements: a vmap-batched tensor's examples (`_phys`), not its
    placeholder storage."""
    phys = getattr(t, "_phys", None)
    while phys is not None:  # (nested vmaps: the outermost level's physical array; the
        t, phys = phys, getattr(phys, "_phys", None)  # inner ones' are placeholders)
    return t._data


def write_into(dst, src):
    """dst's elements become src's (same shape), in place, under the current interpreter:
    by a recorded copy_ when either requires grad or an interpreter is current (an outer
    forward level then updates dst's tangent: a nested jvp's tangent written), else by a raw
    write that also reaches an expand's elements (read-only, or sharing memory). True when
    written; False, with nothing written, where dst cannot take it (a leaf that requires
    grad, a batched src where dst is not, a device array)."""
    data, values = memory_of(dst), memory_of(src)
    if tuple(dst.shape) != tuple(src.shape) or type(data) is not np.ndarray or \
            values.ndim > data.ndim:
        return False
    try:
        if dst.requires_grad or src.requires_grad or \
                _interpreter.current is not AutogradInterpreter and not self_overlapping(data):
            # (under an interpreter: so an outer forward level's tangents follow; the write
            # mirrors one already checked, so it refuses no capture)
            with _levels.writing_out():
                dst.copy_(src)
        else:
            assign(data, values, "fill_")  # (overlap allowed)
            bump_version(dst)
    except (RuntimeError, ValueError):
        return False
    return True


def same_elements(a, b, strict=False):
    """Whether arrays a and b are views of the very same elements in the same order: same
    shape, same first element, same strides (a size-1 dim's stride is moot, unless `strict`:
    torch's overlap checks and copy_'s early return compare every stride)."""
    return (a.shape == b.shape
            and (a.strides == b.strides if strict else
                 all(n < 2 or s == t for n, s, t in zip(a.shape, a.strides, b.strides)))
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def shares_elements(a, b):
    """Whether arrays a and b have an element in common: their bounds overlap and so do their
    elements (interleaved columns of one matrix do not), decided within a bounded effort
    (undecided counts as shared, the safe answer for a refusal)."""
    if not np.may_share_memory(a, b):
        return False
    try:
        return np.shares_memory(a, b, max_work=10_000)
    except np.exceptions.TooHardError:
        return True


def _check_no_partial_overlap(name, data, other, target, operand):
    """torch refuses an in-place op whose operand shares some, but not all, of the written
    memory (`x[1:].add_(x[:-1])`): the result would depend on the order of the writes.
    `data` and `other` hold the elements of `target` and `operand` (`memory_of`)."""
    if other is data or not shares_elements(other, data):
        return
    if same_elements(other, data, strict=True):
        return  # `x.add_(x[:])` is fine: each element is read where it is written
    batched = data.ndim > target.ndim
    aligned = _aligned(other, operand, data, target)
    if not self_overlapping(data) and _same_elements_broadcast(aligned, data) and (
            batched or not (dense(other) and dense(data))):
        # the very elements in another shape (t.mul_(t[0]) of a 1 x n t): torch leaves strided
        # ones to its loop (no order matters here) and calls dense ones, whose strides differ,
        # a partial overlap; under vmap, its batching rule computes. (An expand written is
        # refused either way.)
        return
    if name in ELEMENTWISE_WRITES and (batched or not (dense(other) and dense(data))) \
            and not self_overlapping(data) and _shared_in_place(aligned, data):
        # torch leaves a strided pair to its loop (and vmap to its batching rule); an element
        # shared at one position alone (t[1].add_(t.t()[1]) shares t[1, 1]) is read where it
        # is written, so no loop order matters: the out-of-place result is torch's
        return
    if self_overlapping(data) or dense(other) and dense(data):  # (torch refuses these)
        raise overlap_error(name, other.shape, data.shape)
    raise NotImplementedError(  # (torch's "too hard": it runs, in its loop's order)
        f"{name}: the operand (shape {tuple(other.shape)}) shares elements with the tensor "
        f"written (shape {tuple(data.shape)}), both strided: torch runs this, but its values "
        f"then depend on the order of its writes; clone() the operand first")


def check_no_overlap(name, target, operands):
    """torch's assert_no_overlap for the index and scatter writes (index_add_, scatter_, ...):
    an operand sharing memory with `target`, the very same elements included, is refused
    where torch can tell (both dense: `overlap_status`); where it cannot ("too hard"), both
    run, torch's loop reading and this kernel computing out of place."""
    memory = memory_of(target)
    for operand in operands:
        if isinstance(operand, _interpreter.Tensor) and \
                overlap_status(memory_of(operand), memory) in ("partial", "full"):
            raise overlap_error(name, operand.shape, target.shape)


def overlap_error(name, operand_shape, target_shape):
    """The RuntimeError for a write (op `name`) whose operand shares part of the memory it
    writes, as torch's assert_no_partial_overlap words it."""
    return RuntimeError(
        f"{name}: unsupported operation: some elements of the input tensor (shape "
        f"{tuple(operand_shape)}) and the written-to tensor (shape {tuple(target_shape)}) "
        f"refer to a single memory location; clone() the input before the operation")


# in-place ops whose result torch does not differentiate: they run on a leaf that requires
# grad (and a view of one), which keeps its history (none: it stays a leaf)
NOT_DIFFERENTIABLE_WRITES = frozenset(("logical_not_", "logical_and_", "logical_or_",
                                       "logical_xor_"))

# in-place ops that read a 0-d value tensor once, as a number, before writing (torch: .item())
READS_VALUE_FIRST = frozenset(("fill_", "masked_fill_", "index_fill_"))

# in-place ops whose result at a position reads their operands at that position alone
ELEMENTWISE_WRITES = frozenset((
    "add_", "sub_", "mul_", "div_", "true_divide_", "copy_", "pow_", "float_power_",
    "clamp_", "clamp_min_", "clamp_max_", "atan2_", "hypot_", "fmod_", "remainder_", "lerp_",
    "addcmul_", "addcdiv_", "copysign_", "xlogy_", "floor_divide_", "logical_and_",
    "logical_or_", "logical_xor_", "bitwise_and_", "bitwise_or_", "bitwise_xor_"))


def _shared_in_place(other, data, limit=1 << 22):
    """Whether every memory location `other` (broadcast to data's shape) shares with `data`
    sits at the same position in both (elements of one itemsize, whole ones)."""
    if other.itemsize != data.itemsize or data.size > limit:
        return False
    try:
        other = np.broadcast_to(other, data.shape)
    except ValueError:
        return False
    ours, theirs = addresses(data), addresses(other)
    if ((theirs - ours.flat[0]) % data.itemsize).any():
        return False  # (a location straddling two of data's elements)
    shared = np.isin(theirs, ours)
    return bool(np.array_equal(theirs[shared], ours[shared]))


def addresses(a):
    """The byte address of each element of the array a, in a's shape."""
    address = np.full(a.shape, a.__array_interface__["data"][0], np.int64)
    for dim, (n, stride) in enumerate(zip(a.shape, a.strides)):
        address += (np.arange(n, dtype=np.int64) * stride).reshape(
            (1,) * dim + (n,) + (1,) * (a.ndim - dim - 1))
    return address


def _same_elements_broadcast(other, data):
    """Whether `other`, broadcast to data's shape, is data's very elements."""
    try:
        return same_elements(np.broadcast_to(other, data.shape), data)
    except ValueError:
        return False


def dense(a):
    """torch's non-overlapping-and-dense: the elements fill one block, in some dim order."""
    step = a.itemsize
    for stride, n in sorted((s, n) for n, s in zip(a.shape, a.strides) if n > 1):
        if stride != step:
            return False
        step *= n
    return True


def overlap_status(a, b):
    """torch's get_overlap_status of arrays a and b: "no", "full" (the very elements in the
    same order), "partial", or "too hard" (either is not dense, and torch's checks let it be)."""
    if a.size == 0 or b.size == 0 or not np.may_share_memory(a, b):
        return "no"
    if not (dense(a) and dense(b)):
        return "too hard"
    return "full" if same_elements(a, b, strict=True) else "partial"


def leave_moved_base(name, view):
    """When `view`'s base no longer holds view's memory (`set_` or `.data =` gave the base other
    memory; a view keeps the old one, as torch's), make the view its own base before a
    recorded write: through the base, the write reached the base's new elements (a wrong
    value, and a gradient from them). Refused while the base requires grad (torch records
    the write into the base's graph at the view's old offsets, where other elements now are)."""
    if not moved_from_base(view):
        return
    base = view._view.base
    if base.requires_grad:
        raise RuntimeError(
            f"{name}: an in-place write with autograd through a view whose base was given "
            f"other memory after the view was made (set_ or .data =; base shape "
            f"{tuple(base.shape)}, view shape {tuple(view.shape)}), while the base requires "
            f"grad; write a .clone() of the view, or make the view again from the base")
    view._view = None


def inplace_update(name, target, compute, args_need_grad=False):
    """Replace target's values by `compute(target)`, in place, with autograd.

    When recording, `compute` runs on a clone of the pre-op value (the write destroys it, and
    rules may need it) and target is rebased onto the op's node: new grad_fn, fresh meta.
    When target is a view, its root base is rebased too, as torch's CopySlices does: the
    base's new value is its old value with the view's region replaced.
    """
    if STAMP:  # (check_capture, inline)
        refuse_captured_write(name, target)
    if BEFORE_WRITE:
        before_write(target)
    view = target._view
    recording = False
    if _state.enabled:
        if view is not None and view.version != target._counter.value:
            sync_view(target)
        meta = target._meta
        base = view.base if view is not None else None
        base_needs = base is not None and base.requires_grad
        recording = (meta is not None and meta.requires_grad) or base_needs or args_need_grad
        if recording and name in NOT_DIFFERENTIABLE_WRITES:
            recording = False  # (a leaf that requires grad stays one, as torch's)
        if recording and view is not None:
            leave_moved_base(name, target)
            view = target._view
        if recording:
            _check_inplace_allowed(name, target, view, meta, base_needs)
        _check_physical(name, target)
    if not recording and (view is None or _interpreter.current is AutogradInterpreter):
        return write_inplace(target, compute(target), name)
    if view is None:  # (a tracer records a write through a view as view_scatter on the base)
        return write_inplace(target, compute(target.clone()), name)
    return _inplace_through_view(name, target, compute, recording)


def check_inplace(name, target):
    """Raise where a recorded in-place write to `target` would be refused (a leaf, or a view of
    one, that requires grad), before a write that may select no element at all: torch checks
    the target, not what is written."""
    if STAMP:  # (check_capture, inline)
        refuse_captured_write(name, target)
    if BEFORE_WRITE:
        before_write(target)
    if not _state.enabled:
        return
    _check_requiring_grad(name, target)
    _check_physical(name, target)


def _check_requiring_grad(name, target):
    view, meta = target._view, target._meta
    base_needs = view is not None and view.base.requires_grad
    if (meta is not None and meta.requires_grad) or base_needs:
        _check_inplace_allowed(name, target, view, meta, base_needs)


def _without_history(t):
    """Whether t has no history (a leaf, where it requires grad): for a tensor batched by
    vmap that autograd sees through its physical tensor, that tensor's (the batch of a
    vmap input computed outside is no leaf: a func.jvp input's view of it takes writes)."""
    while t._grad_fn is None:
        t = physical_of(t)
        if t is None:
            return True
    return False


def _check_physical(name, target):
    """A tensor autograd sees through its physical tensor is checked as that tensor too, as
    torch's vmap: a write into a vmapped leaf that requires grad is refused (before, it went
    to a copy of its examples)."""
    phys = physical_of(target)
    while phys is not None:
        _check_requiring_grad(name, phys)
        phys = physical_of(phys)


# the metas of aliases `x.data` of views x of those, which torch's functorch treats as views
# of leaves
TRANSFORM_INPUT_VIEWS = weakref.WeakSet()


# the metas of a custom Function's outputs that are inputs returned as-is, as torch's views
# made in a custom Function -> (output index, node name)
CUSTOM_FUNCTION_VIEWS = weakref.WeakKeyDictionary()


def _check_inplace_allowed(name, target, view, meta, base_needs):
    """torch's check_inplace: refuse recorded writes that autograd cannot rebase."""
    own = meta is not None and meta.requires_grad
    if CUSTOM_FUNCTION_VIEWS:
        # (a tensor without a meta has no history, so no Function made it; and a weak
        # dictionary cannot look up None)
        written = meta if view is None else view.base._meta
        made = None if written is None else CUSTOM_FUNCTION_VIEWS.get(written)
        if made is not None:
            raise custom_function_view_error(name, target, *made)
    if view is not None and view.creation:
        raise view_error(target, view.creation, "is being modified inplace")
    if (view is not None and (own or base_needs) and (
            _without_history(view.base) or view.base._meta in TRANSFORM_INPUTS
            or view.base._meta in TRANSFORM_INPUT_VIEWS)) or (
            view is None and own and meta in TRANSFORM_INPUT_VIEWS):
        base = target if view is None else view.base  # (an alias x.data of such a view)
        raise RuntimeError(
            f"{name}: a view of a leaf tensor that requires grad (base shape "
            f"{tuple(base.shape)}, view shape {tuple(target.shape)}) is being used in an "
            f"in-place operation; wrap it in `with flowgrad.no_grad():` or clone() first")
    if view is None and own and (target._grad_fn is None or meta in TRANSFORM_INPUTS):
        raise RuntimeError(
            f"{name}: a leaf tensor that requires grad (shape {tuple(target.shape)}) "
            f"is being used in an in-place operation; wrap it in "
            f"`with flowgrad.no_grad():` or use the out-of-place op")


# writes through an expanded view that torch records (its backward raises): each writes
# constants only, so the order of the aliases' writes does not matter
_ZEROS_ONLY = frozenset(("fill_", "zero_", "tril_", "triu_"))


def _inplace_through_view(name, target, compute, recording=True):
    info = target._view
    base, chain = info.base, info.chain
    base_old = base.clone()
    replayed = replay_view(base_old, chain)
    _tell(_interpreter.current, "replayed", target, replayed)
    region = compute(replayed)
    _check_writable(target, region._data, name)
    overlapping = self_overlapping(memory_of(target))
    if recording and name not in _ZEROS_ONLY and overlapping:
        raise RuntimeError(
            f"{name}: an in-place write with autograd through an expanded view whose elements "
            f"share memory (shape {tuple(target.shape)}) is not supported: its gradient "
            f"would count the shared elements more than once. clone() the view first, or "
            f"write the base")
    # fill_/zero_/tril_/triu_ write such a view as torch does; the backward through the
    # write raises, as torch's CopySlices (it would write the gradient into shared elements)
    extra = {"overlapping": True} if overlapping else {}
    _tell(_interpreter.current, "writing", target, region)  # (before anything is written)
    new_base = view_scatter(base_old, region.to(target.dtype), chain=chain, **extra)
    assign(target._data, region._data, name)  # shared storage: base sees it too
    bump_version(target)
    _adopt_saved_outputs(region, target)
    rebased = regenerate(new_base, target)
    if recording:  # (an interpreter's unrecorded write, under no_grad say, keeps the metas
        _take_history(base, new_base)  # and leaves the view stale, as eager's and torch's:
        _take_history(target, rebased)  # its next read regenerates it from the base)
        info.version = target._counter.value
    current = _interpreter.current
    if current is not AutogradInterpreter:
        written_view = getattr(current, "written_view", None)
        if written_view is not None:  # (forward AD: the base's tangent and the view's at once)
            written_view(base, new_base, target, rebased)
        else:
            _tell(current, "written", base, new_base)
            _tell(current, "written", target, rebased)
    if STAMP and _levels.DATA_ALIASES:  # (x.data aliases inside transforms)
        _levels.written(base, recording)
    return target


def rebase(target, compute):
    """target (and its root base, when target is a view) take the history of
    `compute(target)` (recorded, target's values already in its storage: a write through an
    alias of it), without a write or a version bump."""
    view = target._view
    if view is None:
        _take_history(target, compute(target))
        return
    if view.version != target._counter.value:
        sync_view(target)
    base, chain = view.base, view.chain
    base_old = base.clone()
    extra = {"overlapping": True} if self_overlapping(memory_of(target)) else {}
    new_base = view_scatter(base_old, compute(replay_view(base_old, chain)), chain=chain,
                            **extra)
    _take_history(base, new_base)
    _take_history(target, regenerate(new_base, target))


def change_layout(name, target, view_of):
    """target becomes `view_of(target)` in place (t_, squeeze_, unsqueeze_, transpose_, ...):
    its array is the view's (the same storage), its version moves on, and under grad mode a
    target that requires grad takes the view op's history, as torch's: a view's chain gains
    the op, and a result's history runs through the op to its old one. Views made before a
    non-view's change find their elements by their place in the storage (`sync_view`).
    Refused under grad mode: a leaf that requires grad, or a view of one (torch's error).
    Under no_grad nothing is recorded, as torch's: a leaf stays a leaf of the new shape (its
    gradient takes that shape), and a graph recorded before hands its gradient to the new
    layout as the engine's shape check allows (torch's too)."""
    if target.requires_grad and getattr(target, "_phys", None) is not None:
        raise NotImplementedError(
            f"{name}: changing the shape in place of a tensor that requires grad inside vmap "
            f"(per-example shape {tuple(target.shape)}) is not supported; use the "
            f"out-of-place form, x = x.{name[:-1]}(...)")
    recording = target.requires_grad and _state.enabled
    if recording:
        _check_requiring_grad(name, target)  # (a leaf, or a view of one: refused)
    _tell(_interpreter.current, "relayout", name, target)  # (a tracer refuses some)
    source = target
    if recording and target._view is None:  # an alias that carries target's old history
        source = _interpreter.Tensor._wrap(target._data)
        source._meta, source._grad_fn = target._meta, target._grad_fn
        source._counter = counter_of(target)
    result = view_of(source)
    bump_version(target)
    target._data = result._data
    if target._view is not None:  # the chain gains the op; the view was made as it was
        result._view.creation = target._view.creation
        target._view = result._view
    else:  # (views made before describe the old layout: `views.sync_view` relocates them)
        target._layout_epoch = target._counter.value
    if recording:
        _take_history(target, result, layout=True)
        if target._view is not None:
            target._view.version = target._counter.value
    tell_written(target, result)  # (a tracer: target now holds result's value)
    return target


def _take_history(target, result, layout=False):
    """target (written in place) takes result's history: its grad_fn and a fresh meta, which
    keeps what belongs to the tensor (`carry_over`; `layout`: an in-place view op changed
    target's layout, `carry_over_layout`)."""
    old = target._meta
    leave_leaf(old)
    if layout:
        carry_over_layout(old, result._meta, target)
    else:
        carry_over(old, result._meta)
    target._meta, target._grad_fn = result._meta, result._grad_fn


def tell_written(target, result):
    """The current interpreter learns that an in-place write left `result` in `target`: a
    tracer (nn.Graph) which recorded value, a forward-AD level which tangent."""
    _tell(_interpreter.current, "written", target, result)


def _tell(current, hook, *args):
    """Call the current interpreter's `hook` (written, replayed), if it is not eager's and
    has one."""
    if current is not AutogradInterpreter:
        fn = getattr(current, hook, None)
        if fn is not None:
            fn(*args)


def _adopt_saved_outputs(result, target):
    """An op that saved its output (relu_, exp_, ...) and whose result was then written into
    target: the saved output now lives in target's storage, so a later write to target is
    caught in backward, as in torch."""
    node = result._grad_fn
    if node is None or not node._outputs:
        return
    for saved in node._outputs:
        saved.adopt(result, target)


# in-place ops that torch lets write through an expanded (self-overlapping) view; setitem
# checks the region it writes itself; tril_/triu_ only write zeros (torch's kernel leaves
# the kept triangle alone), so where aliases disagree the zero wins, whatever the order
_OVERLAP_OK = frozenset((
    "fill_", "zero_", "masked_fill_", "index_fill_", "setitem", "index_put_", "tril_",
    "triu_"))


def self_overlapping(data):
    """Whether some elements of `data` share one memory location (a stride-0 dim)."""
    return data.size > 1 and any(st == 0 and n > 1 for st, n in zip(data.strides, data.shape))


def expanded_view(t):
    """Whether t is a view some of whose elements share one memory location (an expand,
    or vmap's examples of one)."""
    return t._view is not None and self_overlapping(memory_of(t))


def writable(data, name):
    """`data` itself, or a writable alias of a read-only view from expand: NumPy marks every
    broadcast read-only, torch refuses only writes where elements overlap (`name` being
    one of fill_/zero_/masked_fill_ may write even those)."""
    if data.flags.writeable:
        return data
    if name not in _OVERLAP_OK and self_overlapping(data):
        raise expand_write_error(name, data.shape)
    return writable_alias(data)


def custom_function_view_error(name, target, index, node_name):
    return RuntimeError(
        f"{name}: output {index} of {node_name} (shape {tuple(target.shape)}) is a view and "
        f"is being modified inplace. This view was created inside a custom Function (or "
        f"because an input was returned as-is) and the autograd logic to handle view+inplace "
        f"would override the custom backward associated with the custom Function, leading to "
        f"incorrect gradients. This behavior is forbidden. You can fix this by cloning the "
        f"output of the custom Function.")


def expand_write_error(name, shape, fix="call .clone() before the in-place operation"):
    """torch's refusal of an in-place write `name` into a tensor (of `shape`) some of whose
    elements share one memory location."""
    return RuntimeError(
        f"{name}: unsupported operation: more than one element of the written-to tensor "
        f"(shape {tuple(shape)}) refers to a single memory location (an expanded view); {fix}")


def warn_expanded_write(data, name, example):
    """torch's warning for masked_fill_ and index_put_ into an expanded (self-overlapping)
    view: the elements the mask or indices select share memory with others, which are
    written too."""
    if not data.flags.writeable and self_overlapping(data):
        warn(f"Use of {name} on expanded tensors is deprecated. Please clone() the "
             f"tensor before performing this operation. This also applies to "
             f"advanced indexing e.g. {example}", UserWarning)


def assign(dst, values, name):
    """dst[...] = values, for an in-place op `name`. Where dst is an expand whose elements
    share memory, only the changed elements are written: copying back an unchanged alias
    would undo the write to another (a masked_fill_ or setitem of one aliased element)."""
    dst = writable(dst, name)
    if dst.flags.writeable and not self_overlapping(dst):
        dst[...] = values
        return
    changed = values != dst
    if dst.dtype.kind in "fcV":  # (a nan kept is unchanged: rewriting it could undo a write)
        changed &= ~(np.isnan(values) & np.isnan(dst))
    dst[changed] = np.broadcast_to(values, dst.shape)[changed]


def _check_writable(target, data, name):
    if data.dtype != target._data.dtype and not can_cast_array(data.dtype, target._data.dtype):
        raise RuntimeError(
            f"{name}: result type {data.dtype} can't be cast to the desired output type "
            f"{target._data.dtype}; use the out-of-place op, or convert the tensor first")
    if data.shape != target._data.shape:
        raise RuntimeError(
            f"{name}: output with shape {tuple(target._data.shape)} doesn't match the "
            f"broadcast shape {tuple(data.shape)}; in-place ops cannot change a tensor's shape")
    writable(target._data, name)  # raises for a write torch refuses
    memory = memory_of(target)
    if memory is not target._data and name not in _OVERLAP_OK:
        # under vmap: an example's elements sharing memory (a batched expand), as torch's
        # batching rule refuses (its in-place op runs on the physical tensor)
        example = memory[(0,) * (memory.ndim - target.ndim)]
        if self_overlapping(example):
            raise expand_write_error(name, target.shape)


def write_inplace(target, result, name):
    """Copy `result` into `target`'s storage; if result was recorded, rebase target on it."""
    data = result._data
    _check_writable(target, data, name)
    current = _interpreter.current
    if current is not AutogradInterpreter:  # (vmap refuses a batched result into an
        if data.dtype != target._data.dtype:  # (the storage keeps its dtype: a tracer's plan
            result = result.to(target.dtype)  # holds the cast the write makes, x.mul_(f64))
            data = result._data
        _tell(current, "writing", target, result)  # unbatched tensor: before the write)
    if data is not target._data:
        assign(target._data, data, name)
    bump_version(target)
    if result._grad_fn is not None:
        _take_history(target, result)
        _adopt_saved_outputs(result, target)
        if target._view is not None:
            target._view.version = target._counter.value
    tell_written(target, result)
    if STAMP and _levels.DATA_ALIASES:  # (x.data aliases inside transforms)
        _levels.written(target if target._view is None else target._view.base,
                        result._grad_fn is not None)
    return target
