"""The layout (strides) of `.grad` against torch's: a leaf's first gradient takes the leaf's
strides where the leaf's elements are dense, C order otherwise, whatever layout the gradient
arrived in (torch's AccumulateGrad layout contract); retain_grad keeps a C-ordered copy.
So code that does `p.grad.view(-1)` works and fails where torch's does."""
import numpy as np
import pytest
import torch

import flowgrad as flow


def _leaf(m, kind):
    """A float64 leaf in one of several layouts. (flowgrad records channels_last rather than
    lays memory out so: not here.)"""
    base = m.tensor(np.arange(60.0).reshape(3, 4, 5) / 7, dtype=m.float64)
    if kind == "contiguous":
        x = base[0].clone()
    elif kind == "transposed":
        x = base[0].t().clone().t()  # (3, 4) with strides (1, 3)
    elif kind == "permuted":
        x = base.permute(2, 0, 1).contiguous().permute(1, 2, 0)  # (3, 4, 5), dense
    elif kind == "sliced":  # not dense: a gap between rows
        x = base[:, :2]
    elif kind == "size_one_dim":
        x = base[0, :1].clone()
    return x.detach().requires_grad_()


def _other(m, x):
    """A tensor of x's shape laid out differently (reversed dims, made contiguous, turned
    back): x * other's gradient arrives in other's layout."""
    dims = tuple(reversed(range(x.dim())))
    return (x.detach() + 1).permute(*dims).contiguous().permute(*dims)


PROGRAMS = {
    "product": lambda m, x: [(x * _other(m, x)).sum()],
    "product_twice": lambda m, x: [(x * _other(m, x)).sum(), (x * 2).sum()],
    "expand": lambda m, x: [(x.unsqueeze(0).expand(2, *x.shape) * 3).sum()],
    "transposed_use": lambda m, x: [(x.transpose(0, 1) * 2).sum()],
    "matmul": lambda m, x: [(x.reshape(x.shape[0], -1).t() @ m.ones(x.shape[0], 2,
                                                                     dtype=m.float64)).sum()],
}


def _run(m, kind, program, create_graph):
    x = _leaf(m, kind)
    losses = PROGRAMS[program](m, x)
    for loss in losses:
        loss.backward(create_graph=create_graph)
    g = x.grad
    try:
        g.view(-1)
        views = True
    except RuntimeError:
        views = False
    return g.detach().numpy(), g.stride(), g.is_contiguous(), views


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("kind", ["contiguous", "transposed", "permuted", "sliced",
                                  "size_one_dim"])
def test_leaf_grad_layout_matches_torch(kind, program, create_graph):
    ours, theirs = _run(flow, kind, program, create_graph), _run(torch, kind, program,
                                                                  create_graph)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    shape = ours[0].shape
    # a size-1 dim's stride is free in torch's contract: compared elsewhere
    assert [s for s, n in zip(ours[1], shape) if n != 1] == \
        [s for s, n in zip(theirs[1], shape) if n != 1]
    assert ours[2:] == theirs[2:]


@pytest.mark.parametrize("m", [flow, torch], ids=["flowgrad", "torch"])
def test_retained_grad_is_c_ordered(m):
    x = m.ones(3, 2, dtype=m.float64, requires_grad=True)
    y = x * 1
    y.retain_grad()
    (y * m.ones(2, 3, dtype=m.float64).t()).sum().backward()
    assert y.grad.is_contiguous() and x.grad.is_contiguous()
    assert y.grad.view(-1).tolist() == [1.0] * 6


def test_create_graph_relayout_is_differentiable():
    """Under create_graph the relaid-out .grad keeps its history (torch's copy_)."""
    grads = []
    for m in (flow, torch):
        x = m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64, requires_grad=True)
        other = m.tensor([[1.0, -1.0], [2.0, 0.5]], dtype=m.float64).t()
        (x * x * other).sum().backward(create_graph=True)
        g = x.grad
        x.grad = None
        (g * g).sum().backward()
        grads.append((g.stride(), x.grad.detach().numpy()))
    assert grads[0][0] == grads[1][0]
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)


# ---- op outputs and autograd.grad results: C-ordered wherever torch's are -------------------
def _strided(m, *shape):
    """A float64 leaf of `shape` whose first two dims are swapped in memory."""
    rng = np.random.default_rng(sum(shape))
    base = m.tensor(rng.standard_normal((shape[1], shape[0]) + shape[2:]))
    return base.transpose(0, 1).requires_grad_()


def _plain(m, *shape):
    rng = np.random.default_rng(sum(shape))
    return m.tensor(rng.standard_normal(shape), requires_grad=True)


def _ones(m, *shape):
    return m.ones(*shape, dtype=m.float64)


