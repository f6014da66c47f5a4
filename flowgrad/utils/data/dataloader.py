"""DataLoader: batches from a dataset, in the main process or in worker processes.

With `num_workers > 0` each worker is a process that owns an index queue; the loader sends
batches of indices round-robin (at most `prefetch_factor * num_workers` in flight), the
workers send collated batches back on one result queue, and the loader yields them in the
order they were sent, as torch's multiprocessing iterator does. Works with the 'fork',
'forkserver' and 'spawn' start methods (with 'spawn' the dataset, collate_fn and
worker_init_fn must be picklable).

>>> import flowgrad as flow
>>> from flowgrad.utils.data import DataLoader, TensorDataset
>>> ds = TensorDataset(flow.arange(6.0))
>>> [b[0].tolist() for b in DataLoader(ds, batch_size=4)]
[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0]]
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import queue
import random
import signal
import sys
import threading
import time
import traceback

import numpy as np

from ...random import manual_seed, torch_int64
from ._collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info", "WorkerInfo"]

_worker_info = None
_POLL_S = 1.0  # how often a waiting loader checks that its workers are still alive
_WATCHDOG_S = 0.5  # how often a worker checks that the loader's process is still alive
_USE_PDEATHSIG = True  # Linux: workers ask the kernel to kill them when their parent dies


class WorkerInfo:
    """What `get_worker_info()` returns inside a worker: id, num_workers, seed, dataset."""

    def __init__(self, id, num_workers, seed, dataset):  # noqa: A002 - torch's name
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, "
                f"seed={self.seed}, dataset={self.dataset!r})")


def get_worker_info():
    """In a DataLoader worker process: its WorkerInfo; in the main process: None."""
    return _worker_info


class _InfiniteConstantSampler(Sampler):
    """For iterable datasets: an endless stream of None (each one asks for a batch)."""

    def __iter__(self):
        while True:
            yield None


class _KeyErrorMessage(str):
    """str(KeyError(msg)) is repr(msg): this keeps a multi-line message readable."""

    def __repr__(self):
        return self


class _ExceptionWrapper:
    """An exception raised in a worker, carried back to the main process as text."""

    def __init__(self, exc, where):
        self.exc_type = type(exc)
        self.msg = f"Caught {type(exc).__name__} {where}.\nOriginal " + \
            "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

    def reraise(self):
        msg = _KeyErrorMessage(self.msg) if self.exc_type is KeyError else self.msg
        try:
            exc = self.exc_type(msg)
        except Exception:
            exc = RuntimeError(self.msg)
        raise exc


class _Resume:
    """Sent to a persistent worker to start a new epoch; sent back once it has."""


class _IterableEnd:
    """A worker's iterable dataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _Fetcher:
    """Turn one request (a list of indices, an index, or None for iterables) into a batch."""

    def __init__(self, dataset, auto_collation, collate_fn, batch_size, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.iterable = isinstance(dataset, IterableDataset)
        self._it = iter(dataset) if self.iterable else None

    def fetch(self, request):
        if self.iterable:
            if not self.auto_collation:
                return self.collate_fn(next(self._it))
            data = []
            for item in self._it:
                data.append(item)
                if len(data) == self.batch_size:
                    break
            if not data or (self.drop_last and len(data) < self.batch_size):
                raise StopIteration
            return self.collate_fn(data)
        if not self.auto_collation:
            return self.collate_fn(self.dataset[request])
        getitems = getattr(self.dataset, "__getitems__", None)
        data = getitems(request) if getitems else [self.dataset[i] for i in request]
        return self.collate_fn(data)


def _alive(pid):
    """Whether process `pid` exists and is not a zombie (one that exited, unreaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _exit_with_parent(main_pid):
    """Make this worker exit when the loader's process dies, so no orphan outlives it:
    on Linux, prctl(PR_SET_PDEATHSIG, SIGKILL) has the kernel kill it with its parent; on
    every platform a daemon thread checks every `_WATCHDOG_S` seconds that the parent is
    the same (an orphan is re-parented) and, where a forkserver is the parent, that the
    main process still exists, and ends the worker with os._exit if not."""
    parent = os.getppid()
    if _USE_PDEATHSIG and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    def parent_gone():
        if os.getppid() != parent:
            return True
        return parent != main_pid and not _alive(main_pid)

    if parent != main_pid and not _alive(main_pid):
        os._exit(1)  # the loader died before this worker got here

    def watch():
        while not parent_gone():
            time.sleep(_WATCHDOG_S)
        os._exit(1)

    threading.Thread(target=watch, name="DataLoader-watchdog", daemon=True).start()


def _worker_loop(dataset, index_queue, data_queue, auto_collation, collate_fn, batch_size,
                 drop_last, seed, init_fn, worker_id, num_workers, main_pid=None):
    """The body of one worker process: fetch what the index queue asks, until None; exit
    at once if the loader's process dies."""
    global _worker_info
    if main_pid is not None:
        _exit_with_parent(main_pid)
    manual_seed(seed)
    random.seed(seed)
    # NumPy's global stream too, from the base seed and the worker id as torch's
    # _generate_state (NumPy's SeedSequence): forked workers would all draw the parent's
    base = seed - worker_id
    np.random.seed(np.random.SeedSequence([worker_id, base & 0xFFFFFFFF, base >> 32, 0])
                   .generate_state(4))
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    failure = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = _Fetcher(dataset, auto_collation, collate_fn, batch_size, drop_last)
    except Exception as exc:  # reported with the first batch this worker is asked for
        failure = _ExceptionWrapper(exc, f"in DataLoader worker process {worker_id}")
    ended = False
    while True:
        try:
            request = index_queue.get(timeout=_POLL_S)
        except queue.Empty:
            continue
        if request is None:
            break
        if isinstance(request, _Resume):  # a new epoch: a fresh iterator over the dataset
            if failure is None:
                try:
                    fetcher = _Fetcher(dataset, auto_collation, collate_fn, batch_size,
                                       drop_last)
                except Exception as exc:
                    failure = _ExceptionWrapper(exc, f"in DataLoader worker process "
                                                     f"{worker_id}")
            ended = False
            data_queue.put((None, request))
            continue
        idx, indices = request
        if failure is not None:
            data = failure
        elif ended:
            data = _IterableEnd(worker_id)
        else:
            try:
                data = fetcher.fetch(indices)
            except StopIteration:
                ended = True
                data = _IterableEnd(worker_id)
            except Exception as exc:
                data = _ExceptionWrapper(exc, f"in DataLoader worker process {worker_id}")
        data_queue.put((idx, data))
    data_queue.cancel_join_thread()


class DataLoader:
    """Iterate over `dataset` in batches.

    batch_size (None: no batching), shuffle (a RandomSampler using `generator`), sampler
    or batch_sampler (custom index orders), drop_last, collate_fn (default_collate),
    num_workers (worker processes; 0 loads in the main process), worker_init_fn,
    multiprocessing_context ('fork', 'spawn', ... or a context), prefetch_factor, timeout.

    >>> import flowgrad as flow
    >>> from flowgrad.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(flow.arange(5.0), flow.tensor([0, 1, 0, 1, 1]))
    >>> for x, y in DataLoader(ds, batch_size=2):
    ...     print(x, y)
    tensor([0., 1.]) tensor([0, 1])
    tensor([2., 3.]) tensor([0, 1])
    tensor([4.]) tensor([1])
    >>> len(DataLoader(ds, batch_size=2, drop_last=True))
    2
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False,
                 timeout=0, worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if num_workers < 0:  # (as torch: 0.0 loads in this process, 1.0 fails in range())
            raise ValueError("num_workers option should be non-negative; use num_workers=0 "
                             "to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                     f"{name} option, but got {name}={value}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context  # validated by the setter
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._iterator = None  # the one kept between epochs with persistent_workers
        self._iterable = iterable
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if batch_sampler is not None else default_convert)
        self._initialized = True

    # changing these would leave the samplers built from them stale (torch forbids it too)
    _FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
               "persistent_workers")

    def __setattr__(self, attr, val):
        if attr in self._FROZEN and self.__dict__.get("_initialized", False):
            raise ValueError(f"{attr} attribute should not be set after "
                             f"{type(self).__name__} is initialized; make a new DataLoader")
        super().__setattr__(attr, val)

    @property
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx):
        if ctx is not None:
            if self.num_workers == 0:
                raise ValueError("multiprocessing_context can only be used with multi-process "
                                 "loading (num_workers > 0), but got num_workers=0")
            if isinstance(ctx, str):
                methods = multiprocessing.get_all_start_methods()
                if ctx not in methods:
                    raise ValueError("multiprocessing_context option should specify a valid "
                                     f"start method in {methods!r}, but got "
                                     f"multiprocessing_context={ctx!r}")
                ctx = multiprocessing.get_context(ctx)
            if not isinstance(ctx, multiprocessing.context.BaseContext):
                raise TypeError("multiprocessing_context option should be a valid context "
                                "object or a string specifying the start method, but got "
                                f"multiprocessing_context={ctx!r}")
        self._multiprocessing_context = ctx

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __iter__(self):
        if self.num_workers == 0:
            if self.timeout != 0:  # torch's class; nothing in the main process can time out
                raise AssertionError(f"DataLoader: timeout={self.timeout} needs worker "
                                     "processes; set num_workers > 0 or timeout=0")
            return _SingleProcessIter(self)
        if self.prefetch_factor <= 0:  # no batch would ever be requested: an empty epoch
            raise AssertionError(f"DataLoader: prefetch_factor={self.prefetch_factor} with "
                                 "num_workers > 0 must be positive (default 2)")
        if not self.persistent_workers:
            return _MultiProcessIter(self)
        # as torch: the same workers (and their state) serve every epoch
        if self._iterator is None or self._iterator._shut:
            self._iterator = _MultiProcessIter(self)
        else:
            self._iterator._reset(self)
        return self._iterator


def _base_seed(loader):
    # drawn by every iterator, after the (lazy) sampler iterator is made but before it
    # draws, as torch does: so an order does not depend on num_workers
    return torch_int64(loader.generator)


class _BaseIter:
    def __iter__(self):
        return self

    def __len__(self):  # as torch: the sampler's length, not what is left of the epoch
        return len(self._index_sampler)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        self._index_sampler = loader._index_sampler
        self._indices = iter(loader._index_sampler)
        _base_seed(loader)
        self._fetcher = _Fetcher(loader.dataset, loader._auto_collation, loader.collate_fn,
                                 loader.batch_size, loader.drop_last)

    def __next__(self):
        return self._fetcher.fetch(next(self._indices))


class _MultiProcessIter(_BaseIter):
    """Workers with one index queue each, one shared result queue, in-order delivery."""

    def __init__(self, loader):
        ctx = loader.multiprocessing_context or multiprocessing.get_context()
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        self._shut = False
        self._index_sampler = loader._index_sampler
        self._indices = iter(loader._index_sampler)
        seed = _base_seed(loader)
        self._data_queue = ctx.Queue()
        self._index_queues, self._workers = [], []
        for wid in range(loader.num_workers):
            iq = ctx.Queue()
            iq.cancel_join_thread()
            w = ctx.Process(target=_worker_loop, daemon=True, args=(
                loader.dataset, iq, self._data_queue, loader._auto_collation,
                loader.collate_fn, loader.batch_size, loader.drop_last, seed + wid,
                loader.worker_init_fn, wid, loader.num_workers, os.getpid()))
            w.start()
            self._index_queues.append(iq)
            self._workers.append(w)
        self._reset(loader, first=True)

    def _reset(self, loader, first=False):
        """Start an epoch; with persistent workers, again on the same workers."""
        if not first:
            self._index_sampler = loader._index_sampler
            self._indices = iter(loader._index_sampler)
            for iq in self._index_queues:
                iq.put(_Resume())
            acks = len(self._workers)
            while acks:  # results of the last epoch's unfinished requests are dropped
                idx, data = self._get()
                acks -= isinstance(data, _Resume)
        self._active = [True] * loader.num_workers
        self._next_worker = 0
        self._send_idx = self._rcvd_idx = 0
        self._task_worker = {}   # send index -> worker
        self._task_data = {}     # results that arrived early
        for _ in range(loader.prefetch_factor * loader.num_workers):
            self._put_index()

    def _put_index(self):
        if not any(self._active):
            return
        try:
            indices = next(self._indices)
        except StopIteration:
            return
        n = len(self._workers)
        while not self._active[self._next_worker]:
            self._next_worker = (self._next_worker + 1) % n
        w = self._next_worker
        self._next_worker = (w + 1) % n
        self._index_queues[w].put((self._send_idx, indices))
        self._task_worker[self._send_idx] = w
        self._send_idx += 1

    def _get(self):
        waited = 0.0
        while True:
            try:
                return self._data_queue.get(timeout=_POLL_S)
            except queue.Empty:
                waited += _POLL_S
                if self._timeout and waited >= self._timeout:
                    self._shutdown()
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
                dead = [w for w in self._workers if not w.is_alive()]
                if dead:
                    self._shutdown()
                    raise RuntimeError(
                        f"DataLoader worker (pid(s) {', '.join(str(w.pid) for w in dead)}) "
                        "exited unexpectedly") from None

    def __next__(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                w = self._task_worker[self._rcvd_idx]
                if self._active[w] or self._rcvd_idx in self._task_data:
                    break
                del self._task_worker[self._rcvd_idx]  # its worker ended: nothing will come
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown()
                raise StopIteration
            if self._rcvd_idx in self._task_data:
                return self._deliver(self._task_data.pop(self._rcvd_idx))
            idx, data = self._get()
            if isinstance(data, _IterableEnd):
                self._active[data.worker_id] = False
                self._task_data.pop(idx, None)
                continue
            if idx != self._rcvd_idx:
                self._task_data[idx] = data
                continue
            return self._deliver(data)

    def _deliver(self, data):
        del self._task_worker[self._rcvd_idx]
        self._rcvd_idx += 1
        self._put_index()
        if isinstance(data, _ExceptionWrapper):
            self._shutdown()
            data.reraise()
        return data

    def _shutdown(self):
        if self._shut:
            return
        self._shut = True
        for iq in self._index_queues:
            iq.put(None)
        for w in self._workers:
            w.join(timeout=5.0)
            if w.is_alive():
                w.terminate()
        for q in (*self._index_queues, self._data_queue):
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        try:
            self._shutdown()
        except Exception:
            pass
