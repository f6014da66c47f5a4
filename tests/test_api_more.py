"""The names added for API coverage (ops/math_extra.py, ops/tensor_extra.py, ops/nn_extra.py,
nn.NLLLoss2d) against torch: one line per name (forward and every input gradient where
torch differentiates), float64 finite differences to second order for the differentiable
compositions, and the predicates and Python-valued results compared as values."""
import numpy as np
import pytest
import torch
from helpers import Positive, check, op_table_tests

import flowgrad as flow

# torch's deprecation warnings for upsample_* and NLLLoss2d, which flowgrad gives too
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated")

I1 = np.array([12, -9, 0, 7, 25], dtype=np.int64)
I2 = np.array([18, 6, 5, -21, 10], dtype=np.int64)
SPECIAL = np.array([[1.0, -0.0, 0.0], [-np.inf, np.inf, -2.5]], dtype=np.float32)
EXPS = np.array([[1, -2, 0], [3, 0, -1]], dtype=np.int64)
# torch's ldexp gradient is 0 at negative integer exponents (it computes 2 ** e in the
# integer dtype); flowgrad's is the true 2 ** e: gradients are compared at e >= 0
EXPS_POS = np.abs(EXPS)
COUNTS = np.array([0, 3, 1, 1, 5, 3], dtype=np.int64)
FREQ = np.array([1, 2, 1, 3], dtype=np.int64)
POS_WEIGHT = np.array([0.5, 2.0, 1.5], dtype=np.float32)
LABELS = np.array([1.0, -1.0, -1.0, 1.0], dtype=np.float32)
IDX = np.array([[0, 2], [3, 1]], dtype=np.int64)
CLS = np.array([[[0, 2], [1, 1]], [[2, 0], [0, 1]]], dtype=np.int64)


def nn(m):
    return m.nn


def F(m):
    return m.nn.functional


def inplace(name, *args):
    """x * 1 (a non-leaf, so torch allows the write), then the in-place method."""
    return lambda m, x, *rest: getattr(x * 1, name)(*(rest + args))


