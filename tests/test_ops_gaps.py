"""Gap-closing ops against torch (forward and backward) and by float64 finite differences to
second order: rrelu, multilabel_margin_loss, triplet_margin_with_distance_loss, embedding
with scale_grad_by_freq, grid_sample's reflection padding and bicubic mode. One line per case."""
import numpy as np
import pytest
import torch
from helpers import check, gradcheck

import flowgrad as flow
import flowgrad.nn.functional as F

ML_T = np.array([[3, 0, -1, 1], [2, 2, 1, -1], [-1, 0, 1, 2]], dtype=np.int64)
ML_T1 = np.array([3, 0, -1, 1], dtype=np.int64)
GRID4 = np.random.default_rng(3).uniform(-1.4, 1.4, (2, 3, 2, 2))
GRID5 = np.random.default_rng(5).uniform(-1.4, 1.4, (2, 2, 3, 2, 3))
GRID4_TINY = np.random.default_rng(4).uniform(-1.3, 1.3, (1, 2, 2, 2))
GRID5_TINY = np.random.default_rng(6).uniform(-1.3, 1.3, (1, 1, 2, 2, 3))
EMB_I = np.array([[1, 2, 1], [4, 1, 0]], dtype=np.int64)


def _l1(a, b):
    return (a - b).abs().sum(-1)


def _gs(mode, pad, ac):
    return lambda m, x, g: m.nn.functional.grid_sample(x, g, mode=mode, padding_mode=pad,
                                                        align_corners=ac)


GS_CASES = [(f"gs{nd}_{mode}_{pad}_{ac}", _gs(mode, pad, ac), (2, 3) + (4, 5, 6)[3 - nd:],
             GRID4 if nd == 2 else GRID5)
            for nd in (2, 3) for mode in ("bilinear", "nearest", "bicubic")
            for pad in ("zeros", "border", "reflection") for ac in (False, True)
            if not (nd == 3 and mode == "bicubic") and (pad == "reflection" or mode == "bicubic"
                                                        or nd == 3)]


def _rrelu_train(m, x):
    # training draws random slopes: reseed so finite differences see the same ones
    flow.manual_seed(0)
    return F.rrelu(x, 0.1, 0.4, training=True)


CASES = [
    ("rrelu_eval", lambda m, x: m.nn.functional.rrelu(x, 0.1, 0.3), (3, 4)),
    ("rrelu_eval_default", lambda m, x: m.nn.functional.rrelu(x * 1), (5,)),
    ("rrelu_module_eval", lambda m, x: m.nn.RReLU(0.2, 0.5).eval()(x), (2, 3)),
    ("rrelu_eval_inplace", lambda m, x: m.nn.functional.rrelu(x * 1, inplace=True), (2, 3)),
    ("rrelu__eval", lambda m, x: m.nn.functional.rrelu_(x * 1, 0.1, 0.2), (2, 3)),
    ("mlm_mean", lambda m, x, t: m.nn.functional.multilabel_margin_loss(x, t), (3, 4), ML_T),
    ("mlm_sum", lambda m, x, t: m.nn.functional.multilabel_margin_loss(x, t, reduction="sum"),
     (3, 4), ML_T),
    ("mlm_none", lambda m, x, t: m.nn.functional.multilabel_margin_loss(x, t, reduction="none"),
     (3, 4), ML_T),
    ("mlm_1d", lambda m, x, t: m.nn.functional.multilabel_margin_loss(x, t, reduction="none"),
     (4,), ML_T1),
    ("mlm_module", lambda m, x, t: m.nn.MultiLabelMarginLoss()(x, t), (3, 4), ML_T),
    ("tmwd_default", lambda m, a, p, n: m.nn.functional.triplet_margin_with_distance_loss(
        a, p, n), (3, 4), (3, 4), (3, 4)),
    ("tmwd_swap_none", lambda m, a, p, n: m.nn.functional.triplet_margin_with_distance_loss(
        a, p, n, margin=2.0, swap=True, reduction="none"), (3, 4), (3, 4), (3, 4)),
    ("tmwd_l1_sum", lambda m, a, p, n: m.nn.functional.triplet_margin_with_distance_loss(
        a, p, n, distance_function=_l1, margin=1.5, reduction="sum"), (3, 4), (3, 4), (3, 4)),
    ("tmwd_module", lambda m, a, p, n: m.nn.TripletMarginWithDistanceLoss(
        distance_function=_l1, swap=True, margin=3.0)(a, p, n), (2, 3), (2, 3), (2, 3)),
    ("emb_freq", lambda m, w, i: m.nn.functional.embedding(i, w, scale_grad_by_freq=True),
     (5, 3), EMB_I),
    ("emb_freq_pad", lambda m, w, i: m.nn.functional.embedding(
        i, w, padding_idx=1, scale_grad_by_freq=True), (5, 3), EMB_I),
    ("emb_module_freq", lambda m, w, i: m.nn.functional.embedding(
        i, w * 2, scale_grad_by_freq=True) ** 2, (5, 2), EMB_I),
] + GS_CASES


