"""The backward engine: GraphTask, dependency counting and the ready queue.

`backward` is the seed's run_backward_and_save_grads_for_leaf_tensor; `grad` is its
functional twin. Everything is iterative: a chain of a million nodes needs no recursion.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Mapping
from heapq import heappop, heappush

from .. import overrides
from .._warn import warn
from ..device import ARRAY_DEVICES, new_empty, to_device
from ..dtypes import _FROM_NP
from ..errors import EVERY_CALL, freed_graph_error
from . import anomaly as _anomaly
from . import grad_mode
from . import interpreter as _interpreter
from . import levels as _levels
from . import nested as _nested
from . import node_hooks as _node_hooks
from . import profiling as _profiling
from .accumulate import (
    _accumulate,  # noqa: F401 (graph.graph adds leaf gradients through it)
    _c_ordered,
    _retain,
    _run_hooks,
    acc_grad_for_leaf,
)
from .graph import _TASKS, GradientEdge
from .meta import input_meta as _input_meta
from .node import AccumulateGrad, FunctionNode


class GraphTask:
    """One backward run over the graph reachable from `roots`.

    `targets` (metas) restricts the run to nodes that lead to them, as `autograd.grad` and
    `backward(inputs=...)` need; without targets every reachable node runs. `stopped`: the
    nodes whose edges the run does not follow (`levels.stops_at`; only in a func transform's
    backward), found once by `compute_dependencies`.
    """

    __slots__ = ("roots", "dependencies", "retain_graph", "save_grad_for_leaf", "targets",
                 "captured", "stopped", "fed_zero", "captures")

    def __init__(self, roots, retain_graph, save_grad_for_leaf, targets=None):
        self.roots = list(dict.fromkeys(roots))
        self.retain_graph = retain_graph
        self.save_grad_for_leaf = save_grad_for_leaf
        self.targets = targets or {}
        self.captured = {}
        self.dependencies = None
        self.stopped = ()
        self.fed_zero = set()  # tensors an op's rule gave None: a zero gradient, as torch's
        self.captures = ()  # autograd.grad: the nodes that made a target and do not run

    def compute_dependencies(self, create_graph=False):
        """Count, for every reachable node, the edges that point at it (iterative DFS).

        Also checks, before anything runs, that no node that will run has freed or lost its
        saved tensors, so a failing backward leaves every grad as it was. The inputs a rule
        reads only under create_graph (`Op.create_graph_reads`) are checked only then.
        """
        deps = dict.fromkeys(self.roots, 0)
        stack = list(self.roots)
        running = _levels.BACKWARD[0]  # (a func transform's backward: levels.stops_at)
        stopped = self.stopped = set() if running is not None else ()
        while stack:
            node = stack.pop()
            if running is not None and _levels.stops_at(node, running):
                stopped.add(node)
                continue
            for nxt in node.next_nodes:
                if nxt is None:
                    continue
                if nxt in deps:
                    deps[nxt] += 1
                else:
                    deps[nxt] = 1
                    stack.append(nxt)
        if self.targets and not self._every_branch_ends_at_a_target(deps):
            deps = self._prune(deps)  # nodes on branches leading to no target never run
        for node in deps:
            if node.released or node._inputs or node._outputs:
                _check_runnable(node, create_graph)
        self.dependencies = deps

    def _every_branch_ends_at_a_target(self, deps):
        """True when pruning would keep every node (the usual grad(loss, params)): every
        target is a leaf, and every node either feeds another or is a target's
        accumulate_grad. Cheaper than `_prune`, which orders and recounts the graph."""
        targets, stopped = self.targets, self.stopped
        for node in deps:
            if type(node) is AccumulateGrad:
                if node.output_metas[0] not in targets:
                    return False
            elif node.next_nodes.count(None) == len(node.next_nodes) or node in stopped:
                return False  # a branch into tensors that need no grad: no target there
        for meta in targets:
            if not meta.is_leaf:
                return False
        return True

    def _prune(self, deps):
        """Keep only nodes with a path to a target meta; recount edges among them. A stopped
        node gives its inputs no gradient in this run: it leads to no target."""
        targets = self.targets
        order, remaining = [], dict(deps)
        ready = [r for r in self.roots if remaining[r] == 0]
        stopped = self.stopped

        def nexts(node):
            return () if node in stopped else node.next_nodes
        while ready:  # Kahn's order: consumers before producers
            node = ready.pop()
            order.append(node)
            for nxt in nexts(node):
                if nxt is not None:
                    left = remaining[nxt] = remaining[nxt] - 1
                    if left == 0:
                        ready.append(nxt)
        needed = set()
        target_metas = targets.keys()
        # backward(inputs=...) runs a non-leaf target's own node too, as torch's (its saved
        # tensors are read, its hooks run, its gradients go nowhere); autograd.grad does not
        runs_target = self.save_grad_for_leaf
        # torch's target is an edge (its node, an output number): every node reaching the
        # node that made a target runs (and is freed), also when its gradient goes to another
        # output of that node (an unbind sibling) and none reaches the target
        producers = {n for n in order if not target_metas.isdisjoint(n.output_metas)}
        for node in reversed(order):  # producers first, so `needed` of next nodes is known
            if ((node not in stopped and (not target_metas.isdisjoint(node.input_metas)
                                          or not producers.isdisjoint(node.next_nodes)))
                    or not needed.isdisjoint(nexts(node))
                    or (type(node) is AccumulateGrad and node.output_metas[0] in targets)
                    or runs_target and not target_metas.isdisjoint(node.output_metas)):
                needed.add(node)
        pruned = {n: 0 for n in order if n in needed}
        for node in pruned:
            for nxt in nexts(node):
                if nxt in pruned:
                    pruned[nxt] += 1
        # (torch's engine calls such a node's tensor pre-hooks, retain_grad's too, for every
        # output, then captures: its outputs' metas take their gradients: `run_captures`)
        self.captures = {n for n in producers if n not in pruned}
        return pruned

    def apply(self):
        """Run every node once, after all its consumers (the ready queue of the seed)."""
        deps, targets = self.dependencies, self.targets
        # torch's ready queue: a heap whose top is the node made last (highest sequence_nr;
        # a leaf's accumulate_grad first of all), ties broken as its std::priority_queue's
        # (heapq's sifts are the same), so hooks run in torch's order
        ready = []
        for root in self.roots:
            if deps.get(root) == 0:
                heappush(ready, (-root.sequence_nr, root))
        run_node = self._run_node
        if _anomaly.enabled:  # NaN checks and forward tracebacks, for this run
            run_node = _node_hooks.checked_runner(run_node)
        if _profiling.ACTIVE:  # flowgrad.profiler: each node timed
            run_node = _profiling.timed_runner(run_node)
        save_grad_for_leaf, stopped = self.save_grad_for_leaf, self.stopped
        while ready:
            node = heappop(ready)[1]
            if type(node) is AccumulateGrad:
                if save_grad_for_leaf:
                    acc_grad_for_leaf(node.output_metas[0], node._variable())
            else:
                run_node(node, deps, targets)
            if stopped and node in stopped:
                continue  # (its edges were not counted)
            for nxt in node.next_nodes:
                if nxt is not None:
                    left = deps.get(nxt)
                    if left is not None:  # (None: pruned, it leads to no target)
                        deps[nxt] = left = left - 1
                        if left == 0:
                            heappush(ready, (-nxt.sequence_nr, nxt))

    def _run_node(self, node, deps, targets):
        metas = node.output_metas
        if len(metas) == 1 and type(node) is FunctionNode:  # most ops: no list of one
            meta = metas[0]
            g = meta.current_grad
            if g is None or meta.hooks or meta.retain_grad or targets:
                if g is None and self._reached_by_none(node, metas):
                    return
                g = self._take_grad(meta, node.output_infos[0], node)
            else:
                meta.current_grad = None
            in_grads = node.op.backward(node, g)
        else:
            if metas and metas[0].current_grad is None and type(node) is FunctionNode and \
                    self._reached_by_none(node, metas):
                return
            out_grads = []
            for meta, info in zip(metas, node.output_infos):
                g = meta.current_grad
                if g is None or meta.hooks or meta.retain_grad or targets:
                    g = self._take_grad(meta, info, node)  # zeros, hooks, retain_grad, capture
                else:
                    meta.current_grad = None
                out_grads.append(g)
            if len(ARRAY_DEVICES) > 1:  # another device is in use: zeros made go to the grads'
                out_grads = _on_one_device(out_grads)
            if type(node) is FunctionNode:
                in_grads = node.op.backward(node, *out_grads)
            else:  # hooks, anomaly checks, custom node types
                in_grads = node.backward_fn(out_grads)
        metas = node.input_metas
        if type(in_grads) is _interpreter.Tensor and len(metas) == 1:
            # a rule of one input returned the grad itself (most ops): no tuple, no zip
            meta = metas[0]
            if meta is not None and not (
                    targets and node.next_nodes[0] not in deps and meta not in targets
                    and node.next_nodes[0] not in self.captures):
                data, info = in_grads._data, node.input_infos[0]  # (_add_grad, inline)
                if data.dtype is not info[1] or data.shape != info[0]:
                    in_grads = _fit_grad(in_grads, info[0], info[1], node)
                cur = meta.current_grad
                meta.current_grad = in_grads if cur is None else cur + in_grads \
                    if type(cur) is not SparseTensor else in_grads + cur
        else:
            if type(in_grads) is not tuple:
                in_grads = (in_grads,) if not isinstance(in_grads, list) else tuple(in_grads)
            if len(in_grads) != len(metas):
                raise RuntimeError(
                    f"{node.name} returned {len(in_grads)} gradients but its op has "
                    f"{len(metas)} inputs; return one gradient (or None) per input")
            for meta, nxt, g, info in zip(metas, node.next_nodes, in_grads, node.input_infos):
                if meta is None or g is None or (
                        targets and nxt not in deps and meta not in targets
                        and nxt not in self.captures):
                    if g is None and meta is not None and \
                            getattr(node.op, "materialize_grads", None) is None:
                        self.fed_zero.add(meta)  # (not a custom Function's None)
                    continue  # (with targets, a pruned branch gets nothing)
                _add_grad(meta, g, info, node)
        if not self.retain_graph:
            node._inputs = node._outputs = node.aux = None  # free what it saved
            node.released = True

    def _reached_by_none(self, node, metas):
        """torch's generated backward: when no gradient reached any output of `node` (a custom
        Function returned None for it), none leaves: its inputs' grads stay None, not zeros.
        Then its tensors' hooks see the None and it is released; otherwise False. A custom
        Function's node gets zeros instead (materialized), unless it wrote a view in place
        (mark_dirty): torch's CopySlices runs it, and returns nothing on no gradient."""
        if getattr(node.op, "materialize_grads", None) is not None and \
                "copy_slices" not in node.__dict__ or any(
                m.current_grad is not None or m in self.fed_zero for m in metas):
            return False
        _node_hooks.none_to_hooks(metas)
        if not self.retain_graph:
            node._inputs = node._outputs = node.aux = None
            node.released = True
        return True

    def _take_grad(self, meta, info, node=None):
        """The summed grad of one tensor, after its hooks; feeds retain_grad and targets (an
        autograd.grad input whose node runs on is captured before its hooks, as torch's).

        An output that received nothing gets zeros of its recorded shape, unless its node
        asks for None instead (a custom Function after ctx.set_materialize_grads(False)).
        """
        g = meta.current_grad
        meta.current_grad = None
        reached = g is not None
        if g is None:
            materialize = getattr(node.op, "materialize_grads", None) if node else None
            if materialize is not None and not materialize(node):
                return None
            g = _interpreter.Tensor._zeros(*info)
        if node is not None and meta in self.targets:
            # the node runs on (it leads to another input): torch's engine captures the
            # gradient before the tensor's hooks, which it runs only as the node runs; one
            # nothing reached (an unbind sibling of a used output) is None, not the zeros
            # the node's rule gets
            self.captured[meta] = g if reached or meta in self.fed_zero else None
        if not (reached or meta in self.fed_zero):  # torch's hooks see the undefined gradient
            _node_hooks.none_to_hooks((meta,))     # (None); its retain_grad skips it
            return g
        if meta.hooks:
            g = _run_hooks(meta.hooks, g)
        if meta.retain_grad:
            _retain(meta, g)
        return g

    def run_captures(self):
        """The outputs of a node that made an autograd.grad target and does not run, other
        than the targets: their gradients go through their hooks and retain_grad, then go,
        as torch's engine calls the tensor pre-hooks of a capturing node it does not run."""
        for node in self.captures:
            for meta in node.output_metas:
                if meta not in self.targets and meta.current_grad is not None:
                    self._take_grad(meta, None)

    def collect(self, meta):
        """The gradient a target received (None when nothing reached it), after its hooks;
        a retain_grad target also keeps it in `.grad`, as torch's autograd.grad does."""
        if meta in self.captured:
            return self.captured[meta]  # _take_grad ran its hooks and retain_grad
        if meta.current_grad is None:
            return None
        g = meta.current_grad
        meta.current_grad = None
        if meta.hooks:
            g = _run_hooks(meta.hooks, g)
        if meta.retain_grad:
            _retain(meta, g)
        return g

    def clear(self):
        """Drop partial grads left by a run that failed half-way."""
        for node in self.dependencies or ():
            for meta in node.output_metas:
                meta.current_grad = None
            for meta in node.input_metas:
                if meta is not None:
                    meta.current_grad = None
        for meta in self.targets:
            meta.current_grad = None


