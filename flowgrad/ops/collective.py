"""Collectives as differentiable ops: what `flowgrad.distributed.nn.functional` (torch's
`torch.distributed.nn.functional`) and an in-place `dist.all_reduce` of an activation record.
Each kernel makes its MPI call through the group's ordered runner; each rule is again a
collective (every rank's backward makes the matching call), written with these ops, so the
backward is itself differentiable.

    all_reduce (SUM)       backward: all_reduce (SUM) of the gradient
    broadcast from src     backward: the gradients summed onto src, zero elsewhere
    all_gather             backward: reduce_scatter (SUM)
    reduce_scatter (SUM)   backward: all_gather
    all_to_all_single      backward: all_to_all_single with the splits swapped

The ops need an initialised process group; `flowgrad.distributed.nn.functional` holds the
examples.
"""
from __future__ import annotations

import math

from ..distributed import wire
from ..distributed.process_group import ReduceOp
from .creation import zeros_like
from .registry import op

_LINEAR = (ReduceOp.SUM, ReduceOp.AVG)


def _linear_only(name, reduce_op):
    if reduce_op not in _LINEAR:
        raise RuntimeError(
            f"{name}: the gradient of ReduceOp.{ReduceOp(reduce_op).name} is not implemented "
            f"(only SUM and AVG are linear); detach() the input or reduce with SUM")


@op("all_reduce")
def all_reduce_op(xp, x, reduce_op, group):
    y = xp.array(x, order="C")
    group.run("all_reduce", lambda: wire.all_reduce(group, y, reduce_op), False)
    return y


@all_reduce_op.grad
def all_reduce_backward(ctx, dy):
    _linear_only("all_reduce", ctx.reduce_op)
    return all_reduce_op(dy, reduce_op=ctx.reduce_op, group=ctx.group)


@op("broadcast")
def broadcast_op(xp, x, root, group):
    y = xp.array(x, order="C")
    group.run("broadcast", lambda: wire.broadcast(group, y, root), False)
    return y


@broadcast_op.grad
def broadcast_backward(ctx, dy):
    total = all_reduce_op(dy, reduce_op=ReduceOp.SUM, group=ctx.group)  # every rank joins
    return total if ctx.group.rank() == ctx.root else zeros_like(dy)


@op("all_gather")
def all_gather_op(xp, x, group):
    src = xp.ascontiguousarray(x)
    out = xp.empty((group.size(),) + x.shape, x.dtype)
    group.run("all_gather", lambda: wire.all_gather(group, src, out), False)
    return out


@all_gather_op.grad
def all_gather_backward(ctx, dy):
    part = reduce_scatter_op(dy, reduce_op=ReduceOp.SUM, group=ctx.group)
    return part.reshape(ctx.input_shapes[0])


@op("reduce_scatter")
def reduce_scatter_op(xp, x, reduce_op, group):
    size = group.size()
    if x.ndim == 0 or x.shape[0] % size:
        raise ValueError(f"reduce_scatter: the input's first dim ({x.shape}) must be a "
                         f"multiple of the group size {size}")
    src = xp.ascontiguousarray(x)
    out = xp.empty((x.shape[0] // size,) + x.shape[1:], x.dtype)
    group.run("reduce_scatter_tensor",
              lambda: wire.reduce_scatter(group, src, out, reduce_op), False)
    return out


@reduce_scatter_op.grad
def reduce_scatter_backward(ctx, dy):
    _linear_only("reduce_scatter", ctx.reduce_op)
    whole = all_gather_op(dy, group=ctx.group).reshape(ctx.input_shapes[0])
    return whole / ctx.group.size() if ctx.reduce_op == ReduceOp.AVG else whole


@op("all_to_all_single")
def all_to_all_op(xp, x, out_splits, in_splits, group):
    row = math.prod(x.shape[1:])
    src = xp.ascontiguousarray(x)
    out = xp.empty((sum(out_splits),) + x.shape[1:], x.dtype)
    group.run("all_to_all_single", lambda: wire.all_to_all(
        group, src, out, [s * row for s in in_splits], [s * row for s in out_splits]), False)
    return out


@all_to_all_op.grad
def all_to_all_single_backward(ctx, dy):
    return all_to_all_op(dy, out_splits=ctx.in_splits, in_splits=ctx.out_splits,
                         group=ctx.group)
