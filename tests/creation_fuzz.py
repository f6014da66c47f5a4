"""Differential fuzzing of tensor creation and conversion: random data through a random factory
or conversion, in torch and in flowgrad.

A seed draws data (nested lists and tuples of Python bools, ints, floats and complex numbers,
NumPy scalars and arrays of many dtypes, non-contiguous and 0-d, tensors and lists of 0-d
tensors, empty and ragged nests, values near the dtypes' limits, nan and inf, ints beyond
int64), a factory or conversion (tensor, as_tensor, asarray with copy True/False/None,
from_numpy, new_tensor/new_zeros/new_full/new_empty, zeros/ones/full/empty/arange/linspace/
logspace/eye/full_like/zeros_like, to(dtype)/type()/double()/int()/bool(), numpy(), tolist(),
item(), int()/float()/bool()/complex() of a tensor), a default dtype and keywords. Both must
agree on raise/no-raise (and the exception's type), the result's dtype, shape, values (bit
for bit; nan where torch has nan), requires_grad, whether a write through the source shows in
the result (memory shared exactly where torch shares it) and whether a warning was given.

    .venv/bin/python tests/creation_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/creation_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

NP_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32",
             "float64", "complex64", "complex128"]
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128"]
PY_SPECIALS = [0, 1, -1, True, False, 2 ** 31, -2 ** 31 - 1, 2 ** 63 - 1, -2 ** 63, 2 ** 63,
               -2 ** 63 - 1, 2 ** 64, 255, 256, -129, 1e308, -1e308, 5e-324, 1e-320, 65504.0,
               65520.0, 3.5e38, float("nan"), float("inf"), -float("inf"), -0.0, 0.5, -2.5,
               1 + 2j, complex(float("nan"), 1), 3j, 1e300j]


def _np_values(r, dtype, shape):
    rng = np.random.default_rng(r.randrange(2 ** 32))
    n = int(np.prod(shape))
    if dtype == "bool":
        return np.asarray(rng.random(n) < 0.5).reshape(shape)
    if dtype[0] in "iu":
        info = np.iinfo(dtype)
        pool = [0, 1, info.min, info.max, 7, -3 if info.min < 0 else 3]
        return np.array([r.choice(pool) for _ in range(n)], dtype).reshape(shape)
    real = "float32" if dtype == "complex64" else "float64" if dtype == "complex128" else dtype
    info = np.finfo(real)
    pool = [0.0, -0.0, 1.5, -2.25, float(info.max), float(info.tiny), float("nan"),
            float("inf"), -float("inf"), 1e-3]
    vals = np.array([r.choice(pool) for _ in range(n)], real).reshape(shape).astype(dtype)
    if dtype.startswith("complex"):
        vals.imag = np.array([r.choice(pool) for _ in range(n)], real).reshape(shape)
    return vals


def _array(r):
    """A NumPy array: maybe 0-d, empty, non-contiguous (strided or transposed)."""
    dtype = r.choice(NP_DTYPES)
    shape = r.choice([(), (3,), (2, 3), (0,), (2, 0), (1,), (4, 2)])
    a = _np_values(r, dtype, shape)
    how = r.random()
    if how < 0.2 and a.ndim >= 1 and a.shape[0] > 1:
        a = _np_values(r, dtype, (a.shape[0] * 2,) + a.shape[1:])[::2]
    elif how < 0.35 and a.ndim == 2:
        a = a.T
    elif how < 0.4:
        a.flags.writeable = False
    return a


def _scalar(r):
    kind = r.random()
    if kind < 0.5:
        return r.choice(PY_SPECIALS)
    if kind < 0.8:
        return _np_values(r, r.choice(NP_DTYPES), ())[()]  # a NumPy scalar
    return ("tensor0", _np_values(r, r.choice(NP_DTYPES), ()))


def _nest(r, depth=0):
    """A nested list/tuple of scalars: rectangular, or (rarely) ragged or empty."""
    if depth >= 2 or r.random() < 0.3:
        return _scalar(r)
    n = r.choice([0, 1, 2, 3])
    kind = list if r.random() < 0.7 else tuple
    inner = [_nest(r, depth + 1) for _ in range(n)]
    if r.random() < 0.85 and n > 1:  # make it rectangular: copies of one element's structure
        inner = _rectangular(r, depth, n)
    return kind(inner)


def _rectangular(r, depth, n):
    shape = [r.choice([0, 1, 2]) for _ in range(r.randint(0, 1 - min(depth, 1)))]
    def build(s):
        if not s:
            return _scalar(r)
        return [build(s[1:]) for _ in range(s[0])]
    return [build(shape) for _ in range(n)]


def _data(r):
    """Data for a factory: ('array', a), ('tensor', a), ('list0', [a, ...]) or a nest."""
    kind = r.random()
    if kind < 0.35:
        return ("array", _array(r))
    if kind < 0.5:
        a = _array(r)
        grad = a.dtype.kind in "fc" and r.random() < 0.3  # a leaf that requires grad
        return ("grad_tensor" if grad else "tensor", a)
    if kind < 0.58:
        dt = r.choice(NP_DTYPES)
        return ("list0", [_np_values(r, dt if r.random() < 0.7 else r.choice(NP_DTYPES), ())
                          for _ in range(r.randint(0, 3))])
    return ("nest", _nest(r))


def _make(m, data):
    """The module's own copy of drawn data (tensors are made here, fresh for each module)."""
    kind, d = data
    if kind == "array":
        a = d.copy(order="K") if d.flags.c_contiguous or d.flags.f_contiguous else \
            np.lib.stride_tricks.as_strided(d.base.copy(), d.shape, d.strides) \
            if d.base is not None else d.copy()
        a.flags.writeable = d.flags.writeable
        return a
    if kind in ("tensor", "grad_tensor"):
        return m.from_numpy(np.array(d, copy=True)).requires_grad_(kind == "grad_tensor")
    if kind == "list0":
        return [m.from_numpy(np.array(x, copy=True)) for x in d]
    return _make_nest(m, d)


