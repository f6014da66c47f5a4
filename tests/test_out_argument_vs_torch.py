"""torch's `out=` on the torch.* functions (`flowgrad/__init__.py: _OUT_NAMES`), in torch and
in flowgrad: the same raise/no-raise, `out` returned, resized and written with the same values
and dtype. Before, all of these raised TypeError: unexpected keyword 'out'."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from vs_torch import assert_same_raise, outcome

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
    }


NAMES = list(_calls(flow))
OUTS = [("float32", (2, 3)), ("float32", (0,)), ("float32", (6,)), ("float64", (2, 3)),
        ("int64", (2, 3)), ("bfloat16", (2, 3)), ("int32", (1,))]


def _run(T, name, dtype, shape):
    out = T.zeros(shape, dtype=getattr(T, dtype))
    result, error = outcome(lambda: _calls(T)[name](out))
    assert error is not None or result is out
    return (None, error) if error is not None else (out, None)


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