CASES = [
    # ---- math_extra: differentiable compositions
    ("absolute", lambda m, x: m.absolute(x), (2, 3)),
    ("absolute_m", lambda m, x: x.absolute(), (2, 3)),
    ("absolute_", inplace("absolute_"), (2, 3)),
    ("deg2rad", lambda m, x: m.deg2rad(x * 90), (2, 3)),
    ("deg2rad_m", lambda m, x: x.deg2rad(), (2, 3)),
    ("deg2rad_", inplace("deg2rad_"), (2, 3)),
    ("rad2deg", lambda m, x: m.rad2deg(x), (2, 3)),
    ("rad2deg_m", lambda m, x: x.rad2deg(), (2, 3)),
    ("rad2deg_", inplace("rad2deg_"), (2, 3)),
    ("copysign", lambda m, x, y: m.copysign(x, y.detach()), (2, 3), (3,)),
    ("copysign_m", lambda m, x: x.copysign(-1.0), (2, 3)),
    ("copysign_", lambda m, x, y: (x * 1).copysign_(y.detach()), (2, 3), (2, 3)),
    ("float_power", lambda m, x, y: m.float_power(x, y), Positive((2, 3)), (2, 3)),
    ("float_power_m", lambda m, x: x.float_power(2), (2, 3)),
    ("float_power_", lambda m, x: (x.double() * 1).float_power_(3), (2, 3)),
    ("frexp", lambda m, x: m.frexp(x * 10).mantissa, (2, 3)),
    ("frexp_m", lambda m, x: x.frexp()[0] * x, (2, 3)),
    ("ldexp", lambda m, x, e: m.ldexp(x, e), (2, 3), EXPS_POS),
    ("ldexp_float", lambda m, x, e: m.ldexp(x, e), (2, 3), (2, 3)),
    ("ldexp_m", lambda m, x, e: x.ldexp(e), (2, 3), EXPS_POS),
    ("ldexp_", lambda m, x, e: (x * 1).ldexp_(e), (2, 3), EXPS_POS),
    ("logaddexp", lambda m, x, y: m.logaddexp(x, y), (2, 3), (3,)),
    ("logaddexp_big", lambda m, x, y: m.logaddexp(x * 500, y * 500), (2, 3), (2, 3)),
    ("logaddexp_m", lambda m, x, y: x.logaddexp(y), (2, 3), (2, 3)),
    ("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), (2, 3), (2, 1)),
    ("logaddexp2_m", lambda m, x, y: x.logaddexp2(y), (2, 3), (2, 3)),
    ("nextafter", lambda m, x, y: m.nextafter(x, y.detach()) * x, (2, 3), (2, 3)),
    ("nextafter_m", lambda m, x, y: x.nextafter(y.detach()), (2, 3), (2, 3)),
    ("nextafter_", lambda m, x, y: (x * 1).nextafter_(y.detach()), (2, 3), (2, 3)),
    ("rsub", lambda m, x, y: m.rsub(x, y, alpha=2), (2, 3), (3,)),
    ("rsub_scalar", lambda m, x: m.rsub(x, 1.5), (2, 3)),
    # ---- tensor_extra
    ("dist", lambda m, x, y: m.dist(x, y), (2, 3), (3,)),
    ("dist_p1", lambda m, x, y: x.dist(y, 1), (2, 3), (2, 3)),
    ("dist_p3", lambda m, x, y: m.dist(x, y, 3), (2, 3), (2, 3)),
    ("renorm", lambda m, x: m.renorm(x * 2, 2, 0, 1.5), (3, 4)),
    ("renorm_m", lambda m, x: x.renorm(1, 1, 2.0), (3, 4)),
    ("renorm_", lambda m, x: (x * 2).renorm_(2, -1, 1.0), (2, 3, 4)),
    ("addr", lambda m, a, u, v: m.addr(a, u, v, beta=0.5, alpha=2), (3, 4), (3,), (4,)),
    ("addr_m", lambda m, a, u, v: a.addr(u, v), (3, 4), (3,), (4,)),
    ("addr_", lambda m, a, u, v: (a * 1).addr_(u, v), (3, 4), (3,), (4,)),
    ("aminmax", lambda m, x: m.aminmax(x), (3, 4)),
    ("aminmax_dim", lambda m, x: x.aminmax(dim=1, keepdim=True), (3, 4)),
    ("aminmax_dim0", lambda m, x: m.aminmax(x, dim=0), (3, 4)),
    ("cov", lambda m, x: m.cov(x), (3, 5)),
    ("cov_1d", lambda m, x: x.cov(correction=0), (5,)),
    ("cov_weights", lambda m, x, a: m.cov(x, fweights=m.tensor(FREQ), aweights=a.abs()),
     (2, 4), Positive((4,))),
    ("cov_aweights", lambda m, x, a: m.cov(x, aweights=a, correction=2), (2, 4),
     Positive((4,))),
    ("corrcoef", lambda m, x: m.corrcoef(x), (3, 5)),
    ("corrcoef_m", lambda m, x: x.corrcoef(), (2, 6)),
    ("diagonal_scatter", lambda m, x, s: m.diagonal_scatter(x, s), (3, 3), (3,)),
    ("diagonal_scatter_off", lambda m, x, s: x.diagonal_scatter(s, 1, 1, 2), (2, 3, 4), (2, 3)),
    ("select_scatter", lambda m, x, s: m.select_scatter(x, s, 1, 2), (3, 4), (3,)),
    ("select_scatter_m", lambda m, x, s: x.select_scatter(s, 0, -1), (3, 4), (4,)),
    ("slice_scatter", lambda m, x, s: m.slice_scatter(x, s, 1, 1, 4, 2), (3, 5), (3, 2)),
    ("slice_scatter_m", lambda m, x, s: x.slice_scatter(s, start=2), (4, 2), (2, 2)),
    ("block_diag", lambda m, a, b, c: m.block_diag(a, b, c), (2, 3), (3,), ()),
    ("split_with_sizes", lambda m, x: m.split_with_sizes(x, [1, 3], 1), (2, 4)),
    ("split_with_sizes_m", lambda m, x: x.split_with_sizes((2, 1)), (3, 2)),
    ("sum_to_size", lambda m, x: x.sum_to_size(1, 4), (3, 4)),
    ("sum_to_size_lead", lambda m, x: x.sum_to_size((4,)), (2, 3, 4)),
    ("sum_to_size_kw", lambda m, x: x.sum_to_size(size=(3, 1)), (3, 4)),
    ("fill_diagonal_", lambda m, x: (x * 1).fill_diagonal_(2.5), (3, 3)),
    ("fill_diagonal_wrap", lambda m, x: (x * 1).fill_diagonal_(-1.0, wrap=True), (7, 3)),
    ("fill_diagonal_tall", lambda m, x: (x * 1).fill_diagonal_(-1.0), (7, 3)),
    ("fill_diagonal_3d", lambda m, x: (x * 1).fill_diagonal_(4.0), (3, 3, 3)),
    ("addmm_", lambda m, a, b, c: (a * 1).addmm_(b, c, beta=0.5), (2, 4), (2, 3), (3, 4)),
    ("addmv_", lambda m, a, b, c: (a * 1).addmv_(b, c, alpha=2), (2,), (2, 3), (3,)),
    ("addbmm_", lambda m, a, b, c: (a * 1).addbmm_(b, c), (2, 4), (3, 2, 3), (3, 3, 4)),
    ("baddbmm_", lambda m, a, b, c: (a * 1).baddbmm_(b, c), (3, 2, 4), (3, 2, 3), (3, 3, 4)),
    ("cumsum_", inplace("cumsum_", 1), (2, 3)),
    ("cumprod_", inplace("cumprod_", 0), (3, 2)),
    ("ipow", lambda m, x: _ipow(x * 1), (2, 3)),
    ("reversed", lambda m, x: reversed(x * 1), (3, 2)),
    ("detach", lambda m, x, y: m.detach(x) * y, (2, 3), (2, 3)),
    # ---- nn_extra
    ("pdist", lambda m, x: F(m).pdist(x), (4, 3)),
    ("pdist_p1", lambda m, x: m.pdist(x, 1), (4, 3)),
    ("pdist_p3", lambda m, x: m.pdist(x, p=3.0), (3, 2)),
    ("channel_shuffle", lambda m, x: F(m).channel_shuffle(x, 2), (2, 4, 3)),
    ("channel_shuffle_t", lambda m, x: m.channel_shuffle(x, 3), (1, 6, 2, 2)),
    ("upsample_bilinear", lambda m, x: F(m).upsample_bilinear(x, scale_factor=2),
     (1, 2, 3, 3)),
    ("upsample_bilinear_size", lambda m, x: F(m).upsample_bilinear(x, size=(4, 5)),
     (1, 1, 2, 3)),
    ("upsample_nearest", lambda m, x: F(m).upsample_nearest(x, scale_factor=2), (1, 2, 3)),
    ("adaptive_max_pool1d_wi", lambda m, x: F(m).adaptive_max_pool1d_with_indices(x, 3),
     (2, 3, 7)),
    ("adaptive_max_pool2d_wi", lambda m, x: F(m).adaptive_max_pool2d_with_indices(x, (2, 3)),
     (1, 2, 5, 6)),
    ("adaptive_max_pool3d_wi", lambda m, x: F(m).adaptive_max_pool3d_with_indices(x, 2),
     (1, 1, 4, 4, 4)),
    ("max_pool3d_wi", lambda m, x: F(m).max_pool3d_with_indices(x, 2, stride=1),
     (1, 2, 3, 3, 3)),
    ("torch_bilinear", lambda m, a, b, w, c: m.bilinear(a, b, w, c), (2, 3), (2, 4),
     (5, 3, 4), (5,)),
    ("torch_batch_norm", lambda m, x, w, b: m.batch_norm(x, w, b, None, None, True, 0.1, 1e-5,
                                                         False), (4, 3, 2), (3,), (3,)),
    ("torch_instance_norm", lambda m, x, w, b: m.instance_norm(
        x, w, b, None, None, True, 0.1, 1e-5, False), (2, 3, 5), (3,), (3,)),
    ("torch_embedding", lambda m, w: m.embedding(w, m.tensor(IDX)), (4, 3)),
    ("torch_embedding_pad", lambda m, w: m.embedding(w, m.tensor(IDX), 1), (4, 3)),
    ("torch_kl_div", lambda m, x, t: m.kl_div(x, t.abs(), 2), (2, 3), (2, 3)),
    ("torch_kl_div_log", lambda m, x, t: m.kl_div(x, t, 0, log_target=True), (2, 3), (2, 3)),
    ("torch_poisson_nll", lambda m, x, t: m.poisson_nll_loss(x, t.abs() * 3, True, True,
                                                             1e-8, 1), (2, 3), (2, 3)),
    ("torch_hinge", lambda m, x: m.hinge_embedding_loss(x, m.tensor(LABELS), 0.5, 2), (4,)),
    ("torch_margin_ranking", lambda m, a, b: m.margin_ranking_loss(a, b, m.tensor(LABELS),
                                                                   0.2, 0), (4,), (4,)),
    ("torch_cosine_embedding", lambda m, a, b: m.cosine_embedding_loss(
        a, b, m.tensor(LABELS), 0.1, 1), (4, 3), (4, 3)),
    ("torch_triplet", lambda m, a, p, n: m.triplet_margin_loss(a, p, n, 1.0, 2, 1e-6, True, 1),
     (3, 4), (3, 4), (3, 4)),
    ("torch_bce_logits", lambda m, x, t: m.binary_cross_entropy_with_logits(
        x, t.sigmoid(), None, m.tensor(POS_WEIGHT), 2), (2, 3), (2, 3)),
    ("NLLLoss2d", lambda m, x: nn(m).NLLLoss2d()(x.log_softmax(1), m.tensor(CLS)),
     (2, 3, 2, 2)),
]


def _ipow(x):
    x **= 2  # Tensor.__ipow__
    return x


# Rows whose derivatives are smooth at the random inputs: float64 finite differences to
# second order (the rest are linear, piecewise or covered by their parts' own tables).
FD = [c for c in CASES if c[0] in {
    "logaddexp", "logaddexp2", "copysign", "float_power", "frexp", "ldexp_float", "dist",
    "dist_p3", "renorm", "cov_weights", "corrcoef", "pdist", "pdist_p3", "aminmax_dim",
    "diagonal_scatter", "slice_scatter", "block_diag", "torch_kl_div", "torch_triplet"}]

test_against_torch, test_finite_differences = op_table_tests(CASES, FD)


# ---- results without a gradient: values (and dtypes) equal torch's ----------------------
NO_GRAD = [
    ("signbit", lambda m, x: m.signbit(x), SPECIAL),
    ("signbit_m", lambda m, x: x.signbit(), SPECIAL),
    ("isposinf", lambda m, x: m.isposinf(x), SPECIAL),
    ("isposinf_m", lambda m, x: x.isposinf(), SPECIAL),
    ("isneginf", lambda m, x: m.isneginf(x), SPECIAL),
    ("isneginf_m", lambda m, x: x.isneginf(), I1),
    ("frexp_exponent", lambda m, x: m.frexp(x).exponent, SPECIAL[:, :1]),
    ("frexp_m", lambda m, x: x.frexp().exponent, (2, 3)),
    ("heaviside", lambda m, x: m.heaviside(x, m.tensor([0.5, 0.25, 2.0])), SPECIAL),
    ("heaviside_m", lambda m, x, v: (x * 0).heaviside(v), (2, 3), (3,)),
    ("heaviside_", lambda m, x, v: x.detach().clone().heaviside_(v.detach()), (2, 3), (2, 3)),
    ("gcd", lambda m, a, b: m.gcd(a, b), I1, I2),
    ("gcd_m", lambda m, a, b: a.gcd(b), I1, I2),
    ("gcd_", lambda m, a, b: a.clone().gcd_(b), I1, I2),
    ("lcm", lambda m, a, b: m.lcm(a, b), I1, I2),
    ("lcm_m", lambda m, a, b: a.lcm(b), I1, I2),
    ("lcm_", lambda m, a, b: a.clone().lcm_(b), I1, I2),
    ("greater", lambda m, a, b: m.greater(a, b), (2, 3), (3,)),
    ("greater_equal", lambda m, a: m.greater_equal(a, 0.1), (2, 3)),
    ("less", lambda m, a, b: m.less(a, b), I1, I2),
    ("less_equal", lambda m, a, b: m.less_equal(a, b), (2, 3), (2, 3)),
    ("not_equal", lambda m, a, b: m.not_equal(a, b), I1, I2),
    ("greater_", lambda m, a, b: a.detach().clone().greater_(b), (2, 3), (2, 3)),
    ("greater_equal_", lambda m, a, b: a.clone().greater_equal_(b), I1, I2),
    ("less_", lambda m, a, b: a.detach().clone().less_(b), (2, 3), (3,)),
    ("less_equal_", lambda m, a: a.detach().clone().less_equal_(0.0), (2, 3)),
    ("not_equal_", lambda m, a, b: a.clone().not_equal_(b), I1, I2),
    ("nextafter_down", lambda m, x: m.nextafter(x, m.tensor(-np.inf)) - x, (2, 3)),
    ("ldexp_int", lambda m, a, e: m.ldexp(a, e), I1, I2 % 5),
    ("ldexp_neg", lambda m, x, e: m.ldexp(x, e), (2, 3), EXPS),
    ("deg2rad_int", lambda m, a: m.deg2rad(a), I1),
    ("float_power_int", lambda m, a, e: m.float_power(a, e), I1, I2 % 3),
    ("bincount", lambda m, x: m.bincount(x), COUNTS),
    ("bincount_m", lambda m, x: x.bincount(minlength=9), COUNTS),
    ("bincount_w", lambda m, x, w: m.bincount(x, w.detach()), COUNTS, (6,)),
    ("unravel_index", lambda m, i: m.unravel_index(i, (2, 3, 5)),
     np.array([0, 7, 29, -1], dtype=np.int64)),
    ("unravel_index_int", lambda m, i: m.unravel_index(i, 6), np.array(4, dtype=np.int64)),
    ("aminmax_int", lambda m, x: m.aminmax(x), I1),
    ("block_diag_int", lambda m, a, b: m.block_diag(a, b), I1[:2].reshape(1, 2), I2),
    ("ilshift", lambda m, a, b: _ilshift(a.clone(), b), I1, I2 % 3),
    ("irshift", lambda m, a, b: _irshift(a.clone(), b), I1, I2 % 3),
]


def _ilshift(a, b):
    a <<= b
    return a


def _irshift(a, b):
    a >>= b
    return a


@pytest.mark.parametrize("case", NO_GRAD, ids=[c[0] for c in NO_GRAD])
def test_against_torch_no_grad(case):
    name, fn, *specs = case
    check(fn, *specs, grad=False)


# ---- Python-valued results ---------------------------------------------------------------
def _both(fn, *arrays):
    ours = fn(flow, *[flow.tensor(a) for a in arrays])
    theirs = fn(torch, *[torch.tensor(a) for a in arrays])
    return ours, theirs


VALUES = [
    ("is_nonzero", lambda m, x: (m.is_nonzero(x[:1]), x[1:2].is_nonzero()),
     np.array([0.0, 2.0])),
    ("is_same_size", lambda m, x, y: (m.is_same_size(x, y), x.is_same_size(x[:1])),
     np.ones((2, 3)), np.zeros((2, 3))),
    ("is_signed", lambda m, x, i, u: (m.is_signed(x), i.is_signed(), m.is_signed(u),
                                      u.bool().is_signed()),
     np.ones(2), I1, I1.astype(np.uint8)),
    ("contains", lambda m, x: (2.0 in x, 7 in x, m.tensor(1.0) in x), np.array([[1.0, 2.0]])),
    ("is_inference", lambda m, x: m.is_inference(x), np.ones(2)),
    ("detach_grad", lambda m, x: m.detach(x.requires_grad_()).requires_grad, np.ones(2)),
    ("typename", lambda m, x: (m.typename(x).split(".")[-1], m.typename(3),
                               m.typename(x.double()).split(".")[-1]), np.ones(2, np.float32)),
    # torch checks no range: an index outside the shape wraps modulo it (flowgrad raised a
    # ValueError), and int32 indices give int64 coordinates (flowgrad kept int32)
    ("unravel_index_outside", lambda m, i: [(c.tolist(), str(c.dtype).split(".")[-1]) for c in
                                            m.unravel_index(i, (2, 3))],
     np.array([6, -7, -13, 100, 5], np.int32)),
]


@pytest.mark.parametrize("case", VALUES, ids=[c[0] for c in VALUES])
def test_values_equal_torch(case):
    name, fn, *arrays = case
    ours, theirs = _both(fn, *arrays)
    assert ours == theirs


ERRORS = [
    ("is_nonzero_many", lambda m: m.is_nonzero(m.ones(2)), RuntimeError,
     "more than one value"),
    ("is_nonzero_empty", lambda m: m.is_nonzero(m.ones(0)), RuntimeError, "no values"),
    ("gcd_float", lambda m: m.gcd(m.ones(2), m.ones(2)), RuntimeError, "gcd"),
    ("bincount_2d", lambda m: m.bincount(m.ones(2, 2, dtype=m.int64)), RuntimeError,
     "1-d non-negative"),
    ("bincount_neg", lambda m: m.bincount(m.tensor([1, -1])), RuntimeError,
     "non-negative"),
    ("frexp_int", lambda m: m.frexp(m.tensor([1, 2])), RuntimeError, "floating"),
    ("cov_3d", lambda m: m.cov(m.ones(2, 2, 2)), RuntimeError, "two or fewer"),
    ("select_scatter_shape", lambda m: m.select_scatter(m.zeros(2, 3), m.ones(2), 0, 0),
     RuntimeError, "expected src to have a size equal to the slice"),
    ("fill_diagonal_1d", lambda m: m.zeros(3).fill_diagonal_(1.0), RuntimeError,
     "dimensions must larger than 1"),
    ("fill_diagonal_unequal", lambda m: m.zeros(2, 3, 3).fill_diagonal_(1.0), RuntimeError,
     "all dimensions of input must be of equal length"),
    ("sum_to_size_bad", lambda m: m.ones(2, 3).sum_to_size(4), RuntimeError,
     "is not expandable to size"),
    ("pdist_3d", lambda m: m.pdist(m.ones(2, 2, 2)), RuntimeError, "pdist only supports 2D"),
    ("channel_shuffle_groups", lambda m: m.channel_shuffle(m.ones(1, 3, 2), 2), RuntimeError,
     "channel"),
    ("float_power_inplace_dtype", lambda m: m.ones(2).float_power_(2), RuntimeError,
     "float_power_"),
    ("heaviside_backward", lambda m: m.heaviside(m.ones(2, requires_grad=True),
                                                 m.ones(2)).sum().backward(), RuntimeError,
     "heaviside"),
    ("contains_type", lambda m: "a" in m.ones(2), RuntimeError, "__contains__ only supports"),
    ("unravel_index_zero_size", lambda m: m.unravel_index(m.tensor([0]), (2, 0)), RuntimeError,
     "ZeroDivisionError"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_errors_like_torch(case):
    """flowgrad raises the exception type torch raises, with the message naming the cause."""
    name, fn, kind, pattern = case
    with pytest.raises(kind):
        fn(torch)
    with pytest.raises(kind, match=pattern):
        fn(flow)