def _make_nest(m, d):
    if isinstance(d, tuple) and len(d) == 2 and d[0] == "tensor0":
        return m.from_numpy(np.array(d[1], copy=True))
    if isinstance(d, (list, tuple)):
        return type(d)(_make_nest(m, x) for x in d)
    return d


WARN_ONCE = ("Casting complex values to real discards the imaginary part",
             "The given NumPy array is not writable",
             "Converting a tensor with requires_grad=True to a scalar",
             "torch.asarray: unspecified requires_grad", "asarray: unspecified requires_grad")

FACTORIES = ["tensor", "as_tensor", "asarray", "from_numpy", "new_tensor", "new_zeros",
             "new_full", "new_empty", "zeros", "ones", "full", "empty", "arange", "linspace",
             "logspace", "eye", "full_like", "zeros_like", "to", "type", "double", "int",
             "bool", "numpy", "tolist", "item", "py_int", "py_float", "py_bool", "py_complex"]


class Case:
    """One creation/conversion call, drawn from a seed."""

    def __init__(self, seed):
        r = random.Random(seed)
        self.default = r.choice(["float32", "float64"])
        self.factory = r.choice(FACTORIES)
        self.data = _data(r)
        self.kw = {}
        if r.random() < 0.4:
            self.kw["dtype"] = r.choice(DTYPES)
        if r.random() < 0.2:
            self.kw["requires_grad"] = True
        if self.factory == "asarray":
            self.kw["copy"] = r.choice([True, False, None])
        self.size = r.choice([(), (3,), (2, 3), (0,), [2, 1], 4])
        self.fill = r.choice(PY_SPECIALS)
        self.range = [r.choice([0, 1, 2.5, -3, 10, 1e3, 0.1, float("nan"), 2 ** 40, 1 + 1j])
                      for _ in range(r.randint(1, 3))]
        self.steps = r.choice([0, 1, 5, 7, -1])
        if r.random() < 0.15:
            self.kw["memory_format"] = r.choice(["contiguous_format", "preserve_format",
                                                 "channels_last"])
        self.write = r.random() < 0.7  # write through the source, see if the result shows it
        self.one = r.random() < 0.8  # item() and int(t) of a one-element slice of the source

    def __repr__(self):
        return (f"Case({self.factory}, default={self.default}, data={self.data!r}, "
                f"kw={self.kw}, size={self.size}, fill={self.fill}, range={self.range}, "
                f"steps={self.steps})")


