"""nn layers and nn.functional used the less common ways torch users use them, against torch
2.13: values, gradients, dtypes and raise/no-raise."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from vs_torch import assert_same_raise, outcome

import flowgrad as flow

F, TF = flow.nn.functional, torch.nn.functional


def _both(*shapes, seed=0, grad=True):
    """Random float32 arrays as torch and flowgrad tensors: ([torch...], [flowgrad...])."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    return ([torch.tensor(a, requires_grad=grad) for a in arrays],
            [flow.tensor(a, requires_grad=grad) for a in arrays])


def _close(f, t, atol=1e-5):
    assert tuple(f.shape) == tuple(t.shape) and str(f.dtype)[-8:] == str(t.dtype)[-8:]
    np.testing.assert_allclose(f.detach().numpy(), t.detach().numpy(), atol=atol, rtol=1e-4)


# ---- scaled_dot_product_attention with attn_mask and is_causal together -----------------------
_SDPA_BOTH = {  # q, k, v shapes, the mask's shape (negative: a bool mask), kwargs
    "4d": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), (4, 6), {}),
    "4d_mask": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), (2, 1, 4, 6), {}),
    "bool": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), (-4, -6), {}),
    "gqa": ((2, 4, 4, 5), (2, 2, 6, 5), (2, 2, 6, 5), (4, 6), {"enable_gqa": True}),
    "scale": ((1, 2, 5, 3), (1, 2, 5, 3), (1, 2, 5, 3), (5, 5), {"scale": 0.3}),
    "3d": ((3, 4, 5), (3, 6, 5), (3, 6, 5), (4, 6), {}),
    "value_width": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7), (4, 6), {}),
    "batch_bcast": ((2, 3, 4, 5), (1, 3, 6, 5), (1, 3, 6, 5), (4, 6), {}),
    "mask_3d": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), (3, 4, 6), {}),
    "dropout": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), (4, 6), {"dropout_p": 0.5}),
}


@pytest.mark.parametrize("case", sorted(_SDPA_BOTH))
def test_sdpa_mask_and_is_causal_as_torch(case):
    """torch 2.13's CPU flash kernel applies an attn_mask and is_causal together; where it
    cannot run (3-D, another value width, dropout...) the math kernel refuses both. flowgrad
    refused both everywhere."""
    qs, ks, vs, ms, kw = _SDPA_BOTH[case]
    (tq, tk, tv, tm), (fq, fk, fv, fm) = _both(qs, ks, vs, tuple(abs(s) for s in ms), seed=3)
    if ms[0] < 0:
        tm, fm = tm.detach() > 0, fm.detach() > 0
    else:
        tm, fm = tm.detach(), fm.detach()
    t, terr = outcome(lambda: TF.scaled_dot_product_attention(tq, tk, tv, tm, is_causal=True,
                                                              **kw))
    f, ferr = outcome(lambda: F.scaled_dot_product_attention(fq, fk, fv, fm, is_causal=True,
                                                             **kw))
    assert_same_raise(terr, ferr)
    if terr is None:
        _close(f, t)
        gt = torch.autograd.grad((t ** 2).sum(), (tq, tk, tv))
        gf = flow.autograd.grad((f ** 2).sum(), (fq, fk, fv))
        for a, b in zip(gf, gt):
            _close(a, b)


