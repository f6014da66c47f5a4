"""Differential fuzzing of the out= argument and of the in-place methods, against torch.

out= cases: elementwise unary/binary/ternary ops (scalars, broadcasting, alpha,
rounding_mode), reductions with a dim (values and indices tuples), scans, sort/topk/kthvalue,
matmul/mm/bmm/addmm/mv/dot/outer, cat/stack, where, clamp and linalg functions, each over
inputs of every dtype kind, with an `out` that fits, is empty, has a wrong shape (resized, with
torch's warning), another dtype (cast or refused), is a strided or transposed view of a
bigger buffer, a view of the wrong shape, an expanded tensor, an input itself, a view
partly overlapping an input, or requires grad (or the inputs do, with grad mode on or off).
In-place cases: `x.op_(...)` where the result cannot be cast into x, broadcasts past x's
shape, on a leaf requiring grad (or a view of one, or under no_grad), on a view of a
non-leaf (gradients compared), on an expanded x, and with an operand partly overlapping x.

Each case runs in both frameworks and must give the same raise/no-raise; then the returned
object must be `out` (each of a tuple's) or x, the resize warning must come alike, and out's
(x's) shape, dtype, strides and values, the buffer it views, the inputs afterwards and, where
autograd runs, the leaves' gradients must agree.

    .venv/bin/python tests/out_arg_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/out_arg_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np

RTOL = 1e-10
_RESIZED = "resized"
DTYPES = ["float64", "float64", "float64", "float32", "int64", "int64", "int32", "bool",
          "complex128"]
OUT_DTYPES = ["float64", "float32", "int64", "int32", "bool", "complex128", "int16"]

# name: (arity, how the call is made). Arity "t"+digits: tensor operands; "s": scalar second.
UNARY = ["exp", "neg", "abs", "sqrt", "sin", "floor", "round", "sign", "sigmoid", "reciprocal",
         "logical_not", "bitwise_not", "trunc", "frac", "ceil", "log1p", "tanh", "square",
         "isnan", "nan_to_num", "signbit", "erf", "angle", "expm1", "rsqrt", "sgn", "positive",
         "conj_physical", "isfinite", "deg2rad", "exp2", "log2", "fix", "i0"]
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "fmod", "remainder", "atan2",
          "eq", "lt", "ge", "ne", "logical_and", "logical_xor", "bitwise_and", "bitwise_or",
          "floor_divide", "true_divide", "hypot", "fmax", "copysign", "xlogy", "logaddexp",
          "heaviside", "nextafter", "float_power", "ldexp", "bitwise_left_shift", "gcd",
          "div_floor", "div_trunc", "add_alpha", "sub_alpha", "subtract", "multiply"]
SCALAR = ["add", "mul", "pow", "remainder", "eq", "fmod", "sub", "div", "clamp_min",
          "clamp_max", "float_power", "bitwise_and", "floor_divide", "true_divide", "lt"]
TERNARY = ["where", "clamp", "clamp_s", "addcmul", "addcdiv", "lerp", "lerp_s"]
REDUCE = ["sum", "mean", "prod", "nansum", "amax", "amin", "argmax", "argmin", "logsumexp",
          "std", "var", "norm", "all", "any", "cumsum", "cumprod", "cummax", "cummin",
          "logcumsumexp", "max", "min", "median", "nanmedian", "mode", "kthvalue", "aminmax",
          "sort", "topk", "msort", "argsort", "nanmean", "diff", "count_nonzero"]
PRODUCT = ["matmul", "mm", "bmm", "addmm", "mv", "dot", "outer", "baddbmm", "addmv", "vdot",
           "inner", "kron", "cross"]
JOIN = ["cat", "stack", "hstack", "vstack"]
LINALG = ["inv", "det", "solve", "vector_norm", "matrix_norm", "cross_l", "svdvals",
          "slogdet", "cholesky", "eigvalsh", "qr", "matrix_power", "pinv", "vecdot",
          "tensorsolve_skip"][:-1]
INPLACE = ["add_", "sub_", "mul_", "div_", "pow_", "clamp_", "floor_divide_", "remainder_",
           "fmod_", "exp_", "sqrt_", "abs_", "neg_", "sin_", "round_", "sign_", "copy_",
           "fill_", "masked_fill_", "lerp_", "addcmul_", "addcdiv_", "bitwise_and_",
           "logical_and_", "eq_", "lt_", "atan2_", "hypot_", "clamp_min_", "sigmoid_", "zero_",
           "cumsum_", "mul_s", "add_s", "div_s", "floor_", "logical_not_", "bitwise_not_",
           "div_floor_", "pow_s", "t_", "squeeze_", "unsqueeze_", "copysign_", "xlogy_",
           "nan_to_num_", "index_fill_", "masked_scatter_", "exponential_skip"][:-1]

# (drawn last, for some of the cases: the draws before them stay those of the KNOWN seeds)
EXTRA = {"unary": ["logit", "erfinv", "lgamma", "sinh", "asin", "atan", "log10", "cos",
                   "isinf", "isposinf", "erfc", "relu", "exp2", "cosh"],
         "binary": ["fmin", "logaddexp2", "igamma", "bitwise_xor", "logical_or", "le", "gt",
                    "bitwise_right_shift", "lcm", "xlogy", "special_xlog1py", "polar_skip"][:-1],
         "inplace1": ["trunc_", "frac_", "ceil_", "log_", "tanh_", "reciprocal_", "square_",
                      "relu_", "sgn_", "erf_", "expm1_", "deg2rad_"],
         "inplace2": ["ne_", "ge_", "logical_or_", "bitwise_or_", "bitwise_xor_", "fmod_",
                      "clamp_max_", "sub_", "true_divide_", "gcd_", "lerp_s_", "ldexp_"]}
_BINARY_INPLACE = ("add_", "sub_", "mul_", "div_", "pow_", "floor_divide_", "remainder_",
                   "fmod_", "copy_", "bitwise_and_", "logical_and_", "eq_", "lt_", "atan2_",
                   "hypot_", "clamp_min_", "copysign_", "xlogy_", "div_floor_")
_UNARY_INPLACE = ("exp_", "sqrt_", "abs_", "neg_", "sin_", "round_", "sign_", "sigmoid_",
                  "floor_", "logical_not_", "bitwise_not_", "nan_to_num_")
OUT_KINDS = ["fit", "fit", "fit", "empty", "wrong", "wrong_numel", "dtype", "dtype", "dtype",
             "strided", "transposed", "view_wrong", "expanded", "alias", "alias", "overlap",
             "out_grad", "in_grad", "in_grad_off"]
ELEMENTWISE = ("unary", "binary", "scalar", "ternary")
# ops whose index results pick one of tied elements (compared where the input has no ties)
TIE_PICKS = ("argmax", "argmin", "cummax", "cummin", "max", "min", "median", "nanmedian", "mode",
             "kthvalue", "sort", "topk", "argsort", "aminmax")
SELF_KINDS = ["plain", "plain", "leaf_grad", "view_leaf_grad", "nonleaf", "nonleaf",
              "view_nonleaf", "view_nonleaf", "no_grad_leaf", "expanded", "overlap",
              "broadcast"]


def _shape(r, nd=None):
    nd = r.choice([0, 1, 1, 2, 2, 3]) if nd is None else nd
    return tuple(r.choice([0, 1, 2, 3]) if r.random() < 0.08 else r.randint(1, 4)
                 for _ in range(nd))


def _bshape(r, shape):
    """A shape broadcasting with `shape`: itself, a suffix, or with some dims 1."""
    c = r.random()
    if c < 0.5:
        return shape
    if c < 0.7:
        return shape[r.randint(0, len(shape)):]
    if c < 0.9:
        return tuple(1 if r.random() < 0.5 else n for n in shape)
    return (r.randint(1, 3),) + shape  # (bigger than shape: in-place refuses)


def _dtype(r):
    return r.choice(DTYPES)


def generate(seed):
    r = random.Random(seed)
    family = r.choice(["unary", "binary", "binary", "scalar", "ternary", "reduce", "reduce",
                       "product", "join", "linalg", "inplace", "inplace", "inplace"])
    d = r.choice(DTYPES) if r.random() < 0.4 else "float64"
    case = dict(family=family, seed=seed, kw={})
    if family == "inplace":
        name = r.choice(INPLACE)
        shape = _shape(r)
        case.update(name=name, self_kind=r.choice(SELF_KINDS), shapes=[shape],
                    dtypes=[d])
        if name in ("add_", "sub_", "mul_", "div_", "pow_", "floor_divide_", "remainder_",
                    "fmod_", "copy_", "bitwise_and_", "logical_and_", "eq_", "lt_", "atan2_",
                    "hypot_", "clamp_min_", "copysign_", "xlogy_", "div_floor_", "lerp_",
                    "addcmul_", "addcdiv_", "clamp_"):
            n = 3 if name in ("lerp_", "addcmul_", "addcdiv_") else 2
            for _ in range(n - 1):
                case["shapes"].append(_bshape(r, shape))
                case["dtypes"].append(_dtype(r) if r.random() < 0.5 else d)
        if name == "clamp_" and r.random() < 0.5:
            case["shapes"], case["dtypes"] = case["shapes"][:1], case["dtypes"][:1]
        if name in ("unsqueeze_", "cumsum_", "squeeze_", "index_fill_") and shape:
            case["kw"]["dim"] = r.randrange(-len(shape), len(shape))
        if r.random() < 0.2 and name in _BINARY_INPLACE + _UNARY_INPLACE:
            case["name"] = r.choice(EXTRA["inplace2" if name in _BINARY_INPLACE
                                          else "inplace1"])
        return case
    if family == "unary":
        name, n = r.choice(UNARY), 1
    elif family == "binary":
        name, n = r.choice(BINARY), 2
    elif family == "scalar":
        name, n = r.choice(SCALAR), 1
        case["scalar"] = r.choice([2, 2.5, -1, True, 0.5, 3])
    elif family == "ternary":
        name = r.choice(TERNARY)
        n = 2 if name in ("clamp_s", "lerp_s") else 3
        if name == "clamp_s":
            n = 1
            case["kw"] = dict(min=r.choice([-0.5, None, 0, 1]), max=r.choice([0.5, None, 2]))
    elif family == "reduce":
        name, n = r.choice(REDUCE), 1
    elif family == "product":
        name = r.choice(PRODUCT)
        n = 3 if name in ("addmm", "baddbmm", "addmv") else 2
    elif family == "join":
        name, n = r.choice(JOIN), r.randint(1, 3)
    else:
        name = r.choice(LINALG)
        n = 2 if name in ("solve", "cross_l", "vecdot") else 1
    case["name"] = name
    shape = _shape(r)
    if family == "product":
        a, b, k = r.randint(1, 3), r.randint(1, 3), r.randint(1, 3)
        bt = r.randint(1, 3)
        shapes = {"matmul": [r.choice([(a, k), (bt, a, k), (k,)]), r.choice([(k, b), (k,)])],
                  "mm": [(a, k), (k, b)], "bmm": [(bt, a, k), (bt, k, b)],
                  "addmm": [r.choice([(a, b), (b,), ()]), (a, k), (k, b)],
                  "mv": [(a, k), (k,)], "dot": [(k,), (k,)], "outer": [(a,), (b,)],
                  "baddbmm": [(bt, a, b), (bt, a, k), (bt, k, b)],
                  "addmv": [r.choice([(a,), ()]), (a, k), (k,)], "vdot": [(k,), (k,)],
                  "inner": [(a, k), (b, k)], "kron": [(a, k), (b,)],
                  "cross": [(a, 3), (a, 3)]}[name]
    elif family == "linalg":
        k = r.randint(1, 3)
        batch = r.choice([(), (2,)])
        shapes = {"vector_norm": [shape], "cross_l": [batch + (3,), batch + (3,)],
                  "solve": [batch + (k, k), batch + (k,) + r.choice([(), (2,)])],
                  "vecdot": [shape, _bshape(r, shape)]}.get(name, [batch + (k, k)])
        if name == "solve" and len(shapes[1]) == len(batch) + 1 and r.random() < 0.5:
            shapes[1] = batch + (k, 1)
    elif family == "join":
        shapes = [shape] * n
        if name == "cat" and shape and r.random() < 0.5:
            shapes = [shape[:0] + (r.randint(0, 3),) + shape[1:] for _ in range(n)]
    else:
        shapes = [shape] + [_bshape(r, shape) for _ in range(n - 1)]
    dtypes = [d] + [(_dtype(r) if r.random() < 0.3 else d) for _ in range(n - 1)]
    if name == "where":
        dtypes[0] = "bool"
    case.update(shapes=shapes, dtypes=dtypes)
    nd = len(shape)
    if family == "reduce":
        if nd:
            case["kw"]["dim"] = r.randrange(-nd, nd)
        elif r.random() < 0.7:
            case["kw"]["dim"] = 0
        if name in ("sum", "mean", "prod", "nansum", "amax", "amin", "argmax", "argmin",
                    "logsumexp", "std", "var", "norm", "all", "any", "max", "min", "median",
                    "nanmedian", "mode", "kthvalue", "aminmax", "nanmean") and r.random() < 0.3:
            case["kw"]["keepdim"] = True
        if name in ("sum", "prod", "cumsum", "mean") and r.random() < 0.2:
            case["kw"]["dtype"] = r.choice(["float32", "float64", "int64"])
        if name in ("sort", "argsort") and r.random() < 0.5:
            case["kw"]["descending"] = True
        if name in ("topk", "kthvalue"):
            size = shape[case["kw"].get("dim", 0)] if nd else 1
            case["kw"]["k"] = r.randint(1 if name == "kthvalue" else 0, max(size, 1))
        if name in ("std", "var") and r.random() < 0.5:
            case["kw"]["correction"] = r.choice([0, 2])
        if name in ("sum", "mean", "amax", "amin", "std", "var", "nansum", "logsumexp") and \
                nd >= 2 and r.random() < 0.2:
            case["kw"]["dim"] = (0, -1)
    if family == "join":
        case["kw"]["dim"] = r.randrange(-nd - (name == "stack"), nd + (name == "stack")) \
            if nd or name == "stack" else 0
        if name in ("hstack", "vstack"):
            case["kw"] = {}
    if family == "linalg" and name in ("vector_norm", "matrix_norm") and r.random() < 0.5:
        case["kw"]["ord"] = r.choice([1, 2, float("inf")] if name == "vector_norm"
                                     else ["fro", 1, "nuc", -1])
    if family == "linalg" and name == "matrix_power":
        case["kw"]["n"] = r.choice([0, 1, 2, 3, -1])
    kind = r.choice(OUT_KINDS)
    if kind == "expanded" and family not in ELEMENTWISE:
        kind = "fit"  # (torch's other kernels write an expanded out unchecked: undefined)
    case["out_kind"] = kind
    if kind == "dtype":
        case["out_dtype"] = r.choice(OUT_DTYPES)
    if family in ("unary", "binary") and r.random() < 0.25:
        case["name"] = r.choice(EXTRA[family])
    return case


Case = generate


def _values(case, i, shape, dtype):
    """The same numbers in both frameworks: normals (with a nan now and then), small
    nonzero integers, bools."""
    rng = np.random.default_rng(case["seed"] * 7 + i)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        v = rng.integers(1, 5, shape) * rng.choice([-1, 1], shape)
        if case["name"].startswith("ldexp") and i == 1 and (
                case["family"] == "inplace" or case.get("out_kind") in ("in_grad", "out_grad")):
            v = abs(v)  # (a gradient: numeric_fuzz's KNOWN 'ldexp negative exponent')
        return v.astype(dtype)
    v = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dtype)


def _make(m, case, i, shape, dtype, grad=False):
    x = m.tensor(_values(case, i, shape, dtype))
    if grad and x.dtype.is_floating_point:
        x.requires_grad_()
    return x


def _call(m, case, args, out):
    """The op of an out= case on `args`, out=`out` (None: without out=)."""
    name, kw = case["name"], dict(case["kw"])
    extra = {} if out is None else {"out": out}
    if "dtype" in kw:
        kw["dtype"] = getattr(m, kw["dtype"])
    fam = case["family"]
    if fam == "scalar":
        if name in ("clamp_min", "clamp_max"):
            return getattr(m, name)(args[0], case["scalar"], **extra)
        return getattr(m, name)(args[0], case["scalar"], **extra)
    if fam == "binary":
        if name in ("div_floor", "div_trunc"):
            return m.div(*args, rounding_mode=name[4:], **extra)
        if name in ("add_alpha", "sub_alpha"):
            alpha = 2 if args[1].dtype in (m.int64, m.int32, m.bool) else 0.5
            return getattr(m, name[:3])(*args, alpha=alpha, **extra)
        if name == "special_xlog1py":
            return m.special.xlog1py(*args, **extra)
        return getattr(m, name)(*args, **extra)
    if fam == "ternary":
        if name == "clamp":
            return m.clamp(args[0], min=args[1], max=args[2], **extra)
        if name == "clamp_s":
            return m.clamp(args[0], **kw, **extra)
        if name == "addcmul":
            return m.addcmul(*args, value=2, **extra)
        if name == "addcdiv":
            return m.addcdiv(*args, value=0.5, **extra)
        if name == "lerp_s":
            return m.lerp(*args, 0.3, **extra)
        return getattr(m, name)(*args, **extra)
    if fam == "join":
        return getattr(m, name)(list(args), **kw, **extra)
    if fam == "linalg":
        fn = getattr(m.linalg, {"cross_l": "cross"}.get(name, name))
        return fn(*args, **kw, **extra)
    if fam == "reduce" and name == "topk":
        k = kw.pop("k")
        return m.topk(args[0], k, **kw, **extra)
    if fam == "reduce" and name == "kthvalue":
        k = kw.pop("k")
        return m.kthvalue(args[0], k, **kw, **extra)
    if fam == "reduce" and name == "norm":
        return m.norm(args[0], p=2, **kw, **extra)
    return getattr(m, name)(*args, **kw, **extra)


def _filler(m, dtype):
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == m.bool:
        return True
    return m.iinfo(dtype).max


def _make_out(m, case, result, inputs):
    """(out, the buffer it views or None) for one result, as the case's out kind says."""
    kind = case["out_kind"]
    shape, dtype = tuple(result.shape), result.dtype
    fill = _filler(m, dtype)
    if kind == "dtype":
        dtype = getattr(m, case["out_dtype"])
        fill = _filler(m, dtype)
    if kind == "empty":
        return m.empty(0, dtype=dtype), None
    if kind == "wrong":
        return m.full((int(np.prod(shape)) + 1,), fill, dtype=dtype), None
    if kind == "wrong_numel":
        return m.full((int(np.prod(shape)),) if len(shape) != 1 else (1, shape[0]), fill,
                      dtype=dtype), None
    if kind == "strided" and shape:
        base = m.full((*shape[:-1], 2 * shape[-1] + 1), fill, dtype=dtype)
        return base[..., 1::2], base
    if kind == "transposed" and len(shape) >= 2:
        base = m.full((*shape[:-2], shape[-1], shape[-2]), fill, dtype=dtype)
        return base.mT, base
    if kind == "view_wrong":
        base = m.full((int(np.prod(shape)) + 3,), fill, dtype=dtype)
        return base[1:3], base
    if kind == "expanded" and shape and int(np.prod(shape)) > 1:
        base = m.full((1,) * len(shape), fill, dtype=dtype)
        return base.expand(shape), base
    if kind == "out_grad" and (dtype.is_floating_point or dtype.is_complex):
        return m.full(shape, fill, dtype=dtype).requires_grad_(), None
    return m.full(shape, fill, dtype=dtype), None