def _kw(m, case, names):
    kw = {k: v for k, v in case.kw.items() if k in names}
    if "dtype" in kw:
        kw["dtype"] = getattr(m, kw["dtype"])
    if "memory_format" in kw:
        kw["memory_format"] = getattr(m, kw["memory_format"])
    return kw


def _source_tensor(m, case, src):
    """The tensor a method is called on: the data's tensor, or one sharing the data's array
    (a write through the source reaches both), else a float32 2x2; one element of it for
    item() and int()/float()/bool()/complex() (mostly)."""
    if isinstance(src, m.Tensor):
        base = src
    elif isinstance(src, np.ndarray) and src.flags.writeable:
        base = m.from_numpy(src)
    else:
        base = m.tensor(np.zeros((2, 2), np.float32))
    if case.one and (case.factory == "item" or case.factory.startswith("py_")):
        return base.reshape(-1)[:1]
    return base


def _call(m, case, src):
    """The factory's result for module m (a tensor or a Python value)."""
    f = case.factory
    dk = ("dtype", "requires_grad")
    if f == "tensor":
        return m.tensor(src, **_kw(m, case, dk))
    if f == "as_tensor":
        return m.as_tensor(src, **_kw(m, case, ("dtype",)))
    if f == "asarray":
        return m.asarray(src, **_kw(m, case, dk + ("copy",)))
    if f == "from_numpy":
        return m.from_numpy(src)
    base = _source_tensor(m, case, src)
    if f == "new_tensor":
        return base.new_tensor(src, **_kw(m, case, dk))
    if f in ("new_zeros", "new_empty"):
        return getattr(base, f)(case.size, **_kw(m, case, dk))
    if f == "new_full":
        return base.new_full(case.size, case.fill, **_kw(m, case, dk))
    if f in ("zeros", "ones", "empty"):
        keys = dk + (("memory_format",) if f == "empty" else ())
        return getattr(m, f)(case.size, **_kw(m, case, keys))
    if f == "full":
        return m.full(case.size, case.fill, **_kw(m, case, dk))
    if f == "arange":
        return m.arange(*case.range, **_kw(m, case, dk))
    if f in ("linspace", "logspace"):
        lo, hi = (case.range * 2)[:2]
        return getattr(m, f)(lo, hi, case.steps, **_kw(m, case, dk))
    if f == "eye":
        return m.eye(*[abs(int(x.real)) % 5 for x in case.range[:2]], **_kw(m, case, dk))
    if f in ("full_like", "zeros_like"):
        keys = dk + ("memory_format",)
        if f == "full_like":
            return m.full_like(base, case.fill, **_kw(m, case, keys))
        return m.zeros_like(base, **_kw(m, case, keys))
    if f == "to":
        return base.to(**_kw(m, case, ("dtype",))) if "dtype" in case.kw else base.to(base.dtype)
    if f == "type":
        return base.type(getattr(m, case.kw.get("dtype", "float64")))
    if f in ("double", "int", "bool"):
        return getattr(base, f)()
    if f == "numpy":
        return base.numpy()
    if f == "tolist":
        return base.tolist()
    if f == "item":
        return base.item()
    return {"py_int": int, "py_float": float, "py_bool": bool, "py_complex": complex}[f](base)


def _snapshot(m, out):
    """(dtype name, shape, values as a NumPy array, requires_grad) of a result tensor."""
    if isinstance(out, np.ndarray):
        return ("ndarray " + str(out.dtype), out.shape, out.copy(), False)
    if isinstance(out, m.Tensor):
        t = out.detach()
        name = str(t.dtype).split(".")[-1]
        vals = (t.float() if name == "bfloat16" else t).numpy().copy()
        return (name, tuple(t.shape), vals, out.requires_grad)
    return ("python", None, repr(out) + " " + type(out).__name__, False)


