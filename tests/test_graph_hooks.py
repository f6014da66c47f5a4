"""Hooks inside and around a training nn.Graph train as the same step run eagerly: tensor
hooks on activations and parameters, module backward hooks, saved-tensor hooks and custom
Functions that hand an input back. Each row runs three steps (a new batch on every call) in
both modes and compares the losses and the parameters after every step."""
import contextlib

import numpy as np
import pytest
from graph_helpers import steps_match_eager, train_graph

import flowgrad as flow
import flowgrad.nn.functional as F


def _model():
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(6, 8), flow.nn.Tanh(), flow.nn.Linear(8, 8),
                              flow.nn.Tanh(), flow.nn.Linear(8, 3))


class _PassThrough(flow.autograd.Function):
    """Returns its input as it is (detached), and scales its gradient."""

    @staticmethod
    def forward(ctx, x):
        return x.detach()

    @staticmethod
    def backward(ctx, g):
        return g * 0.5


def _param_hook(model):
    model[4].weight.register_hook(lambda g: g * 0.5)


def _module_backward_hook(model):
    model[2].register_full_backward_hook(lambda m, gi, go: (gi[0] * 2,))


def _module_backward_pre_hook(model):
    model[4].register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))


SETUPS = {  # what is done to the model once, outside build
    "activation_hook": None, "parameter_hook": _param_hook,
    "module_backward_hook": _module_backward_hook,
    "module_backward_pre_hook": _module_backward_pre_hook,
    "saved_tensor_hooks": None, "function_returning_its_input": None,
    "hooks_and_gradient_penalty": _module_backward_hook,
}


def _loss(case):
    def loss_fn(model, x, y):
        pack = flow.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t) \
            if case == "saved_tensor_hooks" else contextlib.nullcontext()
        with pack:
            h = model[1](model[0](x))
            if case == "activation_hook":
                h.register_hook(lambda g: g * 3)
            if case == "function_returning_its_input":
                h = _PassThrough.apply(h)
            loss = F.cross_entropy(model[4](model[3](model[2](h))), y)
            if case == "hooks_and_gradient_penalty":
                g, = flow.autograd.grad(loss, h, create_graph=True)
                loss = loss + (g ** 2).sum()
        return loss
    return loss_fn


@pytest.mark.parametrize("case", sorted(SETUPS))
def test_hooks_train_as_eager(case):
    eager, model = _model(), _model()
    if SETUPS[case] is not None:
        SETUPS[case](eager)
        SETUPS[case](model)
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    batches = [(flow.tensor(rng.standard_normal((5, 6)).astype(np.float32)),
                flow.tensor(rng.integers(0, 3, 5))) for _ in range(3)]
    steps_match_eager(train_graph(model, opt, loss_fn=_loss(case)), eager, opt_e, None,
                      batches, loss_fn=_loss(case))
    for a, b in zip(model.parameters(), eager.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_post_accumulate_grad_hooks_are_refused_not_skipped():
    model = _model()
    model[0].weight.register_post_accumulate_grad_hook(lambda p: None)
    graph = train_graph(model, flow.optim.SGD(model.parameters(), lr=0.1),
                        loss_fn=_loss("plain"))
    x, y = flow.ones(5, 6), flow.zeros(5, dtype=flow.int64)
    with pytest.raises(NotImplementedError, match=r"shape \(8, 6\)\) has post-accumulate-grad "
                                                  r"hooks .*\(register_hook\)"):
        graph(x, y)


# a hook registered or removed after the graph compiled: the plan runs the hooks it traced, so
# each change must raise on the next call (the plan ignored them, silently)
HOOK_CHANGES = {
    "forward hook": lambda m: m[2].register_forward_hook(lambda mod, i, out: out * 10),
    "forward pre hook": lambda m: m[0].register_forward_pre_hook(lambda mod, i: (i[0] * 2,)),
    "full backward hook": lambda m: m[4].register_full_backward_hook(lambda mod, gi, go: None),
    "parameter hook": lambda m: m[0].weight.register_hook(lambda g: g * 3),
    "post-accumulate hook": lambda m: m[0].bias.register_post_accumulate_grad_hook(
        lambda p: None),
    "removed forward hook": lambda m: m.__dict__["_removed"].remove(),
}


@pytest.mark.parametrize("change", HOOK_CHANGES)
def test_hooks_changed_after_compiling_raise_on_the_next_call(change):
    model = _model()
    if change.startswith("removed"):
        model.__dict__["_removed"] = model[2].register_forward_hook(lambda mod, i, out: out)
    graph = train_graph(model, flow.optim.SGD(model.parameters(), lr=0.1),
                        loss_fn=_loss("plain"))
    x, y = flow.ones(5, 6), flow.zeros(5, dtype=flow.int64)
    graph(x, y)
    graph(x, y)
    HOOK_CHANGES[change](model)
    with pytest.raises(RuntimeError, match="a hook was registered or removed after the graph "
                                           "compiled"):
        graph(x, y)
