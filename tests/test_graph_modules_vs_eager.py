"""nn modules in a training step compiled by nn.Graph against the same step run eagerly, from
identical copies: four calls with a different batch on each (zeros, ties, padding indices,
masked rows, rows over max_norm on later calls), under training configurations (momentum,
Adam, amp, gradient accumulation, param-group clipping, lr schedulers). Losses, parameters
and buffers must agree after every call. A second table: inputs a compiled plan cannot take
must raise, as eager does, never wrap around into a number."""
from __future__ import annotations

import contextlib
import copy

import numpy as np
import pytest

import flowgrad as flow
import flowgrad.nn as nn
import flowgrad.nn.functional as F

pytestmark = pytest.mark.usefixtures("keep_global_random_streams")

CALLS = 4


def _t(a):
    return flow.tensor(np.asarray(a))


def _x(rng, i, *shape):
    """A batch whose later calls hit edge cases: all zeros, ties, one large column."""
    x = rng.standard_normal(shape).astype(np.float32)
    if i == 1:
        x[...] = 0
    elif i == 2:
        x = np.round(x)
    elif i == 3:
        x[..., :1] = 5.0
    return (_t(x),)


def _idx(rng, i, pad=0):
    ix = rng.integers(0, 7, (4, 4))
    if i == 1:
        ix[:] = pad
    elif i == 2:
        ix[:] = ix.flat[0]
    return (_t(ix),)


def _sum_sin(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return sum((o.float() * (k + 1.3)).sin().sum() for k, o in enumerate(outs)
               if isinstance(o, flow.Tensor) and o.dtype.is_floating_point)


def _plain(make, batch):
    return make, batch, lambda m, *b: _sum_sin(m(*b))


def _emb_max_norm():
    emb = nn.Embedding(7, 3, max_norm=1.0)
    with flow.no_grad():
        emb.weight.mul_(3)  # every row over max_norm: renormalised in place when looked up
    return nn.Sequential(emb, nn.Linear(3, 2))


def _ctc_concatenated(rng, i):
    lengths = [[3, 2], [1, 4], [2, 3], [4, 1]][i]
    return (_t(rng.standard_normal((6, 2, 3)).astype(np.float32)),
            _t(rng.integers(1, 4, (sum(lengths),))), _t(np.array([6, 5], np.int32)),
            _t(np.array(lengths, np.int32)))


def _ctc_loss(m, x, targets, in_len, tg_len):
    return nn.CTCLoss(reduction="sum", zero_infinity=True)(
        F.log_softmax(m(x), 2), targets, in_len, tg_len)


def _bag_offsets(rng, i):
    offsets = [[0, 3, 3, 7], [0, 2, 5, 9], [0, 0, 0, 1], [0, 9, 9, 10]][i]
    ix = rng.integers(0, 7, (10,))
    ix[:3] = 1
    return _t(ix), _t(np.array(offsets)), _t(rng.standard_normal(10).astype(np.float32))


def _mha_loss(m, q, kv, key_padding_mask):
    out, w = m(q, kv, kv, key_padding_mask=key_padding_mask, average_attn_weights=False)
    return _sum_sin(out) + _sum_sin(w)


def _mha_batch(rng, i):
    mask = np.zeros((2, 5), bool)
    mask[:, 3 + i % 2:] = True
    if i == 3:
        mask[0] = True  # one row masked out entirely: nan in both modes
    return (_t(rng.standard_normal((2, 3, 4)).astype(np.float32)),
            _t(rng.standard_normal((2, 5, 4)).astype(np.float32)), _t(mask))


def _ce_batch(rng, i):
    y = rng.integers(0, 4, 6)
    if i == 2:
        y[:3] = 1  # ignore_index
    return _t(rng.standard_normal((6, 4)).astype(np.float32)), _t(y)


def _shared_linear():
    lin = nn.Linear(3, 3)
    return nn.Sequential(lin, nn.Tanh(), lin, nn.BatchNorm1d(3), lin)


CASES = {
    "shared_linear_bn": _plain(_shared_linear, lambda r, i: _x(r, (i + 2) % 4, 4, 3)),
    "lstmcell": _plain(lambda: nn.LSTMCell(3, 4), lambda r, i: _x(r, i, 2, 3)),
    "rnn_bidirectional": _plain(lambda: nn.RNN(3, 4, 2, batch_first=True, bidirectional=True),
                                lambda r, i: _x(r, i, 2, 5, 3)),
    "gru_dropout": _plain(lambda: nn.GRU(3, 4, 2, dropout=0.5), lambda r, i: _x(r, i, 5, 2, 3)),
    "conv_bn": _plain(lambda: nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect",
                                                      groups=1), nn.BatchNorm2d(3)),
                      lambda r, i: _x(r, i, 4, 2, 4, 4)),
    "maxpool_indices": (lambda: nn.Sequential(nn.Conv2d(2, 2, 1), nn.MaxPool2d(
        3, 2, padding=1, ceil_mode=True, return_indices=True)), lambda r, i: _x(r, i, 2, 2, 6, 6),
        lambda m, x: _sum_sin(m(x)[0])),
    "instance_norm_stats": _plain(lambda: nn.Sequential(nn.Conv1d(2, 3, 1), nn.InstanceNorm1d(
        3, affine=True, track_running_stats=True)), lambda r, i: _x(r, i, 2, 2, 5)),
    "embedding_max_norm": _plain(_emb_max_norm, _idx),
    "embedding_freq_padding": _plain(lambda: nn.Embedding(7, 3, padding_idx=0,
                                                          scale_grad_by_freq=True), _idx),
    "embedding_bag_offsets": (lambda: nn.EmbeddingBag(7, 3, mode="sum", padding_idx=1),
                              _bag_offsets, lambda m, ix, off, w: _sum_sin(m(ix, off, w))),
    "embedding_bag_max_offsets": (lambda: nn.EmbeddingBag(7, 3, mode="max"), _bag_offsets,
                                  lambda m, ix, off, w: _sum_sin(m(ix, off))),
    "mha_key_padding": (lambda: nn.MultiheadAttention(4, 2, batch_first=True), _mha_batch,
                        _mha_loss),
    "ce_smoothing_ignore": (lambda: nn.Linear(4, 4), _ce_batch, lambda m, x, y: F.cross_entropy(
        m(x), y, weight=_t(np.array([1, 2, 0.5, 3], np.float32)), ignore_index=1,
        label_smoothing=0.2)),
    "ctc_concatenated": (lambda: nn.Linear(3, 4), _ctc_concatenated, _ctc_loss),
    "prelu_upsample": _plain(lambda: nn.Sequential(nn.Conv2d(2, 2, 1), nn.PReLU(2), nn.Upsample(
        scale_factor=1.5, mode="bicubic", align_corners=True)), lambda r, i: _x(r, i, 2, 2, 4, 4)),
}

