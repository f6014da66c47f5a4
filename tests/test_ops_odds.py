"""The reductions and odds of issue 13 against torch (forward and every input gradient) and by
float64 finite differences to second order: nan-reductions, quantiles, logcumsumexp, kron,
diff, cartesian_prod, combinations, trapezoid rules, Tensor.unfold, max_unpool, lp_pool3d,
fractional max pooling, antialiased interpolate; the counting ones (histc, histogram,
unique_consecutive, tril/triu_indices) by value; the modules; errors."""
import numpy as np
import pytest
import torch
from helpers import Positive, check, op_table_tests

import flowgrad as flow

NAN = np.array([[1.0, np.nan, -2.0, 0.5], [np.nan, np.nan, np.nan, np.nan],
                [3.0, 0.2, -1.0, 4.0]])
NAN2 = NAN[[0, 2]]  # no all-NaN row: finite differences need finite outputs
S2 = np.array([[[0.3, 0.8], [0.55, 0.1]]])  # fractional pooling samples (N=1, C=2, 2)
S3 = np.array([[[0.3, 0.8, 0.45]]])


def _unpool(nd):
    pool = {1: "max_pool1d", 2: "max_pool2d", 3: "max_pool3d"}[nd]
    unpool = f"max_unpool{nd}d"

    def fn(m, x):
        F = m.nn.functional
        y, i = getattr(F, pool)(x, 2, return_indices=True)
        return getattr(F, unpool)(y * 2, i, 2, output_size=x.shape)
    return fn


def _q(m, x, values):
    return m.tensor(values, dtype=x.dtype)


