"""Elementwise ops against torch (forward and every input gradient) and by float64 finite
differences to second order; in-place variants; NaN-free gradients through `where`; and the
errors for bad arguments. One line per case."""
import numpy as np
import pytest
import torch
from helpers import Positive, Unit, check, gradcheck

import flowgrad as flow

IA = np.array([[5, -7, 3], [0, 2, -9]], dtype=np.int64)
IB = np.array([[2, 3, -2], [4, -5, 7]], dtype=np.int64)
BA = np.array([[True, False, True], [False, False, True]])
BB = np.array([[True, True, False], [False, True, True]])
ANY = np.array([[1.0, np.nan, np.inf], [-np.inf, -2.0, 0.5]], dtype=np.float32)


def C(name, fn, *specs, second=True, fd=True, **kw):
    """One table row: `second`: check 2nd derivatives; `fd`: run finite differences at all."""
    return pytest.param(fn, specs, second, fd, kw, id=name)


# Differentiable ops: `check` against torch and `gradcheck` (2nd order unless marked).
CASES = [
    C("add", lambda m, x, y: m.add(x, y, alpha=2), (2, 3), (3,)),
    C("add_scalar", lambda m, x: m.add(x, 1.5), (2, 3)),
    C("sub", lambda m, x, y: m.sub(x, y), (2, 1), (1, 3)),
    C("sub_alpha", lambda m, x, y: m.subtract(x, y, alpha=0.5), (2, 3), (2, 3)),
    C("mul", lambda m, x, y: m.multiply(x, y), (2, 3), (2, 1)),
    C("div", lambda m, x, y: m.div(x, y), (2, 3), Positive((3,))),
    C("true_divide", lambda m, x, y: m.true_divide(x, y), (2, 3), Positive((2, 3))),
    C("rdiv", lambda m, x: 3.0 / x, Positive((2, 3))),
    C("div_floor", lambda m, x, y: m.div(x * 3, y, rounding_mode="floor"), (2, 3), (2, 3)),
    C("div_trunc", lambda m, x, y: m.div(x * 3, y, rounding_mode="trunc"), (2, 3), (2, 3)),
    C("remainder", lambda m, x, y: m.remainder(x, y), (2, 3), Positive((2, 3))),
    C("remainder_neg", lambda m, x: m.remainder(x, -0.7), (2, 3)),
    C("mod_op", lambda m, x, y: x % y, (2, 3), Positive((3,))),
    C("fmod", lambda m, x, y: m.fmod(x, y), (2, 3), Positive((2, 3))),
    C("fmod_scalar", lambda m, x: m.fmod(x, 0.3), (2, 3)),
    C("pow", lambda m, x, y: m.pow(x, y), Positive((2, 3)), (2, 3)),
    C("pow_scalar", lambda m, x: m.pow(x, 3), (2, 3)),
    C("pow_half", lambda m, x: x ** 0.5, Positive((2, 3))),
    C("pow_neg", lambda m, x: x ** -1.5, Positive((2, 3))),
    C("pow_base", lambda m, x: m.pow(2.5, x), (2, 3)),
    C("rpow", lambda m, x: 3 ** x, (2, 3)),
    C("neg", lambda m, x: m.neg(x), (2, 3)),
    C("negative", lambda m, x: m.negative(x), (2, 3)),
    C("abs", lambda m, x: m.abs(x), (2, 3)),
    C("sign", lambda m, x: m.sign(x) * x, (2, 3)),
    C("reciprocal", lambda m, x: m.reciprocal(x), Positive((2, 3))),
    C("square", lambda m, x: m.square(x), (2, 3)),
    C("sqrt", lambda m, x: m.sqrt(x), Positive((2, 3))),
    C("rsqrt", lambda m, x: m.rsqrt(x), Positive((2, 3))),
    C("exp", lambda m, x: m.exp(x), (2, 3)),
    C("exp2", lambda m, x: m.exp2(x), (2, 3)),
    C("expm1", lambda m, x: m.expm1(x), (2, 3)),
    C("log", lambda m, x: m.log(x), Positive((2, 3))),
    C("log2", lambda m, x: m.log2(x), Positive((2, 3))),
    C("log10", lambda m, x: m.log10(x), Positive((2, 3))),
    C("log1p", lambda m, x: m.log1p(x), Positive((2, 3))),
    C("sin", lambda m, x: m.sin(x), (2, 3)),
    C("cos", lambda m, x: m.cos(x), (2, 3)),
    C("tan", lambda m, x: m.tan(x), Unit((2, 3))),
    C("asin", lambda m, x: m.asin(x), Unit((2, 3))),
    C("acos", lambda m, x: m.acos(x), Unit((2, 3))),
    C("atan", lambda m, x: m.atan(x), (2, 3)),
    C("arcsin", lambda m, x: m.arcsin(x), Unit((2, 3))),
    C("atan2", lambda m, x, y: m.atan2(x, y), (2, 3), (2, 3)),
    C("arctan2", lambda m, x, y: m.arctan2(x, y), (2, 3), (3,)),
    C("sinh", lambda m, x: m.sinh(x), (2, 3)),
    C("cosh", lambda m, x: m.cosh(x), (2, 3)),
    C("tanh", lambda m, x: m.tanh(x), (2, 3)),
    C("asinh", lambda m, x: m.asinh(x), (2, 3)),
    C("acosh", lambda m, x: m.acosh(x + 1.2), Positive((2, 3))),
    C("atanh", lambda m, x: m.atanh(x), Unit((2, 3))),
    C("erf", lambda m, x: m.erf(x), (2, 3)),
    C("erfc", lambda m, x: m.erfc(x), (2, 3)),
    C("erfinv", lambda m, x: m.erfinv(x), Unit((2, 3))),
    C("sigmoid", lambda m, x: m.sigmoid(x), (2, 3)),
    C("logit", lambda m, x: m.logit(m.sigmoid(x)), (2, 3)),
    C("logit_eps", lambda m, x: m.logit(x * 0.6 + 0.5, eps=0.2), Unit((2, 3))),
    C("floor", lambda m, x: m.floor(x * 3) * x, (2, 3)),
    C("ceil", lambda m, x: m.ceil(x * 3) * x, (2, 3)),
    C("round", lambda m, x: m.round(x * 3) * x, (2, 3)),
    C("round_decimals", lambda m, x: m.round(x, decimals=1), (2, 3)),
    C("trunc", lambda m, x: m.trunc(x * 3) + x, (2, 3)),
    C("fix", lambda m, x: m.fix(x * 3), (2, 3)),
    C("frac", lambda m, x: m.frac(x * 3), (2, 3)),
    C("clamp", lambda m, x: m.clamp(x, -0.5, 0.5), (2, 3)),
    C("clamp_min_only", lambda m, x: m.clamp(x, min=0.1), (2, 3)),
    C("clip_max_only", lambda m, x: m.clip(x, max=0.1), (2, 3)),
    C("clamp_min_gt_max", lambda m, x: m.clamp(x, 0.5, -0.5), (2, 3)),
    C("clamp_tensor", lambda m, x, lo, hi: m.clamp(x, lo, hi - 0.5), (2, 3), (3,),
      Positive((2, 3))),
    C("clamp_tensor_min", lambda m, x, lo: m.clamp(x, min=lo), (2, 3), (2, 3)),
    C("clamp_tensor_max", lambda m, x, hi: x.clamp(max=hi), (2, 3), (1, 3)),
    C("clamp_0d_bound", lambda m, x, lo: m.clamp(x, lo, m.tensor(0.3)), (2, 3), (2, 3)),
    C("clamp_tensor_crossed", lambda m, x, lo, hi: m.clamp(x, lo + 1, hi - 1), (2, 3),
      Unit((3,)), Unit((2, 3))),
    C("clamp_min_fn", lambda m, x: m.clamp_min(x, 0.2), (2, 3)),
    C("clamp_max_fn", lambda m, x: x.clamp_max(0.2), (2, 3)),
    C("maximum", lambda m, x, y: m.maximum(x, y), (2, 3), (3,)),
    C("minimum", lambda m, x, y: m.minimum(x, y), (2, 3), (2, 3)),
    C("fmax", lambda m, x, y: m.fmax(x, y), (2, 3), (2, 3)),
    C("fmin", lambda m, x, y: m.fmin(x, y), (2, 3), (3,)),
    C("lerp_scalar", lambda m, x, y: m.lerp(x, y, 0.3), (2, 3), (2, 3)),
    C("lerp_tensor", lambda m, x, y, w: m.lerp(x, y, w), (2, 3), (3,), (2, 3)),
    C("addcmul", lambda m, x, a, b: m.addcmul(x, a, b, value=0.5), (2, 3), (2, 3), (3,)),
    C("addcdiv", lambda m, x, a, b: m.addcdiv(x, a, b, value=2), (2, 3), (2, 3), Positive((2, 3))),
    C("hypot", lambda m, x, y: m.hypot(x, y), (2, 3), (2, 3)),
    C("xlogy", lambda m, x, y: m.xlogy(x, y), (2, 3), Positive((2, 3))),
    C("xlogy_scalar", lambda m, y: m.xlogy(2.0, y), Positive((2, 3))),
    C("nan_to_num", lambda m, x: m.nan_to_num(x), (2, 3)),
    C("nan_to_num_inf", lambda m, x: m.nan_to_num(x * m.tensor([[0.0, 1, 1], [1, 1, 1]]).log(),
                                                  nan=1.0, neginf=-5.0) * x, (2, 3), fd=False),
    C("where", lambda m, x, y: m.where(x > 0, x, y), (2, 3), (2, 3)),
    C("where_scalar", lambda m, x: m.where(x > 0, x, 0.5), (2, 3)),
    C("where_broadcast", lambda m, x, y: m.where(y > 0, x, y), (3,), (2, 3)),
    C("where_method", lambda m, x, y: x.where(y > 0, y), (2, 3), (2, 3)),
    C("masked_fill", lambda m, x: x.masked_fill(x > 0.3, 2.0), (2, 3)),
]
# floor_divide is differentiable in neither torch (it raises) nor here (zero gradient).
NO_GRAD = [
    C("floor_divide", lambda m, x, y: m.floor_divide(x * 4, y), (2, 3), Positive((2, 3))),
    C("floordiv_op", lambda m, x: (x * 4) // 0.7, (2, 3)),
    C("int_floor_divide", lambda m, a, b: m.floor_divide(a, b), IA, IB),
    C("int_div_floor", lambda m, a, b: m.div(a, b, rounding_mode="floor"), IA, IB),
    C("int_div_trunc", lambda m, a, b: m.div(a, b, rounding_mode="trunc"), IA, IB),
    C("int_div_true", lambda m, a, b: m.div(a, b), IA, IB),
    C("int_remainder", lambda m, a, b: m.remainder(a, b), IA, IB),
    C("int_fmod", lambda m, a, b: m.fmod(a, b), IA, IB),
    C("int_remainder_scalar", lambda m, a: m.remainder(a, -4), IA),
    C("scalar_remainder", lambda m, b: m.remainder(7, b), IB),
    C("int_pow", lambda m, a, b: m.pow(a, m.abs(b)), IA, IB),
    C("int_pow_base", lambda m, b: m.pow(2, m.abs(b)), IB),
    C("int_round", lambda m, a: m.round(a) + m.floor(a) + m.ceil(a) + m.trunc(a), IA),
    C("int_exp", lambda m, a: m.exp(a.abs() * 0.1), IA),
    C("int_sqrt", lambda m, a: m.sqrt(a.abs()), IA),
    C("int_clamp", lambda m, a: m.clamp(a, -3, 4), IA),
    C("int_clamp_float", lambda m, a: m.clamp(a, -3.5), IA),
    C("eq", lambda m, x, y: m.eq(x, y) | (x == 0.5), (2, 3), (2, 3)),
    C("ne", lambda m, a, b: m.ne(a, b), IA, IB),
    C("lt", lambda m, x, y: m.lt(x, y), (2, 3), (3,)),
    C("le", lambda m, x: x <= 0.2, (2, 3)),
    C("gt", lambda m, a: m.gt(a, 2.5), IA),
    C("ge", lambda m, x, y: x.ge(y), (2, 3), (2, 3)),
    C("greater", lambda m, x, y: x.greater(y) ^ x.less(y), (2, 3), (2, 3)),
    C("logical_and", lambda m, a, b: m.logical_and(a, b), BA, BB),
    C("logical_or", lambda m, x, a: m.logical_or(x, a), (2, 3), IA),
    C("logical_xor", lambda m, a, b: m.logical_xor(a, b), IA, BB),
    C("logical_not", lambda m, x: m.logical_not(x), (2, 3)),
    C("bitwise_and", lambda m, a, b: m.bitwise_and(a, b), IA, IB),
    C("bitwise_or", lambda m, a, b: a | b, IA, IB),
    C("bitwise_xor", lambda m, a, b: m.bitwise_xor(a, 6), IA, IB),
    C("bitwise_not", lambda m, a: ~a, IA),
    C("bitwise_bool", lambda m, a, b: (a & b) | (~a ^ b), BA, BB),
    C("bitwise_left_shift", lambda m, a, b: m.bitwise_left_shift(a, m.abs(b)), IA, IB),
    C("bitwise_right_shift", lambda m, a: a >> 1, IA),
    C("lshift_op", lambda m, a: a << 2, IA),
    C("isnan", lambda m, x: m.isnan(x), ANY),
    C("isinf", lambda m, x: m.isinf(x), ANY),
    C("isfinite", lambda m, x: m.isfinite(x), ANY),
    C("nan_to_num_values", lambda m, x: m.nan_to_num(x, nan=2.0, posinf=9.0), ANY),
    C("nan_to_num_default", lambda m, x: m.nan_to_num(x), ANY),
    C("fmax_nan", lambda m, x, y: m.fmax(x, y), ANY, (2, 3)),
    C("fmin_nan", lambda m, x, y: m.fmin(y, x), ANY, (2, 3)),
    C("xlogy_zero", lambda m, x, y: m.xlogy(x * 0, y - 2), (2, 3), (2, 3)),
]


@pytest.mark.parametrize(("fn", "specs", "second", "fd", "kw"), CASES)
def test_against_torch(fn, specs, second, fd, kw):
    check(fn, *specs, **kw)


@pytest.mark.parametrize(("fn", "specs", "second", "fd", "kw"), [c for c in CASES
                                                                  if c.values[3]])
def test_finite_differences(fn, specs, second, fd, kw):
    gradcheck(fn, *specs, second_order=second)


@pytest.mark.parametrize(("fn", "specs", "second", "fd", "kw"), NO_GRAD)
def test_against_torch_no_grad(fn, specs, second, fd, kw):
    check(fn, *specs, grad=False, **kw)


# ---- in-place variants: on a non-leaf, so gradients flow through the rebased graph ---------
INPLACE = [
    C("add_", lambda m, x, y: (x * 1).add_(y, alpha=2), (2, 3), (3,)),
    C("sub_", lambda m, x, y: (x * 1).sub_(y), (2, 3), (2, 3)),
    C("mul_", lambda m, x, y: (x * 1).mul_(y), (2, 3), (2, 3)),
    C("div_", lambda m, x, y: (x * 1).div_(y), (2, 3), Positive((2, 3))),
    C("pow_", lambda m, x: (x * 1).pow_(2), (2, 3)),
    C("iadd", lambda m, x, y: _iops(x * 1, y), (2, 3), Positive((2, 3))),
    C("clamp_", lambda m, x: (x * 1).clamp_(-0.5, 0.5), (2, 3)),
    C("clip_", lambda m, x: (x * 1).clip_(min=0.0), (2, 3)),
    C("clamp_min_", lambda m, x: (x * 1).clamp_min_(0.1), (2, 3)),
    C("exp_", lambda m, x: (x * 1).exp_(), (2, 3)),
    C("log_", lambda m, x: (x * 1).log_(), Positive((2, 3))),
    C("sqrt_", lambda m, x: (x * 1).sqrt_(), Positive((2, 3))),
    C("rsqrt_", lambda m, x: (x * 1).rsqrt_(), Positive((2, 3))),
    C("abs_", lambda m, x: (x * 1).abs_(), (2, 3)),
    C("neg_", lambda m, x: (x * 1).neg_(), (2, 3)),
    C("sin_cos_", lambda m, x: (x * 1).sin_().cos_(), (2, 3)),
    C("tanh_", lambda m, x: (x * 1).tanh_(), (2, 3)),
    C("sigmoid_", lambda m, x: (x * 1).sigmoid_(), (2, 3)),
    C("reciprocal_", lambda m, x: (x * 1).reciprocal_(), Positive((2, 3))),
    C("square_", lambda m, x: (x * 1).square_(), (2, 3)),
    C("floor_", lambda m, x: (x * 3).floor_() * x, (2, 3)),
    C("round_", lambda m, x: (x * 3).round_() + x, (2, 3)),
    C("trunc_frac_", lambda m, x: (x * 3).frac_() + (x * 3).trunc_(), (2, 3)),
    C("expm1_log1p_", lambda m, x: (x * 1).expm1_() + (x * 1).log1p_(), Positive((2, 3))),
    C("erf_", lambda m, x: (x * 1).erf_(), (2, 3)),
    C("atan_", lambda m, x: (x * 1).atan_(), (2, 3)),
    C("remainder_", lambda m, x: (x * 1).remainder_(0.6), (2, 3)),
    C("fmod_", lambda m, x, y: (x * 1).fmod_(y), (2, 3), Positive((3,))),
    C("lerp_", lambda m, x, y: (x * 1).lerp_(y, 0.25), (2, 3), (2, 3)),
    C("addcmul_", lambda m, x, a, b: (x * 1).addcmul_(a, b, value=2), (2, 3), (2, 3), (2, 3)),
    C("addcdiv_", lambda m, x, a, b: (x * 1).addcdiv_(a, b), (2, 3), (2, 3), Positive((2, 3))),
    C("masked_fill_", lambda m, x: (x * 1).masked_fill_(x > 0, 0.5), (2, 3)),
    C("nan_to_num_", lambda m, x: (x * 1).nan_to_num_(), (2, 3)),
    C("fill_", lambda m, x: (x * 1).fill_(2.0) * x, (2, 3)),
    C("fill_tensor", lambda m, x, v: (x * 1).fill_(v.sum()) * x, (2, 3), (3,)),
    C("zero_", lambda m, x: (x * 1).zero_() + x, (2, 3)),
    C("copy_", lambda m, x, y: (x * 1).copy_(y) * x, (2, 3), (3,)),
    C("copy_into_const", lambda m, x: m.zeros(2, 3, dtype=x.dtype).copy_(x * 2), (2, 3)),
]


def _iops(x, y):
    x += y
    x *= y
    x -= 0.5
    x /= y
    return x


@pytest.mark.parametrize(("fn", "specs", "second", "fd", "kw"), INPLACE)
def test_inplace_against_torch(fn, specs, second, fd, kw):
    check(fn, *specs, **kw)


@pytest.mark.parametrize(("fn", "specs", "second", "fd", "kw"), INPLACE[:8] + INPLACE[-5:])
def test_inplace_finite_differences(fn, specs, second, fd, kw):
    gradcheck(fn, *specs, second_order=second)


def test_int_inplace_and_bitwise_inplace():
    a, b = flow.tensor(IA), flow.tensor(IB)
    ta, tb = torch.tensor(IA), torch.tensor(IB)
    for op in ("floor_divide_", "remainder_", "bitwise_and_", "bitwise_xor_"):
        getattr(a, op)(b)
        getattr(ta, op)(tb)
    a |= b
    ta |= tb
    np.testing.assert_array_equal(a.numpy(), ta.numpy())


def test_inplace_shares_storage_and_bumps_version():
    x = flow.ones(2, 3)
    v = x[0]
    before = x._version
    x.mul_(3).add_(1)
    assert v.tolist() == [4.0, 4.0, 4.0]
    assert x._version == before + 2


def test_inplace_on_int_tensor_refuses_float_result():
    with pytest.raises(RuntimeError, match="can't be cast"):
        flow.tensor(IA).div_(2)


# ---- the in-place writers nn.init uses ------------------------------------------------------
def test_uniform_normal_fill_zero_copy():
    flow.manual_seed(0)
    x = flow.empty(2000)
    assert x.uniform_(-2, 3) is x
    assert -2 <= x.min().item() and x.max().item() < 3 and abs(x.mean().item() - 0.5) < 0.1
    x.normal_(mean=1.0, std=2.0)
    assert abs(x.mean().item() - 1.0) < 0.2 and abs(x.numpy().std() - 2.0) < 0.2
    x.fill_(flow.tensor(2.5))
    assert (x.numpy() == 2.5).all()
    x.zero_()
    assert not x.numpy().any()
    x.copy_(flow.arange(2000))
    np.testing.assert_array_equal(x.numpy(), np.arange(2000, dtype=np.float32))
    h = flow.empty(3, dtype=flow.float16).normal_()
    assert h.dtype == flow.float16


def test_uniform_is_seeded_by_manual_seed():
    flow.manual_seed(3)
    a = flow.empty(5).uniform_()
    flow.manual_seed(3)
    b = flow.empty(5).uniform_()
    assert flow.equal(a, b)
    g = flow.Generator().manual_seed(3)
    flow.manual_seed(4)
    assert flow.equal(flow.empty(5).uniform_(generator=g), a)


def test_init_writers_on_leaf_under_no_grad():
    w = flow.randn(3, 4, requires_grad=True)
    with flow.no_grad():
        w.uniform_(-1, 1)
        w.mul_(2)
    assert w.is_leaf and w.requires_grad and w.grad_fn is None
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w.normal_()


def test_fill_and_copy_cut_the_old_history():
    x = flow.randn(3, requires_grad=True)
    y = x * 2
    y.fill_(1.0)
    (y * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3, np.float32))
    src = flow.randn(3, requires_grad=True)
    z = flow.zeros(2, 3).copy_(src)
    assert z.requires_grad
    z.sum().backward()
    np.testing.assert_array_equal(src.grad.numpy(), np.full(3, 2.0, np.float32))