# ---- max_unpool's output_size ----------------------------------------------------------------
_UNPOOL = {  # nd, input shape, kernel, stride, padding, output_size
    "1d_default": (1, (2, 3, 9), 3, 2, 1, [9]),
    "1d_upper_bound": (1, (2, 3, 9), 3, 2, 1, [11]),
    "1d_inside": (1, (2, 3, 9), 3, 2, 1, [8]),
    "1d_lower_bound": (1, (2, 3, 9), 3, 2, 1, [5]),
    "2d_full_size": (2, (2, 3, 6, 6), 2, 2, 0, (2, 3, 7, 6)),
    "2d_too_big": (2, (2, 3, 6, 6), 2, 2, 0, (8, 6)),
    "2d_three": (2, (2, 3, 6, 6), 2, 2, 0, (3, 7, 6)),
    "2d_unbatched_three": (2, (3, 6, 6), 2, 2, 0, (3, 7, 7)),
    "2d_one": (2, (2, 3, 6, 6), 2, 2, 0, (7,)),
    "3d_ok": (3, (1, 2, 4, 4, 4), 2, 2, 0, (5, 4, 5)),
    "3d_too_small": (3, (1, 2, 4, 4, 4), 2, 2, 0, (2, 4, 4)),
}


@pytest.mark.parametrize("case", sorted(_UNPOOL))
def test_max_unpool_output_size_checked_as_torch(case):
    """torch takes an output_size of nd or nd + 2 sizes, each strictly within one stride of
    the default; flowgrad took any (its last nd sizes), and scattered into a larger or
    smaller output than torch would allow: max_unpool1d(output_size=[9]) where torch allows
    6 to 8."""
    nd, shape, k, s, p, size = _UNPOOL[case]
    (tx,), (fx,) = _both(shape, seed=4)
    pool, unpool = f"max_pool{nd}d", f"max_unpool{nd}d"
    ty, ti = getattr(TF, pool)(tx, k, s, p, return_indices=True)
    fy, fi = getattr(F, pool)(fx, k, s, p, return_indices=True)
    t, terr = outcome(lambda: getattr(TF, unpool)(ty, ti, k, s, p, output_size=size))
    f, ferr = outcome(lambda: getattr(F, unpool)(fy, fi, k, s, p, output_size=size))
    assert_same_raise(terr, ferr)
    if terr is None:
        _close(f, t)
    else:
        assert type(ferr) is type(terr)


@pytest.mark.parametrize("shape, groups", [((1, 3, 1), 3), ((1, 3), 3), ((1, 3, 1, 1), 3),
                                           ((1, 3, 1), 2), ((2, 3, 1), 3), ((1, 6, 1), 3),
                                           ((1, 4), 4), ((1, 4, 2), 4)])
def test_group_norm_one_value_per_group_raises_as_torch(shape, groups):
    """torch's group_norm refuses a group holding one value (N * C // G * spatial == 1) with
    ValueError, as batch_norm does; flowgrad returned zeros."""
    (tx,), (fx,) = _both(shape, seed=5)
    t, terr = outcome(lambda: TF.group_norm(tx, groups))
    f, ferr = outcome(lambda: F.group_norm(fx, groups))
    assert_same_raise(terr, ferr)
    if terr is None:
        _close(f, t)
    else:
        assert type(ferr) is type(terr)
    m, merr = outcome(lambda: flow.nn.GroupNorm(groups, shape[1]).eval()(fx))
    assert_same_raise(terr, merr)


_MIXED = {"int64_float32": ("int64", "float32"), "float32_bool": ("float32", "bool"),
          "bool_float32": ("bool", "float32"), "int64_float64": ("int64", "float64"),
          "float32_float64": ("float32", "float64"), "float16_int64": ("float16", "int64"),
          "int64_int64": ("int64", "int64")}


