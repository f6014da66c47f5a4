"""AutogradMeta: the autograd half of a tensor, as in the seed's TensorImpl.

A tensor that does not require grad carries no AutogradMeta at all (`tensor._meta is None`).
During one backward run `current_grad` sums the gradients arriving at this tensor; `acc_grad`
is what `tensor.grad` reads and what leaves accumulate into.
"""
from __future__ import annotations

import weakref

AccumulateGrad = None  # the node class, bound by node.py (which builds on this module)

# the metas of leaves nothing outside the func transforms differentiates through (read by
# levels.reaches_live_leaf): the inputs func.grad/vjp made leaves, once their level has
# returned, and a view's stand-in base (views.sync_view)
DEAD_LEAVES = weakref.WeakSet()
# functions called with the target of every in-place write, before anything is written
# (`saved_hooks.allow_mutation_on_saved_tensors`); empty otherwise: one test per write
BEFORE_WRITE: list = []


class AutogradMeta:
    """Per-tensor autograd state. Holds no reference to the tensor, nor to its grad_fn,
    so graphs free by reference counting without cycles."""

    __slots__ = ("requires_grad", "is_leaf", "retain_grad", "acc_grad", "current_grad",
                 "hooks", "post_accumulate_hooks", "_accumulator", "__weakref__")

    def __init__(self, requires_grad: bool = False, is_leaf: bool = True):
        self.requires_grad = requires_grad
        self.is_leaf = is_leaf
        self.retain_grad = False
        self.acc_grad = None       # the Tensor `.grad` reads
        self.current_grad = None   # TensorArg of the seed: sum of partial grads in one run
        self.hooks = None          # list of callables grad -> grad | None
        self.post_accumulate_hooks = None
        self._accumulator = None   # weakref to this leaf's AccumulateGrad node

    def grad_accumulator(self, tensor):
        """The accumulate_grad node of the leaf `tensor` (whose meta this is), created on
        first use and shared while alive."""
        node = self._accumulator() if self._accumulator is not None else None
        if node is None:
            node = AccumulateGrad(self, tensor)
            self._accumulator = weakref.ref(node)
        return node


class _RetainedElsewhere:
    """The `retain_grad` of a tensor's meta after an in-place view op (t_, unsqueeze_,
    as_strided_, ...) changed the layout of a tensor that retains its grad: the tensor still
    retains (`retains_grad`, and retain_grad() returns at once), but its `.grad` is the
    gradient of its value before the change, which the older meta retains
    (`RetainedFor`), as torch leaves its retains_grad hook on the old grad_fn. Falsy: the
    engine does not retain at this meta."""

    __slots__ = ()

    def __bool__(self):
        return False

    def __repr__(self):
        return "RETAINED_ELSEWHERE"


RETAINED_ELSEWHERE = _RetainedElsewhere()


class RetainedFor:
    """The `retain_grad` of a meta whose gradient is the `.grad` of a tensor (held weakly)
    that has a newer meta since an in-place layout change: the engine accumulates into
    that tensor's meta, which `.grad` reads (`retained_into`)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = weakref.ref(tensor)


class HooksElsewhere:
    """The `hooks` of a tensor's meta after an in-place view op (t_, unsqueeze_, ...) changed
    the layout of a tensor that had hooks: torch's tensor keeps its one dict of hooks,
    registered on the old grad_fn, so a hook registered later runs there, on the gradient of
    the value before the change (`Tensor.register_hook` appends to `hooks`). Falsy: none
    run at this meta."""

    __slots__ = ("hooks",)

    def __init__(self, hooks):
        self.hooks = hooks

    def __bool__(self):
        return False


def retained_into(meta):
    """The meta whose `.grad` takes the gradient of `meta`, which retains: meta itself, or
    the current meta of the tensor it retains for (None when that tensor is gone)."""
    retain = meta.retain_grad
    if retain is True:
        return meta
    tensor = retain.tensor()
    return None if tensor is None else tensor._meta


def carry_over(old, new):
    """A tensor's history replaced (an in-place write to it, its view or its base; a view
    regenerated after its base's write) keeps what belongs to the tensor, not to the history,
    as torch keeps it on the TensorImpl: retain_grad() and the `.grad` retained so far. The
    old history's node no longer retains: the gradient of the value before the write is not
    this tensor's. A leaf keeps its `.grad` (one set by hand on a tensor that then got a
    history from an in-place write: torch's stays on the TensorImpl)."""
    if old is None or new is None or old is new:
        return
    if old.is_leaf:
        if new.acc_grad is None:
            new.acc_grad, old.acc_grad = old.acc_grad, None
        return
    if old.retain_grad is RETAINED_ELSEWHERE:
        raise RuntimeError(
            "an in-place write to a tensor that retains its grad (retain_grad()) after an "
            "in-place view op (t_, squeeze_, unsqueeze_, transpose_, as_strided_, ...) "
            "changed its layout is not supported (torch's autograd fails an internal assert "
            "here); change the layout out of place (h = h.t()) or write a clone()")
    if old.retain_grad:
        new.retain_grad, old.retain_grad = True, False
    if new.acc_grad is None:
        new.acc_grad, old.acc_grad = old.acc_grad, None