def _write(m, src):
    """Change one element of the source (an array or tensor) in place; False if none to."""
    if isinstance(src, np.ndarray):
        if src.size == 0 or not src.flags.writeable:
            return False
        idx = (0,) * src.ndim
        src[idx] = (not src[idx]) if src.dtype == bool else (3 if src[idx] != 3 else 5)
        return True
    if isinstance(src, m.Tensor):
        if src.numel() == 0 or src.requires_grad:
            return False
        idx = (0,) * src.dim()
        with m.no_grad():
            v = src[idx].item()
            src[idx] = (not v) if src.dtype == m.bool else (3 if v != 3 else 5)
        return True
    return False


def run(m, case):
    """A record of the case's result in module m: the snapshot, whether a write through the
    source showed in the result, and the warnings' categories."""
    old = m.get_default_dtype()
    m.set_default_dtype(getattr(m, case.default))
    try:
        src = _make(m, case.data)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = _call(m, case, src)
        snap = _snapshot(m, out)
        shared = None
        if case.write and case.factory in ("as_tensor", "asarray", "from_numpy", "to",
                                           "numpy", "tensor") and _write(m, src):
            again = _snapshot(m, out)
            shared = not np.array_equal(again[2], snap[2], equal_nan=snap[2].dtype.kind in "fc") \
                if isinstance(snap[2], np.ndarray) else False
        return snap, shared, sorted({(w.category.__name__, str(w.message)) for w in caught})
    finally:
        m.set_default_dtype(old)


def _huge_arange(case):
    """Whether the case is an arange of more than 2**24 elements (arange(1, 2**40, 1000.0):
    1.1e9 float64s, gigabytes in each framework and its copies): skipped, not run."""
    if case.factory != "arange":
        return False
    r = list(case.range)
    start, end, step = (0, r[0], 1) if len(r) == 1 else (r[0], r[1], 1) if len(r) == 2 else r[:3]
    try:
        return abs((float(end) - float(start)) / float(step)) > 2 ** 24
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return False


def check(seed):
    case = Case(seed)
    if _huge_arange(case):
        return None
    errors = []
    results = []
    for m in (torch, flow):
        try:
            results.append(run(m, case))
            errors.append(None)
        except fuzz_common.TORCH_REFUSALS + (OverflowError,) if m is torch else Exception as e:
            results.append(None)
            errors.append(e)
    te, fe = errors
    if te is not None or fe is not None:
        if te is None:
            return f"flowgrad raised {type(fe).__name__}: {fe}"
        if fe is None:
            return f"torch raised {type(te).__name__}: {te}; flowgrad ran"
        if not isinstance(fe, type(te)):
            return f"torch raised {type(te).__name__}: {te}; flowgrad {type(fe).__name__}: {fe}"
        return None
    (want, want_shared, want_warn), (got, got_shared, got_warn) = results
    if got[0] != want[0] or got[1] != want[1]:
        return f"dtype/shape: flowgrad {got[0]}{got[1]}, torch {want[0]}{want[1]}"
    if got[3] != want[3]:
        return f"requires_grad: flowgrad {got[3]}, torch {want[3]}"
    if want[0] == "python":
        if got[2] != want[2]:
            return f"value: flowgrad {got[2]}, torch {want[2]}"
    elif case.factory not in ("empty", "new_empty"):
        # (torch's complex64 pow in logspace is off by about 1e-6 of the largest value)
        tol = {"linspace": 1e-6, "logspace": 1e-5}.get(case.factory, 0.0)
        d = fuzz_common.first_difference([("value", got[2], want[2])], tol)
        if d:
            return d
    if got_shared != want_shared:
        return f"shares memory with the source: flowgrad {got_shared}, torch {want_shared}"
    # torch gives some warnings once a process (TORCH_WARN_ONCE): flowgrad may repeat those
    want_warn, got_warn = ([w for w in ws if not w[1].startswith(WARN_ONCE)]
                           for ws in (want_warn, got_warn))
    if bool(want_warn) != bool(got_warn):
        return f"warnings: flowgrad {got_warn}, torch {want_warn}"
    return None


def generate(seed):
    return repr(Case(seed))


if __name__ == "__main__":
    fuzz_common.main(__doc__, generate, check)
