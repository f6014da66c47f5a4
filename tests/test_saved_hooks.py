"""Saved-tensor hooks against torch's: what is packed, when unpack runs, the grads."""
import numpy as np
import pytest
import torch

import flowgrad as flow


def _run(m, hooks):
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return t * 1 if hooks == "copy" else t

    def unpack(t):
        unpacked.append(tuple(t.shape))
        return t

    x = m.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    w = m.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    with m.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (x @ w).tanh()
    assert unpacked == []  # not before backward
    y.sum().backward()
    return sorted(packed), sorted(unpacked), x.grad.numpy(), w.grad.numpy()


@pytest.mark.parametrize("hooks", ["same", "copy"])
def test_pack_unpack_like_torch(hooks):
    ours, theirs = _run(flow, hooks), _run(torch, hooks)
    assert ours[0] == theirs[0] and ours[1] == theirs[1]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-6, atol=1e-7)


def test_custom_function_saves_go_through_hooks_and_double_backward_works():
    class Cube(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            return dy * 3 * x ** 2

    seen = []
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    def pack(t):
        seen.append(1)
        return t.detach().numpy().copy()

    with flow.autograd.graph.saved_tensors_hooks(pack, flow.tensor):
        y = Cube.apply(x).sum()
        z = (x * x).sum()  # the packed copy is a NumPy array, not a tensor
    (g,) = flow.autograd.grad(y + z, x, create_graph=True)
    assert len(seen) == 3 and g.tolist() == [5.0, 16.0]
    (gg,) = flow.autograd.grad(g.sum(), x)
    assert gg.tolist() == [8.0, 14.0]  # 6x + 2: the unpacked x is still x in the graph


# pack -> (unpack, whether it keeps a copy): a write into a saved tensor after the forward
PACKS = {
    "clone": (lambda m: (lambda t: t.detach().clone(), lambda t: t), True),
    "cast": (lambda m: (lambda t: t.to(m.float64), lambda t: t.to(m.float32)), True),
    "device_and_clone": (lambda m: (lambda t: (t.device, t.clone()), lambda p: p[1].to(p[0])),
                         True),
    "numpy_copy": (lambda m: (lambda t: t.detach().numpy().copy(), m.from_numpy), True),
    "identity": (lambda m: (lambda t: t, lambda t: t), False),
    "detach": (lambda m: (lambda t: t.detach(), lambda t: t), False),
    "numpy_view": (lambda m: (lambda t: t.detach().numpy(), m.from_numpy), False),
    "slot": (lambda m: _slots(), False),
    "save_on_cpu": (None, False),
}


def _slots():
    store = []
    return (lambda t: store.append(t) or len(store) - 1), store.__getitem__


# what is written after the forward: an input of a product, exp's saved output, a view
WRITES = {
    "input": lambda m, x, w: ((x * w).sum(), lambda: w.add_(1)),
    "output": lambda m, x, w: (lambda e: ((e * 1.0).sum() + e.sum(), lambda: e.mul_(2)))(
        (x * w).exp()),
    "through_a_view": lambda m, x, w: ((x * w).sum(), lambda: w[1:].mul_(3)),
}


def _hooked(m, pack_name, write_name):
    x = m.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = m.tensor([3.0, 4.0, 5.0])
    make, _ = PACKS[pack_name]
    hooks = m.autograd.graph.save_on_cpu() if make is None else \
        m.autograd.graph.saved_tensors_hooks(*make(m))
    with hooks:
        y, write = WRITES[write_name](m, x, w)
    write()
    try:
        y.backward()
    except RuntimeError as e:
        return str(e)
    return x.grad.tolist()


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("pack", list(PACKS))
def test_a_write_after_the_forward_into_a_packed_tensor(pack, write):
    """Where pack kept a copy, backward reads the forward's values, as torch's; where it kept
    the tensor itself (or something opaque), torch reads the written values without a word,
    a gradient of other values than the forward's, and flowgrad raises instead."""
    ours, theirs = _hooked(flow, pack, write), _hooked(torch, pack, write)
    assert not isinstance(theirs, str)  # torch computes every case
    if PACKS[pack][1]:
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    else:
        assert isinstance(ours, str) and "modified by an in-place operation" in ours


def test_save_on_cpu_and_nesting():
    x = flow.randn(3, 4, requires_grad=True)
    ref = flow.autograd.grad((x.sigmoid() * x).sum(), x)[0]
    outer = []
    with flow.autograd.graph.saved_tensors_hooks(lambda t: outer.append(1) or t, lambda t: t):
        with flow.autograd.graph.save_on_cpu(pin_memory=True):
            y = (x.sigmoid() * x).sum()  # the innermost hooks apply
    assert outer == []
    np.testing.assert_array_equal(flow.autograd.grad(y, x)[0].numpy(), ref.numpy())


def test_unpack_must_return_tensor_and_disable():
    x = flow.ones(2, requires_grad=True)
    with flow.autograd.graph.saved_tensors_hooks(lambda t: 1, lambda p: p):
        y = (x * x).sum()
    with pytest.raises(TypeError, match="unpack hook must return a Tensor"):
        y.backward()
    for m in (flow, torch):
        with m.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
            with pytest.raises(RuntimeError, match="no hooks here"):
                with m.autograd.graph.save_on_cpu():
                    pass

    @flow.autograd.graph.disable_saved_tensors_hooks("off in f")
    def f():
        with flow.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            pass
    with pytest.raises(RuntimeError, match="off in f"):
        f()
    with flow.autograd.graph.save_on_cpu():  # enabled again afterwards
        pass


def _in_place_activation_under_hooks(m, op, write_after):
    x = m.tensor([[0.5, -1.0, 2.0]], dtype=m.float64, requires_grad=True)
    with m.autograd.graph.saved_tensors_hooks(lambda t: t * 1.0, lambda t: t):
        y = x * 2.0
        getattr(y, op)()  # saves its output: y itself after the write
        h = y * 1.0
    if write_after:
        with m.no_grad():
            y.add_(1.0)
    try:
        h.sum().backward()
    except RuntimeError:
        return "raised"
    return x.grad.tolist()


@pytest.mark.parametrize("op", ["relu_", "exp_", "sigmoid_", "tanh_"])
def test_an_in_place_op_saving_its_output_under_hooks(op):
    """An in-place op that saves its output, inside saved_tensors_hooks: before, the packed
    output had no `adopt` and the op raised AttributeError (feature pair inplace_act x
    saved_hooks). It computes torch's gradient, also after a later write to the tensor: the
    pack hook kept a copy (`t * 1.0`), which backward reads, as torch's."""
    for write_after in (False, True):
        ours = _in_place_activation_under_hooks(flow, op, write_after)
        np.testing.assert_allclose(ours, _in_place_activation_under_hooks(torch, op, write_after),
                                   rtol=1e-12)
