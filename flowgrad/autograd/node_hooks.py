"""Hooks on backward nodes: `grad_fn.register_prehook` / `grad_fn.register_hook`.

A node with hooks (or one running under anomaly mode) has its class switched to HookedNode,
whose `backward_fn` runs: pre-hooks on the output grads, the op's rule, post-hooks on
(grad_inputs, grad_outputs), then anomaly mode's NaN check. Plain nodes never pay for it.
Hooks on a leaf's accumulate node become hooks on the leaf's gradient, which is where that
node's work happens (`engine.acc_grad_for_leaf`).

>>> import flowgrad as flow
>>> x = flow.ones(2, requires_grad=True)
>>> y = (x * 3).sum()
>>> h = y.grad_fn.register_prehook(lambda grad_outputs: (grad_outputs[0] * 10,))
>>> y.backward(); x.grad
tensor([30., 30.])
"""
from __future__ import annotations

import functools
import weakref

from ..hook_handles import ListHandle, MultiHandle
from . import anomaly
from . import graph as _graph
from . import interpreter as _interpreter
from .node import AccumulateGrad, FunctionNode, InertNode


class _Hooks:
    __slots__ = ("pre", "post")

    def __init__(self):
        self.pre, self.post = [], []


SPARSE = [None]  # flowgrad.sparse's SparseTensor, bound there (it imports this layer)
_HOOKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class HookedNode(FunctionNode):
    """A FunctionNode whose backward runs its hooks and anomaly checks."""

    __slots__ = ()
    behaviour = None  # (HookedNode: set below)

    def backward_fn(self, out_grads):
        hooks = _HOOKS.get(self)
        if hooks is not None and hooks.pre:
            grads = tuple(out_grads)
            for hook in tuple(hooks.pre):
                result = hook(grads)
                if result is not None:
                    grads = _check_count(result, grads, "pre-hook", self, "outputs", hook)
            out_grads = list(grads)
        read = out_grads
        if hooks is not None and hooks.pre and None in out_grads:
            read = _undefined_as_zeros(self, out_grads)  # a pre-hook made a grad undefined
        if read is None:  # every grad undefined: no rule runs, no input gets a grad
            in_grads = (None,) * len(self.input_metas)
        else:
            in_grads = FunctionNode.backward_fn(self, read)
        if hooks is not None and hooks.post:
            if type(in_grads) is not tuple:
                in_grads = tuple(in_grads) if isinstance(in_grads, list) else (in_grads,)
            in_grads = _fitted(self, _needed_only(self, in_grads))
            edges = torch_edges(self)
            seen = in_grads if edges is None else _on_edges(in_grads, edges)
            for hook in tuple(hooks.post):
                result = hook(seen, tuple(out_grads))
                if result is not None:
                    seen = _check_count(result, seen, "hook", self, "inputs", hook)
            in_grads = seen if edges is None else _off_edges(in_grads, seen, edges)
        if anomaly.enabled and anomaly.check_nan:
            anomaly.check_results(self, in_grads)
        return in_grads


HookedNode.behaviour = HookedNode


def _needed_only(node, in_grads):
    """The grad_inputs a node's post-hooks see: None for an input that needs no gradient, or
    whose gradient goes nowhere in this run (grad / backward(inputs=) prune the graph), as
    torch's (its formulas skip what `task_should_compute_output` says is not needed)."""
    task = _graph._TASKS[-1] if _graph._TASKS else None
    deps, targets = (task.dependencies, task.targets) if task is not None and task.targets \
        else ((), None)
    if None not in node.next_nodes and targets is None:
        return in_grads
    return tuple(None if n is None or targets is not None and n not in deps and m not in targets
                 else g for g, n, m in zip(in_grads, node.next_nodes, node.input_metas))


def _fitted(node, in_grads):
    """The grad_inputs a node's post-hooks see, each summed to its input's shape and cast to
    its dtype (`engine._fit_grad`): torch's engine validates a node's outputs before its
    post-hooks run, so `(x - y0d).grad_fn`'s hook sees y0d's gradient 0-d, not broadcast."""
    if len(in_grads) != len(node.input_infos):
        return in_grads  # (a rule that returned too few or many: the engine says so)
    return tuple(g if g is None or type(g) is SPARSE[0] or (
        g._data.shape == info[0] and g._data.dtype == info[1])
        else fit_grad(g, info[0], info[1], node) for g, info in zip(in_grads, node.input_infos))


fit_grad = None  # engine._fit_grad, bound there (it imports this module)


def torch_edges(node):
    """Which of node's inputs torch's node has its edges for, in torch's order (None for an
    edge flowgrad's node has no input for: a number operand); None where they are node's
    inputs. (torch_nodes binds torch's table here.)"""
    return None


def _on_edges(in_grads, edges):
    """node's grad_inputs as torch's node hands them to its hooks: one per edge (`x * 2`'s
    MulBackward0 has two, the second None), none for an index input."""
    return tuple(None if i is None else in_grads[i] for i in edges
                 if i is None or i < len(in_grads))


def _off_edges(in_grads, seen, edges):
    """in_grads with the hooks' results per torch edge (`seen`) put back at their inputs."""
    out = list(in_grads)
    for i, g in zip((i for i in edges if i is None or i < len(in_grads)), seen):
        if i is not None:
            out[i] = g
    return tuple(out)


def hooked_variant(cls):
    """The class a node of class `cls` takes to run hooks (torch_nodes binds its own: a
    node named as torch's keeps its name)."""
    return HookedNode


