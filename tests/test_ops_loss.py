"""Losses against torch (forward and grads), by float64 finite differences to second order,
numerical stability for huge logits, and bad arguments. One line per case."""
import numpy as np
import pytest
import torch
from helpers import Positive, check, gradcheck

import flowgrad as flow

T4 = np.array([2, 0, 1, 2], dtype=np.int64)
T4_IGN = np.array([2, -100, 1, 0], dtype=np.int64)
T_2D = np.array([[0, 2], [1, 1]], dtype=np.int64)           # (N=2, d1=2)
SIGN = np.array([1, -1, 1, -1], dtype=np.int64)
SIGN_F = np.array([1.0, -1.0, -1.0, 1.0])
W3 = np.array([0.2, 1.0, 2.5])
PROBS = np.array([[0.1, 0.9, 0.3], [0.5, 0.2, 0.7]])
BITS = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])


def F(m):
    return m.nn.functional


def _w(m, x):
    """Class weights as a constant tensor of x's dtype (no grad)."""
    return m.tensor(W3, dtype=x.dtype)


def _soft(m, x):
    return m.softmax(x * 0 + m.tensor([[0.2, 1.0, -0.5], [0.3, 0.3, 0.1]], dtype=x.dtype), 1)


def _ctc(m, x, reduction="mean", zero_infinity=False):
    lp = x.log_softmax(2)
    targets = m.tensor([[1, 2, 2], [2, 1, 0]])
    return F(m).ctc_loss(lp, targets, m.tensor([5, 4]), m.tensor([3, 2]),
                         reduction=reduction, zero_infinity=zero_infinity)


def _ctc_1d(m, x):
    lp = x.log_softmax(2)
    return F(m).ctc_loss(lp, m.tensor([1, 1, 2, 2]), m.tensor([4, 4]), m.tensor([2, 2]),
                         blank=0, reduction="sum")


