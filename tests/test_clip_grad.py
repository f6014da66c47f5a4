"""nn.utils: clip_grad_norm_ / clip_grad_value_ / parameter-vector conversion vs torch."""
import math

import numpy as np
import pytest
import torch

import flowgrad as flow

RNG = np.random.default_rng(0)
GRADS = [RNG.standard_normal(s).astype(np.float32) * 3 for s in [(4, 3), (5,), (2, 2, 2)]]


def _params(m, grads=GRADS):
    ps = []
    for g in grads:
        p = m.zeros_like(m.tensor(g)).requires_grad_()
        p.grad = m.tensor(g.copy())
        ps.append(p)
    return ps


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (100.0, 2.0), (0.5, 1), (2.0, 3.5),
                                                (1.0, math.inf), (1.0, -math.inf), (1.0, 0),
                                                (0.1, "inf")])
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    norm_type = float(norm_type)
    ours, theirs = _params(flow), _params(torch)
    ids = [id(p.grad) for p in ours]
    a = flow.nn.utils.clip_grad_norm_(ours, max_norm, norm_type)
    b = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    assert isinstance(a, flow.Tensor) and a.dim() == 0 and a.dtype == flow.float32
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-6)
    assert [id(p.grad) for p in ours] == ids  # scaled in place
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_clip_grad_norm_single_tensor_no_grads_and_float64():
    p = flow.zeros(3, requires_grad=True)
    assert flow.nn.utils.clip_grad_norm_(p, 1.0).item() == 0.0  # no grad yet
    grads = [g.astype(np.float64) for g in GRADS]
    a = flow.nn.utils.clip_grad_norm_(_params(flow, grads)[0], 1.0)
    b = torch.nn.utils.clip_grad_norm_(_params(torch, grads)[0], 1.0)
    assert a.dtype == flow.float64
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-12)


def test_clip_grad_norm_nonfinite():
    bad = [g.copy() for g in GRADS]
    bad[1][0] = np.nan
    ours = _params(flow, bad)
    before = [p.grad.numpy().copy() for p in ours]
    with pytest.raises(RuntimeError, match="non-finite, so it cannot be clipped"):
        flow.nn.utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    for p, g in zip(ours, before):  # nothing was scaled
        np.testing.assert_array_equal(p.grad.numpy(), g)
    total = flow.nn.utils.clip_grad_norm_(ours, 1.0)
    ref = torch.nn.utils.clip_grad_norm_(_params(torch, bad), 1.0)
    assert math.isnan(total.item()) and math.isnan(ref.item())


def test_get_total_norm_and_clip_with_norm():
    ours, theirs = _params(flow), _params(torch)
    a = flow.nn.utils.get_total_norm([p.grad for p in ours], 2.0)
    b = torch.nn.utils.get_total_norm([p.grad for p in theirs], 2.0)
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-6)
    flow.nn.utils.clip_grads_with_norm_(ours, 1.0, a)
    torch.nn.utils.clip_grads_with_norm_(theirs, 1.0, b)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("clip", [0.5, 2, 100.0])
def test_clip_grad_value_matches_torch(clip):
    ours, theirs = _params(flow), _params(torch)
    assert flow.nn.utils.clip_grad_value_(ours, clip) is None
    torch.nn.utils.clip_grad_value_(theirs, clip)
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_parameters_to_vector_and_back():
    ws = [RNG.standard_normal(s).astype(np.float32) for s in [(2, 3), (4,), ()]]
    ours = [flow.tensor(w, requires_grad=True) for w in ws]
    theirs = [torch.tensor(w, requires_grad=True) for w in ws]
    v = flow.nn.utils.parameters_to_vector(ours)
    u = torch.nn.utils.parameters_to_vector(theirs)
    np.testing.assert_array_equal(v.detach().numpy(), u.detach().numpy())
    (v * flow.arange(11.0)).sum().backward()  # differentiable, as torch's
    (u * torch.arange(11.0)).sum().backward()
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    new = np.arange(11.0, dtype=np.float32)
    flow.nn.utils.vector_to_parameters(flow.tensor(new), ours)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs)
    for p, q in zip(ours, theirs):
        assert tuple(p.shape) == tuple(q.shape)
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_vector_to_parameters_errors():
    ps = [flow.zeros(2, 2)]
    with pytest.raises(TypeError, match="expected flowgrad.Tensor, but got: numpy.ndarray"):
        flow.nn.utils.vector_to_parameters(np.zeros(4), ps)
    with pytest.raises(RuntimeError, match="at least as many entries"):
        flow.nn.utils.vector_to_parameters(flow.zeros(3), ps)
    assert ps[0].tolist() == [[0.0, 0.0], [0.0, 0.0]]
