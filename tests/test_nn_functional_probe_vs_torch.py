"""nn.functional against torch on the corners a differential probe of the losses, the
normalizations, embedding, dropout, interpolate, grid_sample and pad found wrong: each row
runs in torch and in flowgrad from the same NumPy numbers and must give the same raise or
no-raise, and the same dtypes, shapes and values (nan where torch's nan) of every output and
gradient it returns. One line per case."""
import warnings

import numpy as np
import pytest
import torch
from vs_torch import ERRORS, assert_same_raise

import flowgrad as flow


def F(m):
    return m.nn.functional


def t(m, a, grad=False, dtype=None):
    """A tensor of the array (float64 unless it is an integer array or dtype says)."""
    a = np.asarray(a)
    if dtype is None:
        dtype = "int64" if a.dtype.kind in "iu" else "float64"
    x = m.tensor(a, dtype=getattr(m, dtype))
    return x.requires_grad_(True) if grad else x


def rand(shape, seed=0, lo=None, hi=None):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) if lo is None else rng.uniform(lo, hi, shape)


def with_grads(out, *inputs):
    """(out, the gradient of sum(out * w) for each input), w fixed random weights."""
    w = out.new_tensor(np.random.default_rng(99).standard_normal(tuple(out.shape)))
    (out * w).sum().backward()
    return (out,) + tuple(x.grad for x in inputs)


def _loss_grads(m, name, x, *rest, **kw):
    xs = [t(m, x, grad=True)] + [t(m, r, grad=True) if isinstance(r, np.ndarray) and
                                 r.dtype.kind == "f" else r for r in rest]
    args = [a if not isinstance(a, np.ndarray) else t(m, a) for a in xs]
    out = getattr(F(m), name)(*args, **kw)
    return with_grads(out, *[a for a in args if getattr(a, "requires_grad", False)])


def _gaussian(m, var_shape, reduction="mean"):
    x, y, v = (t(m, rand((4, 3), 1), True), t(m, rand((4, 3), 2), True),
               t(m, rand(var_shape, 3, 0.1, 2.0), True))
    return with_grads(F(m).gaussian_nll_loss(x, y, v, reduction=reduction), x, y, v)


def _soft_margin_target_grad(m):
    x, y = t(m, rand((3, 4)), True), t(m, np.sign(rand((3, 4), 1)), True)
    return F(m).soft_margin_loss(x, y)


def _class_target(m, fn, dtype, **kw):
    x = t(m, rand((4, 3)), True)
    target = m.tensor(np.array([0, 2, 1, 1]), dtype=getattr(m, dtype))
    return with_grads(getattr(F(m), fn)(x, target, **kw), x)


def _triplet(m, shape, margin=1.0, **kw):
    a, p, n = (t(m, rand(shape, s), True) for s in (1, 2, 3))
    return with_grads(F(m).triplet_margin_loss(a, p, n, margin=margin, **kw), a, p, n)


def _multi_margin(m, target):
    x = t(m, rand((4,)), True)
    return with_grads(F(m).multi_margin_loss(x, m.tensor(target), reduction="none"), x)


def _ctc(m, reduction, zero_infinity):
    lp = t(m, rand((6, 3, 4)), True)
    targets = m.tensor([[1, 1, 1], [2, 2, 0], [1, 2, 3]])  # sample 2 can't fit its 2 frames
    out = F(m).ctc_loss(lp.log_softmax(2), targets, m.tensor([6, 3, 2]), m.tensor([3, 2, 3]),
                        reduction=reduction, zero_infinity=zero_infinity)
    return with_grads(out if reduction != "none" else out.sum(), lp)


def _ctc_no_frames(m, zero_infinity):
    lp = t(m, rand((3, 4, 3)), True)
    out = F(m).ctc_loss(lp.log_softmax(2), m.tensor([[1, 2], [1, 1], [2, 0], [1, 2]]),
                        m.tensor([0, 0, 3, 2]), m.tensor([0, 2, 1, 2]), reduction="none",
                        zero_infinity=zero_infinity)
    return with_grads(out, lp)


def _kl_div(m, target, log_target=False, reduction="sum"):
    x, y = t(m, np.log(rand((2, 4), 1, 0.05, 1.0)), True), t(m, target, True)
    return with_grads(F(m).kl_div(x, y, reduction=reduction, log_target=log_target), x, y)


def _poisson_full(m, log_input):
    x = t(m, rand((2, 4), 1) if log_input else rand((2, 4), 1, 0.1, 3.0), True)
    y = t(m, np.array([[0.0, 1.0, 0.5, 3.0], [2.0, 0.0, 4.0, 1.5]]), True)
    return with_grads(F(m).poisson_nll_loss(x, y, log_input=log_input, full=True), x, y)


