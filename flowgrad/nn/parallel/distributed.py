"""DistributedDataParallel: each rank trains a replica on its share of the batch; gradients
are averaged over the ranks during backward, as torch's DDP does.

How: at construction, parameters and buffers are broadcast from rank 0 and the parameters
are cut into buckets (reverse registration order, about the order backward produces
their gradients; `bucket_cap_mb` each, the first 1 MiB by default). torch starts from one
bucket and rebuilds them from the order of the first backward; this keeps the first plan.
A post-accumulate-grad hook on each parameter counts its bucket down; a full bucket is
filled with grad / world_size (torch's allreduce hook divides first) and its SUM all-reduce
starts on the group's worker thread while backward goes on (overlap), which then copies
the averages back into each `.grad` (with `gradient_as_bucket_view=True`, `.grad` becomes
a view of the bucket instead: no copy back). Buckets start strictly in order, so every
rank issues the same collectives in the same order. When the last one has started, the
hook waits for them all.

Under `python -m flowgrad.distributed.run --nproc-per-node 2`:

>>> import flowgrad as flow
>>> import flowgrad.distributed as dist
>>> model = flow.nn.parallel.DistributedDataParallel(flow.nn.Linear(3, 1))  # doctest: +SKIP
>>> x = flow.ones(4, 3) * (dist.get_rank() + 1)                 # doctest: +SKIP
>>> model(x).sum().backward()                                     # doctest: +SKIP
>>> model.module.weight.grad           # the mean of (4, 4, 4) and (8, 8, 8)  # doctest: +SKIP
tensor([[6., 6., 6.]])
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager

import numpy as np

from ...autograd import grad_mode
from ...autograd.inplace import bump_version
from ...autograd.node import AccumulateGrad
from ...distributed import wire
from ...distributed.process_group import ReduceOp, resolve
from ...tensor import Tensor
from ..module import Module

_FIRST_BUCKET_BYTES = 1024 * 1024  # torch's: a small first bucket starts communicating early


_SOLO_BYTES = 1024 * 1024  # a parameter this large is a bucket of its own, reduced in .grad


class _Bucket:
    """Parameters whose gradients travel in one all-reduce, and the flat buffer for it.
    A bucket of one large parameter (`solo`) is reduced in the gradient itself when it can
    be (contiguous, writable): no copy in or out; `target` is what this pass reduces."""

    __slots__ = ("indices", "offsets", "flat", "pending", "work", "solo", "target")

    def __init__(self, dtype, solo=False):
        self.indices, self.offsets = [], [0]
        self.flat = np.empty(0, dtype)
        self.pending = 0
        self.work = None
        self.solo = solo
        self.target = None


def _buckets(params, cap_bytes, first_cap):
    """Indices of `params` in buckets: reverse order, one dtype per bucket, a bucket closed
    once it reaches its cap (`first_cap` for each dtype's first, then cap_bytes)."""
    done, open_ = [], {}
    for i in reversed(range(len(params))):
        dtype = params[i]._data.dtype
        if params[i]._data.nbytes >= _SOLO_BYTES:  # close the open bucket: order is kept
            if dtype in open_:
                bucket = open_.pop(dtype)[0]
                bucket.flat = np.empty(bucket.offsets[-1], dtype)
                done.append(bucket)
            bucket = _Bucket(dtype, solo=True)
            bucket.indices.append(i)
            bucket.offsets.append(params[i]._data.size)
            bucket.flat = None  # made only if a gradient cannot be reduced in place
            done.append(bucket)
            continue
        bucket, limit = open_.get(dtype, (None, None))
        if bucket is None:
            first = not any(b.flat is not None and b.flat.dtype == dtype for b in done)
            bucket, limit = _Bucket(dtype), (first_cap if first else cap_bytes)
            open_[dtype] = (bucket, limit)
        bucket.indices.append(i)
        bucket.offsets.append(bucket.offsets[-1] + params[i]._data.size)
        if bucket.offsets[-1] * dtype.itemsize >= limit:
            done.append(bucket)
            del open_[dtype]
            bucket.flat = np.empty(bucket.offsets[-1], dtype)
    for bucket, _ in open_.values():
        bucket.flat = np.empty(bucket.offsets[-1], bucket.flat.dtype)
        done.append(bucket)
    done.sort(key=lambda b: -b.indices[0])  # the one holding the last parameter goes first
    return done


def _tensors(obj):
    """The tensors inside a module's output (tensors, lists/tuples/dicts of them)."""
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _tensors(item)]
    return []


def _reached(outputs):
    """ids of the AutogradMetas of the leaves the outputs' graph leads to."""
    metas, seen = set(), set()
    stack = []
    for t in _tensors(outputs):
        if t._grad_fn is not None:
            stack.append(t._grad_fn)
        elif t._meta is not None:
            metas.add(id(t._meta))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            metas.add(id(node.variable_meta))
            continue
        stack.extend(n for n in node.next_nodes if n is not None)
    return metas