CONFIGS = {
    "sgd": {},
    "clip": {"clip": 0.05},
    "clip_inf_adam": {"opt": "adam", "clip": 0.05, "norm_type": float("inf")},
    "amp": {"amp": True},
    "accumulate": {"accumulate": 2},
    "adam_accumulate_clip_sched": {"opt": "adam", "accumulate": 2, "clip": 0.1, "sched": True},
}

ROWS = [
    # an RNN's two biases get equal gradients, one array of the plan: clipping scaled it twice
    ("lstmcell", "clip"), ("rnn_bidirectional", "clip"), ("gru_dropout", "clip_inf_adam"),
    ("lstmcell", "adam_accumulate_clip_sched"),
    # a weight used three times under amp: eager casts it to half once (autocast's weight
    # cache) and sums its gradients in half; the trace had the cache off
    ("shared_linear_bn", "amp"), ("shared_linear_bn", "sgd"),
    # concatenated targets and int32 lengths: the plan kept the first call's labels and split
    ("ctc_concatenated", "sgd"), ("ctc_concatenated", "clip_inf_adam"),
    # offsets that change the longest bag: the plan failed to reshape
    ("embedding_bag_offsets", "sgd"), ("embedding_bag_max_offsets", "clip"),
    ("conv_bn", "accumulate"), ("conv_bn", "amp"), ("maxpool_indices", "clip_inf_adam"),
    ("instance_norm_stats", "adam_accumulate_clip_sched"), ("embedding_max_norm", "accumulate"),
    ("embedding_max_norm", "amp"), ("embedding_freq_padding", "clip"), ("mha_key_padding", "sgd"),
    ("ce_smoothing_ignore", "adam_accumulate_clip_sched"), ("prelu_upsample", "amp"),
]