# ---- where does not leak nan from the branch not taken ----------------------------------
XS = np.array([-2.0, -0.5, 0.0, 0.5, 3.0])
SAFE = [
    ("sqrt", lambda m, x: m.where(x > 0, m.sqrt(x), 0.0)),
    ("log", lambda m, x: m.where(x > 0, m.log(x), 0.0)),
    ("log2", lambda m, x: m.where(x > 0, m.log2(x), 0.0)),
    ("log10", lambda m, x: m.where(x > 0, m.log10(x), 0.0)),
    ("log1p", lambda m, x: m.where(x > 1, m.log1p(x - 1), 0.0)),
    ("rsqrt", lambda m, x: m.where(x > 0, m.rsqrt(x), 0.0)),
    ("pow_half", lambda m, x: m.where(x > 0, x ** 0.5, 0.0)),
    ("pow_neg", lambda m, x: m.where(x > 0, x ** -2.0, 0.0)),
    ("reciprocal", lambda m, x: m.where(x != 0, 1.0 / x, 0.0)),
    ("div", lambda m, x: m.where(x != 0, m.ones_like(x) / x, 0.0)),
    ("acos", lambda m, x: m.where(x.abs() < 1, m.acos(x), 0.0)),
    ("asin", lambda m, x: m.where(x.abs() < 1, m.asin(x), 0.0)),
    ("atanh", lambda m, x: m.where(x.abs() < 1, m.atanh(x), 0.0)),
    ("acosh", lambda m, x: m.where(x > 1, m.acosh(x), 0.0)),
    ("xlogy", lambda m, x: m.where(x > 0, m.xlogy(x, x), 0.0)),
]


