"""Full training parity with torch: the same model built in flowgrad and torch (parameter
names equal), torch's initial weights copied (state_dict -> numpy -> load_state_dict), then
20 optimiser steps on the same fixed batches in both frameworks. Every loss, every
scheduler lr, every clip_grad_norm_ norm, the final parameters and buffers are compared.
One line per case."""
import numpy as np
import pytest
import torch

import flowgrad as flow

STEPS = 20
N_CLASSES = 4


# ---- models: `n` is torch.nn or flowgrad.nn -------------------------------------------------

def mlp(n):
    return n.Sequential(n.Linear(6, 16), n.ReLU(), n.Linear(16, 16), n.Tanh(),
                        n.Linear(16, N_CLASSES))


def cnn(n):
    # no conv bias before a training-mode BatchNorm: its true gradient is exactly zero, so
    # Adam would step it by lr * (rounding noise / |rounding noise|), noise that no two
    # implementations share
    return n.Sequential(
        n.Conv2d(2, 4, 3, padding=1, bias=False), n.BatchNorm2d(4), n.ReLU(), n.MaxPool2d(2),
        n.Conv2d(4, 6, 3, bias=False), n.BatchNorm2d(6), n.ReLU(), n.Dropout(0.0), n.Flatten(),
        n.Linear(6 * 2 * 2, N_CLASSES))


def lstm(n, bidirectional):
    class Model(n.Module):
        def __init__(self):
            super().__init__()
            self.rnn = n.LSTM(3, 5, num_layers=2, batch_first=True, bidirectional=bidirectional)
            self.head = n.Linear(10 if bidirectional else 5, 1)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out)                   # per-step regression
    return Model()


def transformer(n, bias=True):
    class Model(n.Module):
        def __init__(self):
            super().__init__()
            self.layer = n.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                                   bias=bias)
            self.head = n.Linear(8, N_CLASSES)

        def forward(self, x):
            lib = torch if n is torch.nn else flow
            mask = lib.nn.Transformer.generate_square_subsequent_mask(x.shape[1])
            return self.head(self.layer(x, src_mask=mask, is_causal=True))
    return Model()


# ---- data: fixed batches, the same NumPy arrays feed both frameworks -------------------------

def _batches(x_shape, target, seed=0, n_batches=4):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        x = rng.standard_normal(x_shape).astype(np.float32)
        if target == "class":
            y = rng.integers(0, N_CLASSES, x_shape[0]).astype(np.int64)
        elif target == "seq_class":
            y = rng.integers(0, N_CLASSES, x_shape[:2]).astype(np.int64)
        else:
            y = rng.standard_normal(x_shape[:2] + (1,)).astype(np.float32)
        out.append((x, y))
    return out


def _loss(lib, out, y):
    F = lib.nn.functional
    if y.dtype.kind == "f":
        return F.mse_loss(out, lib.tensor(y))
    return F.cross_entropy(out.reshape(-1, N_CLASSES), lib.tensor(y).reshape(-1))


MLP_DATA = _batches((8, 6), "class")
CNN_DATA = _batches((4, 2, 8, 8), "class")
SEQ_DATA = _batches((3, 5, 3), "regress")
TOK_DATA = _batches((3, 6, 8), "seq_class")


# ---- one training run per framework ---------------------------------------------------------

def train(lib, model, data, opt_fn, sched_fn=None, clip=None):
    """STEPS steps cycling over `data`; returns per-step losses, lrs (after the scheduler
    step), clipping norms, the eval-mode output on a held-out batch and the final state dict,
    all as NumPy."""
    opt = opt_fn(lib.optim, model.parameters())
    sched = sched_fn(lib.optim.lr_scheduler, opt) if sched_fn else None
    losses, lrs, norms = [], [], []
    model.train()
    for step in range(STEPS):
        x, y = data[step % len(data)]
        opt.zero_grad()
        loss = _loss(lib, model(lib.tensor(x)), y)
        loss.backward()
        if clip is not None:
            norms.append(float(lib.nn.utils.clip_grad_norm_(model.parameters(), clip)))
        opt.step()
        if sched is not None:
            sched.step()
            lrs.append(sched.get_last_lr()[0])
        losses.append(loss.item())
    model.eval()
    with lib.no_grad():
        held_out = model(lib.tensor(data[0][0] * 0.5 + 0.1)).numpy()
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return dict(loss=np.array(losses), lr=np.array(lrs), norm=np.array(norms), out=held_out,
                state=state)


def run_both(ctor, data, opt_fn, sched_fn=None, clip=None, seed=0):
    torch.manual_seed(seed)
    tm = ctor(torch.nn)
    fm = ctor(flow.nn)
    assert list(fm.state_dict()) == list(tm.state_dict())
    fm.load_state_dict({k: v.detach().numpy().copy() for k, v in tm.state_dict().items()})
    return (train(flow, fm, data, opt_fn, sched_fn, clip),
            train(torch, tm, data, opt_fn, sched_fn, clip))


