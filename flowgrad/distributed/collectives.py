"""torch.distributed's collectives on flowgrad tensors, in place: `all_reduce`,
`broadcast`, `reduce`, `all_gather`, `all_gather_into_tensor`, `reduce_scatter_tensor`,
`gather`, `scatter`, `all_to_all_single`, `send`/`recv`/`isend`/`irecv`,
`all_gather_object`, `broadcast_object_list`.

`async_op=True` returns a `Work`; the tensors hold the result after `work.wait()`.
Roots (`src`, `dst`) are global ranks, as torch's; `group_src`/`group_dst` are ranks in the
group. Every rank checks that all called the same collective with the same element count
and dtype (one small all-reduce), so a mismatch raises on every rank instead of hanging.

An in-place `all_reduce` or `broadcast` of an activation (a tensor with history) is
recorded by autograd: its backward is the matching collective of the gradient (torch's
in-place collectives backpropagate as the identity, with a warning).

Examples (under `python -m flowgrad.distributed.run --nproc-per-node 2`):

>>> import flowgrad as flow
>>> import flowgrad.distributed as dist
>>> t = flow.tensor([1.0, 2.0]) * (dist.get_rank() + 1)      # doctest: +SKIP
>>> dist.all_reduce(t); t                                     # doctest: +SKIP
tensor([3., 6.])
>>> work = dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True)  # doctest: +SKIP
>>> work.wait(); t                                            # doctest: +SKIP
True
tensor([3., 6.])
"""
from __future__ import annotations

import numpy as np

from ..autograd import grad_mode
from ..autograd.inplace import assign, bump_version, run_inplace
from ..ops.collective import all_reduce_op, broadcast_op
from ..tensor import Tensor
from . import wire
from .process_group import _STATE, ReduceOp, Work, _mpi, _watch, fingerprint, resolve

__all__ = ["all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
           "reduce_scatter_tensor", "gather", "scatter", "all_to_all_single", "send", "recv",
           "isend", "irecv", "all_gather_object", "broadcast_object_list"]


def _array(t, what, name="tensor"):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {name} must be a flowgrad Tensor, got {type(t).__name__}")
    return t._data


def _readable(t, what, name="tensor"):
    return np.ascontiguousarray(_array(t, what, name))


class _Target:
    """A tensor a collective writes: MPI writes its own array when contiguous, else a
    contiguous copy that `done()` puts back; either way the version moves, as in place."""

    __slots__ = ("tensor", "buf")

    def __init__(self, tensor, what, name="tensor"):
        data = _array(tensor, what, name)
        self.tensor = tensor
        ok = data.flags.c_contiguous and data.flags.writeable
        self.buf = data if ok else np.ascontiguousarray(data)

    def done(self):
        if self.buf is not self.tensor._data:
            assign(self.tensor._data, self.buf, "collective")
        bump_version(self.tensor)


def _recorded(tensor):
    """An activation (history, grad mode on): the collective goes through autograd."""
    return grad_mode.is_grad_enabled() and tensor._grad_fn is not None


def _root(pg, rank, group_rank, what, name):
    if group_rank is not None:
        if rank is not None:
            raise ValueError(f"{what}: pass {name} or group_{name}, not both")
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"{what}: group_{name}={group_rank} is outside {pg!r}")
        return group_rank
    return pg.group_rank(0 if rank is None else rank, what)


