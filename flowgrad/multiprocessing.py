"""`flow.multiprocessing`: Python's multiprocessing (Queue, Process, Pool, get_context, ...)
plus torch's `spawn`. Tensors travel between processes by pickling (their arrays are copied:
there is no shared-memory storage), so a worker's in-place writes are not seen by the parent.

>>> import flowgrad.multiprocessing as mp
>>> mp.get_sharing_strategy(), callable(mp.Queue)
('file_system', True)
"""
from __future__ import annotations

import multiprocessing as _mp
import traceback
from multiprocessing import *  # noqa: F401,F403 - torch.multiprocessing re-exports it

_strategy = ["file_system"]


def get_all_sharing_strategies():
    """{"file_system"}: tensors are pickled, not shared, so one strategy exists."""
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