def carry_over_layout(old, new, tensor):
    """carry_over for an in-place view op that changed `tensor`'s layout (t_, unsqueeze_,
    as_strided_, ...): the `.grad` retained so far moves to the new meta, but the retaining
    stays with the old history, as torch's (its retains_grad hook stays on the old
    grad_fn): `.grad` is then the gradient of the value before the change, in its shape."""
    if old is None or new is None or old is new or old.is_leaf:
        carry_over(old, new)  # (a leaf: its .grad alone)
        return
    retain = old.retain_grad
    if retain is True:
        old.retain_grad, new.retain_grad = RetainedFor(tensor), RETAINED_ELSEWHERE
    elif retain is RETAINED_ELSEWHERE:  # (a second change: the first history still retains)
        old.retain_grad, new.retain_grad = False, RETAINED_ELSEWHERE
    hooks = old.hooks
    if hooks is not None:
        new.hooks = hooks if type(hooks) is HooksElsewhere else HooksElsewhere(hooks)
    if new.acc_grad is None:
        new.acc_grad, old.acc_grad = old.acc_grad, None


def leave_leaf(meta):
    """A leaf's meta replaced by a history (an in-place write to it, its base or a view of its
    base): a graph recorded earlier that accumulates into it raises in backward, as torch's
    AccumulateGrad does for a leaf that has a grad_fn since."""
    if meta is not None and meta.is_leaf and meta._accumulator is not None:
        meta.is_leaf = False


def writes_unseen(counter, version):
    """Whether every write to `counter` since `version` is one the running backward does not
    see (bound by `levels`: a write through `x.data` inside a func transform, which the
    levels at and inside the one it strips do not see)."""
    return False


def writes_neutral(counter, version):
    """Whether every write to `counter` since `version` left the history of the tensors
    counted as it was (bound by `levels`: unrecorded writes through `x.data` inside a func
    transform), so that their views need no replay."""
    return False


class VersionCounter:
    """Counts in-place writes to one storage; shared by a tensor, its views and detach()."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


def counter_of(t):
    """t's version counter, made now if t has none yet (a tensor gets one on its first write
    or share): what a tensor sharing t's storage takes as its own.

    >>> from flowgrad.autograd.meta import counter_of
    >>> import flowgrad as flow
    >>> x = flow.ones(2)
    >>> counter_of(x) is counter_of(x.detach()) is x._counter
    True
    """
    counter = t._counter
    if counter is None:
        counter = t._counter = VersionCounter()
    return counter


def input_meta(t, refusal):
    """The meta whose gradient an input of grad/backward(inputs=) reads. A view made under
    no_grad of a tensor requiring grad requires grad (torch's rule) but is a leaf nothing
    reaches: a meta of its own, which no run fills (torch's: no gradient for it)."""
    m = t._meta
    if m is None or not m.requires_grad:
        if not t.requires_grad:
            raise RuntimeError(refusal)
        return AutogradMeta(True)
    return m