def _strides(t):
    """The strides torch's rules define: those of dims longer than 1, of a tensor of more than
    one element."""
    if t.numel() <= 1:
        return None
    return tuple(s if n > 1 else None for s, n in zip(t.stride(), t.shape))


def _run(m, case):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _run_inplace(m, case) if case["family"] == "inplace" else _run_out(m, case)
    return got + [("warned", any(_RESIZED in str(w.message) for w in caught))]


def _run_out(m, case):
    kind = case["out_kind"]
    args = [_make(m, case, i, s, d) for i, (s, d) in enumerate(zip(case["shapes"],
                                                                    case["dtypes"]))]
    with m.no_grad():
        expected = _call(m, case, args, None)
    results = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    several = isinstance(expected, (tuple, list))
    bases = [None] * len(results)
    if kind == "alias" and tuple(results[0].shape) == tuple(args[0].shape):
        # out is the first input (of the result's shape: torch resizes an input of another
        # shape before reading it)
        outs = [args[0]] + [_make_out(m, case, r, args)[0] for r in results[1:]]
    elif kind == "overlap" and args[0].ndim and args[0].shape[0] > 0:
        # the first input and out: two windows, one element apart, on one buffer
        x = args[0]
        buf = m.cat([x, x[:1]]).contiguous()
        args[0] = buf[:-1]
        if tuple(results[0].shape) == tuple(x.shape) and results[0].dtype == x.dtype:
            outs = [buf[1:]]
        else:
            outs = [_make_out(m, case, results[0], args)[0]]
        outs += [_make_out(m, case, r, args)[0] for r in results[1:]]
        bases[0] = buf
    else:
        made = [_make_out(m, case, r, args) for r in results]
        outs, bases = [o for o, _ in made], [b for _, b in made]
    if kind in ("in_grad", "in_grad_off"):
        for a in args:
            if a.dtype.is_floating_point or a.dtype.is_complex:
                a.requires_grad_()
    out = tuple(outs) if several else outs[0]
    # torch writes an out partly overlapping an input (where it allows one) or an expanded
    # out element by element: what it reads and which write wins is its loop order's
    # (and an out that is an input, except for the elementwise kernels, whose loops read
    # each element before writing it: torch's reductions fill out with their identity first)
    undefined = kind in ("overlap", "expanded") or \
        kind == "alias" and case["family"] not in ELEMENTWISE
    ties = case["name"] in TIE_PICKS and any(
        np.unique(a.detach().numpy()).size < a.numel() for a in args[:1])
    ctx = m.no_grad() if kind == "in_grad_off" else m.enable_grad()
    with ctx:
        back = _call(m, case, args, out)
    back = list(back) if isinstance(back, (tuple, list)) else [back]
    report = [("returns out", tuple(b is o for b, o in zip(back, outs)))]
    for i, o in enumerate(outs):
        # (strides of a tensor of at most one element are not defined by torch's rules)
        report += [(f"out[{i}] meta", (tuple(o.shape), str(o.dtype).split(".")[-1],
                                      _strides(o)))]
        if not undefined and not (ties and o.dtype == m.int64):
            report.append((f"out[{i}]", o.detach().numpy().copy()))
    for i, b in enumerate(bases):
        if b is not None and not undefined and not ties:
            report.append((f"buffer[{i}]", b.detach().numpy().copy()))
    for i, a in enumerate(args):
        if a is not outs[0] and not undefined:
            report.append((f"input[{i}] after", a.detach().numpy().copy()))
    return report