@pytest.mark.parametrize("loss", ["mse_loss", "smooth_l1_loss"])
@pytest.mark.parametrize("case", sorted(_MIXED))
def test_mse_and_smooth_l1_promote_an_integer_operand_as_torch(loss, case):
    """torch's mse and smooth_l1 kernels compute in the promoted dtype: an int64 prediction
    against float32 targets (or a bool target) gives a float32 loss; flowgrad refused the
    int64 input ('mse_cpu' not implemented) and subtracted a bool target (an error)."""
    a_dt, b_dt = _MIXED[case]
    rng = np.random.default_rng(6)
    a = rng.integers(0, 3, (3, 4)) if a_dt in ("int64", "bool") else rng.standard_normal((3, 4))
    b = rng.integers(0, 2, (3, 4)) if b_dt in ("int64", "bool") else rng.standard_normal((3, 4))
    grad = a_dt.startswith("float")
    ta = torch.tensor(a).to(getattr(torch, a_dt)).requires_grad_(grad)
    fa = flow.tensor(a).to(getattr(flow, a_dt)).requires_grad_(grad)
    tb, fb = torch.tensor(b).to(getattr(torch, b_dt)), flow.tensor(b).to(getattr(flow, b_dt))
    kw = {"beta": 0.5} if loss == "smooth_l1_loss" else {}
    for reduction in ("none", "mean"):
        t, terr = outcome(lambda: getattr(TF, loss)(ta, tb, reduction=reduction, **kw))
        f, ferr = outcome(lambda: getattr(F, loss)(fa, fb, reduction=reduction, **kw))
        assert_same_raise(terr, ferr)
        if terr is None:
            _close(f, t, atol=1e-3 if "float16" in case else 1e-5)
            if grad:
                _close(flow.autograd.grad(f.sum(), fa)[0], torch.autograd.grad(t.sum(), ta)[0],
                       atol=1e-3 if "float16" in case else 1e-5)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("shape, batch_first", [((0, 2, 3), False), ((2, 0, 3), True),
                                                ((0, 3), False), ((5, 0, 3), False)])
def test_rnn_empty_sequence_raises_as_torch(mode, shape, batch_first):
    """A sequence of length 0 makes torch's recurrent layers raise RuntimeError ('Expected
    sequence length to be larger than 0'); flowgrad's fused loop failed with NumPy's
    ValueError ('need at least one array to concatenate'). An empty batch runs in both."""
    torch.manual_seed(0)
    tm = getattr(torch.nn, mode)(3, 4, num_layers=2, bidirectional=True, batch_first=batch_first)
    fm = getattr(flow.nn, mode)(3, 4, num_layers=2, bidirectional=True, batch_first=batch_first)
    fm.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    (tx,), (fx,) = _both(shape, seed=9)
    t, terr = outcome(lambda: tm(tx))
    f, ferr = outcome(lambda: fm(fx))
    assert_same_raise(terr, ferr)
    if terr is None:
        _close(f[0], t[0])
    else:
        assert type(ferr) is type(terr) and "sequence length" in str(ferr)


