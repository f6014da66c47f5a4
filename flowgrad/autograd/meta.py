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


def carry_over(old, new):
    """A tensor's history replaced (an in-place write to it, its view or its base; a view
    regenerated after its base's write) keeps what belongs to the tensor, not to the history,
    as torch keeps it on the TensorImpl: retain_grad() and the `.grad` retained so far. The
    old history's node no longer retains: the gradient of the value before the write is not
    this tensor's."""
    if old is None or new is None or old is new or old.is_leaf:
        return
    if old.retain_grad:
        new.retain_grad, old.retain_grad = True, False
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
