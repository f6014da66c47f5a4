"""Normalisation ops against torch (forward and grads) and by float64 finite differences to
second order; running-statistics updates; bad arguments. One line per case."""
import numpy as np
import pytest
import torch
from helpers import Positive, check, gradcheck, op_table_tests

import flowgrad as flow

RM = np.array([0.1, -0.2, 0.3])
RV = np.array([0.5, 1.5, 2.0])


def F(m):
    return m.nn.functional


def _bn_eval(m, x, w, b):
    rm, rv = m.tensor(RM, dtype=x.dtype), m.tensor(RV, dtype=x.dtype)
    return F(m).batch_norm(x, rm, rv, w, b, training=False)


CASES = [
    ("layer_norm", lambda m, x, w, b: F(m).layer_norm(x, (4,), w, b), (3, 4), (4,), (4,)),
    ("layer_norm_2d", lambda m, x: F(m).layer_norm(x, (2, 3), eps=1e-3), (2, 2, 3)),
    ("layer_norm_w", lambda m, x, w: F(m).layer_norm(x, [3], w), (2, 3), (3,)),
    ("layer_norm_b", lambda m, x, b: F(m).layer_norm(x, [3], None, b), (4, 3), (3,)),
    ("layer_norm_2d_wb", lambda m, x, w, b: F(m).layer_norm(x, (2, 3), w, b), (3, 2, 3), (2, 3),
     (2, 3)),
    ("batch_norm_train", lambda m, x, w, b: F(m).batch_norm(x, None, None, w, b, True),
     (4, 3, 2), (3,), (3,)),
    ("batch_norm_train_2d", lambda m, x: F(m).batch_norm(x, None, None, training=True),
     (5, 3)),
    ("batch_norm_eval", _bn_eval, (4, 3), (3,), (3,)),
    ("instance_norm", lambda m, x, w, b: F(m).instance_norm(x, weight=w, bias=b),
     (2, 3, 4), (3,), (3,)),
    ("instance_norm_plain", lambda m, x: F(m).instance_norm(x), (2, 3, 2, 2)),
    ("group_norm", lambda m, x, w, b: F(m).group_norm(x, 2, w, b), (2, 4, 3), (4,), (4,)),
    ("group_norm_plain", lambda m, x: F(m).group_norm(x, 3), (2, 3, 2, 2)),
    ("rms_norm", lambda m, x, w: F(m).rms_norm(x, (4,), w), (3, 4), (4,)),
    ("rms_norm_eps", lambda m, x: F(m).rms_norm(x, (2, 3), eps=1e-3), (2, 2, 3)),
    ("local_response_norm", lambda m, x: F(m).local_response_norm(x, 3), (2, 5, 3)),
    ("local_response_norm_even", lambda m, x: F(m).local_response_norm(x, 2, 0.1, 0.5, 2.0),
     (2, 4, 3)),
    ("normalize", lambda m, x: F(m).normalize(x), (3, 4)),
    ("normalize_p1", lambda m, x: F(m).normalize(x, p=1, dim=0), (3, 4)),
    ("normalize_p3", lambda m, x: F(m).normalize(x, p=3, dim=-1), (3, 4)),
    ("normalize_inf", lambda m, x: F(m).normalize(x, p=float("inf")), (3, 4)),
    ("flow_layer_norm", lambda m, x: m.layer_norm(x, (4,)), (2, 4)),
]


test_against_torch, test_finite_differences = op_table_tests(CASES)


def test_layer_norm_large_input_fp32():
    check(lambda m, x, w, b: F(m).layer_norm(x, (64,), w, b), (32, 64), (64,), (64,))
    # rows in blocks of CHUNK // 64 = 512, the last one ragged; dw/db summed over 1000 rows
    check(lambda m, x, w, b: F(m).layer_norm(x, (64,), w, b), (10, 100, 64), (64,), (64,),
          grad_atol=2e-4)


# the trailing-dims fast path works on row blocks of about special.CHUNK elements:
# with CHUNK = 8 these rows run it on blocks of one or two rows, the last one ragged
ROW_BLOCKS = [c for c in CASES if c[0].startswith(("layer_norm", "group_norm", "flow_layer",
                                                      "instance_norm_plain"))]


@pytest.mark.parametrize("case", ROW_BLOCKS, ids=[c[0] for c in ROW_BLOCKS])
def test_row_blocks(case, monkeypatch):
    from flowgrad.ops import special

    monkeypatch.setattr(special, "CHUNK", 8)
    name, fn, *specs = case
    check(fn, *specs)
    gradcheck(fn, *specs)


