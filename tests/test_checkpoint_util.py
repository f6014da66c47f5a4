"""flowgrad.utils.checkpoint against plain backward and torch's checkpoint."""
import tracemalloc
import warnings

import numpy as np
import pytest
import torch
import torch.utils.checkpoint as tcp

import flowgrad as flow
from flowgrad.utils.checkpoint import checkpoint, checkpoint_sequential


def _mlp(m, layers=4, width=6, dropout=0.0, seed=0):
    rng = np.random.default_rng(seed)
    mods = []
    for _ in range(layers):
        lin = m.nn.Linear(width, width)
        with m.no_grad():
            lin.weight.copy_(m.tensor(rng.standard_normal((width, width)).astype(np.float32)))
            lin.bias.copy_(m.tensor(rng.standard_normal(width).astype(np.float32)))
        mods += [lin, m.nn.Tanh()] + ([m.nn.Dropout(dropout)] if dropout else [])
    return m.nn.Sequential(*mods)


def _grads(m, model, x, run):
    model.zero_grad()
    x.grad = None
    m.manual_seed(3)
    run(model, x).pow(2).sum().backward()
    return [p.grad.numpy().copy() for p in model.parameters()] + [x.grad.numpy().copy()]


RUNS = {
    "plain": lambda m, cp: lambda model, x: model(x),
    "reentrant": lambda m, cp: lambda model, x: cp.checkpoint(model, x, use_reentrant=True),
    "hooks": lambda m, cp: lambda model, x: cp.checkpoint(model, x, use_reentrant=False),
    "sequential": lambda m, cp: lambda model, x: cp.checkpoint_sequential(
        model, 3, x, use_reentrant=False),
    "sequential_reentrant": lambda m, cp: lambda model, x: cp.checkpoint_sequential(
        model, 2, x, use_reentrant=True),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_grads_match_torch_checkpoint(name):
    x_np = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)
    ours = _grads(flow, _mlp(flow), flow.tensor(x_np, requires_grad=True),
                  RUNS[name](flow, flow.utils.checkpoint))
    theirs = _grads(torch, _mlp(torch), torch.tensor(x_np, requires_grad=True),
                    RUNS[name](torch, tcp))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["reentrant", "hooks", "sequential", "sequential_reentrant"])
def test_dropout_recomputed_identically(name):
    model = _mlp(flow, dropout=0.5)
    x = flow.randn(5, 6, requires_grad=True)
    plain = _grads(flow, model, x, RUNS["plain"](flow, None))
    checked = _grads(flow, model, x, RUNS[name](flow, flow.utils.checkpoint))
    for a, b in zip(plain, checked):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["reentrant", "hooks", "sequential", "sequential_reentrant"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_recomputed_under_the_forwards_autocast(name, dtype):
    """A forward under autocast recomputes under it in a backward outside it (as torch's):
    the same gradients as without checkpointing, and torch's (to the low precision)."""
    x_np = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)

    def under_autocast(m, run):
        return lambda model, x: _autocast_run(m, dtype, run, model, x)
    plain = _grads(flow, _mlp(flow), flow.tensor(x_np, requires_grad=True),
                   under_autocast(flow, RUNS["plain"](flow, None)))
    ours = _grads(flow, _mlp(flow), flow.tensor(x_np, requires_grad=True),
                  under_autocast(flow, RUNS[name](flow, flow.utils.checkpoint)))
    theirs = _grads(torch, _mlp(torch), torch.tensor(x_np, requires_grad=True),
                    under_autocast(torch, RUNS[name](torch, tcp)))
    for a, b, c in zip(ours, plain, theirs):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=0.05, atol=0.05 * np.abs(c).max())


def _autocast_run(m, dtype, run, model, x):
    with m.autocast("cpu", dtype=getattr(m, dtype)):
        return run(model, x).float()


def test_without_preserved_rng_dropout_differs_as_torch():
    model = _mlp(flow, dropout=0.5)
    x = flow.randn(5, 6, requires_grad=True)
    plain = _grads(flow, model, x, RUNS["plain"](flow, None))
    other = _grads(flow, model, x, lambda model, x: checkpoint(
        model, x, use_reentrant=False, preserve_rng_state=False))
    assert any(not np.array_equal(a, b) for a, b in zip(plain, other))


def test_kwargs_non_tensor_args_double_backward_and_second_backward():
    w = flow.tensor([1.0, 2.0], requires_grad=True)

    def f(x, k, scale=1.0):
        return (x.sin() * w * k * scale).sum()

    x = flow.tensor([0.3, 0.7], requires_grad=True)
    y = checkpoint(f, x, 2, use_reentrant=False, scale=3.0)
    (g,) = flow.autograd.grad(y, x, create_graph=True, retain_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 6 * np.cos([0.3, 0.7]) * [1, 2], rtol=1e-6)
    (gg,) = flow.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), -6 * np.sin([0.3, 0.7]) * [1, 2], rtol=1e-6)
    y.backward()  # the graph was retained: recomputes again
    np.testing.assert_allclose(w.grad.numpy(), 6 * np.sin([0.3, 0.7]), rtol=1e-6)
    with pytest.raises(ValueError, match="use_reentrant=False"):
        checkpoint(f, x, 2, use_reentrant=True, scale=3.0)


def test_unset_use_reentrant_warns_and_bad_arguments_raise():
    x = flow.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint(lambda t: t * 2, x)
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential(_mlp(flow), 99, x, use_reentrant=False)
    with pytest.raises(ValueError, match="determinism_check"):
        checkpoint(lambda t: t, x, use_reentrant=False, determinism_check="all")


def test_recomputation_that_diverges_raises():
    calls = []

    def f(x):
        calls.append(1)
        return x.exp() if len(calls) == 1 else x * 1.0  # saves a different count

    x = flow.ones(2, requires_grad=True)
    y = checkpoint(f, x, use_reentrant=False).sum()
    with pytest.raises(RuntimeError, match="different number of tensors"):
        y.backward()


def _peak(step):
    step()
    tracemalloc.start()
    step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_deep_mlp_peak_memory_drops():
    model = _mlp(flow, layers=12, width=16)
    x = flow.randn(2048, 16, requires_grad=True)

    def step(segments):
        def run():
            model.zero_grad(set_to_none=True)
            x.grad = None
            y = model(x) if segments is None else checkpoint_sequential(
                model, segments, x, use_reentrant=False)
            y.pow(2).mean().backward()
        return run
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warnings along the way
        plain, checked = _peak(step(None)), _peak(step(4))
    assert checked < 0.7 * plain, (plain, checked)  # 0.61 measured; 32 layers: 0.43


@pytest.mark.parametrize("call", ["grad", "backward_inputs"])
def test_reentrant_refuses_partial_backward_as_torch(call):
    """Its inner backward fills the .grad of every leaf: inside autograd.grad (or backward
    with inputs=) that would write gradients nobody asked for, so it raises, as torch's."""
    def attempt(m, cp):
        lin = m.nn.Linear(3, 3)
        x = m.ones(2, 3, requires_grad=True)
        loss = cp.checkpoint(lin, x, use_reentrant=True).tanh().sum()
        try:
            if call == "grad":
                m.autograd.grad(loss, x)
            else:
                loss.backward(inputs=[x])
        except RuntimeError as e:
            return str(e), lin.weight.grad
        return None, lin.weight.grad
    ours, theirs = attempt(flow, flow.utils.checkpoint), attempt(torch, tcp)
    assert theirs[0] is not None and ours[0] is not None
    assert ours[0].replace("flowgrad", "torch") == theirs[0]
    assert ours[1] is None and theirs[1] is None
