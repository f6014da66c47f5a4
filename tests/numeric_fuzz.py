"""Differential fuzzing of the numerical odds and ends against torch.

diff (n, dim, prepend/append), gradient (spacing as a number, a list of numbers or a list of
coordinate tensors; edge_order 1/2; dim), trapezoid/trapz/cumulative_trapezoid (x or dx),
cov (correction, fweights, aweights)/corrcoef, cross/linalg.cross (dim, broadcasting), kron,
vander (N, increasing), cartesian_prod, combinations (r, with_replacement), tril_indices/
triu_indices (offset), rot90 (k, dims), renorm, nan_to_num (nan/posinf/neginf, integer
inputs), float_power, fmax/fmin, heaviside, nextafter, logaddexp/logaddexp2, frexp/ldexp are
drawn over their arguments, with float64, float32, int64 and bool inputs, 0-d, empty and
size-1 dims, nans, infinities and signed zeros. Each case must give the same raise/no-raise,
the same results (shape, dtype, values) and, where a float64 leaf requires grad, the same
first derivatives for a random upstream gradient.

    .venv/bin/python tests/numeric_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/numeric_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np

RTOL = 1e-10
F64, F32, I64, BOOL, C128 = "float64", "float32", "int64", "bool", "complex128"


# ---- inputs --------------------------------------------------------------------------------
def _shape(r, nd=None, lo=1, hi=4):
    nd = r.choice([0, 1, 1, 2, 2, 3]) if nd is None else nd
    return tuple(r.choice([0, 1, 2]) if r.random() < 0.1 else r.randint(lo, hi)
                 for _ in range(nd))


def _dtype(r, floats=0.8, complex_=0.0):
    if r.random() < complex_:
        return C128
    if r.random() < floats:
        return F64 if r.random() < 0.85 else F32
    return I64 if r.random() < 0.7 else BOOL


def _inp(shape, dtype=F64, values=None, r=None):
    if values is None:
        values = "normal" if r is None else r.choice(["normal"] * 4 + ["special", "ties"])
    return dict(shape=tuple(shape), dtype=dtype, values=values)


def _dim(r, nd, bad=0.03):
    n = max(nd, 1)
    if r.random() < bad:
        return r.choice([n, -n - 1])
    d = r.randrange(n)
    return d - n if r.random() < 0.4 else d


def T(i):
    """A placeholder for input i in a case's args and kwargs."""
    return ("T", i)


def _case(op, inputs, *args, **kw):
    return dict(op=op, inputs=inputs, args=list(args), kw=kw)


# ---- the ops -------------------------------------------------------------------------------
def g_diff(r):
    nd = r.choice([1, 1, 2, 2, 3] + ([0] if r.random() < 0.3 else []))
    shape = _shape(r, nd)
    dt = _dtype(r, complex_=0.05)
    d = _dim(r, nd)
    ins = [_inp(shape, dt, r=r)]
    kw = {}
    if r.random() < 0.7:
        kw["n"] = r.choice([0, 1, 1, 2, 3, 5] + ([-1] if r.random() < 0.1 else []))
    if r.random() < 0.8:
        kw["dim"] = d
    for name in ("prepend", "append"):
        if r.random() < 0.35 and nd:
            s = list(shape)
            dd = d % nd if -nd <= d < nd else 0
            s[dd] = r.choice([0, 1, 2])
            if r.random() < 0.08:
                s = s[:-1]  # a wrong number of dims
            elif r.random() < 0.06:
                s[(dd + 1) % nd] += 1  # a wrong size off the dim
            ins.append(_inp(s, dt if r.random() < 0.85 else _dtype(r), r=r))
            kw[name] = T(len(ins) - 1)
    return _case("diff", ins, **kw)


