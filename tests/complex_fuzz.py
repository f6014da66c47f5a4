"""Complex inputs against torch: values and gradients of the ops that accept complex tensors.

Gradients of complex functions follow torch's convention (the conjugate Wirtinger derivative
times the upstream gradient); a slip in a rule's conj() gives a plausible wrong number, so
each case draws complex128 inputs (random, and some with real or imaginary parts 0), a
complex upstream gradient, and compares the value and every input's gradient with torch's.
Real x complex mixes and complex -> real ops (abs, angle, real, imag) are included.

    .venv/bin/python tests/complex_fuzz.py            # every op, differences listed
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import torch
from vs_torch import magnitude

import flowgrad as flow

RTOL = 1e-10

UNARY = ["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin",
         "acos", "atan", "asinh", "acosh", "atanh", "sigmoid", "reciprocal", "square", "neg",
         "abs", "angle", "sgn", "conj", "conj_physical", "real", "imag", "log10", "log2",
         "log1p", "expm1", "exp2", "sum", "mean", "prod", "cumsum", "cumprod", "trace", "t",
         "flatten", "flip", "roll", "diag", "tril", "triu", "var", "std", "norm", "logsumexp",
         "linalg.inv", "linalg.det", "linalg.slogdet", "linalg.matrix_exp", "linalg.pinv",
         "linalg.svdvals", "linalg.eigvals", "linalg.vector_norm", "linalg.matrix_norm",
         "view_as_real", "isfinite", "F.normalize", "pow3", "pow_half", "rpow"]
BINARY = ["add", "sub", "mul", "div", "pow", "matmul", "dot", "vdot", "inner", "outer",
          "linalg.solve", "linalg.cross", "kron", "einsum", "where", "lerp", "addcmul",
          "addcdiv", "mul_real", "div_real", "polar", "complex", "cat", "stack",
          "linalg.vecdot", "xlogy_real", "tensordot", "cdist_real"]


def _unary(m, name):
    if name.startswith("linalg."):
        fn = getattr(m.linalg, name[7:])
        return (lambda x: fn(x)[1]) if name == "linalg.slogdet" else fn
    return {
        "F.normalize": lambda x: m.nn.functional.normalize(x, dim=-1),
        "pow3": lambda x: x ** 3, "pow_half": lambda x: x ** 0.5,
        "rpow": lambda x: 2.0 ** x, "sum": lambda x: x.sum(0), "mean": lambda x: x.mean(),
        "prod": lambda x: x.prod(1), "cumsum": lambda x: x.cumsum(0),
        "cumprod": lambda x: x.cumprod(1), "flatten": lambda x: x.flatten(),
        "flip": lambda x: x.flip(0), "roll": lambda x: x.roll(1, 1), "diag": lambda x: x.diag(),
        "var": lambda x: x.var(0), "std": lambda x: x.std(), "norm": lambda x: x.norm(),
        "logsumexp": lambda x: x.logsumexp(1), "t": lambda x: x.t(),
    }.get(name) or getattr(m, name)


def _binary(m, name):
    if name.startswith("linalg."):
        return getattr(m.linalg, name[7:])
    return {
        "einsum": lambda a, b: m.einsum("ij,jk->ik", a, b),
        "where": lambda a, b: m.where(a.real > 0, a, b),
        "lerp": lambda a, b: m.lerp(a, b, 0.3), "addcmul": lambda a, b: m.addcmul(a, a, b),
        "addcdiv": lambda a, b: m.addcdiv(a, a, b),
        "mul_real": lambda a, b: a * b.real, "div_real": lambda a, b: a / (b.abs() + 1),
        "polar": lambda a, b: m.polar(a.abs(), b.real),
        "complex": lambda a, b: m.complex(a.real, b.imag), "cat": lambda a, b: m.cat([a, b]),
        "stack": lambda a, b: m.stack([a, b], 1), "dot": lambda a, b: m.dot(a[0], b[0]),
        "vdot": lambda a, b: m.vdot(a[0], b[0]), "outer": lambda a, b: m.outer(a[0], b[1]),
        "xlogy_real": lambda a, b: m.xlogy(a.real, b.abs()),
        "tensordot": lambda a, b: m.tensordot(a, b, 1),
        "cdist_real": lambda a, b: m.cdist(a.real, b.imag),
        "linalg.cross": lambda a, b: m.linalg.cross(a, b),
    }.get(name) or getattr(m, name)


def _inputs(k, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(k):
        z = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
        if seed % 3 == 1:
            z[0] = z[0].real  # some purely real entries
        if seed % 3 == 2:
            z[1] = 1j * z[1].imag  # some purely imaginary entries
        out.append(z + (2.0 * np.eye(3) if i == 0 else 0))
    return out


def _run(m, fn, arrays, seed):
    ts = [m.tensor(a, requires_grad=True) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(*ts)
        value = out.detach().resolve_conj().numpy() if out.is_complex() else \
            out.detach().numpy()
        if not (out.is_complex() or out.dtype.is_floating_point):
            return value, []
        rng = np.random.default_rng(seed + 99)
        up = rng.standard_normal(tuple(out.shape)) + (
            1j * rng.standard_normal(tuple(out.shape)) if out.is_complex() else 0)
        loss = (out * m.tensor(up)).real.sum() if out.is_complex() else \
            (out * m.tensor(up)).sum()
        grads = m.autograd.grad(loss, ts, allow_unused=True)
    return value, [None if g is None else g.resolve_conj().numpy() for g in grads]


def compare(kind, name, seed):
    """None when flowgrad matches torch on the op, else a message."""
    fns = (_unary(torch, name), _unary(flow, name)) if kind == "unary" else \
        (_binary(torch, name), _binary(flow, name))
    arrays = _inputs(1 if kind == "unary" else 2, seed)
    results = []
    for m, fn in zip((torch, flow), fns):
        try:
            results.append(_run(m, fn, arrays, seed))
        except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:
            results.append(e)
    want, got = results
    if isinstance(want, Exception) or isinstance(got, Exception):
        if isinstance(want, Exception) and isinstance(got, Exception):
            return None
        return f"raises: torch {want!r:.100}; flowgrad {got!r:.100}"
    pairs = [("value", got[0], want[0])] + [(f"grad {i}", a, b)
                                            for i, (a, b) in enumerate(zip(got[1], want[1]))]
    for what, a, b in pairs:
        if a is None or b is None:
            if (a is None) != (b is None):
                return f"{what}: flowgrad {a is not None}, torch {b is not None}"
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{what}: {a.dtype}{a.shape}, torch {b.dtype}{b.shape}"
        if not np.allclose(a, b, rtol=0, atol=RTOL * magnitude(b), equal_nan=True):
            return f"{what} differs by {np.nanmax(np.abs(a - b)):.3g}"
    return None


def all_differences(seeds=(0, 1, 2)):
    found = {}
    for kind, names in (("unary", UNARY), ("binary", BINARY)):
        for name in names:
            for seed in seeds:
                msg = compare(kind, name, seed)
                if msg:
                    found[(kind, name)] = f"seed {seed}: {msg}"
                    break
    return found


if __name__ == "__main__":
    diffs = all_differences()
    for key, msg in diffs.items():
        print(key, msg)
    print(f"{len(diffs)} differ")
    sys.exit(1 if diffs else 0)