def _per_rank(tensors, pg, like, what, name, given=True, role=""):
    """Check `tensors`: one per rank, each with the elements and dtype of the array `like`;
    or, where `given` is False (not the root), that none were passed, as torch's."""
    if not given:
        if tensors:
            raise ValueError(f"{what}: Argument ``{name}`` must NOT be specified on "
                             f"non-{role} ranks.")
        return
    if tensors is None or len(tensors) != pg.size():
        raise ValueError(f"{what}: {name} needs one tensor per rank of the group "
                         f"({pg.size()}), got {None if tensors is None else len(tensors)}")
    for i, t in enumerate(tensors):
        data = _array(t, what, f"{name}[{i}]")
        if data.size != like.size or data.dtype != like.dtype:
            raise ValueError(f"{what}: {name}[{i}] has {data.size} elements of {data.dtype}; "
                             f"each must have {like.size} elements of {like.dtype}, as the "
                             f"tensor")


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` over all ranks of the group, in place; every rank gets the result."""
    pg = _STATE.default if group is None else None  # (the common case without a call)
    if pg is None:
        pg = resolve(group, "all_reduce")
        if pg is None:
            return None
    if type(op) is not ReduceOp:
        op = wire.reduce_op(op, "all_reduce")
    data = _array(tensor, "all_reduce")
    flags = data.flags
    if not async_op and tensor._grad_fn is None and flags.c_contiguous \
            and flags.writeable:  # the common case, kept short: MPI writes the tensor
        pg.call("all_reduce", wire.all_reduce, pg, data, op)
        bump_version(tensor)
        return None
    if _recorded(tensor):
        run_inplace("all_reduce", lambda src: all_reduce_op(src, reduce_op=op, group=pg), tensor)
        return Work.completed([tensor]) if async_op else None
    target = _Target(tensor, "all_reduce")

    def run():
        wire.all_reduce(pg, target.buf, op)
        target.done()
    return pg.run("all_reduce", run, async_op, [tensor])


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy `tensor` of rank `src` into `tensor` of every rank, in place."""
    pg = resolve(group, "broadcast")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "broadcast", "src")
    _array(tensor, "broadcast")
    if _recorded(tensor):
        run_inplace("broadcast", lambda t: broadcast_op(t, root=root, group=pg), tensor)
        return Work.completed([tensor]) if async_op else None
    target = _Target(tensor, "broadcast")

    def run():
        wire.broadcast(pg, target.buf, root)
        if pg.rank() != root:
            target.done()
    return pg.run("broadcast", run, async_op, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce `tensor` over the group into `tensor` of rank `dst`; the others' are kept."""
    pg = resolve(group, "reduce")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "reduce", "dst")
    op = wire.reduce_op(op, "reduce")
    target = _Target(tensor, "reduce")

    def run():
        MPI = _mpi()
        buf = target.buf  # only the root's is written
        data, mpi_op = wire.reducible(buf, op, "reduce")
        pg.check_same("reduce", *fingerprint("reduce", buf, root, op))
        if pg.rank() == root:
            pg.comm.Reduce(MPI.IN_PLACE, data, op=mpi_op, root=root)
            wire.finish(buf, data, op, pg.size())
            target.done()
        else:
            pg.comm.Reduce(data, None, op=mpi_op, root=root)
    return pg.run("reduce", run, async_op, [tensor])


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fill `tensor_list` (one tensor per rank) with every rank's `tensor`."""
    pg = resolve(group, "all_gather")
    if pg is None:
        return None
    src = _readable(tensor, "all_gather")
    _per_rank(tensor_list, pg, src, "all_gather", "tensor_list")
    out = np.empty((pg.size(),) + src.shape, src.dtype)

    def run():
        wire.all_gather(pg, src, out)
        for t, part in zip(tensor_list, out):
            assign(t._data, part.reshape(t._data.shape), "all_gather")
            bump_version(t)
    return pg.run("all_gather", run, async_op, tensor_list)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """`output_tensor` (world_size times the input's elements: concatenated or stacked)
    <- every rank's `input_tensor`, in rank order."""
    pg = resolve(group, "all_gather_into_tensor")
    if pg is None:
        return None
    src = _readable(input_tensor, "all_gather_into_tensor", "input_tensor")
    target = _Target(output_tensor, "all_gather_into_tensor", "output_tensor")
    if target.buf.size != src.size * pg.size() or target.buf.dtype != src.dtype:
        raise ValueError(
            f"all_gather_into_tensor: output_tensor {tuple(target.buf.shape)} {target.buf.dtype} "
            f"must hold {pg.size()} x the input {tuple(src.shape)} {src.dtype} (same dtype)")

    def run():
        wire.all_gather(pg, src, target.buf, "all_gather_into_tensor")
        target.done()
    return pg.run("all_gather_into_tensor", run, async_op, [output_tensor])


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """`output` <- this rank's block of the reduction of every rank's `input` (which holds
    world_size blocks of output's size, in rank order)."""
    pg = resolve(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    op = wire.reduce_op(op, "reduce_scatter_tensor")
    src = _readable(input, "reduce_scatter_tensor", "input")
    target = _Target(output, "reduce_scatter_tensor", "output")
    if src.size != target.buf.size * pg.size() or target.buf.dtype != src.dtype:
        raise ValueError(
            f"reduce_scatter_tensor: input {tuple(src.shape)} {src.dtype} must hold "
            f"{pg.size()} x the output {tuple(target.buf.shape)} {target.buf.dtype}")

    def run():
        wire.reduce_scatter(pg, src, target.buf, op)
        target.done()
    return pg.run("reduce_scatter_tensor", run, async_op, [output])


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """Rank `dst`'s `gather_list` (one tensor per rank) <- every rank's `tensor`."""
    pg = resolve(group, "gather")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "gather", "dst")
    src = _readable(tensor, "gather")
    me = pg.rank() == root
    _per_rank(gather_list, pg, src, "gather", "gather_list", me, "destination")
    out = np.empty((pg.size(),) + src.shape, src.dtype) if me else None

    def run():
        pg.check_same("gather", *fingerprint("gather", src, root))
        pg.comm.Gather(wire.movable(src), wire.movable(out) if me else None, root=root)
        if me:
            for t, part in zip(gather_list, out):
                assign(t._data, part.reshape(t._data.shape), "gather")
                bump_version(t)
    return pg.run("gather", run, async_op, gather_list)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """`tensor` of rank r <- `scatter_list[r]` of rank `src`."""
    pg = resolve(group, "scatter")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "scatter", "src")
    target = _Target(tensor, "scatter")
    me = pg.rank() == root
    _per_rank(scatter_list, pg, target.buf, "scatter", "scatter_list", me, "source")
    if me:
        parts = np.stack([np.ascontiguousarray(t._data).reshape(-1) for t in scatter_list])

    def run():
        pg.check_same("scatter", *fingerprint("scatter", target.buf, root))
        pg.comm.Scatter(wire.movable(parts) if me else None, wire.movable(target.buf),
                        root=root)
        target.done()
    return pg.run("scatter", run, async_op, [tensor])


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """Split `input` along dim 0 (equally, or by `input_split_sizes`) and send part j to
    rank j; `output` receives rank i's part in block i (sized by `output_split_sizes`)."""
    pg = resolve(group, "all_to_all_single")
    if pg is None:
        return None
    src = _readable(input, "all_to_all_single", "input")
    target = _Target(output, "all_to_all_single", "output")
    if src.dtype != target.buf.dtype or src.shape[1:] != target.buf.shape[1:]:
        raise ValueError(f"all_to_all_single: input {tuple(src.shape)} {src.dtype} and output "
                         f"{tuple(target.buf.shape)} {target.buf.dtype} must agree in dtype "
                         f"and in every dim but the first")
    ins = _splits(input_split_sizes, src.shape[0], pg.size(), "input")
    outs = _splits(output_split_sizes, target.buf.shape[0], pg.size(), "output")
    row = int(np.prod(src.shape[1:]))

    def run():
        wire.all_to_all(pg, src, target.buf, [s * row for s in ins], [s * row for s in outs])
        target.done()
    return pg.run("all_to_all_single", run, async_op, [output])


def _splits(sizes, rows, world, name):
    if sizes is None or len(sizes) == 0:
        if rows % world:
            raise ValueError(f"all_to_all_single: the {name}'s first dim ({rows}) must divide "
                             f"by the group size {world}, or pass {name}_split_sizes")
        return [rows // world] * world
    sizes = [int(s) for s in sizes]
    if len(sizes) != world or sum(sizes) != rows or min(sizes) < 0:
        raise ValueError(f"all_to_all_single: {name}_split_sizes {sizes} must be {world} "
                         f"non-negative sizes summing to the {name}'s first dim ({rows})")
    return sizes


# ---- point to point: bytes, so a size mismatch is seen before the receive --------------
def _bytes(a):
    """The bytes of the contiguous array `a` (a view: a receive writes into a)."""
    return a.reshape(-1).view(np.uint8)


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send `tensor` to rank `dst` (blocks until it can be reused)."""
    pg = resolve(group, "send")
    if pg is None:
        return None
    peer = _root(pg, dst, group_dst, "send", "dst")
    data = _bytes(_readable(tensor, "send"))
    _watch("send", lambda: pg.comm.Send(data, dest=peer, tag=tag), pg)


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into `tensor` from rank `src` (any rank if None); returns the sender's rank."""
    pg = resolve(group, "recv")
    if pg is None:
        return -1
    MPI = _mpi()
    peer = MPI.ANY_SOURCE if src is None and group_src is None else _root(
        pg, src, group_src, "recv", "src")
    target = _Target(tensor, "recv")
    status = MPI.Status()
    _watch("recv", lambda: pg.comm.Probe(source=peer, tag=tag, status=status), pg)
    size = status.Get_count(MPI.BYTE)
    if size != target.buf.nbytes:
        raise RuntimeError(
            f"recv: the message from rank {pg.ranks[status.source]} has {size} bytes, but the "
            f"tensor {tuple(target.buf.shape)} {target.buf.dtype} holds {target.buf.nbytes}; "
            f"send and receive tensors of the same size and dtype")
    pg.comm.Recv(_bytes(target.buf), source=status.source, tag=status.tag)
    target.done()
    return pg.ranks[status.source]


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """`send` without waiting: returns a Work; don't change `tensor` before `wait()`."""
    pg = resolve(group, "isend")
    if pg is None:
        return None
    peer = _root(pg, dst, group_dst, "isend", "dst")
    data = _bytes(_readable(tensor, "isend"))
    return Work(request=pg.comm.Isend(data, dest=peer, tag=tag),
                finish=lambda status, keep=data: None)  # data lives until the send is done


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """`recv` without waiting: returns a Work; `tensor` holds the message after `wait()`,
    and `work.source_rank()` says who sent it."""
    pg = resolve(group, "irecv")
    if pg is None:
        return None
    MPI = _mpi()
    peer = MPI.ANY_SOURCE if src is None and group_src is None else _root(
        pg, src, group_src, "irecv", "src")
    target = _Target(tensor, "irecv")

    def finish(status):
        target.done()
        return pg.ranks[status.source]
    return Work(request=pg.comm.Irecv(_bytes(target.buf), source=peer, tag=tag),
                finish=finish)


# ---- Python objects (pickled, as torch's; between ranks of one job) ----------------------
def all_gather_object(object_list, obj, group=None):
    """Fill `object_list` (one slot per rank) with every rank's picklable `obj`."""
    pg = resolve(group, "all_gather_object")
    if pg is None:
        return None
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} slots; it "
                         f"needs one per rank ({pg.size()})")

    def run():
        pg.check_same("all_gather_object", *fingerprint("all_gather_object"))
        object_list[:] = pg.comm.allgather(obj)
    pg.run("all_gather_object", run, False)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Replace the entries of `object_list` by those of rank `src` (same length on all)."""
    pg = resolve(group, "broadcast_object_list")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "broadcast_object_list", "src")

    def run():
        pg.check_same("broadcast_object_list",
                      *fingerprint("broadcast_object_list", np.empty(len(object_list)), root))
        object_list[:] = pg.comm.bcast(list(object_list) if pg.rank() == root else None, root)
    pg.run("broadcast_object_list", run, False)
