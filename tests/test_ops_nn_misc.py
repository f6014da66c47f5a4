"""Embedding, dropout, one_hot, distances and attention against torch and by float64
finite differences to second order; dropout by its properties; bad arguments."""
import numpy as np
import pytest
import torch
from helpers import op_table_tests

import flowgrad as flow

IDX = np.array([[2, 0], [1, 2]], dtype=np.int64)
IDX_PAD = np.array([1, 0, 1, 3], dtype=np.int64)
FLAT = np.array([0, 2, 1, 3, 3, 1], dtype=np.int64)
OFFS = np.array([0, 2, 2, 5], dtype=np.int64)  # bags: [0, 2], [], [1, 3, 3], [1]


def F(m):
    return m.nn.functional


def _mask(m, rows):
    return m.tensor(np.array(rows, dtype=bool))


CAUSAL_FULL = [[True, False, False], [False, False, False], [True, True, True]]


def _split_heads(m, qkv, batch_first, heads=2):
    """Self-attention's packed projection as (q, k^T, v) per head: flowgrad's op, torch's
    composition (as its MultiheadAttention does it)."""
    if m is flow:
        from flowgrad.ops.attention import _split_heads as op
        return op(qkv, heads=heads, batch_first=batch_first)
    a, b, e3 = qkv.shape
    x = qkv.reshape(a, b, 3, heads, e3 // (3 * heads))
    q, k, v = (x.permute(2, 0, 3, 1, 4) if batch_first else x.permute(2, 1, 3, 0, 4)).unbind(0)
    n, h, length, hd = q.shape
    return (q.reshape(n * h, length, hd), k.transpose(-1, -2).reshape(n * h, hd, length),
            v.reshape(n * h, length, hd))


def _merge_heads(m, dq, dkt, dv, batch_first, heads=2):
    if m is flow:
        from flowgrad.ops.attention import _merge_heads as op
        return op(dq, dkt, dv, heads=heads, batch_first=batch_first)
    nh, length, hd = dq.shape
    n = nh // heads
    x = m.stack([dq.reshape(n, heads, length, hd),
                 dkt.reshape(n, heads, hd, length).transpose(-1, -2),
                 dv.reshape(n, heads, length, hd)])  # (3, N, H, L, hd)
    x = x.permute(1, 3, 0, 2, 4) if batch_first else x.permute(3, 1, 0, 2, 4)
    return x.reshape(x.shape[0], x.shape[1], -1)

CASES = [
    ("embedding", lambda m, w, i: F(m).embedding(i, w), (4, 3), IDX),
    ("embedding_padding", lambda m, w, i: F(m).embedding(i, w, padding_idx=1), (4, 3), IDX_PAD),
    ("embedding_padding_neg", lambda m, w, i: F(m).embedding(i, w, padding_idx=-1), (4, 3),
     IDX_PAD),
    ("embedding_bag_mean_2d", lambda m, w, i: F(m).embedding_bag(i, w), (4, 3), IDX),
    ("embedding_bag_sum", lambda m, w, i, o: F(m).embedding_bag(i, w, o, mode="sum"),
     (4, 3), FLAT, OFFS),
    ("embedding_bag_mean", lambda m, w, i, o: F(m).embedding_bag(i, w, o), (4, 3), FLAT, OFFS),
    ("embedding_bag_max", lambda m, w, i, o: F(m).embedding_bag(i, w, o, mode="max"),
     (4, 3), FLAT, OFFS),
    ("embedding_bag_last_offset", lambda m, w, i: F(m).embedding_bag(
        i, w, m.tensor([0, 2, 6]), mode="sum", include_last_offset=True), (4, 3), FLAT),
    ("embedding_bag_psw", lambda m, w, i, o, p: F(m).embedding_bag(
        i, w, o, mode="sum", per_sample_weights=p), (4, 3), FLAT, OFFS, (6,)),
    ("embedding_bag_padding", lambda m, w, i, o: F(m).embedding_bag(
        i, w, o, padding_idx=3), (4, 3), FLAT, OFFS),
    ("cosine_similarity", lambda m, a, b: F(m).cosine_similarity(a, b), (3, 4), (3, 4)),
    ("cosine_similarity_bcast", lambda m, a, b: F(m).cosine_similarity(a, b, dim=-1),
     (2, 3, 4), (3, 4)),
    ("pairwise_distance", lambda m, a, b: F(m).pairwise_distance(a, b), (3, 4), (3, 4)),
    ("pairwise_distance_p1", lambda m, a, b: F(m).pairwise_distance(a, b, p=1, keepdim=True),
     (3, 4), (3, 4)),
    ("pairwise_distance_p3", lambda m, a, b: F(m).pairwise_distance(a, b, p=3), (3, 4), (4,)),
    ("pairwise_distance_inf", lambda m, a, b: F(m).pairwise_distance(a, b, p=float("inf")),
     (3, 4), (3, 4)),
    ("cdist", lambda m, a, b: m.cdist(a, b), (3, 2), (4, 2)),
    ("cdist_batched_p1", lambda m, a, b: m.cdist(a, b, p=1), (2, 2, 3), (2, 3, 3)),
    ("cdist_p3", lambda m, a, b: m.cdist(a, b, p=3), (3, 2), (2, 2)),
    ("cdist_mm", lambda m, a, b: m.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
     (3, 2), (4, 2)),
    ("sdpa", lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v), (1, 3, 2),
     (1, 4, 2), (1, 4, 3)),
    ("sdpa_causal_scale", lambda m, q, k, v: F(m).scaled_dot_product_attention(
        q, k, v, is_causal=True, scale=0.3), (2, 3, 2), (2, 3, 2), (2, 3, 2)),
    ("sdpa_bool_mask_empty_row", lambda m, q, k, v: F(m).scaled_dot_product_attention(
        q, k, v, attn_mask=_mask(m, CAUSAL_FULL)), (1, 3, 2), (1, 3, 2), (1, 3, 2)),
    ("sdpa_float_mask", lambda m, q, k, v, b: F(m).scaled_dot_product_attention(
        q, k, v, attn_mask=b), (1, 2, 2), (1, 3, 2), (1, 3, 2), (2, 3)),
    ("sdpa_gqa", lambda m, q, k, v: F(m).scaled_dot_product_attention(
        q, k, v, enable_gqa=True), (1, 4, 2, 2), (1, 2, 2, 2), (1, 2, 2, 2)),
    ("split_heads", lambda m, x: _split_heads(m, x, True), (3, 4, 12)),
    ("split_heads_seq_first", lambda m, x: _split_heads(m, x, False), (4, 3, 12)),
    ("merge_heads", lambda m, q, kt, v: _merge_heads(m, q, kt, v, True), (6, 4, 2), (6, 2, 4),
     (6, 4, 2)),
    ("merge_heads_seq_first", lambda m, q, kt, v: _merge_heads(m, q, kt, v, False), (6, 4, 2),
     (6, 2, 4), (6, 4, 2)),
]


