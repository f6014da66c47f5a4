"""torch's `out=` on the torch.* functions (`flowgrad/__init__.py: _OUT_NAMES`), in torch and
in flowgrad: the same raise/no-raise, `out` returned, resized and written with the same values
and dtype. Before, all of these raised TypeError: unexpected keyword 'out'."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from vs_torch import assert_same_raise, outcome, outcome_into, outcome_out

import flowgrad as flow


def _calls(T):
    a = T.tensor([[1.5, -2.0, 3.0], [0.5, 2.0, -1.0]])
    b = T.tensor([[2.0, 1.0, 3.0], [1.0, 2.0, 1.0]])
    ai = T.tensor([[1, 2, 3], [4, 5, 6]])
    return {
        "add": lambda o: T.add(a, b, out=o), "mul": lambda o: T.mul(a, b, out=o),
        "sub": lambda o: T.sub(a, b, out=o), "div": lambda o: T.div(ai, ai, out=o),
        "sum": lambda o: T.sum(a, 1, out=o), "mean": lambda o: T.mean(a, 1, out=o),
        "prod": lambda o: T.prod(a, 1, out=o), "cumsum": lambda o: T.cumsum(a, 1, out=o),
        "matmul": lambda o: T.matmul(a, b.T, out=o), "mm": lambda o: T.mm(a, b.T, out=o),
        "exp": lambda o: T.exp(a, out=o), "sqrt of int": lambda o: T.sqrt(ai, out=o),
        "sigmoid": lambda o: T.sigmoid(a, out=o), "tanh": lambda o: T.tanh(a, out=o),
        "abs": lambda o: T.abs(a, out=o), "round": lambda o: T.round(a, out=o),
        "sign": lambda o: T.sign(a, out=o), "floor of int": lambda o: T.floor(ai, out=o),
        "eq": lambda o: T.eq(a, b, out=o), "lt": lambda o: T.lt(a, 0.5, out=o),
        "logical_not": lambda o: T.logical_not(a, out=o),
        "where": lambda o: T.where(a > 0, a, b, out=o),
        "amax": lambda o: T.amax(a, 1, out=o), "argmax": lambda o: T.argmax(a, 1, out=o),
        "pow": lambda o: T.pow(a, 2, out=o), "remainder": lambda o: T.remainder(a, 1.5, out=o),
        "maximum": lambda o: T.maximum(a, b, out=o), "stack": lambda o: T.stack([a, b], out=o),
        "bitwise_and": lambda o: T.bitwise_and(ai, ai, out=o),
        "lerp": lambda o: T.lerp(a, b, 0.5, out=o),
        "addmm": lambda o: T.addmm(a[:, :2], a, b.T, out=o),
        **_more_calls(T, a, b, ai),
    }


def _more_calls(T, a, b, ai):
    v = T.tensor([1.0, -2.0, 0.5])
    sq = T.tensor([[2.0, 0.5], [0.5, 3.0]])
    low = T.linalg.cholesky(sq)
    idx = T.tensor([[0, 2, 1], [1, 1, 0]])
    edges = T.tensor([-1.0, 0.0, 2.0])
    return {
        "addbmm": lambda o: T.addbmm(a[:, :2], a.reshape(1, 2, 3), b.T.reshape(1, 3, 2), out=o),
        "addr": lambda o: T.addr(a[:, :3], a[0], b[1], out=o),
        "angle": lambda o: T.angle(a, out=o), "any": lambda o: T.any(a > 1, 1, out=o),
        "bitwise_left_shift": lambda o: T.bitwise_left_shift(ai, 1, out=o),
        "bitwise_right_shift": lambda o: T.bitwise_right_shift(ai, 1, out=o),
        "bucketize": lambda o: T.bucketize(a, edges, out=o),
        "cholesky_inverse": lambda o: T.cholesky_inverse(low, out=o),
        "cholesky_solve": lambda o: T.cholesky_solve(sq * 2 + 1, low, out=o),
        "conj_physical": lambda o: T.conj_physical(a, out=o),
        "deg2rad": lambda o: T.deg2rad(a, out=o), "diag": lambda o: T.diag(v, out=o),
        "diff": lambda o: T.diff(a, dim=1, out=o), "digamma": lambda o: T.digamma(b, out=o),
        "fix": lambda o: T.fix(a, out=o), "float_power": lambda o: T.float_power(a, 2, out=o),
        "gather": lambda o: T.gather(a, 1, idx, out=o), "gcd": lambda o: T.gcd(ai, ai + 2, out=o),
        "ger": lambda o: T.ger(v, v, out=o), "greater": lambda o: T.greater(a, b, out=o),
        "greater_equal": lambda o: T.greater_equal(a, b, out=o),
        "heaviside": lambda o: T.heaviside(a, b, out=o), "histc": lambda o: T.histc(a, 4, out=o),
        "i0": lambda o: T.i0(a, out=o), "igamma": lambda o: T.igamma(b, b, out=o),
        "igammac": lambda o: T.igammac(b, b, out=o),
        "index_select": lambda o: T.index_select(a, 1, idx[0], out=o),
        "inner": lambda o: T.inner(a, b, out=o), "inverse": lambda o: T.inverse(sq, out=o),
        "isneginf": lambda o: T.isneginf(a, out=o), "isposinf": lambda o: T.isposinf(a, out=o),
        "lcm": lambda o: T.lcm(ai, ai + 2, out=o), "ldexp": lambda o: T.ldexp(a, ai, out=o),
        "less": lambda o: T.less(a, b, out=o), "less_equal": lambda o: T.less_equal(a, b, out=o),
        "lgamma": lambda o: T.lgamma(b, out=o), "logaddexp2": lambda o: T.logaddexp2(a, b, out=o),
        "logcumsumexp": lambda o: T.logcumsumexp(a, 1, out=o),
        "masked_select": lambda o: T.masked_select(a, a > 0, out=o),
        "msort": lambda o: T.msort(a, out=o), "nan_to_num": lambda o: T.nan_to_num(a, out=o),
        "nanmean": lambda o: T.nanmean(a, 1, out=o),
        "nanquantile": lambda o: T.nanquantile(a, 0.5, 1, out=o),
        "not_equal": lambda o: T.not_equal(a, b, out=o),
        "polygamma": lambda o: T.polygamma(1, b, out=o),
        "quantile": lambda o: T.quantile(a, 0.25, dim=1, out=o),
        "rad2deg": lambda o: T.rad2deg(a, out=o), "renorm": lambda o: T.renorm(a, 2, 0, 1.0, out=o),
        "searchsorted": lambda o: T.searchsorted(edges, a, out=o),
        "signbit": lambda o: T.signbit(a, out=o), "sinc": lambda o: T.sinc(a, out=o),
        "take_along_dim": lambda o: T.take_along_dim(a, idx, 1, out=o),
        "tensordot": lambda o: T.tensordot(a, b.T, dims=1, out=o),
        "tril": lambda o: T.tril(a, out=o), "triu": lambda o: T.triu(a, 1, out=o),
        "vdot": lambda o: T.vdot(v, v, out=o),
        "max of two": lambda o: T.max(a, b, out=o),
        "sum with dtype": lambda o: T.sum(a, 1, dtype=T.float64, out=o),
        "all": lambda o: T.all(a > 0, 1, out=o), "cumprod": lambda o: T.cumprod(a, 1, out=o),
        "sum of all": lambda o: T.sum(a, out=o), "prod of all": lambda o: T.prod(a, out=o),
        "median of all": lambda o: T.median(a, out=o), "mean of all": lambda o: T.mean(a, out=o),
        "nanmedian of all": lambda o: T.nanmedian(a, out=o),
        "cumulative_trapezoid": lambda o: T.cumulative_trapezoid(a, out=o),
        "cumsum with dtype": lambda o: T.cumsum(a, 1, dtype=T.float32, out=o),
    }


NAMES = list(_calls(flow))
OUTS = [("float32", (2, 3)), ("float32", (0,)), ("float32", (6,)), ("float64", (2, 3)),
        ("int64", (2, 3)), ("bfloat16", (2, 3)), ("int32", (1,)), ("bool", (2, 3))]


def _run(T, name, dtype, shape):
    return outcome_out(_calls(T)[name], T.zeros(shape, dtype=getattr(T, dtype)))


@pytest.mark.parametrize("dtype,shape", OUTS, ids=[f"{d}-{s}" for d, s in OUTS])
@pytest.mark.parametrize("name", NAMES)
def test_out_argument_as_torch(name, dtype, shape):
    expected, torch_error = _run(torch, name, dtype, shape)
    got, error = _run(flow, name, dtype, shape)
    assert_same_raise(torch_error, error)
    if expected is not None:
        assert tuple(got.shape) == tuple(expected.shape)
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        np.testing.assert_allclose(got.to(flow.float64).numpy(),
                                   expected.to(torch.float64).numpy(), rtol=1e-2)


def _tuple_calls(T):
    a = T.tensor([[1.5, -2.0, 3.0], [0.5, 2.0, -1.0]])
    return {
        "max": (lambda o: T.max(a, 1, out=o), ("float32", "int64")),
        "min": (lambda o: T.min(a, 1, keepdim=True, out=o), ("float32", "int64")),
        "sort": (lambda o: T.sort(a, 1, descending=True, out=o), ("float32", "int64")),
        "topk": (lambda o: T.topk(a, 2, out=o), ("float32", "int64")),
        "kthvalue": (lambda o: T.kthvalue(a, 2, 1, out=o), ("float32", "int64")),
        "mode": (lambda o: T.mode(a.round(), 1, out=o), ("float32", "int64")),
        "cummax": (lambda o: T.cummax(a, 1, out=o), ("float32", "int64")),
        "cummin": (lambda o: T.cummin(a, 0, out=o), ("float32", "int64")),
        "aminmax": (lambda o: T.aminmax(a, dim=1, out=o), ("float32", "float32")),
        "frexp": (lambda o: T.frexp(a, out=o), ("float32", "int32")),
    }


TUPLE_NAMES = list(_tuple_calls(flow))
TUPLE_OUTS = ["right dtypes", "empty", "wrong shape", "float64 first", "int32 second",
              "one tensor", "requires grad"]


def _run_tuple(T, name, variant):
    call, dtypes = _tuple_calls(T)[name]
    shape = (0,) if variant == "empty" else (5, 1) if variant == "wrong shape" else (2, 3)
    kinds = list(dtypes)
    if variant == "float64 first":
        kinds[0] = "float64"
    if variant == "int32 second" and kinds[1] != "int32":
        kinds[1] = "int32"
    outs = tuple(T.zeros(shape, dtype=getattr(T, k)) for k in kinds)
    if variant == "requires grad":
        outs = (outs[0].requires_grad_(), outs[1])
    if variant == "one tensor":
        outs = outs[0]
    return outcome_into(call, outs)


@pytest.mark.parametrize("variant", TUPLE_OUTS)
@pytest.mark.parametrize("name", TUPLE_NAMES)
def test_out_tuple_as_torch(name, variant):
    """torch.max(x, 1, out=(values, indices)) and the other functions of several results:
    each `out` written (resized) and returned in the named tuple; a wrong dtype, a single
    tensor or an `out` requiring grad raise where torch's do."""
    expected, torch_error = _run_tuple(torch, name, variant)
    got, error = _run_tuple(flow, name, variant)
    assert_same_raise(torch_error, error)
    if expected is not None:
        for field, g in zip(got._fields, got):  # (torch's structseq: no _fields)
            e = getattr(expected, field)
            assert tuple(g.shape) == tuple(e.shape)
            assert str(g.dtype).split(".")[-1] == str(e.dtype).split(".")[-1]
            np.testing.assert_array_equal(g.detach().to(flow.float64).numpy(),
                                          e.detach().to(torch.float64).numpy())


