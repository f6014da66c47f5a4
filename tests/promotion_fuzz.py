"""Differential fuzzing of type promotion: random binary and ternary elementwise calls run in
torch and in flowgrad.

A seed draws an op (add/sub/mul, div with each rounding_mode, true_divide, floor_divide,
remainder, fmod, pow, atan2, maximum/minimum/fmax/fmin, the comparisons, logical_* and
bitwise_*, hypot, copysign, nextafter, xlogy, ldexp, where, lerp, addcmul/addcdiv, clamp with
tensor or number bounds), operands of any two of the twelve dtypes (bool, the five integers,
float16, bfloat16, float32, float64, complex64, complex128) and kinds (n-d tensor, 0-d tensor,
Python bool/int/float/complex, NumPy scalar) in either order, and a form: the function, the
method, the operator (`a + b`, `a / b`), `out=` a tensor of a random dtype, the in-place
method (`a.add_(b)`) or operator (`a += b`); now and then under set_default_dtype(float64).
Other seeds ask result_type, promote_types or can_cast. Both must raise (the same exception
type) or neither; then the results' dtypes and shapes must agree, integers and bools exactly,
floats bit for bit (signed zeros and nans included) where both compute one correctly rounded
operation, else within ULPS[op] units in the last place of the result dtype (the reason by
each entry).

The integer arithmetic itself (overflow, division by zero, shifts, gcd) is
tests/integer_fuzz.py's.

    .venv/bin/python tests/promotion_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/promotion_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import copy
import random
import warnings

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]
SHAPES = [(3,), (2, 3), (1, 3), (2, 1)]
PY_SCALARS = [True, False, 0, 2, -3, 7, 0.5, -1.5, 2.0, 1e-3, 1 + 2j, -0.5j, 2 + 0j, 300, 2 ** 40,
              1e300, float("inf"), float("nan"), -0.0]
NP_SCALARS = [("float32", 1.5), ("float64", -2.5), ("int64", 3), ("int8", -2),
              ("float16", 0.5), ("uint8", 200), ("int32", 5), ("complex128", 1 - 1j)]
# NumPy bool scalars are drawn too (_operand): torch reads a numpy.bool_ as a float (int8
# tensor * np.True_ is float32, uint8 %= np.True_ raises), and so does flowgrad
# (dtypes.scalar_value).
# NOT DRAWN: NumPy complex64 scalars. torch reads a numpy.complex64 as a real number, dropping
# the imaginary part with a ComplexWarning (t + np.complex64(1j) is t); flowgrad takes it as
# Python's complex, as NumPy does

# ulps of the result dtype two libraries' kernels may differ by, and why (every other op is
# one correctly rounded operation: bit for bit)
ULPS = {
    "pow": (2, "libm's pow against a vectorized one; float16 through float32"),
    "complex pow": (1024, "torch's complex pow is exp(y log x), whose error grows with "
                          "|y log x| (up to 700 in float64's range; (1e-6j) ** -3 is 30 ulps "
                          "off); NumPy's multiplies for integer exponents"),
    "atan2": (2, "libm against SLEEF's vectorized atan2"),
    "hypot": (2, "libm against SLEEF's vectorized hypot"),
    "xlogy": (2, "x * log(y): two roundings, log from different libraries"),
    "lerp": (2, "torch's weight < 0.5 split with an fma where the CPU has one"),
    "addcmul": (2, "self + value * t1 * t2: three roundings, an fma in torch's kernel"),
    "addcdiv": (2, "self + value * t1 / t2: three roundings, an fma in torch's kernel"),
    "complex": (4, "a complex product or quotient is several roundings, in each library's "
                   "own order (torch's vectorized kernels against NumPy's)"),
    "div_scalar_half": (1, "a half tensor by a number: torch divides in float32 by the "
                           "unrounded number"),
}

BINARY = {
    "add": lambda m, a, b: m.add(a, b), "sub": lambda m, a, b: m.sub(a, b),
    "mul": lambda m, a, b: m.mul(a, b), "div": lambda m, a, b: m.div(a, b),
    "div_trunc": lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
    "true_divide": lambda m, a, b: m.true_divide(a, b),
    "floor_divide": lambda m, a, b: m.floor_divide(a, b),
    "remainder": lambda m, a, b: m.remainder(a, b), "fmod": lambda m, a, b: m.fmod(a, b),
    "pow": lambda m, a, b: m.pow(a, b), "atan2": lambda m, a, b: m.atan2(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b), "minimum": lambda m, a, b: m.minimum(a, b),
    "fmax": lambda m, a, b: m.fmax(a, b), "fmin": lambda m, a, b: m.fmin(a, b),
    "eq": lambda m, a, b: m.eq(a, b), "ne": lambda m, a, b: m.ne(a, b),
    "lt": lambda m, a, b: m.lt(a, b), "le": lambda m, a, b: m.le(a, b),
    "gt": lambda m, a, b: m.gt(a, b), "ge": lambda m, a, b: m.ge(a, b),
    "logical_and": lambda m, a, b: m.logical_and(a, b),
    "logical_or": lambda m, a, b: m.logical_or(a, b),
    "logical_xor": lambda m, a, b: m.logical_xor(a, b),
    "bitwise_and": lambda m, a, b: m.bitwise_and(a, b),
    "bitwise_or": lambda m, a, b: m.bitwise_or(a, b),
    "bitwise_xor": lambda m, a, b: m.bitwise_xor(a, b),
    "hypot": lambda m, a, b: m.hypot(a, b), "copysign": lambda m, a, b: m.copysign(a, b),
    "nextafter": lambda m, a, b: m.nextafter(a, b), "xlogy": lambda m, a, b: m.xlogy(a, b),
    "ldexp": lambda m, a, b: m.ldexp(a, b),
}
# name -> (method name, keyword arguments): the method, in-place and out= forms
_SPELL = {"div_trunc": ("div", {"rounding_mode": "trunc"}),
          "div_floor": ("div", {"rounding_mode": "floor"})}
OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floor_divide": "//",
             "remainder": "%", "pow": "**", "bitwise_and": "&", "bitwise_or": "|",
             "bitwise_xor": "^", "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">",
             "ge": ">="}
_DUNDER = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod",
           "**": "pow", "&": "and", "|": "or", "^": "xor"}
_INT_DIVISIONS = {"div", "div_trunc", "div_floor", "true_divide", "floor_divide", "remainder",
                  "fmod"}
TERNARY = ["where", "lerp", "addcmul", "addcdiv", "clamp"]


def _values(r, dtype, n):
    if dtype == "bool":
        return [r.random() < 0.5 for _ in range(n)]
    if dtype in ("uint8", "int8", "int16", "int32", "int64"):
        info = np.iinfo(dtype)
        return [r.choice([0, 1, 2, 3, 5, 100, int(info.max)]) if dtype == "uint8" else
                r.choice([0, 1, 2, -1, -3, 5, 100, int(info.max), int(info.min)])
                for _ in range(n)]
    pool = [0.0, -0.0, 1.5, -2.25, 3.0, 0.1, -7.0, 1000.5, 2.0 ** -20, float("inf"),
            float("nan"), -1.0]
    if dtype.startswith("complex"):
        return [complex(r.choice(pool), r.choice(pool[:9])) for _ in range(n)]
    return [r.choice(pool) for _ in range(n)]


def _operand(r, tensor_only=False):
    """('t', dtype, shape, values): a tensor (shape () a 0-d one); ('py', value): a Python
    number; ('np', dtype, value): a NumPy scalar."""
    k = r.random()
    if tensor_only or k < 0.6:
        dtype = r.choice(DTYPES)
        shape = r.choice(SHAPES) if tensor_only or k < 0.45 else ()
        return ("t", dtype, shape, _values(r, dtype, int(np.prod(shape))))
    if k < 0.85:
        return ("py", r.choice(PY_SCALARS))
    scalar = r.choice(NP_SCALARS)  # (drawn for a bool too: the seeds' later draws stay)
    if k > 0.97:  # (k decides: a bool in place of a NumPy scalar of the seeds before bools)
        return ("np", "bool", k > 0.985)
    return ("np",) + scalar


def _make(m, op):
    if op[0] == "py":
        return op[1]
    if op[0] == "np":
        return np.dtype(op[1]).type(op[2])
    _, dtype, shape, vals = op
    if dtype == "bfloat16":
        return m.tensor(np.array(vals, dtype=np.float32).reshape(shape)).to(m.bfloat16)
    return m.tensor(np.array(vals, dtype=dtype).reshape(shape))


class Case:
    """One call drawn from a seed: `kind` one of binary, ternary, result_type, promote_types,
    can_cast; `form` how it is spelled (function, method, operator, out, inplace, ioperator)."""

    def __init__(self, seed):
        r = random.Random(seed)
        self.default64 = r.random() < 0.2
        self.out_dtype = None
        k = r.random()
        if k < 0.08:
            self.kind, self.name, self.form = "result_type", "result_type", "function"
            self.args = [_operand(r), _operand(r)]
            return
        if k < 0.12:
            self.kind, self.name, self.form = r.choice(["promote_types", "can_cast"]), "", ""
            self.name = self.kind
            self.args = [r.choice(DTYPES), r.choice(DTYPES)]
            return
        if k < 0.8:
            self.kind, self.name = "binary", r.choice(sorted(BINARY))
            self.args = [_operand(r), _operand(r)]
            forms = ["function", "function", "method", "out", "inplace"]
            if self.name in OPERATORS:
                forms += ["operator", "operator"] + (
                    ["ioperator"] if self.name not in ("eq", "ne", "lt", "le", "gt", "ge")
                    else [])
        else:
            self.kind, self.name = "ternary", r.choice(TERNARY)
            self.args = [_operand(r) for _ in range(3)]
            if not any(a[0] == "t" for a in self.args):  # (torch takes no three numbers)
                self.args[0] = _operand(r, tensor_only=True)
            if self.name == "where":
                self.args[0] = ("t", "bool", r.choice(SHAPES),
                                [r.random() < 0.5 for _ in range(6)])
                self.args[0] = self.args[0][:3] + (
                    self.args[0][3][:int(np.prod(self.args[0][2]))],)
            if self.name in ("addcmul", "addcdiv"):
                self.value = r.choice([1, 2, 0.5, -1.5, True, 1j])
            forms = ["function", "method", "out"] + (["inplace"] if self.name != "where" else [])
        self.form = r.choice(forms)
        if self.name == "ldexp":  # NOT DRAWN: an int64 exponent beyond int32, which torch's
            # kernel casts to C int (ldexp(1.5, 2**63 - 1) is 0.75 there)
            self.args[1] = self.args[1][:3] + ([max(-2 ** 31, min(v, 2 ** 31 - 1)) for v in
                                                self.args[1][3]],) \
                if self.args[1][0] == "t" and self.args[1][1] == "int64" else self.args[1]
        if self.form in ("method", "inplace", "ioperator") and self.args[0][0] != "t" or \
                self.form == "operator" and all(a[0] != "t" for a in self.args):
            # (two numbers under an operator are Python's arithmetic: 2 ** 40 ** 2 ** 40)
            self.args[0] = _operand(r, tensor_only=True)
        if self.form == "out":
            self.out_dtype = r.choice(DTYPES)
        if self.name in _INT_DIVISIONS:  # NOT DRAWN: the int32/int64 minimum divided by a
            # 0-d -1: torch's scalar path divides in C and the process dies of SIGFPE (the
            # minimum's division is tests/integer_fuzz.py's, which avoids it likewise)
            self.args = [a[:3] + ([v + 1 if a[1] in ("int32", "int64") and
                                   v == np.iinfo(a[1]).min else v for v in a[3]],)
                         if a[0] == "t" else a for a in self.args]
        if self.name == "copysign":  # the sign of a nan: torch's float32 -> bfloat16 cast of
            # nan sets it (signbit(nan) is True there), ml_dtypes' does not; IEEE leaves it open
            self.args = [a[:3] + ([-np.inf if v != v else v for v in a[3]],) if a[0] == "t"
                         else a for a in self.args]

    def describe(self):
        extra = f" out={self.out_dtype}" if self.out_dtype else ""
        extra += f" value={self.value}" if hasattr(self, "value") else ""
        extra += " default float64" if self.default64 else ""
        return f"{self.form} {self.name}{tuple(self.args)}{extra}"

    def run(self, m):
        """The result (a tensor, a dtype, or a bool), and for in-place and out= forms whether
        it is the written tensor."""
        if self.kind in ("promote_types", "can_cast"):
            return getattr(m, self.kind)(*(getattr(m, d) for d in self.args))
        args = [_make(m, a) for a in self.args]
        if self.kind == "result_type":
            return m.result_type(*args)
        if self.kind == "binary":
            return self._binary(m, args)
        return self._ternary(m, args)

    def _binary(self, m, args):
        a, b = args
        method, kw = _SPELL.get(self.name, (self.name, {}))
        if self.form == "function":
            return BINARY[self.name](m, a, b)
        if self.form == "method":
            return getattr(a, method)(b, **kw)
        if self.form == "out":
            out = m.empty(0, dtype=getattr(m, self.out_dtype))
            return getattr(m, method)(a, b, out=out, **kw), out
        if self.form == "inplace":
            return getattr(a, method + "_")(b, **kw), a
        sym = OPERATORS[self.name]
        if self.form == "operator":
            return eval(f"a {sym} b")
        return getattr(a, f"__i{_DUNDER[sym]}__")(b), a

    def _ternary(self, m, args):
        a, b, c = args
        kw = {"value": self.value} if hasattr(self, "value") else {}
        if self.name == "clamp":
            kw, args = {"min": b, "max": c}, [a]
        suffix = "_" if self.form == "inplace" else ""
        if self.form in ("method", "inplace"):
            res = getattr(args[0], self.name + suffix)(*args[1:], **kw)
            return (res, args[0]) if suffix else res
        if self.form == "out":
            out = m.empty(0, dtype=getattr(m, self.out_dtype))
            return getattr(m, self.name)(*args, out=out, **kw), out
        return getattr(m, self.name)(*args, **kw)


class Call:
    """One fixed call `fn(module)` compared as a fuzz case (the regression tests' cases):
    `name` picks its tolerance (ULPS), `default64` runs it under set_default_dtype(float64)."""

    kind, form, out_dtype = "call", "function", None

    def __init__(self, name, fn, default64=False):
        self.name, self.fn, self.default64 = name, fn, default64
        self.args = ()

    def run(self, m):
        return self.fn(m)


def _array(t):
    """A tensor's values as a NumPy array holding them exactly (bfloat16 and float16 widened
    to float64), with its dtype name."""
    name = str(t.dtype).split(".")[-1]
    t = t.detach()
    if name == "complex32":  # (torch's only: a KNOWN difference)
        return name, None
    if name in ("float16", "bfloat16"):
        t = t.to(torch.float64 if isinstance(t, torch.Tensor) else flow.float64)
    return name, t.numpy().copy()


def _outcome(m, case):
    old = m.get_default_dtype()
    try:
        if case.default64:
            m.set_default_dtype(m.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = case.run(m)
    except Exception as e:  # noqa: BLE001 - the exception's type is the verdict
        return ("raise", type(e), str(e))
    finally:
        m.set_default_dtype(old)
    if isinstance(res, tuple):
        res, written = res
        return ("ok", _array(res), res is written)
    if isinstance(res, (bool, np.bool_)):
        return ("ok", ("bool", np.array(res)), None)
    if not hasattr(res, "numpy"):  # a dtype
        return ("ok", ("dtype", str(res).split(".")[-1]), None)
    return ("ok", _array(res), None)


def _ulps(a, b, dtype):
    """The largest distance of `a` from `b` in ulps of `dtype` at |b| (complex: of its real
    dtype at the modulus, each part's error measured against the whole number)."""
    if np.iscomplexobj(b):
        dtype = {"complex64": "float32", "complex128": "float64"}[dtype]
        finite = np.isfinite(a) & np.isfinite(b)
        return _ulps_real(np.abs(a[finite] - b[finite]), np.abs(b[finite]), dtype, offset=False)
    return _ulps_real(a, b, dtype)


def _ulps_real(a, b, dtype, offset=True):
    finite = np.isfinite(b) & np.isfinite(a)
    if not finite.any():
        return 0.0
    if dtype == "bfloat16":
        eps, tiny = 2.0 ** -7, 2.0 ** -126
    else:
        info = np.finfo(dtype)
        eps, tiny = float(info.eps), float(info.tiny)
    bb = np.abs(b[finite]).astype(np.float64)
    ulp = np.maximum(2.0 ** np.floor(np.log2(np.maximum(bb, tiny))) * eps, tiny * eps)
    err = np.abs(a[finite].astype(np.float64) - (b[finite] if offset else 0))
    return float(np.max(err / ulp))


def _bitwise_same(a, b):
    """Real: the same bits (nans anywhere, signed zeros). Complex: the same finite numbers
    (zero signs not compared) and non-finite ones in the same places: which part of an
    inf * finite product holds the nan, and a zero's sign, follow each library's complex
    multiply and divide formula (torch's vectorized ones give (0.1-2.25j) * inf = nan+nanj,
    -0.5j / 2 = 0-0.25j), not promotion."""
    if np.iscomplexobj(b):
        fa, fb = np.isfinite(a), np.isfinite(b)
        return np.array_equal(fa, fb) and np.array_equal(a[fb], b[fb])
    return (np.array_equal(np.isnan(a), np.isnan(b))
            and np.array_equal(np.nan_to_num(a, nan=0.0), np.nan_to_num(b, nan=0.0))
            and np.array_equal(np.signbit(a) | np.isnan(a), np.signbit(b) | np.isnan(b)))


def _tolerance(case, dtype):
    """(ulps, reason) the case's float result may be off by; 0 for bit for bit."""
    if case.name in ("pow", "ldexp") and dtype.startswith("complex"):
        return ULPS["complex pow"]
    if dtype.startswith("complex"):  # (a complex quotient's roundings on top of the op's:
        # addcdiv's 2 ulps then 2.07, seed 11609112)
        return max(ULPS.get(case.name, (0, "")), ULPS["complex"])
    if case.name in ULPS:
        return ULPS[case.name]
    if case.name in ("div", "true_divide") and dtype in ("float16", "bfloat16"):
        return ULPS["div_scalar_half"]
    return 0, ""


# differences that are known, by what torch and flowgrad did: (test, reason)
KNOWN = {
    "number operand": (
        lambda case, want, got: want[0] == "raise" and want[1] is TypeError
        and ("must be Tensor, not" in want[2] or "invalid combination" in want[2])
        and (got[0] == "ok" or issubclass(got[1], RuntimeError)),
        "flowgrad takes a Python or NumPy number where torch's signature insists on a tensor "
        "(lerp's end, copysign's input, where's out= form; kept on purpose, as "
        "test_opinfo_vs_torch.py's _R_SCALAR), and computes, or refuses what follows"),
    "complex32": (
        lambda case, want, got: "ComplexHalf" in str(want[2:]) or "complex32" in str(want[1:]),
        "float16 with a complex 0-d tensor or number is complex32 in torch; flowgrad has no "
        "complex32 and gives complex64"),
    "complex refusal": (
        lambda case, want, got: want[0] == got[0] == "raise" and want[1] is NotImplementedError
        and got[1] is RuntimeError and "not supported for complex" in got[2],
        "flowgrad's one refusal of complex inputs to ops not audited for them is a "
        "RuntimeError (torch's kernels raise NotImplementedError, its subclass, for some: gt, "
        "atan2; RuntimeError for others: max, clamp)"),
    "check order": (
        lambda case, want, got: want[0] == got[0] == "raise" and want[1] is RuntimeError
        and got[1] is NotImplementedError and case.form in ("out", "inplace", "ioperator")
        and ("can't be cast" in want[2] or "doesn't match the broadcast shape" in want[2]),
        "both refuse: torch checks the out/self tensor's shape and dtype before its kernel's "
        "dtype support, flowgrad after"),
    "clamp complex bound": (
        lambda case, want, got: case.name == "clamp" and want[0] == "ok" and got[0] == "raise"
        and any(a[0] == "py" and isinstance(a[1], complex) and a[1].imag == 0
                or a[0] == "t" and a[1].startswith("complex") and a[2] == ()
                and complex(a[3][0]).imag == 0 for a in case.args[1:]),
        "clamp of a floating tensor with a complex bound of imaginary part 0: torch reads it "
        "as a real number (of an integer tensor it refuses it); flowgrad refuses complex "
        "bounds"),
    "clamp nan bound": (
        lambda case, want, got: case.name == "clamp" and want[0] == "ok" and got[0] == "raise"
        and any(a[0] == "py" and a[1] != a[1] for a in case.args[1:]),
        "clamp with a nan bound: torch fills nan before it converts the other bound (1e300 "
        "beside nan is taken); flowgrad converts both"),
    "integer lerp into a float out": (
        lambda case, want, got: case.name == "lerp" and case.form == "out" and want[0] == "ok"
        and got[0] == "raise" and "lerp_kernel" in got[2],
        "lerp of integer tensors with out= a floating tensor: torch computes in out's dtype, "
        "flowgrad refuses integer lerp as torch's function form does"),
    "complex pow at infinities": (
        lambda case, want, got: _pow_infinities(case, want, got),
        "complex pow at infinite bases or exponents: torch's exp(y log x) and NumPy's power "
        "disagree on which of 0, inf and nan (inf ** (-7+0j) is 0 in torch, nan in NumPy); "
        "complex special values are not promotion's"),
    "complex x ** 0": (
        lambda case, want, got: _zero_pow_zero(case, want, got),
        "torch's complex pow is exp(y log x): 0 ** 0 and inf ** 0 are nan; flowgrad's are 1, "
        "as Python's and NumPy's"),
}


def _pow_infinities(case, want, got):
    """Whether complex pow results differ only in which positions are finite."""
    if case.name != "pow" or want[0] != "ok" or got[0] != "ok" or \
            not want[1][0].startswith("complex") or want[1][1].shape != got[1][1].shape:
        return False
    wv, gv = want[1][1], got[1][1]
    both = np.isfinite(wv) & np.isfinite(gv)
    return bool((np.isfinite(wv) != np.isfinite(gv)).any()) and \
        _values_verdict(case, want[1][0], wv[both], gv[both]) is None


def _zero_pow_zero(case, want, got):
    """Whether complex pow results differ only where torch has nan and flowgrad 1 (x ** 0),
    besides what the comparison allows."""
    if case.name != "pow" or want[0] != "ok" or got[0] != "ok" or \
            not want[1][0].startswith("complex") or want[1][1].shape != got[1][1].shape:
        return False
    wv, gv = want[1][1], got[1][1]
    one = np.isnan(wv) & (gv == 1)
    return bool(one.any()) and _values_verdict(case, want[1][0], wv[~one], gv[~one]) is None


def known(case):
    """The KNOWN entry `case`'s difference falls under, or None."""
    want, got = _outcome(torch, case), _outcome(flow, case)
    return next((k for k, (test, _) in KNOWN.items() if test(case, want, got)), None)


def compare(case, allow_known=True):
    """None when flowgrad's outcome of `case` is torch's (or differs as a KNOWN entry says),
    else a message."""
    want, got = _outcome(torch, case), _outcome(flow, case)
    if allow_known and any(test(case, want, got) for test, _ in KNOWN.values()):
        return None
    if want[0] != got[0]:
        return (f"torch {want[0]} {want[1:] if want[0] == 'raise' else want[1][0]}, "
                f"flowgrad {got[0]} {got[1:] if got[0] == 'raise' else got[1][0]}")
    if want[0] == "raise":
        if got[1] is not want[1]:
            return (f"torch raised {want[1].__name__}: {want[2]}; flowgrad "
                    f"{got[1].__name__}: {got[2]}")
        return None
    (wd, wv), (gd, gv) = want[1], got[1]
    if wd != gd:
        return f"result dtype: torch {wd}, flowgrad {gd}"
    if wd == "dtype" or want[2] != got[2]:
        return None if want[2] == got[2] and wv == gv else \
            f"torch {wv} (written {want[2]}), flowgrad {gv} (written {got[2]})"
    if wv.shape != gv.shape:
        return f"shape: torch {wv.shape}, flowgrad {gv.shape}"
    return _values_verdict(case, wd, wv, gv)


def _computed_in(case, dtype):
    """The dtype whose ulps bound the case's error: an `out=` of another dtype holds the
    result of the call without it, cast (atan2 of uint8 into complex128 is a float32 atan2)."""
    if case.form != "out":
        return dtype
    plain = copy.copy(case)
    plain.form, plain.out_dtype = "function", None
    want = _outcome(torch, plain)
    if want[0] != "ok" or want[1][0] not in DTYPES:
        return dtype
    if dtype.startswith("complex") and not want[1][0].startswith("complex"):
        return {"float64": "complex128"}.get(want[1][0], "complex64")
    return want[1][0]


def _values_verdict(case, wd, wv, gv):
    """None when flowgrad's values `gv` are torch's `wv` (of dtype `wd`) as `case` needs."""
    if wv.dtype.kind in "biu":
        return None if np.array_equal(wv, gv) else f"values: torch {wv!r}, flowgrad {gv!r}"
    if case.name in ("maximum", "minimum", "fmax", "fmin", "clamp"):
        # which zero min(-0.0, 0.0) is: IEEE allows either, and torch's own kernels differ
        # (bfloat16 fmin against float32's), as NumPy's SIMD and scalar loops do
        wv, gv = wv + 0.0, gv + 0.0
    if _bitwise_same(gv, wv):
        return None
    ulps, _ = _tolerance(case, wd)
    wd = _computed_in(case, wd)
    specials = (np.array_equal(np.isfinite(gv), np.isfinite(wv)) if wd.startswith("complex")
                else fuzz_common._same_specials(gv, wv))
    if ulps and specials and _ulps(gv, wv, wd) <= ulps:
        return None
    return f"values ({wd}): torch {wv!r}, flowgrad {gv!r}"


def check(seed):
    return compare(Case(seed))


if __name__ == "__main__":
    fuzz_common.main(__doc__, lambda s: Case(s).describe(), check)
