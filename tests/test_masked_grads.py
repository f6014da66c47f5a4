"""Masked gradients against torch in float64: positions a rule masks out get exactly 0, as
torch's where/masked_fill rules give, even when the upstream gradient there is inf or nan
(0 * inf would be nan); losses whose targets are all ignore_index give zero gradients, not
nan, so one optimizer step cannot turn every weight into nan."""
import itertools

import numpy as np
import pytest
import torch

import flowgrad as flow

X = np.array([[-3.0, -1.0, 0.0, 0.5, 1.0], [2.0, 6.0, 7.0, -0.5, 1.0]])
Y = np.array([[-3.0, 0.0, 0.0, 1.0, 1.0], [2.0, 6.0, 8.0, -0.5, -2.0]])  # ties with X too
P = np.array([[0.1, 0.9, 0.3, 1.0, 0.0], [0.5, 0.2, 0.7, 1.0, 0.0]])  # probabilities
T = np.array([[1.0, 0.0, 1.0, 1.0, 0.0], [0.0, 0.3, 1.0, 0.0, 1.0]])  # targets, ties with P
W = np.array([0.5, 2.0, 0.0, 1.0, 3.0])


def C(name, fn, *arrays):
    return pytest.param(fn, arrays, id=name)


def _pool_in(x, nd):
    return x.reshape((1, 1, 2, 5)[-(nd + 2):] if nd < 3 else (1, 1, 1, 2, 5))


CASES = [
    C("relu", lambda m, x: m.relu(x), X),
    C("relu_method", lambda m, x: x.relu(), X),
    C("relu6", lambda m, x: m.nn.functional.relu6(x), X),
    C("hardtanh", lambda m, x: m.nn.functional.hardtanh(x, -1.0, 1.0), X),
    C("leaky_relu", lambda m, x: m.nn.functional.leaky_relu(x, 0.2), X),
    C("threshold", lambda m, x: m.nn.functional.threshold(x, 0.5, -2.0), X),
    C("hardsigmoid", lambda m, x: m.nn.functional.hardsigmoid(x), X),
    C("hardswish", lambda m, x: m.nn.functional.hardswish(x), X),
    C("hardshrink", lambda m, x: m.nn.functional.hardshrink(x, 1.0), X),
    C("softshrink", lambda m, x: m.nn.functional.softshrink(x, 1.0), X),
    C("prelu", lambda m, x, w: m.nn.functional.prelu(x, w), X, np.array([0.25])),
    C("elu", lambda m, x: m.nn.functional.elu(x), X),
    C("silu", lambda m, x: m.nn.functional.silu(x), X),
    C("silu_far", lambda m, x: m.nn.functional.silu(x), X * 300),  # sigmoid 0: nan, as torch
    C("mish", lambda m, x: m.nn.functional.mish(x), X),
    C("mish_far", lambda m, x: m.nn.functional.mish(x), X * 300),
    C("clamp", lambda m, x: m.clamp(x, -1.0, 1.0), X),
    C("clamp_min", lambda m, x: m.clamp(x, min=0.0), X),
    C("clamp_tensor", lambda m, x, lo: m.clamp(x, min=lo), X, Y),
    C("maximum", lambda m, x, y: m.maximum(x, y), X, Y),
    C("minimum", lambda m, x, y: m.minimum(x, y), X, Y),
    C("max_other", lambda m, x, y: m.max(x, y), X, Y),
    C("abs", lambda m, x: m.abs(x), X),  # torch: sign(0) * inf = nan at 0, as here
    C("max_all", lambda m, x: m.max(x), X),
    C("min_all", lambda m, x: m.min(x), X),
    C("max_all_tie", lambda m, x: x.max(), np.array([1.0, 3.0, 3.0, 2.0])),
    C("amax", lambda m, x: m.amax(x, 1), X),  # torch: nan at the others, as here
    C("max_dim", lambda m, x: m.max(x, 1)[0], X),
    C("min_dim", lambda m, x: m.min(x, 0)[0], X),
    C("max_dim_keepdim", lambda m, x: x.max(dim=0, keepdim=True).values, X),
    C("where", lambda m, x: m.where(x > 0, x, 0.0), X),
    C("max_pool1d", lambda m, x: m.nn.functional.max_pool1d(_pool_in(x, 1), 2), X),
    C("max_pool1d_overlap", lambda m, x: m.nn.functional.max_pool1d(_pool_in(x, 1), 3, 1),
      X),
    C("max_pool2d", lambda m, x: m.nn.functional.max_pool2d(_pool_in(x, 2), 2), X),
    C("max_pool3d", lambda m, x: m.nn.functional.max_pool3d(_pool_in(x, 3), (1, 2, 2)), X),
    C("adaptive_max_pool1d",
      lambda m, x: m.nn.functional.adaptive_max_pool1d(_pool_in(x, 1), 2), X),
    C("bce", lambda m, x, t: m.nn.functional.binary_cross_entropy(x, t, reduction="none"),
      P, T),
    C("bce_mean", lambda m, x, t: m.nn.functional.binary_cross_entropy(x, t), P, T),
    C("bce_weight", lambda m, x, t: m.nn.functional.binary_cross_entropy(
        x, t, weight=m.tensor(W), reduction="none"), P, T),
    C("bce_logits", lambda m, x, t: m.nn.functional.binary_cross_entropy_with_logits(
        x, t, reduction="none"), X, T),
    C("bce_logits_sum", lambda m, x, t: m.nn.functional.binary_cross_entropy_with_logits(
        x, t, reduction="sum"), X, T),
    C("bce_logits_pos_weight", lambda m, x, t: m.nn.functional.binary_cross_entropy_with_logits(
        x, t, pos_weight=m.tensor(W), reduction="none"), X, T),  # torch: no pos_weight grad
    C("smooth_l1", lambda m, x, y: m.nn.functional.smooth_l1_loss(x, y, reduction="none"),
      X, Y),
    C("nll_none_ignored", lambda m, x: m.nn.functional.nll_loss(
        x, m.tensor([-100, 1]), reduction="none"), X),
    C("cross_entropy_none_ignored", lambda m, x: m.nn.functional.cross_entropy(
        x, m.tensor([-100, 1]), reduction="none"), X),
    C("cross_entropy_none_smoothing", lambda m, x: m.nn.functional.cross_entropy(
        x, m.tensor([3, -100]), reduction="none", label_smoothing=0.1), X),
]


