"""Node hooks and the autograd.graph names, side by side with torch's."""
import numpy as np
import pytest
import torch

import flowgrad as flow


def _hooked_run(m):
    """Every kind of node hook on y = sum(exp(x) * w); returns the calls seen and the grads."""
    calls = []
    x = m.tensor([0.5, -1.0], requires_grad=True)
    w = m.tensor([2.0, 3.0], requires_grad=True)
    y = (x.exp() * w).sum()
    mul = y.grad_fn.next_functions[0][0]
    acc_w = mul.next_functions[1][0]
    y.grad_fn.register_prehook(lambda go: calls.append(("sum pre", go[0].tolist())))
    mul.register_hook(lambda gi, go: calls.append(("mul post", [g.tolist() for g in gi])))
    mul.register_prehook(lambda go: (go[0] * 10,))  # replaces the grad flowing into mul
    acc_w.register_prehook(lambda go: calls.append(("acc pre", go[0].tolist())))
    acc_w.register_hook(lambda gi, go: calls.append(("acc post", gi, go[0].tolist())))
    h = acc_w.register_prehook(lambda go: (go[0] + 1,))
    h.remove()
    y.backward()
    return calls, x.grad.tolist(), w.grad.tolist(), (mul.name(), acc_w.name())


def test_node_hooks_match_torch():
    ours, theirs = _hooked_run(flow), _hooked_run(torch)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6)
    assert [c[0] for c in ours[0]] == [c[0] for c in theirs[0]]
    for a, b in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(np.array(a[-1], dtype=float), np.array(b[-1], dtype=float),
                                   rtol=1e-6)
    assert ours[3] == theirs[3] == ("MulBackward0", "torch::autograd::AccumulateGrad")


def test_post_hook_replaces_grad_inputs_and_count_is_checked():
    for m in (flow, torch):
        x = m.ones(3, requires_grad=True)
        y = (x * m.full((3,), 2.0)).sum()
        y.grad_fn.next_functions[0][0].register_hook(lambda gi, go: (gi[0] * 0 + 7, None))
        y.backward()
        assert x.grad.tolist() == [7.0] * 3
    x = flow.ones(3, requires_grad=True)
    y = (x * 2).sum()
    y.grad_fn.register_prehook(lambda go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match="returned 2 gradients, expected 1"):
        y.backward()


def test_node_api():
    x = flow.ones(2, requires_grad=True)
    y = x.exp()
    node = y.grad_fn
    assert isinstance(node, flow.autograd.graph.Node)
    assert isinstance(node.next_functions[0][0], flow.autograd.graph.Node)
    assert node.metadata == {} and node.metadata is node.metadata
    node.metadata["k"] = 1
    assert y.grad_fn.metadata == {"k": 1}
    with pytest.raises(TypeError, match="callable"):
        node.register_hook(3)


def test_gradient_edge_and_increment_version():
    for m in (flow, torch):
        x = m.ones(4, requires_grad=True)
        a, b = (x * 2).split(2)
        edge = m.autograd.graph.get_gradient_edge(b)
        assert edge.output_nr == 1 and edge.node is b.grad_fn
        assert m.autograd.graph.get_gradient_edge(x).node.name().endswith(
            ("AccumulateGrad", "accumulate_grad"))
        y = x * x
        m.autograd.graph.increment_version(x)
        with pytest.raises(RuntimeError, match="modified by an inplace|in-place"):
            y.sum().backward()
        with pytest.raises(RuntimeError):
            m.autograd.graph.get_gradient_edge(m.ones(2))


def _multi(m, mode, use_b):
    seen = []
    a = m.ones(2, requires_grad=True)
    b = m.ones(2, requires_grad=True)
    c = a * 3
    h = m.autograd.graph.register_multi_grad_hook(
        (c, b), lambda g: seen.append(g if mode == "any" else [
            None if t is None else t.tolist() for t in g]), mode=mode)
    loss = (c * 2).sum() + ((b * 5).sum() if use_b else 0)
    loss.backward(retain_graph=True)
    h.remove()
    (c.sum() + b.sum()).backward()  # removed: not called again
    return [s.tolist() if hasattr(s, "tolist") else s for s in seen]


@pytest.mark.parametrize("mode, use_b", [("all", True), ("all", False), ("any", True)])
def test_multi_grad_hook_matches_torch(mode, use_b):
    assert _multi(flow, mode, use_b) == _multi(torch, mode, use_b)


def test_multi_grad_hook_with_autograd_grad():
    a = flow.ones(2, requires_grad=True)
    b = flow.ones(2, requires_grad=True)
    seen = []
    flow.autograd.graph.register_multi_grad_hook((a, b), seen.append)
    # torch refuses a multi-grad hook over leaves under autograd.grad; backward(inputs=) runs it
    with pytest.raises(RuntimeError, match="leaf node.*autograd.grad"):
        flow.autograd.grad((a * b).sum(), (a, b))
    (a * b).sum().backward(inputs=(a, b))
    assert len(seen) == 1 and [g.tolist() for g in seen[0]] == [[1.0, 1.0], [1.0, 1.0]]
    with pytest.raises(ValueError, match="mode"):
        flow.autograd.graph.register_multi_grad_hook((a,), seen.append, mode="some")