def _undefined_as_zeros(node, grads):
    """The output grads a rule reads where pre-hooks made some None: None when all are (as
    torch's formulas, which give undefined grads then), zeros for the others, unless the node
    takes None (a custom Function after ctx.set_materialize_grads(False))."""
    if all(g is None for g in grads):
        return None
    materialize = getattr(node.op, "materialize_grads", None)
    if materialize is not None and not materialize(node):
        return grads
    return [_interpreter.Tensor._zeros(*info) if g is None else g
            for g, info in zip(grads, node.output_infos)]


def checked_results(hook, originals, result, wrong_count):
    """`result`, the gradients `hook` returned (a tuple, a list or one) in place of
    `originals`: as many (else RuntimeError(wrong_count(n))), each passing `checked_result`
    (unless `hook` is None: the engine checks that hook's result itself)."""
    result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(result) != len(originals):
        raise RuntimeError(wrong_count(len(result)))
    if hook is not None:
        result = tuple(map(checked_result, (hook,) * len(result), originals, result))
    return result


def _check_count(result, originals, kind, node, what, hook=None):
    return checked_results(hook, originals, result, lambda n: (
        f"{kind} of {node.name} returned {n} gradients, expected {len(originals)} (one per "
        f"{what[:-1]} of the node)"))


def checked_result(hook, original, result):
    """`result`, a gradient `hook` returned in place of `original`, after torch's checks
    (check_single_result): a Tensor (or None) of the same type, device and shape. The engine
    would otherwise sum or cast it to fit, silently giving other numbers than torch."""
    if result is None:
        return None
    name = getattr(hook, "__name__", None) or repr(hook)
    if not isinstance(result, _interpreter.Tensor) and type(result) is not SPARSE[0]:
        raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}': "
                        f"hook '{name}' must return a gradient tensor or None")
    if original is None:
        return result
    if (type(result) is not type(original) or result.dtype != original.dtype
            or result.device.type != original.device.type):
        raise RuntimeError(
            f"hook '{name}' has changed the type of value (was {original.type()} got "
            f"{result.type()}); return a gradient of the dtype and device it was given")
    if result.device != original.device:
        raise RuntimeError(f"hook '{name}' has changed the device of value (was "
                           f"{original.device} got {result.device})")
    if tuple(result.shape) != tuple(original.shape):
        raise RuntimeError(
            f"hook '{name}' has changed the size of value: the gradient has shape "
            f"{tuple(original.shape)}, the hook returned shape {tuple(result.shape)}; return "
            f"a gradient of the same shape")
    return result


def checked_runner(run_node):
    """Wrap GraphTask._run_node for one backward run in anomaly mode: each node's results
    are checked for NaN/inf (node_hooks.HookedNode), and any error a node raises warns with
    the forward traceback of that node before propagating."""
    def run(node, deps, targets):
        cls = type(node)
        plain = cls.behaviour is FunctionNode
        if plain:
            node.__class__ = hooked_variant(cls)  # its backward_fn checks the results
        try:
            run_node(node, deps, targets)
        except Exception as error:
            if not getattr(error, "_anomaly_reported", False):
                anomaly.warn_forward_traceback(node)
                try:
                    error._anomaly_reported = True  # an outer (re-entrant) run says it once
                except AttributeError:
                    pass
            raise
        finally:
            if plain:
                node.__class__ = cls
    return run


def register(node, hook, pre):
    """Add a node hook; returns a handle whose remove() takes it off."""
    if not callable(hook):
        raise TypeError(f"{node.name}.register_{'pre' if pre else ''}hook: the hook must be "
                        f"callable, got {type(hook).__name__}")
    if type(node) is AccumulateGrad:
        return _register_on_leaf(node, hook, pre)
    if type(node).behaviour in (FunctionNode, InertNode):
        node.__class__ = hooked_variant(type(node))
    hooks = _HOOKS.get(node)
    if hooks is None:
        hooks = _HOOKS[node] = _Hooks()
    return ListHandle(hooks.pre if pre else hooks.post, hook)


_graph._register_node_hook = register  # grad_fn.register_hook / register_prehook


def _register_on_leaf(node, hook, pre):
    """An accumulate node's hooks, as torch calls them: pre-hook((grad,)) -> (grad,) | None
    before the leaf's .grad is updated; hook((), (grad,)) after it."""
    meta = node.variable_meta
    if meta.hooks is None:
        meta.hooks = []
    if pre:
        @functools.wraps(hook)  # (its name, for the engine's check of what it returns)
        def as_tensor_hook(grad):
            result = hook((grad,))
            return None if result is None else _check_count(result, (grad,), "pre-hook",
                                                            node, "outputs")[0]
        return ListHandle(meta.hooks, as_tensor_hook)
    seen = []

    def remember(grad):
        seen[:] = [grad]

    def after(_leaf):
        if seen:
            hook((), (seen.pop(),))

    if meta.post_accumulate_hooks is None:
        meta.post_accumulate_hooks = []
    first = ListHandle(meta.hooks, remember)
    second = ListHandle(meta.post_accumulate_hooks, after)
    return MultiHandle((first, second))


def none_to_hooks(metas):
    """Run each tensor's hooks on the None gradient it received; as torch's, none may return
    a tensor in its place."""
    for meta in metas:
        for hook in tuple(meta.hooks or ()):
            if hook(None) is not None:
                raise RuntimeError(
                    "can't replace a None gradient with a non-None value: a tensor hook "
                    "returned a gradient for a tensor that received none (a custom Function's "
                    "backward returned None for it); return None from the hook there")
