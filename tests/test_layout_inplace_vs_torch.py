"""In-place layout changes (t_, transpose_, swapdims_, squeeze_, unsqueeze_) of tensors that
require grad, against torch: a result takes the view op's history, a view's chain gains the
op, and a view made before its base's change keeps its elements (found by its place in the
storage, as torch's as_strided regeneration). A leaf that requires grad, or a view of one,
is refused as torch refuses it; under no_grad nothing is recorded, as torch's (a leaf that
requires grad takes the new shape, its gradient too)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

W23 = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def _result_t_(m):
    a = m.tensor(W23, dtype=m.float64, requires_grad=True)
    y = a * 1
    y.t_()
    (y * m.arange(6.0, dtype=m.float64).view(3, 2)).sum().backward()
    return [y, a.grad]


def _view_unsqueeze_(m):
    a = m.tensor(W23, dtype=m.float64, requires_grad=True)
    y = a * 2
    v = y[0]
    v.unsqueeze_(0)
    (v * m.arange(3.0, dtype=m.float64)).sum().backward()
    return [v, a.grad]


def _chained_then_written(m):
    a = m.tensor(W23, dtype=m.float64, requires_grad=True)
    y = a.sin()
    y.unsqueeze_(1).squeeze_(1)
    y.transpose_(0, 1)
    y.mul_(2)
    (y * m.arange(6.0, dtype=m.float64).view(3, 2)).sum().backward()
    return [y, a.grad]


def _double_backward(m):
    a = m.tensor(W23, dtype=m.float64, requires_grad=True)
    y = a * a
    y.swapdims_(0, 1)
    (g,) = m.autograd.grad((y ** 2).sum(), a, create_graph=True)
    g.sum().backward()
    return [g, a.grad]


def _view_made_before(m):
    a = m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64, requires_grad=True)
    y = a * 1
    v = y[0]
    y.t_()
    v.mul_(10)
    (y * m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64)).sum().backward()
    return [y, v, a.grad]


def _view_made_before_read(m):
    a = m.tensor(W23, dtype=m.float64, requires_grad=True)
    y = a * 3
    v = y[:, 1:]
    y.t_()
    y.add_(1)
    (v * v).sum().backward()
    return [v, a.grad]


def _plain_view(m):
    x = m.zeros(2, 3, dtype=m.float64)
    v = x[1]
    v.unsqueeze_(0)
    v.add_(1)
    return [x, v]


CASES = {f.__name__[1:]: f for f in (_result_t_, _view_unsqueeze_, _chained_then_written,
                                     _double_backward, _view_made_before,
                                     _view_made_before_read, _plain_view)}


@pytest.mark.parametrize("name", list(CASES))
def test_layout_change_in_place_as_torch(name):
    want, got = CASES[name](torch), CASES[name](flow)
    for w, g in zip(want, got):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12)


def test_a_leaf_or_its_view_is_refused_as_torch():
    for m in (torch, flow):
        a = m.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf"):
            a.t_()
        with pytest.raises(RuntimeError, match="leaf"):
            a[0].unsqueeze_(0)
        assert tuple(a.shape) == (2, 3)


def _no_grad_layout_changes(m):
    """Layout changes under no_grad of tensors that require grad, then a backward: a leaf, a
    graph recorded before the change, a result (its history stays), a leaf's view."""
    got = []
    w = m.arange(6.0, dtype=m.float64)
    leaf = m.tensor(W23, dtype=m.float64, requires_grad=True)
    with m.no_grad():
        leaf.t_().unsqueeze_(0).transpose_(0, 2).swapdims_(1, 0).swapaxes_(0, 1).squeeze_(2)
    (leaf * w.reshape(leaf.shape)).sum().backward()
    got.append((tuple(leaf.shape), leaf.is_leaf, leaf.requires_grad, leaf.grad.tolist()))
    leaf = m.tensor([W23[0]], dtype=m.float64, requires_grad=True)
    y = leaf * w[:3]
    with m.no_grad():
        leaf.unsqueeze_(0)
    y.sum().backward()  # (the recorded graph's gradient reaches the leaf of the new shape)
    got.append((tuple(leaf.shape), leaf.grad.tolist()))
    leaf = m.tensor([W23[0]], dtype=m.float64, requires_grad=True)
    y = leaf * w[:3]
    with m.no_grad():
        y.unsqueeze_(0).squeeze_(1)
    (y * w[3:]).sum().backward()
    got.append((tuple(y.shape), leaf.grad.tolist()))
    leaf = m.tensor(W23, dtype=m.float64, requires_grad=True)
    v = leaf[1]
    with m.no_grad():
        v.unsqueeze_(1)
    (v * w[:3, None]).sum().backward()
    got.append((tuple(v.shape), leaf.grad.tolist()))
    return got


def test_under_no_grad_a_tensor_that_requires_grad_changes_as_torch():
    # torch changes the layout without recording; flowgrad refused (NotImplementedError,
    # out_arg_fuzz seed 916)
    assert _no_grad_layout_changes(flow) == _no_grad_layout_changes(torch)


def test_inside_vmap_a_tensor_that_requires_grad_is_refused():
    """(torch records it per example; flowgrad's alias of the old history is not batched)"""
    def f(x):
        y = x * 2
        y.unsqueeze_(0)
        return (y * y).sum()
    with pytest.raises(NotImplementedError, match="inside vmap"):
        flow.func.vmap(flow.func.grad(f))(flow.ones(2, 2))


def test_inside_nn_graph_as_eager():
    """build() with t_ and unsqueeze_ on an activation: the tracer hears of each change (the
    tensor then holds the view op's value), so the plan trains as eager does."""
    def step(lin, x):
        y = lin(x)
        y.t_()
        y.unsqueeze_(0)
        return (y * flow.arange(8.0).view(1, 2, 4)).sum()

    xs = [flow.tensor(np.random.default_rng(i).standard_normal((4, 3)).astype(np.float32))
          for i in range(3)]
    runs = []
    for graph in (False, True):
        flow.manual_seed(0)
        lin = flow.nn.Linear(3, 2)
        opt = flow.optim.SGD(lin.parameters(), lr=0.1)
        if graph:
            class Train(flow.nn.Graph):
                def __init__(self):
                    super().__init__()
                    self.lin = lin
                    self.add_optimizer(opt)

                def build(self, x):
                    loss = step(self.lin, x)
                    loss.backward()
                    return loss
            train = Train()
        else:
            def train(x):
                loss = step(lin, x)
                loss.backward()
                opt.step()
                opt.zero_grad()
                return loss
        losses = [float(train(x)) for x in xs]
        runs.append((losses, lin.weight.detach().numpy().copy()))
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=1e-6)
    np.testing.assert_allclose(runs[1][1], runs[0][1], rtol=1e-6)