@pytest.mark.parametrize(("name", "fn"), SAFE, ids=[s[0] for s in SAFE])
def test_where_gives_zero_not_nan_grad_for_the_branch_not_taken(name, fn):
    x = flow.tensor(XS, requires_grad=True)
    t = torch.tensor(XS, requires_grad=True)
    fn(flow, x).sum().backward()
    fn(torch, t).sum().backward()
    ours, theirs = x.grad.numpy(), t.grad.numpy()
    assert np.isfinite(ours).all(), f"{name}: nan/inf gradient leaked through where: {ours}"
    ok = np.isfinite(theirs)  # torch leaks nan there; elsewhere we agree with it
    np.testing.assert_allclose(ours[ok], theirs[ok], rtol=1e-6)
    assert (ours[~ok] == 0).all()


def test_where_second_order_stays_finite():
    x = flow.tensor(XS, requires_grad=True)
    (g,) = flow.autograd.grad(flow.where(x > 0, x.sqrt(), 0.0).sum(), [x], create_graph=True)
    (g2,) = flow.autograd.grad(g.sum(), [x])
    assert np.isfinite(g2.numpy()).all()


# ---- Tensor methods exist wherever torch has them ------------------------------------------
def _public(module):
    return [n for n in module.__all__ if not n.startswith("_")]