# ---- the table ------------------------------------------------------------------------------

SGD_NESTEROV = lambda o, p: o.SGD(p, lr=0.1, momentum=0.9, nesterov=True,  # noqa: E731
                                  weight_decay=1e-3)
ADAM = lambda o, p: o.Adam(p, lr=1e-2)  # noqa: E731
ADAMW = lambda o, p: o.AdamW(p, lr=1e-2, weight_decay=0.1)  # noqa: E731

# Attention's key bias shifts every logit of a query by the same q.b_k, which softmax cancels:
# its true gradient is exactly zero and (Adam)W moves it by rounding noise alone. It has no
# effect on any output (the held-out outputs below are compared), so its final value is only
# checked to be the same size; the test asserts torch's gradient for it really is ~0.
KEY_BIAS = ("layer.self_attn.in_proj_bias", slice(8, 16))

CASES = [  # name, model, data, optimiser, scheduler, clip max_norm, unidentifiable slice
    ("mlp_sgd_nesterov_wd", mlp, MLP_DATA, SGD_NESTEROV, None, None, None),
    ("mlp_adam", mlp, MLP_DATA, ADAM, None, None, None),
    ("mlp_adamw", mlp, MLP_DATA, ADAMW, None, None, None),
    ("cnn_bn_train_adam", cnn, CNN_DATA, ADAM, None, None, None),
    ("lstm_2l_bi_adam", lambda n: lstm(n, True), SEQ_DATA, ADAM, None, None, None),
    ("lstm_2l_sgd", lambda n: lstm(n, False), SEQ_DATA,
     lambda o, p: o.SGD(p, lr=0.05, momentum=0.9), None, None, None),
    ("transformer_causal_adamw", transformer, TOK_DATA, ADAMW, None, None, KEY_BIAS),
    ("transformer_nobias_causal_adamw", lambda n: transformer(n, bias=False), TOK_DATA, ADAMW,
     None, None, None),
    ("mlp_sgd_steplr_clip", mlp, MLP_DATA, SGD_NESTEROV,
     lambda s, o: s.StepLR(o, step_size=5, gamma=0.5), 0.5, None),
    ("cnn_adam_cosine_clip", cnn, CNN_DATA, ADAM,
     lambda s, o: s.CosineAnnealingLR(o, T_max=STEPS, eta_min=1e-4), 1.0, None),
    ("transformer_adamw_onecycle_clip", transformer, TOK_DATA, ADAMW,
     lambda s, o: s.OneCycleLR(o, max_lr=0.02, total_steps=STEPS), 0.5, KEY_BIAS),
]


def _key_bias_grad(ctor, data, part):
    torch.manual_seed(0)
    m = ctor(torch.nn)
    _loss(torch, m(torch.tensor(data[0][0])), data[0][1]).backward()
    name, idx = part
    return dict(m.named_parameters())[name].grad[idx]


@pytest.mark.parametrize("name,ctor,data,opt_fn,sched_fn,clip,free", CASES,
                         ids=[c[0] for c in CASES])
def test_training_matches_torch(name, ctor, data, opt_fn, sched_fn, clip, free):
    ours, theirs = run_both(ctor, data, opt_fn, sched_fn, clip)
    assert len(ours["loss"]) == STEPS and np.all(np.isfinite(ours["loss"]))
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-4,
                               err_msg=f"{name}: losses")
    # training really moved the model, so 20 equal losses would not pass for parity
    assert ours["loss"][-len(data):].mean() < ours["loss"][:len(data)].mean()
    if sched_fn is not None:
        assert len(ours["lr"]) == STEPS
        np.testing.assert_allclose(ours["lr"], theirs["lr"], rtol=1e-6, atol=1e-12,
                                   err_msg=f"{name}: lrs")
    if clip is not None:
        assert len(ours["norm"]) == STEPS
        np.testing.assert_allclose(ours["norm"], theirs["norm"], rtol=1e-4,
                                   err_msg=f"{name}: norms")
    np.testing.assert_allclose(ours["out"], theirs["out"], rtol=1e-4, atol=1e-5,
                               err_msg=f"{name}: held-out outputs")
    a, b = ours["state"], theirs["state"]
    assert list(a) == list(b)
    if free is not None:
        assert float(_key_bias_grad(ctor, data, free).abs().max()) < 1e-6
        k, idx = free
        assert np.abs(a[k][idx]).max() < 2 * STEPS * 0.02 and np.all(np.isfinite(a[k][idx]))
        a[k][idx] = b[k][idx] = 0.0
    for k in b:
        assert a[k].dtype == b[k].dtype, k
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-5,
                                   err_msg=f"{name}: final {k}")
