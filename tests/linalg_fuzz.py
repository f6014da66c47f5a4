"""Differential fuzzing of torch.linalg against torch: solve (left/right, vector or matrix
right-hand sides, broadcast batches), inv, det, slogdet, cholesky (upper or not), qr (every
mode), eigh/eigvalsh (either triangle), svd/svdvals (full_matrices), pinv (hermitian),
lstsq, matrix_norm/norm (fro, nuc, +-1, +-2, +-inf), cond, matrix_power (negative too),
matrix_exp, solve_triangular (upper, left, unitriangular), lu_factor + lu_solve, multi_dot,
cross, vecdot, on batched, empty-batch and 1x1 inputs. Decompositions are compared through
what their gauge leaves fixed (U diag(c) V^T for svd, V diag(c) V^T for eigh). Each case runs
in float64 in both frameworks and must give the same raise/no-raise, values and gradients.

    .venv/bin/python tests/linalg_fuzz.py --seeds 0:1000     # summary
    .venv/bin/python tests/linalg_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np

RTOL = 1e-8


def _batch(r):
    return r.choice([(), (), (2,), (0,), (2, 1)])


def generate(seed):
    r = random.Random(seed)
    n = r.choice([1, 2, 3, 4])
    b = _batch(r)
    name = r.choice(["solve", "inv", "det", "slogdet", "cholesky", "qr", "eigh", "eigvalsh",
                     "svd", "svdvals", "pinv", "lstsq", "matrix_norm", "cond", "matrix_power",
                     "matrix_exp", "solve_triangular", "lu_solve", "multi_dot", "cross",
                     "vecdot"])
    kw, shapes, kind = {}, [b + (n, n)], "general"
    if name == "solve":
        k = r.choice([None, 1, 2])
        left = r.random() < 0.7
        kw["left"] = left
        rhs = (n,) if k is None else ((n, k) if left else (k, n))
        shapes.append(r.choice([b, ()]) + rhs if k is not None else b + rhs)
    elif name in ("cholesky",):
        kind = "spd"
        kw["upper"] = r.random() < 0.4
    elif name == "qr":
        m = r.choice([n, n + 1, max(1, n - 1)])
        shapes = [b + (m, n)]
        kw["mode"] = r.choice(["reduced", "complete", "r"])
    elif name in ("eigh", "eigvalsh"):
        kind = "sym"
        kw["UPLO"] = r.choice(["L", "U"])
    elif name in ("svd", "svdvals", "pinv", "matrix_norm", "cond"):
        m = r.choice([n, n + 1])
        shapes = [b + (m, n)]
        if name == "svd":
            kw["full_matrices"] = r.random() < 0.5
        if name == "pinv" and r.random() < 0.3 and m == n:
            kind, kw["hermitian"] = "sym", True
        if name == "matrix_norm":
            kw["ord"] = r.choice(["fro", "nuc", 1, -1, 2, -2, float("inf"), float("-inf")])
            kw["keepdim"] = r.random() < 0.3
        if name == "cond":
            shapes = [b + (n, n)]
            kw["p"] = r.choice([None, "fro", 1, float("inf"), -2])
    elif name == "lstsq":
        m = r.choice([n, n + 1, n + 2])
        shapes = [b + (m, n), b + (m, r.choice([1, 2]))]
    elif name == "matrix_power":
        kw["n"] = r.choice([0, 1, 2, 3, -1, -2])
    elif name == "solve_triangular":
        kw.update(upper=r.random() < 0.5, left=r.random() < 0.7,
                  unitriangular=r.random() < 0.3)
        k = r.choice([1, 2])
        shapes.append(b + ((n, k) if kw["left"] else (k, n)))
        kind = "triangular"
    elif name == "lu_solve":
        shapes.append(b + (n, r.choice([1, 2])))
    elif name == "multi_dot":
        dims = [r.randint(1, 4) for _ in range(r.randint(2, 4) + 1)]
        shapes = [(dims[i], dims[i + 1]) for i in range(len(dims) - 1)]
        if r.random() < 0.3:
            shapes[0] = shapes[0][1:]  # a vector first
    elif name == "cross":
        shapes = [b + (r.randint(1, 3), 3), b + (1, 3)]
    elif name == "vecdot":
        shapes = [b + (n,), (n,)]
    return dict(name=name, shapes=shapes, kwargs=kw, kind=kind, seed=seed)


def _operands(case, rng):
    arrays = [rng.standard_normal(s) for s in case["shapes"]]
    a = arrays[0]
    n = a.shape[-1] if a.ndim else 1
    if case["kind"] == "spd" and a.size:
        a = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    elif case["kind"] == "sym" and a.size:
        a = a + np.swapaxes(a, -1, -2)
    elif case["name"] in ("solve", "inv", "det", "slogdet", "matrix_power", "lu_solve",
                          "cond") and a.size:
        a = a + 2 * n * np.eye(n) * (1 if rng.random() < 0.8 else 0)  # mostly regular
    elif case["kind"] == "triangular" and a.size:
        a = a + 3 * np.eye(n)
    arrays[0] = a
    return arrays


def _run(m, case):
    rng = np.random.default_rng(case["seed"])
    ts = [m.tensor(a, requires_grad=True) for a in _operands(case, rng)]
    name, kw = case["name"], dict(case["kwargs"])
    la = m.linalg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "svd":
            u, s, vh = la.svd(ts[0], **kw)
            k = s.shape[-1]
            c = m.tensor(np.linspace(1.0, 2.0, k))
            outs = [s, (u[..., :, :k] * c) @ vh[..., :k, :]]
        elif name == "eigh":
            w, v = la.eigh(ts[0], **kw)
            c = m.tensor(np.linspace(1.0, 2.0, w.shape[-1]))
            outs = [w, (v * c) @ v.transpose(-1, -2)]
        elif name == "slogdet":
            outs = list(la.slogdet(ts[0]))
        elif name == "qr":
            outs = [o for o in la.qr(ts[0], **kw) if o.numel() or True]
        elif name == "lstsq":
            outs = [la.lstsq(ts[0], ts[1]).solution]
        elif name == "lu_solve":
            lu, piv = la.lu_factor(ts[0])
            outs = [la.lu_solve(lu, piv, ts[1])]
        elif name == "multi_dot":
            outs = [la.multi_dot(ts)]
        elif name == "matrix_power":
            outs = [la.matrix_power(ts[0], kw["n"])]
        elif name == "cross":
            outs = [la.cross(ts[0], ts[1])]
        elif name == "vecdot":
            outs = [la.vecdot(ts[0], ts[1])]
        elif name == "cond":
            outs = [la.cond(ts[0], **kw)]
        else:
            out = getattr(la, name)(*ts, **kw)
            outs = list(out) if isinstance(out, tuple) else [out]
        floats = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
        if name == "cond" and kw.get("p") not in (None, 2, -2):
            floats = []  # torch 2.13's cond backward fails there (an in-place write of inv)
        grads = []
        if floats:
            rng2 = np.random.default_rng(case["seed"] + 1)
            total = sum((o * m.tensor(rng2.standard_normal(tuple(o.shape)))).sum()
                        for o in floats)
            grads = m.autograd.grad(total, ts, allow_unused=True)
    return [o.detach().numpy() for o in outs], [None if g is None else g.numpy()
                                                for g in grads]


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    both = fuzz_common.run_both(_run, case)
    if not isinstance(both, tuple):
        return both
    (og, gg), (ot, gt) = both[1], both[0]
    if len(og) != len(ot):
        return f"{len(og)} outputs, torch {len(ot)}"
    pairs = [(f"output {i}", a, b) for i, (a, b) in enumerate(zip(og, ot))] + \
        [(f"gradient {i}", a, b) for i, (a, b) in enumerate(zip(gg, gt))]
    return fuzz_common.first_difference(pairs, RTOL, dtypes=False)


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
