"""Composite modules under combinations of their options, against torch 2.13: torch's
initialised weights loaded into flowgrad's layer, forward in train and eval, backward with a
random upstream gradient; outputs, input gradients and parameter gradients compared."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

import flowgrad as flow


def _flow(t):
    """flowgrad's copy of a torch tensor (dtype and requires_grad kept), None as None."""
    if t is None:
        return None
    return flow.tensor(t.detach().numpy().copy(), dtype=getattr(flow, str(t.dtype)[6:]),
                       requires_grad=t.requires_grad)


def _flat(obj):
    if isinstance(obj, (tuple, list)):
        return [x for o in obj for x in _flat(o)]
    return [obj]


def _close(f, t, dtype):
    assert t is not None and f is not None, (t, f)
    assert tuple(f.shape) == tuple(t.shape) and str(f.dtype)[9:] == str(t.dtype)[6:]
    rtol, atol = (1e-7, 1e-9) if dtype == torch.float64 else (1e-4, 1e-5)
    np.testing.assert_allclose(f.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


def _check_pair(tm, fm, inputs, call, dtype, train=True, seed=0):
    """Run `call(module, *inputs)` in torch and flowgrad (torch's weights loaded into fm) and
    compare outputs, then the gradients of sum(out * g) for a random g."""
    fm.load_state_dict({k: _flow(v) for k, v in tm.state_dict().items()})
    tm.train(train)
    fm.train(train)
    f_inputs = [[_flow(y) for y in x] if isinstance(x, list) else
                _flow(x) if isinstance(x, torch.Tensor) else x for x in inputs]
    try:
        t_out = _flat(call(tm, *inputs))
    except RuntimeError:  # a combination torch refuses (blocks of size 0): flowgrad refuses too
        with pytest.raises(RuntimeError):
            call(fm, *f_inputs)
        return
    f_out = _flat(call(fm, *f_inputs))
    assert len(t_out) == len(f_out)
    gen = torch.Generator().manual_seed(seed)
    t_loss, f_loss = 0, 0
    for t, f in zip(t_out, f_out):
        if t is None and f is None:  # need_weights=False
            continue
        _close(f, t, dtype)
        if t.requires_grad:
            g = torch.randn(t.shape, generator=gen, dtype=t.dtype)
            t_loss, f_loss = t_loss + (t * g).sum(), f_loss + (f * _flow(g)).sum()
    if isinstance(t_loss, int):
        return
    t_loss.backward()
    f_loss.backward()
    for t, f in zip(_flat(inputs), _flat(f_inputs)):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            _close(f.grad, t.grad, dtype)
    f_params = dict(fm.named_parameters())
    for name, p in tm.named_parameters():
        if p.grad is not None:
            _close(f_params[name].grad, p.grad, dtype)


def _pair(name, *args, **kwargs):
    """torch's and flowgrad's layer `name` made with the same arguments (torch's seeded)."""
    torch.manual_seed(0)
    f_kwargs = {k: getattr(flow, str(v)[6:]) if isinstance(v, torch.dtype) else v
                for k, v in kwargs.items()}
    return getattr(torch.nn, name)(*args, **kwargs), getattr(flow.nn, name)(*args, **f_kwargs)


# ---- LPPool with norm_type = +-inf -------------------------------------------------------------
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("p", [float("inf"), -float("inf")])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_lp_pool_of_infinite_norm_is_max_pooling_of_abs_as_torch(nd, p, ceil_mode):
    """torch's lp_pool{1,2,3}d take p = inf as max pooling of |x| and p = -inf as the min of
    |x|; x ** inf averaged and raised to 1/inf gave 1.0 (0.0 where every |x| < 1)."""
    tm, fm = _pair(f"LPPool{nd}d", p, 2, stride=(1, 2, 2)[nd - 1], ceil_mode=ceil_mode)
    x = torch.randn((2, 3) + (5,) * nd, dtype=torch.float64, requires_grad=True)
    _check_pair(tm, fm, [x], lambda m, x: m(x), torch.float64)


# ---- option combinations torch refuses ---------------------------------------------------------
_REFUSED = {
    # an explicit size leaves no scale to recompute
    "interpolate_size_recompute": lambda lib: lib.nn.functional.interpolate(
        lib.ones(1, 1, 4), size=3, recompute_scale_factor=True),
    # per_sample_weights must have the input's shape, not just its number of elements
    "embedding_bag_2d_flat_weights": lambda lib: lib.nn.EmbeddingBag(5, 2, mode="sum")(
        lib.tensor([[1, 2]]), per_sample_weights=lib.ones(2)),
    "embedding_bag_1d_weights_too_long": lambda lib: lib.nn.functional.embedding_bag(
        lib.tensor([1, 2]), lib.ones(5, 2), lib.tensor([0]), per_sample_weights=lib.ones(3),
        mode="sum"),
    "embedding_bag_1d_weights_2d": lambda lib: lib.nn.functional.embedding_bag(
        lib.tensor([1, 2]), lib.ones(5, 2), lib.tensor([0]), per_sample_weights=lib.ones(1, 2),
        mode="sum"),
}


@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_option_combinations_torch_refuses_raise_its_error(case):
    with pytest.raises(ValueError) as torch_error:
        _REFUSED[case](torch)
    with pytest.raises(ValueError) as error:
        _REFUSED[case](flow)
    assert str(error.value).split(" (")[0].split(":")[0] == \
        str(torch_error.value).split(" (")[0].split(":")[0]


# ---- EmbeddingBag(mode="max") with equal maxima ----------------------------------------------
_TIED = [[1.0, 2.0], [1.0, 2.0], [3.0, 0.0], [float("nan"), 1.0], [3.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("bags", [
    ([[0, 1]], None), ([[2, 4, 0]], None), ([[1, 0, 1]], None), ([[5, 5, 2]], None),
    ([[0, 3]], None), ([[3, 0]], None), ([[3, 0], [0, 3]], 3), ([[5, 1, 0, 1]], 5),
    ([2, 4, 0, 1, 0, 5, 5], [0, 3, 3, 5]), ([3, 1, 0, 4, 2], [0, 2])])
def test_embedding_bag_max_gives_the_first_of_equal_maxima_the_gradient_as_torch(bags):
    """torch's max kernel keeps a bag's first row and replaces it only by a strictly greater
    value: of equal maxima the first gets the whole gradient (flowgrad's amax split it, 0.5
    each), and a nan counts only as a bag's first (non-padding) row."""
    indices, extra = bags
    offsets, padding_idx = (extra, None) if isinstance(extra, list) else (None, extra)
    results = []
    for lib in (torch, flow):
        w = lib.tensor(_TIED, dtype=lib.float64, requires_grad=True)
        i = lib.tensor(indices)
        o = lib.tensor(offsets) if offsets is not None else None
        y = lib.nn.functional.embedding_bag(i, w, o, mode="max", padding_idx=padding_idx)
        y.nan_to_num().mul(lib.arange(1.0, y.numel() + 1, dtype=lib.float64).reshape(
            y.shape)).sum().backward()
        results.append((y.detach().numpy(), w.grad.numpy()))
    (ty, tg), (fy, fg) = results
    np.testing.assert_array_equal(fy, ty)
    np.testing.assert_array_equal(fg, tg)


# ---- the option matrices: a seeded sample of each module's option product ---------------------
def _dtype(rng):
    return rng.choice([torch.float64, torch.float32])


def _mha(rng):
    e, heads, b, length = 8, 2, 3, 4
    o = {k: rng.choice(v) for k, v in dict(
        batch_first=[False, True], kv=[None, (5, 6)], bias=[True, False], bias_kv=[False, True],
        zero_attn=[False, True], kpm=[None, "bool", "float"], need_weights=[True, False],
        am=[None, "2b", "2f", "3b", "3f", "causal"], avg=[True, False], batched=[True, False],
        self_attn=[False, True]).items()}
    dtype = _dtype(rng)
    kdim, vdim = (None, None) if o["self_attn"] or o["kv"] is None else o["kv"]
    src = length if o["self_attn"] else 5
    tm, fm = _pair("MultiheadAttention", e, heads, bias=o["bias"], add_bias_kv=o["bias_kv"],
                   add_zero_attn=o["zero_attn"], kdim=kdim, vdim=vdim,
                   batch_first=o["batch_first"], dtype=dtype)

    def seq(n, width):
        shape = ((b, n) if o["batch_first"] else (n, b)) if o["batched"] else (n,)
        return torch.randn(shape + (width,), dtype=dtype, requires_grad=True)

    kpm = attn_mask = None
    if o["kpm"]:
        kpm = torch.zeros(b, src, dtype=torch.bool)
        kpm[0, -1] = kpm[1, 0] = True
        kpm = kpm if o["batched"] else kpm[0]
        if o["kpm"] == "float":
            kpm = torch.zeros(kpm.shape, dtype=dtype).masked_fill(kpm, -math.inf)
    causal = False
    if o["am"] == "causal":
        attn_mask, causal = torch.ones(length, src, dtype=torch.bool).triu(1), rng.random() < .5
    elif o["am"]:
        shape = (length, src) if o["am"][0] == "2" else (heads * b if o["batched"] else heads,
                                                         length, src)
        attn_mask = torch.rand(shape) < 0.3
        attn_mask[..., 0] = False
        if o["am"][1] == "f":
            attn_mask = torch.randn(shape, dtype=dtype).masked_fill(attn_mask, -math.inf)
    q = seq(length, e)
    kv = [] if o["self_attn"] else [seq(src, kdim or e), seq(src, vdim or e)]

    def call(m, q, kpm, attn_mask, *kv):
        k, v = kv or (q, q)
        return m(q, k, v, key_padding_mask=kpm, need_weights=o["need_weights"],
                 attn_mask=attn_mask, average_attn_weights=o["avg"], is_causal=causal)
    return tm, fm, [q, kpm, attn_mask, *kv], call, dtype


def _transformer(rng):
    e, heads, b = 8, 2, 3
    o = {k: rng.choice(v) for k, v in dict(
        kind=["encoder", "decoder", "transformer"], norm_first=[False, True],
        act=["relu", "gelu", "callable"], batch_first=[False, True], bias=[True, False],
        src_mask=[None, "causal", "float"], kpm=[False, True], memory_mask=[False, True],
        causal=[False, True], batched=[True, False], stack=[False, True],
        nested=[True, False]).items()}
    dtype = _dtype(rng)

    def layer_args(lib):
        act = (lambda x: lib.tanh(x) * 2) if o["act"] == "callable" else o["act"]
        return dict(d_model=e, dim_feedforward=16, dropout=0.0, activation=act, dtype=dtype if
                    lib is torch else getattr(flow, str(dtype)[6:]), batch_first=o["batch_first"],
                    norm_first=o["norm_first"], bias=o["bias"])
    mods = []
    for lib in (torch, flow):
        torch.manual_seed(0)
        if o["kind"] == "transformer":
            mods.append(lib.nn.Transformer(nhead=heads, num_encoder_layers=2, num_decoder_layers=1,
                                           **layer_args(lib)))
            continue
        name = "TransformerEncoder" if o["kind"] == "encoder" else "TransformerDecoder"
        m = getattr(lib.nn, name + "Layer")(nhead=heads, **layer_args(lib))
        if o["stack"]:
            m = getattr(lib.nn, name)(m, 2, **({"enable_nested_tensor": o["nested"]}
                                               if o["kind"] == "encoder" else {}))
        mods.append(m)

    def seq(n):
        shape = ((b, n) if o["batch_first"] else (n, b)) if o["batched"] else (n,)
        return torch.randn(shape + (e,), dtype=dtype, requires_grad=True)

    def padding(n):
        m = torch.zeros(b, n, dtype=torch.bool)
        m[0, -1] = True
        m[2, 1:3] = True
        return (m if o["batched"] else m[0]) if o["kpm"] else None
    src, tgt = seq(5), seq(4)
    src_mask = {None: None, "float": torch.randn(5, 5, dtype=dtype),
                "causal": torch.ones(5, 5, dtype=torch.bool).triu(1)}[o["src_mask"]]
    tgt_mask = torch.full((4, 4), -math.inf, dtype=dtype).triu(1)
    memory_mask = None
    if o["memory_mask"]:
        memory_mask = torch.rand(4, 5) < 0.3
        memory_mask[:, 0] = False
    causal = o["causal"]
    if o["kind"] == "encoder":
        causal = causal and o["src_mask"] == "causal"
        key = "mask" if o["stack"] else "src_mask"
        return (*mods, [src, src_mask, padding(5)], lambda m, s, sm, kp: m(
            s, **{key: sm}, src_key_padding_mask=kp, is_causal=causal), dtype)
    if o["kind"] == "decoder":
        return (*mods, [tgt, src, tgt_mask, memory_mask, padding(4), padding(5)],
                lambda m, t, s, tm, mm, tk, sk: m(
                    t, s, tgt_mask=tm, memory_mask=mm, tgt_key_padding_mask=tk,
                    memory_key_padding_mask=sk, tgt_is_causal=causal), dtype)
    return (*mods, [src, tgt, src_mask, tgt_mask, memory_mask, padding(5), padding(4)],
            lambda m, s, t, sm, tm, mm, sk, tk: m(
                s, t, src_mask=sm, tgt_mask=tm, memory_mask=mm, src_key_padding_mask=sk,
                tgt_key_padding_mask=tk, memory_key_padding_mask=sk, tgt_is_causal=causal),
            dtype)


def _rnn(rng):
    o = {k: rng.choice(v) for k, v in dict(
        kind=["RNN", "LSTM", "GRU"], layers=[1, 2], bidirectional=[False, True],
        batch_first=[False, True], proj=[0, 3], nonlinearity=["tanh", "relu"], bias=[True, False],
        h0=[False, True], packed=[None, "sorted", "unsorted"], total_length=[None, 7],
        padding_value=[0.0, -1.5], batched=[True, False]).items()}
    dtype = _dtype(rng)
    kwargs = dict(num_layers=o["layers"], bidirectional=o["bidirectional"],
                  batch_first=o["batch_first"], bias=o["bias"], dtype=dtype)
    if o["kind"] == "LSTM":
        kwargs["proj_size"] = o["proj"]
    if o["kind"] == "RNN":
        kwargs["nonlinearity"] = o["nonlinearity"]
    tm, fm = _pair(o["kind"], 4, 5, **kwargs)
    batched = o["batched"] or o["packed"] is not None
    seq = ((3, 6) if o["batch_first"] else (6, 3)) if batched else (6,)
    x = torch.randn(seq + (4,), dtype=dtype, requires_grad=True)
    h0 = None
    if o["h0"]:
        lead = (o["layers"] * (2 if o["bidirectional"] else 1),) + ((3,) if batched else ())
        h0 = torch.randn(lead + ((o["proj"] or 5) if o["kind"] == "LSTM" else 5,),
                         dtype=dtype, requires_grad=True)
        if o["kind"] == "LSTM":
            h0 = (h0, torch.randn(lead + (5,), dtype=dtype, requires_grad=True))
    lengths = [6, 3, 4] if o["packed"] == "unsorted" else [6, 4, 3]

    def call(m, x, h0):
        if not o["packed"]:
            return m(x, h0)
        lib = torch if isinstance(m, torch.nn.Module) else flow
        packed = lib.nn.utils.rnn.pack_padded_sequence(
            x, lib.tensor(lengths), batch_first=o["batch_first"],
            enforce_sorted=o["packed"] == "sorted")
        y, h = m(packed, h0)
        return lib.nn.utils.rnn.pad_packed_sequence(
            y, batch_first=o["batch_first"], padding_value=o["padding_value"],
            total_length=o["total_length"])[0], h
    h0 = list(h0) if isinstance(h0, tuple) else h0
    return tm, fm, [x, h0], lambda m, x, h: call(m, x, tuple(h) if isinstance(h, list) else h), \
        dtype


def _tup(rng, choices, nd):
    return rng.choice(choices) if rng.random() < 0.5 else tuple(rng.choice(choices)
                                                                 for _ in range(nd))


def _conv(rng):
    nd, transposed, groups = rng.choice([1, 2, 3]), rng.random() < 0.4, rng.choice([1, 2, 3])
    cin, cout = groups * rng.choice([1, 2]), groups * rng.choice([1, 2])
    kernel, stride, dilation = _tup(rng, [1, 2, 3], nd), _tup(rng, [1, 2, 3], nd), \
        _tup(rng, [1, 2], nd)
    bias, dtype = rng.random() < 0.5, _dtype(rng)
    if transposed:
        st, dil = (np.broadcast_to(v, (nd,)) for v in (stride, dilation))
        out_pad = tuple(rng.randrange(max(s, d)) for s, d in zip(st, dil)) \
            if rng.random() < 0.6 else 0
        kwargs = dict(stride=stride, padding=_tup(rng, [0, 1, 2], nd), output_padding=out_pad,
                      groups=groups, bias=bias, dilation=dilation)
        name = f"ConvTranspose{nd}d"
    else:
        padding = rng.choice([0, 1, 2, (1,) * nd, "same", "valid",
                              tuple(rng.choice([0, 1, 2]) for _ in range(nd))])
        kwargs = dict(stride=1 if padding == "same" else stride, padding=padding,
                      dilation=dilation, groups=groups, bias=bias,
                      padding_mode=rng.choice(["zeros", "reflect", "replicate", "circular"]))
        name = f"Conv{nd}d"
    tm, fm = _pair(name, cin, cout, kernel, dtype=dtype, **kwargs)
    batch = [2] if rng.random() < 0.8 else []
    x = torch.randn(batch + [cin] + [rng.choice([5, 6, 7, 8]) for _ in range(nd)], dtype=dtype,
                    requires_grad=True)
    return tm, fm, [x], lambda m, x: m(x), dtype


def _pool(rng):
    nd, kind = rng.choice([1, 2, 3]), rng.choice(["Max", "Avg", "LP", "AdaptiveMax",
                                                  "AdaptiveAvg"])
    kernel = _tup(rng, [1, 2, 3], nd)
    stride = rng.choice([None, _tup(rng, [1, 2, 3], nd)])
    half = int(min(np.broadcast_to(kernel, (nd,)))) // 2
    padding, ceil_mode = rng.choice([0, half]), rng.random() < 0.5
    if kind == "Max":
        kwargs = dict(kernel_size=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode,
                      dilation=_tup(rng, [1, 2], nd), return_indices=rng.random() < 0.5)
    elif kind == "Avg":
        kwargs = dict(kernel_size=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode,
                      count_include_pad=rng.random() < 0.5)
        if nd > 1:
            kwargs["divisor_override"] = rng.choice([None, 3])
    elif kind == "LP":
        nd = min(nd, 2) if isinstance(kernel, int) else 2 if nd == 1 else nd
        kernel = kernel if isinstance(kernel, int) else _tup(rng, [1, 2, 3], nd)
        kernel = kernel if isinstance(kernel, int) or nd > 1 else kernel[0]
        stride = stride if stride is None or isinstance(stride, int) else None
        kwargs = dict(norm_type=rng.choice([1, 2, 3.5, math.inf, -math.inf]), kernel_size=kernel,
                      stride=stride, ceil_mode=ceil_mode)
    else:
        size = rng.choice([1, 2, 3, tuple(rng.choice([1, 2, 4, None]) for _ in range(nd))])
        kwargs = dict(output_size=size if nd > 1 or isinstance(size, int) else size[0] or 2)
        if kind == "AdaptiveMax":
            kwargs["return_indices"] = rng.random() < 0.5
    tm, fm = _pair(f"{kind}Pool{nd}d", **kwargs)
    dtype = _dtype(rng)
    batch = [2] if rng.random() < 0.8 else []
    x = torch.randn(batch + [3] + [rng.choice([4, 5, 6, 7]) for _ in range(nd)], dtype=dtype)
    x = (x.abs() + 0.1 if kind == "LP" else x).requires_grad_()
    return tm, fm, [x], lambda m, x: m(x)[0] if isinstance(m(x), tuple) else m(x), dtype


_MODES = {1: ["nearest", "nearest-exact", "linear", "area"],
          2: ["nearest", "nearest-exact", "bilinear", "bicubic", "area"],
          3: ["nearest", "nearest-exact", "trilinear", "area"]}


def _interpolate(rng):
    nd = rng.choice([1, 2, 3])
    mode = rng.choice(_MODES[nd])
    kwargs = {}
    if rng.random() < 0.5:
        kwargs["size"] = _tup(rng, [1, 2, 3, 6, 9], nd)
    else:
        kwargs["scale_factor"] = _tup(rng, [0.5, 0.7, 1.5, 2, 2.3, 3], nd)
        kwargs["recompute_scale_factor"] = rng.choice([None, True, False])
        if nd == 3 and mode == "nearest":
            # torch's CPU nearest-3d backward maps by the sizes' ratio, not the scale given,
            # so its gradient is not its forward's adjoint (scale 2.3 of 3: out 6); flowgrad's is
            kwargs["recompute_scale_factor"] = True
    if mode not in ("nearest", "nearest-exact", "area"):
        kwargs["align_corners"] = rng.choice([None, True, False])
    if mode in ("bilinear", "bicubic") and rng.random() < 0.4 and "size" in kwargs:
        # torch's antialiased pass over height copies the first row when the width is 1
        kwargs["antialias"] = True
        kwargs["size"] = (rng.choice([1, 3, 9]), rng.choice([2, 3, 9]))
    dtype = _dtype(rng)
    x = torch.randn([2, 3] + [rng.choice([3, 4, 5, 7]) for _ in range(nd)], dtype=dtype,
                    requires_grad=True)
    if rng.random() < 0.3 and "recompute_scale_factor" not in kwargs and \
            "antialias" not in kwargs and mode != "area":
        tm, fm = _pair("Upsample", mode=mode, **kwargs)
        return tm, fm, [x], lambda m, x: m(x), dtype
    tm, fm = _pair("Identity")
    return tm, fm, [x], lambda m, x: (torch if isinstance(x, torch.Tensor) else flow) \
        .nn.functional.interpolate(x, mode=mode, **kwargs), dtype


def _embedding_bag(rng):
    mode = rng.choice(["sum", "mean", "max"])
    kwargs = dict(mode=mode, padding_idx=rng.choice([None, 0, 3, -1]),
                  max_norm=rng.choice([None, 1.0, 0.5]), norm_type=rng.choice([1.0, 2.0, 3.0]),
                  include_last_offset=rng.random() < 0.5)
    dtype = _dtype(rng)
    tm, fm = _pair("EmbeddingBag", 10, 4, dtype=dtype, **kwargs)
    gen = torch.Generator().manual_seed(rng.randrange(1000))
    if rng.random() < 0.5:
        indices, offsets = torch.randint(0, 10, (3, 4), generator=gen), None
    else:
        indices = torch.randint(0, 10, (9,), generator=gen)
        offsets = rng.choice([[0, 2, 2, 5], [0, 3, 7], [0, 0, 9], [0, 4]])
        # include_last_offset: the last offset closes the last bag (torch's docs)
        offsets = torch.tensor(offsets + [9] * kwargs["include_last_offset"])
    weights = torch.rand(indices.shape, dtype=dtype, generator=gen, requires_grad=True) \
        if mode == "sum" and rng.random() < 0.5 else None
    return tm, fm, [indices, offsets, weights], \
        lambda m, i, o, w: m(i, o, per_sample_weights=w), dtype


def _fold(rng):
    kernel, dilation, padding, stride = (_tup(rng, c, 2) for c in
                                         ([1, 2, 3], [1, 2], [0, 1, 2], [1, 2, 3]))
    dtype, batch = _dtype(rng), [2] if rng.random() < 0.7 else []
    kwargs = dict(kernel_size=kernel, dilation=dilation, padding=padding, stride=stride)
    if rng.random() < 0.5:
        tm, fm = _pair("Unfold", **kwargs)
        x = torch.randn(batch + [2, rng.choice([5, 6, 7]), rng.choice([4, 5, 8])], dtype=dtype)
        return tm, fm, [x.requires_grad_()], lambda m, x: m(x), dtype
    size = _tup(rng, [5, 6, 7], 2)
    k, d, p, s, o = (np.broadcast_to(v, (2,)) for v in (kernel, dilation, padding, stride,
                                                        size))
    blocks = np.maximum((o + 2 * p - d * (k - 1) - 1) // s + 1, 0).prod()
    tm, fm = _pair("Fold", output_size=size, **kwargs)
    x = torch.randn(batch + [2 * int(k.prod()), int(blocks)], dtype=dtype)
    return tm, fm, [x.requires_grad_()], lambda m, x: m(x), dtype


_MATRICES = {"mha": _mha, "transformer": _transformer, "rnn": _rnn, "conv": _conv,
             "pool": _pool, "interpolate": _interpolate, "embedding_bag": _embedding_bag,
             "fold": _fold}


def _run_case(family, seed):
    rng = random.Random(f"{family}-{seed}")
    torch.manual_seed(seed)
    tm, fm, inputs, call, dtype = _MATRICES[family](rng)
    train = rng.random() < 0.5
    if not train and rng.random() < 0.5:  # eval under no_grad: torch's fast paths
        with torch.no_grad(), flow.no_grad():
            inputs = [x.detach() if isinstance(x, torch.Tensor) else x for x in inputs]
            _check_pair(tm, fm, inputs, call, dtype, train=False)
        return
    _check_pair(tm, fm, inputs, call, dtype, train=train)


@pytest.mark.parametrize("family", sorted(_MATRICES))
def test_option_matrix_sample_vs_torch(family):
    for seed in range(15):
        _run_case(family, seed)


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(_MATRICES))
@pytest.mark.parametrize("block", range(4))
def test_option_matrix_large_sample_vs_torch(family, block):
    for seed in range(15 + 50 * block, 15 + 50 * (block + 1)):
        _run_case(family, seed)


# ---- FractionalMaxPool3d's output size bound -------------------------------------------------
@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("grow", [None, 0, 1, 2])
def test_fractional_max_pool_output_size_bound_as_torch(nd, grow):
    """torch's 3-D kernel refuses output + kernel - 1 == input (its check is strict, the 2-D
    one is not); flowgrad pooled such an input where torch raises."""
    x = np.sin(np.arange(6 ** nd, dtype=np.float64)).reshape((1, 1) + (6,) * nd)
    size = [3] * nd
    if grow is not None:
        size[grow % nd] = 4
    samples = np.full((1, 1, nd), 0.3)
    results = []
    for lib in (torch, flow):
        pool = getattr(lib.nn.functional, f"fractional_max_pool{nd}d")
        try:
            results.append(pool(lib.tensor(x), 3, output_size=size,
                                _random_samples=lib.tensor(samples)).numpy())
        except RuntimeError as error:
            results.append(str(error))
    if isinstance(results[0], str):
        assert results[1] == results[0]
    else:
        np.testing.assert_array_equal(results[1], results[0])


@pytest.mark.parametrize("case", ["offsets_2d", "offsets_0d", "index_negative", "index_past"])
def test_embedding_bag_bad_offsets_and_indices_raise_as_torch(case):
    """A 2-D (or 0-D) offsets tensor was flattened and used (torch: ValueError); an index out
    of range raised IndexError (torch's bag kernel: RuntimeError, naming its position)."""
    def call(lib):
        bag = lib.nn.EmbeddingBag(5, 2)
        if case.startswith("offsets"):
            offsets = lib.tensor([[0]]) if case == "offsets_2d" else lib.tensor(0)
            return bag(lib.tensor([1, 2]), offsets)
        return bag(lib.tensor([[1, -1 if case == "index_negative" else 5]]))
    with pytest.raises((ValueError, RuntimeError)) as torch_error:
        call(torch)
    with pytest.raises(torch_error.type, match=r"^" + str(torch_error.value).replace(
            "[", r"\[").replace("(", r"\(").replace(")", r"\)") + "$"):
        call(flow)


# ---- the encoder layer's fast path runs its own activation -------------------------------------
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("grad, dtype", [(False, torch.float32), (False, torch.float64),
                                         (True, torch.float64)])
def test_encoder_layer_fast_path_takes_tanh_gelu_module_as_exact_gelu(norm_first, grad, dtype):
    """activation=nn.GELU(approximate='tanh') marks the layer as gelu for torch's native
    kernel (eval, no grad), which computes the exact gelu: outputs differed by 5.3e-4 (norm
    first, values near 28); with grad the layer runs the tanh form, in both. (float32 with
    grad: the input gradients of the two frameworks' float32 sums differ by ~2e-3 at 8.)"""
    tm, fm = (lib.nn.TransformerEncoderLayer(
        8, 2, 16, 0.0, lib.nn.GELU(approximate="tanh"), batch_first=True, norm_first=norm_first,
        dtype=getattr(lib, str(dtype)[6:])) for lib in (torch, flow))
    with torch.no_grad():
        for i, (_, p) in enumerate(sorted(tm.named_parameters())):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape).sin() * (1 + i % 3))
    x = torch.linspace(-2, 2, 3 * 5 * 8, dtype=dtype).reshape(3, 5, 8).sin() * 3
    x.requires_grad_(grad)
    with torch.set_grad_enabled(grad), flow.set_grad_enabled(grad):
        _check_pair(tm, fm, [x], lambda m, x: m(x), dtype, train=False)
