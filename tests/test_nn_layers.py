"""Every layer against torch: the same module built in both frameworks, torch's weights
copied over by state_dict -> numpy -> load_state_dict, then forward values, input
gradients, parameter gradients and buffers (running stats) compared. One line per case."""
import numpy as np
import pytest
import torch
from helpers import Positive, Unit, make_arrays

import flowgrad as flow
from flowgrad import nn


class Const:
    """An input passed as a tensor that does not require grad (targets, masks)."""

    def __init__(self, array):
        self.array = np.asarray(array)


def _convert(lib, a, dtype):
    if isinstance(a, Const):
        arr = a.array.astype(dtype) if a.array.dtype.kind == "f" else a.array
        return lib.tensor(arr) if lib is flow else torch.from_numpy(arr.copy())
    if isinstance(a, np.ndarray):
        if lib is torch:
            t = torch.from_numpy(a.copy())
        else:
            t = flow.tensor(a)
        if a.dtype.kind == "f":
            t.requires_grad_(True)
        return t
    return a


def _flat(y):
    if isinstance(y, (tuple, list)):
        return [o for item in y for o in _flat(item)]
    return [] if y is None else [y]


def _np(t):
    return t.detach().numpy().astype(np.float64)


def copy_weights(tm, fm):
    """torch module -> flowgrad module, through numpy (strict: names must map 1:1)."""
    fm.load_state_dict({k: v.detach().numpy().copy() for k, v in tm.state_dict().items()})


def compare_modules(ctor, *specs, call=None, train=False, atol=1e-5, rtol=1e-4,
                    grad_atol=None, dtype=np.float32, seed=0, steps=1):
    """Build ctor(torch.nn) and ctor(flowgrad.nn), copy weights, run `call(module, *inputs)`
    (default module(*inputs)) `steps` times, compare outputs, grads of inputs and
    parameters, and buffers."""
    torch.manual_seed(seed)
    tm = ctor(torch.nn)
    fm = ctor(nn)
    if dtype == np.float64:
        tm, fm = tm.double(), fm.double()
    copy_weights(tm, fm)
    tm.train(train)
    fm.train(train)
    call = call or (lambda m, *xs: m(*xs))
    arrays = make_arrays(specs, dtype, seed)
    for step in range(steps):
        ti = [_convert(torch, a, dtype) for a in arrays]
        fi = [_convert(flow, a, dtype) for a in arrays]
        yt, yf = _flat(call(tm, *ti)), _flat(call(fm, *fi))
        assert len(yt) == len(yf), f"{len(yf)} outputs vs torch's {len(yt)}"
        for a, b in zip(yf, yt):
            assert tuple(a.shape) == tuple(b.shape), f"shape {tuple(a.shape)} vs {b.shape}"
            np.testing.assert_allclose(_np(a), _np(b), atol=atol, rtol=rtol,
                                       err_msg="forward differs from torch")
        rng = np.random.default_rng(seed + 1 + step)
        lt, lf = 0, 0
        for a, b in zip(yf, yt):
            if b.requires_grad:
                w = rng.standard_normal(tuple(b.shape)).astype(dtype)
                lt = lt + (b * torch.from_numpy(w)).sum()
                lf = lf + (a * flow.tensor(w)).sum()
        if isinstance(lt, torch.Tensor):
            lt.backward()
            lf.backward()
        gatol = grad_atol or atol * 10
        for i, (a, b) in enumerate(zip(fi, ti)):
            if isinstance(b, torch.Tensor) and b.requires_grad:
                assert (a.grad is None) == (b.grad is None), f"input {i}: grad presence"
                if b.grad is not None:
                    np.testing.assert_allclose(_np(a.grad), _np(b.grad), atol=gatol,
                                               rtol=rtol * 10,
                                               err_msg=f"grad of input {i} differs")
        tparams = dict(tm.named_parameters())
        for name, p in fm.named_parameters():
            q = tparams[name]
            assert (p.grad is None) == (q.grad is None), f"{name}: grad presence differs"
            if q.grad is not None:
                np.testing.assert_allclose(_np(p.grad), _np(q.grad), atol=gatol,
                                           rtol=rtol * 10, err_msg=f"grad of {name} differs")
        tbufs = dict(tm.named_buffers())
        for name, b in fm.named_buffers():
            np.testing.assert_allclose(_np(b), _np(tbufs[name]), atol=atol, rtol=rtol,
                                       err_msg=f"buffer {name} differs after step {step}")
    return fm, tm


