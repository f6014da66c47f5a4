"""Every elementwise op at the special points of floating arithmetic, against torch.

Unary ops (math, activations, torch.special) run on a vector holding nan, +-inf, +-0, +-1,
+-0.5, +-2, tiny and huge values, values on activation boundaries (+-1 for hardtanh, 3 for
relu6, ...) and large arguments of exp-like functions; binary ops on every pair of a smaller
such set. In float64 and float32 the value must match torch's (nan where torch's is nan, the
same infinities, equal elsewhere to a few ulps) and so must the gradient for an upstream of
ones, which is where rules at kinks (0 for relu and abs, boundaries for clamp, ties for
maximum) and at singular points show.

    .venv/bin/python tests/special_values_vs_torch.py          # every op, differences listed
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import torch

import flowgrad as flow

POINTS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0,
          6.0, 1e-30, -1e-30, 1e30, -1e30, 20.0, -20.0, 100.0, -100.0, 0.9999, 1.0001]
PAIR_POINTS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0]

UNARY = ["abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
         "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
         "atanh", "sigmoid", "erf", "erfc", "erfinv", "lgamma", "digamma", "sign",
         "floor", "ceil", "round", "trunc", "frac", "reciprocal", "square", "deg2rad",
         "rad2deg", "sinc", "logit", "i0", "nan_to_num", "positive", "relu", "signbit",
         "isnan", "isinf", "isfinite", "isposinf", "isneginf", "fix", "angle",
         "F.relu6", "F.elu", "F.selu", "F.celu", "F.gelu", "F.gelu_tanh", "F.silu", "F.mish",
         "F.softplus", "F.softsign", "F.hardtanh", "F.hardsigmoid", "F.hardswish",
         "F.leaky_relu", "F.logsigmoid", "F.tanhshrink", "F.softshrink", "F.hardshrink",
         "F.rrelu_eval", "special.expit", "special.ndtr", "special.ndtri", "special.log_ndtr",
         "special.erfcx", "special.i0e", "special.i1", "special.i1e", "special.entr",
         "special.sinc", "special.xlog1py_1", "special.logit_eps"]
BINARY = ["add", "sub", "mul", "div", "div_floor", "div_trunc", "pow", "atan2", "fmod",
          "remainder", "maximum", "minimum", "fmax", "fmin", "hypot", "copysign", "xlogy",
          "floor_divide", "logaddexp", "logaddexp2", "heaviside", "nextafter", "special.xlog1py",
          "special.zeta", "clamp_tensor", "eq", "lt", "ge", "ne", "float_power"]


def _unary_fn(m, name):
    if name == "F.gelu_tanh":
        return lambda x: m.nn.functional.gelu(x, approximate="tanh")
    if name == "F.rrelu_eval":
        return lambda x: m.nn.functional.rrelu(x, training=False)
    if name == "special.xlog1py_1":
        return lambda x: m.special.xlog1py(x, m.ones_like(x))
    if name == "special.logit_eps":
        return lambda x: m.special.logit(x, eps=1e-6)
    if name == "nan_to_num":
        return lambda x: m.nan_to_num(x, nan=0.5, posinf=7.0, neginf=-7.0)
    if name.startswith("F."):
        return getattr(m.nn.functional, name[2:])
    if name.startswith("special."):
        return getattr(m.special, name[8:])
    return getattr(m, name)


def _binary_fn(m, name):
    if name == "div_floor":
        return lambda a, b: m.div(a, b, rounding_mode="floor")
    if name == "div_trunc":
        return lambda a, b: m.div(a, b, rounding_mode="trunc")
    if name == "clamp_tensor":
        return lambda a, b: m.clamp(a, min=b, max=b + 1.0)
    if name.startswith("special."):
        return getattr(m.special, name[8:])
    return getattr(m, name)


NO_DERIVATIVE = {"floor_divide"}  # torch has none: values only


def _run(m, fn, arrays, dtype, grad=True):
    ts = [m.tensor(a.astype(dtype), requires_grad=grad) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(*ts)
        grads = None
        if grad and out.dtype.is_floating_point and out.requires_grad:
            grads = m.autograd.grad(out.sum(), ts, allow_unused=True)
            grads = [None if g is None else g.detach().numpy() for g in grads]
    return out.detach().numpy(), grads


def _same(a, b, dtype):
    """Values equal as torch's: nan where nan, the same infinities, close elsewhere."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "biu":
        return np.array_equal(a, b)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    finite = np.isfinite(b)
    if not np.array_equal(a[~finite & ~np.isnan(b)], b[~finite & ~np.isnan(b)]):
        return False
    tol = 1e-12 if dtype == np.float64 else 2e-6
    return bool(np.all(np.abs(a[finite] - b[finite]) <= tol * np.maximum(1, np.abs(b[finite]))))


