"""Ops with many keyword options against torch, for the combinations that came out wrong:
nan_to_num(nan=inf), tensordot with a tensor dims, the functional scatters with a src of
another dtype, narrow_copy with a one-element tensor start."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow


def _np(t):
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()
    return t.detach().numpy()


def _same(call, rtol=1e-6):
    want, got = call(torch), call(flow)
    if not isinstance(want, (tuple, list)):
        want, got = (want,), (got,)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(_np(g), _np(w), rtol=rtol, equal_nan=True)


_NAN, _INF = float("nan"), float("inf")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("kw", [dict(nan=_INF), dict(nan=-_INF), dict(nan=_INF, posinf=1.0),
                                dict(nan=-_INF, neginf=2.0), dict(nan=3.0, posinf=_NAN)])
def test_nan_to_num_replaces_by_the_input_not_the_replaced_value(dtype, kw):
    # nan=inf gave the dtype's max (the nan became inf, then inf became max); torch: inf
    def call(m):
        x = m.tensor([_NAN, _INF, -_INF, 1.0, -0.0], dtype=getattr(m, dtype))
        return m.nan_to_num(x, **kw), x.clone().nan_to_num_(**kw)
    _same(call)


def test_nan_to_num_complex_nan_to_inf():
    _same(lambda m: m.nan_to_num(m.tensor([complex(_NAN, _INF), complex(1, _NAN)]), nan=_INF))


def test_nan_to_num_grad_with_nan_to_inf():
    def call(m):
        x = m.tensor([_NAN, _INF, 2.0], dtype=m.float64, requires_grad=True)
        y = m.nan_to_num(x, nan=_INF)
        (y * m.tensor([1.0, 2.0, 3.0], dtype=m.float64)).sum().backward()
        return y, x.grad
    _same(call)


@pytest.mark.parametrize("dims", [lambda m: m.tensor(2), lambda m: m.tensor([2]),
                                  lambda m: m.tensor(0), lambda m: m.tensor([[1, 2], [0, 1]]),
                                  lambda m: m.tensor([[1], [0]])])
def test_tensordot_dims_as_a_tensor(dims):
    # a 0-d or one-element tensor is a count (raised TypeError); more elements are two lists
    a = np.arange(24.0).reshape(2, 3, 4) * 0.1
    b = np.arange(60.0).reshape(3, 4, 5) * 0.2 - 1

    def call(m):
        x = m.tensor(a, requires_grad=True)
        y = m.tensor(b, requires_grad=True)
        out = m.tensordot(x, y, dims=dims(m))
        out.pow(2).sum().backward()
        return out, x.grad, y.grad
    _same(call, rtol=1e-10)


def test_tensordot_negative_tensor_dims_raises():
    for m in (torch, flow):
        with pytest.raises(RuntimeError):
            m.tensordot(m.ones(2, 2), m.ones(2, 2), dims=m.tensor(-1))


_SCATTERS = {
    "diagonal": lambda m, x, s: m.diagonal_scatter(x, s[:3]),
    "diagonal_offset": lambda m, x, s: x.diagonal_scatter(s[:3], -1, 1, 0),
    "select": lambda m, x, s: m.select_scatter(x, s[:4], 0, 1),
    "slice": lambda m, x, s: m.slice_scatter(x, s.reshape(2, 4), 0, 1, 3),
}


@pytest.mark.parametrize("name", sorted(_SCATTERS))
@pytest.mark.parametrize("into,src", [("float32", "float64"), ("float32", "int64"),
                                      ("int64", "float32"), ("float16", "float32"),
                                      ("bool", "int64"), ("float64", "bool"),
                                      ("complex64", "float32")])
def test_functional_scatters_cast_src_to_the_input_dtype(name, into, src):
    # torch copies src into a clone of input; these raised RuntimeError for another dtype
    def call(m):
        x = m.arange(12.0).reshape(3, 4).to(getattr(m, into))
        s = m.tensor([1.5, -2.7, 3.2, 0.0, 4.4, -1.0, 2.0, 7.9]).to(getattr(m, src))
        return _SCATTERS[name](m, x, s)
    _same(call)


@pytest.mark.parametrize("name", ["diagonal", "select", "slice"])
def test_functional_scatters_grads_across_dtypes(name):
    def call(m):
        x = m.arange(12.0, dtype=m.float64).reshape(3, 4).requires_grad_(True)
        s = m.tensor([1.5, -2.7, 3.2, 0.0, 4.4, -1.0, 2.0, 7.9], requires_grad=True)
        y = _SCATTERS[name](m, x, s)
        (y * m.arange(12.0, dtype=m.float64).reshape(3, 4)).sum().backward()
        return y, x.grad, s.grad
    _same(call)


@pytest.mark.parametrize("start", [lambda m: m.tensor([1]), lambda m: m.tensor([[2]]),
                                   lambda m: m.tensor(1, dtype=m.int32), lambda m: 1])
def test_narrow_copy_takes_a_one_element_integer_tensor_start(start):
    _same(lambda m: m.narrow_copy(m.arange(20.0).reshape(4, 5), 0, start(m), 2))


@pytest.mark.parametrize("fn", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("correction", [2, 5])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_complex_var_without_degrees_of_freedom_as_torch(fn, correction, dim):
    # torch sums the real and imaginary parts' variances: a part constant along dim is 0/0,
    # nan; flowgrad divided |x - mean|^2 by 0 and gave inf
    def call(m):
        x = m.tensor([[1 + 1j, 0j], [0j, 1j]])
        return getattr(m, fn)(x, dim=dim, correction=correction)
    with np.errstate(all="ignore"):
        _same(call)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_half_precision_scans_accumulate_in_float32_as_torch(dtype, dim):
    # torch's CPU cumsum/cumprod of half precision run in float32 (its acc_type), rounding
    # each running value; in double, 12 of 20000 float16 running sums were an ulp off
    a = np.random.default_rng(0).standard_normal((4, 3000)).astype(np.float32) * 3
    b = 1 + np.random.default_rng(1).standard_normal((3, 400)).astype(np.float32) * 0.05

    def call(m):
        x = m.tensor(a).to(getattr(m, dtype))
        p = m.tensor(b).to(getattr(m, dtype))
        xg = x.detach().requires_grad_(True)
        y = m.cumsum(xg, dim)
        y.backward(m.ones_like(y))
        return m.cumsum(x, dim), m.cumprod(p, dim), x.cumsum_(dim), xg.grad
    _same(call, rtol=0)


_TRAPEZOIDS = {
    "plain": lambda m, f, y, x: f(y),
    "dx": lambda m, f, y, x: f(y, dx=0.1),
    "dx_int": lambda m, f, y, x: f(y, dx=3, dim=0),
    "x": lambda m, f, y, x: f(y, x),
    "x_2d": lambda m, f, y, x: f(y, x.expand(y.shape[0], -1).cumsum(0), dim=0),
}


@pytest.mark.parametrize("fn", ["trapezoid", "cumulative_trapezoid"])
@pytest.mark.parametrize("case", sorted(_TRAPEZOIDS))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int64"])
def test_trapezoid_rules_in_torchs_order_of_rounding(fn, case, dtype):
    # torch: (sum(y) - (y[0] + y[-1]) / 2) * dx, or sum((y[i] + y[i+1]) * step) / 2, and the
    # cumulative cumsum(dx / 2 * (y[i] + y[i+1])); the areas summed one by one came out 1 to
    # 3 ulps off in float16 (trapezoid -65.3125 and -56.03125, torch -65.375 and -56.09375)
    a = np.random.default_rng(0).standard_normal((4, 3000)) * 3
    steps = np.random.default_rng(1).uniform(0.001, 0.02, 3000)

    def call(m):
        y = m.tensor(a if dtype != "int64" else a * 10).to(getattr(m, dtype))
        x = m.tensor(np.cumsum(steps)).to(y.dtype if dtype != "int64" else m.float32)
        return _TRAPEZOIDS[case](m, getattr(m, fn), y, x)
    _same(call, rtol=0 if dtype in ("float16", "bfloat16") else 1e-5)


@pytest.mark.parametrize("fn", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_grads_and_bool_refusal(fn):
    def call(m):
        y = m.tensor([[1.0, 4.0, 9.0, 16.0], [2.0, -1.0, 0.5, 3.0]], dtype=m.float64,
                     requires_grad=True)
        x = m.tensor([0.0, 0.5, 2.0, 2.5], dtype=m.float64, requires_grad=True)
        out = getattr(m, fn)(y, x) * 1.5 + getattr(m, fn)(y, dx=0.3).sum()
        out.pow(2).sum().backward()
        return out, y.grad, x.grad
    _same(call, rtol=1e-12)
    for m in (torch, flow):
        with pytest.raises(RuntimeError, match="bool"):
            getattr(m, fn)(m.tensor([True, False, True]))


def test_repeat_interleave_counts_by_keyword_and_take_along_dim_broadcast_error():
    # repeat_interleave(repeats=counts) is torch's index form (it raised TypeError); a
    # take_along_dim whose shapes do not broadcast raised NumPy's ValueError
    _same(lambda m: m.repeat_interleave(repeats=m.tensor([2, 0, 1])))
    _same(lambda m: m.repeat_interleave(repeats=m.tensor([2, 1]), output_size=3))
    for m in (torch, flow):
        with pytest.raises(TypeError):
            m.repeat_interleave()
        with pytest.raises(RuntimeError):
            m.take_along_dim(m.ones(3, 4), m.tensor([[0, 1]]), dim=0)


_RAISES = {  # torch raises RuntimeError / IndexError here; flowgrad raised the other one
    "quantile_empty": lambda m: m.quantile(m.zeros(0), 0.5),
    "quantile_empty_dim": lambda m: m.quantile(m.zeros(2, 0), 0.5, dim=1),
    "nanquantile_empty": lambda m: m.nanquantile(m.zeros(0), 0.5),
    "kthvalue_k_big": lambda m: m.kthvalue(m.tensor([1.0, 2.0]), 3),
    "kthvalue_k0": lambda m: m.kthvalue(m.tensor([1.0, 2.0]), 0),
    "aminmax_empty": lambda m: m.aminmax(m.zeros(0)),
    "aminmax_empty_keepdim": lambda m: m.aminmax(m.zeros(2, 0), keepdim=True),
    "amax_empty_no_dim": lambda m: m.amax(m.zeros(2, 0)),
    "amin_empty_no_dim": lambda m: m.zeros(0).amin(),
    "max_empty": lambda m: m.zeros(0).max(),
    "argmax_empty": lambda m: m.zeros(0).argmax(),
    "argmin_empty_dim": lambda m: m.zeros(2, 0).argmin(1),
    "unflatten_0d": lambda m: m.tensor(1.0).unflatten(0, (1, 1)),
    "diff_0d_prepend": lambda m: m.diff(m.tensor([1.0, 2.0]), prepend=m.tensor(0.0)),
    "diff_0d_append_n0": lambda m: m.diff(m.tensor([1.0, 2.0]), n=0, append=m.tensor(0.0)),
    "diff_1d_append_2d": lambda m: m.diff(m.ones(2, 2), append=m.ones(2)),
}


_DTYPE_RAISES = {  # torch: RuntimeError for a non-float cdist, NotImplementedError for the
    # kernels it does not compile for a dtype (flowgrad computed cdist of int64 and float16,
    # and raised RuntimeError for the others)
    "cdist_int": lambda m: m.cdist(m.ones(2, 2).long(), m.ones(2, 2).long()),
    "cdist_int_float": lambda m: m.cdist(m.ones(2, 2).long(), m.ones(2, 2)),
    "cdist_complex": lambda m: m.cdist(m.ones(2, 2, dtype=m.complex64),
                                       m.ones(2, 2, dtype=m.complex64)),
    "cdist_half": lambda m: m.cdist(m.ones(2, 2).half(), m.ones(2, 2).half()),
    "cdist_bfloat16": lambda m: m.cdist(m.ones(2, 2).bfloat16(), m.ones(2, 2).bfloat16()),
    "histc_int": lambda m: m.histc(m.tensor([1, 2, 3]), bins=3),
    "bincount_float": lambda m: m.bincount(m.tensor([1.0, 2.0])),
    "bincount_float_2d": lambda m: m.bincount(m.tensor([[1.0, 2.0]])),
    "tril_indices_float": lambda m: m.tril_indices(3, 3, dtype=m.float32),
    "triu_indices_bool": lambda m: m.triu_indices(3, 3, dtype=m.bool),
    "gcd_float": lambda m: m.gcd(m.tensor([1.0]), m.tensor([2.0])),
    "lcm_float": lambda m: m.lcm(m.tensor([1.0]), m.tensor([2.0])),
}


@pytest.mark.parametrize("name", sorted(_RAISES) + sorted(_DTYPE_RAISES))
def test_error_types_as_torch(name):
    case = _RAISES.get(name) or _DTYPE_RAISES[name]
    with pytest.raises(Exception) as want:
        case(torch)
    with pytest.raises(want.type):
        case(flow)


def test_cdist_float_dtypes_still_work():
    _same(lambda m: m.cdist(m.tensor([[0.0, 1.0], [2.0, 2.0]], dtype=m.float64),
                            m.tensor([[1.0, 1.0]], dtype=m.float64), p=1.5))


@pytest.mark.parametrize("call", [
    lambda m: m.clamp(m.tensor([-3.0, 0.5, 2.0, 7.0]).half(), m.tensor(-1.0).half(), 1.7),
    lambda m: m.clamp(m.tensor([-3.0, 0.5, 2.0, 7.0]), min=m.tensor(0.0), max=2),
    lambda m: m.clip(m.tensor([1, 5, -2]), m.tensor(0.5), 3),
    lambda m: m.clamp(m.tensor([1, 5, -2]), 0, m.tensor(3.5, dtype=m.float64)),
    lambda m: m.tensor([1.0, 5.0, -2.0]).clamp_(m.tensor(0.5), 3),
])
def test_clamp_reads_a_0d_tensor_bound_beside_a_number_as_a_number(call):
    # torch's parser takes a 0-d tensor (not requiring grad) as the Number overload's bound;
    # flowgrad raised TypeError 'min and max must both be numbers or both be tensors'
    _same(call)


def test_clamp_mixed_bounds_still_refused_where_torch_refuses():
    for m in (torch, flow):
        with pytest.raises(TypeError):
            m.clamp(m.ones(3), m.tensor([0.5, 0.5, 0.5]), 3)
        with pytest.raises(TypeError):
            m.clamp(m.ones(3), m.tensor(0.5, requires_grad=True), 3)


@pytest.mark.parametrize("call", [
    lambda m: m.var(m.tensor([[1.0, 4.0, 9.0], [2.0, 3.0, 7.0]]), 1, correction=m.tensor(1)),
    lambda m: m.std_mean(m.tensor([[1.0, 4.0, 9.0], [2.0, 3.0, 7.0]]),
                         correction=m.tensor(0.5)),
    lambda m: m.gradient(m.tensor([[1.0, 4.0, 9.0], [2.0, 3.0, 7.0]]), spacing=m.tensor(0.5)),
    lambda m: m.tril_indices(m.tensor(2), 3),
    lambda m: m.triu_indices(3, 3, m.tensor(-1)),
])
def test_0d_tensor_for_a_number_argument(call):
    # torch reads a 0-d tensor as the Scalar/int argument; flowgrad raised AttributeError
    # (var/std correction), RuntimeError (gradient spacing) or TypeError (tril_indices)
    _same(call)


_REFUSED = {  # torch refuses these; flowgrad computed something (or raised IndexError)
    "tensor_split_int32_indices": lambda m: m.tensor_split(
        m.arange(20.0).reshape(4, 5), m.tensor([1, 2], dtype=m.int32), 1),
    "histogram_edges_and_range": lambda m: m.histogram(m.arange(6.0), m.tensor([0.0, 2.0, 5.0]),
                                                       range=(0.0, 1.0)),
    "searchsorted_0d_boundaries": lambda m: m.searchsorted(m.tensor(1.0), m.tensor([1.5])),
}


@pytest.mark.parametrize("name", sorted(_REFUSED))
def test_refused_as_torch(name):
    with pytest.raises(Exception) as want:
        _REFUSED[name](torch)
    with pytest.raises(want.type):
        _REFUSED[name](flow)
