"""Differential fuzzing of the shape, join, split and layout ops over their argument spaces,
against torch.

view/reshape (-1, sizes as varargs or one tuple, strides that cannot be viewed),
flatten/unflatten, squeeze/unsqueeze (tuple dims), movedim/moveaxis/permute/swapaxes/
transpose/t/T/mT/mH/adjoint, narrow/narrow_copy, select, unbind, split (int and list
sizes)/chunk/tensor_split (int, list, tensor indices)/hsplit/vsplit/dsplit, cat/concat/
concatenate/stack/hstack/vstack/dstack/column_stack/row_stack (mixed dtypes, torch's legacy
empty 1-D tensors in cat), expand/expand_as/broadcast_to/broadcast_tensors/broadcast_shapes,
repeat/tile/repeat_interleave (tensor repeats, output_size), roll, flip/fliplr/flipud, rot90,
tril/triu, diag/diagonal/diag_embed/diagflat, as_strided, unfold, take_along_dim, meshgrid,
cartesian_prod, combinations, block_diag, atleast_1d/2d/3d, ravel, view_as, contiguous.

Inputs are float64 (some int64, bool or float32 where an op joins several), of shapes with
0-d, empty and size-1 dims, contiguous or not (a transposed, a strided slice or an expanded
leaf), dims often negative and now and then out of range. Each case runs in torch and in
flowgrad and must give the same raise/no-raise (and the builtin exception type), then for
each result the same shape, dtype, values, requires_grad and view-ness (whether it is a view
of the input and shares its storage, at which offset), then the same gradients of the leaves
for a random upstream gradient, and, on a second run without autograd, the same input and
results after a write through each result (copy_: where torch refuses a write into an
overlapping result, flowgrad must too).

    .venv/bin/python tests/shape_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/shape_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

RTOL = 1e-12
BUILTIN_ERRORS = (IndexError, ValueError, TypeError, NotImplementedError, RuntimeError)


# ---- inputs --------------------------------------------------------------------------------
def _shape(r, lo=0, hi=3, nd=None):
    nd = r.choice([0, 1, 1, 2, 2, 2, 3, 3, 4]) if nd is None else nd
    return tuple(r.choice([1, 2, 3, 2, 0] if r.random() < 0.15 else [1, 2, 3, 2, 4])
                 for _ in range(nd))


def _layout(r, shape):
    """How the input is made from its leaf: contiguous, transposed, a strided slice or an
    expansion of a size-1 dim."""
    opts = ["contig", "contig"]
    if len(shape) >= 2:
        opts += ["transpose", "transpose"]
    if shape:
        opts += ["slice", "expand"]
    return r.choice(opts)


def _inp(r, shape=None, dtype="float64", nd=None):
    shape = _shape(r, nd=nd) if shape is None else tuple(shape)
    return dict(shape=shape, dtype=dtype, layout=_layout(r, shape))


def _dim(r, nd, extra=0, bad=0.04):
    """A dim of an nd-dim tensor (+extra places, for unsqueeze/stack), often negative, now
    and then out of range."""
    n = max(nd + extra, 1)
    if r.random() < bad:
        return r.choice([n, -n - 1])
    d = r.randrange(n)
    return d - n if r.random() < 0.4 else d


def _factor(r, n, k):
    """k sizes whose product is n (n > 0)."""
    sizes = [1] * k
    for p in _primes(n):
        sizes[r.randrange(k)] *= p
    return sizes


def _primes(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def _target_shape(r, shape):
    n = int(np.prod(shape))
    k = r.randint(0, 4)
    if n == 0:
        sizes = [r.choice([0, 1, 2, 3]) for _ in range(max(k, 1))]
        if 0 not in sizes:
            sizes[r.randrange(len(sizes))] = 0
    elif k == 0 and n == 1:
        sizes = []
    else:
        sizes = _factor(r, n, max(k, 1))
    if sizes and r.random() < 0.45:
        sizes[r.randrange(len(sizes))] = -1
    if r.random() < 0.08 and sizes:
        sizes[r.randrange(len(sizes))] += 1  # the wrong number of elements
    if r.random() < 0.03 and len(sizes) >= 2:
        sizes[0] = sizes[1] = -1  # two inferred sizes
    return tuple(sizes)


# ---- the ops -------------------------------------------------------------------------------
def _c(call, name, inputs, *args, **kw):
    return dict(call=call, op=name, inputs=inputs, args=list(args), kw=kw)


def g_view(r):
    x = _inp(r)
    t = _target_shape(r, x["shape"])
    name = r.choice(["view", "reshape"])
    form = r.choice(["star", "tuple", "fn"]) if name == "reshape" else r.choice(["star", "tuple"])
    if form == "fn":
        return _c("fn", "reshape", [x], t)
    return _c("method", name, [x], *(t if form == "star" else (t,)))


def g_flatten(r):
    x = _inp(r)
    nd = len(x["shape"])
    if r.random() < 0.6:
        args = [] if r.random() < 0.2 else [_dim(r, nd), _dim(r, nd)]
        return _c(r.choice(["fn", "method"]), "flatten", [x], *args)
    d = _dim(r, nd)
    size = x["shape"][d] if -nd <= d < nd and nd else 1
    sizes = _target_shape(r, (size,)) or (1,)
    return _c(r.choice(["fn", "method"]), "unflatten", [x], d, sizes)


def g_squeeze(r):
    x = _inp(r, shape=tuple(r.choice([1, 1, 2, 0]) for _ in range(r.randint(0, 4))))
    nd = len(x["shape"])
    name = r.choice(["squeeze", "squeeze", "unsqueeze"])
    if name == "unsqueeze":
        return _c(r.choice(["fn", "method"]), name, [x], _dim(r, nd, 1))
    v = r.random()
    if v < 0.25:
        return _c(r.choice(["fn", "method"]), name, [x])
    if v < 0.6:
        return _c(r.choice(["fn", "method"]), name, [x], _dim(r, nd))
    dims = tuple(_dim(r, nd) for _ in range(r.randint(0, max(nd, 1))))
    return _c(r.choice(["fn", "method"]), name, [x], dims)


def g_permute(r):
    x = _inp(r)
    nd = len(x["shape"])
    name = r.choice(["movedim", "moveaxis", "permute", "swapaxes", "swapdims", "transpose",
                     "t", "T", "mT", "mH", "adjoint", "H"])
    if name in ("movedim", "moveaxis"):
        if r.random() < 0.5:
            return _c(r.choice(["fn", "method"]), name, [x], _dim(r, nd), _dim(r, nd))
        k = r.randint(0, nd)
        src = r.sample(range(nd), k)
        dst = r.sample(range(nd), k)
        src = tuple(d - nd if r.random() < 0.3 else d for d in src)
        if r.random() < 0.05 and k:
            dst = dst[:-1]  # lengths that differ
        return _c(r.choice(["fn", "method"]), name, [x], src, tuple(dst))
    if name == "permute":
        p = [d - nd if r.random() < 0.3 else d for d in r.sample(range(nd), nd)]
        if r.random() < 0.05 and p:
            p[0] = p[-1]  # a repeated dim
        if r.random() < 0.5:
            return _c("method", name, [x], *p)
        return _c(r.choice(["fn", "method"]), name, [x], tuple(p))
    if name in ("swapaxes", "swapdims", "transpose"):
        return _c(r.choice(["fn", "method"]), name, [x], _dim(r, nd), _dim(r, nd))
    if name == "t":
        return _c(r.choice(["fn", "method"]), name, [x])
    if name == "adjoint":
        return _c(r.choice(["fn", "method"]), name, [x])
    if name in ("mH", "H", "adjoint") and r.random() < 0.4:
        x["dtype"] = "complex128"
    return _c("attr", name, [x])


def g_narrow(r):
    x = _inp(r, nd=r.randint(0, 3))
    nd = len(x["shape"])
    d = _dim(r, nd)
    size = x["shape"][d] if -nd <= d < nd else 2
    name = r.choice(["narrow", "narrow_copy", "select", "unbind"])
    if name == "unbind":
        return _c(r.choice(["fn", "method"]), name, [x], d)
    if name == "select":
        i = r.randrange(-size, size) if size else 0
        if r.random() < 0.05:
            i = size
        return _c(r.choice(["fn", "method"]), name, [x], d, i)
    start = r.randint(-size, size)
    length = r.randint(0, size - (start % size if size and start < size else 0))
    if r.random() < 0.05:
        length = size + 1
    if name == "narrow" and r.random() < 0.2:
        start = ("tensor", start, "int64")
    return _c(r.choice(["fn", "method"]), name, [x], d, start, length)


def _cuts(r, size):
    return sorted(r.randint(-1, size + 1) for _ in range(r.randint(0, 3)))


def g_split(r):
    x = _inp(r, nd=r.randint(1, 3))
    nd = len(x["shape"])
    d = _dim(r, nd)
    size = x["shape"][d] if -nd <= d < nd else 2
    name = r.choice(["split", "split", "chunk", "tensor_split", "tensor_split", "hsplit",
                     "vsplit", "dsplit"])
    call = r.choice(["fn", "method"])
    if name == "split":
        if r.random() < 0.5:
            s = r.randint(0 if size == 0 else 1, size + 1) if r.random() > 0.03 else 0
        else:
            parts = [r.randint(0, size) for _ in range(r.randint(1, 3))]
            parts[-1] = size - sum(parts[:-1])
            if r.random() < 0.05:
                parts[-1] += 1
            s = parts
        return _c(call, name, [x], s, d)
    if name == "chunk":
        return _c(call, name, [x], r.randint(1, 4) if r.random() > 0.03 else 0, d)
    if name == "tensor_split":
        v = r.random()
        if v < 0.3:
            arg = r.randint(1, 4)
        elif v < 0.55:
            arg = _cuts(r, size)
        elif v < 0.7:
            arg = ("tensor", r.randint(1, 4), "int64")  # 0-d: sections
        else:
            arg = ("tensor", _cuts(r, size), "int64")  # 1-d: indices
        return _c(call, name, [x], arg, dim=d) if r.random() < 0.5 else \
            _c(call, name, [x], arg, d)
    x = _inp(r, nd=r.randint(0, 4))
    nd = len(x["shape"])
    axis = {"hsplit": 1 if nd > 1 else 0, "vsplit": 0, "dsplit": 2}[name]
    size = x["shape"][axis] if axis < nd else 2
    arg = r.choice([1, 2, 3]) if r.random() < 0.6 else _cuts(r, size)
    return _c(call, name, [x], arg)


def _join_inputs(r, base_shape, dim, k, mixed):
    out = []
    for _ in range(k):
        shape = list(base_shape)
        if dim is not None and shape:
            shape[dim] = r.choice([0, 1, 2, 3])
        if r.random() < 0.04 and shape:
            shape[r.randrange(len(shape))] += 1  # sizes that differ
        dtype = "float64"
        if mixed and r.random() < 0.35:
            dtype = r.choice(["float32", "int64", "bool"])
        spec = _inp(r, shape=shape, dtype=dtype)
        if r.random() < 0.1:
            spec = _inp(r, shape=(0,), dtype=dtype)  # torch's legacy empty tensor
        out.append(spec)
    return out


def g_join(r):
    name = r.choice(["cat", "cat", "concat", "concatenate", "stack", "stack", "hstack",
                     "vstack", "dstack", "column_stack", "row_stack"])
    base = _shape(r, nd=r.randint(0 if name != "cat" else 1, 3))
    k = r.randint(1, 3) if r.random() > 0.03 else 0
    if name in ("cat", "concat", "concatenate"):
        nd = len(base)
        d = _dim(r, nd)
        ins = _join_inputs(r, base, d if -nd <= d < nd else None, k, True)
        if r.random() < 0.3:
            return _c("seq", name, ins, dim=d) if name != "concatenate" or r.random() < 0.5 \
                else _c("seq", name, ins, axis=d)
        return _c("seq", name, ins, d)
    if name == "stack":
        d = _dim(r, len(base), 1)
        return _c("seq", name, _join_inputs(r, base, None, k, True), d)
    if name == "column_stack" and r.random() < 0.5:
        base = base[:1]
    ins = _join_inputs(r, base, 0 if base and r.random() < 0.3 else None, k, True)
    return _c("seq", name, ins)


def _broadcastable(r, shape):
    out = [1 if r.random() < 0.3 else s for s in shape]
    while out and r.random() < 0.3:
        out.pop(0)
    if r.random() < 0.05 and out:
        out[-1] += 2  # not broadcastable
    return tuple(out)


def g_expand(r):
    name = r.choice(["expand", "expand", "expand_as", "broadcast_to", "broadcast_tensors",
                     "broadcast_shapes"])
    target = _shape(r)
    small = _broadcastable(r, target)
    if name == "broadcast_shapes":
        return _c("shapes", name, [], *[_broadcastable(r, target) for _ in range(r.randint(0, 3))])
    if name == "broadcast_tensors":
        ins = [_inp(r, shape=_broadcastable(r, target)) for _ in range(r.randint(1, 3))]
        return _c("star", name, ins)
    x = _inp(r, shape=small)
    if name == "expand_as":
        return _c(r.choice(["method"]), name, [x, _inp(r, shape=target)])
    sizes = [-1 if r.random() < 0.3 and i >= len(target) - len(small) else s
             for i, s in enumerate(target)]
    if r.random() < 0.03 and sizes:
        sizes[0] = -1  # -1 for a new leading dim
    if name == "broadcast_to":
        return _c(r.choice(["fn", "method"]), name, [x], tuple(sizes))
    return _c("method", name, [x], *sizes) if r.random() < 0.5 else \
        _c("method", name, [x], tuple(sizes))


def g_repeat(r):
    x = _inp(r, nd=r.randint(0, 3))
    nd = len(x["shape"])
    name = r.choice(["repeat", "tile", "repeat_interleave", "repeat_interleave"])
    if name == "repeat":
        k = nd + r.randint(0, 2) - (1 if r.random() < 0.05 else 0)
        reps = [r.choice([1, 2, 3, 0]) for _ in range(k)]
        return _c("method", name, [x], *reps) if r.random() < 0.5 else \
            _c("method", name, [x], tuple(reps))
    if name == "tile":
        reps = tuple(r.choice([1, 2, 3, 0]) for _ in range(r.randint(0, nd + 1)))
        return _c(r.choice(["fn", "method"]), name, [x], reps)
    d = None if r.random() < 0.3 else _dim(r, nd)
    size = (int(np.prod(x["shape"])) if d is None else
            x["shape"][d] if -nd <= d < nd and nd else 1)
    if r.random() < 0.4:
        reps = r.randint(0, 3)
    else:
        k = size if r.random() > 0.05 else size + 1
        vals = [r.randint(0, 3) for _ in range(k)]
        if k == 1 and r.random() < 0.5:
            reps = ("tensor", vals, "int64")
        else:
            reps = ("tensor", vals, "int64")
    kw = {}
    if r.random() < 0.3:
        total = (reps * size if isinstance(reps, int) else sum(reps[1])) \
            if r.random() > 0.1 else 1
        kw["output_size"] = total
    if d is not None:
        kw["dim"] = d
    return _c(r.choice(["fn", "method"]), name, [x], reps, **kw)


def g_roll(r):
    x = _inp(r)
    nd = len(x["shape"])
    name = r.choice(["roll", "flip", "fliplr", "flipud", "rot90"])
    call = r.choice(["fn", "method"])
    if name == "roll":
        if r.random() < 0.3:
            return _c(call, name, [x], r.randint(-5, 5))
        k = r.randint(1, max(nd, 1))
        dims = tuple(_dim(r, nd) for _ in range(k))
        shifts = tuple(r.randint(-5, 5) for _ in range(k if r.random() > 0.05 else k + 1))
        if k == 1 and r.random() < 0.5:
            return _c(call, name, [x], shifts[0], dims[0])
        return _c(call, name, [x], shifts, dims)
    if name == "flip":
        dims = tuple(_dim(r, nd) for _ in range(r.randint(0, nd)))
        return _c(call, name, [x], dims) if r.random() < 0.7 or not dims else \
            _c("method", name, [x], *dims)
    if name in ("fliplr", "flipud"):
        return _c(call, name, [x])
    k = r.randint(-5, 5)
    dims = (_dim(r, nd), _dim(r, nd)) if r.random() < 0.6 else (0, 1)
    return _c(call, name, [x], k, dims)


def g_diag(r):
    name = r.choice(["tril", "triu", "diag", "diagonal", "diag_embed", "diagflat"])
    call = r.choice(["fn", "method"])
    off = r.randint(-4, 4)
    if name in ("tril", "triu"):
        x = _inp(r, nd=r.randint(1, 4))
        return _c(call, name, [x], off) if r.random() < 0.7 else _c(call, name, [x], diagonal=off)
    if name == "diag":
        x = _inp(r, nd=r.randint(0, 3) if r.random() < 0.1 else r.randint(1, 2))
        return _c(call, name, [x], off)
    if name == "diagflat":
        return _c(call, name, [_inp(r)], off)
    if name == "diagonal":
        x = _inp(r, nd=r.randint(1, 4))
        nd = len(x["shape"])
        return _c(call, name, [x], off, _dim(r, nd), _dim(r, nd))
    x = _inp(r, nd=r.randint(0, 3))
    nd = len(x["shape"]) + 1
    return _c(call, name, [x], off, _dim(r, nd), _dim(r, nd))


def g_strided(r):
    name = r.choice(["as_strided", "unfold", "take_along_dim", "ravel", "view_as",
                     "contiguous", "reshape_as"])
    call = r.choice(["fn", "method"])
    if name == "as_strided":
        x = _inp(r, nd=r.randint(1, 3))
        n = int(np.prod(x["shape"]))
        k = r.randint(0, 3)
        size = tuple(r.randint(0, 3) for _ in range(k))
        stride = tuple(r.randint(0, 3) for _ in range(k))
        offset = r.randint(0, 2) if r.random() < 0.5 else None
        extent = (offset or 0) + sum((s - 1) * st for s, st in zip(size, stride) if s) + 1
        if extent > n and r.random() > 0.05 and n:
            return _c(call, name, [x], (1,) * k, stride, 0)
        return _c(call, name, [x], size, stride) if offset is None else \
            _c(call, name, [x], size, stride, offset)
    if name == "unfold":
        x = _inp(r, nd=r.randint(0, 3))
        nd = len(x["shape"])
        d = _dim(r, nd)
        size = x["shape"][d] if -nd <= d < nd and nd else 1
        return _c("method", name, [x], d, r.randint(0, size + (1 if r.random() < 0.05 else 0)),
                  r.randint(1, 3) if r.random() > 0.03 else 0)
    if name == "take_along_dim":
        x = _inp(r, nd=r.randint(1, 3))
        nd = len(x["shape"])
        if r.random() < 0.3:
            n = int(np.prod(x["shape"]))
            return _c(call, name, [x], ("flat index", (r.randint(0, 4),), n))
        d = _dim(r, nd, bad=0.0)
        ishape = tuple(r.randint(0, 3) if i == d % nd else r.choice([1, s])
                       for i, s in enumerate(x["shape"]))
        return _c(call, name, [x], ("index", ishape, x["shape"][d]), d)
    x = _inp(r)
    if name == "ravel":
        return _c(call, name, [x])
    if name == "contiguous":
        return _c("method", name, [x])
    n = int(np.prod(x["shape"]))
    shape = _target_shape(r, x["shape"])
    shape = tuple(n if s == -1 and n else max(s, 0) for s in shape)
    return _c("method", name, [x, _inp(r, shape=shape)])


def g_grid(r):
    name = r.choice(["meshgrid", "cartesian_prod", "combinations", "block_diag", "atleast_1d",
                     "atleast_2d", "atleast_3d"])
    if name in ("meshgrid", "cartesian_prod"):
        k = r.randint(1, 3) if r.random() > 0.03 else 0
        ins = [_inp(r, nd=1 if r.random() > 0.05 else r.choice([0, 2])) for _ in range(k)]
        if name == "meshgrid":
            kw = {"indexing": r.choice(["ij", "xy"])} if r.random() < 0.8 else {}
            return _c(r.choice(["star", "seq"]), name, ins, **kw)
        return _c("star", name, ins)
    if name == "combinations":
        x = _inp(r, nd=1 if r.random() > 0.05 else 0)
        kw = {}
        if r.random() < 0.7:
            kw["r"] = r.randint(0, 4)
        if r.random() < 0.5:
            kw["with_replacement"] = r.random() < 0.5
        return _c("fn", name, [x], **kw)
    if name == "block_diag":
        ins = [_inp(r, nd=r.randint(0, 2) if r.random() > 0.05 else 3,
                    dtype="float64" if r.random() > 0.2 else r.choice(["int64", "float32"]))
               for _ in range(r.randint(0, 3))]
        return _c("star", name, ins)
    ins = [_inp(r) for _ in range(r.randint(1, 3))]
    return _c("seq" if r.random() < 0.3 else "star", name, ins)


GENERATORS = [g_view, g_flatten, g_squeeze, g_permute, g_narrow, g_split, g_join, g_expand,
              g_repeat, g_roll, g_diag, g_strided, g_grid]


def generate(seed):
    r = random.Random(seed)
    case = r.choice(GENERATORS)(r)
    case["seed"] = seed
    return case


# ---- running a case ------------------------------------------------------------------------
def _make(m, rng, spec, grad):
    """(leaf, the input made from it) for `spec` under module `m`."""
    shape, layout = spec["shape"], spec["layout"]
    leaf_shape = list(shape)
    if layout == "transpose":
        leaf_shape[0], leaf_shape[-1] = leaf_shape[-1], leaf_shape[0]
    elif layout == "slice":
        leaf_shape[-1] = 2 * leaf_shape[-1] + 1
    elif layout == "expand":
        leaf_shape[0] = 1
    a = rng.standard_normal(leaf_shape)
    if spec["dtype"] == "complex128":
        a = a + 1j * rng.standard_normal(leaf_shape)
    elif spec["dtype"] == "int64":
        a = np.round(a * 3).astype(np.int64)
    elif spec["dtype"] == "bool":
        a = a > 0
    leaf = m.tensor(a, dtype=getattr(m, spec["dtype"]))
    if grad and (leaf.is_floating_point() or leaf.is_complex()):
        leaf.requires_grad_()
    if layout == "transpose":
        x = leaf.transpose(0, -1)
    elif layout == "slice":
        x = leaf[..., 1::2]
    elif layout == "expand":
        x = leaf.expand(*shape)
    else:
        x = leaf
    return leaf, x


def _arg(m, rng, a):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        return m.tensor(a[1], dtype=getattr(m, a[2]))
    if isinstance(a, tuple) and a and a[0] == "flat index":  # (torch's gather: none < 0)
        return m.tensor(rng.integers(0, max(a[2], 1), a[1]), dtype=m.int64)
    if isinstance(a, tuple) and a and a[0] == "index":
        _, shape, size = a
        return m.tensor(rng.integers(-size, size, shape) if size else
                        np.zeros(shape, np.int64), dtype=m.int64)
    return a


def _call(m, case, xs, rng):
    args = [_arg(m, rng, a) for a in case["args"]]
    kw = {k: _arg(m, rng, v) for k, v in case["kw"].items()}
    name, call = case["op"], case["call"]
    if call == "fn":
        return getattr(m, name)(xs[0], *args, **kw)
    if call == "method":
        return getattr(xs[0], name)(*args, *xs[1:], **kw)
    if call == "attr":
        return getattr(xs[0], name)
    if call == "seq":
        return getattr(m, name)(list(xs), *args, **kw)
    if call == "star":
        return getattr(m, name)(*xs, *args, **kw)
    return getattr(m, name)(*args, **kw)  # shapes


def _outputs(out):
    """The result as a list of tensors, or None for a shape (broadcast_shapes)."""
    if isinstance(out, (torch.Size, flow.Size)):
        return None
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _root(t):
    return t if t._base is None else t._base


def _view_facts(o, xs):
    """Which input `o` is a view of (its index in xs; None if none: a result that is a view
    of an intermediate is not one), where in that storage it starts and its strides (none
    for an empty result, none of a size-1 dim: they address nothing)."""
    for i, x in enumerate(xs):
        if o._base is not None and o._base is _root(x):
            if o.numel() == 0:
                return ("view of input", i)
            off = o.data_ptr() - _root(x).data_ptr()
            return ("view of input", i, off,
                    tuple(st if n != 1 else None for st, n in zip(o.stride(), o.shape)))
    return ("not a view",)


def _run(m, case, grad=True):
    """[('what', array or other value), ...] of the case under module `m`."""
    rng = np.random.default_rng(case["seed"])
    made = [_make(m, rng, s, grad) for s in case["inputs"]]
    leaves, xs = [a for a, _ in made], [b for _, b in made]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = _call(m, case, xs, rng)
    outs = _outputs(out)
    if outs is None:
        return [("result", (type(out).__name__, tuple(out)))], [], xs
    facts = [("count", len(outs))]
    for i, o in enumerate(outs):
        facts.append((f"result {i}", o.detach().resolve_conj().numpy()))
        facts.append((f"result {i} requires_grad", o.requires_grad))
        facts.append((f"result {i} view", _view_facts(o, xs)))
    if grad:
        want = [leaf for leaf in leaves if leaf.requires_grad]
        live = [(o, i) for i, o in enumerate(outs) if o.requires_grad]
        if want and live:
            up = np.random.default_rng(case["seed"] + 1)
            loss = sum(((o * m.tensor(up.standard_normal(tuple(o.shape)))).sum()
                        for o, _ in live), m.tensor(0.0, dtype=m.float64))
            if loss.is_complex():
                loss = loss.real
            gs = m.autograd.grad(loss, want, allow_unused=True)
            facts += [(f"gradient {i}", None if g is None else g.numpy())
                      for i, g in enumerate(gs)]
    return facts, outs, xs


def _writes(m, case):
    """The inputs and results after `copy_` through each result in turn (no autograd): the
    verdict of each write and the arrays after."""
    facts, outs, xs = _run(m, case, grad=False)
    if facts and facts[0][0] == "result":
        return []
    rng = np.random.default_rng(case["seed"] + 2)
    got, unordered = [], False
    for i, o in enumerate(outs):
        v = rng.standard_normal(tuple(o.shape))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                o.copy_(m.tensor(v).to(o.dtype))
            got.append((f"write {i}", "ran"))
            unordered |= _self_overlapping(o)
        except BUILTIN_ERRORS as e:
            got.append((f"write {i}", "raised " + _kind(e)))
    if unordered:  # (which write lands last on a shared element: the kernel's order)
        return got
    got += [(f"input {j} after writes", x.numpy()) for j, x in enumerate(xs)]
    got += [(f"result {j} after writes", o.resolve_conj().numpy()) for j, o in enumerate(outs)]
    return got


def _self_overlapping(o):
    """Whether elements of `o` share memory (an unfold with step < size, an as_strided)."""
    offsets = np.zeros((), np.int64)
    for n, st in zip(o.shape, o.stride()):
        offsets = (offsets[..., None] + np.arange(n) * st)
    return np.unique(offsets).size < offsets.size


def _kind(e):
    """The builtin exception class `e` is an instance of (torch's own errors subclass them)."""
    for k in (IndexError, ValueError, TypeError, NotImplementedError, RuntimeError):
        if isinstance(e, k):
            return k.__name__
    return type(e).__name__


def _outcome(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 - an outcome to compare
        return None, e


def _compare(want, got):
    if len(want) != len(got):
        return f"facts: flowgrad {[w for w, _ in got]}, torch {[w for w, _ in want]}"
    for (what, b), (_, a) in zip(want, got):
        if isinstance(b, np.ndarray) or isinstance(a, np.ndarray) or a is None or b is None:
            msg = fuzz_common.first_difference([(what, a, b)], RTOL)
            if msg:
                return msg
        elif a != b:
            return f"{what}: flowgrad {a!r}, torch {b!r}"
    return None


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    tres, terr = _outcome(lambda: _run(torch, case))
    fres, ferr = _outcome(lambda: _run(flow, case))
    if terr is not None or ferr is not None:
        if terr is None:
            return f"flowgrad raised {type(ferr).__name__}: {ferr}"
        if not isinstance(terr, BUILTIN_ERRORS):
            raise terr
        if ferr is None:
            return f"torch raised {type(terr).__name__}: {terr}; flowgrad ran"
        if _kind(ferr) != _kind(terr):
            return (f"torch raised {type(terr).__name__}: {terr}; flowgrad raised "
                    f"{type(ferr).__name__}: {ferr}")
        return None
    msg = _compare(tres[0], fres[0])
    if msg:
        return msg
    tw, terr = _outcome(lambda: _writes(torch, case))
    fw, ferr = _outcome(lambda: _writes(flow, case))
    if terr is not None or ferr is not None:
        return f"writes: torch {terr!r}, flowgrad {ferr!r}"
    return _compare(tw, fw)


# cases where flowgrad deliberately differs from torch: name -> why
KNOWN = {
    "lazy conj": "mH/H/adjoint of a complex tensor: torch's is a conj view of the input (its "
                 "lazy conj bit), flowgrad's conj is a copy (flowgrad/ops/complex.py: conj), "
                 "so the result is no view of the input and writes through it do not reach it",
    "narrow_copy negative start": "torch 2.13's narrow_copy backward does not wrap a negative "
                                  "start: a zero gradient, or a size-mismatch error; flowgrad "
                                  "gives narrow's gradient",
    "block_diag empty block": "torch 2.13's block_diag backward takes an empty 1-D block, "
                              "which fills one row of the result, for no rows: the later "
                              "blocks get their gradients from one row too high",
    "take_along_dim flat view": "torch 2.13's take_along_dim(dim=None) flattens with view(-1): "
                                "a RuntimeError for an input no view can flatten; flowgrad "
                                "flattens as torch.flatten does, a copy where needed",
    "as_strided of an empty view": "as_strided reading elements through a zero-size view of "
                                   "a larger base: torch reads the base's storage; flowgrad "
                                   "keeps no storage position for a zero-size NumPy view "
                                   "(storage_offset 0) and raises rather than guess",
}


def known(case):
    """The KNOWN entry the case falls under, or None."""
    op, args, x = case["op"], case["args"], (case["inputs"] or [{}])[0]
    nd = len(x.get("shape", ()))
    if op in ("mH", "H", "adjoint") and x["dtype"] == "complex128" and \
            (nd in (0, 2) if op == "H" else nd != 1):
        return "lazy conj"
    if op == "narrow_copy" and nd:
        dim, start, length = args
        if dim >= nd or dim < -nd:
            return None
        # (torch's backward slices start:start+length unwrapped: empty when that end is 0)
        if -x["shape"][dim] <= start < 0 and length > 0 and start + length == 0:
            return "narrow_copy negative start"
    if op == "block_diag":
        empty = [i for i, spec in enumerate(case["inputs"]) if spec["shape"] == (0,)]
        later = [i for i, spec in enumerate(case["inputs"])
                 if 0 not in spec["shape"] and spec["dtype"] != "int64"]
        if empty and later and max(later) > min(empty):
            return "block_diag empty block"
    if op == "as_strided" and 0 in x["shape"] and x["layout"] != "contig" and \
            np.prod(args[0]) > 0:
        return "as_strided of an empty view"
    if op == "take_along_dim" and len(args) == 1:
        _, t = _make(torch, np.random.default_rng(0), x, False)
        try:
            t.view(-1)
        except RuntimeError:
            return "take_along_dim flat view"
    return None


def main():
    fuzz_common.main(__doc__, generate, lambda seed: None if known(generate(seed)) else
                     check(seed))


if __name__ == "__main__":
    main()
