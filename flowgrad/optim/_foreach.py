"""The batched ("foreach") step: one pass per parameter group with the group's scalars
computed once, each update an in-place chain of NumPy ufuncs with `out=` into scratch arrays
the optimizer keeps (no temporaries), and large parameters updated in cache-sized chunks.

Every update is elementwise, so chunking and `out=` change no number: a kernel performs the
same IEEE operations, in the same order and dtype, as the optimizer's per-parameter
`_update` (the reference path, `foreach=False`). Python numbers are weak scalars in NumPy
(NEP 50) whether they meet a temporary or a scratch array; that is why the batched path only
runs on groups whose hyperparameters are plain Python numbers (`plain_numbers`), and on
floating parameters whose grad has the parameter's dtype.

>>> import numpy as np
>>> s = Scratch(2)
>>> a = np.ones((3, 4), np.float32)
>>> [t.shape for t in s.shaped(a)]
[(3, 4), (3, 4)]
"""
from __future__ import annotations

import numpy as np

from ..autograd.inplace import bump_version

# elements per chunk: 128 KiB of float32, so a chunk's operands and scratch stay in L2
CHUNK = 1 << 15
# parameters up to this size are packed: many small ones share one call per ufunc
SMALL = 1 << 12
_F32 = np.dtype(np.float32)
_TWO_24 = float(1 << 24)


class Scratch:
    """`n` scratch arrays of CHUNK elements per dtype, and views of them shaped like each
    parameter shape met (cached), so a small parameter's update allocates nothing."""

    __slots__ = ("n", "_flat", "_shaped", "views")

    def __init__(self, n):
        self.n, self._flat, self._shaped, self.views = n, {}, {}, {}

    def flat(self, dtype):
        bufs = self._flat.get(dtype)
        if bufs is None:
            bufs = self._flat[dtype] = tuple(np.empty(CHUNK, dtype) for _ in range(self.n))
        return bufs

    def shaped(self, a):
        key = (a.shape, a.dtype)
        views = self._shaped.get(key)
        if views is None:
            size, shape = a.size, a.shape
            views = tuple(f[:size].reshape(shape) for f in self.flat(a.dtype))
            self._shaped[key] = views
        return views


def apply(kernel, scratch, arrays, args):
    """kernel(arrays, tmps, args) on the whole arrays (up to CHUNK elements) or on matching
    flat chunks of them (`arrays` of one shape; None entries are passed through)."""
    a = arrays[0]
    n = a.size
    if n <= CHUNK:
        kernel(arrays, scratch.shaped(a), args)
        return
    if not all(x is None or x.flags.c_contiguous for x in arrays):
        kernel(arrays, tuple(np.empty_like(a) for _ in range(scratch.n)), args)
        return
    flats = [None if x is None else x.reshape(-1) for x in arrays]
    tmps = scratch.flat(a.dtype)
    for i in range(0, n, CHUNK):
        j = min(i + CHUNK, n)
        k = j - i
        kernel(tuple(None if f is None else f[i:j] for f in flats),
               tuple(t[:k] for t in tmps), args)


class Packer:
    """Small parameters of a group updated together, as multi-tensor kernels do: their
    operands are gathered (np.concatenate into scratch), the kernel runs once on the flat
    arrays, and the operands it writes (`written`: indices) are copied back. Parameters
    join a pack while they share the kernel's scalars (`args`, by identity) and dtype and it
    holds at most CHUNK elements. The numbers are those of one kernel call per parameter."""

    __slots__ = ("kernel", "tmps", "bufs", "written", "items", "total", "args", "dtype",
                 "views")

    def __init__(self, kernel, tmps, bufs, written):
        self.kernel, self.tmps, self.bufs, self.written = kernel, tmps, bufs, written
        self.items, self.total, self.args, self.dtype = [], 0, None, None
        self.views = bufs.views  # cached views of the gather buffers, per pack layout

    def add(self, arrays, args):
        a = arrays[0]
        n = a.size
        if self.items and (args is not self.args or a.dtype != self.dtype
                           or self.total + n > CHUNK):
            self.flush()
        if not self.items:
            self.args, self.dtype = args, a.dtype
        self.items.append(arrays)
        self.total += n

    def flush(self):
        items, total, args = self.items, self.total, self.args
        if not items:
            return
        self.items, self.total, self.args = [], 0, None
        if len(items) == 1:
            self.kernel(items[0], self.tmps.shaped(items[0][0]), args)
            return
        bufs = self.bufs.flat(self.dtype)
        first = items[0]
        ops = tuple(None if x is None else
                    np.concatenate([it[j] for it in items], axis=None, out=bufs[j][:total])
                    for j, x in enumerate(first))
        self.kernel(ops, tuple(t[:total] for t in self.tmps.flat(self.dtype)), args)
        key = (self.dtype, tuple([it[0].shape for it in items]))
        views = self.views.get(key)
        if views is None:
            if len(self.views) > 64:
                self.views.clear()
            views = self.views[key] = {}
            for j in self.written:
                o, vs = 0, views.setdefault(j, [])
                for it in items:
                    n = it[0].size
                    vs.append(bufs[j][o:o + n].reshape(it[0].shape))
                    o += n
        for j in self.written:
            if first[j] is not None:
                for it, v in zip(items, views[j]):
                    np.copyto(it[j], v)


def plain_numbers(*values):
    """True when every value is a Python int or float (not a tensor, array or NumPy scalar,
    which NumPy would not treat as a weak scalar)."""
    for v in values:
        if type(v) is not float and type(v) is not int:
            return False
    return True


def advance(step_tensor):
    """state['step'] += 1, as `adam._advance` does it (a float32 0-d add), returned as a
    float; below 2**24 the sum is exact, so it is written directly, without a 0-d ufunc."""
    s = step_tensor._data
    if s.dtype is _F32:
        step = float(s) + 1.0
        if step < _TWO_24:
            s.fill(step)
            return step
    s += 1
    return float(s)


def bump(p):
    """bump_version(p), inlined for the common case of an existing counter."""
    c = p._counter
    if c is None:
        bump_version(p)
    else:
        c.value += 1


def fast_dtype(pd, gd):
    """The batched path handles floating NumPy dtypes with a grad of the same dtype, on the
    CPU (its scratch arrays are NumPy's; other devices take the per-parameter `_update`)."""
    dt = pd.dtype
    return dt.kind == "f" and (gd.dtype is dt or gd.dtype == dt) and type(pd) is np.ndarray