def g_gradient(r):
    nd = r.choice([1, 1, 2, 2, 3])
    shape = tuple(r.randint(1, 5) if r.random() < 0.15 else r.randint(3, 5) for _ in range(nd))
    dt = _dtype(r, 0.85)
    if dt == BOOL:
        dt = I64
    ins = [_inp(shape, dt, r=r)]
    kw = {}
    form = r.choice(["none", "int", "list", "all"])
    if form == "int":
        dims = [_dim(r, nd)]
        kw["dim"] = dims[0]
    elif form == "list":
        dims = r.sample(range(nd), r.randint(1, nd))
        dims = [x - nd if r.random() < 0.3 else x for x in dims]
        kw["dim"] = list(dims) if r.random() < 0.7 else tuple(dims)
    else:
        dims = list(range(nd))
    kind = r.choice(["default", "scalar", "scalars", "coords", "coords"])
    if kind == "scalar":
        kw["spacing"] = r.choice([2.0, 0.5, -1.5, 3])
        if r.random() < 0.2:
            ins.append(_inp((), F64 if r.random() < 0.7 else I64, "positive"))
            kw["spacing"] = T(len(ins) - 1) if r.random() < 0.5 else [T(len(ins) - 1)] * \
                len(dims)
    elif kind == "scalars":
        kw["spacing"] = [r.choice([2.0, 0.5, 1, -0.75]) for _ in dims]
        if r.random() < 0.05:
            kw["spacing"].append(1.0)
    elif kind == "coords":
        sp = []
        for dd in dims:
            n = shape[dd] if -nd <= dd < nd else 2
            if r.random() < 0.05:
                n += 1
            ins.append(_inp((n,), F64 if r.random() < 0.8 else I64, "sorted"))
            sp.append(T(len(ins) - 1))
        kw["spacing"] = sp if r.random() < 0.8 else tuple(sp)
    if r.random() < 0.6:
        kw["edge_order"] = r.choice([1, 2, 2] + ([3] if r.random() < 0.1 else []))
    return _case("gradient", ins, **kw)


def g_trapezoid(r):
    op = r.choice(["trapezoid", "trapz", "cumulative_trapezoid"])
    nd = r.choice([1, 1, 2, 3] + ([0] if r.random() < 0.1 else []))
    shape = _shape(r, nd)
    dt = _dtype(r, 0.85)
    ins = [_inp(shape, dt, r=r)]
    kw, args = {}, []
    d = _dim(r, nd) if nd else 0
    if r.random() < 0.7:
        kw["dim"] = d
    form = r.choice(["none", "dx", "x1", "xfull", "xpos"])
    n = shape[d] if nd and -nd <= d < nd else 1
    if form == "dx":
        kw["dx"] = r.choice([0.5, 2.0, -1.0, 3])
    elif form in ("x1", "xpos"):
        ins.append(_inp((n + (r.random() < 0.05),), F64 if r.random() < 0.85 else I64,
                        "sorted"))
        if form == "x1":
            kw["x"] = T(1)
        else:
            args.append(T(1))
    elif form == "xfull" and nd:
        s = list(shape)
        if r.random() < 0.3 and nd > 1:
            s[r.choice([k for k in range(nd) if k != d % nd])] = 1  # broadcast
        ins.append(_inp(s, F64, "sorted"))
        kw["x"] = T(1)
    return _case(op, ins, *args, **kw)


def g_cov(r):
    op = r.choice(["cov", "cov", "corrcoef"])
    nd = r.choice([0, 1, 2, 2, 2] + ([3] if r.random() < 0.05 else []))
    shape = _shape(r, nd, 1, 5)
    dt = _dtype(r, 0.85, complex_=0.06)
    ins = [_inp(shape, dt, r=r)]
    kw = {}
    if op == "cov":
        obs = shape[-1] if nd else 1
        if r.random() < 0.5:
            kw["correction"] = r.choice([0, 1, 2, 3, -1])
        if r.random() < 0.4:
            n = obs + (r.random() < 0.05)
            ins.append(_inp((n,), I64 if r.random() < 0.9 else F64,
                            "counts" if r.random() < 0.95 else "normal"))
            kw["fweights"] = T(len(ins) - 1)
        if r.random() < 0.4:
            n = obs + (r.random() < 0.05)
            ins.append(_inp((n,), F64 if r.random() < 0.9 else F32,
                            "positive" if r.random() < 0.9 else
                            r.choice(["normal", "zeros"])))
            kw["aweights"] = T(len(ins) - 1)
    return _case(op, ins, **kw)