def _inplace_args(m, case):
    args = [_make(m, case, i + 1, s, d) for i, (s, d) in enumerate(zip(case["shapes"][1:],
                                                                        case["dtypes"][1:]))]
    return args


def _run_inplace(m, case):
    name, kind, kw = case["name"], case["self_kind"], dict(case["kw"])
    shape, dtype = case["shapes"][0], case["dtypes"][0]
    floating = dtype.startswith(("float", "complex"))
    leaf = _make(m, case, 0, shape, dtype, grad=kind != "plain" and kind != "expanded")
    others = _inplace_args(m, case)
    view = None
    if kind in ("view_leaf_grad", "view_nonleaf") and shape and shape[0] > 0:
        view = lambda t: t[::2]  # noqa: E731
    elif kind in ("view_leaf_grad", "view_nonleaf"):
        view = lambda t: t.view(t.shape)  # noqa: E731
    if kind in ("nonleaf", "view_nonleaf"):
        root = leaf * 1 if floating else leaf.clone()
    else:
        root = leaf
    x = view(root) if view else root
    if kind == "expanded" and shape and int(np.prod(shape)) > 1:
        x = leaf.reshape(-1)[:1].reshape((1,) * len(shape)).expand(shape)
    if kind == "broadcast" and others:
        others[0] = _make(m, case, 9, (2,) + tuple(shape), case["dtypes"][1])
    if kind == "overlap" and others and shape and shape[0] > 1 and \
            tuple(others[0].shape) == tuple(shape) and others[0].dtype == x.dtype:
        others[0] = root[1:] if x is root else others[0]
        x = root[:-1]
    ctx = m.no_grad() if kind == "no_grad_leaf" else m.enable_grad()
    with ctx:
        back = _apply_inplace(m, name, x, others, kw)
    report = [("returns self", back is x),
              ("self meta", (tuple(x.shape), str(x.dtype).split(".")[-1], _strides(x),
                             x.requires_grad)),
              ("self", x.detach().numpy().copy()),
              ("root", root.detach().numpy().copy())]
    if kind in ("nonleaf", "view_nonleaf") and floating and root.requires_grad:
        up = m.tensor(np.random.default_rng(case["seed"] + 1).standard_normal(
            tuple(root.shape))).to(root.dtype)
        loss = (root * up).sum()
        if loss.dtype.is_complex:
            loss = loss.real
        leaves = [leaf] + [o for o in others if o.requires_grad]
        grads = m.autograd.grad(loss, leaves, allow_unused=True)
        # (force: torch's sgn_ gradient is an efficient ZeroTensor, which numpy() refuses)
        report += [(f"grad[{i}]", None if g is None else g.numpy(force=True))
                   for i, g in enumerate(grads)]
    return report


