"""Collectives on NumPy arrays: how each dtype travels through MPI, the agreement check,
and the MPI call. `collectives.py` (tensors, in place) and `flowgrad/ops/collective.py`
(differentiable ops) both end here.

MPI moves bytes of any dtype, but reduces only its own types: bool is reduced as uint8
(SUM/MAX are OR, MIN/PRODUCT are AND, as torch's), bfloat16 in float32, and AVG is SUM then
a division (MPI has no AVG).

>>> import numpy as np
>>> from flowgrad.distributed.wire import movable
>>> import ml_dtypes
>>> movable(np.zeros(2, ml_dtypes.bfloat16)).dtype
dtype('uint16')
"""
from __future__ import annotations

import numpy as np

from .process_group import _KIND_CODE, _STATE, ReduceOp, _mpi, dtype_code, fingerprint

_KIND_ALL_REDUCE = _KIND_CODE["all_reduce"]

_MPI_OP = {ReduceOp.SUM: "SUM", ReduceOp.AVG: "SUM", ReduceOp.PRODUCT: "PROD",
           ReduceOp.MIN: "MIN", ReduceOp.MAX: "MAX", ReduceOp.BAND: "BAND", ReduceOp.BOR: "BOR",
           ReduceOp.BXOR: "BXOR"}
_BOOL_OP = {ReduceOp.SUM: "MAX", ReduceOp.MAX: "MAX", ReduceOp.BOR: "MAX", ReduceOp.MIN: "MIN",
            ReduceOp.PRODUCT: "MIN", ReduceOp.BAND: "MIN", ReduceOp.BXOR: "BXOR"}


def reduce_op(op, what):
    """`op` as a ReduceOp, or a clear error."""
    if type(op) is ReduceOp:
        return op
    try:
        return ReduceOp(op)
    except ValueError:
        raise ValueError(f"{what}: unknown reduction {op!r}; use dist.ReduceOp.SUM, AVG, "
                         f"PRODUCT, MIN, MAX, BAND, BOR or BXOR") from None


def movable(a):
    """`a` as MPI can carry it (a view: bfloat16 travels as its 16 bits)."""
    return a.view(np.uint16) if a.dtype.name == "bfloat16" else a


def reducible(buf, op, what):
    """(array MPI reduces in place of buf, the MPI op): buf itself, a view, or a widened copy
    that `finish` writes back."""
    mpi_op, widen, _ = plan(buf.dtype, op, what)
    if widen:
        return buf.astype(np.float32), mpi_op
    return (buf.view(np.uint8) if buf.dtype.kind == "b" else buf), mpi_op


_PLANS: dict = {}  # (dtype, op) -> (MPI op, widen to float32, AVG), checked once per pair


def plan(dtype, op, what):
    """How `op` reduces `dtype` over MPI: (MPI op, widened to float32?, divide after?), or
    a clear error for a pair MPI cannot reduce."""
    found = _PLANS.get((dtype, op))
    if found is not None:
        return found
    kind = dtype.kind
    if op == ReduceOp.AVG and kind not in "fcV":
        raise TypeError(f"{what}: ReduceOp.AVG needs a floating tensor, got {dtype}; "
                        f"use SUM and divide, or convert the tensor to a float dtype")
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and kind not in "iub":
        raise TypeError(f"{what}: ReduceOp.{op.name} needs an integer or bool tensor, got "
                        f"{dtype}")
    if kind == "c" and op in (ReduceOp.MIN, ReduceOp.MAX):
        raise TypeError(f"{what}: ReduceOp.{op.name} is undefined for complex tensors "
                        f"({dtype}); reduce .real and .imag, or .abs()")
    name = _BOOL_OP[op] if kind == "b" else _MPI_OP[op]
    MPI = _mpi()
    _MPI_IN_PLACE[0] = MPI.IN_PLACE
    found = _PLANS[(dtype, op)] = (getattr(MPI, name), kind == "V", op == ReduceOp.AVG)
    return found


_MPI_IN_PLACE = [None]  # MPI.IN_PLACE once MPI is imported (plan() runs first)


def finish(buf, wire, op, size):
    """After a reduction into `wire`: AVG's division, then the copy into buf if wire is a
    widened copy."""
    if op == ReduceOp.AVG:
        np.divide(wire, size, out=wire)
    if not np.may_share_memory(wire, buf):
        buf[...] = wire


def like(buf, wire_dtype):
    """A result array of `wire_dtype` for `buf`: a view of buf when the bits agree."""
    if wire_dtype == buf.dtype or (buf.dtype.kind == "b" and wire_dtype == np.uint8):
        return buf.view(wire_dtype)
    return np.empty(buf.shape, wire_dtype)