def test_methods_and_inplace_variants_match_torch():
    from flowgrad.ops import elementwise, elementwise_more, math
    missing = []
    for mod in (elementwise, elementwise_more, math):
        for name in _public(mod):
            assert hasattr(flow, name), f"flow.{name} missing"
            for n in (name, name + "_"):
                if hasattr(torch.Tensor, n) and not hasattr(flow.Tensor, n):
                    missing.append(n)
    for n in ("fill_", "zero_", "copy_", "uniform_", "normal_", "__and__", "__or__",
              "__xor__", "__invert__", "__lshift__", "__rshift__", "__floordiv__", "__mod__"):
        if not hasattr(flow.Tensor, n):
            missing.append(n)
    assert not missing, f"Tensor methods torch has and flowgrad lacks: {missing}"


# ---- bad arguments: the message names the op and the values -----------------------------
F32 = flow.ones(2, 3)
I64 = flow.tensor(IA)
ERRORS = [
    ("bitwise_and_float", lambda: flow.bitwise_and(F32, I64), NotImplementedError,
     "bitwise_and.*float32"),
    ("bitwise_or_op_float", lambda: F32 | F32, NotImplementedError, "bitwise_or.*'Float'"),
    ("bitwise_xor_float_scalar", lambda: I64 ^ 1.5, NotImplementedError, "bitwise_xor"),
    ("bitwise_not_float", lambda: flow.bitwise_not(F32), NotImplementedError, "bitwise_not"),
    ("shift_half", lambda: flow.bitwise_left_shift(F32.half(), 1), NotImplementedError,
     "'Half'"),
    ("invert_float", lambda: ~F32, TypeError, "only implemented on integer and Boolean"),
    ("div_mode", lambda: flow.div(F32, F32, rounding_mode="round"), RuntimeError,
     "rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'"),
    ("int_div_zero", lambda: flow.floor_divide(I64, flow.zeros_like(I64)), RuntimeError,
     "ZeroDivisionError"),
    ("int_remainder_zero", lambda: I64 % 0, RuntimeError, "ZeroDivisionError"),
    ("int_fmod_zero", lambda: flow.fmod(I64, 0), RuntimeError, "ZeroDivisionError"),
    ("int_neg_pow", lambda: I64 ** -1, RuntimeError, "negative integer powers.*int64"),
    ("neg_bool", lambda: -flow.tensor([True]), RuntimeError, "Negation.*bool"),
    ("sub_bool", lambda: flow.tensor([True]) - flow.tensor([False]), RuntimeError,
     "Subtraction.*two bool tensors"),
    ("clamp_no_bounds", lambda: flow.clamp(F32), RuntimeError, "clamp.*'min' or 'max'"),
    ("addcdiv_int", lambda: flow.addcdiv(I64, I64, I64), RuntimeError,
     "Integer division with addcdiv.*int64"),
    ("lerp_dtype", lambda: flow.lerp(F32, F32.double(), 0.5), RuntimeError,
     "lerp.*float32.*`end`.*float64"),
    ("add_bad_type", lambda: flow.add(F32, "a"), TypeError, "add.*unsupported operand type str"),
    ("fill_dim", lambda: F32.clone().fill_(flow.ones(2)), RuntimeError,
     "fill_ only supports 0-dimension value tensor.*1 dimensions"),
    ("fill_bad_value", lambda: F32.clone().fill_("x"), TypeError, "fill_.*str"),
    ("copy_shape", lambda: F32.clone().copy_(flow.ones(4)), RuntimeError,
     r"copy_.*\(4,\).*\(2, 3\)"),
    ("uniform_range", lambda: F32.clone().uniform_(2, 1), RuntimeError, "from=2 > to=1"),
    ("normal_std", lambda: F32.clone().normal_(0, -1), RuntimeError, "std >= 0.0.*-1"),
    ("uniform_int", lambda: I64.clone().uniform_(), RuntimeError, "uniform_.*int64"),
    ("hypot_int", lambda: flow.hypot(I64, I64), NotImplementedError, "hypot.*int64"),
]


