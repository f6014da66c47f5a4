"""The scatter family on complex tensors against torch 2.13: scatter(reduce=add/multiply),
scatter_reduce, index_reduce, scatter_add, index_add, put/index_put (accumulate): values, the
raise/no-raise of each (torch has no complex amax/amin, no complex index_reduce with
include_self=False) and when the autograd refusals come (scatter_reduce/index_reduce refuse
a complex call that records a gradient; scatter(reduce=) has no derivative, at backward)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from vs_torch import ERRORS

import flowgrad

DTYPES = ("complex64", "complex128", "float64")


def _values(m, shape, dtype, k):
    a = m.arange(int(np.prod(shape)), dtype=m.float64).reshape(shape)
    re, im = m.sin(a * 1.7 + k) * 2, m.cos(a * 0.9 + 2 * k)
    if not dtype.startswith("complex"):
        return re.to(getattr(m, dtype))
    return m.complex(re, im).to(getattr(m, dtype))


def _index(m):
    return m.tensor([[0, 1, 2, 0], [0, 2, 1, 0]])


def _inplace(name, *args, **kw):
    def call(m, x, s):
        y = x.clone()
        getattr(y, name)(*args(m, s), **kw)
        return y
    return call


CASES = {
    "scatter_add_mode": lambda m, x, s: m.scatter(x, 0, _index(m), s, reduce="add"),
    "scatter_multiply_mode": lambda m, x, s: m.scatter(x, 0, _index(m), s, reduce="multiply"),
    "scatter_value_add": lambda m, x, s: m.scatter(x, 0, _index(m), 1.5 - 2j
                                                   if x.is_complex() else 1.5, reduce="add"),
    "scatter_value_multiply": lambda m, x, s: x.scatter(0, _index(m), 2.0, reduce="multiply"),
    "scatter__add": _inplace("scatter_", lambda m, s: (0, _index(m), s), reduce="add"),
    "scatter__multiply": _inplace("scatter_", lambda m, s: (0, _index(m), s),
                                  reduce="multiply"),
    "scatter_add": lambda m, x, s: m.scatter_add(x, 0, _index(m), s),
    "index_add": lambda m, x, s: x.index_add(0, m.tensor([0, 2]), s, alpha=2),
    "put_accumulate": lambda m, x, s: x.put(m.tensor([0, 5, 0]), s[0, :3], accumulate=True),
    "index_put_accumulate": lambda m, x, s: x.index_put((m.tensor([0, 2]),), s,
                                                        accumulate=True),
}
for _red in ("sum", "prod", "mean", "amax", "amin"):
    for _incl in (True, False):
        CASES[f"scatter_reduce_{_red}_{_incl}"] = (
            lambda m, x, s, r=_red, i=_incl: m.scatter_reduce(x, 0, _index(m), s, r,
                                                              include_self=i))
        CASES[f"scatter_reduce__{_red}_{_incl}"] = _inplace(
            "scatter_reduce_", lambda m, s: (0, _index(m), s), reduce=_red, include_self=_incl)
        if _red != "sum":
            CASES[f"index_reduce_{_red}_{_incl}"] = (
                lambda m, x, s, r=_red, i=_incl: x.index_reduce(0, m.tensor([0, 2]), s, r,
                                                                include_self=i))


def _run(m, name, dtype, grad):
    """(value, gradient of x and s, the error and where it came: 'forward' or 'backward')."""
    x = _values(m, (3, 4), dtype, 1).requires_grad_(grad)
    s = _values(m, (2, 4), dtype, 2).requires_grad_(grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            y = CASES[name](m, x, s)
        except ERRORS as error:
            return None, None, (type(error), "forward")
        value = y.detach().numpy().copy()
        if not grad:
            return value, None, None
        try:
            w = _values(m, (3, 4), dtype, 3)
            gx, gs = m.autograd.grad((y * w).abs().sum(), (x, s), allow_unused=True)
        except ERRORS as error:
            return value, None, (type(error), "backward")
    return value, [None if g is None else g.numpy() for g in (gx, gs)], None


@pytest.mark.parametrize("grad", (False, True), ids=("no_grad", "grad"))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_scatter_family_as_torch(name, dtype, grad):
    if dtype == "float64" and not name.startswith("scatter_") or (
            dtype == "float64" and "reduce" in name):
        pytest.skip("real: only scatter(reduce=)'s missing derivative is checked here")
    want_value, want_grads, want_error = _run(torch, name, dtype, grad)
    value, grads, error = _run(flowgrad, name, dtype, grad)
    if want_error is None or error is None:
        assert want_error == error, (want_error, error)
    else:  # torch's NotImplementedError (no kernel) and RuntimeError (no derivative)
        assert issubclass(error[0], want_error[0]) and error[1] == want_error[1], (
            want_error, error)
    if want_value is not None:
        assert value.dtype == want_value.dtype and value.shape == want_value.shape
        np.testing.assert_allclose(value, want_value, rtol=1e-5, atol=1e-5)
    if want_grads is not None:
        for w, g in zip(want_grads, grads):
            assert (w is None) == (g is None)
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