def test_layer_norm_backward_reduces_weight_and_bias_grads():
    """With weight and bias of the normalised shape, the fused backward hands back dw and db
    already summed over the rows (no sum down in the engine), equal to the general form's."""
    from flowgrad.ops.normalization import _norm_affine, _norm_affine_backward

    rng = np.random.default_rng(3)
    x, dy = rng.standard_normal((2, 5, 2, 3)), rng.standard_normal((2, 5, 2, 3))
    w, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    kw = dict(axes=(2, 3), need_w=True, need_b=True)
    _, mean, rstd = _norm_affine.kernel(np, x, w, b, axes=(2, 3), eps=1e-5, has_w=True,
                                        has_b=True)
    dx, dw, db = _norm_affine_backward.kernel(np, x, mean, rstd, dy, w, trailing_wb=True, **kw)
    dx_all, dw_all, db_all = _norm_affine_backward.kernel(np, x, mean, rstd, dy, w, **kw)
    assert dw.shape == db.shape == (2, 3) and dw_all.shape == x.shape
    np.testing.assert_allclose(dx, dx_all, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, dw_all.sum((0, 1)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(db, db_all.sum((0, 1)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape, offset", [((8, 1), 0.0), ((512, 96), 300.0)])
def test_layer_norm_weight_gradient_of_rows_far_from_zero(shape, offset):
    """dw sums dy (x - mean) rstd: sum(dy x) rstd - sum(dy) mean rstd cancels when the mean
    is large beside the spread (a row of one value, x - mean = 0: it left 2e-4, not 0; rows
    around 300 with spread 3: 2.3e-5 against float64, torch's 7.7e-6, this form's 5.1e-6)."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + offset).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    got, want = (_layer_norm_weight_grad(x.astype(dt), dy.astype(dt))
                 for dt in (np.float32, np.float64))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * max(1.0, np.abs(want).max()))


def _layer_norm_weight_grad(x, dy):
    ln = flow.nn.LayerNorm(x.shape[-1]).to(flow.float64 if x.dtype == np.float64 else
                                           flow.float32)
    ln(flow.tensor(x)).backward(flow.tensor(dy))
    return ln.weight.grad.numpy().astype(np.float64)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5)])
def test_batch_norm_running_stats(training, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    stats = {}
    for m in (flow, torch):
        rm, rv = m.tensor(RM.astype(np.float32)), m.tensor(RV.astype(np.float32))
        y = F(m).batch_norm(m.tensor(x), rm, rv, training=training, momentum=0.3)
        stats[m] = (y.numpy(), rm.numpy(), rv.numpy())
    for ours, theirs in zip(stats[flow], stats[torch]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_instance_norm_running_stats():
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    out = {}
    for m in (flow, torch):
        rm, rv = m.tensor(RM.astype(np.float32)), m.tensor(RV.astype(np.float32))
        F(m).instance_norm(m.tensor(x), rm, rv, momentum=0.2)
        out[m] = (rm.numpy(), rv.numpy())
    for ours, theirs in zip(out[flow], out[torch]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_batch_norm_running_stats_bump_version():
    rm, rv = flow.zeros(3), flow.ones(3)  # (both or neither: torch refuses one alone)
    before = rm._version, rv._version
    F(flow).batch_norm(flow.randn(4, 3), rm, rv, training=True)
    assert rm._version > before[0] and rv._version > before[1]


BAD = [
    ("layer_norm_shape", lambda: F(flow).layer_norm(flow.randn(2, 3), (4,)),
     RuntimeError, "layer_norm: given normalized_shape"),
    ("layer_norm_weight", lambda: F(flow).layer_norm(flow.randn(2, 3), (3,), flow.ones(2)),
     RuntimeError, r"layer_norm: expected weight of shape \(3,\)"),
    ("batch_norm_one_value", lambda: F(flow).batch_norm(flow.randn(1, 3), None, None,
                                                        training=True),
     ValueError, "more than 1 value per channel"),
    ("batch_norm_eval_no_stats", lambda: F(flow).batch_norm(flow.randn(2, 3), None, None),
     RuntimeError, "running_mean and running_var must be defined"),
    ("batch_norm_bias", lambda: F(flow).batch_norm(flow.randn(2, 3), None, None,
                                                   bias=flow.ones(4), training=True),
     RuntimeError, r"batch_norm: expected bias of shape \(3,\), got \(4,\)"),
    ("group_norm_groups", lambda: F(flow).group_norm(flow.randn(2, 4, 3), 3),
     RuntimeError, "divisible by num_groups.*num_groups=3"),
    ("instance_norm_2d", lambda: F(flow).instance_norm(flow.randn(2, 3)),
     ValueError, "instance_norm: expected 3D"),
    ("layer_norm_int", lambda: F(flow).layer_norm(flow.tensor([[1, 2]]), (2,)),
     RuntimeError, "layer_norm: expected a floating point input"),
    ("lrn_2d", lambda: F(flow).local_response_norm(flow.randn(2, 3), 2),
     ValueError, "local_response_norm: expected 3D"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_arguments(case):
    name, fn, exc, match = case
    with pytest.raises(exc, match=match):
        fn()


def test_norm_positive_var_input():
    check(lambda m, x: F(m).layer_norm(x * 100.0, (3,)), Positive((2, 3)))


def test_layer_norm_backward_of_an_infinite_gradient_as_torch():
    """A row of dy holding infinities: nan and inf where torch's uncentred form puts them (the
    centred form, used for finite rows, gave signed infinities where torch has nan)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    dy = rng.standard_normal((6, 5)).astype(np.float32)
    dy[1, 2], dy[3, 0], dy[3, 4] = np.inf, -np.inf, np.inf
    got, want = [], []
    for m, out in ((flow, got), (torch, want)):
        t = m.tensor(x, requires_grad=True)
        ln = m.nn.LayerNorm(5)
        ln(t).backward(m.tensor(dy))
        out += [t.grad.numpy(), ln.weight.grad.numpy(), ln.bias.grad.numpy()]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_array_equal(np.isposinf(g), np.isposinf(w))
        np.testing.assert_array_equal(np.isneginf(g), np.isneginf(w))
        np.testing.assert_allclose(g[np.isfinite(w)], w[np.isfinite(w)], rtol=1e-5, atol=1e-6)