SparseTensor = None  # bound by flowgrad.sparse (which imports this layer)


def _add_grad(meta, g, info, node):
    """current_grad += g, g first fitted to the input's recorded shape and dtype."""
    if type(g) is SparseTensor:
        return _add_sparse_grad(meta, g, info, node)
    data = g._data
    if data.shape != info[0] or data.dtype != info[1]:
        g = _fit_grad(g, info[0], info[1], node)
    cur = meta.current_grad
    meta.current_grad = g if cur is None else cur + g if type(cur) is not SparseTensor \
        else g + cur  # (dense + sparse is dense; sparse + dense raises, as torch's)


def _add_sparse_grad(meta, g, info, node):
    """A sparse gradient (Embedding(sparse=True)'s weight gradient) reaching a tensor: summed
    sparse into a leaf's (torch's `.grad` is sparse then: entries concatenated, not
    coalesced), made dense for the node that consumes a non-leaf (its rule reads arrays)."""
    if tuple(g.shape) != info[0]:
        raise RuntimeError(f"{node.name} returned a sparse gradient of shape {tuple(g.shape)} "
                           f"for an input of shape {info[0]}; the shapes must match")
    if not meta.is_leaf:
        return _add_grad(meta, g.to_dense(), info, node)
    cur = meta.current_grad
    meta.current_grad = g if cur is None else cur + g