def g_cross(r):
    op = r.choice(["cross", "linalg.cross"])
    nd = r.choice([1, 2, 2, 3])
    shape = [r.randint(1, 3) for _ in range(nd)]
    d = r.randrange(nd)
    shape[d] = 3 if r.random() < 0.95 else 2
    s2 = list(shape)
    for k in range(nd):
        if k != d and r.random() < 0.3:
            s2[k] = 1
    if r.random() < 0.2:
        s2 = [r.randint(1, 2)] + s2
    if r.random() < 0.5:
        shape, s2 = s2, shape
    dt = F64 if r.random() < 0.85 else r.choice([F32, I64])
    ins = [_inp(shape, dt, r=r), _inp(s2, dt if r.random() < 0.9 else F64, r=r)]
    kw = {}
    nout = max(len(shape), len(s2))
    if r.random() < (0.5 if op == "cross" else 0.7):
        kw["dim"] = d - len(shape) if r.random() < 0.5 else d + nout - len(shape)
        if r.random() < 0.03:
            kw["dim"] = nout
    return _case(op, ins, T(1), **kw)


def g_kron(r):
    return _case("kron", [_inp(_shape(r), _dtype(r, complex_=0.05), r=r),
                          _inp(_shape(r), _dtype(r, complex_=0.05), r=r)], T(1))


def g_vander(r):
    nd = 1 if r.random() < 0.93 else r.choice([0, 2])
    x = _inp(_shape(r, nd, 0, 4), _dtype(r, 0.75), r=r)
    if x["dtype"] == F32:
        x["dtype"] = F64
    kw = {}
    if r.random() < 0.6:
        kw["N"] = r.choice([0, 1, 2, 3, 5, None] + ([-1] if r.random() < 0.1 else []))
    if r.random() < 0.5:
        kw["increasing"] = r.random() < 0.5
    return _case("vander", [x], **kw)


def g_cartesian_prod(r):
    k = r.choice([1, 2, 2, 3])
    dt = _dtype(r)
    ins = [_inp((r.choice([0, 1, 2, 3]) if r.random() < 0.1 else r.randint(1, 3),),
                dt if r.random() < 0.9 else _dtype(r), r=r) for _ in range(k)]
    if r.random() < 0.05:
        ins[0]["shape"] = r.choice([(), (2, 2)])
    return _case("cartesian_prod", ins, *[T(i) for i in range(k)])


def g_combinations(r):
    n = r.choice([0, 1, 2, 3, 4, 5])
    nd = 1 if r.random() < 0.95 else r.choice([0, 2])
    ins = [_inp((n,) * nd if nd else (), _dtype(r), r=r)]
    kw = {}
    if r.random() < 0.8:
        kw["r"] = r.choice([0, 1, 2, 3, 4, 6] + ([-1] if r.random() < 0.1 else []))
    if r.random() < 0.5:
        kw["with_replacement"] = r.random() < 0.5
    return _case("combinations", ins, **kw)


def g_tri_indices(r):
    op = r.choice(["tril_indices", "triu_indices"])
    row, col = r.randint(0, 5), r.randint(0, 5)
    if r.random() < 0.05:
        row = -1
    args = [row, col]
    kw = {}
    if r.random() < 0.7:
        off = r.randint(-7, 7)
        if r.random() < 0.5:
            kw["offset"] = off
        else:
            args.append(off)
    if r.random() < 0.2:
        kw["dtype"] = r.choice(["int32", "int64"])
    return _case(op, [], *args, **kw)


def g_rot90(r):
    nd = r.choice([2, 2, 3, 4] + ([0, 1] if r.random() < 0.1 else []))
    ins = [_inp(_shape(r, nd), _dtype(r), r=r)]
    args = []
    if r.random() < 0.8:
        args.append(r.randint(-6, 6))
        if r.random() < 0.6:
            n = max(nd, 1)
            dims = r.sample(range(n), min(2, n)) if r.random() < 0.9 else [0, 0]
            dims = [x - n if r.random() < 0.4 else x for x in dims]
            if r.random() < 0.04:
                dims = dims + [0]
            if r.random() < 0.03:
                dims[0] = n
            args.append(tuple(dims) if r.random() < 0.5 else dims)
    return _case("rot90", ins, *args)


