"""Differential fuzzing of tensor printing: random tensors printed by torch and by flowgrad.

A seed draws a dtype (half, bfloat16, float, double, the integers, uint8, bool, complex64 and
complex128), a shape (0-d, empty, 1-d to 4-d, some long enough to summarize), values (integers
stored as floats, tiny and huge magnitudes, mixed signs, nan and infinities, -0.0, all equal,
subnormals), a view of them (transposed, sliced with a step, expanded, permuted), print options
(precision, threshold, edgeitems, linewidth, sci_mode, a profile; always restored) and a
wrapping (requires_grad, an op's grad_fn, nn.Parameter). Then repr, str, format (f"{t}", and
f"{t:.3f}" which only a 0-d tensor accepts), the printed tolist() and the repr of a list, tuple
and dict holding the tensor must be torch's text with `torch.` read as `flowgrad.`; where
torch raises, flowgrad must raise the same type.

    .venv/bin/python tests/printing_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/printing_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import contextlib
import random
import re
import warnings

import fuzz_common
import numpy as np
import torch
from torch import _tensor_str

import flowgrad as flow

FLOATS = ["float16", "bfloat16", "float32", "float64"]
DTYPES = FLOATS * 3 + ["int8", "int16", "int32", "int64", "uint8", "bool", "complex64",
                       "complex128"] + ["complex64", "float32", "float64"]
SHAPES = [(), (0,), (2, 0), (0, 3, 1), (1,), (4,), (7,), (13,), (3, 4), (2, 1, 5), (5, 3),
          (2, 3, 2, 2), (1, 1), (40,), (1200,), (3, 400), (9, 9, 9), (30, 30), (3, 1, 7)]
KINDS = ["normal", "integers", "tiny", "huge", "mixed", "specials", "negzero", "equal",
         "subnormal", "wide", "zeros", "small_ints"]
OPTIONS = [{"precision": 2}, {"precision": 0}, {"precision": 7}, {"threshold": 10},
           {"threshold": 5, "edgeitems": 1}, {"threshold": 20, "edgeitems": 0}, {"edgeitems": 5},
           {"linewidth": 30}, {"linewidth": 120}, {"sci_mode": True}, {"sci_mode": False},
           {"profile": "short"}, {"profile": "full"}, {"profile": "default"},
           {"profile": "short", "precision": 6}, {"precision": 3, "sci_mode": True},
           {"linewidth": 10}, {"threshold": 0}, {"precision": 10}, {"edgeitems": 0}]
# ops whose grad_fn the repr names (exact in both frameworks, so the values print alike)
OPS = {
    "mul": lambda t: t * 2, "add": lambda t: t + 1, "sub": lambda t: t - 1,
    "rsub": lambda t: 1 - t, "div": lambda t: t / 2, "neg": lambda t: -t,
    "clone": lambda t: t.clone(), "view": lambda t: t.view(-1),
    "reshape": lambda t: t.reshape(-1), "select": lambda t: t[0], "slice": lambda t: t[1:],
    "unsqueeze": lambda t: t.unsqueeze(0), "abs": lambda t: t.abs(),
    "transpose": lambda t: t.transpose(0, -1), "t": lambda t: t.t(),
    "permute": lambda t: t.permute(*reversed(range(t.dim()))),
    "expand": lambda t: t.unsqueeze(0).expand(2, *t.shape), "double": lambda t: t.double(),
    "squeeze": lambda t: t.squeeze(), "flatten": lambda t: t.flatten(),
    "sum": lambda t: t.flatten()[:2].sum(), "mean": lambda t: t.flatten()[:2].mean(),
    "pow": lambda t: t ** 2, "relu": lambda t: t.abs().relu(),  # (-0.: NOT_DRAWN)
    "cat": lambda t: _module(t).cat([t, t]), "stack": lambda t: _module(t).stack([t]),
    "max": lambda t: (t if t.is_complex() else t.abs()).max(),  # (NOT_DRAWN)
    "index": lambda t: t[[0]], "mask": lambda t: t[t == t],
    "contiguous": lambda t: t.t().contiguous(), "repeat": lambda t: t.repeat(2),
    "detach": lambda t: t.detach(), "to_float": lambda t: t.float(),
    "mul_": lambda t: t.clone().mul_(2), "conj": lambda t: t.conj(), "real": lambda t: t.real,
    "where": lambda t: _module(t).where(t == t, t, 0),
    "cumsum": lambda t: t.flatten()[:2].cumsum(0),
}
# ops not drawn for complex tensors, the reason (their values differ, not their printing)
INEXACT_COMPLEX = {
    "abs": "complex abs (hypot) differs by an ulp between torch's and NumPy's",
    "pow": "complex x ** 2 is torch's pow(), an ulp from NumPy's x * x",
    "relu": "drawn as relu(x.abs()): complex abs as above",
    "rsub": "torch's 1 - x multiplies x by alpha=1 as a complex: an inf part gives nan",
    "neg": "torch's vectorized complex neg is 0 - x (a zero part stays +0.), its scalar "
           "loop and flowgrad's give -0.: the printed sign of a zero part differs",
}
# what the fuzz does not draw, the reason (an op's values, not the printing: left to its sweep)
NOT_DRAWN = {
    "relu(-0.)": "torch's relu and clamp(min=0) keep -0. (x < 0 ? 0 : x); flowgrad's NumPy "
                 "maximum/clip give +0. for float32/float64/bfloat16 (-0. for float16); "
                 "the fuzz prints relu(x.abs())",
    "max() of -0. and 0.": "which zero a max over both returns (torch's bfloat16: 0.); "
                           "the fuzz draws x.abs().max()",
    "sparse tolist()": "flowgrad's refusal of a dense op on a sparse tensor is "
                       "NotImplementedError (SparseOperandError); torch's tolist RuntimeError",
    "0-d sparse": "format() of a 0-d sparse tensor with nnz=0 is torch's item(): an int 0",
    "make_dual(expanded)": "torch's make_dual refuses an expanded primal (its tangent is laid "
                           "out in the primal's overlapping strides); flowgrad's takes it",
}
# grad_fn names flowgrad gives otherwise than torch, the reason: the fuzz reads their
# grad_fn=<...> as any name (tests/test_grad_fn_introspection_vs_torch.py lists the structures)
KNOWN = {
    "sub": "t - 1 is an add of -1 here (AddBackward0); torch's SubBackward0",
    "rsub": "1 - t is a sub here (SubBackward0); torch's RsubBackward1",
    "unsqueeze": "unsqueeze is a reshape here (ViewBackward0); torch's UnsqueezeBackward0",
    "squeeze": "squeeze is a reshape here (ViewBackward0); torch's SqueezeBackward0/1",
    "transpose": "transpose is a permute here (PermuteBackward0); TransposeBackward0",
    "t": "t() is a permute here (PermuteBackward0); torch's TBackward0",
    "contiguous": "t() is a permute here, so the clone's input is (a 0-d/1-d: no clone)",
    "stack": "stack is a cat of reshapes here (CatBackward0); torch's StackBackward0",
    "flatten": "a reshape that copies is a view of a copy here; torch's UnsafeViewBackward0",
    "reshape": "a reshape that copies is a view of a copy here; torch's UnsafeViewBackward0",
    "conj": "no lazy conjugate bit: conj() copies (ConjPhysicalBackward0); ConjBackward0",
    "real": "real is its own node (RealBackward0); torch's view_as_real + SelectBackward0",
}


_SUBCLASSES = {m: type("Scaled", (m.Tensor,), {}) for m in (torch, flow)}


def _module(t):
    return torch if isinstance(t, torch.Tensor) else flow


def _values(r, rng, kind, n):
    """n float64 values of the kind drawn."""
    if kind == "normal":
        return rng.standard_normal(n) * r.choice([1.0, 10.0, 0.01, 123.4])
    if kind == "integers":
        return rng.integers(-r.choice([5, 100, 10**5]), r.choice([5, 100, 10**5]), n) * 1.0
    if kind == "small_ints":
        return rng.integers(0, 3, n) * 1.0
    if kind == "tiny":
        return rng.standard_normal(n) * r.choice([1e-5, 1e-8, 3e-4])
    if kind == "huge":
        return rng.standard_normal(n) * r.choice([1e8, 1e12, 5e4])
    if kind == "mixed":
        return rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    if kind == "specials":
        v = rng.standard_normal(n) * r.choice([1.0, 1000.0, 1e-5])
        if r.random() < 0.5:
            v = np.round(v)
        pick = rng.random(n)
        v[pick < 0.15] = np.nan
        v[(pick >= 0.15) & (pick < 0.25)] = np.inf
        v[(pick >= 0.25) & (pick < 0.35)] = -np.inf
        return v
    if kind == "negzero":
        v = np.round(rng.standard_normal(n))
        v[rng.random(n) < 0.5] = -0.0
        return v
    if kind == "equal":
        return np.full(n, r.choice([0.5, -3.0, 1e-6, 7e9, 1.0 / 3.0]))
    if kind == "subnormal":
        return rng.standard_normal(n) * r.choice([1e-310, 1e-40, 1e-7])
    if kind == "wide":
        return rng.standard_normal(n) * 10.0 ** rng.integers(-12, 12, n)
    return np.zeros(n)


class Case:
    """One printing case, drawn from a seed."""

    def __init__(self, seed):
        r = random.Random(seed)
        rng = np.random.default_rng(seed)
        self.dtype = r.choice(DTYPES)
        shape = r.choice(SHAPES)
        self.view = r.choice([None] * 4 + ["transpose", "step", "expand", "permute", "flip"])
        if self.view == "expand":
            shape = (1,) + shape[1:] if shape else (1,)
        self.kind = r.choice(KINDS)
        n = int(np.prod(shape))
        real = _values(r, rng, self.kind, n)
        if self.dtype.startswith("complex"):
            imag = _values(r, rng, r.choice(KINDS), n)
            self.values = np.empty(shape, complex)  # (not real + 1j * imag: inf * 1j is nan)
            self.values.real, self.values.imag = real.reshape(shape), imag.reshape(shape)
        else:
            self.values = real.reshape(shape)
        self.options = r.choice(OPTIONS) if r.random() < 0.5 else {}
        if r.random() < 0.2 and self.options:
            self.options = dict(self.options, **r.choice(OPTIONS))
        floating = self.dtype in FLOATS or self.dtype.startswith("complex")
        wraps = ["plain", "plain", "parameter", "meta", "buffer", "sparse"]
        if floating:  # (torch's make_dual refuses an expanded primal: KNOWN)
            wraps += ["requires_grad", "op", "subclass"] + ["dual"] * (self.view != "expand")
        self.wrap = r.choice(wraps)
        self.subclass = r.choice(["requires_grad", "parameter", "meta"]) \
            if self.wrap == "subclass" and r.random() < 0.5 else None
        ops = sorted(set(OPS) - set(INEXACT_COMPLEX)) if self.dtype.startswith("complex") \
            else sorted(OPS)
        self.op = r.choice(ops) if self.wrap == "op" else None
        self.default_dtype = "float64" if r.random() < 0.1 else None

    def describe(self):
        return (f"{self.dtype} {self.kind} shape={self.values.shape} view={self.view} "
                f"options={self.options} wrap={self.wrap} {self.subclass or ''} op={self.op} "
                f"default_dtype={self.default_dtype}")

    def tensor(self, m):
        v = self.values
        if self.dtype == "bool":
            base = m.tensor(v.real != 0)
        elif self.dtype.startswith("int") or self.dtype == "uint8":
            info = np.iinfo(self.dtype)
            base = m.tensor(np.clip(np.nan_to_num(v.real), info.min, info.max).astype(self.dtype))
        elif self.dtype in ("float16", "bfloat16"):  # rounded by the framework, from float32
            base = m.tensor(v.astype(np.float32)).to(getattr(m, self.dtype))
        else:
            base = m.tensor(v.astype(self.dtype))
        if self.view == "transpose" and base.dim() >= 2:
            base = base.transpose(0, -1)
        elif self.view == "step" and base.dim() >= 1:
            base = base[..., ::2]
        elif self.view == "expand" and base.dim() >= 1:
            base = base.expand(3, *base.shape[1:])
        elif self.view == "permute":
            base = base.permute(tuple(reversed(range(base.dim()))))
        elif self.view == "flip" and base.dim() >= 1:
            base = base.flip(0)
        if self.wrap == "requires_grad":
            return base.requires_grad_()
        if self.wrap == "op":
            return OPS[self.op](base.requires_grad_())
        if self.wrap == "parameter":
            return m.nn.Parameter(base, requires_grad=base.is_floating_point()
                                  or base.is_complex())
        if self.wrap == "dual":  # (inside a forward-AD level: _printed)
            return m.autograd.forward_ad.make_dual(base, base * 2)
        if self.wrap == "meta":
            return base.to("meta")
        if self.wrap == "sparse":
            return base.to_sparse() if base.dim() else base  # (0-d: NOT_DRAWN)
        if self.wrap == "buffer":  # (torch's: a plain tensor; flowgrad's: a subclass)
            return m.nn.Buffer(base)
        if self.wrap == "subclass":  # a user's subclass prints its own name
            sub = base.as_subclass(_SUBCLASSES[m])
            if self.subclass == "parameter":
                return m.nn.Parameter(sub)
            if self.subclass == "meta":
                return sub.to("meta")
            return sub.requires_grad_() if self.subclass else sub
        return base


_SUFFIX = re.compile(
    r",(?: |\n +)(?=(?:device='|size=\(|dtype=|grad_fn=<|requires_grad=True))")
_PREFIX = re.compile(r"(Parameter containing:\n)?(Parameter\()?(\w+\()")
_TANGENT = re.compile(r",(?: |\n +)tangent=")
_SPARSE_SUFFIX = re.compile(r",(?: |\n +)(?=(?:size=\(|nnz=|dtype=|layout=|grad_fn=<|"
                            r"requires_grad=True))")


def _closing(text, start):
    """The index of the ")" closing the "(" just before `start`."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if not depth:
            return i
    raise ValueError(text)