def compare(kind, name, dtype):
    """None when flowgrad matches torch, else a message naming the points that differ."""
    with np.errstate(all="ignore"):
        return _compare(kind, name, dtype)


def _compare(kind, name, dtype):
    if kind == "unary":
        arrays = [np.array(POINTS)]
        fns = _unary_fn(torch, name), _unary_fn(flow, name)
    else:
        a, b = np.meshgrid(PAIR_POINTS, PAIR_POINTS, indexing="ij")
        arrays = [a.ravel(), b.ravel()]
        fns = _binary_fn(torch, name), _binary_fn(flow, name)
    grad = name not in NO_DERIVATIVE
    try:
        want = _run(torch, fns[0], arrays, dtype, grad)
    except (RuntimeError, TypeError, NotImplementedError) as e:
        want = e
    try:
        got = _run(flow, fns[1], arrays, dtype, grad)
    except Exception as e:
        got = e
    if isinstance(want, Exception) or isinstance(got, Exception):
        if isinstance(want, Exception) and isinstance(got, Exception):
            return None
        return f"raises: torch {want!r:.120}, flowgrad {got!r:.120}"
    (vt, gt), (vf, gf) = want, got
    problems = []
    if not _same(vf, vt, dtype):
        problems.append(("value", vf, vt))
    for i, (x, y) in enumerate(zip(gf or [], gt or [])):
        if (x is None) != (y is None):
            if not np.all(np.nan_to_num(x if x is not None else y) == 0):
                problems.append((f"grad {i}", x, y))
        elif x is not None and not _same(x, y, dtype):
            problems.append((f"grad {i}", x, y))
    if (gf is None) != (gt is None):
        problems.append(("grad", gf, gt))
    if not problems:
        return None
    out = []
    for what, x, y in problems:
        if x is None or y is None or not hasattr(x, "shape") or x.shape != y.shape:
            out.append(f"{what}: flowgrad {x!r:.100} torch {y!r:.100}")
            continue
        bad = ~((np.isnan(x) & np.isnan(y)) | (x == y) |
                (np.abs(x - y) <= (1e-12 if dtype == np.float64 else 2e-6) *
                 np.maximum(1, np.abs(np.nan_to_num(y)))))
        at = [tuple(float(a[j]) for a in arrays) for j in np.flatnonzero(bad)[:6]]
        out.append(f"{what} at {at}: flowgrad {x[bad][:6].tolist()} torch {y[bad][:6].tolist()}")
    return "; ".join(out)


def all_differences():
    """{(kind, name, dtype): message} over every op and dtype."""
    found = {}
    for dtype in (np.float64, np.float32):
        for kind, names in (("unary", UNARY), ("binary", BINARY)):
            for name in names:
                msg = compare(kind, name, dtype)
                if msg:
                    found[(kind, name, np.dtype(dtype).name)] = msg
    return found


if __name__ == "__main__":
    diffs = all_differences()
    for key, msg in diffs.items():
        print(key, msg[:400])
    print(f"{len(diffs)} differ")
    sys.exit(1 if diffs else 0)