def _check_runnable(node, create_graph):
    if node.released and node.saved_something:
        raise freed_graph_error(node)
    # the usual case, nothing saved was written or detached in place since: one look at each
    # saved tensor, without the calls below (a node of a 200-op chain: 0.1 us less)
    for group in (node._inputs, node._outputs):
        if group:
            for saved in group:
                if saved is not None and (saved.counter.value != saved.version or (
                        saved.tensor is not None and saved.grad_fn is not None
                        and saved.tensor._grad_fn is None)):
                    return _check_saved(node, create_graph)


def _check_saved(node, create_graph):
    """Raise for a saved tensor the node's rule will read that was written in place, or
    detached in place, since it was saved (`SavedTensor.check` says which)."""
    # (custom Function and vmap nodes carry op stand-ins without the attribute)
    unread = () if create_graph else getattr(node.op, "create_graph_reads", ())
    for group in (node._inputs, node._outputs):
        if group:
            for i, saved in enumerate(group):
                if saved is not None and (
                        saved.counter.value != saved.version or saved.tensor is not None) and (
                        group is not node._inputs or i not in unread):
                    saved.check(node)


def _on_one_device(grads):
    """The zeros `_take_grad` made (its infos say shape and dtype only) moved to the device of
    the node's other grads."""
    devices = {g.device for g in grads if g is not None}
    if len(devices) < 2:
        return grads
    dev = next(d for d in devices if d.type != "cpu")
    return [g if g is None or g.device == dev else
            _interpreter.Tensor._wrap(to_device(g._data, dev)) for g in grads]


