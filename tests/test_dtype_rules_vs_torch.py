"""torch's rules for dtypes at the edges, each row run in torch and in flowgrad: same raise or
no raise, and the same dtype and values. A probe of 7,600 calls (every dtype pair through the
binary ops, in-place forms and `out=`, Python and 0-d operands, fill values, scalar
coefficients) found these, fixed:
- in-place and `out=` writes refused integer -> narrower or unsigned integer (NumPy's
  "same_kind"; torch casts any integer into any integer), and let complex into bfloat16,
  dropping the imaginary part with no error;
- `add/sub(..., alpha=)`: a float alpha with integer tensors, a bool one with non-bool
  tensors, a complex one with real tensors were taken (torch refuses), and bools with alpha=2
  became int64;
- fill values: a complex one into a real tensor dropped its imaginary part, 1e40 into float32
  became inf, and uint8 refused -1 (torch: 255); torch's checked conversion now, everywhere a
  number is written (full, full_like, new_full, fill_, masked_fill, index_fill, x[i] = v,
  tensor(data, dtype=uint8));
- beta/alpha of addmm, addmv, baddbmm, addbmm: torch converts them to the tensors' dtype (2.5
  is 2 for integer tensors) where flowgrad promoted the result to float32; addr refuses;
  complex coefficients of real ops (lerp, addcmul, addcdiv, leaky_relu, threshold) raise;
- logical_and/or/xor, all, any, count_nonzero of complex tensors (torch: nonzero is True),
  bool ** -3, isclose of two
  dtypes or a negative tolerance, pad with a complex value, logit with a nan eps;
- adaptive_avg_pool of integer tensors gave zeros (the window weights 1/k cast to the integer
  dtype): refused now, as torch; in bfloat16/float16 it sums in float32, as torch's.
"""
from __future__ import annotations

import pytest
import torch
from vs_torch import outcome

import flowgrad as flow


def _t(m, values, dtype):
    return m.tensor(values, dtype=getattr(m, dtype))