def _apply_inplace(m, name, x, others, kw):
    if name in ("mul_s", "add_s", "div_s", "pow_s"):
        return getattr(x, name[:-2] + "_")(2.5 if name != "pow_s" else 2)
    if name == "div_floor_":
        return x.div_(*others, rounding_mode="floor")
    if name == "clamp_":
        return x.clamp_(*others) if others else x.clamp_(min=-0.5, max=0.5)
    if name == "fill_":
        return x.fill_(1.5)
    if name == "masked_fill_":
        return x.masked_fill_(m.tensor(_values({"seed": 3}, 0, tuple(x.shape), "bool")), 2.5)
    if name == "masked_scatter_":
        mask = m.tensor(_values({"seed": 3}, 0, tuple(x.shape), "bool"))
        return x.masked_scatter_(mask, m.arange(x.numel()).to(m.float64).reshape(x.shape))
    if name == "index_fill_":
        return x.index_fill_(kw.get("dim", 0), m.tensor([0]), -1.5)
    if name == "addcmul_":
        return x.addcmul_(*others, value=2)
    if name == "addcdiv_":
        return x.addcdiv_(*others, value=0.5)
    if name in ("cumsum_", "unsqueeze_"):
        return getattr(x, name)(kw.get("dim", 0))
    if name == "squeeze_":
        return x.squeeze_(**kw)
    if name == "nan_to_num_":
        return x.nan_to_num_(posinf=9.0)
    if name == "lerp_s_":
        return x.lerp_(*others, 0.25)
    return getattr(x, name)(*others)