ZERO_ROW = np.array([[0.0, 0.0, 0.0], [0.0, 2.0, -1.0], [1.0, -0.5, 2.0]])


def _normalize(m, p, dim):
    x = t(m, ZERO_ROW, True)
    return with_grads(F(m).normalize(x, p=p, dim=dim), x)


def _vector_norm(m, p):
    x = t(m, ZERO_ROW, True)
    return with_grads(m.linalg.vector_norm(x, p, dim=1), x)


def _cosine(m, eps):
    a, b = t(m, rand((4, 3), 1) * 0.5, True), t(m, rand((4, 3), 2), True)
    return with_grads(F(m).cosine_similarity(a, b, dim=1, eps=eps), a, b)


def _instance_mixed(m, dtype, use_input_stats):
    """A half input, weight and bias of its dtype, float32 running statistics."""
    x = t(m, rand((3, 4, 5), 3) * 2 + 1, dtype=dtype)
    w, b = (t(m, rand(4, s), dtype=dtype) for s in (4, 5))
    rm, rv = t(m, rand(4, 6), dtype="float32"), t(m, rand(4, 7, 0.5, 2.0), dtype="float32")
    out = F(m).instance_norm(x, rm, rv, w, b, use_input_stats=use_input_stats, momentum=0.3)
    return out.float(), rm, rv


def _dropout2d_3d_input_masks(m):
    """dropout2d of a 3-D input drops whole (n, c) rows (torch reads it as (N, C, L)), not
    whole samples: among 64 channels of one sample both kept and dropped rows appear."""
    m.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = F(m).dropout2d(m.ones(2, 64, 5), 0.5, training=True)
    kept = (out != 0).all(-1)
    whole_rows = bool(((out != 0).all(-1) | (out == 0).all(-1)).all())
    return m.tensor([whole_rows, bool(kept[0].any()), bool((~kept[0]).any())])


def _dropout(m, fn, shape, training, p=0.5):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(F(m), fn)(m.ones(*shape), p, training=training)


def _bag(m, offsets, include_last_offset=False):
    # (float32: torch's float64 kernel reads decreasing offsets its own way, unchecked)
    w = t(m, rand((5, 3)), dtype="float32")
    return F(m).embedding_bag(m.tensor([0, 2, 4, 1]), w, m.tensor(offsets), mode="sum",
                              include_last_offset=include_last_offset)


def _interp(m, shape, seed=0, **kw):
    x = t(m, rand(shape, seed), True)
    return with_grads(F(m).interpolate(x, **kw), x)


def _interp_uint8(m, shape, **kw):
    x = m.tensor(np.random.default_rng(4).integers(0, 256, shape), dtype=m.uint8)
    return F(m).interpolate(x, **kw)


EDGES = np.array([[[[1.0, -1.0], [-1.0, 1.0]], [[0.5, 1.0], [-1.0, 0.25]]]])  # (1, 2, 2, 2)


def _grid(m, mode, padding_mode, align_corners, grid=EDGES):
    x, g = t(m, rand((1, 2, 3, 4)), True), t(m, grid, True)
    out = F(m).grid_sample(x, g, mode=mode, padding_mode=padding_mode,
                           align_corners=align_corners)
    return with_grads(out, x, g)


def _pad_int(m, dtype, pad, value, mode="constant"):
    x = m.tensor(np.arange(6).reshape(1, 2, 3), dtype=getattr(m, dtype))
    return F(m).pad(x, pad, mode=mode, value=value)


def _weighted(m, fn, reduction, weight_shape=(4, 3)):
    x, y = t(m, rand((4, 3)), True), t(m, rand((4, 3), 1))
    w = t(m, rand(weight_shape, 2, 0.0, 2.0), True)
    return with_grads(getattr(F(m), fn)(x, y, reduction=reduction, weight=w), x, w)


def _weight_needs_grad(m, fn):
    x, w = t(m, rand((2, 3)), True), t(m, rand((3,), 1, 0.2, 2.0), True)
    probs = t(m, rand((2, 3), 2, 0.0, 1.0))
    if fn == "bce":
        return F(m).binary_cross_entropy(x.sigmoid(), probs, weight=w)
    if fn.startswith("bce_logits"):
        return F(m).binary_cross_entropy_with_logits(x, probs, **{fn[len("bce_logits_"):]: w})
    return getattr(F(m), fn)(x, m.tensor([0, 2]), weight=w)


