"""Model parity with torch: the same model built in both frameworks, torch's weights copied
by state_dict -> numpy -> load_state_dict, then the forward output, the loss, every
parameter gradient, input gradients and buffers compared."""
import numpy as np
import pytest
import torch
from test_nn_layers import Const, compare_modules

import flowgrad as flow

LABELS = np.array([1, 0, 3, 2], dtype=np.int64)


def mlp(n):
    return n.Sequential(n.Linear(6, 16), n.ReLU(), n.Linear(16, 16), n.GELU(),
                        n.Linear(16, 4))


def cnn(n, dropout=0.5):
    return n.Sequential(
        n.Conv2d(2, 4, 3, padding=1), n.BatchNorm2d(4), n.ReLU(), n.MaxPool2d(2),
        n.Conv2d(4, 6, 3), n.BatchNorm2d(6), n.ReLU(), n.Dropout(dropout), n.Flatten(),
        n.Linear(6 * 2 * 2, 4))


def _ce(m, x, y):
    lib = torch if isinstance(m, torch.nn.Module) else flow
    out = m(x)
    return out, lib.nn.functional.cross_entropy(out, y)


def seq_model(n, kind):
    """A recurrent encoder and a linear head on the last time step's features."""
    class Model(n.Module):
        def __init__(self):
            super().__init__()
            if kind == "lstm":
                self.rnn = n.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True)
            else:
                self.rnn = n.GRU(3, 5, num_layers=2, batch_first=False)
            self.head = n.Linear(10 if kind == "lstm" else 5, 4)

        def forward(self, x):
            out, state = self.rnn(x)
            last = out[:, -1] if kind == "lstm" else out[-1]
            return self.head(last), state
    return Model()


def _seq_loss(m, x, y):
    lib = torch if isinstance(m, torch.nn.Module) else flow
    logits, state = m(x)
    return logits, state, lib.nn.functional.cross_entropy(logits, y)


PARITY = [
    ("mlp", mlp, [(4, 6), Const(LABELS)], {"call": _ce}),
    ("mlp_float64", mlp, [(4, 6), Const(LABELS)], {"call": _ce, "dtype": np.float64,
                                                   "atol": 1e-10, "rtol": 1e-8}),
    ("cnn_eval", cnn, [(4, 2, 8, 8), Const(LABELS)], {"call": _ce}),
    ("cnn_train_bn", lambda n: cnn(n, 0.0), [(4, 2, 8, 8), Const(LABELS)],
     {"call": _ce, "train": True, "steps": 2}),
    ("lstm_2l_bi_batch_first", lambda n: seq_model(n, "lstm"), [(4, 6, 3), Const(LABELS)],
     {"call": _seq_loss}),
    ("gru_2l", lambda n: seq_model(n, "gru"), [(6, 4, 3), Const(LABELS)],
     {"call": _seq_loss}),
    ("mha_self", lambda n: n.MultiheadAttention(8, 2), [(5, 3, 8)],
     {"call": lambda m, x: m(x, x, x)}),
    ("mha_cross_batch_first", lambda n: n.MultiheadAttention(8, 4, batch_first=True),
     [(3, 5, 8), (3, 6, 8)], {"call": lambda m, q, kv: m(q, kv, kv)}),
    ("encoder_post_norm", lambda n: n.TransformerEncoderLayer(8, 2, 16, dropout=0.1),
     [(5, 3, 8)], {}),
    ("encoder_pre_norm_gelu", lambda n: n.TransformerEncoderLayer(
        8, 2, 16, activation="gelu", norm_first=True, batch_first=True), [(3, 5, 8)], {}),
    ("encoder_masks", lambda n: n.TransformerEncoderLayer(8, 2, 16, batch_first=True),
     [(2, 4, 8), Const(np.array([[False, False, True, True], [False] * 4]))],
     {"call": lambda m, x, kpm: m(x, src_key_padding_mask=kpm, is_causal=False)}),
    ("decoder_post_norm", lambda n: n.TransformerDecoderLayer(8, 2, 16),
     [(4, 3, 8), (5, 3, 8)], {}),
    ("decoder_pre_norm_causal", lambda n: n.TransformerDecoderLayer(
        8, 2, 16, norm_first=True, batch_first=True), [(3, 4, 8), (3, 5, 8)],
     {"call": lambda m, t, mem: m(t, mem, tgt_mask=_causal(m, 4))}),
    ("encoder_stack", lambda n: n.TransformerEncoder(
        n.TransformerEncoderLayer(8, 2, 16), 2, norm=n.LayerNorm(8)), [(5, 2, 8)], {}),
    ("transformer", lambda n: n.Transformer(8, 2, 1, 1, 16), [(5, 2, 8), (4, 2, 8)],
     {"call": lambda m, s, t: m(s, t, tgt_mask=_causal(m, 4))}),
]


def _causal(m, size):
    ns = torch.nn if isinstance(m, torch.nn.Module) else flow.nn
    return ns.Transformer.generate_square_subsequent_mask(size)


@pytest.mark.parametrize("case", PARITY, ids=[c[0] for c in PARITY])
def test_model_parity(case):
    _, ctor, specs, opts = case
    compare_modules(ctor, *specs, **{"atol": 2e-5, "rtol": 2e-4, **opts})


def test_parameter_names_map_one_to_one():
    for ctor in (mlp, cnn, lambda n: seq_model(n, "lstm"), lambda n: seq_model(n, "gru"),
                 lambda n: n.Transformer(8, 2, 1, 1, 16)):
        ours = {k: tuple(v.shape) for k, v in ctor(flow.nn).state_dict().items()}
        theirs = {k: tuple(v.shape) for k, v in ctor(torch.nn).state_dict().items()}
        assert ours == theirs