@pytest.mark.parametrize("target_dtype", ["int64", "bool", "uint8", "float64"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_integral_target_raises_as_torch(target_dtype, log_target):
    """torch's kl_div refuses an integral (or bool) target ('Integral inputs not supported');
    flowgrad computed a loss from it."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.integers(0, 2, (3, 4))
    tt = torch.tensor(y).to(getattr(torch, target_dtype))
    ft = flow.tensor(y).to(getattr(flow, target_dtype))
    t, terr = outcome(lambda: TF.kl_div(torch.tensor(x), tt, reduction="sum",
                                        log_target=log_target))
    f, ferr = outcome(lambda: F.kl_div(flow.tensor(x), ft, reduction="sum",
                                       log_target=log_target))
    assert_same_raise(terr, ferr)
    if terr is None:
        _close(f, t)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "bool", "uint8"])
@pytest.mark.parametrize("nd, mode", [(1, "nearest"), (1, "linear"), (2, "nearest"),
                                      (2, "bilinear"), (2, "bicubic"), (2, "area"),
                                      (3, "trilinear")])
def test_interpolate_integer_input_error_type_as_torch(dtype, nd, mode):
    """torch's interpolate kernels are missing for integer inputs (uint8 aside, for nearest,
    bilinear and bicubic): NotImplementedError; flowgrad raised RuntimeError."""
    x = np.ones((1, 1) + (4,) * nd, np.int64)
    t, terr = outcome(lambda: TF.interpolate(torch.tensor(x).to(getattr(torch, dtype)),
                                             scale_factor=2, mode=mode))
    f, ferr = outcome(lambda: F.interpolate(flow.tensor(x).to(getattr(flow, dtype)),
                                            scale_factor=2, mode=mode))
    assert_same_raise(terr, ferr)
    if terr is None:
        np.testing.assert_array_equal(f.numpy(), t.numpy())
    else:
        assert type(ferr) is type(terr)


def _dtype_cases(torch_or_flow, dt):
    m, D = torch_or_flow, getattr(torch_or_flow, dt)
    fn = m.nn.functional
    return {
        "adaptive_max_pool1d": lambda: fn.adaptive_max_pool1d(m.ones(1, 2, 6, dtype=D), 3),
        "adaptive_max_pool2d": lambda: fn.adaptive_max_pool2d(m.ones(1, 2, 6, 6, dtype=D), 3),
        "adaptive_max_pool3d": lambda: fn.adaptive_max_pool3d(m.ones(1, 2, 4, 4, 4, dtype=D),
                                                              2),
        "unfold": lambda: fn.unfold(m.ones(1, 2, 4, 4, dtype=D), 2),
        "fold": lambda: fn.fold(m.ones(1, 8, 4, dtype=D), (3, 3), 2),
        "max_unpool1d": lambda: fn.max_unpool1d(m.ones(1, 2, 3, dtype=D),
                                                m.zeros(1, 2, 3, dtype=m.int64), 2),
        "max_unpool3d": lambda: fn.max_unpool3d(m.ones(1, 2, 2, 2, 2, dtype=D),
                                                m.zeros(1, 2, 2, 2, 2, dtype=m.int64), 2),
        "grid_sample": lambda: fn.grid_sample(m.ones(1, 1, 3, 3, dtype=D),
                                              m.zeros(1, 2, 2, 2, dtype=D), align_corners=False),
        "grid_sample_3d": lambda: fn.grid_sample(m.ones(1, 1, 3, 3, 3, dtype=D),
                                                 m.zeros(1, 2, 2, 2, 3, dtype=D),
                                                 align_corners=False),
        "pdist": lambda: fn.pdist(m.ones(3, 2, dtype=D)),
        "linear": lambda: fn.linear(m.ones(2, 3, dtype=D), m.ones(4, 3, dtype=D)),
        "pairwise_distance": lambda: fn.pairwise_distance(m.ones(3, 2, dtype=D),
                                                          m.ones(3, 2, dtype=D)),
    }


@pytest.mark.parametrize("dt", ["int64", "int8", "uint8", "bool", "float16", "bfloat16",
                                "float64", "complex64"])
def test_kernel_dtype_support_as_torch(dt):
    """torch has no integer (or bool, or complex) kernels for adaptive max pooling, im2col /
    col2im (unfold / fold: bool and complex they take), max unpooling, grid sampling or
    pdist (float32 and float64 only), nor a bool linear, and pairwise_distance of two bool
    tensors fails on their subtraction; flowgrad computed every one of them (grid_sample of
    int8 gave float32), or raised another type (complex grid_sample: RuntimeError). The
    outcome and the result dtype now follow torch."""
    tcases, fcases = _dtype_cases(torch, dt), _dtype_cases(flow, dt)
    for name in tcases:
        t, terr = outcome(tcases[name])
        f, ferr = outcome(fcases[name])
        assert (terr is None) == (ferr is None), (name, terr, ferr)
        if terr is None:
            assert str(f.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], name
        else:
            assert type(ferr) is type(terr), (name, terr, ferr)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("mode, kw", [("LSTM", {}), ("GRU", {}), ("RNN", {}),
                                      ("LSTM", {"num_layers": 2, "bidirectional": True}),
                                      ("GRU", {"num_layers": 2}), ("LSTM", {"proj_size": 2})])
def test_half_precision_rnn_dtypes_as_torch(dt, mode, kw):
    """A bfloat16 LSTM/GRU/RNN gave float32 outputs and final states (NumPy's bfloat16
    arithmetic promotes), so a second layer met float32 input beside bfloat16 weights and
    raised; torch keeps bfloat16 throughout. Values agree to the dtype's rounding."""
    torch.manual_seed(0)
    tm = getattr(torch.nn, mode)(3, 4, **kw)
    fm = getattr(flow.nn, mode)(3, 4, **kw)
    fm.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tm, fm = tm.to(getattr(torch, dt)), fm.to(getattr(flow, dt))
    x = np.random.default_rng(11).standard_normal((5, 2, 3)).astype(np.float32)
    tx = torch.tensor(x).to(getattr(torch, dt)).requires_grad_()
    fx = flow.tensor(x).to(getattr(flow, dt)).requires_grad_()
    (ty, th), (fy, fh) = tm(tx), fm(fx)
    th, fh = (th, fh) if isinstance(th, tuple) else ((th,), (fh,))
    for a, b in zip((fy, *fh), (ty, *th)):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.float().detach().numpy(), b.float().detach().numpy(),
                                   atol=3e-2, rtol=3e-2)
    ty.float().pow(2).sum().backward()
    fy.float().pow(2).sum().backward()
    assert str(fx.grad.dtype).split(".")[-1] == dt
    np.testing.assert_allclose(fx.grad.float().numpy(), tx.grad.float().numpy(), atol=5e-2,
                               rtol=5e-2)
    for (n, tp), fp in zip(tm.named_parameters(), fm.parameters()):
        assert str(fp.grad.dtype).split(".")[-1] == dt, n