IDX = np.array([[1, 0, 4], [3, 3, 2]], dtype=np.int64)
TGT = np.array([2, 0, 1, 2], dtype=np.int64)
PROBS = np.random.default_rng(5).uniform(0.1, 0.9, (4, 3))
SIGNS = np.array([1.0, -1.0, 1.0, -1.0])

LAYERS = [
    # name, ctor, input specs, extra options
    ("linear", lambda n: n.Linear(4, 3), [(2, 5, 4)], {}),
    ("linear_nobias", lambda n: n.Linear(4, 3, bias=False), [(6, 4)], {}),
    ("bilinear", lambda n: n.Bilinear(3, 4, 2), [(5, 3), (5, 4)], {}),
    ("identity", lambda n: n.Identity(7), [(2, 3)], {}),
    ("conv1d", lambda n: n.Conv1d(2, 4, 3, stride=2, padding=1), [(2, 2, 9)], {}),
    ("conv1d_same_reflect", lambda n: n.Conv1d(2, 3, 4, padding="same",
                                               padding_mode="reflect"), [(2, 2, 8)], {}),
    ("conv2d", lambda n: n.Conv2d(2, 4, 3, padding=1, groups=2), [(2, 2, 5, 5)], {}),
    ("conv2d_dilated", lambda n: n.Conv2d(3, 2, (2, 3), stride=(2, 1), dilation=2),
     [(1, 3, 7, 8)], {}),
    ("conv2d_circular", lambda n: n.Conv2d(1, 2, 3, padding=1, padding_mode="circular"),
     [(1, 1, 4, 4)], {}),
    ("conv3d", lambda n: n.Conv3d(2, 2, 2), [(1, 2, 3, 3, 3)], {}),
    ("convT1d", lambda n: n.ConvTranspose1d(2, 3, 3, stride=2, padding=1, output_padding=1),
     [(2, 2, 5)], {}),
    ("convT2d", lambda n: n.ConvTranspose2d(4, 2, 3, stride=2, groups=2), [(1, 4, 3, 3)],
     {}),
    ("convT2d_output_size", lambda n: n.ConvTranspose2d(2, 2, 3, stride=2),
     [(1, 2, 3, 3)], {"call": lambda m, x: m(x, output_size=[8, 8])}),
    ("maxpool1d", lambda n: n.MaxPool1d(3, 2, 1), [(2, 3, 9)], {}),
    ("maxpool2d", lambda n: n.MaxPool2d(2), [(2, 3, 6, 6)], {}),
    ("maxpool2d_ceil", lambda n: n.MaxPool2d(3, 2, 1, ceil_mode=True), [(1, 2, 6, 7)], {}),
    ("maxpool2d_indices", lambda n: n.MaxPool2d(2, return_indices=True), [(1, 2, 4, 4)],
     {}),
    ("avgpool1d", lambda n: n.AvgPool1d(3, 2, 1), [(2, 3, 9)], {}),
    ("avgpool2d", lambda n: n.AvgPool2d(3, 2, 1, count_include_pad=False), [(1, 2, 6, 6)],
     {}),
    ("adaptive_avg1d", lambda n: n.AdaptiveAvgPool1d(3), [(2, 3, 7)], {}),
    ("adaptive_avg2d", lambda n: n.AdaptiveAvgPool2d((2, 3)), [(2, 3, 5, 7)], {}),
    ("adaptive_max2d", lambda n: n.AdaptiveMaxPool2d(2), [(2, 3, 5, 6)], {}),
    ("batchnorm1d_train", lambda n: n.BatchNorm1d(3), [(6, 3)], {"train": True,
                                                                "steps": 2}),
    ("batchnorm1d_3d", lambda n: n.BatchNorm1d(3, momentum=None), [(4, 3, 5)],
     {"train": True, "steps": 3}),
    ("batchnorm2d_train", lambda n: n.BatchNorm2d(3, momentum=0.3), [(4, 3, 2, 2)],
     {"train": True, "steps": 2}),
    ("batchnorm2d_eval", lambda n: n.BatchNorm2d(3), [(2, 3, 2, 2)], {}),
    ("batchnorm2d_no_stats", lambda n: n.BatchNorm2d(3, track_running_stats=False),
     [(2, 3, 2, 2)], {}),
    ("batchnorm2d_no_affine", lambda n: n.BatchNorm2d(3, affine=False), [(4, 3, 2, 2)],
     {"train": True}),
    ("layernorm", lambda n: n.LayerNorm(4), [(2, 3, 4)], {}),
    ("layernorm_2d_nobias", lambda n: n.LayerNorm([3, 4], bias=False), [(2, 3, 4)], {}),
    ("groupnorm", lambda n: n.GroupNorm(2, 4), [(2, 4, 3, 3)], {}),
    ("instancenorm2d", lambda n: n.InstanceNorm2d(3, affine=True), [(2, 3, 4, 4)], {}),
    ("instancenorm2d_stats", lambda n: n.InstanceNorm2d(3, track_running_stats=True),
     [(2, 3, 4, 4)], {"train": True, "steps": 2}),
    ("rmsnorm", lambda n: n.RMSNorm(4, eps=1e-6), [(2, 3, 4)], {}),
    ("dropout_eval", lambda n: n.Dropout(0.5), [(3, 4)], {}),
    ("dropout2d_eval", lambda n: n.Dropout2d(0.5), [(2, 3, 2, 2)], {}),
    ("dropout1d_eval", lambda n: n.Dropout1d(0.5), [(2, 3, 4)], {}),
    ("alpha_dropout_eval", lambda n: n.AlphaDropout(0.5), [(3, 4)], {}),
    ("embedding", lambda n: n.Embedding(5, 3), [Const(IDX)], {}),
    ("embedding_padding", lambda n: n.Embedding(5, 3, padding_idx=3), [Const(IDX)], {}),
    ("flatten", lambda n: n.Flatten(), [(2, 3, 4)], {}),
    ("unflatten", lambda n: n.Unflatten(1, (2, 3)), [(2, 6)], {}),
    ("upsample_nearest", lambda n: n.Upsample(scale_factor=2), [(1, 2, 3, 3)], {}),
    ("upsample_bilinear", lambda n: n.Upsample(size=(5, 4), mode="bilinear",
                                               align_corners=False), [(1, 2, 3, 3)], {}),
    ("pixel_shuffle", lambda n: n.PixelShuffle(2), [(1, 8, 2, 3)], {}),
    ("pixel_unshuffle", lambda n: n.PixelUnshuffle(2), [(1, 2, 4, 6)], {}),
    ("zeropad2d", lambda n: n.ZeroPad2d((1, 2, 0, 1)), [(1, 2, 3, 3)], {}),
    ("constpad1d", lambda n: n.ConstantPad1d(2, 3.5), [(1, 2, 3)], {}),
    ("reflectpad2d", lambda n: n.ReflectionPad2d(1), [(1, 2, 3, 3)], {}),
    ("replicatepad2d", lambda n: n.ReplicationPad2d((2, 0, 1, 1)), [(1, 2, 3, 3)], {}),
    ("cosine_similarity", lambda n: n.CosineSimilarity(dim=1), [(3, 4), (3, 4)], {}),
    ("pairwise_distance", lambda n: n.PairwiseDistance(p=3.0, keepdim=True),
     [(3, 4), (3, 4)], {}),
    ("prelu", lambda n: n.PReLU(3, init=0.1), [(2, 3, 4)], {}),
    ("softmax2d", lambda n: n.Softmax2d(), [(2, 3, 2, 2)], {}),
]

