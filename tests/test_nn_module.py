"""nn.Module machinery: registration, traversal, state_dict, modes, conversion, hooks,
containers, repr and nn.init."""
import copy
import math
import pickle

import numpy as np
import pytest
import torch

import flowgrad as flow
from flowgrad import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.scale = nn.Parameter(flow.ones(4))
        self.register_buffer("count", flow.zeros(1))
        self.register_buffer("scratch", flow.zeros(2), persistent=False)
        self.inner = nn.Sequential(nn.Linear(4, 2), nn.Tanh())

    def forward(self, x):
        return self.inner(self.fc(x) * self.scale)


def _tnet():
    m = torch.nn.Module()
    m.fc = torch.nn.Linear(3, 4)
    m.scale = torch.nn.Parameter(torch.ones(4))
    m.register_buffer("count", torch.zeros(1))
    m.register_buffer("scratch", torch.zeros(2), persistent=False)
    m.inner = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Tanh())
    return m


# ---- registration and traversal ------------------------------------------------------------
def test_named_members_match_torch():
    m, t = Net(), _tnet()
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in m.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in m.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in m.named_children()] == [n for n, _ in t.named_children()]
    assert list(m.state_dict()) == list(t.state_dict())
    assert [n for n, _ in m.named_parameters(prefix="p", recurse=False)] == \
        [n for n, _ in t.named_parameters(prefix="p", recurse=False)]
    assert len(list(m.parameters())) == 5 and len(list(m.buffers())) == 2
    assert len(list(m.modules())) == 5 and len(list(m.children())) == 2


def test_shared_parameters_and_modules_deduplicated():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, lin)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
    assert [n for n, _ in seq.named_modules()] == ["", "0"]
    assert [n for n, _ in seq.named_modules(remove_duplicate=False)] == ["", "0", "1"]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_setattr_routes_and_replaces():
    m = Net()
    assert "scale" in m._parameters and "fc" in m._modules and "count" in m._buffers
    m.count = flow.ones(1)
    assert m._buffers["count"].item() == 1
    m.scale = None
    assert m._parameters["scale"] is None and "scale" not in dict(m.named_parameters())
    m.fc = nn.Identity()
    assert isinstance(m._modules["fc"], nn.Identity)
    del m.fc
    assert "fc" not in m._modules
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        m.nothing  # noqa: B018


@pytest.mark.parametrize("action, exc, match", [
    (lambda m: setattr(m, "count", 3), TypeError, "as buffer 'count'"),
    (lambda m: setattr(m, "inner", 3), TypeError, "as child module 'inner'"),
    (lambda m: setattr(m, "scale", flow.ones(4)), TypeError, "as parameter 'scale'"),
    (lambda m: m.register_buffer("a.b", flow.ones(1)), KeyError, "contain"),
    (lambda m: m.register_buffer("", flow.ones(1)), KeyError, "empty string"),
    (lambda m: m.register_buffer("fc", flow.ones(1)), KeyError, "already exists"),
    (lambda m: m.register_buffer("x", 3), TypeError, "buffer 'x'"),
    (lambda m: m.register_parameter("p", flow.ones(1)), TypeError, "parameter 'p'"),
    (lambda m: m.register_parameter("p", _nonleaf_param()), ValueError, "non-leaf"),
    (lambda m: m.add_module("x", 3), TypeError, "is not a Module subclass"),
    (lambda m: m.train("yes"), ValueError, "expected to be boolean"),
])
def test_registration_errors(action, exc, match):
    with pytest.raises(exc, match=match):
        action(Net())


def _nonleaf_param():
    p = nn.Parameter(flow.ones(2))
    q = nn.Parameter(flow.ones(2))
    q._grad_fn = (p * 2).grad_fn  # simulate a non-leaf parameter
    return q