def _fit_grad(g, shape, dtype, node):
    """Un-broadcast (sum over broadcast dims) and cast a grad to its input's shape/dtype.

    The one place where broadcasting is undone: rules return grads of the broadcast shape.
    """
    if g._data.shape != shape:
        try:
            g = sum_to(g, shape)
        except ValueError:
            raise RuntimeError(
                f"{node.name} returned an invalid gradient: shape {tuple(g._data.shape)} "
                f"cannot be reduced to the input's shape {tuple(shape)}; the gradient rule "
                f"must return one gradient per input, shaped like that input or broadcastable "
                f"to it") from None
    if g._data.dtype != dtype:
        if g._data.dtype.kind == "c" and dtype.kind != "c":  # a real input of a complex op:
            g = g.real                                       # its grad is the real part
        g = g.to(_FROM_NP[dtype])
    return g


_node_hooks.fit_grad = _fit_grad  # (the grad_inputs a node's post-hooks see)


def _edge_meta(edge, what):
    """The AutogradMeta a GradientEdge's gradient is summed into (its node's output)."""
    node, nr = edge
    metas = getattr(node, "output_metas", ())
    if not 0 <= nr < len(metas) or not metas[nr].requires_grad:
        raise RuntimeError(f"grad: {what} is a GradientEdge to output {nr} of {node!r}, which "
                           f"has no such output that requires grad")
    return metas[nr]


