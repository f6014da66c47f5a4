"""Dtypes against torch: promote_types over every pair, result_type over tensors, zero-dim
tensors and Python scalars, the dtypes ops produce, conversions, set_default_dtype, and
float16/bfloat16 arithmetic. Tables, one line per case."""
import itertools

import numpy as np
import pytest
import torch

import flowgrad as flow

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
         "float64"]
SCALARS = [True, 3, -2, 2.5]


def _name(d):
    return str(d).replace("torch.", "").replace("flowgrad.", "")


def make(m, name, ndim):
    """A tensor of dtype `name` on module m, 1-d of two elements or zero-dim."""
    data = [1, 0] if ndim else 1
    if m is torch:
        return torch.tensor(data, dtype=getattr(torch, name))
    return flow.tensor(data, dtype=getattr(flow, name))


@pytest.mark.parametrize(("a", "b"), list(itertools.product(NAMES, NAMES)))
def test_promote_types(a, b):
    expect = torch.promote_types(getattr(torch, a), getattr(torch, b))
    assert flow.promote_types(getattr(flow, a), getattr(flow, b)).name == _name(expect)


# (dims of a, dims of b): dimensioned and zero-dim operands in each combination
@pytest.mark.parametrize(("a", "b"), list(itertools.product(NAMES, NAMES)))
def test_result_type_tensors(a, b):
    for na, nb in ((1, 1), (1, 0), (0, 1), (0, 0)):
        expect = torch.result_type(make(torch, a, na), make(torch, b, nb))
        got = flow.result_type(make(flow, a, na), make(flow, b, nb))
        assert got.name == _name(expect), f"{a}{'[2]' if na else '[]'} with {b}" \
            f"{'[2]' if nb else '[]'}"


@pytest.mark.parametrize("a", NAMES)
@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("ndim", [1, 0])
def test_result_type_with_python_scalar(a, scalar, ndim):
    expect = torch.result_type(make(torch, a, ndim), scalar)
    assert flow.result_type(make(flow, a, ndim), scalar).name == _name(expect)


# Ops with torch's promotion: the dtype each returns for a pair of dtypes or a scalar.
# The last field: whether torch takes a Python scalar as the second operand too.
BINARY = [
    ("add", lambda m, a, b: m.add(a, b), True),
    ("sub", lambda m, a, b: a - b, True),
    ("rsub", lambda m, a, b: b - a, True),
    ("mul", lambda m, a, b: m.mul(a, b), True),
    ("div", lambda m, a, b: m.div(a, b), True),
    ("rdiv", lambda m, a, b: b / a, True),
    ("pow", lambda m, a, b: m.pow(a, b), True),
    ("floor_divide", lambda m, a, b: m.div(a, b, rounding_mode="floor"), True),
    ("remainder", lambda m, a, b: m.remainder(a, b), True),
    ("fmod", lambda m, a, b: m.fmod(a, b), True),
    ("maximum", lambda m, a, b: m.maximum(a, b), False),
    ("fmin", lambda m, a, b: m.fmin(a, b), False),
    ("where", lambda m, a, b: m.where(a > 0, a, b), True),
    ("atan2", lambda m, a, b: m.atan2(a, b), False),
    ("hypot", lambda m, a, b: m.hypot(a, b), False),
    ("clamp_tensor", lambda m, a, b: m.clamp(a, b), False),
    ("eq", lambda m, a, b: m.eq(a, b), True),
]
NUMERIC = ["uint8", "int8", "int32", "int64", "float16", "float32", "float64"]


def _dtype_or_error(fn, m, *args):
    try:
        return _name(fn(m, *args).dtype)
    except (RuntimeError, TypeError):
        return "error"