def test_assign_before_init_raises():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(flow.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_get_submodule_parameter_buffer():
    m = Net()
    assert m.get_submodule("inner.0") is m.inner[0]
    assert m.get_parameter("inner.0.weight") is m.inner[0].weight
    assert m.get_buffer("count") is m.count
    with pytest.raises(AttributeError, match="has no attribute `nope`"):
        m.get_submodule("inner.nope")


# ---- state_dict ------------------------------------------------------------------------------
def test_state_dict_round_trip_through_numpy_keeps_identity():
    src, dst = Net(), Net()
    w_before = dst.fc.weight
    sd = {k: v.numpy() for k, v in src.state_dict().items()}
    res = dst.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == "<All keys matched successfully>"
    assert dst.fc.weight is w_before
    for k, v in src.state_dict().items():
        np.testing.assert_array_equal(dst.state_dict()[k].numpy(), v.numpy())


def test_state_dict_values_share_storage_and_are_detached():
    m = Net()
    sd = m.state_dict()
    assert not sd["fc.weight"].requires_grad
    sd["fc.weight"]._data[0, 0] = 42.0
    assert m.fc.weight._data[0, 0] == 42.0
    assert m.state_dict(keep_vars=True)["fc.weight"] is m.fc.weight


def test_load_state_dict_from_torch_tensors():
    t, m = torch.nn.Linear(3, 2), nn.Linear(3, 2)
    m.load_state_dict(t.state_dict())
    np.testing.assert_array_equal(m.weight.detach().numpy(), t.weight.detach().numpy())


def test_load_state_dict_missing_unexpected():
    m = Net()
    sd = dict(m.state_dict())
    del sd["fc.bias"]
    sd["extra"] = flow.ones(1)
    res = m.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["fc.bias"] and res.unexpected_keys == ["extra"]
    assert "missing_keys=['fc.bias']" in repr(res)
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "fc.bias"'
                       r'(.|\n)*Unexpected key\(s\) in state_dict: "extra"'):  # torch's order
        m.load_state_dict(sd)


def test_load_state_dict_shape_mismatch_changes_nothing():
    m = Net()
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    sd = {k: v.numpy() + 1 for k, v in m.state_dict().items()}
    sd["fc.weight"] = np.zeros((2, 2), np.float32)
    with pytest.raises(RuntimeError, match=r"size mismatch for fc.weight: .*\[2, 2\].*"
                                           r"\[4, 3\]"):
        m.load_state_dict(sd)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_load_state_dict_assign_and_type_error():
    m = nn.Linear(2, 2)
    new = {"weight": flow.ones(2, 2), "bias": flow.zeros(2)}
    old = m.weight
    m.load_state_dict(new, assign=True)
    assert m.weight is not old and isinstance(m.weight, nn.Parameter)
    assert m.weight.requires_grad
    with pytest.raises(TypeError, match="dict-like"):
        m.load_state_dict([1, 2])


def test_pickle_and_deepcopy():
    m = Net()
    for clone in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert clone.fc.weight is not m.fc.weight
        assert isinstance(clone.fc.weight, nn.Parameter)
        np.testing.assert_array_equal(clone.fc.weight.detach().numpy(),
                                      m.fc.weight.detach().numpy())
        x = flow.randn(2, 3)
        np.testing.assert_allclose(clone(x).detach().numpy(), m(x).detach().numpy())


# ---- modes, grads, conversion --------------------------------------------------------------
def test_train_eval_return_self_and_recurse():
    m = Net()
    assert m.eval() is m and not m.inner[1].training
    assert m.train() is m and m.inner[1].training


