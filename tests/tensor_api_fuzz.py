"""Differential fuzzing of the Tensor metadata and storage API: random programs of views and
metadata mutations, run in torch and in flowgrad.

A program builds a tensor (a factory of one of several dtypes; 0-d, empty and size-1 dims;
sometimes one that requires grad), then takes a random chain of steps: views (transpose,
slicing with steps, narrow, select, expand, unsqueeze, diagonal, as_strided, view(dtype) to a
dtype of the same and of another element size, .real/.imag, unfold, t/T/mT, view(-1)), in-place
metadata changes (set_ onto a tensor, its storage or a window of either; resize_ and
resize_as_; as_strided_; squeeze_/unsqueeze_/t_/transpose_), identity rules (contiguous(),
to()/type()/type_as()/double() returning self when nothing changes and a copy with copy=True,
detach() sharing the storage), new layouts (clone() and its memory formats, empty_like,
new_empty_strided) and writes through the current tensor (add_, fill_). After each step the
current tensor's metadata must be torch's: shape, dim, numel, stride, storage offset,
is_contiguous (also for contiguous_format), dim_order, element_size/itemsize/nbytes, its
storage's size and whether it shares the first tensor's storage (and where: the byte distance
of their data_ptr), which tensor its _base is, _is_view, dtype, layout, device, requires_grad,
is_leaf; and its values and the first tensor's. A step torch refuses, flowgrad must refuse
with the same exception class (the program goes on from the tensor before it).

Not drawn, each listed in KNOWN in tests/test_tensor_api_fuzz.py: set_/resize_ that would
grow a storage other tensors see (NumPy memory does not grow in place); steps that read the
storage around a zero-element tensor (NumPy keeps no place for one); writes through
overlapping elements (add_). Not compared: the _base of views after a set_ of a view (torch
keeps a stale one), values once a storage grew (torch's new bytes are uninitialised).

    .venv/bin/python tests/tensor_api_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/tensor_api_fuzz.py --show 17          # one program and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

DTYPES = ["float32", "float64", "int64", "int32", "int16", "uint8", "bool", "float16",
          "bfloat16", "complex64", "complex128"]
SHAPES = [(), (0,), (1,), (5,), (2, 3), (3, 1), (1, 4), (2, 0, 3), (2, 3, 4), (4, 4),
          (3, 2, 1, 2), (6,)]
STEPS = 8


def _values(shape, dtype, rng):
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("complex"):
        return (np.arange(n) + 1j * np.arange(n, 0, -1)).reshape(shape).astype(dtype)
    if dtype.startswith(("float", "bfloat")):
        return (np.arange(n) * 0.5 - 1).reshape(shape)
    return np.arange(n).reshape(shape) % 100


def _factory(m, spec):
    kind, shape, dtype, values, grad = spec
    dt = getattr(m, dtype)
    if kind == "tensor":
        t = m.tensor(values, dtype=dt)
    elif kind == "arange":
        t = m.arange(int(np.prod(shape, dtype=np.int64))).to(dt).reshape(shape)
        t = t.clone() if t._base is not None else t
    elif kind == "full":
        t = m.full(shape, True if dtype == "bool" else 3, dtype=dt)
    else:
        t = m.zeros(shape, dtype=dt)
    if grad:
        t.requires_grad_()
    return t


def _dim(r, t, extra=0):
    """A dim of `t` (now and then a negative one, rarely one out of range)."""
    n = max(t.dim(), 1) + extra
    if r.random() < 0.03:
        return n + 1
    return r.randrange(-n, n)



def _formats(ndim):
    """The channels_last formats drawn for a tensor of `ndim` dims (the wrong rank raises)."""
    return ["channels_last"] if ndim == 4 else ["channels_last_3d"] if ndim == 5 else []

def _shape_like(r, numel_hint):
    return r.choice([(numel_hint,), (1, numel_hint), (2, 2), (3,), (0,), (), (2, 3), (7,)])


OTHER_SIZE = {1: ["int16", "float32", "float64"], 2: ["uint8", "float32", "int64"],
              4: ["uint8", "int16", "float64", "complex128"], 8: ["float32", "int16", "uint8"],
              16: ["float64", "float32"]}
SAME_SIZE = {1: ["uint8", "bool"], 2: ["int16", "float16", "bfloat16"],
             4: ["int32", "float32"], 8: ["int64", "float64", "complex64"],
             16: ["complex128"]}


def _fits(extent, t, source):
    """Whether `extent` elements of t's dtype fit in the storage of torch tensor `source`
    (torch grows a storage where they do not; flowgrad's NumPy memory cannot: KNOWN)."""
    return extent * t.element_size() <= source.untyped_storage().nbytes()


def _extent(offset, size, stride):
    return 0 if 0 in size else offset + 1 + sum((n - 1) * st for n, st in zip(size, stride))


def _overlaps(t):
    """Whether torch tensor `t` has two elements at one memory location."""
    if t.numel() == 0:
        return False
    at = sum(np.indices(tuple(t.shape)).reshape(t.dim(), -1)[i] * st
             for i, st in enumerate(t.stride())) if t.dim() else np.zeros(1)
    return len(np.unique(at)) < t.numel()


def _grows_alone(t, pool):
    """Whether torch tensor `t` may grow its storage in resize_ as flowgrad grows it (a new
    array): not a view, at the start of its storage, contiguous, and no other tensor made so
    far over its storage (flowgrad refuses to grow memory other tensors share: KNOWN)."""
    ptr = t.untyped_storage().data_ptr()
    return not t._is_view() and t.storage_offset() == 0 and t.is_contiguous() and all(
        o is t or o.untyped_storage().data_ptr() != ptr for o in pool)


# steps that read a storage around the tensor: not drawn for a zero-element one (NumPy keeps
# no place in a storage for it: KNOWN)
READS_STORAGE = {"as_strided", "as_strided_", "view_dtype", "resize_", "resize_as_", "set_"}


def _draw_step(r, t, pool):
    """One step for the torch tensor `t` (a tuple: the step's name and arguments), `pool`
    the tensors made so far (the first one's storage is set_'s source)."""
    step = _draw_kind(r, t)
    kind = step[0]
    if kind in READS_STORAGE and t.numel() == 0:
        return ("contiguous", None)
    if kind == "contiguous" and t.numel() == 0 and str(step[1]).startswith("channels_last"):
        return ("contiguous", None)  # (whether it is self reads the strides KNOWN lacks)
    if kind == "set_" and t.grad_fn is not None:
        return ("detach",)  # (flowgrad refuses set_ of a tensor with history: KNOWN)
    if kind == "set_":
        _, how, offset, size, stride = step
        if how in ("tensor", "window") and pool[0].requires_grad and not t.requires_grad:
            how = "storage"  # (torch's grad_fn there: KNOWN)
            step = (kind, how, offset, size, stride)
        source = t if how == "self_window" else pool[0]
        strides = stride if stride is not None else \
            tuple(t.stride()) if tuple(size) == tuple(t.shape) else \
            tuple(int(np.prod(size[i + 1:], dtype=np.int64)) for i in range(len(size)))
        # (torch's set_ with no stride keeps the tensor's own when the size is its own)
        start = offset + (source.storage_offset() if how == "window" else 0)  # (torch's)
        if how in ("storage", "window", "self_window") and \
                not _fits(_extent(start, size, strides), t, source):
            return kind, how, 0, (0,), None
        if how == "tensor" and source.dtype != t.dtype:
            return step  # (refused by both)
    if kind == "write" and _overlaps(t) and step[1] == "add_":
        return ("clone", None)  # (overlapping writes: KNOWN's reason)
    if kind in ("resize_", "resize_as_") and not _grows_alone(t, pool):
        shape = step[1]
        if not _fits(t.storage_offset() + int(np.prod(shape, dtype=np.int64)), t, t):
            return kind, (0,)
    return step


def _draw_kind(r, t):
    d = t.dim()
    shape = tuple(t.shape)
    kinds = ["transpose", "slice", "narrow", "select", "expand", "unsqueeze", "diagonal",
             "as_strided", "view_dtype", "view_dtype", "real_imag", "unfold", "t", "T", "mT",
             "view_flat", "set_", "set_", "resize_", "resize_as_", "as_strided_", "squeeze_",
             "unsqueeze_", "t_", "transpose_", "contiguous", "clone", "to", "type",
             "detach", "new_empty_strided", "empty_like", "write", "permute"]
    kind = r.choice(kinds)
    if kind in ("transpose", "transpose_"):
        return kind, _dim(r, t), _dim(r, t)
    if kind == "permute":
        dims = list(range(d))
        r.shuffle(dims)
        return kind, tuple(dims)
    if kind == "slice":
        dim = _dim(r, t)
        size = shape[dim] if -d <= dim < d else 1
        # (no step 0 past the last dim: KNOWN)
        step = r.choice([1, 1, 2, 3, 0]) if -d <= dim < d else r.choice([1, 2])
        return kind, dim, r.randint(-1, size), r.randint(0, size + 1), step
    if kind == "narrow":
        dim = _dim(r, t)
        size = shape[dim] if -d <= dim < d else 1
        start = r.randint(-size, size)
        return kind, dim, start, r.randint(0, max(size - max(start, 0), 0) + (r.random() < .1))
    if kind == "select":
        dim = _dim(r, t)
        size = shape[dim] if -d <= dim < d else 1
        return kind, dim, r.randint(-size, size)
    if kind == "expand":
        new = [r.choice([n, 3]) if n == 1 else r.choice([n, n, -1]) for n in shape]
        if r.random() < 0.5 or not new:  # (no sizes: KNOWN)
            new.insert(0, r.choice([1, 2]))
        return kind, tuple(new)
    if kind in ("unsqueeze", "unsqueeze_"):
        return kind, _dim(r, t, extra=1 if d else 0)
    if kind == "squeeze_":
        return kind, r.choice([None, _dim(r, t)])
    if kind == "diagonal":
        return kind, r.randint(-2, 2), _dim(r, t), _dim(r, t)
    if kind in ("as_strided", "as_strided_"):
        storage = t.untyped_storage().nbytes() // t.element_size()
        size = tuple(r.randint(0, 3) for _ in range(r.randint(0, 3)))
        stride = tuple(r.randint(0, 3) for _ in size)
        offset = r.choice([None, r.randint(0, max(storage - 1, 0))])
        return kind, size, stride, offset
    if kind == "view_dtype":
        item = t.element_size()
        pool = SAME_SIZE[item] if r.random() < 0.5 else OTHER_SIZE[item]
        return kind, r.choice(pool)
    if kind == "real_imag":
        return kind, r.choice(["real", "imag"])
    if kind == "unfold":
        dim = _dim(r, t)
        return kind, dim, r.randint(0, 3), r.randint(1, 2)
    if kind == "set_":
        how = r.choice(["tensor", "storage", "window", "empty", "self_window"])
        size = tuple(r.randint(0, 3) for _ in range(r.randint(0, 2)))
        stride = r.choice([None, tuple(r.randint(0, 2) for _ in size)])
        return kind, how, r.randint(0, 3), size, stride
    if kind == "resize_":
        return kind, _shape_like(r, r.randint(0, max(t.numel() + 2, 1)))
    if kind == "resize_as_":
        return kind, _shape_like(r, r.randint(0, max(t.numel() + 2, 1)))
    if kind == "clone":
        return kind, r.choice([None, "preserve_format", "contiguous_format"] + _formats(d))
    if kind == "contiguous":
        return kind, r.choice([None, "contiguous_format", "preserve_format"] + _formats(d))
    if kind == "to":
        return kind, r.choice([str(t.dtype).split(".")[1], "float64", "int32"]), \
            r.random() < 0.3, r.random() < 0.3
    if kind == "type":
        return kind, r.choice(["same", "double", "type_as_same", "type_as_float", "float"])
    if kind == "new_empty_strided":
        size = tuple(r.randint(0, 3) for _ in range(r.randint(0, 3)))
        return kind, size, tuple(r.randint(0, 4) for _ in size)
    if kind == "empty_like":
        return kind, r.choice([None, "preserve_format", "contiguous_format"] + _formats(d))
    if kind == "write":
        return kind, r.choice(["add_", "fill_", "zero_"])
    return (kind,)


def _zeroed(t):
    """`t` with every element of its storage zero (torch's empty ones: uninitialised)."""
    n = t.untyped_storage().nbytes() // t.element_size()
    if n:
        t.as_strided((n,), (1,), 0).zero_()
    return t


def _apply(m, t, pool, step):
    """The tensor step `step` gives from `t` (pool: the tensors made so far); a list of facts
    the step itself reports (identity, sharing) beside it."""
    kind, *a = step
    facts = []
    if kind == "transpose":
        return t.transpose(*a), facts
    if kind == "permute":
        return t.permute(*a), facts
    if kind == "slice":
        dim, start, stop, st = a
        index = (slice(None),) * (dim % max(t.dim(), 1) if -max(t.dim(), 1) <= dim <
                                  max(t.dim(), 1) else dim) + (slice(start, stop, st),)
        return t[index], facts
    if kind == "narrow":
        return t.narrow(*a), facts
    if kind == "select":
        return t.select(*a), facts
    if kind == "expand":
        return t.expand(*a[0]), facts
    if kind == "unsqueeze":
        return t.unsqueeze(*a), facts
    if kind == "diagonal":
        return t.diagonal(*a), facts
    if kind == "as_strided":
        size, stride, offset = a
        return t.as_strided(size, stride, offset), facts
    if kind == "view_dtype":
        return t.view(getattr(m, a[0])), facts
    if kind == "real_imag":
        return getattr(t, a[0]), facts
    if kind == "unfold":
        return t.unfold(*a), facts
    if kind == "t":
        return t.t(), facts
    if kind == "T":
        return t.T, facts
    if kind == "mT":
        return t.mT, facts
    if kind == "view_flat":
        return t.view(-1), facts
    if kind == "set_":
        how, offset, size, stride = a
        was_view = t._is_view()
        src = pool[0]
        if how == "tensor":
            out = t.set_(src)
        elif how == "storage":
            out = t.set_(src.untyped_storage(), offset, size, stride)
        elif how == "window":
            out = t.set_(src, offset, size, stride)
        elif how == "self_window":
            out = t.set_(t.untyped_storage(), offset, size, stride)
        else:
            out = t.set_()
        facts.append(("set_ returns self", out is t))
        return t, facts + [("set_ of a view", True)] if was_view else facts
    if kind in ("resize_", "resize_as_"):
        before = t.untyped_storage().nbytes()
        out = t.resize_(a[0]) if kind == "resize_" else \
            t.resize_as_(m.empty(a[0], dtype=t.dtype))
        facts.append((f"{kind} returns self", out is t))
        # (torch's grown bytes are uninitialised: values are not compared after this)
        facts.append(("storage grew", t.untyped_storage().nbytes() > before))
        return t, facts
    if kind == "as_strided_":
        size, stride, offset = a
        out = t.as_strided_(size, stride, offset)
        facts.append(("as_strided_ returns self", out is t))
        return t, facts
    if kind in ("squeeze_", "unsqueeze_", "transpose_", "t_"):
        args = [x for x in a if x is not None]
        out = getattr(t, kind)(*args)
        facts.append((f"{kind} returns self", out is t))
        return t, facts
    if kind == "contiguous":
        fmt = a[0]
        out = t.contiguous() if fmt is None else t.contiguous(memory_format=getattr(m, fmt))
        facts.append(("contiguous() is self", out is t))
        return out, facts
    if kind == "clone":
        fmt = a[0]
        return (t.clone() if fmt is None else t.clone(memory_format=getattr(m, fmt))), facts
    if kind == "to":
        dtype, copy, positional = a
        dt = getattr(m, dtype)
        out = t.to(dt, copy=copy) if positional else t.to(dtype=dt, copy=copy)
        facts.append(("to() is self", out is t))
        return out, facts
    if kind == "type":
        how = a[0]
        if how == "same":
            out = t.type(t.dtype)
        elif how == "double":
            out = t.double()
        elif how == "float":
            out = t.float()
        elif how == "type_as_same":
            out = t.type_as(m.zeros(1, dtype=t.dtype))
        else:
            out = t.type_as(m.zeros(1))
        facts.append(("type() is self", out is t))
        return out, facts
    if kind == "detach":
        out = t.detach()
        facts.append(("detach shares", out.data_ptr() == t.data_ptr() and
                       out.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()))
        return out, facts
    if kind == "new_empty_strided":
        out = t.new_empty_strided(*a)
        return _zeroed(out), facts
    if kind == "empty_like":
        fmt = a[0]
        out = m.empty_like(t) if fmt is None else m.empty_like(t, memory_format=getattr(m, fmt))
        return _zeroed(out), facts
    if kind == "write":
        with m.no_grad():
            if a[0] == "add_":
                t.add_(1 if t.dtype != m.bool else True)
            elif a[0] == "fill_":
                t.fill_(1)
            else:
                t.zero_()
        return t, facts
    raise AssertionError(kind)


def _array(m, t):
    t = t.detach().clone()  # (torch's numpy() makes the storage one resize_ refuses to grow)
    if t.dtype == m.bfloat16:
        t = t.to(m.float32)
    return t.resolve_conj().resolve_neg().numpy().copy()


def _safe(f):
    try:
        return f()
    except Exception as e:  # (a reading that raises: its class is the fact)
        return f"raises {type(e).__name__}"


def _record(m, t, pool, set_views=()):
    """The metadata of `t` as plain Python values, beside the first tensor `pool[0]`."""
    root = pool[0]
    storage = t.untyped_storage()
    shares = storage.data_ptr() == root.untyped_storage().data_ptr() and \
        storage.nbytes() > 0  # (no bytes: no storage to share, torch's data_ptr 0)
    base = t._base
    rec = {
        "shape": tuple(t.shape), "size": tuple(t.size()), "dim": t.dim(), "numel": t.numel(),
        "stride": tuple(t.stride()),
        "storage_offset": t.storage_offset(),
        "is_contiguous": t.is_contiguous(),
        "is_contiguous(contiguous_format)": t.is_contiguous(memory_format=m.contiguous_format),
        "is_contiguous(channels_last)": t.is_contiguous(memory_format=m.channels_last),
        "is_contiguous(channels_last_3d)": t.is_contiguous(memory_format=m.channels_last_3d),
        "dim_order": _safe(lambda: tuple(t.dim_order())),
        "element_size": t.element_size(), "itemsize": t.itemsize, "nbytes": t.nbytes,
        "storage nbytes": storage.nbytes(),
        "shares the first storage": shares,
        "bytes from the first": t.data_ptr() - root.data_ptr() if shares and t.numel() and
        root.numel() else None,
        "_base": None if base is None else next((i for i, p in enumerate(pool) if p is base),
                                                "another"),
        "_is_view": t._is_view(),
        "dtype": str(t.dtype).split(".")[1], "layout": str(t.layout).split(".")[1],
        "device": str(t.device), "requires_grad": t.requires_grad, "is_leaf": t.is_leaf,
    }
    if not t.numel():  # (NumPy keeps no strides nor place for no elements: KNOWN)
        for k in ("stride", "dim_order", "storage_offset", "storage nbytes",
                  "shares the first storage", "is_contiguous(channels_last)",
                  "is_contiguous(channels_last_3d)"):
            del rec[k]
    if set_views:  # (torch keeps a view's old _base after set_, and its views: KNOWN)
        del rec["_base"], rec["_is_view"]
    return rec


class Program:
    """One program, drawn from a seed (the steps are drawn against torch's tensors)."""

    def __init__(self, seed):
        r = random.Random(seed)
        rng = np.random.default_rng(seed)
        dtype = r.choice(DTYPES)
        shape = r.choice(SHAPES)
        grad = dtype.startswith(("float", "complex", "bfloat")) and r.random() < 0.15
        self.factory = (r.choice(["tensor", "arange", "full", "zeros"]), shape, dtype,
                        _values(shape, dtype, rng), grad)
        self.steps = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = _factory(torch, self.factory)
            pool = [t]
            for _ in range(STEPS):
                step = _draw_step(r, t, pool)
                self.steps.append(step)
                try:
                    t, _ = _apply(torch, t, pool, step)
                    pool.append(t)
                except Exception:
                    pass

    def describe(self):
        kind, shape, dtype, _, grad = self.factory
        return f"{kind}{shape} {dtype}{' requires_grad' if grad else ''} then {self.steps}"

    def run(self, m):
        """[(step, outcome)], each outcome the error class's name or (facts, record, values
        of the tensor, values of the first tensor)."""
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = _factory(m, self.factory)
            pool = [t]
            set_views, grown = {}, False
            out.append(("factory", (None, _record(m, t, pool), _array(m, t), None)))
            for step in self.steps:
                try:
                    new, facts = _apply(m, t, pool, step)
                except Exception as e:
                    out.append((step, type(e).__name__))
                    continue
                t = new
                pool.append(t)
                if ("set_ of a view", True) in facts:
                    facts.remove(("set_ of a view", True))
                    set_views[id(t)] = t
                grown = grown or ("storage grew", True) in facts
                out.append((step, (facts, _record(m, t, pool, set_views),
                                   None if grown else _array(m, t),
                                   None if grown else _array(m, pool[0]))))
        return out


def check(seed):
    """None when flowgrad's program agrees with torch's, else a message."""
    prog = Program(seed)
    want = prog.run(torch)
    got = prog.run(flow)
    for (step, w), (_, g) in zip(want, got):
        if isinstance(w, str) or isinstance(g, str):
            if isinstance(w, str) and isinstance(g, str):
                if w != g:
                    return f"{step}: torch raised {w}, flowgrad {g}"
                continue
            return f"{step}: torch {'raised ' + w if isinstance(w, str) else 'ran'}, " \
                f"flowgrad {'raised ' + g if isinstance(g, str) else 'ran'}"
        (wf, wr, wv, wroot), (gf, gr, gv, groot) = w, g
        if wf != gf:
            return f"{step}: facts {gf}, torch {wf}"
        for k in wr:
            if wr[k] != gr[k]:
                return f"{step}: {k} {gr[k]!r}, torch {wr[k]!r}"
        diff = fuzz_common.first_difference([("values", gv, wv), ("first tensor", groot, wroot)],
                                            rtol=0)
        if diff:
            return f"{step}: {diff}"
    return None


def main():
    fuzz_common.main(__doc__, lambda seed: Program(seed).describe(), check, seeds="0:300")


if __name__ == "__main__":
    main()
