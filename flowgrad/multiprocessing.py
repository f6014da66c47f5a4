"""`flow.multiprocessing`: Python's multiprocessing (Queue, Process, Pool, get_context, ...)
plus torch's `spawn`, and shared-memory storage for Hogwild-style training.

Tensors travel between processes by pickling, their arrays copied, unless `share_memory_()`
(or `Module.share_memory()`) moved them to shared memory first: a named block of
`multiprocessing.shared_memory` that a forked child inherits and a spawned one, or a Queue's
receiver, attaches by name, so every process reads and writes the same values (an optimizer
step in a worker updates the parent's model). The creating process unlinks its blocks at exit.

>>> import flowgrad as flow
>>> import flowgrad.multiprocessing as mp
>>> mp.get_sharing_strategy(), flow.ones(2).share_memory_().is_shared()
('file_system', True)
"""
from __future__ import annotations

import atexit
import multiprocessing as _mp
import traceback
from multiprocessing import *  # noqa: F401,F403 - torch.multiprocessing re-exports it
from multiprocessing import shared_memory as _shared_memory

import numpy as np

from .tensor import Tensor, _rebuild, attributes_of

_strategy = ["file_system"]


def get_all_sharing_strategies():
    """{"file_system"}: shared tensors travel by the name of their shared-memory block (the
    one strategy there is)."""
    return {"file_system"}


def get_sharing_strategy():
    """The recorded sharing strategy ("file_system")."""
    return _strategy[0]


def set_sharing_strategy(new_strategy):
    """Accepted for torch compatibility ("file_system" or "file_descriptor"); recorded."""
    if new_strategy not in ("file_system", "file_descriptor"):
        raise ValueError(f"unknown sharing strategy {new_strategy!r}")
    _strategy[0] = new_strategy


class ProcessRaisedException(Exception):
    """A spawned process raised: the message holds its traceback (torch's class)."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.error_index, self.pid = error_index, error_pid


class ProcessExitedException(Exception):
    """A spawned process exited with a non-zero code (or a signal) without raising."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg)
        self.error_index, self.pid = error_index, error_pid
        self.exit_code, self.signal_name = exit_code, signal_name


def _wrap(fn, i, args, errors):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        errors.put(traceback.format_exc())
        raise SystemExit(1) from None


class ProcessContext:
    """The processes `spawn(join=False)` started; `join()` waits and raises the first
    failure, as torch's."""

    def __init__(self, processes, error_queues):
        self.processes, self.error_queues = processes, error_queues

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        """Wait for every process; True when all finished. Raises on a failed process."""
        for p in self.processes:
            p.join(timeout)
        for i, (p, q) in enumerate(zip(self.processes, self.error_queues)):
            if p.exitcode not in (None, 0):
                for other in self.processes:
                    if other.is_alive():
                        other.terminate()
                if not q.empty():
                    raise ProcessRaisedException(
                        f"\n\n-- Process {i} terminated with the following error:\n{q.get()}",
                        i, p.pid)
                raise ProcessExitedException(f"process {i} terminated with exit code "
                                             f"{p.exitcode}", i, p.pid, p.exitcode)
        return all(p.exitcode is not None for p in self.processes)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run `fn(i, *args)` for i in range(nprocs), each in its own process."""
    ctx = _mp.get_context(start_method)
    processes, queues = [], []
    for i in range(nprocs):
        q = ctx.SimpleQueue()
        p = ctx.Process(target=_wrap, args=(fn, i, args, q), daemon=daemon)
        p.start()
        processes.append(p)
        queues.append(q)
    context = ProcessContext(processes, queues)
    if not join:
        return context
    context.join()
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """torch.multiprocessing.spawn: `fn(i, *args)` in `nprocs` processes; with `join`, wait
    and raise `ProcessRaisedException` (carrying the worker's traceback) if one failed."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)


# ---- shared-memory storage ---------------------------------------------------------------------
_BLOCKS = {}  # block name -> (SharedMemory, its first address, its size): alive to the end
_CREATED = []  # the names this process created: it unlinks them at exit


def _address(array):
    return array.__array_interface__["data"][0]


def _place(array):
    """(block name, byte offset) of an array inside a shared block, or None."""
    if not _BLOCKS or type(array) is not np.ndarray:
        return None
    start = _address(array)
    for name, (_, first, size) in _BLOCKS.items():
        if first <= start < first + size or size == 0 and start == first:
            return name, start - first
    return None


def _attach(name):
    block = _BLOCKS.get(name)
    if block is None:
        shm = _shared_memory.SharedMemory(name=name)
        block = _BLOCKS[name] = shm, _address(np.frombuffer(shm.buf, np.uint8)), shm.size
    return block[0]


def _to_shared(array):
    """A C-contiguous copy of `array` in a new shared block."""
    shm = _shared_memory.SharedMemory(create=True, size=max(array.nbytes, 1))
    _BLOCKS[shm.name] = shm, _address(np.frombuffer(shm.buf, np.uint8)), shm.size
    _CREATED.append(shm.name)
    shared = np.ndarray(array.shape, array.dtype, buffer=shm.buf)
    shared[...] = array
    return shared


@atexit.register
def _unlink_created():
    for name in _CREATED:
        try:
            _BLOCKS[name][0].unlink()
        except (FileNotFoundError, KeyError):
            pass


def _rebuild_shared(name, offset, shape, strides, dtype, requires_grad, cls=None, state=None):
    shm = _attach(name)
    array = np.ndarray(shape, np.dtype(dtype), buffer=shm.buf, offset=offset, strides=strides)
    return _rebuild(array, requires_grad, cls, state)


def share_memory_(self):
    """Move the storage to shared memory (a no-op when it is there already), as torch's: other
    processes given this tensor (forked, spawned, or through a Queue) then share its values."""
    if _place(self._data) is None:
        if type(self._data) is not np.ndarray:
            raise RuntimeError(f"share_memory_: only host (CPU) tensors can be shared, this one "
                               f"is on {self.device}")
        self._data = _to_shared(self._data)
    return self


def is_shared(self):
    """Whether the storage is in shared memory (`share_memory_`)."""
    return _place(self._data) is not None


_plain_reduce = Tensor._reduce


def _reduce(self):
    """Pickling: a shared tensor by its block's name (the receiver attaches it), any other
    by value."""
    place = _place(self._data)
    if place is None:
        return _plain_reduce(self)
    data = self._data
    return _rebuild_shared, (*place, data.shape, data.strides, data.dtype.str,
                             self.requires_grad, type(self), attributes_of(self))


Tensor.share_memory_, Tensor.is_shared, Tensor._reduce = share_memory_, is_shared, _reduce
