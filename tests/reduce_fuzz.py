"""Differential fuzzing of the reductions, scans and sorts over their argument space, against
torch.

sum/mean/prod/amax/amin/logsumexp/nansum/nanmean/var/std (correction, unbiased)/var_mean/
norm (p, dim)/vector_norm/count_nonzero/all/any, cumsum/cumprod/cummax/cummin/logcumsumexp,
max/min/median/nanmedian/mode/kthvalue with a dim (values and indices), topk (largest, sorted),
sort and argsort (descending, stable), quantile/nanquantile (every interpolation), unique and
unique_consecutive (return_inverse, return_counts, dim) are drawn with single dims, dim tuples,
negative dims, keepdim, dtype=, 0-d and empty inputs, ties and nans. Each case runs in
float64 in both frameworks and must give the same raise/no-raise, the same values (indices
exactly, where the result defines them) and the same input gradient for a random upstream
gradient.

    .venv/bin/python tests/reduce_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/reduce_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np

RTOL = 1e-10


def _dims(r, nd):
    if nd == 0 or r.random() < 0.2:
        return None
    if r.random() < 0.3 and nd > 1:
        k = r.randint(1, nd)
        dims = r.sample(range(nd), k)
        return tuple(d - nd if r.random() < 0.3 else d for d in dims)
    d = r.randrange(nd)
    return d - nd if r.random() < 0.3 else d


def generate(seed):
    r = random.Random(seed)
    nd = r.choice([0, 1, 2, 2, 3])
    shape = tuple(r.choice([0, 1, 2, 3, 4]) if r.random() < 0.1 else r.randint(1, 4)
                  for _ in range(nd))
    values = r.choice(["normal", "normal", "ties", "nans", "positive"])
    name = r.choice(["sum", "mean", "prod", "amax", "amin", "logsumexp", "nansum", "nanmean",
                     "var", "std", "var_mean", "norm", "vector_norm", "count_nonzero", "all",
                     "any", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "max",
                     "min", "median", "nanmedian", "mode", "kthvalue", "topk", "sort",
                     "argsort", "quantile", "nanquantile", "unique", "unique_consecutive",
                     "argmax", "argmin"])
    kw = {}
    dim = _dims(r, nd)
    single = dim if not isinstance(dim, tuple) else dim[0]
    if name in ("sum", "mean", "nansum", "nanmean", "amax", "amin", "logsumexp", "prod",
                "count_nonzero", "all", "any", "vector_norm"):
        if name in ("prod", "all", "any", "logsumexp") and isinstance(dim, tuple):
            dim = single if name in ("prod",) else dim
        if name == "logsumexp" and dim is None:  # (torch requires a dim)
            dim = tuple(range(nd))
        if dim is not None:
            kw["dim"] = dim
        if name not in ("count_nonzero",) and dim is not None and r.random() < 0.4:
            kw["keepdim"] = True
        if name in ("sum", "prod", "mean", "nansum") and r.random() < 0.2:
            kw["dtype"] = "float32"
        if name == "vector_norm":
            kw["ord"] = r.choice([2, 1, 3, float("inf"), float("-inf"), 0, 0.5])
    elif name in ("var", "std", "var_mean"):
        if dim is not None:
            kw["dim"] = dim
        kw["correction"] = r.choice([0, 1, 2]) if r.random() < 0.7 else None
        if kw["correction"] is None:
            del kw["correction"]
        if dim is not None and r.random() < 0.4:
            kw["keepdim"] = True
    elif name == "norm":
        kw["p"] = r.choice([2, 1, 3, "fro", float("inf")])
        if dim is not None and (kw["p"] != "fro" or isinstance(dim, tuple)):
            kw["dim"] = dim if not isinstance(dim, tuple) or len(dim) <= 2 else dim[:2]
            if kw["p"] == "fro" and not isinstance(kw["dim"], tuple):
                kw["dim"] = (kw["dim"],)
        if "dim" in kw and r.random() < 0.4:
            kw["keepdim"] = True
    elif name in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"):
        kw["dim"] = 0 if single is None else single
        if name in ("cummax", "cummin") and 0 in shape:  # (torch's own backward fails there)
            shape = tuple(max(1, n) for n in shape)
    elif name in ("max", "min", "median", "nanmedian", "mode", "argmax", "argmin"):
        if single is not None and r.random() < 0.8:
            kw["dim"] = single
            if r.random() < 0.4:
                kw["keepdim"] = True
    elif name == "kthvalue":
        d = 0 if single is None else single
        size = shape[d] if shape else 1
        kw.update(k=r.randint(1, max(size, 1)), dim=d, keepdim=r.random() < 0.4)
    elif name == "topk":
        d = -1 if single is None else single
        size = shape[d] if shape else 1
        kw.update(k=r.randint(0, size), dim=d, largest=r.random() < 0.6,
                  sorted=True)
    elif name in ("sort", "argsort"):
        kw.update(dim=-1 if single is None else single, descending=r.random() < 0.5)
        if r.random() < 0.5:
            kw["stable"] = True
    elif name in ("quantile", "nanquantile"):
        kw["q"] = r.choice([0.5, 0.0, 1.0, 0.3, [0.1, 0.75]])
        if single is not None:
            kw["dim"] = single
            kw["keepdim"] = r.random() < 0.4
        kw["interpolation"] = r.choice(["linear", "lower", "higher", "nearest", "midpoint"])
    elif name in ("unique", "unique_consecutive"):
        kw.update(return_inverse=r.random() < 0.5, return_counts=r.random() < 0.5)
        if single is not None and r.random() < 0.4:
            kw["dim"] = single
        if name == "unique":
            kw["sorted"] = True
    return dict(name=name, shape=shape, values=values, kwargs=kw, seed=seed)


def _values(case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["shape"])
    if case["values"] == "ties":
        x = np.round(x * 1.5) / 1.5
    elif case["values"] == "nans" and x.size:
        x = np.where(rng.random(case["shape"]) < 0.25, np.nan, x)
    elif case["values"] == "positive":
        x = np.abs(x) + 0.5
    return x


_NO_GRAD = {"count_nonzero", "all", "any", "argsort", "argmax", "argmin", "unique",
            "unique_consecutive"}


def _run(m, case):
    """(outputs, input gradient) as arrays under module `m`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _run_quietly(m, case)