def _shape_of(t):
    """A tensor's shape, or a GradientEdge's (its node's output's), for messages."""
    if not isinstance(t, GradientEdge):
        return tuple(t.shape)
    node, nr = t
    if isinstance(node, AccumulateGrad):
        leaf = node._variable()
        return None if leaf is None else tuple(leaf.shape)
    return tuple(node.output_infos[nr][0])


def _edge_root(edge, g, i, create_graph):
    meta = _edge_meta(edge, f"output {i}")
    shape = _shape_of(edge)
    if not isinstance(g, _interpreter.Tensor) or tuple(g.shape) != shape:
        raise RuntimeError(f"grad: output {i} is a GradientEdge (shape {shape}): pass a "
                           f"grad_output of that shape for it, got "
                           f"{tuple(g.shape) if g is not None else None}")
    return edge.node, meta, g if create_graph else g.detach()


def _roots_and_seeds(outputs, grad_outputs, create_graph):
    Tensor = _interpreter.Tensor
    roots = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if isinstance(out, GradientEdge):  # (torch's: the gradient flowing into the edge)
            roots.append(_edge_root(out, g, i, create_graph))
            continue
        out._sync()
        if out._meta is None or not out._meta.requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn; "
                f"call backward on a result computed from tensors with requires_grad=True")
        if g is None:
            if out._data.size != 1:
                raise RuntimeError(
                    f"grad can be implicitly created only for scalar outputs; output {i} has "
                    f"shape {tuple(out._data.shape)}: pass gradient= (a tensor of that shape)")
            if out._data.dtype.kind == "c":
                raise RuntimeError(
                    f"grad can be implicitly created only for real scalar outputs but got "
                    f"{out.dtype}; call backward on a real loss (.abs(), .real) or pass "
                    f"gradient=")
            seed = new_empty(out._data)  # (empty + fill: C calls; ones_like is not)
            seed.fill(1)
            g = Tensor._wrap(seed)
        else:
            if not isinstance(g, Tensor):
                raise TypeError(
                    f"backward: gradients can be either Tensors or None, but got "
                    f"{type(g).__name__} for output {i} (shape {tuple(out._data.shape)}); pass "
                    f"flowgrad.tensor(...) shaped like the output")
            if g._data.shape != out._data.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of "
                    f"{tuple(g._data.shape)} and output[{i}] has a shape of "
                    f"{tuple(out._data.shape)}; pass a gradient shaped like the output")
            if (g._data.dtype.kind == "c") != (out._data.dtype.kind == "c"):
                # (a complex gradient of a real output would lose its imaginary part)
                raise RuntimeError(
                    f"For complex Tensors, both grad_output and output are required to have "
                    f"the same dtype. Mismatch in dtype: grad_output[{i}] has a dtype of "
                    f"{g.dtype} and output[{i}] has a dtype of {out.dtype}")
            if not create_graph:
                g = g.detach()
        node = out._grad_fn if out._grad_fn is not None else out._meta.grad_accumulator(out)
        roots.append((node, out._meta, g))
    return roots


# Bound at import by the layers above, which import this module: the un-broadcast of a
# gradient to its input's shape (by flowgrad.ops.reduce), grad(is_grads_batched=True) (a vmap,
# by flowgrad.func.transforms)
sum_to = batched_grad = None

# One backward run at a time: runs in several threads may share leaves, whose current_grad
# and acc_grad they would otherwise update at once (re-entrant: a hook may run backward).
_BACKWARD_LOCK = threading.RLock()


def _one_run_at_a_time(entry):
    @functools.wraps(entry)
    def locked(*args, **kwargs):
        with _BACKWARD_LOCK:
            depth = len(_TASKS)
            try:
                return entry(*args, **kwargs)
            finally:
                del _TASKS[depth:]
    return locked


def _is_checkpoint_valid():
    """False inside a backward run that computes only some gradients (`autograd.grad`,
    `backward(inputs=...)`): a reentrant checkpoint's inner backward would fill `.grad` of
    leaves that run never asked for (torch.autograd._is_checkpoint_valid)."""
    return not _TASKS or not _TASKS[-1].targets