# name -> (f(m, *inputs), input makers): inputs (3, 4)-strided or plain, as listed
OPS = {
    "layer_norm": (lambda m, x: m.nn.functional.layer_norm(x, (3,)), [(_strided, 4, 3)]),
    "layer_norm_affine": (lambda m, x: m.nn.functional.layer_norm(
        x, (3,), _ones(m, 3), _ones(m, 3)), [(_strided, 4, 3)]),
    "rms_norm": (lambda m, x: m.nn.functional.rms_norm(x, (3,)), [(_strided, 4, 3)]),
    "batch_norm_2d": (lambda m, x: m.nn.functional.batch_norm(x, None, None, training=True),
                      [(_strided, 4, 3)]),
    "pad_constant": (lambda m, x: m.nn.functional.pad(x, (1, 1)), [(_strided, 4, 3)]),
    "pad_reflect": (lambda m, x: m.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"),
                    [(_plain, 1, 2, 3, 4)]),
    "pad_circular": (lambda m, x: m.nn.functional.pad(x, (1, 1), mode="circular"),
                     [(_plain, 1, 2, 3)]),
    "renorm": (lambda m, x: x.renorm(2, 0, 1.0), [(_strided, 4, 3)]),
    "einsum": (lambda m, x, w: m.einsum("ij,kj->ik", x, w), [(_plain, 4, 3), (_plain, 5, 3)]),
    "tensordot": (lambda m, x, w: m.tensordot(x, w, dims=([1], [1])),
                  [(_plain, 4, 3), (_plain, 5, 3)]),
    "grid_sample": (lambda m, x, g: m.nn.functional.grid_sample(x, g.tanh(),
                                                                 align_corners=False),
                    [(_plain, 1, 2, 4, 4), (_plain, 1, 3, 3, 2)]),
    "grid_sample_nearest": (lambda m, x, g: m.nn.functional.grid_sample(
        x, g.tanh(), mode="nearest", align_corners=True), [(_plain, 1, 2, 4, 4),
                                                           (_plain, 1, 3, 3, 2)]),
    "grid_sample_bicubic": (lambda m, x, g: m.nn.functional.grid_sample(
        x, g.tanh(), mode="bicubic", align_corners=False), [(_plain, 1, 2, 4, 4),
                                                            (_plain, 1, 3, 3, 2)]),
    "matmul_transposed": (lambda m, x, w: x @ w.t(), [(_plain, 4, 3), (_plain, 5, 3)]),
    "mm_of_transposed": (lambda m, x, w: x.t() @ w, [(_plain, 3, 4), (_plain, 3, 5)]),
    "linear": (lambda m, x, w: m.nn.functional.linear(x, w), [(_plain, 4, 3), (_plain, 5, 3)]),
    "softmax_dim0": (lambda m, x: x.softmax(0), [(_strided, 4, 3)]),
    "cumsum": (lambda m, x: x.cumsum(1), [(_strided, 4, 3)]),
    "sum_dim": (lambda m, x: x.sum(0, keepdim=True), [(_strided, 4, 3)]),
    "group_norm": (lambda m, x: m.nn.functional.group_norm(x, 1), [(_plain, 2, 4, 3)]),
    "conv2d": (lambda m, x, w: m.nn.functional.conv2d(x, w, padding=1),
               [(_plain, 2, 3, 5, 5), (_plain, 4, 3, 3, 3)]),
    "max_pool2d": (lambda m, x: m.nn.functional.max_pool2d(x, 2), [(_plain, 2, 3, 4, 4)]),
    "interpolate": (lambda m, x: m.nn.functional.interpolate(x, scale_factor=2.0,
                                                             mode="bilinear"),
                    [(_plain, 1, 2, 3, 3)]),
    "tril": (lambda m, x: x.tril(), [(_strided, 4, 3)]),
}


def _views(t):
    try:
        t.view(-1)
        return True
    except RuntimeError:
        return False


def _layouts(m, name):
    f, makers = OPS[name]
    inputs = [make(m, *shape) for make, *shape in makers]
    out = f(m, *inputs)
    grads = m.autograd.grad((out * out).sum(), inputs)
    return out, grads


@pytest.mark.parametrize("name", list(OPS))
def test_results_view_where_torch_results_do(name):
    """flowgrad may lay a result out in C order where torch does not (a NumPy kernel's
    choice), never the other way: `.view(-1)` of an output or an autograd.grad result
    works wherever torch's works. Values against torch too."""
    (ours, our_grads), (theirs, their_grads) = _layouts(flow, name), _layouts(torch, name)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    assert _views(ours) or not _views(theirs)
    for a, b in zip(our_grads, their_grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
        assert _views(a) or not _views(b)
