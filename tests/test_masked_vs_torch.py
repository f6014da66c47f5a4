"""flowgrad.masked against torch.masked: values, dtypes and gradients of every reduction and
normalization, with a mask that leaves one row fully masked out, a broadcast mask, no mask,
keepdim, dim=None and tuples, dtype=, integer and complex inputs, and the raises."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 5))
Y = RNG.standard_normal((3, 5))
MASK = RNG.random((3, 5)) > 0.4
MASK[1] = False  # a fully masked-out row
MASK[0, :2] = True  # at least two masked-in elements in row 0
ROW_MASK = np.array([True, False, True, True, False])  # broadcast over the rows
XI = RNG.integers(-5, 6, (3, 5))
XC = X + 1j * Y
BIG = RNG.standard_normal((2, 3, 4))
BIG_MASK = RNG.random((2, 3, 4)) > 0.3


def _run(m, call, arrays, masks, grad):
    leaves = [m.tensor(a, requires_grad=grad and a.dtype.kind in "fc") for a in arrays]
    mask_ts = [None if k is None else m.tensor(k) for k in masks]
    out = call(m, *leaves, *mask_ts)
    grads = None
    if grad and out.requires_grad:
        cot = np.random.default_rng(1).standard_normal(tuple(out.shape))
        if out.dtype.is_complex:
            cot = cot + 0.5j * cot
        out.backward(m.tensor(cot.astype(_np_dtype(out))))
        grads = [t.grad for t in leaves]
    return out, grads


def _np_dtype(out):
    return str(out.dtype).split(".")[-1]


def _numpy(t):
    return t.detach().numpy()


def check(call, arrays, masks, grad=True, rtol=1e-7, atol=1e-10):
    want, want_grads = _run(torch, call, arrays, masks, grad)
    got, got_grads = _run(flow, call, arrays, masks, grad)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(_numpy(got), _numpy(want), rtol=rtol, atol=atol)
    assert got.requires_grad == want.requires_grad
    if want_grads is not None:
        for g, w in zip(got_grads, want_grads):
            assert (g is None) == (w is None)
            if w is not None:
                np.testing.assert_allclose(_numpy(g), _numpy(w), rtol=rtol, atol=atol)


def one(fn):
    """A call on (input, mask)."""
    return lambda m, x, mask: fn(m.masked, x, mask)


REDUCTIONS = {
    "sum_dim": one(lambda mk, x, k: mk.sum(x, 1, mask=k)),
    "sum_all": one(lambda mk, x, k: mk.sum(x, mask=k)),
    "sum_tuple_keepdim": one(lambda mk, x, k: mk.sum(x, (0, 1), keepdim=True, mask=k)),
    "sum_dtype": one(lambda mk, x, k: mk.sum(x, 0, dtype=_f32(mk), mask=k)),
    "prod_dim_keepdim": one(lambda mk, x, k: mk.prod(x, 1, keepdim=True, mask=k)),
    "prod_all": one(lambda mk, x, k: mk.prod(x, mask=k)),
    "cumsum": one(lambda mk, x, k: mk.cumsum(x, 1, mask=k)),
    "cumsum_dtype": one(lambda mk, x, k: mk.cumsum(x, 0, dtype=_f32(mk), mask=k)),
    "cumprod": one(lambda mk, x, k: mk.cumprod(x, 1, mask=k)),
    "amax_dim": one(lambda mk, x, k: mk.amax(x, 1, mask=k)),
    "amax_all": one(lambda mk, x, k: mk.amax(x, mask=k)),
    "amin_keepdim": one(lambda mk, x, k: mk.amin(x, -1, keepdim=True, mask=k)),
    "amin_tuple": one(lambda mk, x, k: mk.amin(x, (0, 1), mask=k)),
    "mean_dim": one(lambda mk, x, k: mk.mean(x, 1, mask=k)),
    "mean_all_keepdim": one(lambda mk, x, k: mk.mean(x, keepdim=True, mask=k)),
    "mean_dtype": one(lambda mk, x, k: mk.mean(x, 0, dtype=_f32(mk), mask=k)),
    "median": one(lambda mk, x, k: mk.median(x, 1, mask=k)),
    "median_keepdim": one(lambda mk, x, k: mk.median(x, 0, keepdim=True, mask=k)),
    "logsumexp_dim": one(lambda mk, x, k: mk.logsumexp(x, 1, mask=k)),
    "logsumexp_all": one(lambda mk, x, k: mk.logsumexp(x, mask=k)),
    "norm2": one(lambda mk, x, k: mk.norm(x, 2.0, 1, mask=k)),
    "norm1_keepdim": one(lambda mk, x, k: mk.norm(x, 1, 0, keepdim=True, mask=k)),
    "norm_inf": one(lambda mk, x, k: mk.norm(x, float("inf"), 1, mask=k)),
    "norm_ninf": one(lambda mk, x, k: mk.norm(x, -float("inf"), 1, mask=k)),
    "norm_all": one(lambda mk, x, k: mk.norm(x, 3.0, mask=k)),
    "var_dim": one(lambda mk, x, k: mk.var(x, 1, mask=k)),
    "var_unbiased_false": one(lambda mk, x, k: mk.var(x, 1, False, mask=k)),
    "var_correction_keepdim": one(lambda mk, x, k: mk.var(x, 0, correction=0, keepdim=True,
                                                          mask=k)),
    "std_dim": one(lambda mk, x, k: mk.std(x, 1, mask=k)),
    "std_all": one(lambda mk, x, k: mk.std(x, mask=k)),
    "softmax": one(lambda mk, x, k: mk.softmax(x, 1, mask=k)),
    "softmax_dtype": one(lambda mk, x, k: mk.softmax(x, 0, dtype=_f32(mk), mask=k)),
    "log_softmax": one(lambda mk, x, k: mk.log_softmax(x, 1, mask=k)),
    "softmin": one(lambda mk, x, k: mk.softmin(x, -1, mask=k)),
    "normalize": one(lambda mk, x, k: mk.normalize(x, 2.0, 1, mask=k)),
    "normalize_ord1": one(lambda mk, x, k: mk.normalize(x, 1.0, 0, mask=k)),
}


def _f32(mk):
    return (torch if mk is torch.masked else flow).float32


def _tol(name):
    return (1e-5, 1e-6) if "dtype" in name else (1e-7, 1e-10)


@pytest.mark.parametrize("mask", [MASK, ROW_MASK, None], ids=["rows", "broadcast", "none"])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_masked_value_and_grad_as_torch(name, mask):
    rtol, atol = _tol(name)
    check(REDUCTIONS[name], [X], [mask], rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_as_torch(name):
    # torch casts the index to `dtype` (by default the input's: float indices)
    for dtype in (None, "int64"):
        def call(m, x, k, name=name, dtype=dtype):
            kw = {} if dtype is None else {"dtype": getattr(m, dtype)}
            return getattr(m.masked, name)(x, 1, mask=k, **kw)
        for mask in (MASK, ROW_MASK, None):
            check(call, [X], [mask], grad=False)
        check(lambda m, x, k, name=name: getattr(m.masked, name)(x, mask=k), [X], [MASK],
              grad=False)
        check(lambda m, x, k, name=name: getattr(m.masked, name)(x, 0, keepdim=True, mask=k),
              [XI], [MASK], grad=False)


def test_logaddexp_as_torch():
    other_mask = np.roll(MASK, 1, axis=1)

    def call(m, x, y, km, ko):
        return m.masked.logaddexp(x, y, input_mask=km, other_mask=ko)
    check(call, [X, Y], [MASK, other_mask])
    check(call, [X, Y], [MASK, None])
    check(lambda m, x, y, km, ko: m.masked.logaddexp(x, y, input_mask=km, other_mask=ko,
                                                     dtype=m.float32),
          [X, Y], [MASK, MASK], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin", "logsumexp"])
def test_integer_inputs_as_torch(name):
    # sum and prod promote to int64; the identities are the dtype's extremes
    for dim in (None, 1):
        check(lambda m, x, k, name=name, dim=dim: getattr(m.masked, name)(x, dim, mask=k),
              [XI.astype(np.int32)], [MASK], grad=False)


def test_bool_and_int_dtype_rules_as_torch():
    check(lambda m, x, k: m.masked.sum(x, 1, mask=k), [MASK], [ROW_MASK], grad=False)
    check(lambda m, x, k: m.masked.prod(x, 1, mask=k), [MASK], [ROW_MASK], grad=False)
    check(lambda m, x, k: m.masked.var(x, 1, mask=k), [XI], [MASK], grad=False)
    check(lambda m, x, k: m.masked.std(x, 1, mask=k, dtype=m.float64), [XI], [MASK],
          grad=False)
    check(lambda m, x, k: m.masked.mean(x, 1, mask=k, dtype=m.float64), [XI], [MASK],
          grad=False)
    check(lambda m, x, k: m.masked.median(x, 1, mask=k), [XI], [ROW_MASK], grad=False)
    check(lambda m, x, k: m.masked.cumsum(x, 1, mask=k), [XI], [MASK], grad=False)


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "var", "std", "norm", "logsumexp",
                                  "cumsum", "softmax"])
def test_complex_inputs_as_torch(name):
    calls = {
        "sum": lambda m, x, k: m.masked.sum(x, 1, mask=k),
        "prod": lambda m, x, k: m.masked.prod(x, 1, mask=k),
        "mean": lambda m, x, k: m.masked.mean(x, 1, mask=k),
        "var": lambda m, x, k: m.masked.var(x, 1, mask=k),
        "std": lambda m, x, k: m.masked.std(x, 0, mask=k),
        "norm": lambda m, x, k: m.masked.norm(x, 2.0, 1, mask=k),
        "logsumexp": lambda m, x, k: m.masked.logsumexp(x, 1, mask=k),
        "cumsum": lambda m, x, k: m.masked.cumsum(x, 1, mask=k),
        "softmax": lambda m, x, k: m.masked.softmax(x.real, 1, mask=k),
    }
    try:
        calls[name](torch, torch.tensor(XC), torch.tensor(MASK))
    except (RuntimeError, TypeError):  # torch refuses: so must flowgrad
        with pytest.raises((RuntimeError, TypeError)):
            calls[name](flow, flow.tensor(XC), flow.tensor(MASK))
        return
    check(calls[name], [XC], [MASK])


def test_three_dims_as_torch():
    for call in (lambda m, x, k: m.masked.sum(x, (0, 2), mask=k),
                 lambda m, x, k: m.masked.amax(x, (2, 0), keepdim=True, mask=k),
                 lambda m, x, k: m.masked.var(x, (1, 2), mask=k),
                 lambda m, x, k: m.masked.norm(x, 2, (0, -1), mask=k),
                 lambda m, x, k: m.masked.prod(x, (0, 1), keepdim=True, mask=k),
                 lambda m, x, k: m.masked.log_softmax(x, 1, mask=k)):
        check(call, [BIG], [BIG_MASK])
        check(call, [BIG], [BIG_MASK[0]])  # a broadcast mask


def test_zero_dim_input_as_torch():
    for name in ("sum", "prod", "amax", "mean", "logsumexp", "var"):
        for keep in (True, False):
            check(lambda m, x, k, name=name, keep=keep: getattr(m.masked, name)(
                x, 0, keepdim=keep, mask=k), [np.array(1.5)], [np.array(False)])
            check(lambda m, x, k, name=name: getattr(m.masked, name)(x, mask=k),
                  [np.array(1.5)], [np.array(True)])


@pytest.mark.parametrize("call, error", [
    (lambda m, x, k: m.masked.mean(x.long(), 1, mask=k), ValueError),  # int output dtype
    (lambda m, x, k: m.masked.median(x.long(), 1, mask=k), ValueError),  # a fully masked row
    (lambda m, x, k: m.masked.sum(x, 2, mask=k), IndexError),
    (lambda m, x, k: m.masked.sum(x, (1, 1), mask=k), RuntimeError),
    (lambda m, x, k: m.masked.sum(x[0], 0, mask=k), IndexError),  # mask has more dims
])
def test_raises_as_torch(call, error):
    for m in (torch, flow):
        with pytest.raises(error):
            call(m, m.tensor(X), m.tensor(MASK))


def test_output_mask_as_torch():
    for op, args, kw in (("sum", (1,), {"keepdim": True}), ("norm", (2.0, 0), {}),
                         ("softmax", (1,), {}), ("amax", (), {})):
        want = torch.masked._output_mask(getattr(torch.masked, op), torch.tensor(X), *args,
                                         mask=torch.tensor(ROW_MASK), **kw)
        got = flow.masked._output_mask(getattr(flow.masked, op), flow.tensor(X), *args,
                                       mask=flow.tensor(ROW_MASK), **kw)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