I2 = [[1, 2], [3, 4]]
ROWS = [
    # writes into an existing dtype: in place and out=
    ("uint8 += int32", lambda m: _t(m, [3, 2], "uint8").add_(_t(m, [2, 4], "int32"))),
    ("uint8 *= int16", lambda m: _t(m, [3, 2], "uint8").mul_(_t(m, [2, 4], "int16"))),
    ("int8 += int64 wraps", lambda m: _t(m, [100, 2], "int8").add_(_t(m, [100, 4], "int64"))),
    ("uint8 pow_ int8", lambda m: _t(m, [3, 2], "uint8").pow_(_t(m, [2, 4], "int8"))),
    ("add out uint8", lambda m: m.add(_t(m, [3, 2], "uint8"), _t(m, [2, 4], "int8"),
                                      out=m.zeros(2, dtype=m.uint8))),
    ("int16 clamp_ int32", lambda m: _t(m, [3, 2], "int16").clamp_(min=_t(m, [2, 4], "int32"))),
    ("bfloat16 /= complex", lambda m: _t(m, [3, 2], "bfloat16").div_(_t(m, [2, 4], "complex64"))),
    ("float32 += complex", lambda m: _t(m, [3, 2], "float32").add_(_t(m, [2, 4], "complex64"))),
    ("int32 += float", lambda m: _t(m, [3, 2], "int32").add_(_t(m, [2, 4], "float32"))),
    ("bool |= int", lambda m: _t(m, [True, False], "bool").bitwise_or_(_t(m, [1, 0], "int64"))),
    ("int8 |= int64", lambda m: _t(m, [1, 2], "int8").bitwise_or_(_t(m, [4, 0], "int64"))),
    ("mul out bfloat16 of complex", lambda m: m.mul(_t(m, [1, 2], "complex64"), 2,
                                                    out=m.zeros(2, dtype=m.bfloat16))),
    # add / sub alpha
    ("add bools alpha 2", lambda m: m.add(_t(m, [True, False], "bool"),
                                          _t(m, [False, True], "bool"), alpha=2)),
    ("add bools alpha 0", lambda m: m.add(_t(m, [True, False], "bool"),
                                          _t(m, [True, True], "bool"), alpha=0)),
    ("add ints alpha float", lambda m: m.add(_t(m, [1, 2], "int64"), _t(m, [1, 2], "int64"),
                                             alpha=2.5)),
    ("add ints alpha 1.0", lambda m: m.add(_t(m, [1, 2], "int64"), 3, alpha=1.0)),
    ("add floats alpha True", lambda m: m.add(m.ones(2), m.ones(2), alpha=True)),
    ("add floats alpha complex", lambda m: m.add(m.ones(2), m.ones(2), alpha=1j)),
    ("add complex alpha complex", lambda m: m.add(m.ones(2).to(m.complex64), m.ones(2),
                                                  alpha=1j)),
    ("add floats alpha 1.0", lambda m: m.add(m.ones(2), m.ones(2) * 3, alpha=1.0)),
    ("add int8 alpha int", lambda m: m.add(_t(m, [1, 2], "int8"), _t(m, [1, 2], "int8"),
                                           alpha=3)),
    ("sub ints alpha float", lambda m: m.sub(_t(m, [1, 2], "int64"), 10, alpha=2.5)),
    ("rsub ints alpha 2", lambda m: m.rsub(_t(m, [1, 2], "int64"), 10, alpha=2)),
    ("rsub ints alpha float", lambda m: m.rsub(_t(m, [1, 2], "int64"), 10, alpha=2.5)),
    ("add_ ints alpha float", lambda m: _t(m, [1, 2], "int64").add_(_t(m, [1, 2], "int64"),
                                                                    alpha=0.5)),
    ("sub_ floats alpha", lambda m: m.ones(2).sub_(_t(m, [1, 2], "int64"), alpha=3.5)),
    # fill values: torch's checked conversion
    ("full f32 complex", lambda m: m.full((2,), 1 + 1j, dtype=m.float32)),
    ("full f32 complex no imag", lambda m: m.full((2,), 2 + 0j, dtype=m.float32)),
    ("full f32 1e40", lambda m: m.full((2,), 1e40, dtype=m.float32)),
    ("full f32 inf", lambda m: m.full((2,), float("inf"), dtype=m.float32)),
    ("full f16 70000", lambda m: m.full((2,), 70000.0, dtype=m.float16)),
    ("full bf16 1e39", lambda m: m.full((2,), 1e39, dtype=m.bfloat16)),
    ("fill_ f16 70000", lambda m: m.zeros(2, dtype=m.float16).fill_(70000.0)),
    ("setitem f16 70000", lambda m: _setitem(m.zeros(2, dtype=m.float16), 0, 70000.0)),
    ("full uint8 -3", lambda m: m.full((2,), -3, dtype=m.uint8)),
    ("full uint8 -255", lambda m: m.full((2,), -255, dtype=m.uint8)),
    ("full uint8 -256", lambda m: m.full((2,), -256, dtype=m.uint8)),
    ("full int8 200", lambda m: m.full((2,), 200, dtype=m.int8)),
    ("full int64 nan", lambda m: m.full((2,), float("nan"), dtype=m.int64)),
    ("full int64 1e300", lambda m: m.full((2,), 1e300, dtype=m.int64)),
    ("full int64 2.7", lambda m: m.full((2,), 2.7, dtype=m.int64)),
    ("full bool 2.5", lambda m: m.full((2,), 2.5, dtype=m.bool)),
    ("tensor uint8 -1", lambda m: m.tensor([0, -1, 255, -255], dtype=m.uint8)),
    ("tensor uint8 -256", lambda m: m.tensor([-256], dtype=m.uint8)),
    ("tensor int8 300", lambda m: m.tensor([300], dtype=m.int8)),
    ("full_like complex", lambda m: m.full_like(m.zeros(2, dtype=m.int64), 1 + 1j)),
    ("full_like 1e40", lambda m: m.full_like(m.zeros(2), 1e40)),
    ("new_full complex", lambda m: m.zeros(2).new_full((2,), 1 + 2j)),
    ("fill_ uint8 -2", lambda m: m.zeros(2, dtype=m.uint8).fill_(-2)),
    ("fill_ complex", lambda m: m.zeros(2).fill_(1 + 1j)),
    ("fill_ complex 0-d tensor", lambda m: m.zeros(2).fill_(m.tensor(1 + 1j))),
    ("fill_ int64 nan 0-d tensor", lambda m: m.zeros(2, dtype=m.int64).fill_(
        m.tensor(float("nan")))),
    ("setitem uint8 -1", lambda m: _setitem(m.zeros(2, dtype=m.uint8), 0, -1)),
    ("setitem complex", lambda m: _setitem(m.zeros(2), 0, 1 + 1j)),
    ("setitem int8 300", lambda m: _setitem(m.zeros(2, dtype=m.int8), 0, 300)),
    ("masked_fill uint8 -3", lambda m: _t(m, [3, 2], "uint8").masked_fill(
        m.tensor([True, False]), -3)),
    ("masked_fill complex 0-d", lambda m: m.zeros(2).masked_fill(m.tensor([True, False]),
                                                                 m.tensor(1 + 1j))),
    ("masked_fill int 0-d float", lambda m: m.zeros(2, dtype=m.int64).masked_fill(
        m.tensor([True, False]), m.tensor(2.7))),
    ("index_fill complex", lambda m: m.zeros(3).index_fill(0, m.tensor([1]), 1 + 1j)),
    # scalar coefficients, converted to the tensors' dtype
    ("addmm int alpha 2.5", lambda m: m.addmm(m.tensor(I2), m.tensor(I2), m.tensor(I2),
                                              alpha=2.5)),
    ("addmm int beta -1.5", lambda m: m.addmm(m.tensor(I2), m.tensor(I2), m.tensor(I2),
                                              beta=-1.5)),
    ("addmm int alpha nan", lambda m: m.addmm(m.tensor(I2), m.tensor(I2), m.tensor(I2),
                                              alpha=float("nan"))),
    ("addmm float alpha complex", lambda m: m.addmm(m.ones(2, 2), m.ones(2, 2), m.ones(2, 2),
                                                    alpha=1 + 1j)),
    ("addmm float beta 0 nan input", lambda m: m.addmm(m.full((2, 2), float("nan")),
                                                       m.ones(2, 2), m.ones(2, 2), beta=0)),
    ("addmv int alpha 2.5", lambda m: m.addmv(m.tensor([1, 2]), m.tensor(I2), m.tensor([3, 4]),
                                              alpha=2.5)),
    ("baddbmm int beta 2.5", lambda m: m.baddbmm(m.tensor([I2]), m.tensor([I2]),
                                                 m.tensor([I2]), beta=2.5)),
    ("addbmm int alpha -1.5", lambda m: m.addbmm(m.tensor(I2), m.tensor([I2]), m.tensor([I2]),
                                                 alpha=-1.5)),
    ("addr int alpha 2.5", lambda m: m.addr(m.tensor(I2), m.tensor([1, 2]), m.tensor([3, 4]),
                                            alpha=2.5)),
    ("addr int alpha 2", lambda m: m.addr(m.tensor(I2), m.tensor([1, 2]), m.tensor([3, 4]),
                                          alpha=2)),
    ("addr float beta True", lambda m: m.addr(m.ones(2, 2), m.ones(2), m.ones(2), beta=True)),
    ("lerp complex weight", lambda m: m.lerp(m.zeros(2), m.ones(2), 1 + 1j)),
    ("addcmul complex value", lambda m: m.addcmul(m.zeros(2), m.ones(2), m.ones(2),
                                                  value=1 + 1j)),
    ("addcdiv complex value", lambda m: m.addcdiv(m.zeros(2), m.ones(2), m.ones(2),
                                                  value=1 + 1j)),
    ("leaky_relu complex slope", lambda m: m.nn.functional.leaky_relu(m.tensor([-1.0, 2.0]),
                                                                      1 + 1j)),
    ("threshold complex value", lambda m: m.threshold(m.tensor([1.0, 2.0]), 1.5, 1 + 1j)),
    ("threshold int nan", lambda m: m.threshold(m.tensor([1, 2]), float("nan"), 0)),
    ("hardtanh int nan", lambda m: m.nn.functional.hardtanh(m.tensor([1, 2]), float("nan"),
                                                            float("nan"))),
    ("pad complex value", lambda m: m.nn.functional.pad(m.ones(2), (1, 1), value=1 + 1j)),
    ("logit nan eps", lambda m: m.logit(m.tensor([0.2, 0.5]), eps=float("nan"))),
    # kernels torch has for floating types only
    ("adaptive_avg_pool2d int", lambda m: m.nn.functional.adaptive_avg_pool2d(
        m.arange(25).reshape(1, 1, 5, 5), 2)),
    ("adaptive_avg_pool1d uint8", lambda m: m.nn.functional.adaptive_avg_pool1d(
        m.arange(5, dtype=m.uint8).reshape(1, 1, 5), 2)),
    ("adaptive_avg_pool2d bfloat16", lambda m: m.nn.functional.adaptive_avg_pool2d(
        (m.arange(25.0).reshape(1, 1, 5, 5) % 7 + 1).to(m.bfloat16), 2)),
    # logic, powers, closeness
    ("logical_and complex", lambda m: m.logical_and(_t(m, [1, 0], "complex64"),
                                                    _t(m, [True, True], "bool"))),
    ("logical_or complex", lambda m: m.logical_or(_t(m, [0, 0], "complex64"),
                                                  _t(m, [1, 0], "int8"))),
    ("logical_xor complex", lambda m: m.logical_xor(_t(m, [1j, 0], "complex64"),
                                                    _t(m, [1, 1], "complex64"))),
    ("all any count_nonzero complex", lambda m: [
        f(_t(m, [[1 + 2j, 0], [1j, 0.5]], "complex64"), *d) for f, d in (
            (m.all, ()), (m.any, (0,)), (m.all, (1,)), (m.count_nonzero, ()),
            (m.count_nonzero, (1,)))]),
    ("bool ** -3", lambda m: _t(m, [True, False], "bool") ** -3),
    ("bool ** 2", lambda m: _t(m, [True, False], "bool") ** 2),
    ("isclose int vs float", lambda m: m.isclose(m.tensor([1, 2]), m.tensor([1.0, 2.0]))),
    ("isclose atol < 0", lambda m: m.isclose(m.ones(2), m.ones(2), atol=-1.0)),
    ("allclose two dtypes", lambda m: m.allclose(m.ones(2), m.ones(2, dtype=m.float64))),
    ("isclose ints", lambda m: m.isclose(m.tensor([1, 2]), m.tensor([1, 3]), atol=1)),
]