def g_renorm(r):
    nd = r.choice([2, 2, 3, 3, 4] + ([0, 1] if r.random() < 0.1 else []))
    dt = F64 if r.random() < 0.9 else r.choice([F32, I64])
    ins = [_inp(_shape(r, nd), dt, r=r)]
    p = r.choice([1, 2, 2.0, 3, 0.5, float("inf")] + ([0, -1] if r.random() < 0.1 else []))
    maxnorm = r.choice([0.5, 1.0, 2.0, 10.0, 0.0] + ([-1.0] if r.random() < 0.05 else []))
    return _case("renorm", ins, p, _dim(r, nd), maxnorm)


def g_nan_to_num(r):
    dt = r.choice([F64, F64, F32, I64, BOOL, C128])
    ins = [_inp(_shape(r), dt, "special")]
    kw, args = {}, []
    for name in ("nan", "posinf", "neginf"):
        if r.random() < 0.4:
            v = r.choice([0.0, 1.5, -2.0, 7, 1e300, None])
            if r.random() < 0.3 and not kw:
                args.append(v)
            else:
                kw[name] = v
    return _case("nan_to_num", ins, *args, **kw)


def _pair(r, op):
    s1 = _shape(r)
    s2 = s1 if r.random() < 0.5 else tuple(n if r.random() < 0.6 else 1 for n in s1)
    if r.random() < 0.2:
        s2 = s2[r.randint(0, len(s2)):]
    if r.random() < 0.5:
        s1, s2 = s2, s1
    dt1 = _dtype(r)
    dt2 = dt1 if r.random() < 0.6 else _dtype(r)
    vals = "special" if r.random() < 0.4 else "normal"
    if op in ("ldexp",):
        dt2, vals2 = (I64 if r.random() < 0.8 else _dtype(r)), "exponents"
    else:
        vals2 = vals if r.random() < 0.7 else "ties"
    return [_inp(s1, dt1, vals), _inp(s2, dt2, vals2)]


def g_binary(r):
    op = r.choice(["float_power", "fmax", "fmin", "heaviside", "nextafter", "logaddexp",
                   "logaddexp2", "ldexp", "float_power", "fmax", "fmin"])
    ins = _pair(r, op)
    args = [T(1)]
    if r.random() < 0.2 and op in ("float_power", "fmax", "fmin", "ldexp", "logaddexp"):
        args = [r.choice([2, -1.5, 0.5, 0, 3.0, float("nan")])]
        ins = ins[:1]
    if op == "float_power" and r.random() < 0.1:  # a scalar base
        return _case(op, ins[1:], r.choice([2.0, -3, 0.5]), T(0), call="scalar_first")
    if op == "float_power" and ins[0]["values"] == "normal" and r.random() < 0.5:
        ins[0]["values"] = "positive"
    if op in ("float_power", "fmax", "logaddexp") and r.random() < 0.06:
        ins[0]["dtype"] = C128
        if op == "logaddexp" and len(ins) == 2:  # (torch's backward takes no real operand)
            ins[1]["dtype"] = C128
    return _case(op, ins, *args)


def g_frexp(r):
    return _case("frexp", [_inp(_shape(r), F64 if r.random() < 0.7 else
                                r.choice([F32, I64]), r=r)])


GENERATORS = [g_diff, g_diff, g_gradient, g_gradient, g_trapezoid, g_trapezoid, g_cov, g_cov,
              g_cross, g_kron, g_vander, g_cartesian_prod, g_combinations, g_tri_indices,
              g_rot90, g_renorm, g_renorm, g_nan_to_num, g_binary, g_binary, g_binary, g_frexp]


_METHODS = {"diff", "kron", "rot90", "renorm", "nan_to_num", "float_power", "fmax", "fmin",
            "heaviside", "nextafter", "logaddexp", "logaddexp2", "ldexp", "frexp", "cross",
            "cov", "corrcoef"}


_INPLACE = {"nan_to_num", "renorm", "float_power", "ldexp", "heaviside", "nextafter"}


def generate(seed):
    r = random.Random(seed)
    case = r.choice(GENERATORS)(r)
    case["seed"] = seed
    case.setdefault("call", "fn")
    if case["call"] == "fn" and case["op"] in _METHODS and r.random() < 0.15:
        case["call"] = "method"
    elif case["call"] == "fn" and case["op"] in _INPLACE and r.random() < 0.12:
        case["call"] = "inplace"
    return case


