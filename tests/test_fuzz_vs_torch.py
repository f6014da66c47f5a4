"""Differential fuzzing against torch: random dtypes (incl. mixed pairs, Python scalars and
0-d tensors), shapes (broadcasting, size-1 and EMPTY dims), non-contiguous inputs (transposed
and strided views) and random upstream gradients, for a broad list of public ops.

Each test draws cases with hypothesis under a fixed, derandomized budget (deterministic CI).
A case passes when flowgrad and torch both raise, or both return results with the same
dtype, shape and values (and the same input gradients for float64 inputs).

Deliberate exclusions (flowgrad is more permissive than torch; no wrong results) are listed in
`_PERMISSIVE` with the reason, and checked there explicitly rather than skipped silently.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowgrad as flow

FUZZ = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
TENSOR_DTYPES = ["float16", "bfloat16", "float32", "float64", "int32", "int64", "bool", "uint8"]
SCALARS = {"int": [0, 2, -3, 7], "float": [1.5, -0.5, 0.25], "bool": [True, False]}
_TOL = {"float16": 2e-2, "bfloat16": 6e-2, "float32": 1e-5, "float64": 1e-10}


# ---- building the same input for both frameworks ---------------------------------------------
def _values(seed, shape, dt, positive=False):
    rng = np.random.default_rng(seed)
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt == "uint8":
        return rng.integers(0, 6, shape).astype(np.uint8)
    if dt in ("int32", "int64"):
        lo = 1 if positive else -4
        return rng.integers(lo, 5, shape).astype(dt)
    # two decimals: exactly representable differences stay away from rounding ties
    v = np.round(rng.uniform(0.2 if positive else -3, 3, shape), 2)
    return np.where(np.abs(v) < 0.05, 0.5, v)


def _make(m, a, dt, layout, grad=False):
    """A tensor of values `a` in dtype `dt`, laid out contiguous, transposed or strided."""
    a = np.asarray(a)
    if layout == "T" and a.ndim >= 2:
        base = np.ascontiguousarray(np.swapaxes(a, 0, -1))
    elif layout == "step" and a.ndim >= 1:
        base = np.repeat(a, 2, axis=0)
    else:
        base, layout = a.copy(), "contig"
    t = m.tensor(base.astype(np.float64) if dt == "bfloat16" else base).to(getattr(m, dt))
    if grad:
        t.requires_grad_(True)
    leaf = t
    if layout == "T":
        t = t.transpose(0, -1)
    elif layout == "step":
        t = t[::2]
    return leaf, t


class Case:
    """One operand: a Python scalar, or a tensor spec (values, dtype, layout)."""

    def __init__(self, value=None, dt=None, layout="contig", grad=False):
        self.value, self.dt, self.layout, self.grad = value, dt, layout, grad

    def build(self, m):
        if self.dt is None:
            return None, self.value
        return _make(m, self.value, self.dt, self.layout, self.grad)

    def __repr__(self):
        if self.dt is None:
            return repr(self.value)
        return f"{self.dt}{list(np.shape(self.value))}:{self.layout}"


def _name(d):
    return str(d).split(".")[-1]


def _np(t):
    t = t.detach()
    if _name(t.dtype) in ("bfloat16", "float16"):
        t = t.double()
    return t.numpy()


def _same(f, t, what):
    if isinstance(t, torch.Tensor):
        assert isinstance(f, flow.Tensor), f"{what}: {type(f).__name__} vs torch.Tensor"
        assert _name(f.dtype) == _name(t.dtype), f"{what}: dtype {f.dtype} vs {t.dtype}"
        assert tuple(f.shape) == tuple(t.shape), f"{what}: shape {f.shape} vs {t.shape}"
        if t.dtype.is_floating_point:
            tol = _TOL[_name(t.dtype)]
            np.testing.assert_allclose(_np(f), _np(t), rtol=tol, atol=tol, equal_nan=True,
                                       err_msg=what)
        else:
            np.testing.assert_array_equal(_np(f), _np(t), err_msg=what)
    elif isinstance(t, (tuple, list)):
        assert len(f) == len(t), what
        for i, (a, b) in enumerate(zip(f, t)):
            _same(a, b, f"{what}[{i}]")
    else:
        assert type(f) is type(t) and (f == t or f != f and t != t), f"{what}: {f!r} vs {t!r}"


def _call(fn, m, cases):
    built = [c.build(m) for c in cases]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return None, fn(m, *(x for _, x in built)), [leaf for leaf, _ in built]
    except Exception as e:  # noqa: BLE001 - any error; compared with torch's below
        return e, None, None


def compare(fn, *cases, grad_seed=None):
    """Run fn on flowgrad and torch; same errors-or-results; gradients for float64 leaves."""
    terr, tout, tleaves = _call(fn, torch, cases)
    ferr, fout, fleaves = _call(fn, flow, cases)
    what = f"{cases}"
    if terr is not None:
        assert ferr is not None, f"{what}: torch raises {terr!r} but flowgrad returns {fout!r}"
        return
    assert ferr is None, f"{what}: flowgrad raises {ferr!r}; torch returns {tout!r}"
    _same(fout, tout, what)
    if grad_seed is None:
        return
    touts = tout if isinstance(tout, (tuple, list)) else [tout]
    fouts = fout if isinstance(fout, (tuple, list)) else [fout]
    pairs = [(a, b) for a, b in zip(fouts, touts)
             if isinstance(b, torch.Tensor) and b.requires_grad]
    if not pairs:
        return
    rng = np.random.default_rng(grad_seed)
    gs = [rng.standard_normal(tuple(b.shape)) for _, b in pairs]
    torch.autograd.backward([b for _, b in pairs], [torch.tensor(g) for g in gs])
    flow.autograd.backward([a for a, _ in pairs], [flow.tensor(g) for g in gs])
    for i, (fl, tl) in enumerate(zip(fleaves, tleaves)):
        if tl is not None and tl.requires_grad:
            assert (fl.grad is None) == (tl.grad is None), f"{what}: grad {i} presence"
            if tl.grad is not None:
                _same(fl.grad, tl.grad, f"{what}: grad of input {i}")


# ---- strategies ----------------------------------------------------------------------------
LAYOUTS = st.sampled_from(["contig", "contig", "T", "step"])


@st.composite
def tensor_case(draw, shape=None, dtypes=TENSOR_DTYPES, grad=False, positive=False):
    if shape is None:
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    dt = draw(st.sampled_from(dtypes))
    value = _values(draw(st.integers(0, 2**16)), shape, dt, positive)
    return Case(value, dt, draw(LAYOUTS), grad and dt == "float64")


@st.composite
def operand(draw, shape, scalars=True, dtypes=TENSOR_DTYPES, positive=False):
    kinds = ["tensor"] * 3 + (list(SCALARS) if scalars else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "tensor":
        return draw(tensor_case(shape, dtypes, grad=True, positive=positive))
    return Case(draw(st.sampled_from(SCALARS[kind])))


def _is_bool(c):
    return c.dt == "bool" or c.dt is None and isinstance(c.value, bool)


# ---- elementwise binary ops ------------------------------------------------------------------
BINARY = {
    "add": lambda m, a, b: m.add(a, b), "sub": lambda m, a, b: m.sub(a, b),
    "mul": lambda m, a, b: m.mul(a, b), "div": lambda m, a, b: m.div(a, b),
    "floor_divide": lambda m, a, b: m.floor_divide(a, b),
    "remainder": lambda m, a, b: m.remainder(a, b), "fmod": lambda m, a, b: m.fmod(a, b),
    "pow": lambda m, a, b: m.pow(a, b), "maximum": lambda m, a, b: m.maximum(a, b),
    "minimum": lambda m, a, b: m.minimum(a, b), "fmax": lambda m, a, b: m.fmax(a, b),
    "fmin": lambda m, a, b: m.fmin(a, b), "atan2": lambda m, a, b: m.atan2(a, b),
    "hypot": lambda m, a, b: m.hypot(a, b), "xlogy": lambda m, a, b: m.xlogy(a, b),
    "eq": lambda m, a, b: m.eq(a, b), "ne": lambda m, a, b: m.ne(a, b),
    "lt": lambda m, a, b: m.lt(a, b), "le": lambda m, a, b: m.le(a, b),
    "gt": lambda m, a, b: m.gt(a, b), "ge": lambda m, a, b: m.ge(a, b),
    "logical_and": lambda m, a, b: m.logical_and(a, b),
    "logical_xor": lambda m, a, b: m.logical_xor(a, b),
    "bitwise_and": lambda m, a, b: m.bitwise_and(a, b),
    "bitwise_or": lambda m, a, b: m.bitwise_or(a, b),
    "+": lambda m, a, b: a + b, "-": lambda m, a, b: a - b, "*": lambda m, a, b: a * b,
    "/": lambda m, a, b: a / b, "//": lambda m, a, b: a // b, "%": lambda m, a, b: a % b,
    "**": lambda m, a, b: a ** b, "<": lambda m, a, b: a < b, "==": lambda m, a, b: a == b,
    ">=": lambda m, a, b: a >= b, "&": lambda m, a, b: a & b, "|": lambda m, a, b: a | b,
}
_TENSOR_ONLY = {"maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "logical_and",
                "logical_xor"}
_NO_TORCH_GRAD = {"floor_divide", "//"}  # torch: derivative for floor_divide not implemented
_DIVISIONS = {"div", "floor_divide", "remainder", "fmod", "/", "//", "%"}


def _permissive(name, a, b):
    """Cases torch rejects but flowgrad computes (documented, deliberate: not wrong results).

    - the function forms of torch's binary ops in _TENSOR_ONLY need a Tensor in position 2
      (or 1) where flowgrad also takes a Python number, as the operators do;
    - bool operands of integer-only arithmetic (//, %, fmod, **) and of bitwise ops with
      floats: torch has no bool/float kernel there, flowgrad computes on the promoted dtype.
    """
    if name in _TENSOR_ONLY and (a.dt is None or b.dt is None) or name == "fmod" and a.dt is None:
        return True
    if name in ("floor_divide", "remainder", "fmod", "//", "%", "pow", "**") and \
            _is_bool(a) and _is_bool(b):
        return True
    if name in ("pow", "**") and _is_bool(a) and b.dt is None and \
            not isinstance(b.value, float) and b.value < 0:
        return True  # bool ** -3: torch refuses negative integer powers of its int result
    return False


@pytest.mark.parametrize("name", list(BINARY))
@FUZZ
@given(data=st.data())
def test_binary(name, data):
    sa, sb = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_side=0,
                                                         max_side=3, max_dims=3)).input_shapes
    a = data.draw(operand(sa), "a")
    b = data.draw(operand(sb, positive=name in _DIVISIONS), "b")
    if a.dt is None and b.dt is None:
        b = data.draw(tensor_case(sb, grad=True, positive=name in _DIVISIONS))
    if _permissive(name, a, b):  # see _permissive: torch must still refuse it
        assert _call(BINARY[name], torch, [a, b])[0] is not None, (name, a, b)
        return
    # torch has no derivative for remainder(Python number, Tensor) either
    no_grad = name in _NO_TORCH_GRAD or name in ("remainder", "%") and a.dt is None
    compare(BINARY[name], a, b, grad_seed=None if no_grad else 1)


# ---- unary ops -------------------------------------------------------------------------------
UNARY = ["abs", "neg", "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "square", "reciprocal",
         "floor", "ceil", "round", "trunc", "sign", "isnan", "logical_not", "expm1", "log1p",
         "erf", "relu", "clone"]
# torch refuses these dtypes for the op (no kernel) where flowgrad computes: permissive
# (square is not among them: torch squares a bool tensor into int64, and so does flowgrad)
_UNARY_REFUSED = {"neg": {"bool"}, "abs": {"bool"}, "relu": {"bool"}, "floor": {"bool"},
                  "ceil": {"bool"}, "round": {"bool"}, "trunc": {"bool"}}


@pytest.mark.parametrize("name", UNARY)
@FUZZ
@given(x=tensor_case(grad=True))
def test_unary(name, x):
    if x.dt in _UNARY_REFUSED.get(name, ()):
        assert _call(lambda m, t: getattr(m, name)(t), torch, [x])[0] is not None
        return
    compare(lambda m, t: getattr(m, name)(t), x, grad_seed=2)


# ---- reductions over dim tuples, keepdim, empty dims -------------------------------------------
REDUCE = {
    "sum": lambda m, x, d, k: x.sum(d, keepdim=k), "mean": lambda m, x, d, k: x.mean(d, keepdim=k),
    "amax": lambda m, x, d, k: m.amax(x, d, keepdim=k),
    "amin": lambda m, x, d, k: m.amin(x, d, keepdim=k),
    "any": lambda m, x, d, k: m.any(x, d, keepdim=k),
    "logsumexp": lambda m, x, d, k: m.logsumexp(x, d, keepdim=k),
    "var": lambda m, x, d, k: m.var(x, d, keepdim=k),
    "std": lambda m, x, d, k: m.std(x, d, keepdim=k, correction=0),
    "count_nonzero": lambda m, x, d, k: m.count_nonzero(x, d),
    "norm": lambda m, x, d, k: m.norm(x, dim=d, keepdim=k),
}
ONE_DIM = {
    "prod": lambda m, x, d, k: x.prod(d, keepdim=k),
    "max": lambda m, x, d, k: m.max(x, d, keepdim=k),
    "argmin": lambda m, x, d, k: m.argmin(x, d, keepdim=k),
    "all": lambda m, x, d, k: m.all(x, d, keepdim=k),
    "median": lambda m, x, d, k: m.median(x, d, keepdim=k),
    "cumsum": lambda m, x, d, k: m.cumsum(x, d), "cumprod": lambda m, x, d, k: m.cumprod(x, d),
    "softmax": lambda m, x, d, k: m.softmax(x, d),
    "log_softmax": lambda m, x, d, k: m.log_softmax(x, d),
    "sort": lambda m, x, d, k: m.sort(x, dim=d, stable=True),
    "argsort": lambda m, x, d, k: m.argsort(x, dim=d, stable=True),
    "topk": lambda m, x, d, k: m.topk(x, 1, d),
}
FULL = {"sum": lambda m, x: x.sum(), "prod": lambda m, x: x.prod(), "mean": lambda m, x: x.mean(),
        "max": lambda m, x: x.max(), "all": lambda m, x: x.all(), "median": lambda m, x: x.median()}
_FLOATS = ["float16", "bfloat16", "float32", "float64"]
_NO_BOOL = [d for d in TENSOR_DTYPES if d != "bool"]
# dtypes drawn per op: torch has no kernel for the others (flowgrad may compute them)
_REDUCE_DTYPES = {"mean": _FLOATS, "logsumexp": _FLOATS, "var": _FLOATS, "std": _FLOATS,
                  "norm": _FLOATS, "softmax": _FLOATS, "log_softmax": _FLOATS,
                  "max": _NO_BOOL, "argmin": _NO_BOOL, "median": _NO_BOOL, "topk": _NO_BOOL}
_DISTINCT = {"max", "argmin", "median", "sort", "argsort", "topk"}  # ties pick any index


def _distinct(x):
    """Make values distinct (index results are ambiguous on ties); uint8/int keep dtype."""
    v = x.value
    if x.dt in ("bool",) or v.size == 0:
        return x
    order = np.random.default_rng(v.size).permutation(v.size).reshape(v.shape)
    x.value = (order * 0.25 - 1 if x.dt in _FLOATS else order).astype(v.dtype)
    return x


@pytest.mark.parametrize("name", list(REDUCE) + list(ONE_DIM))
@FUZZ
@given(data=st.data())
def test_reduction(name, data):
    x = data.draw(tensor_case(dtypes=_REDUCE_DTYPES.get(name, TENSOR_DTYPES), grad=True))
    if name in _DISTINCT:
        x = _distinct(x)
    nd = max(np.ndim(x.value), 1)
    keepdim = data.draw(st.booleans())
    if name in ONE_DIM:
        dim = data.draw(st.integers(-nd, nd - 1))
        fn = ONE_DIM[name]
    else:
        dim = tuple(data.draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd,
                                       unique_by=lambda d: d % nd)))
        fn = REDUCE[name]
    compare(lambda m, t: fn(m, t, dim, keepdim), x, grad_seed=3)


@pytest.mark.parametrize("name", list(FULL))
@FUZZ
@given(x=tensor_case(grad=True))
def test_full_reduction(name, x):
    if name == "median" and x.value.size == 0 and x.dt not in _FLOATS:
        return  # torch returns an arbitrary integer (the dtype's min) for an empty median
    if name in ("max", "median") and x.dt == "bool":
        return  # torch has no bool kernel for max/median; flowgrad computes them
    if name in _DISTINCT:
        x = _distinct(x)
    compare(FULL[name], x, grad_seed=4)


# ---- shape ops, indexing, matmul/einsum, cat/stack, where, clamp, gather/scatter --------------
def _setitem(m, x, v):
    y = x.clone() * 1 if x.dtype.is_floating_point else x.clone()
    y[..., :1] = v
    return y


MISC = {
    "reshape": lambda m, x: x.reshape(-1), "flatten": lambda m, x: m.flatten(x),
    "permute": lambda m, x: x.permute(tuple(reversed(range(x.dim())))),
    "unsqueeze": lambda m, x: x.unsqueeze(0), "squeeze": lambda m, x: x.squeeze(),
    "flip": lambda m, x: m.flip(x, (0,)) if x.dim() else x.clone(),
    "getitem_step": lambda m, x: x[::2] if x.dim() else x[None],
    "getitem_mixed": lambda m, x: x[None, ..., -1:] if x.dim() else x[...],
    "getitem_mask": lambda m, x: x[x > 0] if x.dtype != m.bool else x[x],
    "setitem": lambda m, x: _setitem(m, x, 2),
    # uint8: no negative bound; torch wraps -1 to 255 (then min > max), flowgrad clips at -1
    "cumsum": lambda m, x: m.cumsum(x, 0), "clamp": lambda m, x: m.clamp(
        x, 0 if x.dtype == m.uint8 else -1, 2),
    "clamp_float": lambda m, x: m.clamp(x, min=0.5),
    "where_scalar": lambda m, x: m.where(x > 1, x, 0.5),
    "cat": lambda m, x: m.cat([x, x[:1].to(m.float64)]) if x.dim() else m.stack([x, x]),
    "stack": lambda m, x: m.stack([x, x], -1),
    "repeat": lambda m, x: x.repeat(*([2] * max(x.dim(), 1))),
    "expand": lambda m, x: x.expand(2, *x.shape),
}
_MISC_REFUSED: dict = {}  # op -> dtypes torch has no kernel for (none so far)


@pytest.mark.parametrize("name", list(MISC))
@FUZZ
@given(x=tensor_case(grad=True))
def test_misc(name, x):
    if x.dt in _MISC_REFUSED.get(name, ()):
        assert _call(MISC[name], torch, [x])[0] is not None
        return
    compare(MISC[name], x, grad_seed=5)


@FUZZ
@given(data=st.data())
def test_matmul_einsum_where_gather(data):
    n, k, p = (data.draw(st.integers(0, 3)) for _ in range(3))
    batch = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2,
                                                        min_side=1, max_side=2)).input_shapes
    # one dtype for both: torch's matmul/einsum refuse mixed dtypes (except, by accident, on
    # empty inputs); flowgrad's einsum promotes them (permissive, not a wrong result)
    dts = [data.draw(st.sampled_from(["float32", "float64"]))]
    a = data.draw(tensor_case(batch[0] + (n, k), dts, grad=True))
    b = data.draw(tensor_case(batch[1] + (k, p), dts, grad=True))
    compare(lambda m, x, y: m.matmul(x, y), a, b, grad_seed=6)
    compare(lambda m, x, y: m.einsum("...ij,...jk->...ik", x, y), a, b, grad_seed=7)
    cond = data.draw(tensor_case(batch[0] + (n, k), ["bool"]))
    c = data.draw(tensor_case(batch[0] + (n, k), grad=True))
    d = data.draw(operand(batch[0] + (n, k)))
    compare(lambda m, q, x, y: m.where(q, x, y), cond, c, d, grad_seed=8)
    if n and k:
        idx = Case(np.random.default_rng(n * k).integers(0, n, (n, k)), "int64")
        compare(lambda m, x, i: m.gather(x, -2, i), c, idx, grad_seed=9)
        compare(lambda m, x, i: x.scatter_add(-2, i, x), c, idx, grad_seed=10)
        compare(lambda m, x, i: m.topk(x, 1, -1).values, _distinct(c), grad_seed=11)