ACTIVATIONS = [
    ("relu", lambda n: n.ReLU()), ("relu6", lambda n: n.ReLU6()),
    ("leaky_relu", lambda n: n.LeakyReLU(0.2)), ("elu", lambda n: n.ELU(0.7)),
    ("selu", lambda n: n.SELU()), ("celu", lambda n: n.CELU(1.3)),
    ("gelu", lambda n: n.GELU()), ("gelu_tanh", lambda n: n.GELU("tanh")),
    ("silu", lambda n: n.SiLU()), ("mish", lambda n: n.Mish()),
    ("softplus", lambda n: n.Softplus(2.0, 1.0)), ("softsign", lambda n: n.Softsign()),
    ("hardtanh", lambda n: n.Hardtanh(-0.5, 0.7)), ("hardsigmoid", lambda n: n.Hardsigmoid()),
    ("hardswish", lambda n: n.Hardswish()), ("hardshrink", lambda n: n.Hardshrink(0.4)),
    ("softshrink", lambda n: n.Softshrink(0.4)), ("tanhshrink", lambda n: n.Tanhshrink()),
    ("threshold", lambda n: n.Threshold(0.1, -2.0)), ("glu", lambda n: n.GLU(1)),
    ("logsigmoid", lambda n: n.LogSigmoid()), ("sigmoid", lambda n: n.Sigmoid()),
    ("tanh", lambda n: n.Tanh()), ("softmax", lambda n: n.Softmax(dim=1)),
    ("log_softmax", lambda n: n.LogSoftmax(dim=-1)), ("softmin", lambda n: n.Softmin(0)),
]