CASES = [
    ("cross_entropy", lambda m, x, t: F(m).cross_entropy(x, t), (4, 3), T4),
    ("cross_entropy_sum", lambda m, x, t: F(m).cross_entropy(x, t, reduction="sum"), (4, 3), T4),
    ("cross_entropy_none", lambda m, x, t: F(m).cross_entropy(x, t, reduction="none"),
     (4, 3), T4),
    ("cross_entropy_weight_ignore", lambda m, x, t: F(m).cross_entropy(x, t, _w(m, x)),
     (4, 3), T4_IGN),
    ("cross_entropy_nd", lambda m, x, t: F(m).cross_entropy(x, t), (2, 3, 2), T_2D),
    ("cross_entropy_1d", lambda m, x: F(m).cross_entropy(x, m.tensor(1)), (3,)),
    ("cross_entropy_probs", lambda m, x, p: F(m).cross_entropy(x, p), (2, 3), PROBS),
    ("cross_entropy_probs_w", lambda m, x, p: F(m).cross_entropy(
        x, p, _w(m, x), reduction="none", label_smoothing=0.2), (2, 3), PROBS),
    ("cross_entropy_smooth", lambda m, x, t: F(m).cross_entropy(x, t, label_smoothing=0.1),
     (4, 3), T4_IGN),
    ("cross_entropy_smooth_w", lambda m, x, t: F(m).cross_entropy(
        x, t, _w(m, x), label_smoothing=0.3), (4, 3), T4_IGN),
    ("cross_entropy_smooth_sum", lambda m, x, t: F(m).cross_entropy(
        x, t, reduction="sum", label_smoothing=0.3), (2, 3, 2), T_2D),
    ("nll_loss", lambda m, x, t: F(m).nll_loss(x, t), (4, 3), T4),
    ("nll_loss_weight", lambda m, x, t: F(m).nll_loss(x, t, _w(m, x), reduction="sum"),
     (4, 3), T4_IGN),
    ("nll_loss_none_nd", lambda m, x, t: F(m).nll_loss(x, t, reduction="none"), (2, 3, 2), T_2D),
    ("mse_loss", lambda m, x, y: F(m).mse_loss(x, y), (3, 4), (3, 4)),
    ("mse_loss_none", lambda m, x, y: F(m).mse_loss(x, y, reduction="none"), (3, 4), (3, 4)),
    ("l1_loss", lambda m, x, y: F(m).l1_loss(x, y, reduction="sum"), (3, 4), (3, 4)),
    ("smooth_l1_loss", lambda m, x, y: F(m).smooth_l1_loss(x, y, beta=0.7), (3, 4), (3, 4)),
    ("smooth_l1_loss_b0", lambda m, x, y: F(m).smooth_l1_loss(x, y, beta=0.0), (3, 4), (3, 4)),
    ("huber_loss", lambda m, x, y: F(m).huber_loss(x, y, delta=0.6, reduction="none"),
     (3, 4), (3, 4)),
    ("bce", lambda m, x, t: F(m).binary_cross_entropy(m.sigmoid(x), t), (2, 3), PROBS),
    ("bce_weight", lambda m, x, t: F(m).binary_cross_entropy(
        m.sigmoid(x), t, weight=m.tensor([0.5, 1.0, 2.0], dtype=x.dtype), reduction="none"),
     (2, 3), PROBS),
    # targets of exactly 0 and 1, constant: finite differences would step outside [0, 1]
    ("bce_bits", lambda m, x: F(m).binary_cross_entropy(
        m.sigmoid(x), m.tensor(BITS, dtype=x.dtype), reduction="sum"), (2, 3)),
    ("bce_logits", lambda m, x, t: F(m).binary_cross_entropy_with_logits(x, t), (2, 3), BITS),
    ("bce_logits_pw", lambda m, x, t: F(m).binary_cross_entropy_with_logits(
        x, t, pos_weight=_w(m, x), reduction="sum"), (2, 3), PROBS),
    ("bce_logits_w", lambda m, x, t: F(m).binary_cross_entropy_with_logits(
        x, t, weight=m.tensor([[0.5], [2.0]], dtype=x.dtype), reduction="none"), (2, 3), BITS),
    ("kl_div", lambda m, x, t: F(m).kl_div(x.log_softmax(1), t, reduction="batchmean"),
     (2, 3), PROBS),
    ("kl_div_zero_target", lambda m, x: F(m).kl_div(
        x, m.tensor([[0.0, 0.5, 0.5]], dtype=x.dtype), reduction="sum"), (1, 3)),
    ("kl_div_log_target", lambda m, x, t: F(m).kl_div(x, t, reduction="none", log_target=True),
     (2, 3), (2, 3)),
    ("poisson_nll", lambda m, x, t: F(m).poisson_nll_loss(x, t), (2, 3), Positive((2, 3))),
    ("poisson_nll_full", lambda m, x, t: F(m).poisson_nll_loss(
        x, t * 3, log_input=False, full=True, reduction="sum"), Positive((2, 3)),
     Positive((2, 3))),
    ("gaussian_nll", lambda m, x, t, v: F(m).gaussian_nll_loss(x, t, v), (2, 3), (2, 3),
     Positive((2, 3))),
    ("gaussian_nll_homo", lambda m, x, t, v: F(m).gaussian_nll_loss(
        x, t, v, full=True, reduction="none"), (2, 3), (2, 3), Positive((2,))),
    ("cosine_embedding", lambda m, a, b, y: F(m).cosine_embedding_loss(a, b, y, margin=-0.5),
     (4, 3), (4, 3), SIGN),
    ("margin_ranking", lambda m, a, b, y: F(m).margin_ranking_loss(a, b, y, margin=0.3),
     (4,), (4,), SIGN_F),
    ("hinge_embedding", lambda m, x, y: F(m).hinge_embedding_loss(x, y, margin=0.5,
                                                                  reduction="none"),
     (4,), SIGN_F),
    ("triplet_margin", lambda m, a, p, n: F(m).triplet_margin_loss(a, p, n, margin=2.0),
     (3, 4), (3, 4), (3, 4)),
    ("triplet_margin_swap_p1", lambda m, a, p, n: F(m).triplet_margin_loss(
        a, p, n, margin=3.0, p=1, swap=True, reduction="none"), (3, 4), (3, 4), (3, 4)),
    ("multi_margin", lambda m, x, t: F(m).multi_margin_loss(x, t, margin=1.5), (4, 3), T4),
    ("multi_margin_p2_w", lambda m, x, t: F(m).multi_margin_loss(
        x, t, p=2, weight=_w(m, x), reduction="none"), (4, 3), T4),
    ("soft_margin", lambda m, x: F(m).soft_margin_loss(x, m.tensor(SIGN_F, dtype=x.dtype)),
     (4,)),
    ("multilabel_soft_margin", lambda m, x, t: F(m).multilabel_soft_margin_loss(x, t),
     (2, 3), BITS),
    ("multilabel_soft_margin_w", lambda m, x, t: F(m).multilabel_soft_margin_loss(
        x, t, weight=_w(m, x), reduction="none"), (2, 3), BITS),
    ("ctc_mean", _ctc, (5, 2, 3)),
    ("ctc_none", lambda m, x: _ctc(m, x, "none"), (5, 2, 3)),
    ("ctc_concat_targets", _ctc_1d, (4, 2, 3)),
]
# ctc_loss: torch defines no double backward either
FIRST_ORDER_ONLY = {"ctc_mean", "ctc_none", "ctc_concat_targets"}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_against_torch(case):
    name, fn, *specs = case
    check(fn, *specs)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_finite_differences(case):
    name, fn, *specs = case
    gradcheck(fn, *specs, second_order=name not in FIRST_ORDER_ONLY)