CASES = [
    ("nansum", lambda m, x: m.nansum(x), NAN),
    ("nansum_dim", lambda m, x: x.nansum(dim=1, keepdim=True), NAN2),
    ("nanmean", lambda m, x: m.nanmean(x, 1), NAN2),
    ("nanmean_all", lambda m, x: x.nanmean(), NAN2),
    ("nanmedian", lambda m, x: m.nanmedian(x), NAN),
    ("nanquantile_all_nan_row", lambda m, x: m.nanquantile(x, 0.4, 1), NAN),
    ("nanmedian_dim", lambda m, x: m.nanmedian(x, 1, keepdim=True), NAN2),
    ("nanmedian_dim0", lambda m, x: x.nanmedian(0), (4, 3)),
    ("quantile", lambda m, x: m.quantile(x, 0.3), (3, 5)),
    ("quantile_dim", lambda m, x: m.quantile(x, _q(m, x, [0.1, 0.5, 1.0]), dim=1), (3, 5)),
    ("quantile_keepdim", lambda m, x: x.quantile(_q(m, x, [0.25, 0.8]), 0, True), (4, 3)),
    ("quantile_all_keepdim", lambda m, x: m.quantile(x, _q(m, x, [0.4]), keepdim=True),
      (2, 3)),
    ("quantile_lower", lambda m, x: m.quantile(x, 0.3, 1, interpolation="lower"), (3, 5)),
    ("quantile_higher", lambda m, x: m.quantile(x, 0.3, 1, interpolation="higher"), (3, 5)),
    ("quantile_midpoint", lambda m, x: m.quantile(x, 0.3, 1, interpolation="midpoint"),
      (3, 5)),
    ("quantile_nearest", lambda m, x: m.quantile(x, _q(m, x, [0.125, 0.375, 0.5]), 1,
                                                  interpolation="nearest"), (3, 5)),
    ("quantile_nan", lambda m, x: m.quantile(x, 0.5, 1), NAN),
    ("nanquantile", lambda m, x: m.nanquantile(x, _q(m, x, [0.2, 0.9]), 1), NAN2),
    ("nanquantile_all", lambda m, x: x.nanquantile(0.75), NAN2),
    ("logcumsumexp", lambda m, x: m.logcumsumexp(x * 5, 1), (3, 4)),
    ("logcumsumexp_dim0", lambda m, x: x.logcumsumexp(0), (3, 4)),
    ("logcumsumexp_large", lambda m, x: m.logcumsumexp(x * 1e3, 0), (5,)),
    ("kron", lambda m, x, y: m.kron(x, y), (2, 3), (3, 2)),
    ("kron_mixed_dims", lambda m, x, y: x.kron(y), (2,), (2, 3, 2)),
    ("diff", lambda m, x: m.diff(x), (3, 5)),
    ("diff_n2_dim0", lambda m, x: x.diff(n=2, dim=0), (5, 3)),
    ("diff_prepend_append", lambda m, x, p, a: m.diff(x, 1, 1, p, a), (3, 4), (3, 2), (3, 1)),
    ("cartesian_prod", lambda m, x, y, z: m.cartesian_prod(x, y, z), (2,), (3,), (2,)),
    ("cartesian_prod_one", lambda m, x: m.cartesian_prod(x), (3,)),
    ("combinations", lambda m, x: m.combinations(x), (4,)),
    ("combinations_r3_repl", lambda m, x: m.combinations(x, 3, with_replacement=True), (3,)),
    ("trapezoid", lambda m, y: m.trapezoid(y), (3, 5)),
    ("trapezoid_dx", lambda m, y: m.trapezoid(y, dx=0.5, dim=0), (3, 5)),
    ("trapezoid_x", lambda m, y, x: m.trapezoid(y, x), (3, 5), (5,)),
    ("trapezoid_x_full", lambda m, y, x: m.trapezoid(y, x, dim=0), (4, 2), (4, 2)),
    ("trapz", lambda m, y: m.trapz(y, dx=2.0), (3, 5)),
    ("cumulative_trapezoid", lambda m, y: m.cumulative_trapezoid(y), (3, 5)),
    ("cumulative_trapezoid_x", lambda m, y, x: m.cumulative_trapezoid(y, x, dim=0), (4, 2),
      (4,)),
    ("tensor_unfold", lambda m, x: x.unfold(1, 3, 2), (2, 7, 3)),
    ("tensor_unfold_overlap", lambda m, x: x.unfold(-1, 4, 1) * 1.5, (3, 6)),
    ("F_unfold_fold", lambda m, x: m.nn.functional.fold(
        m.nn.functional.unfold(x, 2, padding=1), (4, 5), 2, padding=1), (2, 3, 4, 5)),
    ("max_unpool1d", _unpool(1), (2, 3, 8)),
    ("max_unpool2d", _unpool(2), (2, 2, 4, 6)),
    ("max_unpool3d", _unpool(3), (1, 2, 4, 4, 2)),
    # overlapping windows pick one input twice: torch's gradient counts it twice (no fd)
    ("max_unpool2d_unbatched", lambda m, x: m.nn.functional.max_unpool2d(
        *m.nn.functional.max_pool2d(x, 2, stride=1, return_indices=True), 2, stride=1),
     (2, 4, 5)),
    ("lp_pool3d", lambda m, x: m.nn.functional.lp_pool3d(x, 2.0, 2), Positive((1, 2, 4, 4, 2))),
    ("lp_pool3d_p3", lambda m, x: m.nn.functional.lp_pool3d(x, 3, (2, 1, 2), stride=1),
      Positive((1, 1, 3, 3, 3))),
    ("fractional_max_pool2d", lambda m, x: m.nn.functional.fractional_max_pool2d(
        x, 2, output_size=(4, 3), _random_samples=m.tensor(S2, dtype=x.dtype)), (1, 2, 7, 6)),
    ("fractional_max_pool2d_ratio", lambda m, x: m.nn.functional.fractional_max_pool2d(
        x, (3, 2), output_ratio=(0.5, 0.4), return_indices=True,
        _random_samples=m.tensor(S2, dtype=x.dtype)), (1, 2, 9, 8)),
    ("fractional_max_pool3d", lambda m, x: m.nn.functional.fractional_max_pool3d(
        x, 2, output_size=(2, 3, 2), return_indices=True,
        _random_samples=m.tensor(S3, dtype=x.dtype)), (1, 1, 5, 6, 4)),
    ("antialias_bilinear_down", lambda m, x: m.nn.functional.interpolate(
        x, size=(3, 4), mode="bilinear", antialias=True), (2, 2, 9, 10)),
    ("antialias_bicubic_down", lambda m, x: m.nn.functional.interpolate(
        x, scale_factor=0.4, mode="bicubic", antialias=True), (1, 2, 11, 9)),
    ("antialias_bilinear_up", lambda m, x: m.nn.functional.interpolate(
        x, size=(7, 5), mode="bilinear", antialias=True), (1, 1, 3, 4)),
    ("antialias_bicubic_mixed", lambda m, x: m.nn.functional.interpolate(
        x, size=(4, 9), mode="bicubic", antialias=True), (1, 1, 10, 4)),
    ("antialias_align_corners", lambda m, x: m.nn.functional.interpolate(
        x, size=(3, 5), mode="bilinear", align_corners=True, antialias=True), (1, 1, 8, 11)),
]