def _run(outputs, grad_outputs, retain_graph, create_graph, save_grad_for_leaf, targets):
    if retain_graph is None:
        retain_graph = create_graph
    roots = _roots_and_seeds(outputs, grad_outputs, create_graph)
    task = GraphTask([r[0] for r in roots], retain_graph, save_grad_for_leaf, targets)
    task.compute_dependencies(create_graph)  # may raise: nothing has been touched yet
    pending = _nested.set_aside(_TASKS[-1]) if _TASKS else None
    _TASKS.append(task)
    state = grad_mode._state  # (set_grad_enabled's with-block, inline: once per backward)
    prev, state.enabled = state.enabled, bool(create_graph)
    # the rules see tensors, not a subclass's __torch_function__, as torch's C++ backward
    protocol, overrides._STATE.all_off = overrides._STATE.all_off, 1
    try:
        for _, meta, g in roots:
            cur = meta.current_grad
            meta.current_grad = g if cur is None else cur + g
        task.apply()
        ran = task.dependencies
        for node, meta, _ in roots:  # a root pruned away (it leads to no target): its seed
            if node not in ran and meta not in task.targets:  # is not left for a next run
                if len(roots) == 1:  # torch's engine starts at a lone root's node: its
                    task._take_grad(meta, None)  # tensor hooks and retain_grad see the seed
                meta.current_grad = None
    except BaseException:
        task.clear()
        raise
    finally:
        state.enabled = prev
        overrides._STATE.all_off = protocol
        if pending is not None:
            _nested.put_back(*pending)
    return task


def _as_tuple(x):
    """None, or the tensors of a tensor, a sequence or any iterable (a generator: read once)."""
    if x is None:
        return None
    if isinstance(x, GradientEdge):
        return (x,)
    if isinstance(x, (tuple, list)):
        return tuple(x)
    if isinstance(x, _interpreter.Tensor) or not isinstance(x, Iterable):
        return (x,)
    return tuple(x)