def test_ctc_double_backward_raises():
    x = flow.randn(5, 2, 3, requires_grad=True)
    loss = _ctc(flow, x)
    (g,) = flow.autograd.grad(loss, [x], create_graph=True)
    with pytest.raises(RuntimeError, match="ctc_loss: double backward"):
        g.sum().backward()


def test_ctc_zero_infinity():
    # target length 3 cannot fit in 2 frames: the loss is infinite (or zeroed)
    x = np.random.default_rng(0).standard_normal((2, 1, 3)).astype(np.float32)
    for zero_inf in (False, True):
        out = {}
        for m in (flow, torch):
            xt = m.tensor(x, requires_grad=True)
            loss = F(m).ctc_loss(xt.log_softmax(2), m.tensor([[1, 2, 1]]), m.tensor([2]),
                                 m.tensor([3]), reduction="sum", zero_infinity=zero_inf)
            loss.backward()
            out[m] = (loss.detach().numpy(), xt.grad.numpy())
        np.testing.assert_allclose(out[flow][0], out[torch][0])
        if zero_inf:
            np.testing.assert_allclose(out[flow][1], out[torch][1], atol=1e-6)


# (targets, target_lengths, input_lengths, x's shape): targets of length 0, alone or mixed
CTC_EMPTY = {
    "padded_all_empty": ([[]] * 3, [0, 0, 0], [5, 4, 2], (5, 3, 4)),
    "padded_some_empty": ([[1, 2], [0, 0], [3, 0]], [2, 0, 1], [5, 4, 3], (5, 3, 4)),
    "concat_all_empty": ([], [0, 0], [5, 3], (5, 2, 4)),
    "concat_some_empty": ([2, 3, 1], [0, 3, 0], [5, 5, 1], (5, 3, 4)),
    "unbatched_empty": ([], [0], [4], (4, 3)),
}


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", sorted(CTC_EMPTY))
def test_ctc_empty_targets_match_torch(case, reduction):
    targets, target_lengths, input_lengths, shape = CTC_EMPTY[case]
    x = np.random.default_rng(3).standard_normal(shape)
    out = {}
    for m in (flow, torch):
        xt = m.tensor(x, requires_grad=True)
        batched = len(shape) == 3
        lengths = [m.tensor(v if batched else v[0]) for v in (input_lengths, target_lengths)]
        loss = F(m).ctc_loss(xt.log_softmax(-1), m.tensor(targets, dtype=m.int64), *lengths,
                             reduction=reduction)
        loss.sum().backward()
        out[m] = (loss.detach().numpy(), xt.grad.numpy())
    assert np.isfinite(out[flow][0]).all()
    np.testing.assert_allclose(out[flow][0], out[torch][0], rtol=1e-10)
    np.testing.assert_allclose(out[flow][1], out[torch][1], rtol=1e-8, atol=1e-12)


