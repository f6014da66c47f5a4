"""The fused recurrent ops (flowgrad/ops/rnn.py) and PackedSequence (nn.utils.rnn), against
torch: values and gradients of RNN/LSTM/GRU layers and cells, padded and packed, and the
ops' first and second derivatives by float64 finite differences."""
import numpy as np
import pytest
import torch

import flowgrad as flow
from flowgrad.ops.rnn import gru_seq, lstm_seq, rnn_seq
from tests.helpers import check, gradcheck


def _pair(mode, *args, **kw):
    """The same layer in torch and flowgrad (float64, flowgrad's weights copied from torch's)."""
    tm = getattr(torch.nn, mode)(*args, **kw).double()
    fm = getattr(flow.nn, mode)(*args, **kw).double()
    fm.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, fm


def _close(a, b, what, tol=1e-10):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=tol, rtol=tol,
                               err_msg=what)


def _compare(tm, fm, run):
    """run(module, framework) -> list of outputs; compares them and every gradient."""
    to, fo = run(tm, torch), run(fm, flow)
    rng = np.random.default_rng(1)
    ws = [rng.standard_normal(tuple(t.shape)) for t in to]
    sum((t * torch.tensor(w)).sum() for t, w in zip(to, ws)).backward()
    sum((f * flow.tensor(w)).sum() for f, w in zip(fo, ws)).backward()
    for i, (t, f) in enumerate(zip(to, fo)):
        _close(f, t, f"output {i}")
    for (name, p), q in zip(fm.named_parameters(), tm.parameters()):
        _close(p.grad, q.grad, f"grad of {name}")


LAYERS = [("LSTM", {}), ("GRU", {}), ("RNN", {}), ("RNN", {"nonlinearity": "relu"}),
          ("LSTM", {"bidirectional": True, "batch_first": True}),
          ("GRU", {"bidirectional": True, "bias": False}),
          ("RNN", {"bidirectional": True})]


@pytest.mark.parametrize("mode,kw", LAYERS, ids=[f"{m}-{k}" for m, k in LAYERS])
def test_layers_match_torch(mode, kw):
    tm, fm = _pair(mode, 3, 4, num_layers=2, **kw)
    x = np.random.default_rng(0).standard_normal((5, 2, 3))
    h0 = np.random.default_rng(2).standard_normal(((1 + kw.get("bidirectional", 0)) * 2, 5
                                                   if kw.get("batch_first") else 2, 4))

    def run(m, fw):
        xs = fw.tensor(x, requires_grad=True)
        hs = fw.tensor(h0, requires_grad=True)
        out, h = m(xs, (hs, hs * 0.5) if mode == "LSTM" else hs)
        return [out, *(h if mode == "LSTM" else (h,))]
    _compare(tm, fm, run)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_packed_sequence_matches_torch(mode):
    tm, fm = _pair(mode, 3, 4, num_layers=2, bidirectional=True)
    x = np.random.default_rng(0).standard_normal((6, 4, 3))
    lengths = [3, 6, 1, 4]  # unsorted: enforce_sorted=False sorts and unsorts

    def run(m, fw):
        rnn = fw.nn.utils.rnn
        packed = rnn.pack_padded_sequence(fw.tensor(x, requires_grad=True), lengths,
                                          enforce_sorted=False)
        out, h = m(packed)
        padded, lens = rnn.pad_packed_sequence(out, batch_first=True, total_length=7)
        assert lens.tolist() == lengths
        return [padded, *(h if mode == "LSTM" else (h,))]
    _compare(tm, fm, run)


