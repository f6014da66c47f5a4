"""Differential fuzzing of integer and bool tensor arithmetic: random short programs run in
torch and in flowgrad.

A seed draws operands (int8/int16/int32/int64/uint8/bool tensors of a few shapes, 0-d ones,
now and then a float tensor or a Python int/float/bool scalar) whose values include each
dtype's limits, zero and -1, then a few ops over them: the arithmetic operators and their
named forms (true division, //, %, fmod, remainder, div with each rounding_mode, pow with
negative and large exponents), neg/abs/sign, bitwise ops and shifts by large and negative
counts, comparisons, min/max/clamp with int and float bounds, reductions and their output
dtypes (sum, prod, cumsum, cumprod, mean), argmax/argmin/sort/topk/unique with ties,
bincount, gcd/lcm, and in-place forms (torch refuses a promoted result it cannot cast
back). Values must agree bit for bit (overflow wraps as torch's), with the same dtypes and
the same refusals (the same exception type).

    .venv/bin/python tests/integer_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/integer_fuzz.py --show 17          # one program and its verdict
"""
from __future__ import annotations

import random

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

INTS = ["int8", "int16", "int32", "int64", "uint8"]
SHAPES = [(), (3,), (2, 3), (1, 3), (2, 1), (0,)]
STEPS = 4


def _values(r, dtype, n):
    if dtype == "bool":
        return [r.random() < 0.5 for _ in range(n)]
    info = np.iinfo(dtype)
    pool = [0, 1, 2, 3, 7, info.max, info.min, info.max - 1]
    if info.min < 0:
        pool += [-1, -2, -7, info.min + 1]
    return [r.choice(pool) if r.random() < 0.5 else r.randint(max(info.min, -9), 9)
            for _ in range(n)]


def _operand(r, allow_scalar=True):
    """('t', dtype, shape, values) or ('s', python value)."""
    k = r.random()
    if allow_scalar and k < 0.15:
        return ("s", r.choice([0, 1, -1, 2, 3, -3, 127, 200, 2 ** 40, -(2 ** 63), 0.5, -1.5,
                               2.0, True, False]))
    dtype = r.choice(INTS + ["bool"]) if k < 0.93 else r.choice(["float32", "float64"])
    shape = r.choice(SHAPES)
    n = int(np.prod(shape))
    if dtype.startswith("float"):
        vals = [r.choice([0.0, -0.0, 1.5, -2.5, 3.0, 1e10, float("inf")]) for _ in range(n)]
    else:
        vals = _values(r, dtype, n)
    return ("t", dtype, shape, vals)


def _make(m, op):
    if op[0] == "s":
        return op[1]
    _, dtype, shape, vals = op
    return m.tensor(np.array(vals, dtype=dtype).reshape(shape))


def _no_c_overflow(op):
    """An lcm (or scalar division) operand without the int32/int64 minimum: torch's calc_lcm
    divides it by a gcd of -1 in C (lcm(-2**31, 2**31 - 1)), and the process dies of SIGFPE
    (NOT_DRAWN)."""
    if op[0] != "t" or op[1] not in ("int32", "int64"):
        return op
    low = int(np.iinfo(op[1]).min)
    return op[:3] + ([v + 1 if v == low else v for v in op[3]],)


def _topk(x):
    """topk's values, and the elements its indices pick: which of tied elements torch's
    partial sort picks is unspecified (it took index 1 of [7, 7, 5], flowgrad 0)."""
    values, indices = x.topk(min(2, x.numel()))
    return values, x[indices]


# an integer division with the int32/int64 minimum dividing by -1: torch's scalar path (and
# its path for a broadcast divisor of another dtype) divides in C and the process dies of
# SIGFPE (div(-2**63, tensor([-1]), rounding_mode="trunc"), tensor([-2**63]) // -1; NOT_DRAWN)
_DIVISIONS = {"floordiv", "mod", "fmod", "remainder", "floor_divide", "div_trunc", "div_floor"}


