"""torch names added together, each against torch: asarray, frombuffer, empty_strided,
new_empty_strided, range, fill, get/set_default_device, Tensor.apply_/map_, F.gumbel_softmax,
and nn.utils' BatchNorm fusion and skip_init."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow


def _same(ours, theirs, atol=0.0):
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype.name == str(theirs.dtype).split(".")[1]
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=atol,
                               rtol=atol)


# ---- asarray ---------------------------------------------------------------------------------
ASARRAY = [
    (lambda: [1, 2.5], {}),
    (lambda: [[1, 2], [3, 4]], {}),
    (lambda: 3.0, {}),
    (lambda: True, {}),
    (lambda: np.float32(2), {}),
    (lambda: np.arange(3.0), {}),
    (lambda: np.arange(3.0), {"dtype": "float32"}),
    (lambda: [1, 2], {"dtype": "float64", "requires_grad": True}),
    (lambda: np.arange(6, dtype=np.int32).reshape(2, 3), {"copy": True}),
]


@pytest.mark.parametrize("case", range(len(ASARRAY)))
def test_asarray_values_dtypes_as_torch(case):
    make, kwargs = ASARRAY[case]
    ours = flow.asarray(make(), **{k: getattr(flow, v) if k == "dtype" else v
                                   for k, v in kwargs.items()})
    theirs = torch.asarray(make(), **{k: getattr(torch, v) if k == "dtype" else v
                                      for k, v in kwargs.items()})
    _same(ours, theirs)
    assert ours.requires_grad == theirs.requires_grad


def test_asarray_shares_memory_as_torch():
    for m in (flow, torch):
        a = np.arange(3.0)
        shared, copied = m.asarray(a), m.asarray(a, copy=True)
        a[0] = 9.0
        assert shared[0].item() == 9.0 and copied[0].item() == 0.0
        t = m.ones(2)
        assert m.asarray(t) is t
        with pytest.raises(ValueError):
            m.asarray(t, dtype=m.float64, copy=False)
        with pytest.raises(ValueError):
            m.asarray([1.0, 2.0], copy=False)


def test_asarray_of_a_tensor_keeps_its_history_as_torch():
    results = []
    for m in (flow, torch):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        h = x * 3
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's note on requires_grad's new default
            converted, copied = m.asarray(h, dtype=m.float64), m.asarray(h, copy=True)
            shared = m.asarray(h)
        cut = m.asarray(h, dtype=m.float64, requires_grad=False)
        assert shared is h and converted.requires_grad and copied.requires_grad
        assert not cut.requires_grad
        (converted.sum() * 2 + (copied * copied).sum()).backward()
        results.append(x.grad)
    _same(*results)


def test_asarray_of_a_leaf_without_requires_grad_is_the_leaf_with_its_flag_off_as_torch():
    """torch 2.13 returns a leaf that requires grad itself and turns its flag off (so a later
    loss through the leaf gives it no gradient); flowgrad returned a detached alias and left
    the leaf requiring grad. A non-leaf gives a detached alias in both."""
    outcomes = []
    for m in (flow, torch):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        a = m.asarray(x, requires_grad=False)
        h = x * 2
        b = m.asarray(h, requires_grad=False)
        outcomes.append((a is x, x.requires_grad, b is h, b.requires_grad, h.requires_grad,
                         b._base is None))
    assert outcomes[0] == outcomes[1]


# ---- frombuffer ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,count,offset", [("float32", -1, 0), ("float32", 1, 4),
                                                ("uint8", 5, 2), ("int16", -1, 2),
                                                ("float64", -1, 8)])
def test_frombuffer_as_torch_and_shared(dtype, count, offset):
    raw = bytes(range(48))
    ours_buffer, theirs_buffer = bytearray(raw), bytearray(raw)
    ours = flow.frombuffer(ours_buffer, dtype=getattr(flow, dtype), count=count, offset=offset)
    theirs = torch.frombuffer(theirs_buffer, dtype=getattr(torch, dtype), count=count,
                              offset=offset)
    _same(ours, theirs)
    ours_buffer[offset] ^= 0xFF
    theirs_buffer[offset] ^= 0xFF
    _same(ours, theirs)  # both see the buffer's change


@pytest.mark.parametrize("kwargs", [dict(count=100), dict(offset=48), dict(count=0),
                                    dict(offset=-1)])
def test_frombuffer_refuses_as_torch(kwargs):
    with pytest.raises(ValueError):
        torch.frombuffer(bytearray(48), dtype=torch.float32, **kwargs)
    with pytest.raises(ValueError):
        flow.frombuffer(bytearray(48), dtype=flow.float32, **kwargs)


# ---- empty_strided, range, fill, default device ----------------------------------------------
@pytest.mark.parametrize("size,stride", [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((4,), (2,)),
                                         ((2, 0, 3), (3, 3, 1)), ((), ())])
def test_empty_strided_layout_as_torch(size, stride):
    ours, theirs = flow.empty_strided(size, stride), torch.empty_strided(size, stride)
    assert ours.stride() == theirs.stride() and tuple(ours.shape) == tuple(theirs.shape)
    assert ours.is_contiguous() == theirs.is_contiguous() and ours.dtype == flow.float32
    o2 = flow.ones(2, dtype=flow.float64).new_empty_strided(size, stride)
    t2 = torch.ones(2, dtype=torch.float64).new_empty_strided(size, stride)
    assert o2.stride() == t2.stride() and o2.dtype == flow.float64
    with pytest.raises(RuntimeError):
        flow.empty_strided((2, 3), (1,))


@pytest.mark.parametrize("args", [(1, 4), (0, 1, 0.3), (-2, 2, 0.5), (5, 1, -1), (0, 0)])
def test_range_is_inclusive_and_deprecated_as_torch(args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = flow.range(*args)
    assert any("deprecated" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.range(*args)
    _same(ours, theirs, atol=1e-6)


def test_fill_is_out_of_place_with_torchs_gradients():
    for m in (flow, torch):
        x = m.zeros(2, 3, requires_grad=True)
        v = m.tensor(2.0, requires_grad=True)
        y = m.fill(x, v)
        assert y.tolist() == [[2.0] * 3] * 2 and x.abs().sum().item() == 0
        (y * m.arange(6.0).reshape(2, 3)).sum().backward()
        assert v.grad.item() == 15.0 and x.grad is None or not x.grad.abs().sum().item()


def test_default_device_is_the_cpu():
    assert str(flow.get_default_device()) == str(torch.get_default_device()) == "cpu"
    flow.set_default_device("cpu")
    flow.set_default_device(None)
    with pytest.raises(RuntimeError):
        flow.set_default_device("cuda")


# ---- apply_, map_ ----------------------------------------------------------------------------
def test_apply_and_map_as_torch():
    for m in (flow, torch):
        x = m.arange(6.0).reshape(2, 3)
        before = x._version if m is flow else None
        assert x.apply_(lambda v: v * v + 1) is x
        assert x.tolist() == [[1.0, 2.0, 5.0], [10.0, 17.0, 26.0]]
        # (torch 2.13's apply_ leaves the version as it was; flowgrad's, a write, moves it so
        # a saved tensor or a view's history sees the change)
        assert m is torch or x._version == before + 1
        y = m.ones(2, 3, dtype=m.int64)
        y.map_(m.tensor([1, 2, 3]), lambda a, b: a * 10 + b)
        assert y.tolist() == [[11, 12, 13], [11, 12, 13]]
        with pytest.raises(RuntimeError, match="requires grad"):
            m.ones(2, requires_grad=True).apply_(lambda v: v)


# ---- gumbel_softmax --------------------------------------------------------------------------
@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("tau,dim", [(1.0, -1), (0.5, 0), (2.0, 1)])
def test_gumbel_softmax_against_torch_given_the_same_noise(hard, tau, dim):
    """flowgrad's noise is -log(E) for E drawn by exponential_; torch computes on that same
    noise (re-drawn from the same seed): values and gradients agree."""
    rng = np.random.default_rng(0)
    logits0 = rng.standard_normal((4, 5))
    weights = rng.standard_normal((4, 5))
    flow.manual_seed(11)
    x = flow.tensor(logits0, requires_grad=True)
    y = flow.nn.functional.gumbel_softmax(x, tau=tau, hard=hard, dim=dim)
    (y * flow.tensor(weights)).sum().backward()
    flow.manual_seed(11)
    exp_draws = flow.empty(4, 5, dtype=flow.float64).exponential_().numpy()
    tx = torch.tensor(logits0, requires_grad=True)
    soft = ((tx - torch.log(torch.tensor(exp_draws))) / tau).softmax(dim)
    if hard:
        index = soft.max(dim, keepdim=True)[1]
        ty = torch.zeros_like(tx).scatter_(dim, index, 1.0) - soft.detach() + soft
    else:
        ty = soft
    (ty * torch.tensor(weights)).sum().backward()
    _same(y, ty, atol=1e-12)
    _same(x.grad, tx.grad, atol=1e-12)


def test_gumbel_softmax_samples_follow_the_softmax():
    flow.manual_seed(0)
    logits = flow.tensor([0.0, 1.0, 2.0]).expand(20000, 3)
    picks = flow.nn.functional.gumbel_softmax(logits, hard=True).numpy()
    assert (picks.sum(-1) == 1).all()
    np.testing.assert_allclose(picks.mean(0), np.exp([0, 1, 2]) / np.exp([0, 1, 2]).sum(),
                               atol=0.015)
    with pytest.raises(IndexError):
        flow.nn.functional.gumbel_softmax(flow.zeros(2, 3), dim=5)


# ---- nn.utils: BatchNorm fusion, skip_init ---------------------------------------------------
def _pair(make):
    torch.manual_seed(0)
    theirs = make(torch)
    ours = make(flow)
    for (name, p), q in zip(theirs.named_parameters(), ours.parameters()):
        q.data.copy_(flow.tensor(p.detach().numpy()))
    for (name, b), c in zip(theirs.named_buffers(), ours.buffers()):
        c.copy_(flow.tensor(b.detach().numpy()))
    return ours, theirs


def _bn(m, n, dims):
    bn = getattr(m.nn, f"BatchNorm{dims}d")(n)
    with (flow.no_grad() if m is flow else torch.no_grad()):
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    return bn


@pytest.mark.parametrize("kind", ["conv1d", "conv2d", "conv2d_nobias", "conv_transpose2d",
                                  "linear"])
def test_fusing_batch_norm_as_torch(kind):
    def make(m):
        if kind == "linear":
            return m.nn.Sequential(m.nn.Linear(6, 4), _bn(m, 4, 1))
        if kind == "conv_transpose2d":
            return m.nn.Sequential(m.nn.ConvTranspose2d(3, 4, 3), _bn(m, 4, 2))
        dims = 1 if kind == "conv1d" else 2
        conv = getattr(m.nn, f"Conv{dims}d")(3, 4, 3, bias=kind != "conv2d_nobias")
        return m.nn.Sequential(conv, _bn(m, 4, dims))
    ours, theirs = _pair(make)
    ours.eval(), theirs.eval()
    shape = {"linear": (5, 6), "conv1d": (2, 3, 9)}.get(kind, (2, 3, 7, 7))
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    if kind == "linear":
        f_ours = flow.nn.utils.fuse_linear_bn_eval(ours[0], ours[1])
        f_theirs = torch.nn.utils.fuse_linear_bn_eval(theirs[0], theirs[1])
    else:
        transpose = kind == "conv_transpose2d"
        f_ours = flow.nn.utils.fuse_conv_bn_eval(ours[0], ours[1], transpose=transpose)
        f_theirs = torch.nn.utils.fuse_conv_bn_eval(theirs[0], theirs[1], transpose=transpose)
    assert f_ours is not ours[0] and isinstance(f_ours.weight, flow.nn.Parameter)
    _same(f_ours.weight, f_theirs.weight, atol=1e-6)
    _same(f_ours.bias, f_theirs.bias, atol=1e-6)
    _same(f_ours(flow.tensor(x)), ours(flow.tensor(x)), atol=1e-5)
    _same(f_ours(flow.tensor(x)), f_theirs(torch.tensor(x)), atol=1e-5)


def test_fusion_refuses_training_modules_and_mismatched_features():
    for m in (flow, torch):
        with pytest.raises(AssertionError):
            m.nn.utils.fuse_conv_bn_eval(m.nn.Conv2d(1, 2, 3), m.nn.BatchNorm2d(2))
        with pytest.raises(AssertionError):
            m.nn.utils.fuse_linear_bn_eval(m.nn.Linear(3, 4).eval(), m.nn.BatchNorm1d(3).eval())


def test_skip_init_as_torch():
    layer = flow.nn.utils.skip_init(flow.nn.Linear, 3, 4, bias=False)
    assert layer.weight.shape == (4, 3) and layer.bias is None
    for m in (flow, torch):
        with pytest.raises(RuntimeError, match="device"):
            m.nn.utils.skip_init(m.nn.ReLU)


# ---- nuclear_norm, cholesky, cond, narrow_copy, dim_order -------------------------------------
def test_nuclear_norm_and_deprecated_cholesky_as_torch():
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((2, 3, 4))
    a0 = x0[0] @ x0[0].T + 3 * np.eye(3)
    for kwargs in ({}, {"dim": (1, 2)}, {"dim": (0, 2), "keepdim": True}):
        ours = flow.tensor(x0, requires_grad=True)
        theirs = torch.tensor(x0, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            o, t = flow.nuclear_norm(ours, **kwargs), torch.nuclear_norm(theirs, **kwargs)
        _same(o, t, atol=1e-10)
        o.sum().backward()
        t.sum().backward()
        _same(ours.grad, theirs.grad, atol=1e-10)
    for upper in (False, True):
        with pytest.warns(UserWarning, match="deprecated"):
            ours = flow.cholesky(flow.tensor(a0), upper=upper)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = torch.cholesky(torch.tensor(a0), upper=upper)
        _same(ours, theirs, atol=1e-12)


def test_cond_runs_the_branch_as_torch():
    for m in (flow, torch):
        ops = (m.ones(2),)
        assert m.cond(m.tensor(True), lambda x: x + 1, lambda x: x - 1, ops).tolist() == [2, 2]
        assert m.cond(False, lambda x: x + 1, lambda x: x - 1, list(ops)).tolist() == [0, 0]
        assert m.cond(1, lambda: m.zeros(1), lambda: m.ones(1)).tolist() == [0.0]


def test_narrow_copy_is_a_copy():
    for m in (flow, torch):
        x = m.arange(6).reshape(2, 3)
        y = x.narrow_copy(1, 1, 2)
        assert y.tolist() == [[1, 2], [4, 5]] and y.is_contiguous()
        y[0, 0] = 100
        assert x[0, 1].item() == 1


DIM_ORDERS = [
    lambda m: m.ones(2, 1, 3), lambda m: m.ones(3, 1).t(), lambda m: m.ones(2, 2)[:, :1],
    lambda m: m.tensor(1.0), lambda m: m.ones(2, 3, 4).permute(2, 0, 1),
    lambda m: m.ones(2, 3).expand(4, 2, 3), lambda m: m.ones(4, 3)[::2],
    lambda m: m.ones(3, 4).t(), lambda m: m.ones(3, 1, 4).permute(2, 1, 0),
    lambda m: m.ones(5).expand(3, 5).t(), lambda m: m.ones(2, 3, 4, 5).permute(0, 2, 3, 1),
    lambda m: m.ones(4, 1, 1).permute(1, 2, 0), lambda m: m.ones(4, 2, 1).permute(2, 0, 1)[:, ::2],
    lambda m: m.ones(3, 3, 2)[:, :, :1].permute(2, 1, 0),
]


@pytest.mark.parametrize("case", range(len(DIM_ORDERS)))
def test_dim_order_as_torch(case):
    assert DIM_ORDERS[case](flow).dim_order() == DIM_ORDERS[case](torch).dim_order()


# ---- gradient --------------------------------------------------------------------------------
GRADIENT = [
    (lambda m: m.tensor([1, 4, 9, 16, 25]), lambda m: {}),
    (lambda m: m.tensor([1.0, 4, 9, 16, 25], dtype=m.float64), lambda m: dict(spacing=2.0)),
    (lambda m: m.tensor([1.0, 4, 9, 16, 25]),
     lambda m: dict(spacing=(m.tensor([0.0, 1, 1.5, 3.5, 4.0]),))),
    (lambda m: m.tensor([1.0, 4, 9, 16, 25]),
     lambda m: dict(spacing=(m.tensor([0.0, 1, 1.5, 3.5, 4.0]),), edge_order=2)),
    (lambda m: m.tensor([1.0, 4, 9, 16, 25]), lambda m: dict(edge_order=2)),
    (lambda m: m.arange(12.0).reshape(3, 4) ** 2, lambda m: dict(dim=1)),
    (lambda m: m.arange(12.0).reshape(3, 4) ** 2, lambda m: dict(dim=[0, 1], spacing=[1.0, 2.0])),
    (lambda m: m.arange(12.0).reshape(3, 4) ** 2,
     lambda m: dict(dim=-1, spacing=[m.tensor([0.0, 0.5, 2.0, 2.5])], edge_order=2)),
    (lambda m: m.arange(36.0, dtype=m.float64).reshape(3, 3, 4).sin(),
     lambda m: dict(edge_order=2, spacing=0.5)),
    (lambda m: m.arange(6.0, dtype=m.float64).reshape(2, 3).cos(), lambda m: dict(spacing=3)),
]


@pytest.mark.parametrize("case", range(len(GRADIENT)))
def test_gradient_values_and_its_derivative_as_torch(case):
    make, kwargs = GRADIENT[case]
    results = []
    for m in (flow, torch):
        x = make(m)
        if x.is_floating_point():
            x = x.to(m.float64).requires_grad_()
        outs = m.gradient(x, **kwargs(m))
        if x.requires_grad:
            sum((o * (i + 1.5)).sin().sum() for i, o in enumerate(outs)).backward()
        results.append((outs, x.grad))
    (ours, ours_grad), (theirs, theirs_grad) = results
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        _same(o, t, atol=1e-12)
    if theirs_grad is not None:
        _same(ours_grad, theirs_grad, atol=1e-12)


@pytest.mark.parametrize("shape,kwargs", [((1,), {}), ((2,), dict(edge_order=2)),
                                          ((3,), dict(edge_order=3)),
                                          ((2, 3), dict(spacing=[1.0, 2.0, 3.0]))])
def test_gradient_refuses_as_torch(shape, kwargs):
    with pytest.raises(RuntimeError):
        torch.gradient(torch.ones(shape), **kwargs)
    with pytest.raises(RuntimeError):
        flow.gradient(flow.ones(shape), **kwargs)


def test_a_device_is_a_context_making_it_the_default():
    for m in (torch, flow):
        with m.device("cpu") as d:
            assert str(d) == "cpu"
            assert m.ones(1).device == m.device("cpu")
            assert m.nn.Linear(1, 1).weight.device == m.device("cpu")
        assert m.get_default_device() == m.device("cpu")
