"""Activation checkpointing in nn.Graph: a checkpointed module keeps only its inputs and
outputs alive after the forward; the backward recomputes its internal values.

The spelling is OneFlow's (0.9+): a module assigned to a graph is seen through a proxy
(`ProxyModule`: attribute access forwards to the module, calling it calls the module, its
submodules come back as proxies too), and `proxy.to(GraphModule)` gives the module's graph
settings:

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            for block in self.model:      # or self.model.to(flow.nn.graph.GraphModule)
                block.to(flow.nn.graph.GraphModule).activation_checkpointing = True

(`flow.nn.graph` is this package; OneFlow 0.8's `self.model.config.activation_checkpointing`
is not provided: `config` would shadow a module's own attribute of that name.) The flag is
read when the graph compiles, on its first call.

How: while `build` is traced, forward pre- and post-hooks on the checkpointed modules (there
only then, `tracking`) record the forward nodes each call ran (an outermost call: nested
checkpointed modules are part of it) as one range in `program.checkpoints`. The pass
`recompute_checkpoints` then, for each range, re-emits its forward nodes (new Values, same
ops and attributes, phase "recompute") right before the first backward node that reads one of
its internal values, and points the backward nodes at the recomputed values; dead-code
elimination drops the re-emitted nodes nobody reads, and the liveness annotation frees the
originals right after the forward. A value stays un-recomputed (kept alive) when a node
outside the range reads it in the forward, when the plan returns it, or when a random node
(dropout) drew it: the recomputation reads the forward's draw, so the numbers are the same.
"""
from __future__ import annotations

import contextlib

from .ir import NODE, Node, Value


class GraphModule:
    """A module's settings inside one graph (`proxy.to(GraphModule)`), as OneFlow's."""

    __slots__ = ("name", "activation_checkpointing")

    def __init__(self, name):
        self.name = name
        self.activation_checkpointing = False

    def __repr__(self):
        return (f"GraphModule({self.name!r}, "
                f"activation_checkpointing={self.activation_checkpointing})")


class ProxyModule:
    """What `graph.<name>` is for a module assigned to a graph: it forwards attribute access,
    item access, iteration and calls to the module; `.to(GraphModule)` gives its settings."""

    __slots__ = ("_module", "_graph", "_name")

    def __init__(self, module, graph, name):
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_graph", graph)
        object.__setattr__(self, "_name", name)

    def _wrap(self, obj, name):
        from ..nn.module import Module

        if isinstance(obj, Module):
            return ProxyModule(obj, self._graph, f"{self._name}.{name}")
        return obj

    def to(self, *args, **kwargs):
        if args == (GraphModule,) and not kwargs:
            settings = self._graph._graph_modules
            if id(self._module) not in settings:
                settings[id(self._module)] = (self._module, GraphModule(self._name))
            return settings[id(self._module)][1]
        self._module.to(*args, **kwargs)
        return self

    def __call__(self, *args, **kwargs):
        return self._module(*args, **kwargs)

    def __getattr__(self, name):
        if name in ProxyModule.__slots__:  # not set yet (a copy being built)
            raise AttributeError(name)
        return self._wrap(getattr(self._module, name), name)

    def __setattr__(self, name, value):
        setattr(self._module, name, value)

    def __getitem__(self, index):
        return self._wrap(self._module[index], str(index))

    def __iter__(self):
        return (self._wrap(m, str(i)) for i, m in enumerate(self._module))

    def __len__(self):
        return len(self._module)

    def __repr__(self):
        return repr(self._module)


def checkpointed_modules(graph):
    """The modules of `graph` whose activation_checkpointing flag is on."""
    return [module for module, settings in graph._graph_modules.values()
            if settings.activation_checkpointing]


@contextlib.contextmanager
def tracking(program, modules):
    """While tracing: each outermost call of one of `modules` appends the forward nodes it ran
    (a list of Nodes) to `program.checkpoints`."""
    program.checkpoints = []
    depth, starts, handles = [0], [], []
    program.checkpoint_depth = depth  # (utils.checkpoint inside build: `checkpointed`)

    def enter(module, args):
        if depth[0] == 0:
            starts.append(len(program.nodes))
        depth[0] += 1

    def leave(module, args, result):
        depth[0] -= 1
        if depth[0] == 0:
            nodes = [n for n in program.nodes[starts.pop():] if n.phase == "forward"]
            if nodes:
                program.checkpoints.append(nodes)

    try:
        for module in modules:
            handles.append(module.register_forward_pre_hook(enter))
            handles.append(module.register_forward_hook(leave))
        yield program
    finally:
        for handle in handles:
            handle.remove()


def checkpointed(program, function, args, kwargs):
    """`flowgrad.utils.checkpoint(function, *args)` called while build is traced: the call
    runs once, plainly, and its forward nodes become a range of `program.checkpoints`, as a
    checkpointed module's. (Its eager recomputation, traced in the backward, would stop
    early inside the op that saves the last tensor, before the tracer records that op, so
    the plan read the first call's value of it; and it would record the recomputation's
    random draws as new draws, where eagerly they replay the forward's.) Inside another
    range the call is part of that range."""
    depth = getattr(program, "checkpoint_depth", None)
    if depth is None:
        return function(*args, **kwargs)
    start = len(program.nodes)
    depth[0] += 1
    try:
        out = function(*args, **kwargs)
    finally:
        depth[0] -= 1
    if depth[0] == 0:
        nodes = [n for n in program.nodes[start:] if n.phase == "forward"]
        if nodes:
            program.checkpoints.append(nodes)
    return out


def recompute_checkpoints(program):
    """Re-emit each checkpointed range's forward nodes before the first backward node that
    reads one of its internal values, and point the backward at the recomputed values (see
    the module docstring). A program without `checkpoints` is left as it is."""
    from .passes import is_random

    ranges = getattr(program, "checkpoints", None) or []
    results = {v.id for v in program.results()}
    for range_nodes in ranges:
        present = {id(n) for n in program.nodes}
        members = [n for n in range_nodes if id(n) in present]  # passes may have merged some
        member_ids = {id(n) for n in members}
        produced = {v.id for n in members for v in n.outputs}
        kept = set(results) & produced
        for node in members:
            if is_random(node):
                kept.update(v.id for v in node.outputs)  # recomputing would draw again
        for node in program.nodes:
            if node.phase != "backward" and id(node) not in member_ids:
                kept.update(v.id for v in node.inputs if v.id in produced)
        internal = produced - kept
        first = next((i for i, n in enumerate(program.nodes) if n.phase == "backward"
                      and any(v.id in internal for v in n.inputs)), None)
        if first is None:
            continue
        recomputed, clones = {}, []
        for node in members:
            if is_random(node) or not any(v.id in internal for v in node.outputs):
                continue
            inputs = [recomputed.get(v.id, v) for v in node.inputs]
            clone = Node(node.op, inputs, dict(node.attrs), [], "recompute")
            clone.where, clone.n_results = node.where, node.n_results
            for v in node.outputs:
                new = Value(len(program.values), NODE, v.shape, v.dtype, clone)
                program.values.append(new)
                clone.outputs.append(new)
                recomputed[v.id] = new
            clones.append(clone)
        for node in program.nodes[first:]:
            if node.phase == "backward":
                node.inputs = [recomputed.get(v.id, v) if v.id in internal else v
                               for v in node.inputs]
        program.nodes[first:first] = clones
    return program


__all__ = ["GraphModule", "ProxyModule", "checkpointed", "checkpointed_modules", "tracking",
           "recompute_checkpoints"]