@pytest.mark.parametrize("mode", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_match_torch(mode):
    tm, fm = _pair(mode, 3, 4)
    x = np.random.default_rng(0).standard_normal((2, 3))
    h = np.random.default_rng(1).standard_normal((2, 4))

    def run(m, fw):
        hs = fw.tensor(h, requires_grad=True)
        out = m(fw.tensor(x, requires_grad=True), (hs, hs * 2) if mode == "LSTMCell" else hs)
        return list(out) if mode == "LSTMCell" else [out]
    _compare(tm, fm, run)


def test_sequence_utils_match_torch():
    seqs = [(3, 2), (5, 2), (1, 2)]
    check(lambda m, a, b, c: m.nn.utils.rnn.pad_sequence([a, b, c], batch_first=True,
                                                         padding_value=-1.0), *seqs)
    check(lambda m, a, b, c: m.nn.utils.rnn.pack_sequence([a, b, c], False).data, *seqs)
    check(lambda m, a, b, c: m.nn.utils.rnn.unpack_sequence(
        m.nn.utils.rnn.pack_sequence([a, b, c], False)), *seqs)
    check(lambda m, a: m.nn.utils.rnn.unpad_sequence(
        a, m.tensor([4, 2]), batch_first=True), (2, 4, 3))
    p = flow.nn.utils.rnn.pack_sequence([flow.ones(3), flow.ones(2)])
    assert p.batch_sizes.tolist() == [2, 2, 1] and p.sorted_indices is None


def test_pack_errors_match_torch():
    pack = flow.nn.utils.rnn.pack_padded_sequence
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        pack(flow.zeros(3, 2), [1, 3])
    with pytest.raises(RuntimeError, match="greater than 0"):
        pack(flow.zeros(3, 2), [3, 0])


# op level, float64 finite differences to second order: padded, packed (shrinking batch),
# reversed; the double backward reruns the loops in flowgrad ops
FD = [
    ("lstm", lambda m, gx, h, c, w: lstm_seq(gx, h, c, w), (6, 8), (2, 2), (2, 2), (8, 2)),
    ("lstm_packed_reverse",
     lambda m, gx, h, c, w: lstm_seq(gx, h, c, w, (3, 2, 1), True), (6, 8), (3, 2), (3, 2),
     (8, 2)),
    ("gru_packed", lambda m, gx, h, w, b: gru_seq(gx, h, w, b, (2, 2, 1)), (5, 6), (2, 2),
     (6, 2), (6,)),
    ("gru_reverse_nobias", lambda m, gx, h, w: gru_seq(gx, h, w, reverse=True), (4, 6), (2, 2),
     (6, 2)),
    ("rnn_tanh_packed", lambda m, gx, h, w: rnn_seq(gx, h, w, (2, 1)), (3, 2), (2, 2), (2, 2)),
    ("rnn_relu_reverse", lambda m, gx, h, w: rnn_seq(gx, h, w, None, True, "relu"), (4, 3),
     (2, 3), (3, 3)),
]


@pytest.mark.parametrize("case", FD, ids=[c[0] for c in FD])
def test_fused_ops_finite_differences(case):
    _, fn, *specs = case
    gradcheck(fn, *specs)


def test_lstm_double_backward_matches_torch():
    """A gradient penalty through an LSTM: torch's CPU LSTM double-backwards, so must we."""
    tm, fm = _pair("LSTM", 3, 4)
    x = np.random.default_rng(0).standard_normal((4, 2, 3))

    def penalty(m, fw):
        xs = fw.tensor(x, requires_grad=True)
        out, _ = m(xs)
        (gx,) = fw.autograd.grad(out.pow(2).sum(), xs, create_graph=True)
        return (gx * gx).sum()
    p_t, p_f = penalty(tm, torch), penalty(fm, flow)
    p_t.backward()
    p_f.backward()
    _close(p_f, p_t, "penalty")
    for (name, p), q in zip(fm.named_parameters(), tm.parameters()):
        _close(p.grad, q.grad, f"second-order grad of {name}", 1e-8)


def test_packed_input_with_bad_width_raises():
    lstm = flow.nn.LSTM(3, 4)
    packed = flow.nn.utils.rnn.pack_sequence([flow.ones(2, 5)])
    with pytest.raises(RuntimeError, match=r"packed data must be \(rows, 3\)"):
        lstm(packed)