# ---- running -------------------------------------------------------------------------------
_SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 1e-310, 3.0])


def _array(spec, rng):
    shape, dt, kind = spec["shape"], spec["dtype"], spec["values"]
    x = rng.standard_normal(shape)
    if kind == "special":
        x = np.where(rng.random(shape) < 0.5, rng.choice(_SPECIALS, shape), x)
    elif kind == "ties":
        x = np.round(x * 1.5) / 1.5
    elif kind == "positive":
        x = np.abs(x) + 0.25
    elif kind == "sorted":
        x = np.cumsum(np.abs(x) + 0.3) if x.ndim <= 1 else \
            np.cumsum(np.abs(x) + 0.3, axis=-1)
    elif kind == "counts":
        x = rng.integers(0, 4, shape)
    elif kind == "exponents":
        x = rng.integers(-5, 6, shape)
    elif kind == "zeros":
        x = np.zeros(shape)
    if dt == C128:
        return x + 1j * np.round(rng.standard_normal(shape), 1)
    if dt == BOOL:
        return np.asarray(x > 0)
    if dt == I64:
        return np.asarray(np.round(np.nan_to_num(x, posinf=7, neginf=-7) * 2)).astype(np.int64)
    return np.asarray(x, dtype=dt)


def _resolve(m, v, xs):
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "T":
        return xs[v[1]]
    if isinstance(v, list):
        return [_resolve(m, a, xs) for a in v]
    if isinstance(v, tuple):
        return tuple(_resolve(m, a, xs) for a in v)
    if isinstance(v, str) and v in ("int32", "int64"):
        return getattr(m, v)
    return v


def _call(m, case, xs):
    args = [_resolve(m, a, xs) for a in case["args"]]
    kw = {k: _resolve(m, v, xs) for k, v in case["kw"].items()}
    op = case["op"]
    if case["call"] == "scalar_first":
        return m.float_power(args[0], args[1])
    if case["call"] == "method":
        return getattr(xs[0], op)(*args, **kw)
    if case["call"] == "inplace":  # (on the leaf's clone; the result is that tensor)
        out = getattr(xs[0], op + "_")(*args, **kw)
        assert out is xs[0]
        return out
    fn = m.linalg.cross if op == "linalg.cross" else getattr(m, op)
    if op in ("tril_indices", "triu_indices", "cartesian_prod"):
        return fn(*args, **kw)
    return fn(xs[0], *args, **kw)


def _torch_vander(torch, x, N=None, increasing=False):
    """torch.vander's values with a gradient torch can take: torch 2.13's own backward fails
    (its cumprod's input is modified in place)."""
    value = torch.vander(x.detach(), N=N, increasing=increasing)
    if x.numel() == 0 or value.shape[-1] <= 1:  # (torch's: off the graph)
        return value
    powers = torch.arange(value.shape[-1])
    out = x.unsqueeze(-1) ** (powers if increasing else powers.flip(0))
    # torch's values (its products round otherwise), the power rule's gradient
    return torch.where(out.detach() == value, out, out + (value - out.detach()))