HUGE = np.array([[1e4, -1e4, 0.0], [-1e4, 3.0, 1e4]], dtype=np.float32)


@pytest.mark.parametrize("fn", [
    lambda m, x: F(m).cross_entropy(x, m.tensor([1, 0])),
    lambda m, x: F(m).cross_entropy(x, m.tensor([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])),
    lambda m, x: F(m).cross_entropy(x, m.tensor([1, 0]), label_smoothing=0.1),
    lambda m, x: F(m).binary_cross_entropy_with_logits(x, m.tensor(BITS, dtype=x.dtype)),
    lambda m, x: m.log_softmax(x, 1),
], ids=["ce", "ce_probs", "ce_smooth", "bce_logits", "log_softmax"])
def test_huge_logits_stay_finite(fn):
    for m in (flow,):
        y = fn(m, m.tensor(HUGE, requires_grad=True))
        assert np.isfinite(y.detach().numpy()).all()
    check(fn, HUGE, rtol=1e-5, atol=1e-3)


def test_soft_margin_huge_logits_finite():
    # torch overflows to inf here; the exact value is mean(logaddexp(0, -x))
    y = F(flow).soft_margin_loss(flow.tensor(HUGE), flow.ones(2, 3))
    np.testing.assert_allclose(y.item(), np.logaddexp(0, -HUGE.astype(np.float64)).mean(),
                               rtol=1e-6)


def _ce(*args, **kw):
    return lambda: F(flow).cross_entropy(*args, **kw)