# padding_idx blocks the padding row's gradient on purpose, so finite differences disagree
FD_CASES = [c for c in CASES if "padding" not in c[0]]


test_against_torch, test_finite_differences = op_table_tests(CASES, FD_CASES)


@pytest.mark.parametrize("padding_idx, by_freq", [(None, False), (2, True)])
def test_embedding_gradient_by_gemm_and_by_ufunc_at_agree(padding_idx, by_freq, monkeypatch):
    # the kernel takes one GEMM with the lookups' one-hot matrix up to a size, ufunc.at
    # (row by row) above it: the same sums, to rounding, and torch's
    from flowgrad.ops import nn_misc
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 7, (4, 9))
    idx[0, :2] = 6  # row 6: two lookups, one of them an inf
    dy = rng.standard_normal((4, 9, 3))
    dy[0, 0, 1] = np.inf  # (the one-hot GEMM's zeros times it would be nan in every row)
    want = torch.ops.aten.embedding_dense_backward(torch.tensor(dy), torch.tensor(idx), 7,
                                                   -1 if padding_idx is None else padding_idx,
                                                   by_freq).numpy()
    for limit in (nn_misc._ONE_HOT_MAX, 0):
        monkeypatch.setattr(nn_misc, "_ONE_HOT_MAX", limit)
        got = nn_misc._embedding_backward.kernel(np, dy, idx, num_weights=7,
                                                 padding_idx=padding_idx,
                                                 scale_grad_by_freq=by_freq)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)  # inf where torch's
    dy[0, 0, 1] = 1.0  # finite: the one-hot GEMM itself
    monkeypatch.setattr(nn_misc, "_ONE_HOT_MAX", 1 << 21)
    got = nn_misc._embedding_backward.kernel(np, dy, idx, num_weights=7, padding_idx=padding_idx,
                                             scale_grad_by_freq=by_freq)
    want = torch.ops.aten.embedding_dense_backward(torch.tensor(dy), torch.tensor(idx), 7,
                                                   -1 if padding_idx is None else padding_idx,
                                                   by_freq).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_embedding_padding_row_gets_no_grad():
    w = flow.randn(4, 3, requires_grad=True)
    F(flow).embedding(flow.tensor([1, 1, 2]), w, padding_idx=1).sum().backward()
    assert (w.grad.numpy()[1] == 0).all() and (w.grad.numpy()[2] == 1).all()