_ANY_GRAD_FN = re.compile(r"grad_fn=<\w+>")


def as_flowgrad(text):
    """torch's repr `text` as flowgrad's should read: `torch.` named `flowgrad.`, and the
    suffixes (device, size, dtype, grad_fn, requires_grad, tangent) placed by torch's rule under the
    print options in force, measured with flowgrad's name (3 characters longer)."""
    if not _PREFIX.match(text):  # (a 0-d dual tensor's tangent prints as a number)
        return text
    head, wrapped, prefix = _PREFIX.match(text).groups()
    rest = text[_PREFIX.match(text).end():-2 if wrapped else -1]
    if rest.startswith("indices="):  # sparse: the suffixes follow values=tensor(...)
        end = _closing(rest, rest.index("values=tensor(") + len("values=tensor("))
        suffixes = _SPARSE_SUFFIX.split(rest[end + 1:])[1:]
        return _tensor_str._add_suffixes(prefix + rest[:end + 1].replace(
            "torch.", "flowgrad."), [x.replace("torch.", "flowgrad.") for x in suffixes],
            len(prefix), True)
    tangent = _TANGENT.search(rest)  # (the last suffix: a tensor's repr, with its own)
    if tangent:
        rest, tangent = rest[:tangent.start()], "tangent=" + as_flowgrad(rest[tangent.end():])
    body, *suffixes = _SUFFIX.split(rest)
    suffixes = [x.replace("torch.", "flowgrad.") for x in suffixes + [tangent] if x]
    return (head or "") + (wrapped or "") + _tensor_str._add_suffixes(
        prefix + body, suffixes, len(prefix), False) + (")" if wrapped else "")


