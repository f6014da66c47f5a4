"""Mixed precision against torch's CPU autocast: per-op output dtypes and values (bfloat16
and float16), nesting and enabled=, backward dtypes, the weight-cast cache, GradScaler's
numbers, nn.Graph's enable_amp, and a digits CNN trained under bfloat16 autocast."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow

DTYPES = {"bfloat16": (flow.bfloat16, torch.bfloat16), "float16": (flow.float16, torch.float16)}


def _tensor(m, a, grad=False):
    t = m.tensor(a) if m is flow else torch.tensor(a)
    return t.requires_grad_(True) if grad else t


def _np(t):
    if isinstance(t, (tuple, list)):
        return _np(t[0])
    return t.detach().float().numpy() if isinstance(t, torch.Tensor) else \
        t.detach().float().numpy()


def _name(t):
    t = t[0] if isinstance(t, (tuple, list)) else t
    return str(t.dtype).split(".")[-1]


rng = np.random.default_rng(0)
A, B, V = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (4, 5), (4,)))
IMG = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
IMG3 = rng.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
BIAS = rng.standard_normal(4).astype(np.float32)
SQ = (rng.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)
P = rng.uniform(0.1, 0.9, (3, 5)).astype(np.float32)
LBL = np.array([0, 2, 4])

# (case, fn(m, F, x) -> output); x(name) makes the named array a tensor of module m. Each
# input starts in float32 unless the case casts it (`.to(lp)`, lp: the autocast dtype)
CASES = [
    # lower precision
    ("matmul", lambda m, F, x, lp: x("A") @ x("B")),
    ("mm", lambda m, F, x, lp: m.mm(x("A"), x("B"))),
    ("bmm", lambda m, F, x, lp: m.bmm(x("A")[None], x("B")[None])),
    ("linear", lambda m, F, x, lp: F.linear(x("A"), x("B").T, x("BIAS")[:0].new_zeros(5))),
    ("conv2d+bias", lambda m, F, x, lp: F.conv2d(x("IMG"), x("W"), x("BIAS"), padding=1)),
    ("conv_transpose2d", lambda m, F, x, lp: F.conv_transpose2d(x("IMG"), x("W").transpose(0, 1))),
    ("addmm", lambda m, F, x, lp: m.addmm(x("B")[:3], x("A"), x("B"), beta=0.5)),
    ("baddbmm", lambda m, F, x, lp: m.baddbmm(x("B")[None, :3], x("A")[None], x("B")[None])),
    ("einsum", lambda m, F, x, lp: m.einsum("ij,jk->ik", x("A"), x("B"))),
    ("prelu", lambda m, F, x, lp: F.prelu(x("A"), x("BIAS")[:1])),
    ("sdpa", lambda m, F, x, lp: F.scaled_dot_product_attention(x("A")[None], x("A")[None],
                                                                 x("B").T[None, :3])),
    ("float64 stays", lambda m, F, x, lp: x("A").double() @ x("B").double()),
    # float32
    ("cross_entropy", lambda m, F, x, lp: F.cross_entropy(x("A") @ x("B"), x("LBL"))),
    ("nll_loss", lambda m, F, x, lp: F.nll_loss((x("A") @ x("B")).log_softmax(1), x("LBL"))),
    ("mse_loss", lambda m, F, x, lp: F.mse_loss(x("A").to(lp), x("A").to(lp) * 2)),
    ("l1_loss", lambda m, F, x, lp: F.l1_loss(x("A").to(lp), x("A"))),
    ("bce", lambda m, F, x, lp: F.binary_cross_entropy(x("P").to(lp), x("P"))),
    ("bce_logits", lambda m, F, x, lp: F.binary_cross_entropy_with_logits(x("A").to(lp),
                                                                         x("A").sigmoid())),
    ("kl_div", lambda m, F, x, lp: F.kl_div(x("P").to(lp).log(), x("P"), reduction="sum")),
    ("prod", lambda m, F, x, lp: x("P").to(lp).prod(1)),
    ("cdist", lambda m, F, x, lp: m.cdist(x("A").to(lp), x("A").to(lp))),
    ("trace", lambda m, F, x, lp: m.trace(x("SQ").to(lp))),
    ("inverse", lambda m, F, x, lp: m.linalg.inv(x("SQ").to(lp))),
    ("max_pool3d", lambda m, F, x, lp: F.max_pool3d(x("IMG3").to(lp), 2)),
    ("avg_pool3d", lambda m, F, x, lp: F.avg_pool3d(x("IMG3").to(lp), 2)),
    ("rfft", lambda m, F, x, lp: m.fft.rfft(x("V").to(lp)).abs()),
    # promote
    ("cat", lambda m, F, x, lp: m.cat([x("A").to(lp), x("A")])),
    ("cat lower", lambda m, F, x, lp: m.cat([x("A").to(lp), x("A").to(lp)])),
    ("stack", lambda m, F, x, lp: m.stack([x("A").to(lp), x("A")])),
    # through: run on the dtypes they get
    ("softmax", lambda m, F, x, lp: (x("A") @ x("B")).softmax(1)),
    ("softmax fp32", lambda m, F, x, lp: x("A").softmax(1)),
    ("layer_norm", lambda m, F, x, lp: F.layer_norm(x("A") @ x("B"), (5,), x("BIAS")[:1].expand(5),
                                                     x("BIAS")[1:2].expand(5))),
    ("relu+sum", lambda m, F, x, lp: (x("A") @ x("B")).relu().sum(1)),
    ("add fp32", lambda m, F, x, lp: (x("A") @ x("B")) + x("B")[:3]),
    ("mv", lambda m, F, x, lp: m.mv(x("A"), x("V"))),
    ("dot", lambda m, F, x, lp: m.dot(x("V"), x("V"))),
]
ARRAYS = dict(A=A, B=B, V=V, IMG=IMG, IMG3=IMG3, W=W, BIAS=BIAS, SQ=SQ, P=P, LBL=LBL)


def _run(m, fn, dtype):
    F = flow.nn.functional if m is flow else torch.nn.functional
    return fn(m, F, lambda k: _tensor(m, ARRAYS[k]), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_policy_matches_torch(case, dtype):
    fd, td = DTYPES[dtype]
    _, fn = case
    with flow.autocast("cpu", dtype=fd):
        got = _run(flow, fn, fd)
    with torch.autocast("cpu", dtype=td):
        want = _run(torch, fn, td)
    assert _name(got) == _name(want)
    tol = 2e-2 if "float32" not in _name(want) else 2e-3  # torch's kernels round differently
    np.testing.assert_allclose(_np(got), _np(want), rtol=tol, atol=tol * 4)


def test_backward_dtypes_and_values_match_torch():
    def run(m, ac):
        x, w, b = (_tensor(m, a, True) for a in (A, B.T.copy(), BIAS[:1].repeat(5)))
        with ac("cpu"):
            h = (m.nn.functional.linear(x, w, b).relu() @ w).sum(1)
            loss = (h * h).mean()
        loss.backward()
        return h, loss, x.grad, w.grad, b.grad
    got, want = run(flow, flow.autocast), run(torch, torch.autocast)
    for g, t in zip(got, want):
        assert _name(g) == _name(t)
        np.testing.assert_allclose(_np(g), _np(t), rtol=3e-2, atol=3e-2)


def test_backward_inside_region_and_cast_rules():
    x = flow.tensor(A, requires_grad=True)
    with flow.autocast("cpu"):
        y = x @ x.T
        assert y.grad_fn is not None and y.dtype is flow.bfloat16
        y.float().sum().backward()
    assert x.grad.dtype is flow.float32
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.ones((3, 3)) @ A, rtol=2e-2, atol=5e-2)


def test_nesting_enabled_and_state():
    a = flow.tensor(A)
    assert not flow.is_autocast_enabled("cpu")
    with flow.autocast("cpu", dtype=flow.float16):
        assert flow.is_autocast_enabled("cpu") and not flow.is_autocast_enabled()
        with flow.autocast("cpu", enabled=False):
            assert not flow.is_autocast_enabled("cpu")
            assert flow.get_autocast_dtype("cpu") is flow.float16  # as torch: dtype kept
            assert (a @ a.T).dtype is flow.float32
            with flow.autocast("cpu"):  # no dtype: the current one, as torch
                assert (a @ a.T).dtype is flow.float16
        assert (a @ a.T).dtype is flow.float16
        with flow.autocast("cpu", dtype=flow.bfloat16):
            assert (a @ a.T).dtype is flow.bfloat16
        assert flow.get_autocast_dtype("cpu") is flow.float16
    assert flow.get_autocast_dtype("cpu") is flow.bfloat16
    assert (a @ a.T).dtype is flow.float32
    assert flow.autograd.interpreter.current is flow.autograd.interpreter.AutogradInterpreter

    @flow.autocast("cpu")
    def f(t):
        return t @ t.T
    assert f(a).dtype is flow.bfloat16 and not flow.is_autocast_enabled("cpu")
    flow.set_autocast_enabled("cpu", True)
    try:
        assert (a @ a.T).dtype is flow.bfloat16 and flow.is_autocast_cpu_enabled()
    finally:
        flow.set_autocast_enabled("cpu", False)
    assert (a @ a.T).dtype is flow.float32
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        flow.autocast("tpu")
    with pytest.warns(UserWarning, match="target dtype is not supported"):
        with flow.autocast("cpu", dtype=flow.float64):
            assert not flow.is_autocast_enabled("cpu")


def test_cuda_spellings_disable_as_torch_without_cuda():
    a = flow.tensor(A)
    for make in (lambda m: m.autocast("cuda"), lambda m: m.cuda.amp.autocast()):
        with pytest.warns((UserWarning, FutureWarning)), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            with make(flow):
                assert (a @ a.T).dtype is flow.float32 and not flow.is_autocast_enabled("cuda")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with make(torch):
                assert not torch.is_autocast_enabled("cuda")
    from flowgrad.cuda.amp import GradScaler

    with pytest.warns(UserWarning, match="CUDA is not available"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        scaler = GradScaler()
    loss = flow.tensor(2.0)
    assert not scaler.is_enabled() and scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    with pytest.warns(FutureWarning):
        with flow.cpu.amp.autocast():
            assert (a @ a.T).dtype is flow.bfloat16
    assert flow.cpu.is_available() and torch.cpu.is_available()


def test_inference_mode_inside_autocast():
    lin = flow.nn.Linear(4, 2)
    with flow.autocast("cpu"), flow.inference_mode():
        y = lin(flow.tensor(A))
    assert y.dtype is flow.bfloat16 and y.is_inference()


def test_weight_cast_cache():
    w = flow.tensor(B, requires_grad=True)
    x = flow.tensor(A)
    cache = flow.amp.autocast_mode.state.cache
    with flow.autocast("cpu"):
        y1, y2 = x @ w, x @ w
        with flow.autocast("cpu"):
            y3 = x @ w
        assert list(cache) == [id(w)]  # one cast of the weight, kept for the outer region
    assert not cache  # dropped when the outermost region exits
    (y1.float().sum() + y2.float().sum() + y3.float().sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), 3 * A.T @ np.ones((3, 5)), rtol=2e-2)
    with flow.autocast("cpu", cache_enabled=False):
        x @ w
        assert not cache and not flow.is_autocast_cache_enabled()
    assert flow.is_autocast_cache_enabled()


def test_promote_refuses_other_lower_dtype_as_torch():
    with flow.autocast("cpu"):
        with pytest.raises(RuntimeError, match="cannot promote"):
            flow.cat([flow.ones(2).half(), flow.ones(2).bfloat16()])
    with torch.autocast("cpu"):
        with pytest.raises(RuntimeError, match="prioritize"):
            torch.cat([torch.ones(2).half(), torch.ones(2).bfloat16()])


def _scaler_run(m, steps, init_scale=8.0, growth_interval=2):
    """A few steps of SGD with the loss scaled; an inf injected at the steps in `steps`."""
    w = m.nn.Parameter(_tensor(m, np.array([1.0, -2.0, 3.0], np.float32)))
    opt = m.optim.SGD([w], lr=0.1)
    scaler = m.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    trace = []
    for i in range(6):
        opt.zero_grad()
        loss = (w * w).sum() * (float("inf") if i in steps else 1.0)
        scaler.scale(loss).backward()
        if i == 1:
            scaler.unscale_(opt)
            trace.append(_np(w.grad).tolist())
        stepped = scaler.step(opt)
        scaler.update()
        trace.append((scaler.get_scale(), scaler._get_growth_tracker(), stepped,
                      _np(w).tolist()))
    return trace, scaler.state_dict()


def test_grad_scaler_numbers_match_torch():
    for steps in ((), (2,), (0, 3, 4)):
        got, want = _scaler_run(flow, steps), _scaler_run(torch, steps)
        assert got[1] == want[1]
        for g, t in zip(got[0], want[0]):
            np.testing.assert_allclose(np.array(g[-1] if isinstance(g, tuple) else g),
                                       np.array(t[-1] if isinstance(t, tuple) else t),
                                       rtol=1e-6)
            if isinstance(g, tuple):
                assert g[:3] == t[:3]


def test_grad_scaler_state_dict_and_errors():
    scaler = flow.amp.GradScaler("cpu", init_scale=4.0)
    other = torch.amp.GradScaler("cpu", init_scale=4.0)
    assert scaler.state_dict() == other.state_dict()
    scaler.load_state_dict({"scale": 32.0, "growth_factor": 3.0, "backoff_factor": 0.25,
                            "growth_interval": 5, "_growth_tracker": 2})
    assert scaler.get_scale() == 32.0 and scaler._get_growth_tracker() == 2
    w = flow.nn.Parameter(flow.ones(2))
    opt = flow.optim.SGD([w], lr=0.1)
    with pytest.raises(AssertionError, match="did not use scaler.scale"):
        scaler.step(opt)
    scaler.scale(w.sum()).backward()
    assert w.grad.tolist() == [32.0, 32.0]
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update(2.0)
    assert scaler.get_scale() == 2.0
    with pytest.raises(RuntimeError, match="empty"):
        scaler.load_state_dict({})
    disabled = flow.amp.GradScaler("cpu", enabled=False)
    assert disabled.state_dict() == {} and disabled.get_scale() == 1.0


def test_custom_fwd_bwd():
    class MM(flow.autograd.Function):
        @staticmethod
        @flow.amp.custom_fwd(device_type="cpu", cast_inputs=flow.float32)
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        @flow.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            assert not flow.is_autocast_enabled("cpu")  # forward ran with it off
            return g @ b.T, a.T @ g

    a = flow.tensor(A, requires_grad=True)
    with flow.autocast("cpu"):
        y = MM.apply(a.bfloat16(), flow.tensor(B))
    assert y.dtype is flow.float32
    y.sum().backward()
    assert a.grad.dtype is flow.float32


class _Net(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = flow.nn.Conv2d(1, 8, 3, padding=1)
        self.bn = flow.nn.BatchNorm2d(8)
        self.fc = flow.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        h = flow.nn.functional.max_pool2d(self.bn(self.conv(x)).relu(), 2)
        return self.fc(h.flatten(1))


def test_graph_enable_amp_matches_eager_autocast():
    flow.manual_seed(0)
    net = _Net()
    eager = _Net()
    eager.load_state_dict(net.state_dict())
    x = flow.tensor(rng.standard_normal((8, 1, 8, 8)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 10, 8))

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.net = net
            self.add_optimizer(flow.optim.SGD(net.parameters(), lr=0.1))
            self.config.enable_amp(True, dtype=flow.bfloat16)

        def build(self, x, y):
            logits = self.net(x)
            loss = flow.nn.functional.cross_entropy(logits, y)
            loss.backward()
            return logits, loss

    graph = Train()
    opt = flow.optim.SGD(eager.parameters(), lr=0.1)
    for _ in range(3):
        g_logits, g_loss = graph(x, y)
        with flow.autocast("cpu"):
            logits = eager(x)
            loss = flow.nn.functional.cross_entropy(logits, y)
            loss.backward()
        opt.step()
        opt.zero_grad()
        assert g_logits.dtype is logits.dtype is flow.bfloat16
        assert g_loss.dtype is loss.dtype is flow.float32
        np.testing.assert_allclose(g_loss.numpy(), loss.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(g_logits.float().numpy(), logits.detach().float().numpy(),
                                   rtol=1e-6)
    for p, q in zip(net.parameters(), eager.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_a_graph_traced_inside_an_autocast_region_casts_the_weights_itself():
    """A graph with enable_amp compiled inside an autocast region in which the model had run
    eagerly: the trace found the region's cached bfloat16 casts of the weights and froze them
    into the plan, so in later regions, after the weights were updated, the plan kept
    computing with the first call's weights, with no error. A trace has a cast cache of its
    own."""
    lin = flow.nn.Linear(3, 3)

    class Eval(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = lin
            self.config.enable_amp(True, dtype=flow.bfloat16)

        def build(self, x):
            return self.lin(x)

    graph, x = Eval(), flow.ones(2, 3)
    for _ in range(3):
        with flow.autocast("cpu"):
            want = lin(x).tolist()
            assert graph(x).tolist() == want
        with flow.no_grad():
            lin.weight.mul_(2)


def _digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    return x[:600], d.target[:600], x[1200:], d.target[1200:]


def _train_digits(amp):
    xtr, ytr, xte, yte = _digits()
    flow.manual_seed(0)
    net = _Net()
    opt = flow.optim.Adam(net.parameters(), lr=1e-2)
    scaler = flow.amp.GradScaler("cpu", enabled=amp)  # bf16 needs none; the API is the same
    order = np.random.default_rng(0).permutation(len(xtr))
    for _ in range(3):
        for i in range(0, len(xtr), 50):
            idx = order[i:i + 50]
            with flow.autocast("cpu", enabled=amp):
                logits = net(flow.tensor(xtr[idx]))
                assert logits.dtype is (flow.bfloat16 if amp else flow.float32)
                loss = flow.nn.functional.cross_entropy(logits, flow.tensor(ytr[idx]))
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    net.eval()
    with flow.no_grad(), flow.autocast("cpu", enabled=amp):
        logits = net(flow.tensor(xte))
    return (logits.float().argmax(1).numpy() == yte).mean()


def test_digits_cnn_bfloat16_autocast_accuracy():
    """36 Adam steps on 600 digits, tested on 597 others: float32 reaches ~0.86."""
    acc32, acc16 = _train_digits(False), _train_digits(True)
    assert acc32 > 0.8 and abs(acc16 - acc32) < 0.04, (acc32, acc16)


def test_top_level_grad_scaler_is_amps():
    assert (flow.GradScaler is flow.amp.GradScaler) == (torch.GradScaler is torch.amp.GradScaler)


def test_numpy_spellings_of_composites_under_and_after_autocast():
    """cat/stack/prod/quantile take axis=/keepdims= as torch's do, inside autocast (which
    casts them by its policy) and after it installed its wrappers: the install replaced a
    method's inner function and dropped the spelling (x.prod(axis=0) raised TypeError)."""
    def run(m):
        a = m.ones(2, 2)
        b = m.ones(2, 2, dtype=m.bfloat16)
        with m.autocast("cpu"):
            inside = [m.cat([a, b], axis=0), m.stack([a, b], axis=1), a.prod(axis=0),
                      b.prod(axis=0, keepdims=True), a.quantile(0.5, axis=0)]
        after = [a.prod(axis=1, keepdims=True), a.quantile(0.5, axis=1), a.sum(axis=0)]
        return [(str(t.dtype).split(".")[-1], t.float().tolist()) for t in inside + after]
    assert run(flow) == run(torch)