def test_requires_grad_and_zero_grad():
    m = Net()
    m(flow.randn(2, 3)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0 for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    assert m.requires_grad_(False) is m
    assert not any(p.requires_grad for p in m.parameters())


def test_apply_visits_children_first():
    seen = []
    m = Net()
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Linear", "Linear", "Tanh", "Sequential", "Net"]


def test_to_double_float_keep_identity():
    m = Net()
    w = m.fc.weight
    assert m.double() is m and m.fc.weight is w and w.dtype == flow.float64
    assert m.count.dtype == flow.float64
    assert m(flow.randn(2, 3, dtype=flow.float64)).dtype == flow.float64
    m.to(flow.float32)
    assert w.dtype == flow.float32
    m.to(dtype=flow.float64)
    assert w.dtype == flow.float64
    m.to(flow.zeros(1, dtype=flow.float32))
    assert w.dtype == flow.float32
    assert m.to("cpu") is m
    bn = nn.BatchNorm1d(2).double()
    assert bn.num_batches_tracked.dtype == flow.int64
    with pytest.raises(TypeError, match="floating point"):
        m.to(flow.int32)


# ---- hooks -------------------------------------------------------------------------------------
def test_forward_pre_hook_and_forward_hook():
    m = nn.Linear(3, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out + 1)
    y = m(flow.randn(4, 3))
    np.testing.assert_allclose(y.detach().numpy(), (m.bias + 1).detach().numpy()[None]
                               .repeat(4, 0), rtol=1e-6)
    assert calls == [(4, 2)]
    h1.remove()
    h2.remove()
    x = flow.randn(4, 3)
    np.testing.assert_allclose(m(x).detach().numpy(), (x @ m.weight.t() + m.bias).detach()
                               .numpy(), rtol=1e-6)


def test_forward_hooks_with_kwargs_and_prepend():
    m = nn.Identity()
    order = []
    m.register_forward_hook(lambda mod, a, o: order.append("a"))
    m.register_forward_hook(lambda mod, a, o: order.append("b"), prepend=True)
    m.register_forward_pre_hook(lambda mod, a, kw: ((a[0] + 1,), kw), with_kwargs=True)
    assert m(flow.zeros(1)).item() == 1
    assert order == ["b", "a"]


def _backward_hook_record(mod_f, mod_t, x_shape, n_inputs=1):
    """Run the same module in both frameworks with a full backward hook; return the
    recorded (grad_input, grad_output) shapes and values."""
    rec = {}
    for name, mod, lib in (("f", mod_f, flow), ("t", mod_t, torch)):
        got = []
        mod.register_full_backward_hook(
            lambda m, gi, go, got=got: got.append((gi, go)))
        xs = [lib.tensor(np.random.default_rng(i).standard_normal(x_shape).astype(np.float32),
                         requires_grad=True) for i in range(n_inputs)]
        out = mod(*xs)
        (out * 2).sum().backward()
        rec[name] = got
    return rec


def test_full_backward_hook_matches_torch():
    t = torch.nn.Linear(3, 2)
    m = nn.Linear(3, 2)
    m.load_state_dict(t.state_dict())
    rec = _backward_hook_record(m, t, (4, 3))
    (gi_f, go_f), = rec["f"]
    (gi_t, go_t), = rec["t"]
    assert len(gi_f) == len(gi_t) and len(go_f) == len(go_t)
    np.testing.assert_allclose(go_f[0].numpy(), go_t[0].numpy())
    np.testing.assert_allclose(gi_f[0].numpy(), gi_t[0].detach().numpy(), rtol=1e-5)


def test_full_backward_hook_replaces_grad_input_and_removes():
    m = nn.Linear(3, 2)
    h = m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0,))
    x = flow.randn(4, 3, requires_grad=True)
    m(x).sum().backward()
    assert float(x.grad.abs().sum()) == 0
    assert m.weight.grad is not None and float(m.weight.grad.abs().sum()) > 0
    h.remove()
    x.grad = None
    m(x).sum().backward()
    assert float(x.grad.abs().sum()) > 0


def test_backward_hook_when_input_needs_no_grad():
    m = nn.Linear(3, 2)
    got = []
    m.register_full_backward_hook(lambda mod, gi, go: got.append((gi, go)))
    m(flow.randn(4, 3)).sum().backward()
    assert got[0][0] == (None,) and tuple(got[0][1][0].shape) == (4, 2)


def test_backward_pre_hook_scales_grad_output():
    m = nn.Linear(3, 2)
    m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 3,))
    x = flow.randn(4, 3, requires_grad=True)
    m(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * m.weight.sum(0).detach().numpy()[None]
                               .repeat(4, 0), rtol=1e-5)


# ---- containers --------------------------------------------------------------------------------
def test_sequential_indexing_slicing_append():
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(s) == 3 and isinstance(s[-1], nn.Linear) and isinstance(s[1], nn.ReLU)
    sub = s[1:]
    assert isinstance(sub, nn.Sequential) and len(sub) == 2 and sub[1] is s[2]
    assert s.append(nn.Sigmoid()) is s and len(s) == 4
    del s[1]
    assert [n for n, _ in s.named_children()] == ["0", "1", "2"]
    s[0] = nn.Identity()
    assert isinstance(s[0], nn.Identity)
    with pytest.raises(IndexError, match="out of range"):
        s[10]
    from collections import OrderedDict
    od = nn.Sequential(OrderedDict([("a", nn.ReLU()), ("b", nn.Tanh())]))
    assert [n for n, _ in od.named_children()] == ["a", "b"]
    assert od(flow.tensor([-1.0])).item() == 0