def _texts(m, case):
    """What printing the case's tensor gives under module `m`: (what, text or the type of the
    exception raised) pairs."""
    with warnings.catch_warnings():  # (casts of nan to integers, of complex to real)
        warnings.simplefilter("ignore")
        return _printed(m, case)


def _printed(m, case):
    old = m.get_default_dtype()
    if case.default_dtype:
        m.set_default_dtype(getattr(m, case.default_dtype))
    m.set_printoptions(**case.options)
    try:
        with m.autograd.forward_ad.dual_level() if case.wrap == "dual" else \
                contextlib.nullcontext():
            t = case.tensor(m)
            return [(what, _text(m, fn, t)) for what, fn in PRINTS
                    if not (case.wrap == "sparse" and what == "tolist")]  # (NOT_DRAWN)
    finally:
        m.set_printoptions(profile="default")
        m.set_default_dtype(old)


PRINTS = [("repr", repr), ("str", str), ("format", lambda t: f"{t}"),
          ("format .3f", lambda t: f"{t:.3f}"), ("format >5", lambda t: format(t, ">5")),
          ("tolist", lambda t: str(t.tolist())), ("list", lambda t: repr([t, t])),
          ("tuple", lambda t: str((t,))), ("dict", lambda t: repr({"a": t}))]