def _setitem(x, index, value):
    x[index] = value
    return x


def _summary(value):
    if isinstance(value, list):
        return [_summary(v) for v in value]
    if isinstance(value, (torch.Tensor, flow.Tensor)):
        name = str(value.dtype).split(".")[-1]
        data = value.detach()
        if name == "bfloat16":
            data = data.float()
        return name, data.tolist()
    return value


@pytest.mark.parametrize("row", [r[1] for r in ROWS], ids=[r[0] for r in ROWS])
def test_dtype_rule_as_torch(row):
    want, torch_error = outcome(lambda: row(torch))
    got, error = outcome(lambda: row(flow))
    assert (torch_error is None) == (error is None), (torch_error, error)
    assert _summary(got) == _summary(want)


def test_fill_errors_name_the_op_value_and_dtype():
    with pytest.raises(RuntimeError, match=r"full\(\): value \(1\+1j\) cannot be converted to "
                                           r"type float32"):
        flow.full((2,), 1 + 1j, dtype=flow.float32)
    x = flow.zeros(3)
    version = x._version
    with pytest.raises(RuntimeError, match="masked_fill"):
        x.masked_fill_(flow.tensor([True, False, True]), 1 + 1j)
    assert x.tolist() == [0.0, 0.0, 0.0] and x._version == version  # left as it was


def test_alpha_gradients_as_torch():
    grads = []
    for m in (torch, flow):
        a = m.tensor([1.0, 2.0], requires_grad=True)
        b = m.tensor([3.0, 4.0], requires_grad=True)
        (m.add(a, b, alpha=2) * m.rsub(a, b, alpha=3)).sum().backward()
        grads.append((a.grad.tolist(), b.grad.tolist()))
    assert grads[0] == grads[1]
