"""Differential fuzzing of the searching, counting and binning ops over their argument
spaces, against torch.

searchsorted (right, side, both at once, sorter, out_int32, 1-D and batched boundaries,
scalar values), bucketize, histc (bins, min/max, min == max, out of range), histogram (bins
an int or a tensor of edges, range, weight, density), histogramdd (bins an int, ints or
tensors), bincount (weights, minlength, empty), unique and unique_consecutive (sorted,
return_inverse, return_counts, dim), count_nonzero (dim, dim tuples) and isin (numbers on
either side, assume_unique, invert), over int/float/bool dtypes with float16 and bfloat16,
values with ties, nans and infinities, 0-d and empty inputs. Each case runs in torch and in
flowgrad and must give the same raise/no-raise, then for each result the same dtype, shape,
values and requires_grad, and where the result requires grad the same backward verdict
(torch has no gradient for histogram: its backward raises).

    .venv/bin/python tests/search_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/search_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np
import torch

FLOATS = ["float64", "float32", "float16", "bfloat16"]
INTS = ["int64", "int32", "int16", "int8", "uint8"]
OPS = ["searchsorted", "searchsorted", "bucketize", "histc", "histogram", "histogramdd",
       "bincount", "unique", "unique", "unique_consecutive", "count_nonzero", "isin", "isin"]


def _shape(r, nd=None):
    nd = r.choice([0, 1, 1, 1, 2, 2, 3]) if nd is None else nd
    return tuple(r.choice([0, 1, 2]) if r.random() < 0.1 else r.randint(1, 5)
                 for _ in range(nd))


def _dtype(r, kinds="fib"):
    opts = []
    if "f" in kinds:
        opts += FLOATS * 2
    if "i" in kinds:
        opts += INTS
    if "b" in kinds:
        opts += ["bool"]
    return r.choice(opts)


def _data(r, shape, dtype, sort=False):
    """An input spec: shape, dtype, the kind of values and a seed for them."""
    return dict(shape=tuple(shape), dtype=dtype, sort=sort, seed=r.randrange(10 ** 6),
                values=r.choice(["normal", "ties", "ties", "nans", "infs", "wide", "grid",
                                 "huge"]),
                layout=r.choice(["contig"] * 4 + ["transpose", "strided"]))


def _array(spec):
    rng = np.random.default_rng(spec["seed"])
    shape, kind, dtype = spec["shape"], spec["values"], spec["dtype"]
    x = rng.standard_normal(shape) * 3
    if kind == "ties":
        x = np.round(x)
    elif kind == "nans":
        x = np.where(rng.random(shape) < 0.25, np.nan, np.round(x * 2) / 2)
    elif kind == "infs":
        x = np.where(rng.random(shape) < 0.25, rng.choice([np.inf, -np.inf], shape), x)
    elif kind == "wide":
        x = x * 1e3
    elif kind == "grid":  # (on the bin edges of the drawn ranges, and between)
        x = np.round(x * 2) / 8
    elif kind == "huge":  # (past float32's integers: a float comparison rounds them)
        x = np.round(x) + 2.0 ** 25
    if kind == "distinct":  # (integers: exact in every dtype drawn, no two equal)
        x = rng.permutation(x.size).reshape(shape) - (0 if dtype == "uint8" else x.size // 2)
    elif dtype == "bool":
        x = np.nan_to_num(x) > 0
    elif dtype in INTS and kind == "huge" and dtype in ("int64", "int32"):
        x = x.astype(np.int64) + (rng.integers(0, 3, shape) if x.ndim else 0)
    elif dtype in INTS:
        lo = 0 if dtype == "uint8" or spec.get("nonneg") else -20
        x = np.clip(np.round(np.nan_to_num(x, posinf=9, neginf=-9)), lo, 20)
        x = np.abs(x) if spec.get("nonneg") else x
    if spec["sort"]:
        x = np.sort(x, axis=-1) if x.ndim else x
    return x


def _tensor(m, spec, grad=False):
    x = m.tensor(_array(spec)).to(getattr(m, spec["dtype"]))
    if spec["layout"] == "transpose" and x.dim() >= 2:
        x = x.transpose(0, -1).contiguous().transpose(0, -1)
    elif spec["layout"] == "strided" and x.dim() >= 1:
        x = m.repeat_interleave(x, 2, dim=-1)[..., ::2]
    return x.requires_grad_() if grad and x.is_floating_point() else x


class Case(dict):
    """One drawn case: op, input specs and keyword arguments."""

    def __init__(self, seed):
        r = random.Random(seed)
        op = r.choice(OPS)
        super().__init__(op=op, seed=seed, **getattr(self, "_" + op)(r))

    @staticmethod
    def _searchsorted(r):
        n = r.choice([0, 1, 2, 3, 5, 8])
        dt = _dtype(r, "fi")
        vdt = dt if r.random() < 0.8 else _dtype(r, "fib")
        kw = {}
        if r.random() < 0.35:
            batch = _shape(r, r.choice([1, 2]))
            seq = _data(r, batch + (n,), dt, sort=True)
            vals = _data(r, batch + (r.randint(0, 4),), vdt)
        else:
            seq = _data(r, (n,), dt, sort=True)
            vals = _data(r, _shape(r), vdt)
        if r.random() < 0.15:
            vals = r.choice([0, 1.5, -2, float("nan"), True, 3])
        if r.random() < 0.25:
            seq["sort"] = False
            kw["sorter"] = r.choice(["argsort"] * 6 + ["int32", "short", "out of range"])
        if r.random() < 0.4:
            kw["right"] = r.random() < 0.5
        if r.random() < 0.3:
            kw["side"] = r.choice(["left", "right", "left", "middle"])
        if r.random() < 0.3:
            kw["out_int32"] = True
        return dict(seq=seq, vals=vals, kw=kw)

    @staticmethod
    def _bucketize(r):
        dt = _dtype(r, "fi")
        b = _data(r, (r.choice([0, 1, 2, 4, 6]),), dt, sort=True)
        if r.random() < 0.05:
            b = _data(r, (2, 3), dt, sort=True)
        x = _data(r, _shape(r), dt if r.random() < 0.8 else _dtype(r, "fi"))
        if r.random() < 0.1:
            x = r.choice([0, 2.5, -1, 4])
        kw = {k: True for k in ("right", "out_int32") if r.random() < 0.4}
        return dict(seq=b, vals=x, kw=kw)

    @staticmethod
    def _histc(r):
        x = _data(r, _shape(r), _dtype(r, "f" * 6 + "i"))
        kw = {}
        if r.random() < 0.8:
            kw["bins"] = r.choice([1, 2, 3, 5, 10, 0, -1, 2.0])
        lo, hi = r.choice([(0, 0), (-2, 2), (0, 1), (1, 1), (3, -3), (-1e3, 5), (2, 0),
                           (-1.5, 0.25), (0, float("inf")), (float("nan"), 1)])
        if r.random() < 0.8:
            kw.update(min=lo, max=hi)
        return dict(x=x, kw=kw, grad=r.random() < 0.3)

    @staticmethod
    def _histogram(r):
        dt = _dtype(r, "f" * 8 + "i")
        x = _data(r, _shape(r), dt)
        kw = {}
        bins = r.choice([1, 2, 3, 7, "edges", "edges", 0])
        if bins == "edges":
            bins = _data(r, (r.choice([1, 2, 3, 5]),), dt if r.random() < 0.9 else
                         _dtype(r, "f"), sort=True)
            bins["values"] = r.choice(["normal", "ties", "normal"])
        elif r.random() < 0.4:
            kw["range"] = r.choice([(-2, 2), (0, 1), (1, 1), (3, -3), (-1e3, 5), (0, 0)])
        if r.random() < 0.4:
            kw["weight"] = _data(r, x["shape"], dt if r.random() < 0.9 else "float64")
            kw["weight"]["values"] = "normal"
        if r.random() < 0.4:
            kw["density"] = True
        return dict(x=x, bins=bins, kw=kw, grad=r.random() < 0.3)

    @staticmethod
    def _histogramdd(r):
        dt = r.choice(["float64", "float32"])
        n = r.choice([1, 2, 3])
        x = _data(r, (r.choice([0, 1, 3, 6, 10]), n), dt)
        choice = r.choice(["int", "ints", "edges"])
        if choice == "int":
            bins = r.choice([1, 2, 3])
        elif choice == "ints":
            bins = [r.choice([1, 2, 3, 4]) for _ in range(n)]
        else:
            bins = [dict(_data(r, (r.choice([1, 2, 4]),), dt, sort=True), values="normal")
                    for _ in range(n)]
        kw = {}
        if choice != "edges" and r.random() < 0.4:
            kw["range"] = [v for _ in range(n) for v in r.choice([(-2, 2), (0, 1), (1, 1)])]
        if r.random() < 0.3:
            kw["weight"] = dict(_data(r, x["shape"][:1], dt), values="normal")
        if r.random() < 0.3:
            kw["density"] = True
        return dict(x=x, bins=bins, kw=kw)

    @staticmethod
    def _bincount(r):
        dt = r.choice(INTS + ["int64"] * 3 + (["float32", "bool"] if r.random() < 0.1 else []))
        x = _data(r, (r.choice([0, 1, 3, 8]),) if r.random() < 0.95 else _shape(r), dt)
        x["values"] = r.choice(["normal", "wide", "ties"])
        x["nonneg"] = r.random() < 0.93
        kw = {}
        if r.random() < 0.5:
            kw["weights"] = dict(_data(r, x["shape"], r.choice(
                ["float64", "float32", "float16", "int64", "int32", "bool"])), values="normal")
        if r.random() < 0.4:
            kw["minlength"] = r.choice([0, 1, 5, 30, -1])
        return dict(x=x, kw=kw, grad=r.random() < 0.3)

    @staticmethod
    def _unique(r):
        x = _data(r, _shape(r), _dtype(r))
        kw = {k: True for k in ("return_inverse", "return_counts") if r.random() < 0.5}
        if r.random() < 0.3:
            kw["sorted"] = r.random() < 0.5
        nd = len(x["shape"])
        if r.random() < 0.35 and nd:
            kw["dim"] = r.randrange(-nd, nd) if r.random() < 0.95 else nd
        return dict(x=x, kw=kw, grad=r.random() < 0.3)

    @staticmethod
    def _unique_consecutive(r):
        case = Case._unique(r)
        case["kw"].pop("sorted", None)
        return case

    @staticmethod
    def _count_nonzero(r):
        x = _data(r, _shape(r), _dtype(r))
        nd = len(x["shape"])
        kw = {}
        if r.random() < 0.6 and nd:
            kw["dim"] = r.randrange(-nd, nd)
            if r.random() < 0.3:
                kw["dim"] = tuple(r.sample(range(nd), r.randint(1, nd)))
                if r.random() < 0.1:  # (a repeated dim: torch refuses)
                    kw["dim"] = kw["dim"] + kw["dim"][:1]
        kw["method"] = r.random() < 0.3
        return dict(x=x, kw=kw)

    @staticmethod
    def _isin(r):
        a = _data(r, _shape(r), _dtype(r, "ffi"))
        b = _data(r, _shape(r), a["dtype"] if r.random() < 0.7 else _dtype(r, "fi"))
        if r.random() < 0.15:
            a = r.choice([0, 1.0, float("nan"), 2, -3])
        elif r.random() < 0.15:
            b = r.choice([0, 1.0, float("nan"), 2, -3])
        kw = {}
        if r.random() < 0.4:
            kw["invert"] = True
        if r.random() < 0.3:
            kw["spelled"] = True
        if r.random() < 0.3:
            kw["assume_unique"] = True
            for s in (a, b):  # (the caller's promise; a tie breaks it)
                if isinstance(s, dict):
                    s["values"] = "distinct"
        return dict(a=a, b=b, kw=kw)


def _arg(m, spec, grad=False):
    if not isinstance(spec, dict):
        return spec
    if spec.get("nonneg") is False:
        return m.tensor(_array(dict(spec, nonneg=True)) - 3).to(getattr(m, spec["dtype"]))
    return _tensor(m, spec, grad)


def _call(m, case):
    op, kw = case["op"], dict(case.get("kw", {}))
    if op in ("searchsorted", "bucketize"):
        seq = _arg(m, case["seq"])
        vals = _arg(m, case["vals"])
        how = kw.pop("sorter", None)
        if how:  # (a bad sorter: the wrong dtype, too short, or indices past the end)
            order = np.argsort(_array(case["seq"]), axis=-1, kind="stable")
            order = order[..., 1:] if how == "short" else \
                order + order.shape[-1] if how == "out of range" else order
            kw["sorter"] = m.tensor(order).to(m.int32 if how == "int32" else m.int64)
        if op == "bucketize":
            return m.bucketize(vals, seq, **kw)
        return m.searchsorted(seq, vals, **kw)
    if op == "histc":
        return m.histc(_arg(m, case["x"], case["grad"]), **kw)
    if op == "histogram":
        bins = _arg(m, case["bins"])
        if "weight" in kw:
            kw["weight"] = _arg(m, kw["weight"], case["grad"])
        return m.histogram(_arg(m, case["x"], case["grad"]), bins, **kw)
    if op == "histogramdd":
        bins = case["bins"]
        bins = [_arg(m, b) for b in bins] if isinstance(bins, list) else bins
        if "weight" in kw:
            kw["weight"] = _arg(m, kw["weight"])
        return m.histogramdd(_arg(m, case["x"]), bins, **kw)
    if op == "bincount":
        if "weights" in kw:
            kw["weights"] = _arg(m, kw["weights"], case["grad"])
        return m.bincount(_arg(m, case["x"]), **kw)
    if op in ("unique", "unique_consecutive"):
        return getattr(m, op)(_arg(m, case["x"], case["grad"]), **kw)
    if op == "count_nonzero":
        x = _arg(m, case["x"])
        return x.count_nonzero(**kw) if kw.pop("method") else m.count_nonzero(x, **kw)
    a, b = _arg(m, case["a"]), _arg(m, case["b"])
    if kw.pop("spelled", False):  # (torch's keyword names for a number on either side)
        return m.isin(**{"element" if not isinstance(a, m.Tensor) else "elements": a,
                         "test_element" if not isinstance(b, m.Tensor) else "test_elements":
                         b}, **kw)
    return m.isin(a, b, **kw)


def _backward(out):
    """The backward verdict of an output that requires grad: 'ran' or the exception class."""
    try:
        out.float().sum().backward()
        return "ran"
    except Exception as e:
        return type(e).__name__


def _run(m, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = _call(m, case)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    flat = []
    for o in outs:  # (histogramdd's bin_edges: a tuple of tensors)
        flat.extend(o if isinstance(o, (tuple, list)) else [o])
    facts = []
    for o in flat:
        name = str(o.dtype).split(".")[-1]
        a = o.detach()
        a = (a.double() if name in ("float16", "bfloat16") else a).numpy()
        grad = _backward(o) if o.requires_grad else None
        facts.append((name, o.requires_grad, grad, a))
    return facts


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or Case(seed)
    both = fuzz_common.run_both(_run, case)
    if not isinstance(both, tuple):
        return both
    want, got = both
    if len(got) != len(want):
        return f"{len(got)} outputs, torch {len(want)}"
    pairs = []
    for i, ((dg, rg, bg, a), (dt, rt, bt, b)) in enumerate(zip(got, want)):
        if dg != dt:
            return f"output {i}: dtype {dg}, torch {dt}"
        if rg != rt:
            return f"output {i}: requires_grad {rg}, torch {rt}"
        if bg != bt:
            return f"output {i}: backward {bg}, torch {bt}"
        pairs.append((f"output {i}", a, b))
    rtol = {"float64": 1e-12, "float32": 1e-6}.get(case.get("x", {}).get("dtype"), 1e-3) \
        if isinstance(case.get("x"), dict) else 1e-6
    kw = case.get("kw") or {}
    if kw.get("density") and kw.get("weight") is not None and rtol == 1e-6:
        # float32 weights of both signs summed, then divided by the sum and the bin widths:
        # a few roundings, magnified where the sum cancels (seed 5027924: flowgrad 3e-7 from
        # the float64 truth, torch 7e-7, 1.7e-6 apart)
        rtol = 1e-5
    return fuzz_common.first_difference(pairs, rtol)


# torch's own results that are wrong or undefined, not copied (see known())
KNOWN = {
    "nan slices": "unique(dim=) of slices holding nans: torch orders such slices by its "
                  "sort's comparisons, false for every nan (an order no rule defines); "
                  "flowgrad's NumPy orders nans last",
    "empty half histogram": "histogram of an empty float16/bfloat16 input: torch skips its "
                            "dtype check when there is nothing to count and runs; flowgrad "
                            "refuses the dtype as torch does for every other input",
    "one-value range": "histc/histogram/histogramdd over a data range that rounds to one value "
                       "in the dtype (2^25 in float32): torch's bin guess is 0/0 cast to int64 "
                       "(undefined; on x86 INT64_MIN, then it searches before the edges) and "
                       "puts the points in bin 1; flowgrad puts them in the last bin, as "
                       "torch's own search over the same (all equal) edges does",
    "isin rounded twins": "isin of elements that become equal in the promoted dtype (int64 "
                          "2^25 + 1 and 2^25 + 2 in bfloat16) against many test elements: "
                          "torch's sort-based path uniques them before the cast and takes "
                          "each one's rounded twin for a match (True where none is there)",
    "isin transposed": "isin with a non-contiguous test_elements of 2+ dims: torch calls "
                       ".view(-1) on it and raises; flowgrad answers",
}


def _one_value_range(case):
    """Whether a histogram's data range (widened by 1, histc, or 0.5 where it is one point)
    rounds to one value in the input's dtype."""
    kw, spec = case["kw"], case["x"]
    if "range" in kw or kw.get("min", 0) != kw.get("max", 0) or spec["dtype"] not in FLOATS \
            or any(isinstance(b, dict) for b in np.ravel([case.get("bins", 1)])):
        return False
    x = _tensor(torch, spec).double().reshape(-1, spec["shape"][-1] if case["op"] ==
                                              "histogramdd" else 1)
    x = x[torch.isfinite(x).all(1)] if case["op"] == "histc" else x
    if not x.numel() or not torch.isfinite(x).all():
        return False
    lo, hi = x.min(0).values, x.max(0).values
    pad = 1.0 if case["op"] == "histc" else 0.5
    lo, hi = torch.where(lo == hi, lo - pad, lo), torch.where(lo == hi, hi + pad, hi)
    low = getattr(torch, spec["dtype"])
    return bool((lo.to(low) == hi.to(low)).any())