# torch's own results that are wrong (or undefined) for the case: seed -> why
KNOWN = {
    **dict.fromkeys([975, 5893], "torch's matmul of a batch by a vector into a transposed out "
                    "folds the batch wrongly and raises a size mismatch"),
    11606866: "torch's cat along dim 1 of one (1, 1) tensor into a (1, 1) view of stride (3, 2) "
              "(hstack's) writes nothing: out keeps its old values (cat along dim 0, or of "
              "(2, 2) into such a view, writes); flowgrad writes the result",
}
# flowgrad's differences left open: seed -> what
# (4173, logsumexp of integers into a complex128 out, left NumPy's float32 exp(-1) 0.7 ulp
# off torch's: a case of integers is now compared at float32 tolerance, as it computes there)
OPEN = {}


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    both = fuzz_common.run_both(_run, case)
    if not isinstance(both, tuple):
        return both
    want, got = both
    if [w for w, _ in want] != [g for g, _ in got]:
        return f"reports differ: flowgrad {[g for g, _ in got]}, torch {[w for w, _ in want]}"
    arrays = []
    for (what, t), (_, f) in zip(want, got):
        if isinstance(t, np.ndarray) or isinstance(f, np.ndarray):
            arrays.append((what, f, t))
        elif t != f:
            return f"{what}: flowgrad {f}, torch {t}"
    # (a float32 operand rounds a float64 result's gradient too: torch's atan2_/pow_ rules
    # compute parts of a float64 self's gradient in float32; and a floating op of integers
    # computes in float32 whatever out's dtype, where torch's cos is 1 ulp off NumPy's)
    float32 = any(t is not None and t.dtype in (np.float32, np.complex64) for _, _, t in arrays) \
        or any(d in ("float32", "complex64") or d.startswith(("int", "uint", "bool"))
               for d in case["dtypes"])
    return fuzz_common.first_difference(arrays, 1e-5 if float32 else RTOL)


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