@pytest.mark.parametrize("mode", ["RNN", "GRU"])
@pytest.mark.parametrize("kw", [{"proj_size": 0}, {"proj_size": 2}, {"foo": 1}])
def test_rnn_gru_refuse_proj_size_as_torch(mode, kw):
    """torch's RNN and GRU refuse proj_size (even 0) with ValueError; flowgrad's signature
    raised TypeError (an unexpected keyword)."""
    t, terr = outcome(lambda: getattr(torch.nn, mode)(3, 4, **kw))
    f, ferr = outcome(lambda: getattr(flow.nn, mode)(3, 4, **kw))
    assert type(ferr) is type(terr)


@pytest.mark.parametrize("shape, mode", [((1, 2, 4, 4), "nearest"), ((1, 2, 4, 4), "area"),
                                         ((1, 2, 4), "linear"), ((1, 1, 2, 4, 4), "trilinear"),
                                         ((1, 2, 4, 4), "bilinear")])
def test_interpolate_antialias_mode_error_type_as_torch(shape, mode):
    """torch 2.13 refuses antialias=True outside 4-D bilinear/bicubic with ValueError;
    flowgrad raised NotImplementedError."""
    x = np.ones(shape, np.float32)
    size = (2,) * (len(shape) - 2)
    t, terr = outcome(lambda: TF.interpolate(torch.tensor(x), size=size, mode=mode,
                                             antialias=True))
    f, ferr = outcome(lambda: F.interpolate(flow.tensor(x), size=size, mode=mode,
                                            antialias=True))
    assert type(ferr) is type(terr)
    if terr is None:
        _close(f, t)


_TENSOR_ARGS = {
    "conv2d_stride": lambda m, x, w, t: m.nn.functional.conv2d(x, w, stride=t),
    "conv2d_padding": lambda m, x, w, t: m.nn.functional.conv2d(x, w, padding=t),
    "conv2d_dilation": lambda m, x, w, t: m.nn.functional.conv2d(x, w, dilation=t),
    "conv_transpose2d_stride": lambda m, x, w, t: m.nn.functional.conv_transpose2d(
        x, w.transpose(0, 1), stride=t),
    "max_pool2d": lambda m, x, w, t: m.nn.functional.max_pool2d(x, t),
    "avg_pool2d": lambda m, x, w, t: m.nn.functional.avg_pool2d(x, t, stride=t),
}