@_one_run_at_a_time
def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Accumulate d(tensors)/d(leaves) into each leaf's `.grad` (torch.autograd.backward;
    `grad_variables` is its deprecated name of `grad_tensors`).

    >>> import flowgrad as flow
    >>> x = flow.tensor([1.0, 2.0], requires_grad=True)
    >>> flow.autograd.backward((x * x).sum()); x.grad
    tensor([2., 4.])
    """
    if grad_variables is not None:
        warn("`grad_variables` is deprecated. Use `grad_tensors` instead.", FutureWarning,
             stacklevel=2)
        if grad_tensors is not None:
            raise RuntimeError("`grad_tensors` and `grad_variables` (deprecated) arguments both "
                               "passed to `backward()`. Please only use `grad_tensors`.")
        grad_tensors = grad_variables
    tracer = _interpreter.current
    if tracer is not _interpreter.AutogradInterpreter and hasattr(tracer, "backward"):
        return tracer.backward(tensors, grad_tensors, retain_graph, create_graph, inputs)
    tensors = _as_tuple(tensors)
    if EVERY_CALL:  # (a Tensor subclass among them: its __torch_function__ takes the call)
        handled = overrides.dispatch_on(
            backward, tensors + (_as_tuple(inputs) if inputs is not None else ()), (tensors,),
            dict(grad_tensors=grad_tensors, retain_graph=retain_graph,
                 create_graph=create_graph, inputs=inputs))
        if handled is not overrides.NOT_HANDLED:
            return handled
    grads = _as_tuple(grad_tensors) or (None,) * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"backward: got {len(tensors)} tensors but {len(grads)} gradients")
    targets = None
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise RuntimeError("backward: 'inputs' must not be empty")
        metas = []
        for i, t in enumerate(inputs):
            if isinstance(t, GradientEdge):
                metas.append(_edge_meta(t, f"inputs[{i}]"))
                continue
            t._sync()
            if t._grad_fn is not None:  # torch's: a non-leaf input retains its grad from now
                t.retain_grad()  # on (each input in turn, before the next one is checked)
            metas.append(_input_meta(t, "backward: every tensor in 'inputs' must require grad"))
        targets = {m: i for i, m in enumerate(metas)}  # (an input given twice counts once)
    _run(tensors, grads, retain_graph, create_graph, True, targets)
    # (a non-leaf input retains its grad, and its node runs: _take_grad filled its .grad)


@_one_run_at_a_time
def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of `outputs` with respect to `inputs`, returned, `.grad` untouched.

    Only nodes that lead to some input run. `is_grads_batched=True`: dim 0 of each
    grad_output indexes a batch of cotangents, run as one vmapped backward. (`only_inputs`
    is torch's deprecated, ignored argument.)

    >>> import flowgrad as flow
    >>> x = flow.tensor(3.0, requires_grad=True)
    >>> flow.autograd.grad(x ** 3, x)[0]
    tensor(27.)
    """
    if not only_inputs:
        warn("only_inputs argument is deprecated and is ignored now (defaults to True). To "
             "accumulate gradient for other parts of the graph, please use "
             "torch.autograd.backward.", FutureWarning, stacklevel=2)
    if allow_unused is False and materialize_grads:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if type(inputs) is dict:  # (torch's: the gradients come back under the same keys)
        return dict(zip(inputs, grad(outputs, tuple(inputs.values()), grad_outputs,
                                     retain_graph, create_graph, only_inputs, allow_unused,
                                     is_grads_batched, materialize_grads)))
    if isinstance(inputs, Mapping):
        raise TypeError(f"`inputs` argument to `grad()` must be a dict, not "
                        f"{type(inputs).__name__}. Other Mapping types are not supported.")
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("grad requires non-empty inputs: the `inputs` argument to grad() "
                           "cannot be empty; pass the tensors to differentiate with respect to")
    if is_grads_batched:
        return batched_grad(grad, outputs, inputs, grad_outputs, retain_graph, create_graph,
                            allow_unused, materialize_grads)
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if EVERY_CALL:  # (as backward's)
        handled = overrides.dispatch_on(
            grad, outputs + inputs, (outputs, inputs),
            dict(grad_outputs=grad_outputs, retain_graph=retain_graph,
                 create_graph=create_graph, allow_unused=allow_unused,
                 materialize_grads=materialize_grads))
        if handled is not overrides.NOT_HANDLED:
            return handled
    tracer = _interpreter.current
    if tracer is not _interpreter.AutogradInterpreter and hasattr(tracer, "grad"):
        return tracer.grad(outputs, inputs, _as_tuple(grad_outputs), create_graph,
                           allow_unused or materialize_grads, materialize_grads, retain_graph)
    grads = _as_tuple(grad_outputs) or (None,) * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"grad: got {len(outputs)} outputs but {len(grads)} grad_outputs")
    metas = []
    for i, t in enumerate(inputs):
        if isinstance(t, GradientEdge):
            metas.append(_edge_meta(t, f"input {i}"))
            continue
        t._sync()
        metas.append(_input_meta(
            t, f"grad: input {i} (shape {tuple(t.shape)}) does not require grad; set "
               f"requires_grad=True on it before computing the outputs"))
    targets = dict.fromkeys(metas)
    task = _run(outputs, grads, retain_graph, create_graph, False, targets)
    state = grad_mode._state  # (hooks and retain_grad of the targets run in the run's mode)
    prev, state.enabled = state.enabled, bool(create_graph)
    try:  # (once per target: an input passed twice gets its gradient twice, as torch's)
        task.run_captures()
        collected = {m: _c_ordered(task.collect(m)) for m in targets}
    except BaseException:
        task.clear()  # (a hook raised: the other inputs' grads are not left for a next run)
        raise
    finally:
        state.enabled = prev
    result = []
    for i, (t, m) in enumerate(zip(inputs, metas)):
        g = collected[m]
        if g is None:
            if materialize_grads and isinstance(t, GradientEdge):
                raise RuntimeError(f"materialize_grads cannot be used when the given input is a "
                                   f"GradientEdge (input {i}, which got no gradient); pass the "
                                   f"tensor instead")
            if materialize_grads:  # (differentiable zeros with create_graph, as torch's)
                g = _interpreter.Tensor._zeros(t._data.shape, t._data.dtype, t)
                if create_graph:
                    g._set_requires_grad(True)
            elif not allow_unused:
                raise RuntimeError(
                    f"One of the differentiated Tensors (input {i}, shape {_shape_of(t)}) "
                    f"appears to not have been used in the graph. Set allow_unused=True if "
                    f"this is the desired behavior.")
        elif not create_graph:
            g = g.detach()
        result.append(g)
    return tuple(result)