def _run(m, case):
    """[('what', array), ...]: each result, then the gradient of each float64 leaf."""
    rng = np.random.default_rng(case["seed"])
    arrays = [_array(s, rng) for s in case["inputs"]]
    leaves = [m.tensor(a, requires_grad=a.dtype == np.float64) for a in arrays]
    # the ops get copies: torch 2.13's cov centres a single observation in place, in the
    # caller's tensor (a leaf that requires grad refuses it)
    xs = [x.clone() for x in leaves]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if m.__name__ == "torch" and case["op"] == "vander" and xs[0].requires_grad:
            out = _torch_vander(m, xs[0], **case["kw"])
        else:
            out = _call(m, case, xs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    facts = [(f"result {i}", o.detach().numpy()) for i, o in enumerate(outs)]
    live = [o for o in outs if o.requires_grad]
    leaves = [x for x in leaves if x.requires_grad]
    if live and leaves:
        up = np.random.default_rng(case["seed"] + 1)
        loss = sum((o * m.tensor(up.standard_normal(tuple(o.shape)))).sum() for o in live)
        if loss.is_complex():
            loss = loss.real
        gs = m.autograd.grad(loss, leaves, allow_unused=True)
        facts += [(f"gradient {i}", None if g is None else g.numpy()) for i, g in enumerate(gs)]
    return facts


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    both = fuzz_common.run_both(_run, case)
    if not isinstance(both, tuple):
        return both
    want, got = both
    if [w for w, _ in want] != [w for w, _ in got]:
        return f"facts: flowgrad {[w for w, _ in got]}, torch {[w for w, _ in want]}"
    float32 = any(b is not None and b.dtype in (np.float32,) for _, b in want) or \
        any(s["dtype"] == F32 for s in case["inputs"])
    return fuzz_common.first_difference([(w, a, b) for (w, b), (_, a) in zip(want, got)],
                                        1e-5 if float32 else RTOL)


# cases where torch is wrong, or flowgrad deliberately differs: name -> why
KNOWN = {
    "ldexp negative exponent": "torch 2.13's ldexp gradient is grad * pow(2, other) in the "
                               "integer exponent's dtype: 0 for an exponent < 0, where "
                               "d/dx x * 2**e = 2**e (0.25 for e = -2); flowgrad's is 2**e",
    "frexp subnormal": "frexp of a subnormal (1e-310: exponent -1029): torch's gradient "
                       "divides by 2**e, which overflows to inf; flowgrad scales the incoming "
                       "gradient by ldexp, finite where the exact product is",
    "gradient coordinates size": "torch.gradient does not check that a coordinate tensor has "
                                 "one value per sample: it reads past its end or computes "
                                 "with too few; flowgrad refuses it",
    "logaddexp bool": "logaddexp/logaddexp2 of a bool tensor and a float one that requires "
                      "grad: torch's backward subtracts the bool operand and raises; "
                      "flowgrad's gradient is the float's (the bool one as 0/1)",
    "vander of an infinity": "torch 2.13's vander backward raises (its cumprod's input is "
                             "modified in place), so the harness differentiates the power "
                             "rule instead: at an infinite x its terms of both signs sum to "
                             "nan in another order than flowgrad's products (-inf)",
    "complex pow at an infinity": "float_power of a complex base with an infinite part: "
                                  "torch's exp(y * log(x)) gives nan for x ** 0 and inf+nanj "
                                  "for (-inf+0.8j) ** 2; flowgrad's NumPy power gives 1 and "
                                  "inf-infj (x ** 0 = 1, as pow(inf, 0) is for reals)",
    "complex difference at an infinity": "diff of complex numbers with an infinite part: "
                                         "torch's subtraction a - b multiplies b by -1 as a "
                                         "complex number, so (-1.55-1.4j) - (-inf+0.7j) is "
                                         "inf+nanj; flowgrad's is inf-2.1j",
    "renorm subnormal norm": "renorm by a p-norm (p not 1, 2 or inf) of a slice whose norm is "
                             "subnormal (1e-310): torch's norm gradient divides by "
                             "norm ** (p - 1), which underflows to 0 (nan); flowgrad's is "
                             "finite (0 where maxnorm is 0)",
    "complex cov of dof <= 0": "cov of a complex input with dof <= 0: both return c / 0, and "
                               "which parts of a complex division by zero are inf or nan "
                               "(and their signs) is the division algorithm's",
    "real cov of dof <= 0 at a zero sum": "cov of tied values (multiples of 2/3) with dof "
                                          "<= 0: an entry whose centred products sum to 0 "
                                          "exactly is 0 / 0 = nan where the sum rounds to "
                                          "0 (torch's order) and +-inf where it rounds to "
                                          "+-2e-17 (flowgrad's, seed 5019820)",
    "cov aweights dtype": "cov of one observation of an integer or float32 input with "
                          "float64 aweights: torch 2.13's single-observation path multiplies "
                          "a float32 matrix by a float64 one and raises (with more "
                          "observations it promotes); flowgrad promotes",
    "cov single weighted observation": "cov of one observation with weights: torch 2.13 "
                                       "centres the input in place and returns 0 even where "
                                       "the observation is nan or inf (flowgrad: nan), and "
                                       "with dof <= 0 (its value 0 / 0 = nan) its gradient "
                                       "is 0 where flowgrad's is nan",
}


def _cov_dof(arrays, kw):
    """torch.cov's normalization factor (dof) for the case's arrays."""
    x = arrays[0]
    n = x.shape[-1] if x.ndim else 1
    fw, aw = kw.get("fweights"), kw.get("aweights")
    correction = kw.get("correction", 1)
    if fw is None and aw is None:
        return n - correction
    if any(t and arrays[t[1]].shape != (n,) for t in (fw, aw)):
        return 1  # (refused)
    w = np.ones(n)
    w = w * arrays[fw[1]] if fw else w
    w = w * arrays[aw[1]] if aw else w
    if w.sum() == 0:
        return 1
    if aw and correction:
        return w.sum() - correction * (w * arrays[aw[1]]).sum() / w.sum()
    return w.sum() - correction


def known(case):
    """The KNOWN entry the case falls under, or None."""
    op, ins, kw = case["op"], case["inputs"], case["kw"]
    rng = np.random.default_rng(case["seed"])
    arrays = [_array(s, rng) for s in ins]
    if op == "ldexp" and len(arrays) == 2 and arrays[0].dtype == np.float64 and \
            arrays[1].dtype.kind in "iu" and (arrays[1] < 0).any():
        return "ldexp negative exponent"
    if op == "vander" and arrays[0].dtype == np.float64 and not np.isfinite(arrays[0]).all():
        return "vander of an infinity"
    if op == "float_power" and any(a.dtype.kind == "c" and not np.isfinite(a).all()
                                   for a in arrays):
        return "complex pow at an infinity"
    if op == "diff" and any(a.dtype.kind == "c" and not np.isfinite(a).all() for a in arrays):
        return "complex difference at an infinity"
    if op == "renorm" and arrays[0].dtype == np.float64 and case["args"][0] not in \
            (1, 2, 2.0, float("inf")):
        a = np.abs(arrays[0])
        if ((a > 0) & (a < np.finfo(np.float64).tiny)).any():
            return "renorm subnormal norm"
    if op == "cov" and arrays[0].dtype.kind == "c" and _cov_dof(arrays, kw) <= 0:
        return "complex cov of dof <= 0"
    if op == "cov" and ins[0]["values"] == "ties" and _cov_dof(arrays, kw) <= 0:
        return "real cov of dof <= 0 at a zero sum"
    if op == "frexp" and arrays[0].dtype == np.float64:
        a = np.abs(arrays[0])
        if ((a > 0) & (a < np.finfo(np.float64).tiny)).any():
            return "frexp subnormal"
    if op == "gradient" and isinstance(kw.get("spacing"), (list, tuple)) and \
            len(arrays) > 1:
        nd = len(ins[0]["shape"])
        dims = kw.get("dim", range(nd))
        dims = [dims] if isinstance(dims, int) else list(dims)
        if len(dims) == len(kw["spacing"]) and all(-nd <= d < nd for d in dims) and \
                any(a.shape != (ins[0]["shape"][d],) for a, d in zip(arrays[1:], dims)):
            return "gradient coordinates size"
    if op in ("logaddexp", "logaddexp2") and len(arrays) == 2 and \
            {a.dtype.kind for a in arrays} == {"b", "f"} and \
            any(a.dtype == np.float64 for a in arrays):
        return "logaddexp bool"
    if op == "cov" and (arrays[0].shape[-1] if arrays[0].ndim else 1) == 1:
        aw, fw, x = kw.get("aweights"), kw.get("fweights"), arrays[0]
        if aw is not None and arrays[aw[1]].dtype == np.float64 and \
                x.dtype.kind in "iuf" and x.dtype != np.float64:
            return "cov aweights dtype"
        if aw or fw:
            f = arrays[fw[1]].sum() if fw else 1
            if not np.isfinite(x).all() or f <= kw.get("correction", 1):
                return "cov single weighted observation"
    return None


def main():
    fuzz_common.main(__doc__, generate, lambda seed: None if known(generate(seed)) else
                     check(seed))


if __name__ == "__main__":
    main()