def _builtin(e):
    """The builtin exception class `e` is (flowgrad's raise subclasses of torch's types)."""
    return next(c.__name__ for c in type(e).__mro__ if c.__module__ == "builtins")


def _text(m, fn, t):
    """fn(t) (torch's: each repr of t in it as flowgrad's should read), or what it raised."""
    try:
        text = fn(t)
    except Exception as e:  # noqa: BLE001 (compared with torch's)
        return f"raised {_builtin(e)}"
    if m is torch:
        text = text.replace(repr(t), as_flowgrad(repr(t)))
    return text.replace("torch.", "flowgrad.")


def check(seed):
    """None when flowgrad prints the case as torch does, else a message."""
    case = Case(seed)
    both = fuzz_common.run_both(_texts, case)
    if not isinstance(both, tuple):
        return both
    want, got = both
    for (what, a), (_, b) in zip(got, want):
        if case.op in KNOWN:  # any name, wherever its length puts it
            a, b = (_SUFFIX.sub(", ", _ANY_GRAD_FN.sub("grad_fn=<>", x)) for x in (a, b))
        if a != b:
            return f"{what} differs:\nflowgrad:\n{a}\ntorch:\n{b}"
    return None


def main():
    fuzz_common.main(__doc__, lambda seed: Case(seed).describe(), check, seeds="0:1000")


if __name__ == "__main__":
    main()