def _at_margin(m, fn):
    """Every hinge exactly met (margin 1): torch's rule gives no gradient there."""
    x = t(m, np.array([[0.0, 0.0, 1.0], [2.0, 1.0, 1.0]]), True)
    target = m.tensor([[2, -1, 0], [0, -1, 0]]) if fn == "multilabel_margin_loss" else \
        m.tensor([2, 0])
    return with_grads(getattr(F(m), fn)(x, target, reduction="sum"), x)


ROWS = [
    # gaussian_nll_loss: var broadcast over any one dim of the input (torch 2.13's rule)
    ("gaussian_var_1_by_c", lambda m: _gaussian(m, (1, 3))),
    # weighted mse/l1: 'mean' is the weighted mean (sum(w * loss) / sum(w)); huber's divides
    # by the count; the weight has the input's exact shape
    ("mse_weighted_mean", lambda m: _weighted(m, "mse_loss", "mean")),
    ("l1_weighted_mean", lambda m: _weighted(m, "l1_loss", "mean")),
    ("mse_weight_broadcast_raises", lambda m: _weighted(m, "mse_loss", "sum", (3,))),
    ("l1_weight_broadcast_raises", lambda m: _weighted(m, "l1_loss", "none", (4, 1))),
    ("huber_weight_broadcast_raises", lambda m: _weighted(m, "huber_loss", "mean", (3,))),
    # class weights and pos_weight have no gradient rule in torch
    ("nll_weight_requires_grad_raises", lambda m: _weight_needs_grad(m, "nll_loss")),
    ("cross_entropy_weight_requires_grad_raises",
     lambda m: _weight_needs_grad(m, "cross_entropy")),
    ("multi_margin_weight_requires_grad_raises",
     lambda m: _weight_needs_grad(m, "multi_margin_loss")),
    ("bce_weight_requires_grad_raises", lambda m: _weight_needs_grad(m, "bce")),
    ("bce_logits_weight_requires_grad_raises",
     lambda m: _weight_needs_grad(m, "bce_logits_weight")),
    ("bce_logits_pos_weight_requires_grad_raises",
     lambda m: _weight_needs_grad(m, "bce_logits_pos_weight")),
    # multi(label)_margin_loss: a margin met exactly passes no gradient
    ("multi_margin_at_margin", lambda m: _at_margin(m, "multi_margin_loss")),
    ("multilabel_margin_at_margin", lambda m: _at_margin(m, "multilabel_margin_loss")),
    # ctc_loss: an input length of 0 has no frames (loss 0 for an empty target, else inf)
    ("ctc_input_length_0", lambda m: _ctc_no_frames(m, False)),
    ("ctc_input_length_0_zero_infinity", lambda m: _ctc_no_frames(m, True)),
    # an unbatched target must hold exactly target_length labels
    ("ctc_unbatched_long_target_raises", lambda m: F(m).ctc_loss(
        m.zeros(4, 3).log_softmax(1), m.tensor([1, 2, 1]), m.tensor(4), m.tensor(2))),
    # ctc_loss refuses empty log_probs (an empty batch too)
    ("ctc_empty_batch_raises", lambda m: F(m).ctc_loss(
        m.zeros(4, 0, 3).log_softmax(2), m.zeros(0, 2, dtype=m.int64),
        m.zeros(0, dtype=m.int64), m.zeros(0, dtype=m.int64))),
    # soft_margin_loss has no target rule: a target requiring grad raises
    ("soft_margin_target_grad_raises", _soft_margin_target_grad),
    # class targets: Long or Byte only
    ("cross_entropy_int32_target_raises", lambda m: _class_target(m, "cross_entropy", "int32")),
    ("nll_int16_target_raises", lambda m: _class_target(m, "nll_loss", "int16")),
    ("nll_int8_target_raises", lambda m: _class_target(m, "nll_loss", "int8")),
    # a negative label_smoothing is no smoothing; above 1 raises
    ("cross_entropy_negative_smoothing",
     lambda m: _class_target(m, "cross_entropy", "int64", label_smoothing=-0.1)),
    # triplet_margin_loss: margin > 0, and inputs of any (equal) number of dims
    ("triplet_margin_0_raises", lambda m: _triplet(m, (4, 3), margin=0.0)),
    ("triplet_margin_negative_raises", lambda m: _triplet(m, (4, 3), margin=-0.5)),
    ("triplet_3d", lambda m: _triplet(m, (2, 3, 4), swap=True, reduction="none")),
    ("triplet_0d", lambda m: _triplet(m, (), reduction="sum")),
    # multi_margin_loss: reduction='none' gives the target's shape
    ("multi_margin_1d_target_1", lambda m: _multi_margin(m, [2])),
    # ctc_loss: an impossible alignment's gradient is nan over its frames (zero_infinity off)
    ("ctc_inf_grad_nan_none", lambda m: _ctc(m, "none", False)),
    ("ctc_inf_grad_nan_mean", lambda m: _ctc(m, "mean", False)),
    # kl_div: xlogy(t, t) (nan below 0), its target gradient nan at t == 0
    ("kl_div_target_zero_grad",
     lambda m: _kl_div(m, np.array([[0.0, 0.5, 0.2, 0.3], [0.1, 0.0, 0.6, 0.3]]))),
    ("kl_div_negative_target",
     lambda m: _kl_div(m, np.array([[-0.5, 0.5, 0.2, 0.3], [0.1, 0.2, 0.6, 0.3]]),
                       reduction="none")),
    # poisson_nll_loss(full=True): the target gradient of the masked Stirling term
    ("poisson_full_log_input", lambda m: _poisson_full(m, True)),
    ("poisson_full", lambda m: _poisson_full(m, False)),
    # p-norms with p < 1: a zero element gets a zero gradient (not nan)
    ("normalize_p_half", lambda m: _normalize(m, 0.5, 1)),
    ("normalize_p_half_dim0", lambda m: _normalize(m, 0.5, 0)),
    ("vector_norm_p_half", lambda m: _vector_norm(m, 0.5)),
    ("vector_norm_p_0_3", lambda m: _vector_norm(m, 0.3)),
    ("normalize_0d", lambda m: F(m).normalize(m.tensor(-3.0), dim=0)),
    # cosine_similarity: the norms clamped at eps without blocking their gradient
    ("cosine_eps_1", lambda m: _cosine(m, 1.0)),
    ("cosine_eps_0_5", lambda m: _cosine(m, 0.5)),
    # instance_norm of a half input takes its parameters in its dtype or float32, mixed
    ("instance_norm_bf16_float32_stats", lambda m: _instance_mixed(m, "bfloat16", True)),
    ("instance_norm_bf16_float32_stats_eval", lambda m: _instance_mixed(m, "bfloat16", False)),
    # group_norm of a half input: normalised and scaled in float32, rounded once
    ("group_norm_bf16", lambda m: F(m).group_norm(
        t(m, rand((3, 4, 5), 3) * 2 + 1, dtype="bfloat16"), 2,
        t(m, rand(4, 4), dtype="bfloat16"), t(m, rand(4, 5), dtype="bfloat16")).float()),
    # antialias refuses half precision
    ("interpolate_aa_bf16_raises", lambda m: F(m).interpolate(
        m.ones(1, 1, 4, 4, dtype=m.bfloat16), scale_factor=0.5, mode="bilinear",
        antialias=True)),
    # dropout1d/2d/3d: dims
    ("dropout1d_4d_eval_raises", lambda m: _dropout(m, "dropout1d", (2, 3, 4, 4), False)),
    ("dropout1d_1d_raises", lambda m: _dropout(m, "dropout1d", (5,), False)),
    ("dropout2d_5d_p1", lambda m: _dropout(m, "dropout2d", (2, 3, 2, 2, 2), True, 1.0)),
    ("dropout2d_2d_p1", lambda m: _dropout(m, "dropout2d", (3, 4), True, 1.0)),
    ("dropout3d_3d_p1", lambda m: _dropout(m, "dropout3d", (2, 3, 4), True, 1.0)),
    ("dropout2d_3d_masks_rows", _dropout2d_3d_input_masks),
    # embedding_bag: offsets must be non-decreasing and within the input
    ("bag_decreasing_last_offset_raises", lambda m: _bag(m, [0, 2, 1], True)),
    ("bag_offset_past_end_last_raises", lambda m: _bag(m, [0, 6, 7], True)),
    # interpolate: torch's kernels copy a dim whose size is unchanged, whatever the scale
    ("nearest2d_same_size", lambda m: _interp(m, (1, 2, 2, 6), scale_factor=1.25)),
    ("nearest2d_double_size", lambda m: _interp(m, (1, 1, 3, 3), scale_factor=(2.2, 1.3))),
    ("linear_same_size", lambda m: _interp(m, (1, 1, 2), scale_factor=1.3, mode="linear")),
    ("bilinear_same_size", lambda m: _interp(m, (1, 2, 3, 2), scale_factor=1.3,
                                             mode="bilinear")),
    ("trilinear_same_size", lambda m: _interp(m, (1, 1, 3, 2, 2), scale_factor=1.3,
                                              mode="trilinear")),
    # (forward only: torch's backward of these ignores the shortcut its forward takes; and
    # plain bicubic's takes one its forward does not)
    ("bilinear_aa_same_size", lambda m: _interp(m, (1, 1, 3, 4), scale_factor=1.3,
                                                mode="bilinear", antialias=True)[0]),
    ("bicubic_aa_same_size", lambda m: _interp(m, (1, 1, 3, 6), scale_factor=(1.3, 0.5),
                                               mode="bicubic", antialias=True)[0]),
    # interpolate: uint8 nearest
    ("nearest1d_uint8", lambda m: _interp_uint8(m, (1, 2, 5), scale_factor=1.7)),
    ("nearest2d_uint8", lambda m: _interp_uint8(m, (2, 1, 3, 4), size=(5, 3))),
    ("nearest3d_uint8", lambda m: _interp_uint8(m, (1, 1, 2, 3, 2), scale_factor=2)),
    ("nearest_exact2d_uint8", lambda m: _interp_uint8(m, (1, 2, 4, 4), scale_factor=0.6,
                                                      mode="nearest-exact")),
    # interpolate: uint8 bilinear / bicubic, torch's integer kernels bit for bit
    ("bilinear_uint8_up", lambda m: _interp_uint8(m, (1, 3, 7, 9), size=(11, 13),
                                                  mode="bilinear")),
    ("bilinear_uint8_aa_down", lambda m: _interp_uint8(m, (2, 4, 30, 17), scale_factor=0.3,
                                                       mode="bilinear", antialias=True)),
    ("bicubic_uint8_align_corners", lambda m: _interp_uint8(
        m, (1, 2, 6, 9), size=(13, 4), mode="bicubic", align_corners=True)),
    ("bicubic_uint8_aa", lambda m: _interp_uint8(m, (1, 5, 20, 21), size=(9, 33),
                                                 mode="bicubic", antialias=True)),
    ("bilinear_uint8_same_height", lambda m: _interp_uint8(
        m, (1, 1, 5, 8), scale_factor=(1.1, 0.5), mode="bilinear")),
    # grid_sample: a coordinate on a border (clip or reflection) has a zero gradient
    ("grid_border_ac", lambda m: _grid(m, "bilinear", "border", True)),
    ("grid_reflection_ac", lambda m: _grid(m, "bilinear", "reflection", True)),
    ("grid_reflection", lambda m: _grid(m, "bilinear", "reflection", False,
                                        EDGES * 1.25)),
    # nn.ChannelShuffle: F.channel_shuffle's checks (more than 2 dims)
    ("channel_shuffle_module_2d_raises", lambda m: m.nn.ChannelShuffle(3)(m.ones(2, 6))),
    # pad: the fill value must fit the integer dtype; bool refuses reflect/replicate
    ("pad_uint8_negative_value_raises", lambda m: _pad_int(m, "uint8", (1, 1), -1)),
    ("pad_int8_overflow_raises", lambda m: _pad_int(m, "int8", (1, 1), 200)),
    ("pad_bool_reflect_raises", lambda m: _pad_int(m, "bool", (1, 1), None, "reflect")),
    ("pad_bool_replicate_raises", lambda m: _pad_int(m, "bool", (1, 1), None, "replicate")),
]