@pytest.mark.parametrize(("op", "fn", "scalars"), BINARY, ids=[b[0] for b in BINARY])
def test_op_result_dtypes(op, fn, scalars):
    diffs = []
    for a, b in itertools.product(NUMERIC, NUMERIC):
        for nb in (1, 0):
            expect = _dtype_or_error(fn, torch, make(torch, a, 1) + 1, make(torch, b, nb) + 1)
            got = _dtype_or_error(fn, flow, make(flow, a, 1) + 1, make(flow, b, nb) + 1)
            if expect != got:
                diffs.append((a, b, nb, expect, got))
    for a, s in itertools.product(NUMERIC, [3, 2.5, -3] if scalars else []):
        expect = _dtype_or_error(fn, torch, make(torch, a, 1) + 1, s)
        got = _dtype_or_error(fn, flow, make(flow, a, 1) + 1, s)
        if expect != got:
            diffs.append((a, s, expect, got))
    assert not diffs, f"{op}: dtypes differ from torch: {diffs}"


UNARY_FLOAT = ["exp", "log", "sqrt", "sin", "tanh", "sigmoid", "erf", "log1p", "reciprocal",
               "rsqrt", "atan"]


@pytest.mark.parametrize("op", UNARY_FLOAT)
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float16", "float64"])
def test_float_valued_unary_ops_promote_integers(op, dtype):
    expect = getattr(torch, op)(make(torch, dtype, 1)).dtype
    assert getattr(flow, op)(make(flow, dtype, 1)).dtype.name == _name(expect)


@pytest.mark.parametrize("op", ["abs", "neg", "square", "floor", "round", "sign"])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "int64", "float16"])
def test_dtype_keeping_unary_ops(op, dtype):
    fn = getattr(torch, op)
    expect = fn(make(torch, dtype, 1) + 2)
    got = getattr(flow, op)(make(flow, dtype, 1) + 2)
    assert got.dtype.name == _name(expect.dtype)
    np.testing.assert_array_equal(got.numpy().astype(np.float64),
                                  expect.numpy().astype(np.float64))


# ---- conversions ---------------------------------------------------------------------------
VALUES = [-2.7, -0.5, 0.0, 0.4, 1.5, 3.0, 15.9]
CONVERSIONS = [
    ("float", lambda t: t.float()),
    ("double", lambda t: t.double()),
    ("half", lambda t: t.half()),
    ("bfloat16", lambda t: t.bfloat16()),
    ("long", lambda t: t.long()),
    ("int", lambda t: t.int()),
    ("short", lambda t: t.short()),
    ("bool", lambda t: t.bool()),
    ("byte", lambda t: (t * t if t.is_floating_point() else t).byte()),
    ("to_dtype", lambda t: t.to(t.dtype if False else _mod(t).float64)),
    ("to_int8", lambda t: t.to(dtype=_mod(t).int8)),
    ("to_other", lambda t: t.to(_mod(t).ones(1, dtype=_mod(t).int16))),
    ("type_as", lambda t: t.type_as(_mod(t).ones(1, dtype=_mod(t).int32))),
]


def _mod(t):
    return torch if isinstance(t, torch.Tensor) else flow


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
    return t.numpy().astype(np.float32) if t.dtype is flow.bfloat16 else t.numpy()


@pytest.mark.parametrize(("name", "fn"), CONVERSIONS, ids=[c[0] for c in CONVERSIONS])
@pytest.mark.parametrize("src", ["float32", "float64", "int64", "bool"])
def test_conversions(name, fn, src):
    vals = np.array(VALUES, dtype=np.float64)
    if src == "bool":
        vals = vals > 0
    t = torch.tensor(vals).to(getattr(torch, src))
    f = flow.tensor(vals).to(getattr(flow, src))
    expect, got = fn(t), fn(f)
    assert got.dtype.name == _name(expect.dtype)
    np.testing.assert_array_equal(_np(got).astype(np.float64), _np(expect).astype(np.float64))


def test_to_same_dtype_returns_self_and_copy_makes_new():
    x = flow.ones(3)
    assert x.to(flow.float32) is x and x.float() is x
    assert x.to(flow.float32, copy=True) is not x


def test_conversion_keeps_gradient_flowing_in_the_source_dtype():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    (x.double() * 3).sum().backward()
    assert x.grad.dtype is flow.float32 and x.grad.tolist() == [3.0, 3.0]