def known(case):
    """The KNOWN reason a case differs, or None."""
    op, kw = case["op"], case.get("kw", {})
    if op == "unique" and "dim" in kw and case["x"]["values"] == "nans" and \
            case["x"]["dtype"] in FLOATS:
        return KNOWN["nan slices"]
    if op == "histogram" and case["x"]["dtype"] in ("float16", "bfloat16") and \
            0 in case["x"]["shape"]:
        return KNOWN["empty half histogram"]
    if op in ("histc", "histogram", "histogramdd") and _one_value_range(case):
        return KNOWN["one-value range"]
    if op == "isin" and all(isinstance(case[k], dict) for k in "ab"):
        a, b = _tensor(torch, case["a"]), _tensor(torch, case["b"])
        common = a.to(torch.result_type(a, b))
        if a.unique().numel() > common.unique().numel():
            return KNOWN["isin rounded twins"]
    if op == "isin" and isinstance(case["b"], dict) and case["b"]["layout"] == "transpose" \
            and len(case["b"]["shape"]) >= 2:
        return KNOWN["isin transposed"]
    return None


def generate(seed):
    return Case(seed)


def check_unknown(seed):
    """check(seed), None for a case whose difference KNOWN explains."""
    return None if known(Case(seed)) else check(seed)


def main():
    fuzz_common.main(__doc__, generate, check_unknown)


if __name__ == "__main__":
    main()