@pytest.mark.parametrize("case", sorted(_TENSOR_ARGS))
def test_zero_dim_tensor_window_arguments_as_torch(case):
    """torch takes a 0-d integer tensor for an int-list argument (stride=torch.tensor(2));
    flowgrad raised TypeError (a 0-d tensor is no sequence)."""
    x = np.random.default_rng(12).standard_normal((1, 2, 6, 6)).astype(np.float32)
    w = np.random.default_rng(13).standard_normal((3, 2, 2, 2)).astype(np.float32)
    t = _TENSOR_ARGS[case](torch, torch.tensor(x), torch.tensor(w), torch.tensor(2))
    f = _TENSOR_ARGS[case](flow, flow.tensor(x), flow.tensor(w), flow.tensor(2))
    _close(f, t)


@pytest.mark.parametrize("nd, shape, size", [(2, (2, 3, 4, 5, 6), 1), (2, (5, 6), 1),
                                             (2, (2, 3, 4, 5, 6), (1, 1)),
                                             (3, (4, 5, 6), 1), (3, (1, 2, 3, 4, 5, 6), 1),
                                             (2, (2, 3, 4, 5, 6), 2), (2, (6,), 1)])
def test_adaptive_avg_pool_to_one_any_rank_as_torch(nd, shape, size):
    """torch's adaptive_avg_pool2d/3d to output size 1 is a mean over the last 2/3 dims for
    an input of any rank (global pooling of a 5-D tensor with AdaptiveAvgPool2d(1));
    flowgrad refused every rank but nd + 1 and nd + 2."""
    (tx,), (fx,) = _both(shape, seed=14)
    name = f"adaptive_avg_pool{nd}d"
    t, terr = outcome(lambda: getattr(TF, name)(tx, size))
    f, ferr = outcome(lambda: getattr(F, name)(fx, size))
    assert_same_raise(terr, ferr)
    if terr is None:
        _close(f, t)
        _close(flow.autograd.grad((f * f).sum(), fx)[0], torch.autograd.grad((t * t).sum(),
                                                                             tx)[0])


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5, 6])
def test_circular_pad_module_input_dims_as_torch(n, rank):
    """nn.CircularPad1d/2d/3d take n + 1 or n + 2 dims and raise ValueError otherwise, as
    torch's _check_input_dim; flowgrad's F.pad raised NotImplementedError (or padded a
    4-D input with CircularPad1d)."""
    shape = (2, 3, 4, 4, 4, 4)[:rank]
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    t, terr = outcome(lambda: getattr(torch.nn, f"CircularPad{n}d")(1)(torch.tensor(x)))
    f, ferr = outcome(lambda: getattr(flow.nn, f"CircularPad{n}d")(1)(flow.tensor(x)))
    assert type(ferr) is type(terr)
    if terr is None:
        _close(f, t)


@pytest.mark.parametrize("n, shape, affine", [(1, (2, 3), True), (1, (2, 3), False),
                                              (1, (2, 4, 5), True), (2, (2, 4, 4), True),
                                              (2, (3, 4, 4), True), (3, (2, 2, 3, 3, 3), True)])
def test_instance_norm_module_num_features_checked_as_torch(n, shape, affine):
    """An affine InstanceNorm refuses an input whose channel dim is not num_features with
    ValueError (torch reads (2, 3) as an unbatched 2-channel input for InstanceNorm1d(3));
    flowgrad raised RuntimeError from the weight's shape. Without affine torch warns and
    normalises."""
    x = np.random.default_rng(15).standard_normal(shape).astype(np.float32)
    t, terr = outcome(lambda: getattr(torch.nn, f"InstanceNorm{n}d")(3, affine=affine)(
        torch.tensor(x)))
    f, ferr = outcome(lambda: getattr(flow.nn, f"InstanceNorm{n}d")(3, affine=affine)(
        flow.tensor(x)))
    assert type(ferr) is type(terr)
    if terr is None:
        _close(f, t)