@pytest.mark.parametrize(("name", "fn", "exc", "match"), ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_arguments(name, fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_clamp_min_greater_than_max_is_max_like_torch():
    x = np.linspace(-2, 2, 7).astype(np.float32)
    np.testing.assert_array_equal(flow.clamp(flow.tensor(x), 1, -1).numpy(),
                                  torch.clamp(torch.tensor(x), 1, -1).numpy())


@pytest.mark.parametrize("value", [0.5, 2.7, 3, -1.5])
def test_integer_addcmul_casts_value_to_the_integer_type_as_torch(value):
    a = np.array([1, 2, 4])
    ours = flow.addcmul(flow.tensor(a), flow.tensor(a), flow.tensor(a), value=value)
    theirs = torch.addcmul(torch.tensor(a), torch.tensor(a), torch.tensor(a), value=value)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("exponent", [3, 3.0, -2, -0.5, 2, 0.5])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scalar_pow_by_products_is_torchs_bit_for_bit(exponent, dtype):
    """x ** 3, x ** -2 and x ** -0.5 are products as in torch's CPU kernel (glibc's pow of a
    negative base is slow): the same bits as torch, signed zeros, infinities and nan included."""
    x = np.random.default_rng(0).uniform(-3, 3, 1000).astype(dtype)
    x[:7] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e30]
    got = flow.tensor(x).pow(exponent).numpy()
    want = torch.from_numpy(x).pow(exponent).numpy()
    if exponent == 0.5:  # NumPy's and torch's sqrt may differ in the last bit
        np.testing.assert_allclose(got, want, rtol=3e-7 if dtype == "float32" else 1e-15)
    else:
        assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


@pytest.mark.parametrize("exponent", [2, 3, 2.5, 4])
def test_pow_gradient_op_differentiates_again_as_torch(exponent):
    """pow's gradient is one op (scalar_pow_grad); differentiated in x and in the incoming
    gradient, to third order, it gives torch's numbers."""
    x0, v0 = np.array([0.5, 1.25, 2.0, 0.75]), np.array([0.3, -1.2, 0.8, 2.0])
    results = []
    for m in (flow, torch):
        x, v = m.tensor(x0, requires_grad=True), m.tensor(v0, requires_grad=True)
        (g,) = m.autograd.grad(x.pow(exponent), x, grad_outputs=v, create_graph=True)
        gx, gv = m.autograd.grad((g * m.tensor(v0[::-1].copy())).sum(), [x, v],
                                 create_graph=True)
        (gxx,) = m.autograd.grad(gx.sum(), x)
        results.append([t.detach().numpy() for t in (g, gx, gv, gxx)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("base", [-3, -0.5, 0, 0.0, 2.5])
def test_number_to_a_tensor_power_gradient_matches_torch(base):
    # d/dx base ** x is base ** x * log(base): nan for a negative base, and for base 0 zero
    # where x >= 0 and -inf where x < 0 (flowgrad gave 0 for every base <= 0)
    got = []
    for m in (torch, flow):
        x = m.tensor([2.0, 0.5, 0.0, -1.0], dtype=m.float64, requires_grad=True)
        (g,) = m.autograd.grad((base ** x).sum(), x)
        got.append(g.tolist())
    np.testing.assert_equal(got[1], got[0])


@pytest.mark.parametrize("op", ["floor_divide", "remainder", "fmod"])
def test_integer_division_by_zero_of_an_empty_tensor_divides_nothing(op):
    # torch raises ZeroDivisionError only when an element is divided
    for m in (torch, flow):
        empty = m.zeros(0, dtype=m.int32)
        assert getattr(m, op)(empty, 0).shape == (0,)
        assert getattr(m, op)(m.ones(1, 2, dtype=m.int64), m.zeros(0, 1, dtype=m.int64)).shape \
            == (0, 2)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        getattr(flow, op)(flow.ones(2, dtype=flow.int32), 0)


def _scaled_product(m, a, b, c):
    if m is flow:
        from flowgrad.ops.registry import REGISTRY
        return REGISTRY["scaled_product"](a, b, c, scale=-2.0)
    return a * b * c * -2.0


def test_scaled_product_is_the_product_of_three_to_second_order():
    """The one-node product of three that tanh's and pow's second derivatives record
    (broadcasting inputs: the engine un-broadcasts its gradients)."""
    check(_scaled_product, (2, 3), (3,), (2, 1))
    gradcheck(_scaled_product, (2, 3), (3,), (2, 1))


@pytest.mark.parametrize("f", [lambda m, x: m.tanh(x) ** 3, lambda m, x: m.tanh(x * x)])
def test_tanh_and_pow_to_third_order_as_torch(f):
    x0 = np.array([0.3, -1.1, 0.7, 1.9])
    results = []
    for m in (flow, torch):
        x = m.tensor(x0, requires_grad=True)
        (g,) = m.autograd.grad(f(m, x).sum(), x, create_graph=True)
        (h,) = m.autograd.grad(g.sum(), x, create_graph=True)
        (k,) = m.autograd.grad(h.sum(), x)
        results.append([t.detach().numpy() for t in (g, h, k)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)



@pytest.mark.parametrize("value", [1.0001, -0.0, 0.0, float("nan"), float("inf"), -2.5, 1e300,
                                   3, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
def test_kernels_with_shared_constants_give_the_python_scalar_bits(value, dtype):
    """scalar_mul, scalar_div, scalar_add, relu and the gradients of tanh and relu take their
    constants as shared 0-d arrays (device.constant) where that gives the same bits as NumPy
    with the Python number: signed zeros, nan, overflow to inf, ints and bools included, twice
    in a row (the cache must not mix -0.0 with 0.0)."""
    from flowgrad.ops.registry import REGISTRY

    k = {name: REGISTRY[name].kernel for name in
         ("scalar_mul", "scalar_div", "scalar_add", "relu", "relu_grad", "tanh_grad",
          "scaled_product", "scalar_pow_grad")}
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, 64).astype(dtype)
    dy = rng.standard_normal(64).astype(dtype)
    if dtype != "int32":
        x[:5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
    y = np.tanh(x) if dtype != "int32" else x
    with np.errstate(all="ignore"):
        for _ in range(2):
            cases = [(k["scalar_mul"](np, x, value=value), (x * value).astype(dtype)),
                     (k["scalar_div"](np, x, value=value), (x / value).astype(dtype)),
                     (k["scalar_add"](np, x, value=value), (x + value).astype(dtype)),
                     (k["relu"](np, x), np.maximum(x, 0)),
                     (k["relu_grad"](np, x, dy), np.where(x <= 0, np.zeros((), dtype), dy))]
            if dtype == "float16":  # tanh_grad computes half precision in float32, as torch
                y32, dy32 = y.astype(np.float32), dy.astype(np.float32)
                cases.append((k["tanh_grad"](np, y, dy), (dy32 * (1 - y32 * y32)).astype(dtype)))
            elif dtype != "int32":
                cases.append((k["tanh_grad"](np, y, dy), dy * (1 - y * y)))
                product = x * dy * x
                product *= value
                cases.append((k["scaled_product"](np, x, dy, x, scale=value), product))
                e = value if type(value) is not bool else 3
                if e != 0 and e == e:  # (pow's gradient of exponent e, the op's own formula;
                    # a float32 power rounded from float64's)
                    power = (x.astype(np.float64) ** (e - 1)).astype(dtype) \
                        if dtype == "float32" else x ** (e - 1)
                    cases.append((k["scalar_pow_grad"](np, x, dy, exponent=e),
                                  (dy * (e * power)).astype(dtype)))
            for got, want in cases:
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got.view(f"u{got.itemsize}"),
                                              want.view(f"u{want.itemsize}"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("special", [False, True])
def test_relu_grad_on_large_arrays_is_torchs_select(dtype, special):
    """relu_grad above the small-array size multiplies by the mask made a float array (the
    fast road) and redoes the product with a `where` only when it holds a nan: the values are
    torch's `y <= 0 ? 0 : dy` either way, with an inf or nan dy where y <= 0, a nan y and
    signed zeros in y and dy; only the sign of a zero may differ (a negative dy times the
    mask's 0 is -0.0, torch's select gives +0.0)."""
    from flowgrad.ops.registry import REGISTRY

    rng = np.random.default_rng(2)
    y = np.maximum(rng.standard_normal((64, 80)), 0).astype(dtype)
    dy = rng.standard_normal((64, 80)).astype(dtype)
    y[0, :4], dy[1, :2] = [-0.0, 0.0, np.nan, -1.0], [-0.0, 0.0]
    if special:
        dy[0, :4], dy[2, 0] = [np.inf, -np.inf, np.nan, np.nan], np.inf
        dy[y > 0] *= 1e4  # (float16: some overflow to inf where y > 0 too)
    want = torch.ops.aten.threshold_backward(torch.from_numpy(dy), torch.from_numpy(y), 0).numpy()
    got = REGISTRY["relu_grad"].kernel(np, y, dy)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # (nan where nan; -0.0 equals 0.0)


@pytest.mark.parametrize("code", ["x.pow(b)", "(x * 1).pow_(b)", "x ** b[0]", "x.pow(b * 2)"])
def test_pow_by_a_bool_exponent_has_torchs_backward(code):
    # torch's pow derivative computes exponent - 1, which a bool exponent refuses: the forward
    # runs, its backward raises. flowgrad promoted the exponent and gave a gradient
    # (out_arg_fuzz seed 9013959: pow_ of a non-leaf by a bool tensor)
    def run(m):
        x = m.tensor([1.5, 2.0, 3.0], dtype=m.float64, requires_grad=True)
        b = m.tensor([True, False, True])
        y = eval(code, {"x": x, "b": b})
        try:
            y.sum().backward()
        except RuntimeError:
            return y.tolist(), RuntimeError
        return y.tolist(), x.grad.tolist()
    assert run(flow) == run(torch)