LOSSES = [
    ("cross_entropy", lambda n: n.CrossEntropyLoss(), [(4, 3), Const(TGT)]),
    ("cross_entropy_opts", lambda n: n.CrossEntropyLoss(
        weight=torch.tensor([1.0, 2.0, 0.5]) if n is torch.nn else flow.tensor(
            [1.0, 2.0, 0.5]), ignore_index=0, label_smoothing=0.1), [(4, 3), Const(TGT)]),
    ("nll", lambda n: n.NLLLoss(reduction="sum"), [(4, 3), Const(TGT)]),
    ("mse", lambda n: n.MSELoss(), [(3, 4), (3, 4)]),
    ("l1", lambda n: n.L1Loss(reduction="none"), [(3, 4), (3, 4)]),
    ("smooth_l1", lambda n: n.SmoothL1Loss(beta=0.5), [(3, 4), (3, 4)]),
    ("huber", lambda n: n.HuberLoss(delta=0.5), [(3, 4), (3, 4)]),
    ("bce", lambda n: n.BCELoss(), [Unit((4, 3)), Const(PROBS)],
     lambda m, x, y: m(x.sigmoid(), y)),
    ("bce_logits", lambda n: n.BCEWithLogitsLoss(
        pos_weight=torch.tensor([1.0, 2.0, 3.0]) if n is torch.nn else flow.tensor(
            [1.0, 2.0, 3.0])), [(4, 3), Const(PROBS)]),
    ("kl_div", lambda n: n.KLDivLoss(reduction="batchmean"), [(4, 3), Const(PROBS)],
     lambda m, x, y: m(x.log_softmax(-1), y)),
    ("poisson_nll", lambda n: n.PoissonNLLLoss(), [(4, 3), Const(PROBS)]),
    ("gaussian_nll", lambda n: n.GaussianNLLLoss(), [(4, 3), (4, 3), Positive((4, 3))]),
    ("cosine_embedding", lambda n: n.CosineEmbeddingLoss(0.1), [(4, 3), (4, 3),
                                                                Const(SIGNS)]),
    ("margin_ranking", lambda n: n.MarginRankingLoss(0.2), [(4,), (4,), Const(SIGNS)]),
    ("hinge_embedding", lambda n: n.HingeEmbeddingLoss(), [(4, 3), Const(
        np.sign(np.random.default_rng(1).standard_normal((4, 3))))]),
    ("triplet", lambda n: n.TripletMarginLoss(), [(4, 3), (4, 3), (4, 3)]),
    ("multi_margin", lambda n: n.MultiMarginLoss(), [(4, 3), Const(TGT)]),
    ("soft_margin", lambda n: n.SoftMarginLoss(), [(4, 3), Const(
        np.sign(np.random.default_rng(2).standard_normal((4, 3))))]),
    ("ctc", lambda n: n.CTCLoss(), [(6, 2, 4), Const(np.array([[1, 2, 2], [3, 1, 0]])),
                                    Const(np.array([6, 5])), Const(np.array([3, 2]))],
     lambda m, x, *rest: m(x.log_softmax(-1), *rest)),
]