def test_embedding_max_norm_renormalises_in_place():
    w0 = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32) * 3
    out = {}
    for m in (flow, torch):
        w = m.tensor(w0.copy())
        y = F(m).embedding(m.tensor([[0, 2], [2, 4]]), w, max_norm=1.5)
        out[m] = (y.numpy(), w.numpy())
    for ours, theirs in zip(out[flow], out[torch]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


# ---- dropout: eval is the identity; training by properties and in expectation ---------------
DROPOUTS = ["dropout", "dropout1d", "dropout2d", "alpha_dropout", "feature_alpha_dropout"]


@pytest.mark.parametrize("name", DROPOUTS)
def test_dropout_eval_identity(name):
    x = flow.randn(2, 3, 4, requires_grad=True)
    y = getattr(F(flow), name)(x, 0.4, training=False)
    assert np.array_equal(y.detach().numpy(), x.detach().numpy())


def test_dropout_mask_scale_and_grad():
    flow.manual_seed(0)
    x = flow.ones(2000, requires_grad=True)
    y = F(flow).dropout(x, 0.3)
    vals = y.detach().numpy()
    assert np.all(np.isclose(vals, 0.0) | np.isclose(vals, 1 / 0.7))
    assert abs((vals == 0).mean() - 0.3) < 0.05
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), vals)  # same mask in the gradient


def test_dropout_seeded_reproducible():
    x = flow.randn(50)
    flow.manual_seed(3)
    a = F(flow).dropout(x, 0.5).numpy()
    flow.manual_seed(3)
    b = F(flow).dropout(x, 0.5).numpy()
    assert np.array_equal(a, b)


@pytest.mark.parametrize("name,shape", [("dropout1d", (4, 5, 30)), ("dropout2d", (4, 5, 3, 10)),
                                        ("dropout1d", (5, 30))])
def test_feature_dropout_zeroes_whole_channels(name, shape):
    flow.manual_seed(1)
    y = getattr(F(flow), name)(flow.ones(*shape), 0.5).numpy()
    channels = int(np.prod(shape[:2])) if len(shape) > 2 else shape[0]
    rows = y.reshape(channels, -1)
    assert (rows.min(1) == rows.max(1)).all() and 0 < (rows[:, 0] == 0).sum() < channels


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropout_keeps_mean_and_variance(name):
    flow.manual_seed(2)
    x = flow.randn(200, 100, 1)
    y = getattr(F(flow), name)(x, 0.2, training=True).numpy()
    assert abs(y.mean()) < 0.1 and abs(y.std() - 1) < 0.1