def _outcome(fn, m):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(m), None
        except ERRORS as error:
            return None, error


def _leaves(v):
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in _leaves(item)]
    return [v]


# half-precision rows, whose point is that they run: within a bfloat16 ulp or two (torch
# accumulates the statistics of a half input in float32, flowgrad in float64)
HALF_TOLERANCE = {"instance_norm_bf16_float32_stats", "instance_norm_bf16_float32_stats_eval"}


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_against_torch(row):
    name, fn = row
    rtol, atol = (2e-2, 2e-2) if name in HALF_TOLERANCE else (1e-6, 1e-9)
    theirs, torch_error = _outcome(fn, torch)
    ours, error = _outcome(fn, flow)
    assert_same_raise(torch_error, error)
    if torch_error is not None:
        return
    a, b = _leaves(ours), _leaves(theirs)
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        assert (x is None) == (y is None), f"output {i}: {x!r} vs torch's {y!r}"
        if y is None:
            continue
        assert str(x.dtype).split(".")[-1] == str(y.dtype).split(".")[-1], f"output {i} dtype"
        assert tuple(x.shape) == tuple(y.shape), f"output {i}: shape {tuple(x.shape)} vs " \
                                                 f"torch's {tuple(y.shape)}"
        np.testing.assert_allclose(x.detach().numpy().astype(np.float64),
                                   y.detach().numpy().astype(np.float64), rtol=rtol,
                                   atol=atol, err_msg=f"output {i} differs from torch")
