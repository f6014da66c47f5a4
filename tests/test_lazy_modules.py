"""Lazy modules (LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*, LazyInstanceNorm*)
and nn.Buffer against torch: the shapes inferred from the first batch, the layer each becomes,
and the same outputs and gradients once both hold the same weights."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import flowgrad as flow

# (class name, constructor args, keywords, input shape)
LAZY = [
    ("LazyLinear", (3,), {}, (2, 5)),
    ("LazyLinear", (4,), {"bias": False}, (2, 3, 6)),
    ("LazyConv1d", (4, 3), {}, (2, 6, 9)),
    ("LazyConv1d", (4, 3), {"groups": 2, "bias": False}, (6, 9)),  # unbatched
    ("LazyConv2d", (4, 3), {"padding": 1, "stride": 2}, (2, 3, 7, 7)),
    ("LazyConv3d", (2, 2), {}, (1, 3, 4, 4, 4)),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2}, (2, 3, 5)),
    ("LazyConvTranspose2d", (4, 3), {"groups": 2, "output_padding": 1, "stride": 2},
     (1, 6, 5, 5)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 3, 3, 3, 3)),
    ("LazyBatchNorm1d", (), {}, (4, 3)),
    ("LazyBatchNorm1d", (), {"affine": False}, (4, 3, 5)),
    ("LazyBatchNorm2d", (), {"momentum": None}, (2, 3, 4, 4)),
    ("LazyBatchNorm3d", (), {"track_running_stats": False}, (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 6)),
    ("LazyInstanceNorm2d", (), {"affine": False, "track_running_stats": False},
     (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), {"bias": False}, (2, 3, 2, 3, 2)),
]


def _shapes(module):
    return ({k: tuple(v.shape) for k, v in module.named_parameters()},
            {k: tuple(v.shape) for k, v in module.named_buffers()})


@pytest.mark.parametrize("name,args,kwargs,shape", LAZY)
def test_lazy_module_becomes_torchs_layer(name, args, kwargs, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    tm = getattr(torch.nn, name)(*args, **kwargs)
    fm = getattr(flow.nn, name)(*args, **kwargs)
    assert repr(fm) == repr(tm)
    params = list(fm.parameters())  # an optimizer made before the shapes are known
    fopt = flow.optim.SGD(params, lr=0.5) if params else None
    tx, fx = torch.tensor(x, requires_grad=True), flow.tensor(x, requires_grad=True)
    tm(tx)
    fm(flow.tensor(x))  # the dry run: shapes, then the eager layer's class
    assert type(fm).__name__ == type(tm).__name__ and repr(fm) == repr(tm)
    assert _shapes(fm) == _shapes(tm)
    assert not fm._forward_pre_hooks
    fm.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in
                        tm.state_dict().items()})
    ty, fy = tm(tx), fm(fx)
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    w = np.random.default_rng(1).standard_normal(ty.shape).astype(np.float32)
    (ty * torch.tensor(w)).sum().backward()
    (fy * flow.tensor(w)).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (k, tp), (_, fp) in zip(tm.named_parameters(), fm.named_parameters()):
        np.testing.assert_allclose(fp.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-4,
                                   err_msg=k)
    if fopt is not None:
        before = [p.detach().numpy().copy() for p in fm.parameters()]
        fopt.step()  # the optimizer holds the very objects that were materialized
        for b, p in zip(before, fm.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), b - 0.5 * p.grad.numpy(),
                                       rtol=1e-6, atol=1e-6)


def test_uninitialized_parameter_refuses_its_shape():
    for m in (torch, flow):
        p = m.nn.LazyLinear(3).weight
        assert repr(p) == "<UninitializedParameter>"
        with pytest.raises(RuntimeError, match="uninitialized parameter"):
            p.shape


def test_lazy_state_dict_round_trips():
    for m in (torch, flow):
        done = m.nn.LazyLinear(3)
        done(m.ones(2, 4))
        lazy = m.nn.LazyLinear(3)
        assert repr(lazy.state_dict()["weight"]) == "<UninitializedParameter>"
        lazy.load_state_dict(done.state_dict())  # materialized by the checkpoint's shapes
        assert type(lazy).__name__ == "LazyLinear"
        assert tuple(lazy.weight.shape) == (3, 4) and type(lazy.weight).__name__ == "Parameter"
        np.testing.assert_array_equal(lazy.weight.detach().numpy(),
                                      done.weight.detach().numpy())
        lazy(m.ones(1, 4))  # keeps the loaded values; takes in_features from the input
        assert type(lazy).__name__ == "Linear" and lazy.in_features == 4
        np.testing.assert_array_equal(lazy.weight.detach().numpy(),
                                      done.weight.detach().numpy())
        still = m.nn.LazyLinear(3)
        still.load_state_dict(m.nn.LazyLinear(3).state_dict())  # lazy into lazy: stays lazy
        assert still.has_uninitialized_params()
        with pytest.raises(RuntimeError):  # lazy into initialized
            m.nn.Linear(2, 3).load_state_dict(m.nn.LazyLinear(3).state_dict())


def test_lazy_follows_module_dtype_and_deepcopy():
    for m in (torch, flow):
        lazy = m.nn.LazyLinear(3).double()
        twin = copy.deepcopy(lazy)
        lazy(m.ones(2, 5, dtype=m.float64))
        assert lazy.weight.dtype == m.float64
        assert type(twin).__name__ == "LazyLinear" and twin.has_uninitialized_params()
        twin(m.ones(1, 2, dtype=m.float64))
        assert tuple(twin.weight.shape) == (3, 2) and tuple(lazy.weight.shape) == (3, 5)


def test_failed_first_batch_leaves_the_module_lazy():
    for m in (torch, flow):
        conv = m.nn.LazyConv2d(4, 3, groups=2)
        with pytest.raises(ValueError, match="divisible by groups"):
            conv(m.ones(1, 5, 8, 8))
        with pytest.raises(RuntimeError, match="Expected 3D"):
            conv(m.ones(8, 8))
    # flowgrad also keeps the placeholders as they were (no uninitialised memory for weights)
    conv = flow.nn.LazyConv2d(4, 3, groups=2)
    with pytest.raises(ValueError):
        conv(flow.ones(1, 5, 8, 8))
    assert conv.has_uninitialized_params() and repr(conv.weight) == "<UninitializedParameter>"
    conv(flow.ones(1, 6, 8, 8))
    assert tuple(conv.weight.shape) == (4, 3, 3, 3)


def test_graph_refuses_uninitialized_lazy_modules():
    model = flow.nn.Sequential(flow.nn.LazyLinear(3))

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x)

    with pytest.raises(RuntimeError, match="uninitialized parameters"):
        Step()(flow.ones(2, 4))
    assert model[0].has_uninitialized_params()  # nothing changed
    model(flow.ones(2, 4))
    x = flow.randn(3, 4)
    np.testing.assert_allclose(Step()(x).numpy(), model(x).detach().numpy(), rtol=1e-6)


def test_buffer_registers_on_assignment():
    for m in (torch, flow):
        class Counter(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.kept = m.nn.Buffer(m.ones(2))
                self.scratch = m.nn.Buffer(m.zeros(1), persistent=False)

        c = Counter()
        assert list(c.state_dict()) == ["kept"]
        assert [k for k, _ in c.named_buffers()] == ["kept", "scratch"]
        assert isinstance(c.kept, m.nn.Buffer) and c.kept.persistent
        assert not isinstance(m.ones(1), m.nn.Buffer)
        c.kept = m.zeros(3)  # a plain tensor into a buffer's name: still that buffer
        assert "kept" in c._buffers and list(c.state_dict()) == ["kept"]
        c.scratch = m.nn.Buffer(m.ones(1))  # a persistent Buffer makes it persistent
        assert list(c.state_dict()) == ["kept", "scratch"]
        assert [k for k, _ in copy.deepcopy(c).named_buffers()] == ["kept", "scratch"]
        base = m.ones(2, requires_grad=True)
        b = m.nn.Buffer(base)
        assert b.requires_grad and b.is_leaf
        b.detach().mul_(3)  # shares storage with what it wraps
        assert base.detach().numpy().tolist() == [3.0, 3.0]


@pytest.mark.parametrize("name", ["lazy.safetensors", "lazy.pt"])
def test_saving_a_placeholder_refuses(tmp_path, name):
    with pytest.raises(ValueError, match="uninitialized parameter"):
        flow.save({"m": flow.nn.LazyLinear(2).state_dict()}, tmp_path / name)
    assert not (tmp_path / name).exists()