NO_FD = {'nanquantile_all_nan_row', 'quantile_nan', 'logcumsumexp_large', 'max_unpool2d_unbatched'}
test_against_torch, test_finite_differences = op_table_tests(
    CASES, [c for c in CASES if c[0] not in NO_FD])


def test_nanmean_of_an_all_nan_row():
    # the gradient differs there: torch's is nan (0 / 0 in its rule), flowgrad's 0
    check(lambda m, x: m.nanmean(x, 1), NAN, grad=False)


def _same(ours, theirs):
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)


@pytest.mark.parametrize("fn", [
    lambda m, x: m.histc(x, bins=7),
    lambda m, x: x.histc(bins=4, min=-1, max=1),
    lambda m, x: m.histc(x * 0 + 2, bins=3),
    lambda m, x: m.histogram(x, 5),
    lambda m, x: m.histogram(x, 4, range=(-1.0, 2.0), density=True),
    lambda m, x: x.histogram(m.tensor([-2.0, 0.0, 0.5, 3.0]), weight=x.abs()),
    lambda m, x: m.unique_consecutive((x > 0).long() + (x > 1).long()),
    lambda m, x: m.unique_consecutive((x > 0).long(), return_inverse=True,
                                      return_counts=True),
    lambda m, x: ((x > 0).long()).unique_consecutive(return_counts=True, dim=1),
    lambda m, x: m.unique_consecutive((x[:, :2] > 2).long(), return_inverse=True, dim=0),
    lambda m, x: m.tril_indices(4, 3),
    lambda m, x: m.tril_indices(3, 5, -1),
    lambda m, x: m.triu_indices(4, 4, 1, dtype=m.int32),
    lambda m, x: m.triu_indices(2, 5, -3),
], ids=["histc", "histc_range", "histc_one_value", "histogram", "histogram_density",
        "histogram_edges_weight", "unique_consecutive", "unique_consecutive_inverse_counts",
        "unique_consecutive_dim1", "unique_consecutive_dim0", "tril_indices",
        "tril_indices_offset", "triu_indices_int32", "triu_indices_offset"])
def test_counting_ops_match_torch(fn):
    x = np.random.default_rng(3).standard_normal((6, 5)).astype(np.float32)
    _same(fn(flow, flow.tensor(x)), fn(torch, torch.tensor(x)))