def test_module_list_and_dict():
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(ml) == 3 and len(list(ml.parameters())) == 6
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh()])
    ml.insert(0, nn.Identity())
    assert isinstance(ml[0], nn.Identity) and len(ml) == 6 and isinstance(ml[-1], nn.Tanh)
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    md = nn.ModuleDict({"a": nn.Linear(2, 2)})
    md["b"] = nn.ReLU()
    assert list(md.keys()) == ["a", "b"] and "a" in md and len(md) == 2
    assert isinstance(md.pop("b"), nn.ReLU) and list(md) == ["a"]


def test_parameter_list_and_dict():
    pl = nn.ParameterList([flow.zeros(2), nn.Parameter(flow.ones(3))])
    assert len(pl) == 2 and isinstance(pl[0], nn.Parameter)
    pl.append(flow.ones(1))
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
    pd = nn.ParameterDict({"a": flow.zeros(2, 3)})
    pd["b"] = nn.Parameter(flow.ones(1))
    assert list(pd.keys()) == ["a", "b"] and isinstance(pd["a"], nn.Parameter)
    assert [n for n, _ in pd.named_parameters()] == ["a", "b"]
    # (torch's ParameterDict names the tensor type: FloatTensor)
    assert "Parameter containing: [flowgrad.FloatTensor of size 2x3]" in repr(pd)


# ---- repr ----------------------------------------------------------------------------------------
REPRS = [
    lambda n: n.Linear(3, 2),
    lambda n: n.Linear(3, 2, bias=False),
    lambda n: n.Sequential(n.Linear(3, 2), n.ReLU(), n.Sequential(n.Conv2d(1, 2, 3),
                                                                  n.BatchNorm2d(2))),
    lambda n: n.ModuleList([n.Linear(2, 2) for _ in range(3)] + [n.ReLU()]),
    lambda n: n.ModuleDict({"a": n.ReLU(), "b": n.Tanh()}),
    lambda n: n.TransformerEncoderLayer(8, 2, 16),
    lambda n: n.TransformerDecoderLayer(8, 2, 16, norm_first=True),
    lambda n: n.LSTM(3, 4, 2, bidirectional=True, batch_first=True),
    lambda n: n.GRU(3, 4, dropout=0.0), lambda n: n.RNN(3, 4, bias=False),
    lambda n: n.MultiheadAttention(8, 2),
    lambda n: n.Conv1d(2, 4, 3, padding="same", padding_mode="reflect"),
    lambda n: n.Conv2d(2, 4, 3, stride=2, padding=1, dilation=2, groups=2, bias=False),
    lambda n: n.Conv3d(1, 1, 2), lambda n: n.ConvTranspose1d(2, 3, 3, stride=2),
    lambda n: n.ConvTranspose2d(2, 3, 3, stride=2, output_padding=1),
    lambda n: n.MaxPool2d(2), lambda n: n.MaxPool1d(3, 2, 1), lambda n: n.AvgPool1d(2),
    lambda n: n.AvgPool2d(2, 1), lambda n: n.AdaptiveAvgPool2d((2, 3)),
    lambda n: n.AdaptiveAvgPool1d(3), lambda n: n.AdaptiveMaxPool2d(2),
    lambda n: n.BatchNorm1d(3, momentum=None), lambda n: n.InstanceNorm2d(3),
    lambda n: n.LayerNorm([2, 3], elementwise_affine=False), lambda n: n.GroupNorm(2, 4),
    lambda n: n.RMSNorm(3), lambda n: n.Dropout(), lambda n: n.Dropout2d(0.2),
    lambda n: n.AlphaDropout(0.1), lambda n: n.Embedding(3, 4, padding_idx=0),
    lambda n: n.Bilinear(2, 3, 4), lambda n: n.Identity(),
    lambda n: n.ReLU(), lambda n: n.ReLU(inplace=True), lambda n: n.ReLU6(),
    lambda n: n.LeakyReLU(0.2), lambda n: n.ELU(), lambda n: n.SELU(), lambda n: n.CELU(),
    lambda n: n.GELU("tanh"), lambda n: n.SiLU(), lambda n: n.Mish(), lambda n: n.Softplus(),
    lambda n: n.Softsign(), lambda n: n.Hardtanh(-2, 2), lambda n: n.Hardsigmoid(),
    lambda n: n.Hardswish(), lambda n: n.Hardshrink(), lambda n: n.Softshrink(0.3),
    lambda n: n.Tanhshrink(), lambda n: n.Threshold(0.1, 2), lambda n: n.PReLU(3),
    lambda n: n.GLU(), lambda n: n.LogSigmoid(), lambda n: n.Sigmoid(), lambda n: n.Tanh(),
    lambda n: n.Softmax(1), lambda n: n.LogSoftmax(-1), lambda n: n.Softmin(0),
    lambda n: n.Flatten(), lambda n: n.Unflatten(1, (2, 3)), lambda n: n.Upsample(
        scale_factor=2), lambda n: n.Upsample(size=(4, 4), mode="bilinear"),
    lambda n: n.PixelShuffle(2), lambda n: n.PixelUnshuffle(2), lambda n: n.ZeroPad2d(1),
    lambda n: n.ConstantPad1d(2, 3.0), lambda n: n.ReflectionPad2d((1, 0, 2, 1)),
    lambda n: n.ReplicationPad1d(2), lambda n: n.CosineSimilarity(),
    lambda n: n.PairwiseDistance(), lambda n: n.CrossEntropyLoss(), lambda n: n.MSELoss(),
    lambda n: n.CTCLoss(),
]