X = flow.randn(3, 4)
BAD = [
    ("ce_out_of_range", _ce(X, flow.tensor([0, 1, 5])), IndexError,
     "cross_entropy: target 5 is out of bounds for 4 classes"),
    ("ce_negative", _ce(X, flow.tensor([0, -3, 1])), IndexError, "target -3 is out of bounds"),
    ("ce_batch", _ce(X, flow.tensor([0, 1])), ValueError,
     r"input batch_size \(3\) to match target batch_size \(2\)"),
    ("ce_float_target_shape", _ce(X, flow.rand(3, 5)), RuntimeError,
     r"floating-point target holds class probabilities and must have the input's shape "
     r"\(3, 4\)"),
    ("ce_one_hot_int_target", _ce(X, flow.zeros(3, 4, dtype=flow.int64)), RuntimeError,
     r"target of the input's shape \(3, 4\) holds class probabilities.*argmax\(1\)"),
    ("ce_spatial_target_shape", _ce(flow.randn(2, 2, 3), flow.zeros(2, 2, dtype=flow.int64)),
     RuntimeError, r"expected target of shape \(2, 3\)"),
    ("ce_weight_size", _ce(X, flow.tensor([0, 1, 2]), weight=flow.ones(3)), RuntimeError,
     r"defined either for all 4 classes.*shape: \[3\]"),
    ("ce_reduction", _ce(X, flow.tensor([0, 1, 2]), reduction="avg"), ValueError,
     "cross_entropy: 'avg' is not a valid value for reduction"),
    ("ce_ignore_probs", _ce(X, flow.rand(3, 4), ignore_index=1), RuntimeError,
     r"ignore_index \(1\) is not supported"),
    ("ce_bool_target", _ce(X, flow.tensor([True, False, True])), RuntimeError,
     "cross_entropy: expected target of an integer dtype"),
    ("nll_int_input", lambda: F(flow).nll_loss(flow.tensor([[1, 2]]), flow.tensor([0])),
     RuntimeError, "nll_loss: expected a floating point input"),
    ("bce_range", lambda: F(flow).binary_cross_entropy(flow.tensor([1.5, 0.2]),
                                                       flow.tensor([1.0, 0.0])),
     RuntimeError, "binary_cross_entropy: all elements of input should be between 0 and 1, "
                   "got 1.5"),
    ("bce_shape", lambda: F(flow).binary_cross_entropy(flow.tensor([0.5]),
                                                       flow.tensor([1.0, 0.0])),
     ValueError, r"target size \(\(2,\)\) that is different to the input size \(\(1,\)\)"),
    ("bce_weight", lambda: F(flow).binary_cross_entropy(flow.rand(3), flow.rand(3),
                                                        weight=flow.rand(2)),
     RuntimeError, r"weight of shape \(2,\) can't be broadcast"),
    ("bce_logits_shape", lambda: F(flow).binary_cross_entropy_with_logits(
        X, flow.rand(3, 5)), ValueError, r"target size \(\(3, 5\)\) must be the same"),
    ("kl_reduction", lambda: F(flow).kl_div(X, X, reduction="bad"), ValueError,
     "kl_div: 'bad' is not a valid value"),
    ("mse_reduction", lambda: F(flow).mse_loss(X, X, reduction="avg"), ValueError,
     "mse_loss: 'avg' is not a valid value"),
    ("mse_shape", lambda: F(flow).mse_loss(X, flow.randn(2, 4)), RuntimeError,
     r"mse_loss: the size of input \(3, 4\) and target \(2, 4\)"),
    ("gaussian_var_size", lambda: F(flow).gaussian_nll_loss(X, X, flow.ones(3, 2)),
     ValueError, "var is of incorrect size"),
    ("gaussian_var_negative", lambda: F(flow).gaussian_nll_loss(X, X, -flow.ones(3, 4)),
     ValueError, "var has negative entry"),
    ("multi_margin_p", lambda: F(flow).multi_margin_loss(X, flow.tensor([0, 1, 2]), p=3),
     ValueError, "only p == 1 and p == 2"),
    ("multi_margin_range", lambda: F(flow).multi_margin_loss(X, flow.tensor([0, 1, 4])),
     RuntimeError, r"class indices must lie in \[0, 4\)"),
    ("smooth_l1_beta", lambda: F(flow).smooth_l1_loss(X, X, beta=-1.0), RuntimeError,
     "beta must be non-negative"),
    ("ctc_lengths", lambda: F(flow).ctc_loss(flow.randn(5, 2, 3), flow.tensor([[1, 2]] * 2),
                                             flow.tensor([5]), flow.tensor([2, 2])),
     RuntimeError, r"ctc_loss: input_lengths must have length 2 \(the batch\), got 1"),
    ("ctc_input_length", lambda: F(flow).ctc_loss(flow.randn(5, 2, 3), flow.tensor([[1, 2]] * 2),
                                                  flow.tensor([6, 5]), flow.tensor([2, 2])),
     RuntimeError, r"ctc_loss: input_lengths\[0\] = 6 exceeds the 5 time steps"),
    ("ctc_blank", lambda: F(flow).ctc_loss(flow.randn(5, 2, 3), flow.tensor([[1, 2]] * 2),
                                           flow.tensor([5, 5]), flow.tensor([2, 2]), blank=3),
     RuntimeError, r"ctc_loss: blank must be in label range: a class index in \[0, 3\), got 3"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_arguments(case):
    name, fn, exc, match = case
    with pytest.warns() if name == "mse_shape" else _nothing():
        with pytest.raises(exc, match=match):
            fn()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# torch's deprecated size_average / reduce arguments of the functional losses set the reduction
# (they were taken and ignored: F.mse_loss(x, y, size_average=False) gave the mean)
_X = [[0.5, -1.0, 2.0], [1.5, 0.2, -0.3]]
_P = [[0.2, 0.7, 0.4], [0.9, 0.1, 0.5]]
_LEGACY = {
    "cross_entropy": lambda m, F, **k: F.cross_entropy(m.tensor(_X), m.tensor([2, 0]), **k),
    "nll_loss": lambda m, F, **k: F.nll_loss(m.tensor(_X), m.tensor([2, 0]), **k),
    "mse_loss": lambda m, F, **k: F.mse_loss(m.tensor(_X), m.tensor(_P), **k),
    "l1_loss": lambda m, F, **k: F.l1_loss(m.tensor(_X), m.tensor(_P), **k),
    "smooth_l1_loss": lambda m, F, **k: F.smooth_l1_loss(m.tensor(_X), m.tensor(_P), **k),
    "binary_cross_entropy": lambda m, F, **k: F.binary_cross_entropy(
        m.tensor(_P), m.tensor(_P).flip(0), **k),
    "binary_cross_entropy_with_logits": lambda m, F, **k: F.binary_cross_entropy_with_logits(
        m.tensor(_X), m.tensor(_P), **k),
    "kl_div": lambda m, F, **k: F.kl_div(m.tensor(_X), m.tensor(_P), **k),
    "poisson_nll_loss": lambda m, F, **k: F.poisson_nll_loss(m.tensor(_X), m.tensor(_P), **k),
    "cosine_embedding_loss": lambda m, F, **k: F.cosine_embedding_loss(
        m.tensor(_X), m.tensor(_P), m.tensor([1, -1]), **k),
    "margin_ranking_loss": lambda m, F, **k: F.margin_ranking_loss(
        m.tensor(_X[0]), m.tensor(_X[1]), m.tensor([1.0, -1.0, 1.0]), **k),
    "hinge_embedding_loss": lambda m, F, **k: F.hinge_embedding_loss(
        m.tensor(_X), m.tensor([[1.0, -1, 1], [-1, 1, 1]]), **k),
    "triplet_margin_loss": lambda m, F, **k: F.triplet_margin_loss(
        m.tensor(_X), m.tensor(_P), m.tensor(_P).flip(0), **k),
    "multi_margin_loss": lambda m, F, **k: F.multi_margin_loss(m.tensor(_X), m.tensor([2, 0]),
                                                                **k),
    "soft_margin_loss": lambda m, F, **k: F.soft_margin_loss(
        m.tensor(_X), m.tensor([[1.0, -1, 1], [-1, 1, 1]]), **k),
    "multilabel_soft_margin_loss": lambda m, F, **k: F.multilabel_soft_margin_loss(
        m.tensor(_X), m.tensor([[1.0, 0, 1], [0, 1, 1]]), **k),
    "multilabel_margin_loss": lambda m, F, **k: F.multilabel_margin_loss(
        m.tensor(_X), m.tensor([[2, -1, 0], [0, 1, -1]]), **k),
}


@pytest.mark.filterwarnings("ignore:size_average and reduce args")
@pytest.mark.parametrize("legacy", [{"size_average": False}, {"reduce": False},
                                    {"size_average": True, "reduce": True},
                                    {"size_average": False, "reduce": False}],
                         ids=["size_average=False", "reduce=False", "both True", "both False"])
@pytest.mark.parametrize("name", sorted(_LEGACY))
def test_functional_losses_take_legacy_size_average_and_reduce(name, legacy):
    want = _LEGACY[name](torch, torch.nn.functional, **legacy)
    got = _LEGACY[name](flow, flow.nn.functional, **legacy)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


def test_legacy_reduction_by_position_and_its_warning():
    x, y = flow.tensor(_X), flow.tensor(_P)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        total = flow.nn.functional.mse_loss(x, y, False)  # size_average, the third argument
    assert float(total) == pytest.approx(float(((x - y) ** 2).sum()), rel=1e-6)
