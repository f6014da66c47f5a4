"""nn.Graph (lazy mode) on the example models against eager flowgrad: the LSTM forecaster of
examples/lstm_sequence.py, the char Transformer of examples/char_transformer.py (small), an
Embedding + GRU/RNN classifier and a LayerNorm + GELU + MultiheadAttention block. Each trains
5 steps with a different batch on every call (Adam, and Adam + a scheduler); the losses and
final parameters must match eager, and an eval graph must return eager's logits."""
import importlib.util
import os

import numpy as np
import pytest
from graph_helpers import steps_match_eager, train_graph

import flowgrad as flow
import flowgrad.nn as nn
import flowgrad.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 5


def _load_example(name):
    path = os.path.join(ROOT, "examples", name + ".py")
    spec = importlib.util.spec_from_file_location(f"_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VOCAB, CONTEXT = 11, 8


class EmbedRNN(nn.Module):
    """nn.Embedding + a 2-layer GRU (or tanh RNN), classify from the last hidden state."""

    def __init__(self, cell="gru"):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 6)
        rnn = nn.GRU if cell == "gru" else nn.RNN
        self.rnn = rnn(6, 10, num_layers=2, batch_first=True)
        self.head = nn.Linear(10, 3)

    def forward(self, idx):
        out, h = self.rnn(self.emb(idx))
        return self.head(out[:, -1] + h[-1])


class AttentionBlock(nn.Module):
    """Pre-norm self-attention + GELU MLP, mean-pooled, then a linear head."""

    def __init__(self, d=8, heads=2):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        h = self.norm1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        x = x + self.mlp(self.norm2(x))
        return self.head(x.mean(1))


def _lstm_model():
    return _load_example("lstm_sequence").Forecaster(hidden=8)


def _transformer_model():
    mod = _load_example("char_transformer")
    return mod.CharTransformer(VOCAB, d_model=8, n_head=2, n_layers=2, context=CONTEXT)


def _waves(rng):
    x = rng.standard_normal((4, 6, 1)).astype(np.float32)
    return flow.tensor(x), flow.tensor(rng.standard_normal((4, 6, 1)).astype(np.float32))


def _chars(rng):
    w = rng.integers(0, VOCAB, (3, CONTEXT + 1))
    return flow.tensor(w[:, :-1]), flow.tensor(w[:, 1:])


def _tokens(rng):
    return flow.tensor(rng.integers(0, VOCAB, (4, 5))), flow.tensor(rng.integers(0, 3, 4))


def _vectors(rng):
    x = rng.standard_normal((4, 5, 8)).astype(np.float32)
    return flow.tensor(x), flow.tensor(rng.integers(0, 3, 4))


def _mse(out, y):
    return F.mse_loss(out, y)


def _token_ce(logits, y):
    return F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))


def _ce(logits, y):
    return F.cross_entropy(logits, y)


# name -> (model factory, batch maker, loss)
MODELS = {
    "lstm_forecaster": (_lstm_model, _waves, _mse),
    "char_transformer": (_transformer_model, _chars, _token_ce),
    "embedding_gru": (lambda: EmbedRNN("gru"), _tokens, _ce),
    "embedding_rnn": (lambda: EmbedRNN("rnn"), _tokens, _ce),
    "layernorm_gelu_mha": (AttentionBlock, _vectors, _ce),
}

def _build(name, seed=0):
    flow.manual_seed(seed)
    return MODELS[name][0]()


def _optimizer(params, scheduled):
    opt = flow.optim.Adam(params, lr=1e-2)
    sch = flow.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5) if scheduled else None
    return opt, sch


@pytest.mark.parametrize("scheduled", [False, True], ids=["adam", "adam_steplr"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_graph_matches_eager(name, scheduled):
    _, make_batch, loss_fn = MODELS[name]
    rng = np.random.default_rng(1)
    batches = [make_batch(rng) for _ in range(STEPS)]
    eager, graphed = _build(name), _build(name)
    opt_e, sch_e = _optimizer(eager.parameters(), scheduled)
    opt_g, sch_g = _optimizer(graphed.parameters(), scheduled)

    def loss_of(model, x, y):
        return loss_fn(model(x), y)

    train = train_graph(graphed, opt_g, lr_sch=sch_g, loss_fn=loss_of)
    steps_match_eager(train, eager, opt_e, sch_e, batches, loss_of)
    for (pname, pe), pg in zip(eager.named_parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.detach().numpy(), pe.detach().numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=pname)
    if scheduled:
        assert opt_g.param_groups[0]["lr"] == opt_e.param_groups[0]["lr"]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_eval_graph_returns_eager_logits(name):
    _, make_batch, _ = MODELS[name]
    model = _build(name)
    model.eval()
    graph = nn.Graph.trace(model)
    rng = np.random.default_rng(2)
    for _ in range(3):
        x, _ = make_batch(rng)
        with flow.no_grad():
            want = model(x)
        np.testing.assert_allclose(graph(x).numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert graph.is_compiled