def _no_scalar_overflow(op):
    if op[0] == "s":
        return ("s", 1 - 2 ** 63) if op[1] == -(2 ** 63) else op
    return _no_c_overflow(op)


BINARY = {
    "add": lambda m, a, b: a + b, "sub": lambda m, a, b: a - b, "mul": lambda m, a, b: a * b,
    "truediv": lambda m, a, b: a / b, "floordiv": lambda m, a, b: a // b,
    "mod": lambda m, a, b: a % b, "pow": lambda m, a, b: a ** b,
    "fmod": lambda m, a, b: m.fmod(a, b), "remainder": lambda m, a, b: m.remainder(a, b),
    "floor_divide": lambda m, a, b: m.floor_divide(a, b),
    "div_trunc": lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
    "div_none": lambda m, a, b: m.div(a, b, rounding_mode=None),
    "and": lambda m, a, b: a & b, "or": lambda m, a, b: a | b, "xor": lambda m, a, b: a ^ b,
    "lshift": lambda m, a, b: a << b, "rshift": lambda m, a, b: a >> b,
    "lt": lambda m, a, b: a < b, "le": lambda m, a, b: a <= b, "eq": lambda m, a, b: a == b,
    "ne": lambda m, a, b: a != b, "gt": lambda m, a, b: a > b, "ge": lambda m, a, b: a >= b,
    "maximum": lambda m, a, b: m.maximum(a, b), "minimum": lambda m, a, b: m.minimum(a, b),
    "gcd": lambda m, a, b: m.gcd(a, b), "lcm": lambda m, a, b: m.lcm(a, b),
    "clamp_min": lambda m, a, b: m.clamp(a, min=b), "clamp_max": lambda m, a, b: m.clamp(a, max=b),
    "bitwise_left_shift": lambda m, a, b: m.bitwise_left_shift(a, b),
    "bitwise_right_shift": lambda m, a, b: m.bitwise_right_shift(a, b),
}
INPLACE = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
           "lshift", "rshift"]
_IOP = {"add": "__iadd__", "sub": "__isub__", "mul": "__imul__", "truediv": "__itruediv__",
        "floordiv": "__ifloordiv__", "mod": "__imod__", "pow": "__ipow__", "and": "__iand__",
        "or": "__ior__", "xor": "__ixor__", "lshift": "__ilshift__", "rshift": "__irshift__"}
UNARY = {
    "neg": lambda m, a: -a, "abs": lambda m, a: a.abs(), "sign": lambda m, a: a.sign(),
    "not": lambda m, a: ~a, "sum": lambda m, a: a.sum(), "sum0": lambda m, a: a.sum(0),
    "prod": lambda m, a: a.prod(), "cumsum": lambda m, a: a.cumsum(0),
    "cumprod": lambda m, a: a.cumprod(0), "mean": lambda m, a: a.mean(),
    "argmax": lambda m, a: a.argmax(), "argmin": lambda m, a: a.argmin(),
    "argmax0": lambda m, a: a.argmax(0), "max": lambda m, a: a.max(),
    "min": lambda m, a: a.min(), "amax0": lambda m, a: a.amax(0),
    "sort": lambda m, a: a.sort(stable=True), "sort_desc": lambda m, a: a.sort(
        descending=True, stable=True), "argsort": lambda m, a: a.argsort(stable=True),
    "topk": lambda m, a: _topk(a.flatten()), "unique": lambda m, a: m.unique(
        a, return_inverse=True, return_counts=True),
    "bincount": lambda m, a: m.bincount(a.flatten()),
    "clamp_if": lambda m, a: a.clamp(-3, 5), "clamp_ff": lambda m, a: a.clamp(-2.5, 4.5),
    "neg_": lambda m, a: a.neg_(), "abs_": lambda m, a: a.abs_(),
    "sqrt": lambda m, a: a.sqrt(), "float": lambda m, a: a.float(),
    "square": lambda m, a: a.square(), "bool": lambda m, a: a.bool(),
}