FACTORIES = {
    "arange": lambda T, o: T.arange(1, 7, out=o), "zeros": lambda T, o: T.zeros(2, 3, out=o),
    "ones": lambda T, o: T.ones(2, 3, out=o), "empty": lambda T, o: T.empty(2, 3, out=o),
    "full": lambda T, o: T.full((2, 3), 1.5, out=o),
    "linspace": lambda T, o: T.linspace(0, 1, 6, out=o),
    "logspace": lambda T, o: T.logspace(0, 1, 6, out=o), "eye": lambda T, o: T.eye(3, out=o),
    "randn": lambda T, o: T.randn(2, 3, out=o), "rand": lambda T, o: T.rand(2, 3, out=o),
    "randint": lambda T, o: T.randint(0, 5, (2, 3), out=o),
    "randperm": lambda T, o: T.randperm(6, out=o),
    "arange dtype": lambda T, o: T.arange(4, dtype=T.float64, out=o),
}
_RANDOM = ("empty", "randn", "rand", "randint", "randperm")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("name", list(FACTORIES))
def test_factory_out_as_torch(name, dtype):
    """torch.arange(6, out=o), zeros, randn, ...: made in out's dtype (unless dtype= says),
    `out` resized and returned; values compared where they are not random."""
    results = []
    for T in (torch, flow):
        out = T.zeros(0, dtype=getattr(T, dtype))
        result, error = outcome(lambda: FACTORIES[name](T, out))
        assert error is not None or result is out
        results.append((out, error))
    (expected, torch_error), (got, error) = results
    assert_same_raise(torch_error, error)
    if torch_error is None:
        assert tuple(got.shape) == tuple(expected.shape)
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        if name not in _RANDOM:
            np.testing.assert_allclose(got.to(flow.float64).numpy(),
                                       expected.to(torch.float64).numpy(), rtol=1e-6)
