"""Differential fuzzing of the indexing ops over their argument space, against torch.

gather, scatter (src or value, reduce add/multiply), scatter_add, scatter_reduce (sum, prod,
mean, amax, amin; include_self; repeated indices, ties), index_select, index_add (alpha),
index_copy, index_fill, index_put (accumulate), masked_fill/scatter/select, take,
take_along_dim, put (accumulate) and advanced indexing (ints, slices with steps, None,
Ellipsis, boolean masks, Python bools, broadcast integer tensors, negative indices), in and
out of place.
Indices repeat only where the op's result is defined when they do (sums, accumulate,
scatter_reduce); copies get distinct ones. Each case runs in float64 in both frameworks and
must give the same raise/no-raise, the same values and the same gradients of every floating
input for a random upstream gradient.

    .venv/bin/python tests/index_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/index_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np

RTOL = 1e-10


def _shape(r, lo=1, hi=4):
    return tuple(r.randint(lo, hi) for _ in range(r.randint(1, 3)))


def _index_like(r, shape, dim, size, distinct):
    """An int64 index of `shape` with values in [0, size) along `dim` (distinct per line)."""
    return ("index", shape, dim, size, distinct)


def _dim_op(r):
    """gather / scatter family over one dim."""
    shape = _shape(r)
    dim = r.randrange(len(shape))
    name = r.choice(["gather", "scatter", "scatter_value", "scatter_add", "scatter_reduce",
                     "take_along_dim"])
    ishape = tuple(r.randint(1, s) for s in shape)
    if name in ("gather", "take_along_dim"):
        ishape = tuple(s if d != dim else r.randint(1, 5) for d, s in enumerate(ishape))
    distinct = name in ("scatter", "scatter_value")
    kw = {}
    if name == "scatter_reduce":
        kw = dict(reduce=r.choice(["sum", "prod", "mean", "amax", "amin"]),
                  include_self=r.random() < 0.5)
    if name in ("scatter", "scatter_value") and r.random() < 0.3:
        kw["reduce"] = r.choice(["add", "multiply"])
        distinct = False
    neg = r.random() < 0.2
    return dict(op=name, shape=shape, dim=dim - len(shape) if neg else dim,
                index=_index_like(r, ishape, dim, shape[dim], distinct),
                src=ishape, kwargs=kw, ties=name == "scatter_reduce" and r.random() < 0.4,
                inplace=name != "gather" and name != "take_along_dim" and r.random() < 0.4)


def _index_op(r):
    """index_select / index_add / index_copy / index_fill over one dim with a 1-d index."""
    shape = _shape(r)
    dim = r.randrange(len(shape))
    name = r.choice(["index_select", "index_add", "index_copy", "index_fill"])
    distinct = name in ("index_copy", "index_fill")
    k = r.randint(0, shape[dim] if distinct else 5)
    src = tuple(k if d == dim else s for d, s in enumerate(shape))
    kw = {"alpha": r.choice([1.0, -2.0])} if name == "index_add" else {}
    return dict(op=name, shape=shape, dim=dim, index=("index1", k, shape[dim], distinct),
                src=src, kwargs=kw, inplace=name != "index_select" and r.random() < 0.4)


def _masked_op(r):
    shape = _shape(r)
    name = r.choice(["masked_fill", "masked_fill_tensor", "masked_scatter", "masked_select"])
    mshape = shape[r.randrange(len(shape)):] if r.random() < 0.3 else shape
    return dict(op=name, shape=shape, mask=mshape, inplace=name != "masked_select" and
                r.random() < 0.4)


def _flat_op(r):
    shape = _shape(r)
    name = r.choice(["take", "put", "put_accumulate", "index_put", "index_put_accumulate"])
    n = int(np.prod(shape))
    if name in ("take", "put", "put_accumulate"):
        k = r.randint(0, n if name == "put" else 6)
        return dict(op=name, shape=shape, index=("flat", k, n, name == "put"),
                    inplace=name != "take" and r.random() < 0.5)
    k = r.randint(1, len(shape))  # index tensors for the first k dims, broadcast together
    count = r.randint(0, min(int(np.prod(shape[:k])), 4) if name == "index_put" else 5)
    return dict(op=name, shape=shape, k=k, count=count, inplace=r.random() < 0.5)


def _getitem(r):
    shape = _shape(r, 1, 5)
    items, d = [], 0
    while d < len(shape):
        choice = r.random()
        if choice < 0.2:
            items.append(("int", r.randint(-shape[d], shape[d] - 1)))
        elif choice < 0.45:
            items.append(("slice", r.choice([None, 1, -2]), r.choice([None, 3, -1]),
                          r.choice([None, 1, 2, -1])))
        elif choice < 0.6:
            items.append(("long", r.choice([(2,), (1,), (2, 1), (0,)]), shape[d]))
        elif choice < 0.7 and d == 0:
            k = r.randint(1, len(shape))
            items.append(("mask", shape[:k]))
            d += k
            continue
        elif choice < 0.8:
            items.append(("none",))
            continue
        else:
            items.append(("all",))
        d += 1
    if r.random() < 0.2:
        items.insert(r.randrange(len(items) + 1), ("ellipsis",))
    return dict(op="getitem", shape=shape, items=items, setitem=r.random() < 0.35)


def generate(seed):
    r = random.Random(seed)
    case = r.choice([_dim_op, _dim_op, _index_op, _masked_op, _flat_op, _getitem,
                     _getitem])(r)
    case["seed"] = seed
    extra = random.Random(-1 - seed)  # (its own stream: the other cases stay as they were)
    if case["op"] == "getitem" and extra.random() < 0.25:  # torch's x[..., True]: unsqueeze
        case["items"].insert(extra.randrange(len(case["items"]) + 1),
                             ("bool", extra.random() < 0.5))
    return case


# ---- running a case ---------------------------------------------------------------------
def _index_array(rng, spec):
    kind = spec[0]
    if kind == "index":
        _, shape, dim, size, distinct = spec
        if distinct:  # distinct along dim for each line: argsort of random keys
            keys = rng.random(shape[:dim] + (size,) + shape[dim + 1:])
            perm = np.argsort(keys, axis=dim)
            return np.take(perm, np.arange(shape[dim]), axis=dim)
        return rng.integers(0, size, shape)
    if kind == "index1":
        _, k, size, distinct = spec
        return rng.permutation(size)[:k] if distinct else rng.integers(0, size, k)
    _, k, n, distinct = spec  # flat
    return rng.permutation(n)[:k] if distinct else rng.integers(-n, n, k) if n else \
        np.zeros(0, np.int64)


def _key(m, rng, item):
    kind = item[0]
    if kind == "int":
        return item[1]
    if kind == "slice":
        return slice(*item[1:])
    if kind == "long":
        return m.tensor(rng.integers(-item[2], item[2], item[1]))
    if kind == "mask":
        return m.tensor(rng.random(item[1]) < 0.5)
    if kind == "none":
        return None
    if kind == "ellipsis":
        return Ellipsis
    if kind == "bool":
        return item[1]
    return slice(None)


def _run(m, case):
    """(result, gradients) as arrays under module `m`."""
    with warnings.catch_warnings():  # (torch's note that scatter's reduce= is deprecated)
        warnings.simplefilter("ignore")
        return _run_quietly(m, case)


def _run_quietly(m, case):
    rng = np.random.default_rng(case["seed"])
    x_np = rng.standard_normal(case["shape"])
    if case.get("ties"):
        x_np = np.round(x_np)  # equal values: amax/amin split their gradient among ties
    x = m.tensor(x_np, requires_grad=True)
    base = x * 1.0 if case.get("inplace") or case.get("setitem") else x  # (in place: a copy)
    grads_of = [x]
    op = case["op"]
    if op in ("gather", "take_along_dim", "scatter", "scatter_value", "scatter_add",
              "scatter_reduce"):
        index = m.tensor(np.asarray(_index_array(rng, case["index"]), np.int64))
        dim = case["dim"]
        src_np = rng.standard_normal(case["src"])
        if case.get("ties"):
            src_np = np.round(src_np)
        src = m.tensor(src_np, requires_grad=True)
        if op == "gather":
            out = m.gather(base, dim, index)
        elif op == "take_along_dim":
            out = m.take_along_dim(base, index, dim=dim)
        elif op == "scatter_value":
            fn = base.scatter_ if case["inplace"] else base.scatter
            out = fn(dim, index, 1.5, **case["kwargs"])
        else:
            grads_of.append(src)
            name = op + ("_" if case["inplace"] else "")
            if op == "scatter_reduce":
                out = getattr(base, name)(dim, index, src, **case["kwargs"])
            else:
                out = getattr(base, name)(dim, index, src, **case["kwargs"])
    elif op.startswith("index_") and not op.startswith("index_put"):
        index = m.tensor(np.asarray(_index_array(rng, case["index"]), np.int64))
        dim = case["dim"]
        if op == "index_select":
            out = m.index_select(base, dim, index)
        elif op == "index_fill":
            out = getattr(base, op + ("_" if case["inplace"] else ""))(dim, index, -0.5)
        else:
            src = m.tensor(rng.standard_normal(case["src"]), requires_grad=True)
            grads_of.append(src)
            out = getattr(base, op + ("_" if case["inplace"] else ""))(dim, index, src,
                                                                        **case["kwargs"])
    elif op.startswith("masked_"):
        mask = m.tensor(rng.random(case["mask"]) < 0.5)
        if op == "masked_select":
            out = m.masked_select(base, mask)
        elif op == "masked_scatter":
            src = m.tensor(rng.standard_normal(case["shape"]), requires_grad=True)
            grads_of.append(src)
            out = getattr(base, op + ("_" if case["inplace"] else ""))(mask, src)
        else:
            value = 2.5 if op == "masked_fill" else m.tensor(-1.25)
            name = "masked_fill" + ("_" if case["inplace"] else "")
            out = getattr(base, name)(mask, value)
    elif op in ("take", "put", "put_accumulate"):
        index = m.tensor(np.asarray(_index_array(rng, case["index"]), np.int64))
        if op == "take":
            out = m.take(base, index)
        else:
            src = m.tensor(rng.standard_normal(tuple(index.shape)), requires_grad=True)
            grads_of.append(src)
            fn = base.put_ if case["inplace"] else base.put
            out = fn(index, src, accumulate=op == "put_accumulate")
    elif op.startswith("index_put"):
        shape, k, count = case["shape"], case["k"], case["count"]
        if op == "index_put":  # distinct positions: a copy is defined only then
            flat = rng.permutation(int(np.prod(shape[:k])))[:count]
            idx = np.unravel_index(flat, shape[:k])
        else:
            idx = [rng.integers(-s, s, count) for s in shape[:k]]
        indices = tuple(m.tensor(np.asarray(i, np.int64)) for i in idx)
        vshape = (count,) + tuple(shape[k:])
        values = m.tensor(rng.standard_normal(vshape), requires_grad=True)
        grads_of.append(values)
        fn = base.index_put_ if case["inplace"] else base.index_put
        out = fn(indices, values, accumulate=op == "index_put_accumulate")
    else:  # getitem / setitem
        key = tuple(_key(m, rng, item) for item in case["items"])
        view = base[key]
        if case["setitem"]:
            value = m.tensor(rng.standard_normal(tuple(view.shape)), requires_grad=True)
            grads_of.append(value)
            base[key] = value
            out = base
        else:
            out = view
    if op.startswith("scatter") and case.get("kwargs", {}).get("reduce") in ("add", "multiply"):
        return [out.detach().numpy()]  # torch has no derivative for scatter(reduce=...)
    return fuzz_common.value_and_gradients(m, out, grads_of, case["seed"])


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    return fuzz_common.check_value_and_gradients(_run, case, RTOL)


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