class Program:
    def __init__(self, seed):
        r = random.Random(seed)
        self.steps = []
        for _ in range(STEPS):
            kind = r.random()
            if kind < 0.55:
                name = r.choice(sorted(BINARY))
                a, b = _operand(r, allow_scalar=r.random() < 0.3), _operand(r)
                if a[0] == b[0] == "s":  # (pow(2**40, 2**40) of two numbers never ends)
                    b = _operand(r, allow_scalar=False)
                if name == "lcm":
                    a, b = _no_c_overflow(a), _no_c_overflow(b)
                if name in _DIVISIONS:  # (two tensors too: int32 -2**31 by an int16 -1
                    # broadcast, seed 9414819, killed torch's process)
                    a, b = _no_scalar_overflow(a), _no_scalar_overflow(b)
                if name == "fmod" and a[0] == "s":  # (flowgrad takes it on purpose: NOT_DRAWN)
                    a = _operand(r, allow_scalar=False)
                self.steps.append(("bin", name, a, b))
            elif kind < 0.7:
                name = r.choice(INPLACE)
                a, b = _operand(r, False), _operand(r)
                if name in _DIVISIONS:
                    a, b = _no_scalar_overflow(a), _no_scalar_overflow(b)
                self.steps.append(("inplace", name, a, b))
            else:
                name, a = r.choice(sorted(UNARY)), _operand(r, False)
                if name == "bincount":  # (a count per value up to the maximum: 2**31 of them
                    a = a[:3] + ([min(v, 100) for v in a[3]],)  # take 16 GiB; NOT_DRAWN)
                self.steps.append(("un", name, a, None))

    def describe(self):
        return "; ".join(f"{k} {n}({a}, {b})" for k, n, a, b in self.steps)


def _arrays(res):
    if isinstance(res, (tuple, list)):
        return [x for r in res for x in _arrays(r)]
    if isinstance(res, (bool, int, float)):
        return [np.array(res)]
    return [res.numpy().copy()]


def _run_step(m, step):
    kind, name, a, b = step
    x = _make(m, a)
    if kind == "un":
        return UNARY[name](m, x)
    y = _make(m, b)
    if kind == "bin":
        return BINARY[name](m, x, y)
    out = getattr(x, _IOP[name])(y)
    return (out, x)


def _outcome(m, run):
    try:
        return ("ok", _arrays(run(m)))
    except Exception as e:
        return ("raise", type(e), str(e))


def compare(run):
    """The verdict of `run(module)` in torch and flowgrad: None when both raise the same
    exception type, or both return the same arrays (dtypes, shapes, integers bit for bit)."""
    want = _outcome(torch, run)
    got = _outcome(flow, run)
    if want[0] != got[0]:
        return (f"torch {want[0]} {want[1:] if want[0] == 'raise' else ''}, "
                f"flowgrad {got[0]} {got[1:] if got[0] == 'raise' else ''}")
    if want[0] == "raise":
        if got[1] is not want[1]:  # (ZeroDivisionError and RuntimeError apart)
            return (f"torch raised {want[1].__name__}: {want[2]}; "
                    f"flowgrad {got[1].__name__}: {got[2]}")
        return None
    if len(want[1]) != len(got[1]):
        return f"torch {len(want[1])} results, flowgrad {len(got[1])}"
    pairs = [(f"result {i}", g, w) for i, (g, w) in enumerate(zip(got[1], want[1]))]
    return fuzz_common.first_difference(pairs, rtol=1e-6)


def check_step(step):
    return compare(lambda m: _run_step(m, step))


def check(seed):
    for step in Program(seed).steps:
        verdict = check_step(step)
        if verdict:
            kind, name, a, b = step
            return f"{kind} {name}({a}, {b}): {verdict}"
    return None


if __name__ == "__main__":
    fuzz_common.main(__doc__, lambda s: Program(s).describe(), check)