def _optimizer(params, config):
    if config.get("opt") == "adam":
        opt = flow.optim.Adam(params, lr=0.01)
    else:
        opt = flow.optim.SGD(params, lr=0.05, momentum=0.9)
    if "clip" in config:
        for group in opt.param_groups:
            group["clip_grad_max_norm"] = config["clip"]
            group["clip_grad_norm_type"] = config.get("norm_type", 2.0)
    sched = flow.optim.lr_scheduler.StepLR(opt, 1, 0.7) if config.get("sched") else None
    return opt, sched


def _state(model):
    return [(k, v.detach().float().numpy()) for k, v in model.named_parameters()] + \
        [(k, v.detach().float().numpy()) for k, v in model.named_buffers()]


def _assert_close(got, want, tol, what):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.nan_to_num(
        np.abs(want)).max(initial=0)), equal_nan=True, err_msg=what)


def _eager_step(model, opt, sched, loss_fn, batch, config):
    """The eager counterpart: `accumulate` equal parts of the batch, their mean gradient."""
    k = config.get("accumulate", 1)
    parts = [batch] if k == 1 else [
        tuple(t[j * (t.shape[0] // k):(j + 1) * (t.shape[0] // k)] for t in batch)
        for j in range(k)]
    losses = []
    for part in parts:
        with flow.autocast("cpu", dtype=flow.float16) if config.get("amp") else \
                contextlib.nullcontext():
            loss = loss_fn(model, *part)
        (loss / k).backward()
        losses.append(loss.detach().float().numpy())
    if "clip" in config:
        nn.utils.clip_grad_norm_(model.parameters(), config["clip"],
                                 config.get("norm_type", 2.0))
    opt.step()
    opt.zero_grad()
    if sched is not None:
        sched.step()
    return np.array(losses) if k > 1 else losses[0]


def _train_both(case, config):
    make, batch_fn, loss_fn = CASES[case]
    config = CONFIGS[config]
    flow.manual_seed(0)
    eager = make()
    compiled = copy.deepcopy(eager)
    opt_e, sched_e = _optimizer(list(eager.parameters()), config)
    opt_g, sched_g = _optimizer(list(compiled.parameters()), config)

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = compiled
            self.add_optimizer(opt_g, lr_sch=sched_g)
            self.config.enable_amp(config.get("amp", False))
            self.config.set_gradient_accumulation_steps(config.get("accumulate", 1))

        def build(self, *batch):
            loss = loss_fn(self.model, *batch)
            loss.backward()
            return loss

    graph = Step()
    tol = 2e-2 if config.get("amp") else 1e-5
    rng = np.random.default_rng(5)
    for call in range(CALLS):
        batch = batch_fn(rng, call)
        flow.manual_seed(100 + call)  # dropout draws the same masks in both modes
        want = _eager_step(eager, opt_e, sched_e, loss_fn, batch, config)
        flow.manual_seed(100 + call)
        got = graph(*batch).detach().float().numpy()
        _assert_close(got, want, tol, f"call {call}: loss")
        for (name, a), (_, b) in zip(_state(compiled), _state(eager)):
            _assert_close(a, b, tol, f"call {call}: {name}")


@pytest.mark.parametrize("case, config", ROWS)
def test_compiled_step_trains_as_eager(case, config):
    _train_both(case, config)


def _ctc(x, targets):
    return F.ctc_loss(x.log_softmax(2), targets, [4, 4], [2, 2])


BAD_INPUTS = {
    # (step, a first input, a later input eager refuses): the plan must refuse it too; a
    # negative index or label wrapped around to the last row or class
    "embedding_negative_index": (lambda i: F.embedding(i, flow.ones(5, 2)), [[0, 1]], [[0, -1]],
                                 "index out of range"),
    "cross_entropy_negative_target": (
        lambda y: F.cross_entropy(flow.ones(3, 4), y), [0, 1, 2], [0, 1, -1], "out of bounds"),
    "nll_loss_negative_target": (lambda y: F.nll_loss(flow.ones(3, 4), y, ignore_index=1),
                                 [0, 1, 2], [-1, 1, 2], "out of bounds"),
    "ctc_negative_label": (lambda y: _ctc(flow.ones(4, 2, 3), y), [[1, 2], [2, 1]],
                           [[1, 2], [-1, 1]], "target labels"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_compiled_step_refuses_bad_values_as_eager(name):
    step, first, later, message = BAD_INPUTS[name]
    with pytest.raises((IndexError, RuntimeError), match=message):
        step(_t(later))
    graph = flow.nn.Graph.trace(step)
    graph(_t(first))
    with pytest.raises((IndexError, RuntimeError), match=message):
        graph(_t(later))