def all_reduce(pg, buf, op):
    """Reduce the contiguous array `buf` over the group, in place."""
    key = (buf.dtype, op._value_, buf.size)  # (an enum's own hash is a Python call)
    known = pg.plans.get(key)
    if known is None:  # once per (dtype, op, size) and group: the checks and lookups
        if len(pg.plans) > 4096:
            pg.plans.clear()
        fields = (_KIND_ALL_REDUCE, -1, int(op), buf.size, dtype_code(buf.dtype))
        known = pg.plans[key] = (
            plan(buf.dtype, op, "all_reduce"), buf.dtype.kind == "b", pg.signature(fields))
    (mpi_op, widen, avg), as_bytes, signature = known
    if _STATE.debug_level:
        pg.agree("all_reduce", signature)
    if widen:  # bfloat16: reduced in float32, rounded back
        wire = buf.astype(np.float32)
        _all_reduce_in_place(pg.comm, wire, mpi_op)
        finish(buf, wire, op, pg.size())
        return
    data = buf.view(np.uint8) if as_bytes else buf
    if data.nbytes <= _WHOLE_BYTES:  # (the common case without a call more)
        pg.comm.Allreduce(_MPI_IN_PLACE[0], data, op=mpi_op)
    else:
        _all_reduce_in_place(pg.comm, data, mpi_op)
    if avg:
        np.divide(buf, pg.size(), out=buf)


_WHOLE_BYTES = 4 << 20  # a larger all-reduce goes in pieces of _PIECE_BYTES
_PIECE_BYTES = 1 << 20


def _all_reduce_in_place(comm, data, mpi_op):
    """MPI's all-reduce of the contiguous array `data` into itself; a large one in pieces that
    stay in cache (2 ranks, shared memory: 64 MiB whole ran at 2.0 GB/s, in 1 MiB pieces at
    7.5; the reduction is elementwise, so the result is the same)."""
    if data.nbytes <= _WHOLE_BYTES:
        comm.Allreduce(_MPI_IN_PLACE[0], data, op=mpi_op)
        return
    flat = data.reshape(-1)
    step = _PIECE_BYTES // flat.itemsize
    for start in range(0, flat.size, step):
        comm.Allreduce(_MPI_IN_PLACE[0], flat[start:start + step], op=mpi_op)


def broadcast(pg, buf, root):
    pg.check_same("broadcast", *fingerprint("broadcast", buf, root))
    pg.comm.Bcast(movable(buf), root=root)


def all_gather(pg, src, out, what="all_gather"):
    """out (size*src.size elements, contiguous) <- every rank's src, in rank order."""
    pg.check_same(what, *fingerprint("all_gather", src))
    pg.comm.Allgather(movable(src), movable(out))


def reduce_scatter(pg, src, out, op):
    """out <- this rank's block of the reduction of every rank's src."""
    wire_in, mpi_op = reducible(src, op, "reduce_scatter_tensor")
    pg.check_same("reduce_scatter_tensor", *fingerprint("reduce_scatter_tensor", src, op=op))
    wire_out = like(out, wire_in.dtype)
    pg.comm.Reduce_scatter_block(wire_in, wire_out, op=mpi_op)
    finish(out, wire_out, op, pg.size())


def all_to_all(pg, src, out, send_counts, recv_counts):
    """Alltoallv of element counts per peer; the peers' counts are checked first, on every
    rank, so a mismatch raises everywhere instead of corrupting or hanging."""
    pg.check_same("all_to_all_single", *fingerprint("all_to_all_single", src[:0]))
    sent = np.asarray(send_counts, np.int64)
    expected = np.asarray(recv_counts, np.int64)
    arriving = np.empty_like(sent)
    pg.comm.Alltoall(sent, arriving)
    bad = np.array([int(not np.array_equal(arriving, expected))], np.int64)
    pg.comm.Allreduce(_mpi().IN_PLACE, bad, op=_mpi().MAX)
    if bad[0]:
        seen = pg.comm.allgather((sent.tolist(), expected.tolist()))
        detail = "; ".join(f"rank {pg.ranks[r]} sends {s}, expects {e}"
                           for r, (s, e) in enumerate(seen))
        raise RuntimeError(f"all_to_all_single: the split sizes do not match across ranks "
                           f"({detail} elements); rank i's input split j must equal rank j's "
                           f"output split i")
    pg.comm.Alltoallv([movable(src), (sent.tolist(), _offsets(sent))],
                      [movable(out), (expected.tolist(), _offsets(expected))])


def _offsets(counts):
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64).tolist()