def test_dropout_inplace_and_p1():
    x = flow.ones(10)
    assert F(flow).dropout(x, 1.0).numpy().sum() == 0
    y = F(flow).dropout(x, 0.5, inplace=True)
    assert y is x


def test_sdpa_dropout_expectation():
    flow.manual_seed(0)
    q, k = flow.zeros(1, 1, 4), flow.zeros(1, 4, 4)
    v = flow.ones(1, 4, 2)
    outs = [F(flow).scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy()
            for _ in range(200)]
    assert abs(np.mean(outs) - 1.0) < 0.1


def test_one_hot():
    t = np.array([[0, 3], [1, 1]])
    for k in (-1, 5):
        ours = F(flow).one_hot(flow.tensor(t), k)
        theirs = torch.nn.functional.one_hot(torch.tensor(t), k)
        assert ours.dtype == flow.int64 and np.array_equal(ours.numpy(), theirs.numpy())


BAD = [
    ("one_hot_negative", lambda: F(flow).one_hot(flow.tensor([-1, 0])), RuntimeError,
     "one_hot: class values must be non-negative"),
    ("one_hot_too_big", lambda: F(flow).one_hot(flow.tensor([3]), 3), RuntimeError,
     r"smaller than num_classes \(3\), got 3"),
    ("embedding_range", lambda: F(flow).embedding(flow.tensor([5]), flow.ones(3, 2)),
     IndexError, r"index 5 is out of range for weight with 3 rows"),
    ("embedding_float_idx", lambda: F(flow).embedding(flow.tensor([1.0]), flow.ones(3, 2)),
     RuntimeError, "embedding: expected indices of dtype int64 or int32"),
    ("embedding_padding", lambda: F(flow).embedding(flow.tensor([1]), flow.ones(3, 2),
                                                    padding_idx=3),
     AssertionError, "padding_idx must be within the number of embeddings"),
    ("embedding_bag_mode", lambda: F(flow).embedding_bag(flow.tensor([[1]]), flow.ones(3, 2),
                                                         mode="avg"),
     ValueError, "mode has to be one of sum, mean or max"),
    ("embedding_bag_offsets0", lambda: F(flow).embedding_bag(
        flow.tensor([1, 2]), flow.ones(3, 2), flow.tensor([1])), ValueError,
     r"offsets\[0\] has to be 0"),
    ("dropout_p", lambda: F(flow).dropout(flow.ones(2), 1.5), ValueError,
     "dropout: dropout probability has to be between 0 and 1, but got 1.5"),
    ("dropout2d_dims", lambda: F(flow).dropout2d(flow.ones(2), 0.5), RuntimeError,
     "dropout2d: feature dropout requires at least 2 dimensions"),
    ("cdist_cols", lambda: flow.cdist(flow.ones(2, 3), flow.ones(2, 4)), RuntimeError,
     "X1: 3 X2: 4"),
    ("cdist_p", lambda: flow.cdist(flow.ones(2, 3), flow.ones(2, 3), p=-1), RuntimeError,
     "non-negative p values, got -1"),
    ("sdpa_shapes", lambda: F(flow).scaled_dot_product_attention(
        flow.ones(1, 2, 3), flow.ones(1, 2, 4), flow.ones(1, 2, 4)), RuntimeError,
     r"shapes don't match: query \(1, 2, 3\)"),
    ("sdpa_gqa_heads", lambda: F(flow).scaled_dot_product_attention(
        flow.ones(1, 3, 2, 2), flow.ones(1, 2, 2, 2), flow.ones(1, 2, 2, 2), enable_gqa=True),
     RuntimeError, r"query heads \(3\) must be a multiple"),
    ("sdpa_mask_and_causal", lambda: F(flow).scaled_dot_product_attention(
        flow.ones(1, 2, 2), flow.ones(1, 2, 2), flow.ones(1, 2, 2),
        attn_mask=flow.ones(2, 2), is_causal=True), RuntimeError, "Explicit attn_mask"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_arguments(case):
    name, fn, exc, match = case
    with pytest.raises(exc, match=match):
        fn()