def test_modules_match_torch():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    fx, tx = flow.tensor(x), torch.tensor(x)
    pairs = [(flow.nn.Unfold(3, padding=1, stride=2), torch.nn.Unfold(3, padding=1, stride=2)),
             (flow.nn.LPPool2d(2, 2), torch.nn.LPPool2d(2, 2)),
             (flow.nn.LPPool1d(3, 3, stride=2), torch.nn.LPPool1d(3, 3, stride=2))]
    for ours, theirs in pairs:
        arg_f, arg_t = (fx, tx) if not isinstance(ours, flow.nn.LPPool1d) else \
            (fx.flatten(2).abs(), tx.flatten(2).abs())
        np.testing.assert_allclose(ours(arg_f).numpy(), theirs(arg_t).numpy(), rtol=1e-5,
                                   atol=1e-6)
        assert repr(ours) == repr(theirs)
    cols = rng.standard_normal((2, 12, 9)).astype(np.float32)
    fold_f, fold_t = flow.nn.Fold((4, 4), 2, stride=1), torch.nn.Fold((4, 4), 2, stride=1)
    np.testing.assert_allclose(fold_f(flow.tensor(cols)).numpy(),
                               fold_t(torch.tensor(cols)).numpy(), rtol=1e-6)
    assert repr(fold_f) == repr(fold_t)
    lp3 = flow.nn.LPPool3d(2, 2)(flow.tensor(np.abs(x)[:, :, None]).expand(2, 3, 2, 6, 6))
    lp3_t = torch.nn.LPPool3d(2, 2)(torch.tensor(np.abs(x)[:, :, None]).expand(2, 3, 2, 6, 6))
    np.testing.assert_allclose(lp3.numpy(), lp3_t.numpy(), rtol=1e-5)
    pool_f = flow.nn.MaxPool2d(2, return_indices=True)
    y, i = pool_f(fx)
    un_f, un_t = flow.nn.MaxUnpool2d(2), torch.nn.MaxUnpool2d(2)
    np.testing.assert_allclose(un_f(y, i).numpy(),
                               un_t(torch.tensor(y.numpy()), torch.tensor(i.numpy())).numpy())
    assert repr(un_f) == repr(un_t)
    samples = rng.random((2, 3, 2)).astype(np.float32)
    frac_f = flow.nn.FractionalMaxPool2d(2, output_ratio=0.5, _random_samples=flow.tensor(samples))
    frac_t = torch.nn.FractionalMaxPool2d(2, output_ratio=0.5,
                                          _random_samples=torch.tensor(samples))
    np.testing.assert_allclose(frac_f(fx).numpy(), frac_t(tx).numpy())
    assert flow.nn.FractionalMaxPool2d(3, output_size=4)(fx).shape == (2, 3, 4, 4)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_module_matches_torch(mode):
    torch.manual_seed(0)
    theirs = torch.nn.EmbeddingBag(10, 4, mode=mode, padding_idx=2)
    ours = flow.nn.EmbeddingBag(10, 4, mode=mode, padding_idx=2)
    ours.weight.data = flow.tensor(theirs.weight.detach().numpy())
    idx, off = [1, 2, 4, 5, 4, 3, 2, 9], [0, 3, 3, 6]
    psw = np.linspace(0.5, 2.0, 8).astype(np.float32)
    kw_f = dict(per_sample_weights=flow.tensor(psw)) if mode == "sum" else {}
    kw_t = dict(per_sample_weights=torch.tensor(psw)) if mode == "sum" else {}
    a = ours(flow.tensor(idx), flow.tensor(off), **kw_f)
    b = theirs(torch.tensor(idx), torch.tensor(off), **kw_t)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
    g = np.random.default_rng(1).standard_normal(tuple(b.shape)).astype(np.float32)
    (a * flow.tensor(g)).sum().backward()
    (b * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-6)
    assert repr(ours) == repr(theirs)
    kw = dict(max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True)
    assert repr(flow.nn.EmbeddingBag(5, 2, **kw)) == repr(torch.nn.EmbeddingBag(5, 2, **kw))
    pre = flow.nn.EmbeddingBag.from_pretrained(flow.ones(3, 2), mode="sum")
    assert not pre.weight.requires_grad and pre(flow.tensor([[0, 1]])).tolist() == [[2.0, 2.0]]


def test_unfold_is_a_view_and_fractional_pool_draws():
    x = flow.zeros(6)
    w = x.unfold(0, 2, 2)
    w[1, 0] = 5.0
    assert x.tolist() == [0.0, 0.0, 5.0, 0.0, 0.0, 0.0]
    flow.manual_seed(0)
    a = flow.nn.functional.fractional_max_pool2d(flow.randn(1, 1, 9, 9), 2, output_size=4)
    assert a.shape == (1, 1, 4, 4)