# ---- the default dtype ---------------------------------------------------------------------
DEFAULT = [
    ("tensor_float", lambda m: m.tensor(1.5)),
    ("tensor_list", lambda m: m.tensor([1, 2.5])),
    ("tensor_int", lambda m: m.tensor([1, 2])),
    ("zeros", lambda m: m.zeros(2)),
    ("ones_like_int", lambda m: m.ones_like(m.tensor([1]))),
    ("full_float", lambda m: m.full((2,), 1.5)),
    ("arange_float", lambda m: m.arange(0.0, 2.0)),
    ("arange_int", lambda m: m.arange(3)),
    ("linspace", lambda m: m.linspace(0, 1, 3)),
    ("randn", lambda m: m.randn(2)),
    ("rand", lambda m: m.rand(2)),
    ("int_times_float", lambda m: m.tensor([1, 2]) * 1.5),
    ("int_div", lambda m: m.tensor([1, 2]) / 2),
    ("int_exp", lambda m: m.exp(m.tensor([1, 2]))),
    ("bool_plus_float", lambda m: m.tensor([True]) + 0.5),
    ("float32_times_float", lambda m: m.ones(2, dtype=m.float32) * 1.5),
    ("half_times_float", lambda m: m.ones(2, dtype=m.float16) * 1.5),
    ("int_mean_dtype", lambda m: m.tensor([1, 2]).float()),
    ("softmax_int", lambda m: m.softmax(m.tensor([1, 2]).double(), 0)),
]


@pytest.mark.parametrize("default", ["float32", "float64", "float16"])
@pytest.mark.parametrize(("name", "fn"), DEFAULT, ids=[d[0] for d in DEFAULT])
def test_set_default_dtype(name, fn, default):
    old_t, old_f = torch.get_default_dtype(), flow.get_default_dtype()
    try:
        torch.set_default_dtype(getattr(torch, default))
        flow.set_default_dtype(getattr(flow, default))
        assert flow.get_default_dtype() is getattr(flow, default)
        assert fn(flow).dtype.name == _name(fn(torch).dtype)
    finally:
        torch.set_default_dtype(old_t)
        flow.set_default_dtype(old_f)


def test_set_default_dtype_rejects_integers():
    with pytest.raises(TypeError, match="set_default_dtype: only floating dtypes.*int64"):
        flow.set_default_dtype(flow.int64)
    assert flow.get_default_dtype() is flow.float32


def test_set_default_tensor_type_as_torch():
    # old scripts start with torch.set_default_tensor_type(torch.DoubleTensor)
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            flow.set_default_tensor_type(flow.DoubleTensor)
        assert flow.zeros(1).dtype is flow.float64
        with pytest.warns(UserWarning):
            flow.set_default_tensor_type("torch.FloatTensor")
        assert flow.get_default_dtype() is flow.float32
        for bad in (flow.LongTensor, "torch.IntTensor", flow.float64):
            with pytest.warns(UserWarning), pytest.raises(TypeError, match="floating-point"):
                flow.set_default_tensor_type(bad)
    finally:
        flow.set_default_dtype(flow.float32)
    assert flow.version.cuda is None and flow.version.__version__ == flow.__version__


# ---- dtype objects -------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_dtype_properties(name):
    t, f = getattr(torch, name), getattr(flow, name)
    assert f.is_floating_point == t.is_floating_point
    assert f.is_signed == t.is_signed
    assert f.itemsize == t.itemsize
    assert flow.ones(2, dtype=f).element_size() == t.itemsize
    assert flow.ones(2, dtype=f).is_floating_point() == t.is_floating_point
    assert flow.dtypes.as_dtype(t) is f and flow.dtypes.as_dtype(name) is f
    assert repr(f) == f"flowgrad.{name}"