def _coalesced_broadcast(pg, tensors):
    """Broadcast `tensors` from group rank 0: one message per dtype."""
    by_dtype = {}
    for t in tensors:
        by_dtype.setdefault(t._data.dtype, []).append(t)
    for dtype in sorted(by_dtype, key=str):  # the same order on every rank
        group = by_dtype[dtype]
        flat = np.concatenate([t._data.reshape(-1) for t in group])
        pg.run("broadcast", lambda f=flat: wire.broadcast(pg, f, 0), False)
        if pg.rank() != 0:
            start = 0
            for t in group:
                t._data[...] = flat[start:start + t._data.size].reshape(t._data.shape)
                bump_version(t)  # an in-place write, as torch's broadcast
                start += t._data.size


class DistributedDataParallel(Module):
    """Wrap `module` so that backward averages its gradients over the ranks of
    `process_group` (default: the world). Each rank feeds its own part of the batch.

    `no_sync()` skips the averaging (gradient accumulation); `find_unused_parameters=True`
    allows parameters that some forward does not use; `broadcast_buffers` copies rank 0's
    buffers (BatchNorm statistics) into every replica before each forward.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, init_sync=True, **kwargs):
        super().__init__()
        if kwargs:
            raise TypeError(f"DistributedDataParallel: unsupported arguments {sorted(kwargs)}")
        if device_ids or output_device is not None:
            raise ValueError(
                f"DistributedDataParallel device_ids and output_device arguments only work "
                f"with GPU modules, but got device_ids {device_ids}, output_device "
                f"{output_device}, and the module's parameters are on the CPU; leave them None")
        pg = resolve(process_group, "DistributedDataParallel")
        if pg is None:
            raise RuntimeError("DistributedDataParallel: this rank is not in process_group")
        self.module = module
        self.process_group = pg
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self._param_names = [n for n, _ in named]
        self._params = [p for _, p in named]
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 2 ** 20)
        if init_sync:
            _coalesced_broadcast(pg, [p for p in module.parameters()]
                                 + [b for b in module.buffers() if b is not None])
        first = _FIRST_BUCKET_BYTES if bucket_cap_mb is None else self.bucket_bytes_cap
        self._buckets = _buckets(self._params, self.bucket_bytes_cap, first)
        self._where = {}
        for b, bucket in enumerate(self._buckets):
            for k, i in enumerate(bucket.indices):
                self._where[i] = (b, k)
        self._expect = False   # a synchronised backward is due (set by forward)
        self._marked = [False] * len(self._params)
        self._next = 0         # the next bucket to start
        self._used = None
        me = weakref.ref(self)  # the parameters' hooks must not keep the wrapper alive

        def hook(index):
            def ready(_param):
                ddp = me()
                if ddp is not None:
                    ddp._mark_ready(index)
            return ready
        for i, p in enumerate(self._params):
            p.register_post_accumulate_grad_hook(hook(i))

    # ---- forward -------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        self._check_previous_reduction()
        pg = self.process_group
        if self.require_forward_param_sync and self.broadcast_buffers and pg.size() > 1:
            buffers = [b for b in self.module.buffers() if b is not None]
            if buffers:
                _coalesced_broadcast(pg, buffers)
        out = self.module(*inputs, **kwargs)
        if grad_mode.is_grad_enabled() and self.require_backward_grad_sync:
            self._prepare_for_backward(out)
        else:
            self._expect = False
        return out

    def _check_previous_reduction(self):
        if self._expect and any(self._marked):
            missing = [f"{i} ({self._param_names[i]})" for i, m in enumerate(self._marked)
                       if not m]
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a "
                "new one. This error indicates that your module has parameters that were not "
                "used in producing loss. You can enable unused parameter detection by passing "
                "the keyword argument `find_unused_parameters=True` to "
                "`flowgrad.nn.parallel.DistributedDataParallel`, and by making sure all "
                "`forward` function outputs participate in calculating loss. Parameter "
                f"indices which did not receive grad for rank {self.process_group.rank()}: "
                + ", ".join(missing))

    def _prepare_for_backward(self, out):
        self._expect = True
        self._marked = [False] * len(self._params)
        self._next = 0
        for bucket in self._buckets:
            bucket.pending = len(bucket.indices)
            bucket.work = None
        self._used = None
        if self.find_unused_parameters:
            reached = _reached(out)
            self._used = np.array([id(p._meta) in reached for p in self._params], np.int32)
            for i in np.flatnonzero(self._used == 0):
                self._mark_ready(int(i), unused=True)

    # ---- backward: the hooks -------------------------------------------------------------
    def _mark_ready(self, index, unused=False):
        if not self._expect:
            return None  # a forward under no_sync() (or no_grad) came before this backward
        if self._marked[index]:
            raise RuntimeError(
                f"Expected to mark a variable ready only once: parameter {index} "
                f"({self._param_names[index]}) got its gradient twice in one iteration (two "
                f"backward passes through the DDP output, or a parameter used outside forward)"
                f"; use no_sync() for all but the last backward")
        self._marked[index] = True
        if self._used is not None and not unused:
            self._used[index] = 1
        b, _ = self._where[index]
        self._buckets[b].pending -= 1
        if self._buckets[b].pending == 0:
            self._start_ready_buckets()
        return None

    def _start_ready_buckets(self):
        pg = self.process_group
        while self._next < len(self._buckets) and self._buckets[self._next].pending == 0:
            bucket = self._buckets[self._next]
            self._next += 1
            size = pg.size()
            if bucket.solo:
                grad = self._params[bucket.indices[0]].grad
                if grad is not None and grad._data.flags.c_contiguous \
                        and grad._data.flags.writeable:
                    np.divide(grad._data, size, out=grad._data)
                    bucket.target = grad._data
                    bucket.work = pg.run("all_reduce", self._reducer(bucket), True)
                    continue
                if bucket.flat is None:
                    bucket.flat = np.empty(bucket.offsets[-1], self._params[
                        bucket.indices[0]]._data.dtype)
            flat = bucket.target = bucket.flat
            for k, i in enumerate(bucket.indices):
                grad = self._params[i].grad
                part = flat[bucket.offsets[k]:bucket.offsets[k + 1]]
                if grad is None:
                    part[...] = 0
                elif grad._data.base is flat:  # already this bucket's view (accumulated)
                    np.divide(part, size, out=part)
                else:  # divided on the way in, as torch's allreduce hook: one pass, no copy back
                    np.divide(grad._data.reshape(-1), size, out=part)
            bucket.work = pg.run("all_reduce", self._reducer(bucket), True)
        if self._next == len(self._buckets):
            self._finish()

    def _reducer(self, bucket):
        """The worker thread's job for a bucket: all-reduce it, then (unless unused
        parameters must be settled first, in `_finish`) write the averages into the
        gradients right there, overlapping the copy with the rest of backward. Backward
        no longer touches these gradients: each parameter's is accumulated once per pass."""
        pg = self.process_group

        def run():
            wire.all_reduce(pg, bucket.target, ReduceOp.SUM)
            if self._used is None:
                self._write_back(bucket, None)
        return run

    def _write_back(self, bucket, used):
        """The bucket's averages into the gradients: copied into each `.grad` (an optimizer
        may hold it), or, with gradient_as_bucket_view, `.grad` becomes a view of the bucket
        (no copy; the next backward's averages land in the same memory, as torch's)."""
        if bucket.target is not bucket.flat:
            return  # reduced in the gradient itself
        view = self.gradient_as_bucket_view
        for k, i in enumerate(bucket.indices):
            if used is not None and not used[i]:
                continue  # no rank used it: its gradient stays as it was (None), as torch's
            p = self._params[i]
            part = bucket.flat[bucket.offsets[k]:bucket.offsets[k + 1]].reshape(p._data.shape)
            grad = p.grad
            if grad is not None and grad._data.base is bucket.flat:
                continue  # the view itself was reduced
            if view:
                p.grad = Tensor._wrap(part)
            elif grad is None or not grad._data.flags.writeable:
                p.grad = Tensor._wrap(part.copy())
            else:  # in place: an optimizer may hold this .grad
                np.copyto(grad._data, part)

    def _finish(self):
        """Wait for the buckets (and, with find_unused_parameters, agree on which
        parameters some rank used, then write the gradients)."""
        self._expect = False
        pg = self.process_group
        used = None
        if self._used is not None:
            used = self._used.copy()
            pg.run("all_reduce", lambda: wire.all_reduce(pg, used, ReduceOp.MAX), False)
        for bucket in self._buckets:
            bucket.work.wait()
            bucket.work = None
            if used is not None:
                self._write_back(bucket, used)

    # ---- torch's API around it -----------------------------------------------------------
    @contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside accumulate gradients locally; the first
        synchronised backward after it averages the accumulated gradients.

        >>> import flowgrad as flow
        >>> net = flow.nn.Linear(2, 1)
        >>> ddp = flow.nn.parallel.DistributedDataParallel(net)   # doctest: +SKIP
        >>> with ddp.no_sync():                                    # doctest: +SKIP
        ...     ddp(flow.ones(1, 2)).sum().backward()
        >>> ddp(flow.ones(1, 2)).sum().backward()                   # doctest: +SKIP
        """
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def extra_repr(self):
        return ""
