"""`flowgrad.autograd.graph`: torch.autograd.graph's names for inspecting and hooking the
backward graph.

- `Node`: the base class of every backward node (`grad_fn`), with `name()`,
  `next_functions`, `metadata`, `register_hook`, `register_prehook`
- `GradientEdge`, `get_gradient_edge`, `increment_version`, `register_multi_grad_hook`
- saved-tensor hooks: `saved_tensors_hooks`, `save_on_cpu`, `disable_saved_tensors_hooks`,
  `allow_mutation_on_saved_tensors`

>>> import flowgrad as flow
>>> x = flow.ones(2, requires_grad=True)
>>> y = (x * 2).sum()
>>> isinstance(y.grad_fn, flow.autograd.graph.Node), y.grad_fn.name()
(True, 'SumBackward0')
>>> flow.autograd.graph.get_gradient_edge(x).node.name()
'torch::autograd::AccumulateGrad'
"""
from __future__ import annotations

import threading
import weakref
from typing import NamedTuple

from ..hook_handles import MultiHandle, RemovableHandle  # noqa: F401 - torch.autograd.graph names
from .meta import counter_of
from .saved_hooks import (
    allow_mutation_on_saved_tensors,
    disable_saved_tensors_hooks,
    save_on_cpu,
    saved_tensors_hooks,
)

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "increment_version",
           "register_multi_grad_hook", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks", "allow_mutation_on_saved_tensors"]

_METADATA: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# The backward runs in progress, innermost last (the engine keeps it; current_graph_task_id
# and will_engine_execute_node read it); a run stays listed until its entry point returns.
_TASKS: list = []
# Node.register_hook/register_prehook: node_hooks.register, bound there (it builds on Node)
_register_node_hook = None
_named = None  # torch_nodes.named, bound there: the node as torch names it


def node_metadata(node) -> dict:
    """The dict `node.metadata` returns; kept beside the node, not in it, so nodes stay
    slots-only and pay nothing when no one asks."""
    meta = _METADATA.get(node)
    if meta is None:
        meta = _METADATA[node] = {}
    return meta


class Node:
    """Base class of backward-graph nodes (FunctionNode, AccumulateGrad derive from it).

    >>> import flowgrad as flow
    >>> x = flow.ones(2, requires_grad=True)
    >>> y = x.exp()
    >>> y.grad_fn.next_functions[0][0].name()
    'torch::autograd::AccumulateGrad'
    >>> y.grad_fn.metadata["note"] = "mine"; y.grad_fn.metadata
    {'note': 'mine'}
    """

    __slots__ = ()
    accumulates = False  # (a leaf's accumulate_grad node: node.AccumulateGrad)

    @property
    def metadata(self) -> dict:
        """A dict for the user's notes on this node (anomaly mode keeps 'traceback_')."""
        return node_metadata(self)

    def register_hook(self, fn):
        """Call `fn(grad_inputs, grad_outputs)` after this node computed its gradients;
        a tuple returned replaces grad_inputs. Returns a handle with `remove()`.

        >>> import flowgrad as flow
        >>> x = flow.ones(2, requires_grad=True)
        >>> y = (x * 3).sum()
        >>> h = y.grad_fn.register_hook(lambda gi, go: print(gi[0].shape, go[0].shape))
        >>> y.backward()
        flowgrad.Size([2]) flowgrad.Size([])
        """
        return _register_node_hook(self, fn, pre=False)

    def register_prehook(self, fn):
        """Call `fn(grad_outputs)` before this node runs; a tuple returned replaces them."""
        return _register_node_hook(self, fn, pre=True)


class GradientEdge(NamedTuple):
    """An edge of the backward graph: the node a gradient flows into, and which output of
    that node it is the gradient of."""

    node: Node
    output_nr: int


def get_gradient_edge(tensor) -> GradientEdge:
    """The edge a gradient for `tensor` flows into: its grad_fn (or its accumulate node).

    >>> import flowgrad as flow
    >>> x = flow.ones(2, requires_grad=True)
    >>> a, b = (x * 2).split(1)
    >>> e = flow.autograd.graph.get_gradient_edge(b); e.node.name(), e.output_nr
    ('SplitBackward0', 1)
    """
    node = _recorded(tensor)
    if node is None:
        if not tensor.requires_grad:
            raise RuntimeError(f"get_gradient_edge: the tensor (shape {tuple(tensor.shape)}) "
                               f"does not require grad, so it has no gradient edge")
        return GradientEdge(tensor._meta.grad_accumulator(tensor), 0)
    meta = tensor._meta
    index = next((i for i, m in enumerate(node.output_metas) if m is meta), 0)
    return GradientEdge(_named(node), index)