@pytest.mark.parametrize("ctor", REPRS, ids=[str(i) for i in range(len(REPRS))])
def test_repr_matches_torch(ctor):
    assert repr(ctor(nn)) == repr(ctor(torch.nn))


# ---- nn.init ----------------------------------------------------------------------------
@pytest.mark.parametrize("args", [("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",),
                                  ("leaky_relu",), ("leaky_relu", 0.2), ("selu",)])
def test_calculate_gain(args):
    assert nn.init.calculate_gain(*args) == pytest.approx(torch.nn.init.calculate_gain(*args))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: nn.init.calculate_gain("foo"), ValueError, "Unsupported nonlinearity foo"),
    (lambda: nn.init.calculate_gain("leaky_relu", "x"), ValueError, "not a valid number"),
    (lambda: nn.init.xavier_uniform_(flow.empty(3)), ValueError, "fewer than 2 dimensions"),
    (lambda: nn.init.eye_(flow.empty(2, 2, 2)), ValueError, "2 dimensions"),
    (lambda: nn.init.dirac_(flow.empty(2, 2)), ValueError, "3, 4, or 5 dimensions"),
    (lambda: nn.init.kaiming_uniform_(flow.empty(2, 2), mode="fan"), ValueError,
     "Mode fan not supported"),
    (lambda: nn.init.orthogonal_(flow.empty(3)), ValueError, "2 or more dimensions"),
])
def test_init_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def _moments(fn, shape=(200, 300)):
    w = flow.empty(*shape)
    assert fn(w) is w
    a = w.numpy()
    return a.mean(), a.std(), a.min(), a.max()


@pytest.mark.parametrize("name, fn, std, bound", [
    ("uniform", lambda w: nn.init.uniform_(w, -2, 2), 4 / math.sqrt(12), 2),
    ("normal", lambda w: nn.init.normal_(w, 0, 0.5), 0.5, None),
    ("xavier_uniform", lambda w: nn.init.xavier_uniform_(w), math.sqrt(2 / 500), None),
    ("xavier_normal", lambda w: nn.init.xavier_normal_(w, gain=2), 2 * math.sqrt(2 / 500),
     None),
    ("kaiming_uniform", lambda w: nn.init.kaiming_uniform_(w, a=math.sqrt(5)),
     1 / math.sqrt(300) / math.sqrt(3), 1 / math.sqrt(300)),
    ("kaiming_normal", lambda w: nn.init.kaiming_normal_(w, mode="fan_out",
                                                         nonlinearity="relu"),
     math.sqrt(2 / 200), None),
    ("trunc_normal", lambda w: nn.init.trunc_normal_(w, 0, 1, -1, 1), 0.5398, 1),
])
def test_init_distributions(name, fn, std, bound):
    mean, s, lo, hi = _moments(fn)
    assert abs(mean) < 4 * std / math.sqrt(60000) + 1e-3
    assert s == pytest.approx(std, rel=0.03)
    if bound is not None:
        assert -bound <= lo and hi <= bound and hi > 0.95 * bound