@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_against_torch(case):
    _, ctor, specs, opts = case
    compare_modules(ctor, *specs, **opts)


@pytest.mark.parametrize("case", ACTIVATIONS, ids=[c[0] for c in ACTIVATIONS])
def test_activation_against_torch(case):
    compare_modules(case[1], (3, 4))


@pytest.mark.parametrize("case", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_against_torch(case):
    name, ctor, specs, *call = case
    compare_modules(ctor, *specs, call=call[0] if call else None)


RECURRENT = [
    ("rnn_tanh", lambda n: n.RNN(3, 4), [(5, 2, 3)], {}),
    ("rnn_relu_2l_bi", lambda n: n.RNN(3, 4, 2, nonlinearity="relu", bidirectional=True),
     [(5, 2, 3)], {}),
    ("rnn_h0_batch_first", lambda n: n.RNN(3, 4, 2, batch_first=True), [(2, 5, 3), (2, 2, 4)],
     {}),
    ("rnn_unbatched", lambda n: n.RNN(3, 4), [(5, 3)], {}),
    ("lstm", lambda n: n.LSTM(3, 4), [(5, 2, 3)], {}),
    ("lstm_h0c0", lambda n: n.LSTM(3, 4, 2, bidirectional=True),
     [(4, 2, 3), (4, 2, 4), (4, 2, 4)], {"call": lambda m, x, h, c: m(x, (h, c))}),
    ("lstm_proj", lambda n: n.LSTM(3, 5, proj_size=2, batch_first=True), [(2, 4, 3)], {}),
    ("lstm_nobias_unbatched", lambda n: n.LSTM(3, 4, bias=False), [(4, 3)], {}),
    ("gru", lambda n: n.GRU(3, 4, 2, bidirectional=True, batch_first=True), [(2, 5, 3)], {}),
    ("gru_h0", lambda n: n.GRU(3, 4), [(5, 2, 3), (1, 2, 4)], {}),
    ("rnn_cell", lambda n: n.RNNCell(3, 4), [(2, 3), (2, 4)], {}),
    ("lstm_cell", lambda n: n.LSTMCell(3, 4), [(2, 3), (2, 4), (2, 4)],
     {"call": lambda m, x, h, c: m(x, (h, c))}),
    ("gru_cell", lambda n: n.GRUCell(3, 4), [(2, 3)], {}),
]


@pytest.mark.parametrize("case", RECURRENT, ids=[c[0] for c in RECURRENT])
def test_recurrent_against_torch(case):
    _, ctor, specs, opts = case
    compare_modules(ctor, *specs, **opts)


def _bool_mask(shape, seed):
    m = np.random.default_rng(seed).random(shape) < 0.3
    m[..., 0] = False  # every query keeps at least one key
    return m


KPM = _bool_mask((2, 4), 3)
AMASK = _bool_mask((5, 4), 4)
FMASK = np.random.default_rng(6).standard_normal((5, 4))

ATTENTION = [
    ("mha", lambda n: n.MultiheadAttention(8, 2), [(5, 2, 8), (4, 2, 8), (4, 2, 8)], {}),
    ("mha_batch_first_masks", lambda n: n.MultiheadAttention(8, 4, batch_first=True),
     [(2, 5, 8), (2, 4, 8), (2, 4, 8), Const(KPM), Const(AMASK)],
     {"call": lambda m, q, k, v, kpm, am: m(q, k, v, key_padding_mask=kpm, attn_mask=am)}),
    ("mha_float_mask_per_head", lambda n: n.MultiheadAttention(8, 2),
     [(5, 2, 8), (4, 2, 8), (4, 2, 8), Const(FMASK)],
     {"call": lambda m, q, k, v, am: m(q, k, v, attn_mask=am, average_attn_weights=False)}),
    ("mha_kdim_vdim", lambda n: n.MultiheadAttention(8, 2, kdim=3, vdim=5),
     [(5, 2, 8), (4, 2, 3), (4, 2, 5)], {}),
    ("mha_bias_kv_zero_attn", lambda n: n.MultiheadAttention(8, 2, add_bias_kv=True,
                                                             add_zero_attn=True),
     [(5, 2, 8), (4, 2, 8), (4, 2, 8)], {}),
    ("mha_no_weights_unbatched", lambda n: n.MultiheadAttention(8, 2, bias=False),
     [(5, 8), (4, 8), (4, 8)], {"call": lambda m, q, k, v: m(q, k, v, need_weights=False)}),
    # self-attention (query is key is value): one packed in-projection GEMM
    ("mha_self_batch_first_kpm", lambda n: n.MultiheadAttention(8, 4, batch_first=True),
     [(2, 4, 8), Const(KPM)],
     {"call": lambda m, x, kpm: m(x, x, x, key_padding_mask=kpm, need_weights=False)}),
    ("mha_self_zero_attn", lambda n: n.MultiheadAttention(8, 2, add_zero_attn=True),
     [(4, 2, 8)], {"call": lambda m, x: m(x, x, x)}),
    ("mha_self_unbatched", lambda n: n.MultiheadAttention(8, 2), [(4, 8)],
     {"call": lambda m, x: m(x, x, x)}),
    ("mha_causal", lambda n: n.MultiheadAttention(8, 2), [(4, 2, 8)],
     {"call": lambda m, x: m(x, x, x, attn_mask=(
         torch.nn.Transformer if isinstance(m, torch.nn.Module) else nn.Transformer)
         .generate_square_subsequent_mask(4))}),
]


@pytest.mark.parametrize("case", ATTENTION, ids=[c[0] for c in ATTENTION])
def test_attention_against_torch(case):
    _, ctor, specs, opts = case
    compare_modules(ctor, *specs, **opts)


# ---- training-mode behaviour that cannot match torch's random stream ------------------------
def test_dropout_train_statistics():
    flow.manual_seed(0)
    x = flow.ones(200, 200)
    y = nn.Dropout(0.3).train()(x).numpy()
    assert abs((y == 0).mean() - 0.3) < 0.02
    np.testing.assert_allclose(y[y != 0], 1 / 0.7, rtol=1e-6)
    y2 = nn.Dropout2d(0.5).train()(flow.ones(4, 50, 3, 3)).numpy()
    per_channel = y2.reshape(4, 50, 9)
    assert ((per_channel == 0).all(-1) | (per_channel != 0).all(-1)).all()


def test_rnn_dropout_between_layers_only_in_training():
    m = nn.LSTM(3, 4, 2, dropout=0.5)
    x = flow.randn(5, 2, 3)
    a = m.eval()(x)[0].detach().numpy()
    b = m(x)[0].detach().numpy()
    np.testing.assert_array_equal(a, b)
    flow.manual_seed(1)
    c = m.train()(x)[0].detach().numpy()
    assert not np.allclose(a, c)


def test_batchnorm_num_batches_and_eval_uses_running_stats():
    bn = nn.BatchNorm1d(2)
    x = flow.randn(8, 2)
    bn(x)
    bn(x)
    assert bn.num_batches_tracked.item() == 2
    bn.eval()
    y = bn(x).detach().numpy()
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    np.testing.assert_allclose(y, (x.numpy() - rm) / np.sqrt(rv + 1e-5), rtol=1e-5)
    assert bn.num_batches_tracked.item() == 2


def test_embedding_padding_gets_no_grad_and_from_pretrained():
    emb = nn.Embedding(5, 3, padding_idx=1)
    emb(flow.tensor([[1, 2], [1, 0]])).sum().backward()
    assert (emb.weight.grad.numpy()[1] == 0).all()
    w = flow.randn(4, 2)
    frozen = nn.Embedding.from_pretrained(w)
    assert not frozen.weight.requires_grad
    np.testing.assert_array_equal(frozen(flow.tensor([3])).numpy()[0], w.numpy()[3])
    assert nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad


# ---- bad arguments --------------------------------------------------------------------------
@pytest.mark.parametrize("call, exc, match", [
    (lambda: nn.Conv2d(3, 4, 3, groups=2), ValueError, "in_channels must be divisible"),
    (lambda: nn.Conv2d(4, 3, 3, groups=2), ValueError, "out_channels must be divisible"),
    (lambda: nn.Conv2d(2, 2, 3, padding_mode="mirror"), ValueError, "padding_mode must be"),
    (lambda: nn.Conv2d(2, 2, 3, padding="full"), ValueError, "Invalid padding string"),
    (lambda: nn.Conv2d(2, 2, 3, stride=2, padding="same"), ValueError, "strided"),
    (lambda: nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect"), ValueError, "zeros"),
    (lambda: nn.Dropout(1.5), ValueError, "between 0 and 1, but got 1.5"),
    (lambda: nn.GroupNorm(3, 4), ValueError, "divisible by num_groups"),
    (lambda: nn.LSTM(3, 4, dropout=2), ValueError, r"range \[0, 1\]"),
    (lambda: nn.GRU(3, 0), ValueError, "hidden_size must be"),
    (lambda: nn.LSTM(3, 4, num_layers=0), ValueError, "num_layers must be"),
    (lambda: nn.LSTM(3, 4, proj_size=4), ValueError, "smaller than hidden_size"),
    (lambda: nn.RNN(3, 4, nonlinearity="gelu"), ValueError, "Unknown nonlinearity"),
    (lambda: nn.MultiheadAttention(6, 4), AssertionError, "divisible by num_heads"),
    (lambda: nn.TransformerEncoderLayer(4, 2, activation="swish"), RuntimeError,
     "relu/gelu"),
    (lambda: nn.Hardtanh(1, 0), ValueError, "greater than min_val"),
    (lambda: nn.Embedding(3, 2, padding_idx=5), AssertionError, "within num_embeddings"),
    (lambda: nn.TripletMarginLoss(margin=0), ValueError, "greater than 0"),
    (lambda: nn.MultiMarginLoss(p=3), ValueError, "p == 1 and p == 2"),
    (lambda: nn.LSTM(3, 4)(flow.randn(2, 2, 2, 5, 3)), ValueError, "2D or 3D"),
    (lambda: nn.LSTM(3, 4)(flow.randn(5, 2, 2)), RuntimeError, "input_size. Expected 3, got 2"),
    (lambda: nn.GRU(3, 4)(flow.randn(5, 2, 3), flow.zeros(1, 3, 4)), RuntimeError,
     r"Expected hidden size \(1, 2, 4\), got \[1, 3, 4\]"),
    (lambda: nn.LSTM(3, 4)(flow.randn(5, 2, 3), flow.zeros(1, 2, 4)), IndexError,
     r"tuple \(h_0, c_0\), got a tensor of shape \[1, 2, 4\]"),  # (torch's class)
    (lambda: nn.BatchNorm2d(3)(flow.randn(2, 3)), ValueError, r"expected 4D input \(got 2D"),
    (lambda: nn.MultiheadAttention(8, 2)(flow.randn(3, 2, 8), flow.randn(4, 2, 8),
                                          flow.randn(4, 2, 8),
                                          attn_mask=flow.zeros(3, 3)), RuntimeError,
     "2D attn_mask"),
    (lambda: nn.MultiheadAttention(8, 2)(flow.randn(3, 2, 8), flow.randn(4, 2, 8),
                                          flow.randn(4, 2, 8),
                                          key_padding_mask=flow.zeros(2, 4, dtype=flow.int64)),
     AssertionError, "only bool and floating"),
    (lambda: nn.Softmax2d()(flow.randn(2, 3)), ValueError, "3D or 4D"),
    (lambda: nn.Transformer(8, 2, 1, 1, 16)(flow.randn(3, 2, 8), flow.randn(3, 1, 8)),
     RuntimeError, "batch number"),
])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
