"""Collectives that autograd records, as torch.distributed.nn.functional: each returns a
new tensor and backpropagates through the matching collective (see ops/collective.py).

Under `python -m flowgrad.distributed.run --nproc-per-node 2`:

>>> import flowgrad as flow
>>> import flowgrad.distributed as dist
>>> from flowgrad.distributed.nn.functional import all_reduce
>>> x = flow.ones(2, requires_grad=True)
>>> y = all_reduce(x * (dist.get_rank() + 1)); y                  # doctest: +SKIP
tensor([3., 3.], grad_fn=<AllReduceBackward0>)
>>> y.sum().backward()        # each rank's dy = 1, summed: 2    # doctest: +SKIP
>>> x.grad / (dist.get_rank() + 1)                                   # doctest: +SKIP
tensor([2., 2.])
"""
from __future__ import annotations

from ...ops.collective import (
    all_gather_op,
    all_reduce_op,
    all_to_all_op,
    broadcast_op,
    reduce_scatter_op,
)
from ..process_group import ReduceOp, resolve
from ..wire import reduce_op

__all__ = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all_single"]


def _group(group, what):
    pg = resolve(group, what)
    if pg is None:
        raise RuntimeError(f"{what}: this rank is not a member of the group")
    return pg


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """The reduction of `tensor` over the group, as a new tensor; its gradient is the
    all-reduce (SUM, or AVG for AVG) of the output's gradient."""
    return all_reduce_op(tensor, reduce_op=reduce_op(op, "all_reduce"),
                         group=_group(group, "all_reduce"))


def broadcast(tensor, src=0, group=None):
    """Rank `src`'s `tensor` on every rank; gradients are summed back onto `src`."""
    pg = _group(group, "broadcast")
    return broadcast_op(tensor, root=pg.group_rank(src, "broadcast"), group=pg)


def all_gather(tensor, group=None):
    """A tuple of every rank's `tensor`, in rank order; gradients are reduce-scattered."""
    return tuple(all_gather_op(tensor, group=_group(group, "all_gather")).unbind(0))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None):
    """This rank's entry of the reduction of every rank's `input_list` (torch's signature;
    `output` gives only the shape)."""
    from ... import stack

    pg = _group(group, "reduce_scatter")
    if len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors; it needs "
                         f"one per rank ({pg.size()})")
    out = reduce_scatter_op(stack(list(input_list)), reduce_op=reduce_op(op, "reduce_scatter"),
                            group=pg)
    return out.reshape(output.shape)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None):
    """`input` split along dim 0 and exchanged (see dist.all_to_all_single), as a new tensor
    shaped like `output`; its gradient goes back the same way."""
    from ..collectives import _splits

    pg = _group(group, "all_to_all_single")
    ins = _splits(input_split_sizes, input.shape[0], pg.size(), "input")
    outs = _splits(output_split_sizes, output.shape[0], pg.size(), "output")
    return all_to_all_op(input, out_splits=tuple(outs), in_splits=tuple(ins), group=pg)
