"""Recurrent layers, attention/Transformer and ordering statistics against torch, in-process:
rows found by probing, each a difference the fixed code no longer has (values, gradients of
inputs and parameters, raise/no-raise). Modules get the same weights on both sides, written
from NumPy in parameter-name order."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow


def _setw(m, fw, seed=0):
    rng = np.random.default_rng(seed)
    for _, p in sorted(m.named_parameters(), key=lambda t: t[0]):
        with fw.no_grad():
            p.copy_(fw.tensor(rng.standard_normal(tuple(p.shape)) * 0.4, dtype=p.dtype))


def _pair(build, seed=0):
    """build(fw) in torch and flowgrad, with the same weights."""
    tm, fm = build(torch), build(flow)
    _setw(tm, torch, seed)
    _setw(fm, flow, seed)
    return tm, fm


def _np(t):
    return None if t is None else t.detach().numpy()


def _close(f, t, what="", tol=1e-5):
    if t is None or f is None:
        assert t is None and f is None, what
        return
    assert tuple(f.shape) == tuple(t.shape), what
    np.testing.assert_allclose(_np(f), _np(t), rtol=tol, atol=tol, err_msg=what)


def _data(shape, seed=5, fw=None, grad=True):
    a = np.random.default_rng(seed).standard_normal(shape)
    return fw.tensor(a, dtype=fw.float32, requires_grad=grad)


def _raises_both(fn, exc):
    with pytest.raises(exc):
        fn(torch)
    with pytest.raises(exc):
        fn(flow)


# ---- recurrent layers ------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda fw: fw.nn.RNN(3, 4)(fw.zeros(2, 1, 3), fw.zeros(1, 1, 4, dtype=fw.float64)),
    lambda fw: fw.nn.GRU(3, 4)(fw.zeros(2, 1, 3), fw.zeros(1, 1, 4, dtype=fw.float64)),
    lambda fw: fw.nn.LSTM(3, 4)(fw.zeros(2, 1, 3), (fw.zeros(1, 1, 4),
                                                     fw.zeros(1, 1, 4, dtype=fw.float64))),
    lambda fw: fw.nn.RNNCell(3, 4)(fw.zeros(2, 3), fw.zeros(2, 4, dtype=fw.float64)),
    lambda fw: fw.nn.GRUCell(3, 4)(fw.zeros(2, 3), fw.zeros(2, 4, dtype=fw.float64)),
], ids=["rnn", "gru", "lstm_c", "rnncell", "grucell"])
def test_state_of_another_dtype_raises(call):
    """A float64 initial state with float32 input: torch refuses, flowgrad promoted."""
    _raises_both(call, RuntimeError)


def test_cell_hidden_size_error_is_a_runtime_error():
    _raises_both(lambda fw: fw.nn.RNNCell(3, 4)(fw.zeros(2, 3), fw.zeros(2, 5)), RuntimeError)


@pytest.mark.parametrize("mode", ["RNN", "GRU", "LSTM", "RNNCell", "GRUCell", "LSTMCell"])
def test_empty_batch(mode):
    """A batch of 0 sequences runs (flowgrad failed concatenating no steps)."""
    cell = mode.endswith("Cell")
    tm, fm = _pair(lambda fw: getattr(fw.nn, mode)(3, 4))
    shape = (0, 3) if cell else (4, 0, 3)
    to, fo = tm(torch.zeros(shape)), fm(flow.zeros(shape))
    to = to if isinstance(to, tuple) else (to,)
    fo = fo if isinstance(fo, tuple) else (fo,)
    for t, f in zip(to, fo):
        for a, b in zip(t if isinstance(t, tuple) else (t,), f if isinstance(f, tuple) else (f,)):
            assert tuple(a.shape) == tuple(b.shape)


@pytest.mark.parametrize("bidirectional,layers,h0", [(False, 1, False), (True, 2, True),
                                                      (True, 1, False), (False, 2, True)])
def test_lstm_projection_takes_packed_input(bidirectional, layers, h0):
    """LSTM(proj_size) with a PackedSequence (unsorted lengths, ties): torch runs it, flowgrad
    raised NotImplementedError. Values and the gradients of input, h0, c0 and every weight."""
    tm, fm = _pair(lambda fw: fw.nn.LSTM(3, 5, num_layers=layers, proj_size=2,
                                         bidirectional=bidirectional))
    d = (2 if bidirectional else 1) * layers
    rng = np.random.default_rng(1)
    h, c = rng.standard_normal((d, 4, 2)), rng.standard_normal((d, 4, 5))
    outs, grads = [], []
    for fw, m in ((torch, tm), (flow, fm)):
        x = _data((6, 4, 3), fw=fw)
        hs = (fw.tensor(h, dtype=fw.float32, requires_grad=True),
              fw.tensor(c, dtype=fw.float32, requires_grad=True)) if h0 else None
        p = fw.nn.utils.rnn.pack_padded_sequence(x, [2, 6, 2, 5], enforce_sorted=False)
        o, (hn, cn) = m(p, hs)
        pad, _ = fw.nn.utils.rnn.pad_packed_sequence(o, padding_value=0.5)
        (pad.sin().sum() + (hn * hn).sum() + cn.sum()).backward()
        outs.append([pad, hn, cn])
        grads.append([x.grad, *(t.grad for t in hs or ())]
                     + [q.grad for _, q in sorted(m.named_parameters(), key=lambda t: t[0])])
    for t, f in zip(outs[0], outs[1]):
        _close(f, t, "output")
    for t, f in zip(grads[0], grads[1]):
        _close(f, t, "gradient")


# ---- attention -------------------------------------------------------------------------------
def _mha_pair(**kw):
    return _pair(lambda fw: fw.nn.MultiheadAttention(8, 2, **kw))


def test_mha_is_causal_hint_replaces_the_mask():
    """need_weights=False, no key_padding_mask: torch's SDPA takes is_causal and drops the
    given attn_mask (flowgrad applied the mask)."""
    tm, fm = _mha_pair()
    am = np.random.default_rng(2).standard_normal((3, 3))
    res = []
    for fw, m in ((torch, tm), (flow, fm)):
        x = _data((3, 2, 8), fw=fw)
        o, _ = m(x, x, x, attn_mask=fw.tensor(am, dtype=fw.float32), need_weights=False,
                 is_causal=True)
        o.sum().backward()
        res.append((o, x.grad))
    _close(res[1][0], res[0][0], "output")
    _close(res[1][1], res[0][1], "input gradient")


def test_mha_is_causal_without_mask_raises():
    tm, fm = _mha_pair()
    for fw, m in ((torch, tm), (flow, fm)):
        x = _data((3, 2, 8), fw=fw)
        with pytest.raises(RuntimeError, match="Need attn_mask"):
            m(x, x, x, is_causal=True, need_weights=False)


@pytest.mark.parametrize("mask", ["kpm", "attn"])
@pytest.mark.parametrize("need_weights,fast", [(False, False)])
def test_mha_fully_masked_rows(mask, need_weights, fast):
    """A query row with every key masked: 0 through SDPA (need_weights=False; flowgrad gave
    NaN), as NaN stays through the explicit softmax and through the eval fast path."""
    tm, fm = _mha_pair(batch_first=True)
    res = []
    for fw, m in ((torch, tm), (flow, fm)):
        x = _data((2, 3, 8), fw=fw)
        kw = {"key_padding_mask": fw.tensor([[True, True, True], [False, True, False]])} \
            if mask == "kpm" else \
            {"attn_mask": fw.tensor([[True, True, True], [False, True, False],
                                     [False, False, False]])}
        if fast:
            m.eval()
            with fw.no_grad():
                res.append(m(x, x, x, need_weights=need_weights, **kw)[0])
        else:
            res.append(m(x, x, x, need_weights=need_weights, **kw)[0])
    np.testing.assert_array_equal(np.isnan(_np(res[1])), np.isnan(_np(res[0])))
    _close(flow.nan_to_num(res[1]), torch.nan_to_num(res[0]), "output")


def test_sdpa_fully_masked_float_rows_are_zero():
    res = []
    for fw in (torch, flow):
        q = _data((2, 3, 5), fw=fw)
        am = fw.tensor([[0.0, 0.0, 0.0], [float("-inf")] * 3, [0.0, float("-inf"), 0.0]],
                       requires_grad=True)
        o = fw.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=am)
        (o * o).sum().backward()
        res.append((o, q.grad, am.grad))
    for t, f in zip(*res):
        _close(f, t)


@pytest.mark.parametrize("mask", ["bool", "float", "causal"])
@pytest.mark.parametrize("inf_key", [False, True])
@pytest.mark.parametrize("nan_upstream", [False, True])
def test_sdpa_non_finite_values_reach_masked_rows_as_torch(mask, inf_key, nan_upstream):
    """torch's math kernel adds a bool or causal mask as 0/-inf: an inf score at a masked
    position makes its row NaN, and a fully masked row's gradient is 0 * dy (NaN for a NaN
    dy), the rule of torch._safe_softmax."""
    allowed = np.array([[False, False, False], [True, True, False], [True, True, True]])
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 3, 2)).astype(np.float32) for _ in range(3))
    if inf_key:
        k[0, 2, 0] = np.inf  # key 2: masked for rows 0 and 1
    dy = np.ones((1, 3, 2), np.float32)
    if nan_upstream:
        dy[0, 0, 1] = np.nan  # in the fully masked row
    res = []
    for fw in (torch, flow):
        qt, kt, vt = (fw.tensor(a, requires_grad=True) for a in (q, k, v))
        am = {"bool": fw.tensor(allowed), "causal": None,
              "float": fw.tensor(np.where(allowed, 0, -np.inf).astype(np.float32))}[mask]
        o = fw.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=am,
                                                          is_causal=mask == "causal")
        o.backward(fw.tensor(dy))
        res.append([_np(t) for t in (o, qt.grad, kt.grad, vt.grad)])
    for t, f in zip(*res):
        np.testing.assert_array_equal(np.isnan(f), np.isnan(t))
        np.testing.assert_allclose(np.nan_to_num(f), np.nan_to_num(t), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mask_dtype", ["float64", "int64", "float16"])
def test_sdpa_mask_dtype_is_checked(mask_dtype):
    def call(fw):
        q = fw.ones(2, 3, 4)
        am = fw.zeros(3, 3, dtype=getattr(fw, mask_dtype))
        return fw.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=am)
    _raises_both(call, RuntimeError)


# ---- Transformer -----------------------------------------------------------------------------
def _layer(fw, **kw):
    return fw.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                         batch_first=True, **kw)


@pytest.mark.parametrize("kw", [{}, {"norm_first": True}, {"activation": "gelu"}])
@pytest.mark.parametrize("masks", ["float_mask", "kpm_and_float_mask"])
def test_encoder_layer_eval_fast_path(kw, masks):
    """In eval without grad torch runs its native layer, which reads any nonzero mask entry
    as masked and gives a fully masked row NaN."""
    tm, fm = _pair(lambda fw: _layer(fw, **kw))
    am = np.random.default_rng(3).standard_normal((3, 3))
    res = []
    for fw, m in ((torch, tm), (flow, fm)):
        m.eval()
        x = _data((2, 3, 8), fw=fw)
        args = {"src_mask": fw.tensor(am, dtype=fw.float32)}
        if masks == "kpm_and_float_mask":
            args["src_key_padding_mask"] = fw.tensor([[False, False, True]] * 2)
        with fw.no_grad():
            res.append(m(x, **args))
    np.testing.assert_array_equal(np.isnan(_np(res[1])), np.isnan(_np(res[0])))
    _close(flow.nan_to_num(res[1]), torch.nan_to_num(res[0]), "output")


def test_encoder_layer_callable_activation_zeroes_fully_masked_rows():
    """A callable activation keeps torch off the fast path: the layer's self-attention sees
    float masks and runs SDPA, so a fully masked row gives 0, not NaN."""
    tm, fm = _pair(lambda fw: _layer(fw, activation=fw.nn.functional.silu))
    res = []
    for fw, m in ((torch, tm), (flow, fm)):
        m.eval()
        x = _data((2, 3, 8), fw=fw)
        with fw.no_grad():
            res.append(m(x, src_key_padding_mask=fw.tensor([[True, True, True],
                                                             [False, True, False]])))
    _close(res[1], res[0], "output")


@pytest.mark.parametrize("kpm", [[[False, False, True], [False, False, False]],
                                 [[True, True, True], [False, False, True]]],
                         ids=["padded", "all_padded_row"])
@pytest.mark.parametrize("norm", [False, True])
def test_encoder_nested_tensor_path_zeroes_padding(kpm, norm):
    """TransformerEncoder in eval without grad runs a left-aligned padded batch as a nested
    tensor: padded positions come out 0 (before the final norm)."""
    def build(fw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fw.nn.TransformerEncoder(_layer(fw), 2,
                                            norm=fw.nn.LayerNorm(8) if norm else None)
    tm, fm = _pair(build)
    res = []
    for fw, m in ((torch, tm), (flow, fm)):
        m.eval()
        x = _data((2, 3, 8), fw=fw)
        with fw.no_grad():
            res.append(m(x, src_key_padding_mask=fw.tensor(kpm)))
    _close(res[1], res[0], "output")


# ---- statistics and ordering -----------------------------------------------------------------
_ABOVE = [([[1.0, 2.0, 4.0, 7.0], [3.0, 3.0, 3.0, 3.0]], {"dim": 0, "correction": 3})]


@pytest.mark.parametrize("fn,x,kw", [
    *((fn, *case) for fn in ("var", "std", "var_mean", "std_mean") for case in _ABOVE),
    *((fn, [[1.5]], {"dim": 1, "correction": c}) for fn in ("var", "var_mean")
      for c in (2, 1.5)),
    # over the whole tensor (dim=None): +inf off the mean, nan on it (flowgrad: -inf/inf)
    *((fn, x, {"correction": c}) for fn in ("var", "var_mean")
      for x, c in (([1.0, 2.0, 3.0], 3), ([1.0, 5.0], 2), ([[3.0, 1.0], [2.0, 2.0]], 4.5))),
])
def test_var_std_gradient_with_correction_above_count(fn, x, kw):
    """N - correction < 0 along dims: torch's gradient scales by 2 / (N - correction)
    (finite); flowgrad used inf (values -inf/inf/nan)."""
    res = []
    for fw in (torch, flow):
        t = fw.tensor(x, requires_grad=True)
        out = getattr(fw, fn)(t, **kw)
        out = out if isinstance(out, tuple) else (out,)
        sum(o.sum() for o in out).backward()
        res.append(t.grad)
    _close(res[1], res[0])


@pytest.mark.parametrize("x", [[[3.0, 1.0, 2.0, 1.0, 3.0, 2.0], [0.0, -0.0, 0.0, 5.0, -0.0, 5.0]],
                               [3.0, float("nan"), 1.0, 1.0, float("nan"), 1.0, 2.0],
                               [float("nan")] * 3])
def test_nanmedian_all_elements_splits_gradient_over_ties(x):
    res = []
    for fw in (torch, flow):
        t = fw.tensor(x, requires_grad=True)
        v = fw.nanmedian(t)
        v.backward()
        res.append((v, t.grad))
    for t, f in zip(*res):
        _close(f, t)


NAN = float("nan")


@pytest.mark.parametrize("seq,values,kw", [
    ([[-1.0, 1.0, 2.0, 3.0]], [[NAN, 0.5, 3.0, NAN]], {}),
    ([[-1.0, 1.0, 2.0, 3.0]], [[NAN, 0.5, 3.0, NAN]], {"right": True}),
    ([-1.0, 1.0, 2.0, 3.0, NAN, NAN], [NAN, 2.0, float("inf")], {}),
    ([[-float("inf"), 0.0, 1.0, 1.0, float("inf"), NAN]], [[float("inf"), 1.0, NAN, 5.0]], {}),
    ([[-float("inf"), 0.0, 1.0, 1.0, float("inf"), NAN]], [[float("inf"), 1.0, NAN, 5.0]],
     {"side": "right"}),
])
def test_searchsorted_nan(seq, values, kw):
    """torch's binary search: a NaN value goes past the end (flowgrad's N-D path gave 0), a
    NaN boundary compares below everything."""
    t = torch.searchsorted(torch.tensor(seq), torch.tensor(values), **kw)
    f = flow.searchsorted(flow.tensor(seq), flow.tensor(values), **kw)
    assert f.tolist() == t.tolist()


def test_bucketize_nan_boundaries():
    b = [-1.0, 1.0, 2.0, 3.0, NAN, NAN]
    x = [[3.0, NAN, 2.0], [1.0, -1.0, float("inf")]]
    assert flow.bucketize(flow.tensor(x), flow.tensor(b), right=True).tolist() == \
        torch.bucketize(torch.tensor(x), torch.tensor(b), right=True).tolist()


@pytest.mark.parametrize("call,exc", [
    (lambda fw: fw.kthvalue(fw.tensor([True, False, True]), 1), NotImplementedError),
    (lambda fw: fw.quantile(fw.tensor([0.1, 0.2, 0.3], dtype=fw.float16), 0.5), RuntimeError),
    (lambda fw: fw.nanquantile(fw.tensor([0.1, 0.2], dtype=fw.bfloat16), 0.5), RuntimeError),
    (lambda fw: fw.searchsorted(fw.tensor([False, True]), fw.tensor([True])),
     NotImplementedError),
    (lambda fw: fw.searchsorted(fw.tensor([1.0, 2.0]), fw.tensor([1.5]),
                                sorter=fw.tensor([0, 1], dtype=fw.int32)), RuntimeError),
], ids=["kthvalue_bool", "quantile_half", "nanquantile_bf16", "searchsorted_bool",
        "searchsorted_int32_sorter"])
def test_refused_dtypes(call, exc):
    _raises_both(call, exc)


def test_rnn_cell_base_as_torch():
    for m in (torch, flow):
        base = m.nn.RNNCellBase(3, 4, True, 2)
        assert sorted((k, tuple(v.shape)) for k, v in base.named_parameters()) == [
            ("bias_hh", (8,)), ("bias_ih", (8,)), ("weight_hh", (8, 4)), ("weight_ih", (8, 3))]
        assert all(isinstance(c, m.nn.RNNCellBase)
                   for c in (m.nn.RNNCell(2, 3), m.nn.GRUCell(2, 3), m.nn.LSTMCell(2, 3)))
        assert repr(m.nn.LSTMCell(2, 3, bias=False)) == "LSTMCell(2, 3, bias=False)"