def test_dtype_aliases():
    assert flow.half is flow.float16 and flow.float is flow.float32
    assert flow.double is flow.float64 and flow.long is flow.int64 and flow.int is flow.int32
    # as torch: dtype=float is float64 and dtype=complex complex128, not the default dtype
    assert flow.dtypes.as_dtype(float) is flow.float64
    assert flow.dtypes.as_dtype(complex) is flow.complex128
    t = torch.zeros(2, dtype=float), torch.ones(2).to(complex), torch.arange(3, dtype=float)
    f = flow.zeros(2, dtype=float), flow.ones(2).to(complex), flow.arange(3, dtype=float)
    assert [str(a.dtype).split(".")[1] for a in f] == [str(a.dtype).split(".")[1] for a in t]
    assert flow.dtypes.as_dtype(int) is flow.int64 and flow.dtypes.as_dtype(bool) is flow.bool
    assert flow.short is flow.int16 and flow.ones(2).short().dtype is flow.short


def test_module_constants_are_torchs():
    # programs write torch.inf, torch.pi, x[:, torch.newaxis]: a missing name is an error
    for name in ("inf", "nan", "pi", "e", "newaxis"):
        ours, theirs = getattr(flow, name), getattr(torch, name)
        assert (ours is None and theirs is None) or repr(ours) == repr(theirs)
    assert flow.ones(2, 3)[:, flow.newaxis].shape == (2, 1, 3)


def test_unknown_dtype_errors():
    with pytest.raises(TypeError, match="unknown dtype 'complex32'"):
        flow.dtypes.as_dtype("complex32")
    with pytest.raises(TypeError, match="does not support NumPy dtype uint16"):
        flow.tensor(np.ones(2, np.uint16))


# ---- half precision: same values as torch, within the format's precision -------------------
LOW = [
    ("add", lambda m, x, y: x + y),
    ("mul", lambda m, x, y: x * y * 3),
    ("div", lambda m, x, y: x / (y.abs() + 1)),
    ("exp", lambda m, x, y: m.exp(x)),
    ("tanh", lambda m, x, y: m.tanh(x)),
    ("sigmoid", lambda m, x, y: m.sigmoid(y)),
    ("erf", lambda m, x, y: m.erf(x)),
    ("relu", lambda m, x, y: m.relu(x)),
    ("gelu", lambda m, x, y: m.nn.functional.gelu(x)),
    ("softplus", lambda m, x, y: m.nn.functional.softplus(x)),
    ("softmax", lambda m, x, y: m.softmax(x, dim=-1)),
    ("log_softmax", lambda m, x, y: m.log_softmax(x, dim=-1)),
    ("clamp", lambda m, x, y: m.clamp(x, -0.5, 0.5)),
    ("where", lambda m, x, y: m.where(x > y, x, y)),
    ("floor", lambda m, x, y: m.floor(x * 3)),
    ("nan_to_num", lambda m, x, y: m.nan_to_num(m.log(x))),
    ("elu", lambda m, x, y: m.nn.functional.elu(x)),
    ("sum", lambda m, x, y: (x * y).sum(-1)),
]


@pytest.mark.parametrize(("name", "fn"), LOW, ids=[c[0] for c in LOW])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_forward_and_grad(name, fn, dtype):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    td, fd = getattr(torch, dtype), getattr(flow, dtype)
    tx, ty = (torch.tensor(v).to(td).requires_grad_() for v in (a, b))
    fx, fy = (flow.tensor(v).to(fd).requires_grad_() for v in (a, b))
    tout, fout = fn(torch, tx, ty), fn(flow, fx, fy)
    assert fout.dtype is fd and _name(tout.dtype) == dtype
    tol = 1e-2 if dtype == "float16" else 4e-2
    np.testing.assert_allclose(_np(fout.detach()), _np(tout.detach()), rtol=tol, atol=tol)
    if tout.requires_grad:
        tout.float().sum().backward()
        fout.float().sum().backward()
        for f, t in ((fx, tx), (fy, ty)):
            assert (f.grad is None) == (t.grad is None)
            if t.grad is not None:
                assert f.grad.dtype is fd
                np.testing.assert_allclose(_np(f.grad), _np(t.grad), rtol=tol, atol=tol)
