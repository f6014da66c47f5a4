"""Which dtypes an op accepts, against torch: where torch's kernel is not compiled for a dtype
(an int64 gelu, a complex MSE) flowgrad raises too, with the same exception type, instead of
computing something else in NumPy (integer arithmetic, a square without the modulus); where
torch computes, flowgrad gives its dtype and values."""
import numpy as np
import pytest
import torch

import flowgrad as flow

DTYPES = ("int64", "int32", "uint8", "bool", "complex64", "float32", "float64")
ACTIVATIONS = {
    "relu": {}, "relu6": {}, "leaky_relu": {}, "elu": {}, "selu": {}, "celu": {}, "gelu": {},
    "mish": {}, "softplus": {}, "softsign": {}, "hardtanh": {}, "hardsigmoid": {},
    "hardswish": {}, "hardshrink": {}, "softshrink": {}, "tanhshrink": {}, "logsigmoid": {},
    "softmax": {"dim": 0}, "log_softmax": {"dim": 0}, "softmin": {"dim": 0}, "glu": {"dim": 0},
    "rrelu": {}, "threshold": {"threshold": 1.5, "value": 7.9}, "sigmoid": {}, "tanh": {},
}
OTHERS = {
    "lerp_scalar": lambda m, x: m.lerp(x, x * 2, 0.5),
    "lerp_tensor": lambda m, x: m.lerp(x, x * 2, m.ones_like(x)),
    "nansum": lambda m, x: m.nansum(x),
    "mse_loss": lambda m, x: m.nn.functional.mse_loss(x, x.flip(0)),
    "smooth_l1_loss": lambda m, x: m.nn.functional.smooth_l1_loss(x, x.flip(0)),
    "huber_loss": lambda m, x: m.nn.functional.huber_loss(x, x.flip(0)),
    "cosine_similarity": lambda m, x: m.nn.functional.cosine_similarity(x[None], x.flip(0)[None]),
    "frac": lambda m, x: m.frac(x),
    "abs": lambda m, x: m.abs(x),
    "floor": lambda m, x: m.floor(x),
    "ceil": lambda m, x: m.ceil(x),
    "trunc": lambda m, x: m.trunc(x),
    "round": lambda m, x: m.round(x),
    "trace": lambda m, x: m.trace(x.reshape(2, 2)),
    "argmax": lambda m, x: m.argmax(x),
    "argmin_dim": lambda m, x: m.argmin(x.reshape(2, 2), 1),
    "logcumsumexp": lambda m, x: m.logcumsumexp(x, 0),
    "median": lambda m, x: m.median(x),
    "median_dim": lambda m, x: m.median(x.reshape(2, 2), 1).values,
    "nanmedian": lambda m, x: m.nanmedian(x),
}


def _outcome(m, fn, dtype):
    x = m.tensor([1, 2, 3, 4]).to(getattr(m, dtype))
    try:
        y = fn(m, x)
    except (RuntimeError, NotImplementedError, TypeError) as error:
        return type(error).__name__
    return str(y.dtype).split(".")[-1], y.detach().numpy()


def _compare(fn, dtype):
    ours, theirs = _outcome(flow, fn, dtype), _outcome(torch, fn, dtype)
    if isinstance(theirs, str) or isinstance(ours, str):
        if dtype.startswith("complex") and isinstance(ours, str):
            return  # flowgrad may refuse complex inputs it has not audited; never compute wrong
        assert ours == theirs
        return
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_dtypes_as_torch(name, dtype):
    _compare(lambda m, x: getattr(m.nn.functional, name)(x, **ACTIVATIONS[name]), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other_dtypes_as_torch(name, dtype):
    _compare(OTHERS[name], dtype)
