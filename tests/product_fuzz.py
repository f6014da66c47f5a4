"""Differential fuzzing of the products against torch: matmul/@ over 1-d, 2-d and broadcast
batched shapes (including empty and size-1 dims), mm/bmm/mv/dot/vdot/inner/outer/addmm/
addmv/addbmm/baddbmm (beta, alpha), tensordot (int or explicit dims), kron, linear, bilinear
and einsum with random subscripts (repeated letters for diagonals and traces, summed letters,
ellipsis, an empty output, broadcasting size-1 dims), on transposed and strided operands.
Each case runs in float64 in both frameworks and must give the same raise/no-raise, the same
value and the same gradients.

    .venv/bin/python tests/product_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/product_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import string

import fuzz_common
import numpy as np

RTOL = 1e-10


def _batch(r):
    return tuple(r.choice([1, 2, 3]) for _ in range(r.randint(0, 2)))


def _matmul(r):
    k = r.choice([0, 1, 3, 4])
    a = r.choice([(k,), (r.randint(1, 3), k), _batch(r) + (r.randint(1, 3), k)])
    b = r.choice([(k,), (k, r.randint(1, 3)), _batch(r) + (k, r.randint(1, 3))])
    if r.random() < 0.1:
        b = b[:-2] + (k + 1,) + b[-1:] if len(b) >= 2 else (k + 1,)  # mismatched: must raise
    return dict(fn="matmul", shapes=[a, b])


def _named(r):
    n, m, p, bsz = r.randint(1, 4), r.randint(1, 4), r.randint(0, 3), r.randint(1, 3)
    name = r.choice(["mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "addmm", "addmv",
                     "addbmm", "baddbmm", "kron", "linear", "bilinear", "addr"])
    kw = {}
    if name in ("addmm", "addmv", "addbmm", "baddbmm", "addr") and r.random() < 0.6:
        kw = dict(beta=r.choice([0.0, 1.0, 0.5]), alpha=r.choice([1.0, -2.0]))
    shapes = {
        "mm": [(n, p), (p, m)], "bmm": [(bsz, n, p), (bsz, p, m)], "mv": [(n, p), (p,)],
        "dot": [(p,), (p,)], "vdot": [(p,), (p,)], "inner": [(n, p), (m, p)],
        "outer": [(n,), (m,)], "addmm": [r.choice([(n, m), (m,), (1, m)]), (n, p), (p, m)],
        "addmv": [r.choice([(n,), (1,)]), (n, p), (p,)],
        "addbmm": [(n, m), (bsz, n, p), (bsz, p, m)],
        "baddbmm": [r.choice([(bsz, n, m), (n, m)]), (bsz, n, p), (bsz, p, m)],
        "kron": [_batch(r) + (n,), (m, p + 1)],
        "linear": [_batch(r) + (p,), (m, p), (m,)] if r.random() < 0.6 else [(n, p), (m, p)],
        "bilinear": [(n, p), (n, m), (bsz, p, m), (bsz,)],
        "addr": [(n, m), (n,), (m,)],
    }[name]
    return dict(fn=name, shapes=shapes, kwargs=kw)


def _tensordot(r):
    k = r.randint(0, 2)
    shared = tuple(r.randint(1, 3) for _ in range(k))
    a = tuple(r.randint(1, 3) for _ in range(r.randint(0, 2))) + shared
    b = shared + tuple(r.randint(1, 3) for _ in range(r.randint(0, 2)))
    if r.random() < 0.5:
        return dict(fn="tensordot", shapes=[a, b], kwargs=dict(dims=k))
    ia = list(range(len(a) - k, len(a)))
    ib = list(range(k))
    perm = list(range(k))
    r.shuffle(perm)
    return dict(fn="tensordot", shapes=[a, b],
                kwargs=dict(dims=([ia[i] for i in perm], [ib[i] for i in perm])))


def _einsum(r):
    """Random subscripts: each operand draws letters from a small pool (repeats give
    diagonals), sizes fixed per letter (1 sometimes, to broadcast), output a subset."""
    pool = string.ascii_lowercase[:r.randint(2, 5)]
    size = {c: r.choice([1, 2, 3, 4]) for c in pool}
    ops, shapes = [], []
    ellipsis = r.random() < 0.2
    ell_shape = _batch(r) if ellipsis else ()
    for _ in range(r.randint(1, 3)):
        letters = "".join(r.choice(pool) for _ in range(r.randint(0, 3)))
        if ellipsis and r.random() < 0.7:
            pos = r.randint(0, len(letters))
            ops.append(letters[:pos] + "..." + letters[pos:])
            shape = [size[c] for c in letters[:pos]] + list(ell_shape) + \
                [size[c] for c in letters[pos:]]
        else:
            ops.append(letters)
            shape = [size[c] for c in letters]
        shapes.append(tuple(shape))
    used = sorted(set("".join(o.replace("...", "") for o in ops)))
    if r.random() < 0.3:
        return dict(fn="einsum", equation=",".join(ops), shapes=shapes)  # implicit output
    out = [c for c in used if r.random() < 0.5]
    r.shuffle(out)
    tail = "..." if ellipsis and any("..." in o for o in ops) else ""
    return dict(fn="einsum", equation=",".join(ops) + "->" + tail + "".join(out),
                shapes=shapes)


def generate(seed):
    r = random.Random(seed)
    case = r.choice([_matmul, _matmul, _named, _named, _tensordot, _einsum, _einsum])(r)
    case["seed"] = seed
    case["layout"] = r.choice(["contiguous", "contiguous", "transposed", "strided"])
    return case


def _operand(m, a, layout):
    """The array as a tensor of the drawn layout: the same values, other strides."""
    if layout == "transposed" and a.ndim >= 2:
        return m.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), requires_grad=True), \
            lambda t: t.transpose(-1, -2)
    if layout == "strided" and a.ndim >= 1:
        wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],))
        wide[..., ::2] = a
        return m.tensor(wide, requires_grad=True), lambda t: t[..., ::2]
    return m.tensor(a, requires_grad=True), lambda t: t


def _run(m, case):
    rng = np.random.default_rng(case["seed"])
    leaves, args = [], []
    for shape in case["shapes"]:
        t, view = _operand(m, rng.standard_normal(shape), case["layout"])
        leaves.append(t)
        args.append(view(t))
    fn, kw = case["fn"], case.get("kwargs", {})
    if fn == "einsum":
        out = m.einsum(case["equation"], *args)
    elif fn == "linear":
        out = m.nn.functional.linear(*args)
    elif fn == "bilinear":
        out = m.nn.functional.bilinear(*args)
    else:
        out = getattr(m, fn)(*args, **kw)
    return fuzz_common.value_and_gradients(m, out, leaves, case["seed"])


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    return fuzz_common.check_value_and_gradients(_run, case, RTOL)


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