def test_init_deterministic_fills():
    w = flow.empty(3, 4)
    assert nn.init.constant_(w, 0.5).numpy().tolist() == [[0.5] * 4] * 3
    assert nn.init.ones_(w).numpy().sum() == 12 and nn.init.zeros_(w).numpy().sum() == 0
    np.testing.assert_array_equal(nn.init.eye_(w).numpy(), np.eye(3, 4))
    d = nn.init.dirac_(flow.empty(4, 2, 3, 3), groups=2)
    t = torch.nn.init.dirac_(torch.empty(4, 2, 3, 3), groups=2)
    np.testing.assert_array_equal(d.numpy(), t.numpy())


@pytest.mark.parametrize("shape", [(4, 6), (6, 4), (3, 2, 2)])
def test_orthogonal(shape):
    w = nn.init.orthogonal_(flow.empty(*shape), gain=2.0).numpy().reshape(shape[0], -1)
    small = w @ w.T if shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(small, 4 * np.eye(small.shape[0]), atol=1e-5)


def test_init_does_not_record_and_keeps_grad_flag():
    p = nn.Parameter(flow.zeros(3, 3))
    nn.init.normal_(p)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None


def test_default_layer_init_bounds():
    lin = nn.Linear(50, 40)
    b = 1 / math.sqrt(50)
    assert np.abs(lin.weight.detach().numpy()).max() <= b
    assert np.abs(lin.bias.detach().numpy()).max() <= b
    conv = nn.Conv2d(4, 8, 3)
    b = 1 / math.sqrt(4 * 9)
    assert np.abs(conv.weight.detach().numpy()).max() <= b
    assert np.abs(conv.bias.detach().numpy()).max() <= b
    emb = nn.Embedding(100, 50, padding_idx=3)
    e = emb.weight.detach().numpy()
    assert (e[3] == 0).all() and abs(e.std() - 1) < 0.05
    lstm = nn.LSTM(5, 16)
    assert all(np.abs(p.detach().numpy()).max() <= 0.25 for p in lstm.parameters())
    mha = nn.MultiheadAttention(8, 2)
    assert (mha.in_proj_bias.detach().numpy() == 0).all()
    assert (mha.out_proj.bias.detach().numpy() == 0).all()
    bn = nn.BatchNorm2d(3)
    assert bn.weight.detach().numpy().tolist() == [1, 1, 1]
    assert bn.running_var.numpy().tolist() == [1, 1, 1]


def test_manual_seed_reproduces_init():
    flow.manual_seed(3)
    a = nn.Linear(4, 4).weight.detach().numpy().copy()
    flow.manual_seed(3)
    b = nn.Linear(4, 4).weight.detach().numpy()
    np.testing.assert_array_equal(a, b)


def test_full_backward_hook_two_inputs_matches_torch():
    t = torch.nn.Bilinear(3, 3, 2)
    m = nn.Bilinear(3, 3, 2)
    m.load_state_dict(t.state_dict())
    rec = _backward_hook_record(m, t, (4, 3), n_inputs=2)
    (gi_f, go_f), = rec["f"]
    (gi_t, go_t), = rec["t"]
    assert len(gi_f) == len(gi_t) == 2
    for a, b in zip(gi_f, gi_t):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_full_backward_hook_on_module_with_tuple_output():
    m = nn.LSTM(3, 4)
    got = []
    m.register_full_backward_hook(lambda mod, gi, go: got.append((len(gi), len(go))))
    x = flow.randn(5, 2, 3, requires_grad=True)
    out, (h, c) = m(x)
    out.sum().backward()
    # one grad_output per element of the returned tuple, as torch's: None for the (h, c) pair
    assert got == [(1, 2)] and x.grad is not None


def test_del_from_sequential_and_module_list_renumbers_like_torch():
    for_modules = []
    for m in (flow, torch):
        s = m.nn.Sequential(m.nn.ReLU(), m.nn.Tanh(), m.nn.Sigmoid(), m.nn.GELU())
        del s[1]
        del s[-1]
        ml = m.nn.ModuleList([m.nn.ReLU(), m.nn.Tanh(), m.nn.Sigmoid(), m.nn.GELU()])
        del ml[0:2]
        for_modules.append(([type(x).__name__ for x in s], list(s._modules),
                            [type(x).__name__ for x in ml], list(ml._modules)))
    assert for_modules[0] == for_modules[1]