@pytest.mark.parametrize("name,fn,specs", [(c[0], c[1], c[2:]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_against_torch(name, fn, specs):
    check(fn, *specs)


GRAD_CASES = [
    ("rrelu_train", _rrelu_train, (3, 4)),
    ("rrelu_eval", lambda m, x: F.rrelu(x, 0.1, 0.3), (3, 4)),
    ("mlm", lambda m, x, t: F.multilabel_margin_loss(x, t), (3, 4), ML_T),
    ("tmwd", lambda m, a, p, n: F.triplet_margin_with_distance_loss(a, p, n, swap=True),
     (2, 3), (2, 3), (2, 3)),
    ("gs_bicubic_zeros", _gs("bicubic", "zeros", False), (1, 1, 3, 3), GRID4_TINY),
    ("gs_bicubic_reflection_ac", _gs("bicubic", "reflection", True), (1, 1, 3, 3), GRID4_TINY),
    ("gs_bicubic_border", _gs("bicubic", "border", False), (1, 1, 3, 3), GRID4_TINY),
    ("gs_bilinear_reflection", _gs("bilinear", "reflection", False), (1, 1, 3, 3),
     GRID4_TINY),
    ("gs5_bilinear_reflection", _gs("bilinear", "reflection", True), (1, 1, 2, 2, 2),
     GRID5_TINY),
    ("gs5_bilinear_zeros", _gs("bilinear", "zeros", False), (1, 1, 2, 2, 2), GRID5_TINY),
]


@pytest.mark.parametrize("name,fn,specs", [(c[0], c[1], c[2:]) for c in GRAD_CASES],
                         ids=[c[0] for c in GRAD_CASES])
def test_gradcheck(name, fn, specs):
    gradcheck(fn, *specs)


@pytest.mark.parametrize("padding_idx", [None, 1])
def test_embedding_freq_double_backward(padding_idx):
    # scale_grad_by_freq's gradient is not the derivative (finite differences disagree by
    # design). Its rule is linear in dy, dw = A^T dy, so the double backward must be A:
    # ddy = u[idx] / count[idx] (0 at padding_idx). torch's double backward drops the 1/count
    # (it returns u[idx]); flowgrad keeps the adjoint exact.
    rng = np.random.default_rng(0)
    w = flow.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    v = flow.tensor(rng.standard_normal(EMB_I.shape + (3,)), requires_grad=True)
    u = rng.standard_normal((5, 3))
    y = F.embedding(flow.tensor(EMB_I), w, padding_idx=padding_idx, scale_grad_by_freq=True)
    (g,) = flow.autograd.grad(y, [w], v, create_graph=True)
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    ty = torch.nn.functional.embedding(torch.tensor(EMB_I), tw, padding_idx=padding_idx,
                                       scale_grad_by_freq=True)
    (tg,) = torch.autograd.grad(ty, [tw], torch.tensor(v.detach().numpy()))
    np.testing.assert_allclose(g.detach().numpy(), tg.numpy(), rtol=1e-12)
    (ddy,) = flow.autograd.grad((g * flow.tensor(u)).sum(), [v])
    count = np.bincount(EMB_I.reshape(-1))[EMB_I]
    keep = (EMB_I != padding_idx) if padding_idx is not None else 1.0
    np.testing.assert_allclose(ddy.numpy(), u[EMB_I] * (keep / count)[..., None], rtol=1e-12)


# ---- rrelu in training: random slopes, compared with torch by properties ------------------------
@pytest.mark.parametrize("inplace", [False, True])
def test_rrelu_training_properties(inplace):
    lower, upper = 0.1, 0.4
    data = np.random.default_rng(0).standard_normal((50, 40)).astype(np.float32)
    x = flow.tensor(data, requires_grad=True)
    src = x * 1 if inplace else x
    y = F.rrelu(src, lower, upper, training=True, inplace=inplace)
    assert (y is src) == inplace
    y.sum().backward()
    out, g = y.detach().numpy(), x.grad.numpy()
    pos = data >= 0
    np.testing.assert_array_equal(out[pos], data[pos])
    np.testing.assert_array_equal(g[pos & (data > 0)], 1.0)
    slope = out[~pos] / data[~pos]
    assert slope.min() >= lower - 1e-6 and slope.max() <= upper + 1e-6
    assert slope.std() > 0.05  # one slope per element, not one per tensor
    np.testing.assert_allclose(g[~pos], slope, rtol=1e-5)
    # torch draws its slopes from the same interval
    t = torch.nn.functional.rrelu(torch.tensor(data), lower, upper, training=True)
    ts = t.numpy()[~pos] / data[~pos]
    assert ts.min() >= lower - 1e-6 and ts.max() <= upper + 1e-6


def test_rrelu_training_reproducible_and_module():
    x = flow.randn(20)
    flow.manual_seed(3)
    a = F.rrelu(x, training=True)
    flow.manual_seed(3)
    b = flow.nn.RReLU()(x)  # a new module is in training mode
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(F.rrelu_(x.clone(), training=False).numpy(),
                                  F.leaky_relu(x, (1 / 8 + 1 / 3) / 2).numpy())


# ---- bad arguments ---------------------------------------------------------------------
X34 = flow.randn(3, 4)
T34 = flow.tensor(ML_T)

BAD = [
    (lambda: F.rrelu(X34, 0.5, 0.1), RuntimeError, "less than or equal to the upper"),
    (lambda: F.rrelu(flow.arange(3), training=True), NotImplementedError,
     "not implemented for 'Long'"),  # torch's error: rrelu runs leaky_relu's kernel
    (lambda: F.multilabel_margin_loss(X34, T34, reduction="avg"), ValueError,
     "not a valid value for reduction"),
    (lambda: F.multilabel_margin_loss(X34, T34[:1]), RuntimeError, "inconsistent target size"),
    (lambda: F.multilabel_margin_loss(X34, T34 + 2), RuntimeError, "out of range"),
    (lambda: F.multilabel_margin_loss(X34, T34 - 1), RuntimeError, "out of range"),
    (lambda: F.multilabel_margin_loss(X34, T34.float()), RuntimeError, "scalar type Long"),
    (lambda: F.multilabel_margin_loss(flow.randn(2, 3, 4), flow.zeros(2, 3, 4).long()),
     RuntimeError, "non-empty vector or matrix"),
    (lambda: F.multilabel_margin_loss(T34, T34), RuntimeError, "floating point"),
    (lambda: F.triplet_margin_with_distance_loss(X34, X34, X34, margin=0), ValueError,
     "margin must be greater than 0"),
    (lambda: F.triplet_margin_with_distance_loss(X34, X34, X34[0]), RuntimeError,
     "same number of dimensions"),
    (lambda: F.triplet_margin_with_distance_loss(X34, X34, X34, reduction="x"), ValueError,
     "not a valid value for reduction"),
    (lambda: F.grid_sample(flow.randn(1, 1, 2, 2, 2), flow.randn(1, 1, 1, 1, 3),
                           mode="bicubic"), RuntimeError, "bicubic interpolation only supports 4D"),
    (lambda: F.grid_sample(flow.randn(1, 1, 2, 2, 2), flow.randn(1, 1, 1, 1, 2)), RuntimeError,
     "expected grid to have size 3 in last dimension"),
    (lambda: F.grid_sample(flow.randn(1, 1, 2, 2, 2), flow.randn(1, 1, 1, 3)), RuntimeError,
     "same number of dimensions"),
    (lambda: F.grid_sample(flow.randn(1, 2, 2), flow.randn(1, 1, 1)), RuntimeError,
     "expected 4D or 5D input"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments(i):
    fn, exc, match = BAD[i]
    with pytest.raises(exc, match=match):
        fn()
