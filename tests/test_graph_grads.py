"""The parameters' .grad inside a training nn.Graph's build behave as eagerly: backward
accumulates into them (two backward calls add up), build may read them (a gradient norm as
an output) and change them with ops (scale them in place, drop them with zero_grad), and the
update uses what they hold at the end of build. Each row runs three steps (a new batch on
every call) in both modes and compares the outputs and the parameters after every step."""
import numpy as np
import pytest
from graph_helpers import graph_of, sum_backward

import flowgrad as flow
import flowgrad.nn.functional as F


def _model():
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(4, 5), flow.nn.Tanh(), flow.nn.Linear(5, 2))


def _two_backwards(model, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward(retain_graph=True)
    (loss * 2).backward()
    return [loss]


def _norm_output(model, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return [loss, sum((p.grad ** 2).sum() for p in model.parameters())]


def _scale_in_place(model, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    for p in model.parameters():
        p.grad.mul_(0.25)
    return [loss]


def _drop_one(model, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    model[0].bias.grad = None  # no update for it this step, as eagerly
    return [loss]


def _retained(model, x, y):
    hidden = model[0](x)
    hidden.retain_grad()  # (its .grad was None inside build: now the traced gradient)
    logits = model[2](model[1](hidden))
    logits.retain_grad()
    loss = F.cross_entropy(logits, y)
    loss.backward()
    return [loss, hidden.grad.abs().sum(), logits.grad.sum(1).abs().sum()]


STEPS = {"two_backwards": _two_backwards, "norm_output": _norm_output,
         "scale_in_place": _scale_in_place, "drop_one": _drop_one, "retained": _retained}


def _run(step, graph):
    model = _model()
    opt = flow.optim.SGD(model.parameters(), lr=0.5, momentum=0.5)
    rng = np.random.default_rng(0)
    batches = [(flow.tensor(rng.standard_normal((3, 4)).astype(np.float32)),
                flow.tensor(rng.integers(0, 2, 3))) for _ in range(3)]
    if graph:
        run = graph_of(model, step, opt)
    else:
        def run(x, y):
            out = step(model, x, y)
            opt.step()
            opt.zero_grad()
            return out
    outs, params = [], []
    for x, y in batches:
        outs.append([float(o) for o in run(x, y)])
        params.append([p.detach().numpy().copy() for p in model.parameters()])
    return outs, params


@pytest.mark.parametrize("name", sorted(STEPS))
def test_grads_inside_build_as_eager(name):
    eager, graph = _run(STEPS[name], False), _run(STEPS[name], True)
    np.testing.assert_allclose(graph[0], eager[0], rtol=1e-5)
    for a, b in zip(graph[1], eager[1]):
        for p, q in zip(a, b):
            np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)


def test_eager_grad_is_back_after_build():
    model = _model()
    model(flow.ones(1, 4)).sum().backward()
    before = [p.grad for p in model.parameters()]

    def grads_of(model, x):
        sum_backward(model, x)
        return [p.grad for p in model.parameters()]
    grads = graph_of(model, grads_of)(flow.ones(2, 4))
    assert all(p.grad is b for p, b in zip(model.parameters(), before))
    np.testing.assert_allclose(grads[-1].numpy(), [2.0, 2.0])  # this call's, not summed


@pytest.mark.parametrize("change", ["freeze", "unfreeze"])
def test_changing_requires_grad_after_compiling_raises(change):
    model = _model()
    if change == "unfreeze":
        model[0].weight.requires_grad_(False)
    train = graph_of(model, sum_backward, flow.optim.SGD(model.parameters(), lr=0.1))
    train(flow.ones(2, 4))
    model[0].weight.requires_grad_(change == "unfreeze")
    with pytest.raises(RuntimeError, match="requires_grad changed after the graph compiled"):
        train(flow.ones(2, 4))


@pytest.mark.parametrize("change, match", [
    (lambda model: model.eval(), r"module 'model' \(Sequential\) had training=True .* now"),
    (lambda model: setattr(model[1], "p", 0.5), r"module 'model.1' \(Dropout\) had p=0.0"),
    (lambda model: setattr(model[2], "momentum", 0.9), r"'model.2' \(BatchNorm1d\) had momentum"),
])
def test_a_module_setting_changed_after_compiling_raises(change, match):
    """A plan computes with the settings its modules had when traced: a later change raises
    (eagerly it would take effect); a training and an eval graph share the modules, each
    called in its own mode."""
    flow.manual_seed(0)
    model = flow.nn.Sequential(flow.nn.Linear(4, 5), flow.nn.Dropout(0.0),
                               flow.nn.BatchNorm1d(5), flow.nn.Linear(5, 2))
    train = graph_of(model, sum_backward, flow.optim.SGD(model.parameters(), lr=0.1))
    evaluate, x = graph_of(model, lambda model, x: model(x)), flow.randn(3, 4)
    train(x)
    model.eval()
    eager = model(x)
    np.testing.assert_allclose(evaluate(x).numpy(), eager.detach().numpy(), rtol=1e-6)
    model.train()
    train(x)
    change(model)
    with pytest.raises(RuntimeError, match=match + ".*Build a new graph"):
        train(x)


def test_a_graph_attribute_build_reads_changed_after_compiling_raises():
    class Scaled(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = flow.nn.Linear(2, 2)
            self.scale = 2.0

        def build(self, x):
            return self.lin(x) * self.scale
    graph = Scaled()
    graph(flow.ones(1, 2))
    graph.scale = 0.5
    with pytest.raises(RuntimeError, match="the graph had scale=2.0 when the graph compiled "
                                           "and has scale=0.5 now"):
        graph(flow.ones(1, 2))


def test_a_graph_attribute_build_does_not_read_may_change():
    class Counted(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = flow.nn.Linear(2, 2)
            self.calls = 0  # bookkeeping outside build

        def build(self, x):
            return self.lin(x)
    graph = Counted()
    for _ in range(3):
        graph(flow.ones(1, 2))
        graph.calls += 1
    assert graph.calls == 3


def test_a_build_that_raises_after_backward_leaves_the_eager_grads():
    model = _model()
    model(flow.ones(1, 4)).sum().backward()
    before = [p.grad for p in model.parameters()]

    def failing(model, x):
        sum_backward(model, x)
        raise ValueError("after backward")
    with pytest.raises(ValueError, match="after backward"):
        graph_of(model, failing)(flow.ones(2, 4))
    assert all(p.grad is b for p, b in zip(model.parameters(), before))


@pytest.mark.parametrize("replace", ["parameter", "buffer", "submodule"])
def test_replacing_state_after_compiling_raises_instead_of_using_the_old(replace):
    """The plan holds the tensors it traced: a Parameter assigned anew was silently ignored
    (the old weights kept computing). Writing into the existing tensor is seen."""
    model = flow.nn.Sequential(flow.nn.Linear(4, 3), flow.nn.BatchNorm1d(3))
    run = graph_of(model, lambda model, x: [model(x)])
    x = flow.ones(2, 4)
    run(x)
    with flow.no_grad():
        model[0].weight.fill_(0.5)  # in place: the plan reads it
    np.testing.assert_allclose(run(x)[0].numpy(), model(x).detach().numpy(), rtol=1e-6)
    if replace == "parameter":
        model[0].weight = flow.nn.Parameter(flow.zeros(3, 4))
    elif replace == "buffer":
        model[1].running_mean = flow.zeros(3)
    else:
        model[0] = flow.nn.Linear(4, 3)
    with pytest.raises(RuntimeError, match="was replaced after the graph compiled"):
        run(x)


@pytest.mark.parametrize("change", ["double", "half", "data of another shape"])
def test_a_state_tensor_of_another_dtype_or_shape_is_refused_not_computed_with(change):
    """The plan is compiled for the traced dtypes and shapes: after model.double() it went on
    computing (in float64, where eager raises on the float32 input), and a .data of another
    shape would reach kernels traced for the old one."""
    model = flow.nn.Sequential(flow.nn.Linear(4, 3), flow.nn.Tanh())
    run = graph_of(model, lambda model, x: [model(x) * 2.0])
    x = flow.ones(2, 4)
    run(x)
    if change == "double":
        model.double()
    elif change == "half":
        model.half()
    else:
        model[0].weight.data = flow.zeros(5, 4)
    with pytest.raises(RuntimeError, match=r"a parameter or buffer traced as \(3, 4\) float32 "
                                           r"is now"):
        run(x)
