"""Integer and bool tensors through ~100 ops, in torch and in flowgrad: the same result dtype
(true division, sqrt, mean with dtype= ... promote to float; sums of bool count), values, and
the same refusals (bool matmul, dot, addmm, addcmul and topk; one_hot of anything but int64;
embedding indices other than int32/int64), which flowgrad used to compute."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from vs_torch import assert_same_raise, outcome

import flowgrad as flow

DTYPES = ["int64", "int32", "uint8", "int8", "bool"]


def _set(x, v):
    x[0] = v
    return x


def _cases(T, d):
    F = T.nn.functional
    a = T.tensor([[1, 2, 3], [4, 5, 0]]).to(d)
    b = T.tensor([[2, 1, 3], [1, 2, 1]]).to(d)
    return {
        "add": lambda: a + b,
        "add_f": lambda: a + 2.5,
        "radd_i": lambda: 3 + a,
        "sub": lambda: a - b,
        "mul_f": lambda: a * 0.5,
        "div": lambda: a / b,
        "floordiv": lambda: a // b,
        "mod": lambda: a % b,
        "pow": lambda: a ** 2,
        "pow_f": lambda: a ** 0.5,
        "rpow": lambda: 2 ** a,
        "neg": lambda: -a,
        "abs": lambda: a.abs(),
        "sqrt": lambda: a.sqrt(),
        "exp": lambda: a.exp(),
        "sigmoid": lambda: a.sigmoid(),
        "sum": lambda: a.sum(),
        "prod": lambda: a.prod(),
        "cumsum": lambda: a.cumsum(0),
        "mean": lambda: a.mean(),
        "max": lambda: a.max(),
        "argmax": lambda: a.argmax(),
        "sort": lambda: a.sort()[0],
        "clamp": lambda: a.clamp(1, 3),
        "clamp_f": lambda: a.clamp(0.5, 2.5),
        "where": lambda: T.where(a > 1, a, 0.5),
        "maximum": lambda: T.maximum(a, b),
        "eq": lambda: a == b,
        "bitand": lambda: a & b,
        "bitnot": lambda: ~a,
        "lshift": lambda: a << 1,
        "sign": lambda: a.sign(),
        "round": lambda: a.round(),
        "floor": lambda: a.floor(),
        "relu": lambda: F.relu(a),
        "softmax": lambda: F.softmax(a, 0),
        "norm": lambda: a.norm(),
        "var": lambda: a.var(),
        "matmul": lambda: a @ b.T,
        "dot": lambda: T.dot(a[0], b[0]),
        "sum_dtype": lambda: a.sum(dtype=T.float32),
        "cumprod": lambda: a.cumprod(1),
        "mean_dtype": lambda: a.mean(dtype=T.float64),
        "true_divide": lambda: T.true_divide(a, 2),
        "reciprocal": lambda: a.reciprocal(),
        "log": lambda: a.log(),
        "square": lambda: a.square(),
        "frac": lambda: a.frac(),
        "trunc": lambda: a.trunc(),
        "ceil": lambda: a.ceil(),
        "lerp": lambda: T.lerp(a, b, 0.5),
        "atan2": lambda: T.atan2(a, b),
        "hypot": lambda: T.hypot(a, b),
        "fmod_f": lambda: T.fmod(a, 1.5),
        "remainder_f": lambda: T.remainder(a, 1.5),
        "div_floor": lambda: T.div(a, b, rounding_mode="floor"),
        "div_trunc": lambda: T.div(a, b, rounding_mode="trunc"),
        "gcd": lambda: T.gcd(a, b),
        "lcm": lambda: T.lcm(a, b),
        "logical_and": lambda: T.logical_and(a, b),
        "cummax": lambda: a.cummax(0)[0],
        "median": lambda: a.median(),
        "mode": lambda: a.mode()[0],
        "topk": lambda: a.flatten().topk(2)[0],
        "unique": lambda: a.unique(),
        "diff": lambda: a.diff(),
        "cross": lambda: T.cross(a, b, dim=1),
        "outer": lambda: T.outer(a[0], b[0]),
        "trace": lambda: a[:, :2].trace(),
        "kron": lambda: T.kron(a, b),
        "std": lambda: a.std(),
        "logsumexp": lambda: a.logsumexp(0),
        "erf": lambda: a.erf(),
        "nan_to_num": lambda: a.nan_to_num(),
        "isnan": lambda: a.isnan(),
        "sinc": lambda: a.sinc(),
        "heaviside": lambda: T.heaviside(a, b),
        "copysign": lambda: T.copysign(a, b),
        "xlogy": lambda: T.xlogy(a, b),
        "float_power": lambda: T.float_power(a, 2),
        "addcmul": lambda: T.addcmul(a, a, b),
        "addcdiv": lambda: T.addcdiv(a, a, b),
        "amax": lambda: a.amax(0),
        "nansum": lambda: T.nansum(a),
        "count_nonzero": lambda: T.count_nonzero(a),
        "histc": lambda: T.histc(a),
        "bincount": lambda: a.flatten().bincount() if a.dtype != T.bool else None,
        "mse": lambda: F.mse_loss(a, b),
        "l1": lambda: F.l1_loss(a, b),
        "one_hot": lambda: F.one_hot(a),
        "embedding": lambda: F.embedding(a, T.ones(6, 2)),
        "addmm": lambda: T.addmm(a[:, :2], a, b.T),
        "iadd_f": lambda: a.clone().add_(1.5),
        "imul_i": lambda: a.clone().mul_(2),
        "idiv": lambda: a.clone().div_(2),
        "ipow_f": lambda: a.clone().pow_(0.5),
        "fill_f": lambda: a.clone().fill_(2.7),
        "setitem_f": lambda: _set(a.clone(), 2.7),
        "masked_fill_f": lambda: a.masked_fill(a > 1, 2.7),
        "index_fill_f": lambda: a.index_fill(1, T.tensor([0]), 2.7),
        "scatter_f": lambda: a.scatter(1, T.tensor([[0], [1]]), 2.7),
        "clamp_min_f": lambda: a.clamp_min(1.5),
        "bitwise_xor_s": lambda: a ^ 1,
        "rshift": lambda: a >> 1,
        "bitwise_or_b": lambda: a | True,
    }


NAMES = list(_cases(flow, flow.int64))


def _run(T, name, dtype):
    return outcome(lambda: _cases(T, getattr(T, dtype))[name]())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_integer_and_bool_inputs_as_torch(name, dtype):
    expected, torch_error = _run(torch, name, dtype)
    got, error = _run(flow, name, dtype)
    if torch_error is not None or error is not None:
        assert_same_raise(torch_error, error)
        return
    if expected is None:
        assert got is None
        return
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
    np.testing.assert_allclose(got.detach().to(flow.float64).numpy(),
                               expected.detach().to(torch.float64).numpy(), rtol=1e-6)


REDUCTIONS = {
    "sum": lambda T, a, d: a.sum(dtype=d), "sum dim": lambda T, a, d: a.sum(1, dtype=d),
    "mean": lambda T, a, d: a.mean(dtype=d), "mean dim": lambda T, a, d: a.mean(0, dtype=d),
    "prod": lambda T, a, d: a.prod(dtype=d), "prod dim": lambda T, a, d: a.prod(1, dtype=d),
    "cumsum": lambda T, a, d: a.cumsum(1, dtype=d),
    "cumprod": lambda T, a, d: a.cumprod(1, dtype=d),
    "nansum": lambda T, a, d: T.nansum(a, dtype=d),
    "nanmean": lambda T, a, d: T.nanmean(a, dtype=d),
    "softmax": lambda T, a, d: T.nn.functional.softmax(a, 1, dtype=d),
    "log_softmax": lambda T, a, d: T.nn.functional.log_softmax(a, 1, dtype=d),
    "vector_norm": lambda T, a, d: T.linalg.vector_norm(a, dtype=d),
}
SOURCES = ["float32", "bfloat16", "int32", "int64", "bool", "float64", "uint8"]
TARGETS = ["float64", "float32", "int64", "bfloat16", "int32", "float16"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_dtype_argument_as_torch(name, source, target):
    # sum/prod/cumsum/cumprod(dtype=int32) came out int64 (NumPy widens integer sums);
    # vector_norm narrowed or took integer inputs, nanmean took an integer dtype
    def run(T):
        a = T.tensor([[1, 2, 3], [4, 5, 6]]).to(getattr(T, source))
        return outcome(lambda: REDUCTIONS[name](T, a, getattr(T, target)))
    expected, torch_error = run(torch)
    got, error = run(flow)
    assert_same_raise(torch_error, error)
    if expected is not None:
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        np.testing.assert_allclose(got.to(flow.float64).numpy(),
                                   expected.to(torch.float64).numpy(), rtol=2e-2)