def test_errors():
    with pytest.raises(RuntimeError, match="q values must be in the range"):
        flow.quantile(flow.ones(3), 1.5)
    with pytest.raises(RuntimeError, match="same dtype"):
        flow.quantile(flow.ones(3), flow.tensor([0.5], dtype=flow.float64))
    with pytest.raises(RuntimeError, match="float or double"):
        flow.quantile(flow.tensor([1, 2]), 0.5)
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 3"):
        flow.ones(3).unfold(0, 4, 1)
    with pytest.raises(RuntimeError, match="invalid max index"):
        flow.nn.functional.max_unpool1d(flow.ones(1, 1, 2), flow.tensor([[[0, 9]]]), 2)
    with pytest.raises(RuntimeError, match="1D vector"):
        flow.cartesian_prod(flow.ones(2, 2))
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        flow.histc(flow.ones(3), bins=0)
    with pytest.raises(ValueError, match="Anti-alias option"):
        flow.nn.functional.interpolate(flow.ones(1, 1, 4), size=2, mode="linear", antialias=True)
    with pytest.raises(ValueError, match="output_size or an output_ratio"):
        flow.nn.functional.fractional_max_pool2d(flow.ones(1, 1, 4, 4), 2)


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("two_d", [False, True])
def test_embedding_bag_scales_gradients_by_frequency(mode, two_d):
    # scale_grad_by_freq was taken and ignored. The reference is torch's F.embedding with the
    # flag on the same lookups, pooled per bag: torch 2.13's CPU embedding_bag divides by the
    # count of another index (pytorch/pytorch#190063, fixed after 2.13)
    w0 = np.random.default_rng(0).standard_normal((6, 3))
    idx, bags = ([[1, 1], [2, 1]], [[0, 1], [2, 3]]) if two_d else (
        [1, 2, 2, 4, 1, 1, 5], [[0, 1, 2], [3, 4, 5, 6]])
    flat = np.array(idx).reshape(-1)
    up = np.random.default_rng(1).standard_normal((2, 3))
    wt = torch.tensor(w0, requires_grad=True)
    rows = torch.nn.functional.embedding(torch.tensor(flat), wt, scale_grad_by_freq=True)
    pooled = torch.stack([rows[b].sum(0) if mode == "sum" else rows[b].mean(0) for b in bags])
    (pooled * torch.tensor(up)).sum().backward()
    wf = flow.tensor(w0, requires_grad=True)
    out = flow.nn.functional.embedding_bag(
        flow.tensor(idx), wf, None if two_d else flow.tensor([0, 3]), mode=mode,
        scale_grad_by_freq=True)
    np.testing.assert_allclose(out.detach().numpy(), pooled.detach().numpy(), rtol=1e-12)
    (out * flow.tensor(up)).sum().backward()
    np.testing.assert_allclose(wf.grad.numpy(), wt.grad.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="max mode"):  # as torch's
        flow.nn.functional.embedding_bag(flow.tensor(idx), wf, None if two_d else
                                         flow.tensor([0, 3]), mode="max", scale_grad_by_freq=True)


@pytest.mark.parametrize("expr", ["m.kron(t, t.detach())", "m.kron(t.detach(), t)",
                                  "m.kron(t, u)", "m.kron(t[0], u)"])
def test_kron_operands_written_after_the_product_as_torch(expr):
    """torch's kron takes _unsafe_view's of its operands (no views to autograd): a write to
    one after the product is legal and the backward reads the written values, and the result
    is no view; flowgrad's saved the operands and raised at the backward."""
    results = []
    for m in (flow, torch):
        t = m.tensor([[0.5, -1.5, 2.0], [1.0, 0.25, -0.75]], dtype=m.float64, requires_grad=True)
        u = m.tensor([[2.0, -1.0, 0.5], [1.5, 3.0, -2.0]], dtype=m.float64, requires_grad=True)
        r = eval(expr)
        with m.no_grad():
            t.mul_(2.0)
            u.add_(1.0)
        (r * r).sum().backward()
        results.append([r.detach().numpy(), t.grad.numpy(), r._is_view(),
                        None if u.grad is None else u.grad.numpy()])
    for ours, theirs in zip(*results):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize("shape, dim, n, prepend", [((0,), 0, 1, None), ((0, 3), 0, 2, None),
                                                    ((2, 0), 1, 1, (2, 0))])
def test_diff_out_of_an_empty_dim_raises_as_torch(shape, dim, n, prepend):
    # torch's out= form narrows the differenced dim from 1 (IndexError at length 0); the form
    # without out= returns the empty input (out_arg_fuzz 11604574, and 3695, KNOWN before)
    for m in (torch, flow):
        x = m.zeros(shape, dtype=m.float64)
        pre = None if prepend is None else m.zeros(prepend, dtype=m.float64)
        assert m.diff(x, n, dim, prepend=pre).shape == x.shape
        with pytest.raises(IndexError, match="start out of range"):
            m.diff(x, n, dim, prepend=pre, out=m.empty(0, dtype=m.float64))
    # a dim of length 1 narrows to nothing (no raise); n = 0 copies
    assert flow.diff(flow.zeros(1), n=5, out=flow.empty(0)).shape == (0,)
    assert flow.diff(flow.zeros(0), n=0, out=flow.empty(0)).shape == (0,)
    assert flow.diff(flow.zeros(0), n=2, prepend=flow.zeros(1), out=flow.empty(0)).shape == (0,)