def _grads(m, fn, arrays, g):
    ts = [m.tensor(a, requires_grad=True) for a in arrays]
    y = fn(m, *ts)
    y.backward(m.tensor(np.full(tuple(y.shape), g)))
    return [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("g", [np.inf, -np.inf, np.nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("fn,arrays", CASES)
def test_nonfinite_upstream_gradient_matches_torch(fn, arrays, g):
    expected = _grads(torch, fn, arrays, g)
    got = _grads(flow, fn, arrays, g)
    for e, a in zip(expected, got):
        np.testing.assert_array_equal(a, e)  # nan == nan here, and 0 must be 0, not nan


def test_relu_masks_nonfinite_upstream_in_float32_and_keeps_its_nans():
    x = flow.tensor([-1.0, 0.0, 2.0, 3.0], dtype=flow.float32, requires_grad=True)
    flow.relu(x).backward(flow.tensor([np.inf, np.nan, np.nan, -np.inf], dtype=flow.float32))
    np.testing.assert_array_equal(x.grad.numpy(), np.array([0, 0, np.nan, -np.inf], "f4"))


def test_relu_second_order_masks_nonfinite_upstream():
    for m in (torch, flow):
        x = m.tensor([-1.0, 2.0], dtype=m.float64, requires_grad=True)
        dy = m.tensor([1.0, 1.0], dtype=m.float64, requires_grad=True)
        (dx,) = m.autograd.grad(m.relu(x), x, dy, create_graph=True)
        dx.backward(m.tensor([np.inf, 2.0], dtype=m.float64))
        if m is torch:
            expected = dy.grad.numpy()
        else:
            np.testing.assert_array_equal(dy.grad.numpy(), expected)


# ---- losses whose targets are all ignore_index --------------------------------------------
LOSS_CASES = [(fn, red, w, ls) for fn, red, w, ls in itertools.product(
    ["cross_entropy", "nll_loss"], ["mean", "sum", "none"], [False, True], [0.0, 0.1])
    if not (fn == "nll_loss" and ls)]


def _loss(m, fn, x, target, weight, reduction, ls, upstream):
    xt = m.tensor(x, requires_grad=True)
    kw = dict(weight=m.tensor(weight) if weight is not None else None, reduction=reduction)
    if ls:
        kw["label_smoothing"] = ls
    loss = getattr(m.nn.functional, fn)(xt, m.tensor(target), **kw)
    loss.backward(m.tensor(np.full(tuple(loss.shape), upstream)))
    return loss.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("fn,reduction,weighted,ls", LOSS_CASES)
def test_all_targets_ignored_gives_zero_gradients(fn, reduction, weighted, ls):
    x = np.random.default_rng(0).standard_normal((4, 3))
    target = np.full(4, -100)
    weight = np.array([0.3, 1.2, 0.7]) if weighted else None
    upstream = np.inf if reduction == "none" else 1.0  # 'none': inf at every ignored sample
    e_loss, e_grad = _loss(torch, fn, x, target, weight, reduction, ls, upstream)
    loss, grad = _loss(flow, fn, x, target, weight, reduction, ls, upstream)
    np.testing.assert_array_equal(loss, e_loss)  # 'mean': torch's 0 / 0 = nan, as here
    np.testing.assert_array_equal(grad, e_grad)
    np.testing.assert_array_equal(grad, np.zeros_like(x))


@pytest.mark.parametrize("fn,reduction,weighted,ls", LOSS_CASES)
@pytest.mark.parametrize("targets", [[0, -100, 2, -100], [0, 1, -100, 1]], ids=["some",
                                                                             "zero_weight"])
def test_partly_ignored_targets_match_torch(fn, reduction, weighted, ls, targets):
    x = np.random.default_rng(1).standard_normal((4, 3))
    # zero_weight: the valid targets' classes weigh 0, so 'mean' is 0 / 0 (torch: nan there)
    weight = np.array([0.0, 0.0, 0.7]) if targets[2] == -100 else (
        np.array([0.3, 1.2, 0.7]) if weighted else None)
    upstream = np.inf if reduction == "none" else 2.0
    e_loss, e_grad = _loss(torch, fn, x, np.array(targets), weight, reduction, ls, upstream)
    loss, grad = _loss(flow, fn, x, np.array(targets), weight, reduction, ls, upstream)
    np.testing.assert_allclose(loss, e_loss, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(grad, e_grad, rtol=1e-12, equal_nan=True)


def test_sgd_step_on_an_all_ignored_batch_keeps_weights_finite():
    layer = flow.nn.Linear(3, 4).double()
    opt = flow.optim.SGD(layer.parameters(), lr=0.1)
    before = [p.detach().numpy().copy() for p in layer.parameters()]
    loss = flow.nn.functional.cross_entropy(layer(flow.randn(5, 3, dtype=flow.float64)),
                                            flow.full((5,), -100, dtype=flow.int64))
    loss.backward()
    opt.step()
    for p, b in zip(layer.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), b)
