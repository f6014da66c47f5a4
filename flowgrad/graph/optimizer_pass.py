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

A plain SGD step (`SGD._plain_rate`) of a parameter whose gradient comes from a linear
layer's weight-gradient product or a bias's sum over the batch joins that node
(`fuse_plain_steps`): p -= lr * dy^T x is one GEMM adding into p (alpha = -lr, beta = 1), the
bias's one gemv, and the gradient is never stored. Those numbers round once fewer than
eager's (the gradient is not rounded before the step): equal up to the last ulp.

Optimizers whose step needs more than gradients stay eager after the plan: gradient
clipping (`clip_grad_max_norm`), gradient accumulation, step hooks, a custom `step`
(closures), a parameter in two groups or written in place by the step.
"""
from __future__ import annotations

import functools

from .. import blas
from ..autograd.grad_mode import no_grad
from ..ops.summation import leading_sum_add
from ..optim import optimizer as _optimizer
from ..optim._foreach import SMALL, bump
from ..optim.optimizer import Optimizer
from ..tensor import Tensor
from .ir import Node


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
    state_of = {id(v.source): v.id for v in program.states}
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


class PlainStepOp:
    """The op of a node computing a gradient (`producer`) fused with the plain SGD update of
    the one parameter it is the gradient of: `step(p, -lr, *inputs)` adds -lr times the
    gradient into p without storing it, where it can; else the gradient, then the update."""

    n_out = 0
    effect = True

    def __init__(self, update, producer, step):
        self.update, self.step = update, step
        self.optimizer, self.group_index, self.params = \
            update.optimizer, update.group_index, update.params
        attrs = producer.attrs
        self.gradient = functools.partial(producer.op.kernel, **attrs) if attrs else \
            producer.op.kernel
        self.name = f"{update.name}[{producer.op.name}]"

    def __repr__(self):
        return f"<update op {self.name}>"

    def kernel(self, xp, *inputs):
        update = self.update
        param = update.params[0]
        neg_lr = update.optimizer._plain_rate(update.optimizer.param_groups[update.group_index])
        if neg_lr is not None and self.step(param._data, neg_lr, *inputs):
            bump(param)
            return
        update.kernel(xp, self.gradient(xp, *inputs))


# a fused weight step takes MKL's GEMM from this many multiply-adds on (blas.GEMM_MIN for a
# bare product): it replaces a product on NumPy, a temporary and a pass of the update
_STEP_GEMM_MIN = 1 << 18


def _weight_step(p, neg_lr, dy, x):
    """p += neg_lr * dy^T @ x over all leading dims: linear_wgrad's product for a 2-D weight,
    by one GEMM into p."""
    return dy.ndim == x.ndim > 1 and blas.matmul_add(
        dy.reshape(-1, dy.shape[-1]).T, x.reshape(-1, x.shape[-1]), p, neg_lr,
        least=_STEP_GEMM_MIN)


def _bias_step(attrs):
    """The step for a sum over leading axes into a parameter (a bias's gradient), or None."""
    axes = attrs.get("axes")
    if attrs.get("keepdim") or not axes or axes != tuple(range(len(axes))):
        return None
    lead = len(axes)
    return lambda p, neg_lr, g: g.ndim > lead and leading_sum_add(g, lead, p, neg_lr)


_PLAIN_STEPS = {"linear_wgrad": lambda attrs: _weight_step, "sum": _bias_step}


def fuse_plain_steps(program):
    """Fuse each one-parameter update of an optimizer with a plain step (`_plain_rate`) into
    the node right before it when that node computes the gradient, alone reads nothing the
    update changes (the update was placed after the parameter's last reader) and is a kind
    `_PLAIN_STEPS` knows; the gradient must have no other reader. The fused node checks the
    step is still plain on every run, and falls back to the gradient and the update."""
    results = {v.id for v in program.results()}
    reads = {}
    for node in program.nodes:
        for v in node.inputs:
            reads[v.id] = reads.get(v.id, 0) + 1
    nodes = []
    for node in program.nodes:
        op, producer = node.op, nodes[-1] if nodes else None
        if type(op) is UpdateOp and len(op.params) == 1 and producer is not None and \
                hasattr(op.optimizer, "_plain_rate") and len(producer.outputs) == 1 and \
                node.inputs == producer.outputs and reads[node.inputs[0].id] == 1 and \
                node.inputs[0].id not in results:
            make = _PLAIN_STEPS.get(getattr(producer.op, "name", None))
            step = make(producer.attrs) if make is not None else None
            if step is not None:
                fused = Node(PlainStepOp(op, producer, step), producer.inputs, {}, [], "update")
                fused.where = producer.where
                nodes[-1] = fused
                continue
        nodes.append(node)
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


__all__ = ["UpdateOp", "PlainStepOp", "in_plan", "param_layout", "plan_updates",
           "place_updates", "fuse_plain_steps"]