def increment_version(tensor):
    """Bump the version counter of `tensor` (or of each tensor in a list), as an in-place
    write does: backward then refuses saved copies of it taken earlier.

    >>> import flowgrad as flow
    >>> x = flow.ones(2)
    >>> flow.autograd.graph.increment_version(x); x._version
    1
    """
    for t in (tensor if isinstance(tensor, (list, tuple)) else (tensor,)):
        counter_of(t).value += 1


def current_graph_task_id() -> int:
    """An id of the backward run in progress (-1 outside backward)."""
    return id(_TASKS[-1]) if _TASKS else -1


def will_engine_execute_node(node) -> bool:
    """Whether the backward run in progress will run `node` (after pruning)."""
    if not _TASKS:
        raise RuntimeError("will_engine_execute_node can only be called during backward")
    task = _TASKS[-1]
    if node.accumulates and not task.save_grad_for_leaf:
        # torch's refusal: autograd.grad runs no accumulate node, yet its inputs' grads are
        # computed; which a leaf "will execute" has no answer (register_multi_grad_hook)
        raise RuntimeError(
            "A leaf node was passed to _will_engine_execute_node but we are currently running "
            "autograd.grad(). This is currently not supported (a multi-grad hook over leaves "
            "runs under backward(); call backward(inputs=...) instead of autograd.grad)")
    return node in task.dependencies


def _recorded(tensor):
    """The node that made tensor, as the engine reads it (also for a func.grad's input inside
    another transform, whose grad_fn reads None: a leaf at its level)."""
    tensor._sync()
    return tensor._grad_fn


def _node_of(tensor):
    node = _recorded(tensor)
    return node if node is not None else tensor._meta.grad_accumulator(tensor)


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """Call `fn` once per backward run over several tensors' gradients.

    mode="all": `fn(grads)` after the gradients of all the tensors this run reaches are
    computed (None for the others). mode="any": `fn(grad)` with the first one computed.

    >>> import flowgrad as flow
    >>> a = flow.ones(2, requires_grad=True); b = flow.ones(2, requires_grad=True)
    >>> h = flow.autograd.graph.register_multi_grad_hook(
    ...     (a, b), lambda gs: print([None if g is None else g.tolist() for g in gs]))
    >>> (a * 2).sum().backward()
    [[2.0, 2.0], None]
    """
    if mode not in ("all", "any"):
        raise ValueError(f"register_multi_grad_hook: mode must be 'all' or 'any', got {mode!r}")
    tensors = tuple(tensors)
    for i, t in enumerate(tensors):
        if not t.requires_grad:
            raise RuntimeError(f"register_multi_grad_hook: tensor {i} (shape "
                               f"{tuple(t.shape)}) does not require grad")
    lock = threading.Lock()
    if mode == "any":
        ran = set()

        def first(grad):
            task = current_graph_task_id()
            with lock:
                if task in ran:
                    return
                ran.add(task)
            fn(grad)
        return MultiHandle(tuple(t.register_hook(first) for t in tensors))

    nodes = [_node_of(t) for t in tensors]  # held, as torch's: an accumulate node stays one
    counts, buffers, expected = {}, {}, {}

    def inner(idx):
        def hook(grad):
            task = current_graph_task_id()
            with lock:
                seen = counts.get(task, 0)
                if seen == 0:  # (may raise: then nothing is recorded for this run)
                    expected[task] = sum(
                        1 for node in nodes if task == -1 or will_engine_execute_node(node))
                    buffers[task] = [None] * len(tensors)
                counts[task] = seen + 1
                buffers[task][idx] = grad
                done = seen + 1 >= expected[task]
            if done:
                grads = buffers.pop(task)
                del counts[task], expected[task]
                fn(grads)
        return hook
    return MultiHandle(tuple(t.register_hook(inner(i)) for i, t in enumerate(tensors)))
