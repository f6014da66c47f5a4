"""The optimizer pass: the registered optimizers' updates join the Program as `update` nodes.

Each parameter's update is a node reading its gradient, placed right after the last node
that reads the parameter or produces that gradient: the gradient array is freed as soon as
the update has used it, so the step's peak memory is below eager's (where every `.grad`
lives until `zero_grad`). With `config.allow_fuse_model_update_ops(True)` a param group is
one node after the backward instead, the multi-tensor path of the optimizer.

An update node runs the optimizer's own step code (its batched `_step_group` where the group
qualifies, the per-parameter reference step otherwise) on that parameter: the numbers are
eager's, bit for bit, and the optimizer's state (`opt.state`, `param_groups`, the learning
rate a scheduler sets) is the eager object's, read at every run.

Optimizers whose step needs more than gradients stay eager after the plan: gradient
clipping (`clip_grad_max_norm`), gradient accumulation, step hooks, a custom `step`
(closures), a parameter in two groups or written in place by the step.
"""
from __future__ import annotations

from ..autograd.grad_mode import no_grad
from ..optim import optimizer as _optimizer
from ..optim._foreach import SMALL
from ..optim.optimizer import Optimizer
from ..tensor import Tensor
from .ir import STATE, Node


class UpdateOp:
    """The op of an update node: the optimizer's step over `params` given their gradients."""

    n_out = 0
    effect = True  # changes state: dead-code elimination keeps it

    def __init__(self, optimizer, group_index, params):
        self.optimizer, self.group_index, self.params = optimizer, group_index, params
        self.name = f"{type(optimizer).__name__.lower()}_update"

    def __repr__(self):
        return f"<update op {self.name}>"

    def kernel(self, xp, *grads):
        optimizer = self.optimizer
        plain = getattr(optimizer, "_step_plain", None)
        if plain is not None and plain(optimizer.param_groups[self.group_index], self.params,
                                       grads):
            return
        if len(grads) == 1 and grads[0].size <= SMALL:
            # one small parameter: the reference step (same numbers as the batched one),
            # without the batching set-up; a large one takes the batched path, whose scratch
            # arrays keep the temporaries out of the step's peak memory
            with no_grad():
                group = optimizer._prepared(optimizer.param_groups[self.group_index])
                optimizer._step_one(self.params[0], Tensor._wrap(grads[0]), group)
            return
        group = dict(optimizer.param_groups[self.group_index])
        group["params"] = self.params
        metas = [p._meta for p in self.params]
        for meta, g in zip(metas, grads):
            meta.acc_grad = Tensor._wrap(g)
        try:
            with no_grad():
                optimizer._step_params(group)
        finally:
            for meta in metas:
                meta.acc_grad = None


def in_plan(optimizer, config):
    """Whether `optimizer`'s update can run inside the plan (see the module docstring)."""
    if type(optimizer).step is not Optimizer.step and not \
            type(optimizer).__dict__.get("_takes_sparse_only"):
        return False
    params = [p for g in optimizer.param_groups for p in g["params"]]
    return len({id(p) for p in params}) == len(params) and still_in_plan(optimizer, config)


def still_in_plan(optimizer, config):
    """in_plan's conditions that a user may change after the graph compiled (its param groups
    are checked by `param_layout`): no gradient accumulation, no step hook, no clipping."""
    if config.gradient_accumulation_steps != 1 or optimizer._step_pre_hooks or \
            optimizer._step_post_hooks or _optimizer._GLOBAL_STEP_PRE_HOOKS or \
            _optimizer._GLOBAL_STEP_POST_HOOKS:
        return False
    return not any("clip_grad_max_norm" in g for g in optimizer.param_groups)


def plan_updates(program, optimizers, config):
    """Record on the Program which gradients the update pass turns into update nodes; return
    the optimizers left to the eager update after the plan."""
    fused = config.switches.get("allow_fuse_model_update_ops", ((False,), {}))[0][:1] == (True,)
    program.updates, eager = [], []
    for optimizer in optimizers:
        # a parameter written in place inside build: the plan writes it back last, so its
        # optimizer steps after the plan
        if not in_plan(optimizer, config) or any(
                p in program.writebacks for g in optimizer.param_groups for p in g["params"]):
            eager.append(optimizer)
            continue
        for gi, group in enumerate(optimizer.param_groups):
            params = [p for p in group["params"] if p in program.grads]
            chunks = [params] if fused else [[p] for p in params]
            program.updates += [UpdateOp(optimizer, gi, c) for c in chunks if c]
    return eager


def place_updates(program):
    """The update pass: one node per UpdateOp recorded by `plan_updates`, after the last node
    that reads its parameters or produces their gradients; those gradients stop being
    results of the plan."""
    updates = getattr(program, "updates", ())
    if not updates:
        return program
    state_of = {id(v.source): v.id for v in program.values if v.kind == STATE}
    position = _last_use(program)
    after = {}  # node index -> update nodes to insert after it (-1: before every node)
    for update in updates:
        grads = [program.grads.pop(p) for p in update.params]
        ids = [g.id for g in grads] + [state_of.get(id(p), -1) for p in update.params]
        at = max(position.get(i, -1) for i in ids)
        after.setdefault(at, []).append(Node(update, grads, {}, [], "update"))
    nodes = after.get(-1, [])
    for i, node in enumerate(program.nodes):
        nodes.append(node)
        nodes += after.get(i, [])
    program.nodes = nodes
    return program


def param_layout(optimizers):
    """Which parameters each optimizer's groups hold: a compiled update covers exactly these."""
    return [tuple(tuple(map(id, g["params"])) for g in opt.param_groups)
            for opt, _ in optimizers]


def _last_use(program):
    """Value id -> index of the last node that produces or reads it, or reads a view of it
    (an update writes the parameter's array in place: no view of it may be read later)."""
    base = {}  # value id -> the value it is a view of
    position = {}
    for i, node in enumerate(program.nodes):
        for v in node.inputs + node.outputs:
            position[v.id] = i
            root = base.get(v.id)
            if root is not None:
                position[root] = i
        if getattr(node.op, "is_view", False) and node.inputs:
            viewed = node.inputs[0]  # the others are indices and the like
            for out in node.outputs:
                base[out.id] = base.get(viewed.id, viewed.id)
    return position


__all__ = ["UpdateOp", "in_plan", "param_layout", "plan_updates", "place_updates"]