def _run_quietly(m, case):
    name, kw = case["name"], dict(case["kwargs"])
    x = m.tensor(_values(case), requires_grad=name not in _NO_GRAD)
    if "dtype" in kw:
        kw["dtype"] = getattr(m, kw["dtype"])
    if name == "vector_norm":
        out = m.linalg.vector_norm(x, **kw)
    elif name in ("quantile", "nanquantile"):
        q = kw.pop("q")
        q = m.tensor(q, dtype=m.float64) if isinstance(q, list) else q
        out = getattr(m, name)(x, q, **kw)
    elif name in ("all", "any"):
        out = getattr(m, name)(x > 0, **kw)
    else:
        out = getattr(m, name)(x, **kw)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    floats = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
    grad = None
    if floats and x.requires_grad:
        rng = np.random.default_rng(case["seed"] + 1)
        total = sum((o * m.tensor(rng.standard_normal(tuple(o.shape)))).nansum()
                    for o in floats)
        (g,) = m.autograd.grad(total, [x], allow_unused=True)
        grad = None if g is None else g.numpy()
    return [o.detach().numpy() for o in outs], grad


def _indices_defined(case):
    """Whether index outputs are defined by the result (no ties, no nans)."""
    return case["values"] in ("normal", "positive")


# reductions that route each output's gradient to one element (or to a tie group): among
# tied elements which one receives it is the sort's choice (torch's CPU sort is not stable
# for every size), but what the whole group receives is defined
# ops whose tie indices are torch's (first index for max/min/argmax/argmin, cummax/cummin's
# last; topk (sorted), kthvalue, mode and median/nanmedian by their kernels' steps:
# ops/select_ties.py)
_TIES_EXACT = ("kthvalue", "topk", "median", "nanmedian", "mode", "max", "min", "argmax",
               "argmin", "cummax", "cummin")
_ROUTED = {"max", "min", "median", "nanmedian", "mode", "kthvalue", "topk", "sort",
           "quantile", "nanquantile"}


def _per_tie_group(x, grad, dim):
    """`grad` summed over the elements of `x` that are equal (nans with nans) within each
    slice along `dim` (the whole of x when dim is None): one number per group and slice."""
    if x.size == 0:
        return np.zeros(0)
    if dim is None or x.ndim == 0:
        xs, gs = x.reshape(1, -1), grad.reshape(1, -1)
    else:
        xs = np.moveaxis(x, dim, -1).reshape(-1, x.shape[dim])
        gs = np.moveaxis(grad, dim, -1).reshape(-1, x.shape[dim])
    sums = []
    for row, g in zip(xs, gs):
        groups, which = np.unique(row, return_inverse=True)
        sums.append(np.bincount(which.ravel(), weights=g, minlength=len(groups)))
    return np.concatenate(sums) if sums else np.zeros(0)


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    both = fuzz_common.run_both(_run, case)
    if not isinstance(both, tuple):
        return both
    (outs_g, grad_g), (outs_t, grad_t) = both[1], both[0]
    if len(outs_g) != len(outs_t):
        return f"{len(outs_g)} outputs, torch {len(outs_t)}"
    # a tie's index (and the gradient routed by it) is the implementation's choice
    # (sort without stable=True, quantile: torch documents none of them for ties); compare
    # those only where the values define them, and the gradient each tie group receives where
    # they do not. _TIES_EXACT's ops give torch's indices with ties too: compared always
    tie_free = _indices_defined(case) or case["kwargs"].get("stable") or \
        case["name"] in _TIES_EXACT or \
        case["name"] in ("sum", "mean", "nansum", "nanmean", "var", "std", "var_mean",
                         "norm", "logsumexp", "cumsum", "cumprod", "logcumsumexp", "prod",
                         "count_nonzero", "all", "any", "unique", "unique_consecutive")
    pairs = [(f"output {i}", a, b) for i, (a, b) in enumerate(zip(outs_g, outs_t))
             if tie_free or b.dtype.kind not in "iub" or a.shape != b.shape]
    if tie_free:
        pairs.append(("gradient", grad_g, grad_t))
    elif case["name"] in _ROUTED and grad_g is not None and grad_t is not None and \
            grad_g.shape == grad_t.shape:
        x, dim = _values(case), case["kwargs"].get("dim")
        pairs.append(("gradient per tie group", _per_tie_group(x, grad_g, dim),
                      _per_tie_group(x, grad_t, dim)))
    elif case["name"] in _ROUTED:
        pairs.append(("gradient", grad_g, grad_t))  # (one is None, or the shapes differ)
    float32 = any(b is not None and b.dtype == np.float32 for _, _, b in pairs)
    return fuzz_common.first_difference(pairs, 1e-6 if float32 else RTOL)


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
