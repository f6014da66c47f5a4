"""Training programs written as torch users write them, run eagerly and as an nn.Graph step
by step: losses, parameters, optimizer state and gradients must agree on every call (the
first call is the trace; the later ones run the compiled plan)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from graph_helpers import graph_of

import flowgrad as flow
import flowgrad.nn.functional as F
from flowgrad import nn
from flowgrad.graph.graph import StalePlanError
from flowgrad.utils.checkpoint import checkpoint, checkpoint_sequential


def _batches(n=4, rows=6):
    flow.manual_seed(1)
    return [(flow.randn(rows, 4), flow.randint(0, 3, (rows,))) for _ in range(n)]


def _train_as_eager(make_model, step, make_opt, batches):
    """Run `step(model, x, y)` (it calls backward) eagerly then as a graph, seeded alike."""
    flow.manual_seed(0)
    eager = make_model()
    compiled = copy.deepcopy(eager)
    opt_e, opt_g = make_opt(eager), make_opt(compiled)
    graph = graph_of(compiled, step, opt_g)
    for i, (x, y) in enumerate(batches):
        flow.manual_seed(10 + i)
        opt_e.zero_grad()
        loss_e = step(eager, x, y)
        opt_e.step()
        flow.manual_seed(10 + i)
        loss_g = graph(x, y)
        np.testing.assert_allclose(loss_g.numpy(), loss_e.detach().numpy(), rtol=1e-5,
                                   err_msg=f"call {i}")
        for (name, p), q in zip(eager.named_parameters(), compiled.parameters()):
            np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=f"call {i}: {name}")
    assert graph.is_compiled


def _cross_entropy(model, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss


class _Checkpointed(nn.Module):
    """A block run through utils.checkpoint whose last saved tensor is an op's own output
    (tanh, sigmoid, relu save theirs), optionally with a dropout inside."""

    def __init__(self, block_end, reentrant=False, p=0.0):
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 3)
        self.drop = nn.Dropout(p)
        self.end, self.reentrant = block_end, reentrant

    def forward(self, x):
        if self.reentrant:
            x = x.detach().requires_grad_()
        h = checkpoint(lambda t: self.end(self.drop(self.a(t))), x,
                       use_reentrant=self.reentrant)
        return self.b(h)


@pytest.mark.parametrize("end", ["tanh", "sigmoid", "relu", "dropout_then_tanh"])
@pytest.mark.parametrize("reentrant", [False, True])
def test_utils_checkpoint_inside_build_trains_as_eager(end, reentrant):
    # the traced recomputation stopped early inside the op saving the last tensor, before
    # the tracer recorded it: the plan read the first call's tanh output in every later
    # backward (sgd at call 1: a.weight off by 0.005); use_reentrant=True raised
    # NotImplementedError (its backward calls backward(outputs, grads))
    p = 0.3 if end == "dropout_then_tanh" else 0.0
    fn = {"tanh": flow.tanh, "sigmoid": flow.sigmoid, "relu": flow.relu,
          "dropout_then_tanh": flow.tanh}[end]
    _train_as_eager(lambda: _Checkpointed(fn, reentrant, p), _cross_entropy,
                    lambda m: flow.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                    _batches())


def test_checkpoint_sequential_with_dropout_inside_build_trains_as_eager():
    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.2), nn.Linear(8, 8),
                             nn.Sigmoid(), nn.Linear(8, 3))

    def step(model, x, y):
        loss = F.cross_entropy(checkpoint_sequential(model, 2, x, use_reentrant=False), y)
        loss.backward()
        return loss
    _train_as_eager(make, step, lambda m: flow.optim.Adam(m.parameters(), lr=0.01),
                    _batches())


def test_utils_checkpoint_inside_build_is_recomputed_by_the_plan():
    model = _Checkpointed(lambda h: flow.tanh(h) * 2)  # tanh's output: internal
    graph = graph_of(model, _cross_entropy, flow.optim.SGD(model.parameters(), lr=0.1))
    graph(*_batches(1)[0])
    program = graph._compiled[0]
    assert len(program.checkpoints) == 1
    assert any(n.phase == "recompute" for n in program.nodes)


def _calls_as_eager(step, make_inputs, calls=3):
    """`step(*inputs)` eagerly and through Graph.trace on fresh inputs each call: its
    outputs, and the .grad of every input, agree on every call."""
    graph = flow.nn.Graph.trace(step)
    for i in range(calls):
        eager_in, graph_in = make_inputs(i), make_inputs(i)
        flow.manual_seed(i)
        want = step(*eager_in)
        flow.manual_seed(i)
        got = graph(*graph_in)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        for k, (a, b) in enumerate(zip(got, want)):
            assert (a is None) == (b is None), f"call {i}, output {k}: {a} vs {b}"
            if b is not None:
                np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-5,
                                           atol=1e-6, err_msg=f"call {i}, output {k}")
        for k, (a, b) in enumerate(zip(graph_in, eager_in)):
            assert (a.grad is None) == (b.grad is None), f"call {i}: input {k}'s .grad"
            if b.grad is not None:
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5,
                                           err_msg=f"call {i}: input {k}'s .grad")
    assert graph.is_compiled


def _inputs(requires_grad):
    def make(i):
        flow.manual_seed(50 + i)
        return (flow.randn(3, 4, requires_grad=requires_grad), flow.randn(4, 2))
    return make


def test_an_input_gradient_read_inside_build_is_the_traced_one():
    # FGSM / saliency: x.grad after backward inside build was None (graph) against the
    # gradient eagerly
    def fgsm(x, w):
        x = x.detach().requires_grad_()
        loss = (x @ w).tanh().sum()
        loss.backward()
        return x + 0.1 * x.grad.sign(), x.grad
    _calls_as_eager(fgsm, _inputs(False))


def test_a_leaf_made_inside_build_gets_its_gradient():
    def step(x, w):
        scale = flow.ones(2, requires_grad=True)
        ((x @ w) * scale).pow(2).sum().backward()
        return scale.grad
    _calls_as_eager(step, _inputs(False))


def test_a_graph_input_that_requires_grad_gets_its_gradient_after_each_call():
    # graph: x.grad stayed None after the call, and inside build
    def step(x, w):
        loss = (x @ w).sigmoid().sum()
        loss.backward()
        return loss, x.grad
    _calls_as_eager(step, _inputs(True))


def test_input_gradients_accumulate_across_calls_as_eagerly():
    model = nn.Linear(4, 2)
    graph = graph_of(model, lambda m, x: (m(x).pow(2).sum().backward(), x.grad)[1])
    x_graph = flow.randn(3, 4, requires_grad=True)
    x_eager = x_graph.detach().clone().requires_grad_()
    for _ in range(3):
        inside = graph(x_graph)
        model(x_eager).pow(2).sum().backward()
        np.testing.assert_allclose(x_graph.grad.numpy(), x_eager.grad.numpy(), rtol=1e-5)
    # inside build .grad reads this call's gradient, as a parameter's does (the eager
    # .grad is back, and this call's added to it, after build)
    np.testing.assert_allclose(inside.numpy() * 3, x_eager.grad.numpy(), rtol=1e-5)


def test_a_captured_tensor_that_requires_grad_accumulates_its_gradient():
    bias = flow.zeros(2, requires_grad=True)
    bias_eager = flow.zeros(2, requires_grad=True)

    def step(b):
        def run(x, w):
            loss = ((x @ w) + b).exp().sum()
            loss.backward()
            return loss
        return run
    graph = flow.nn.Graph.trace(step(bias))
    for i in range(3):
        x, w = _inputs(False)(i)
        graph(x, w)
        step(bias_eager)(x, w)
        np.testing.assert_allclose(bias.grad.numpy(), bias_eager.grad.numpy(), rtol=1e-5)


def test_backward_of_several_roots_and_of_a_non_scalar_with_its_gradient():
    # both raised NotImplementedError inside build
    def several(x, w):
        x = x.detach().requires_grad_()
        h = x @ w
        flow.autograd.backward([h.sum(), h.pow(2).mean()])
        return x.grad

    def seeded(x, w):
        x = x.detach().requires_grad_()
        h = x @ w
        h.backward(gradient=flow.ones_like(h) * 0.5 + h.detach())
        return x.grad
    _calls_as_eager(several, _inputs(False))
    _calls_as_eager(seeded, _inputs(False))


@pytest.mark.parametrize("case", ["non_scalar", "requires_no_grad", "seed_shape"])
def test_backward_and_grad_inside_build_refuse_what_eager_refuses(case):
    # graph: autograd.grad of a non-scalar without grad_outputs seeded ones; backward of a
    # tensor that requires no grad did nothing; a seed of another shape broadcast
    def step(x, w):
        x = x.detach().requires_grad_()
        h = x @ w
        if case == "non_scalar":
            return flow.autograd.grad(h, x)
        if case == "requires_no_grad":
            return h.detach().sum().backward()
        return flow.autograd.grad(h, x, grad_outputs=flow.ones(2))
    with pytest.raises(RuntimeError) as eager:
        step(*_inputs(False)(0))
    with pytest.raises(RuntimeError) as compiled:
        flow.nn.Graph.trace(step)(*_inputs(False)(0))
    assert str(compiled.value) == str(eager.value)


def test_grad_with_materialize_grads_inside_build_gives_zeros():
    def step(x, w):
        x = x.detach().requires_grad_()
        unused = flow.ones(3, requires_grad=True)
        return flow.autograd.grad((x @ w).sum(), [x, unused], materialize_grads=True)
    _calls_as_eager(step, _inputs(False))


def test_a_detached_parameter_made_a_leaf_keeps_its_gradient_apart():
    # `w.detach().requires_grad_()` shares w's array, so the pass summed its gradient into
    # w's (one value): SGD's first update of w off by 0.0035
    def step(model, x, y):
        w = model[0].weight
        w_leaf = w.detach().requires_grad_()
        h = F.linear(x, w) + 0.5 * F.linear(x, w_leaf)
        loss = F.cross_entropy(model[2](model[1](h)), y)
        loss.backward()
        return loss

    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    _train_as_eager(make, step, lambda m: flow.optim.SGD(m.parameters(), lr=0.1), _batches())


@pytest.mark.parametrize("stepped", ["optimizer", "scheduler", "chained", "warm_restarts"])
def test_stepping_an_optimizer_or_scheduler_inside_build_raises(stepped):
    # the torch loop pasted into build: the step ran once, on the trace, and every later call
    # skipped it silently (the model stopped training: weights 0.027 off eager's by call 3)
    model = nn.Linear(4, 3)
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sch = {"scheduler": flow.optim.lr_scheduler.StepLR(opt, 1, 0.5),
           "chained": flow.optim.lr_scheduler.ChainedScheduler(
               [flow.optim.lr_scheduler.ExponentialLR(opt, 0.9)]),
           "warm_restarts": flow.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 2)}.get(
        stepped)

    def step(m, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        if sch is None:
            opt.step()
        else:
            sch.step()
        return loss
    before = [p.detach().clone() for p in model.parameters()]
    lr = opt.param_groups[0]["lr"]
    with pytest.raises(RuntimeError, match=r"step\(\) inside build\(\).*add_optimizer"):
        graph_of(model, step)(*_batches(1)[0])
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), b.numpy())
    assert opt.param_groups[0]["lr"] == lr


def test_a_second_backward_through_freed_saved_tensors_raises_inside_build_as_eagerly():
    # graph: the second backward added the gradients again (x.grad doubled) where eager
    # refuses; with retain_graph=True both add up in both
    def step(retain):
        def run(x, w):
            x = x.detach().requires_grad_()
            loss = (x @ w).exp().sum()
            loss.backward(retain_graph=retain)
            loss.backward()
            return x.grad
        return run
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        step(False)(*_inputs(False)(0))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        flow.nn.Graph.trace(step(False))(*_inputs(False)(0))
    _calls_as_eager(step(True), _inputs(False))


class _Lookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4, sparse=True, padding_idx=0)
        self.out = nn.Linear(4, 3)

    def forward(self, i):
        return self.out(self.emb(i).mean(1))


@pytest.mark.parametrize("optimizer", ["SGD", "Adagrad", "SparseAdam"])
def test_a_sparse_embedding_with_padding_trains_in_agraph_of(optimizer):
    # the sparse gradient left the padding lookups out: an entry count of the first call's
    # data, so the plan's next call failed ("cannot reshape array of size 17 into (1,16)")
    flow.manual_seed(2)
    batches = [(flow.randint(0, 10, (6, 3)), flow.randint(0, 3, (6,))) for _ in range(4)]

    def make_opt(m):
        if optimizer == "SparseAdam":
            return flow.optim.SparseAdam(list(m.emb.parameters()), lr=0.1)
        return getattr(flow.optim, optimizer)(m.parameters(), lr=0.1)
    _train_as_eager(_Lookup, _cross_entropy, make_opt, batches)


@pytest.mark.parametrize("case", ["manual_seed", "generator", "fork_rng", "set_rng_state"])
def test_changing_a_generators_state_inside_build_raises(case):
    # the seeding ran once, on the trace; the plan's dropout drew on from the generator, so
    # from the second call on its masks differed from eager's (which reseeds every call)
    def step(x):
        if case == "manual_seed":
            flow.manual_seed(0)
            return F.dropout(x, 0.5)
        if case == "generator":
            return x + flow.rand(6, generator=flow.Generator().manual_seed(1))
        if case == "fork_rng":
            with flow.random.fork_rng():
                return F.dropout(x, 0.5)
        flow.set_rng_state(state)
        return F.dropout(x, 0.5)
    state = flow.get_rng_state()
    with pytest.raises(RuntimeError, match="inside build.* random generator's state"):
        flow.nn.Graph.trace(step)(flow.ones(6))
    step(flow.ones(6))  # (eagerly fine)


def test_changing_an_optimizer_option_inside_build_raises_and_is_undone():
    # `param_groups[0]['lr'] *= 0.5` in build ran once, on the trace: lr stayed 0.5 where
    # eagerly it halves every step
    model = nn.Linear(4, 3)
    opt = flow.optim.SGD(model.parameters(), lr=1.0)

    def step(m, x, y):
        opt.param_groups[0]["lr"] *= 0.5
        return _cross_entropy(m, x, y)
    with pytest.raises(NotImplementedError, match="param group option 'lr' from 1.0 to 0.5"):
        graph_of(model, step, opt)(*_batches(1)[0])
    assert opt.param_groups[0]["lr"] == 1.0


def test_a_write_through_a_reshape_of_an_input_refuses_an_input_of_another_layout():
    # traced on a contiguous x, `x.reshape(-1)[0] = 100` wrote x (a view); given x.t() of
    # a (4, 6) array later, eager's reshape copies and x is left alone, but the plan still
    # wrote 100 into it
    def through_reshape(x):
        x.reshape(-1)[0] = 100.0
        return x * 1

    def direct(x):
        x.mul_(2)
        return x * 1
    flow.manual_seed(0)
    contiguous, transposed = flow.randn(6, 4), flow.randn(4, 6).t()
    graph = flow.nn.Graph.trace(through_reshape)
    graph(contiguous.clone())
    with pytest.raises(RuntimeError, match="input 0 has strides .* traced with strides"):
        graph(transposed.clone())
    graph = flow.nn.Graph.trace(direct)  # a direct write reaches the input in any layout
    graph(contiguous.clone())
    given = transposed.clone()
    np.testing.assert_allclose(graph(given).numpy(), transposed.numpy() * 2)
    np.testing.assert_allclose(given.numpy(), transposed.numpy() * 2)


class _Scaled(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.__dict__["scale"] = scale  # (a Parameter the module does not register)

    def forward(self, x):
        return self.lin(x) * self.scale


def test_an_optimizer_parameter_outside_the_graphs_modules_is_trained():
    # a Parameter used in build but held only by the optimizer never moved in the graph
    # (its gradient was not a result of the plan), so the rest of the model drifted too
    def make():
        return _Scaled(nn.Parameter(flow.ones(3)))

    def make_opt(m):
        return flow.optim.SGD(list(m.parameters()) + [m.scale], lr=0.1, momentum=0.9)
    flow.manual_seed(0)
    eager = make()
    compiled = _Scaled(nn.Parameter(flow.ones(3)))
    compiled.load_state_dict(eager.state_dict())
    opt_e, opt_g = make_opt(eager), make_opt(compiled)
    graph = graph_of(compiled, _cross_entropy, opt_g)
    for x, y in _batches():
        opt_e.zero_grad()
        _cross_entropy(eager, x, y)
        opt_e.step()
        graph(x, y)
        np.testing.assert_allclose(compiled.scale.detach().numpy(),
                                   eager.scale.detach().numpy(), rtol=1e-5)
        np.testing.assert_allclose(compiled.lin.weight.detach().numpy(),
                                   eager.lin.weight.detach().numpy(), rtol=1e-5)


def test_vector_to_parameters_inside_build_is_replayed_by_the_plan():
    # it assigned the parameters' arrays directly, unseen by the trace: from the second
    # call the plan skipped the write (weights 0.005 off eager's)
    def step(model, x, y):
        loss = _cross_entropy(model, x, y)
        with flow.no_grad():
            v = flow.nn.utils.parameters_to_vector(model.parameters())
            flow.nn.utils.vector_to_parameters(v * 0.99, model.parameters())
        return loss

    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    _train_as_eager(make, step, lambda m: flow.optim.SGD(m.parameters(), lr=0.1), _batches())


def test_clip_grad_value_inside_build_clamps_each_calls_gradients():
    # it raised inside build (array-level, like clip_grad_norm_), though a clamp is one op
    def step(model, x, y):
        loss = _cross_entropy(model, x, y)
        flow.nn.utils.clip_grad_value_(model.parameters(), 0.05)
        return loss

    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    _train_as_eager(make, step, lambda m: flow.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                    [(x * 3, y) for x, y in _batches()])


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_inside_build_clips_each_calls_gradients(norm_type):
    """The torch loop's clip between backward and step (clip_grad_norm_, or get_total_norm
    then clip_grads_with_norm_) was refused inside build (computed on arrays); it is ops on
    the traced gradients now, which the plan runs on each call's before the update."""
    def step(model, x, y):
        loss = _cross_entropy(model, x, y)
        total = flow.nn.utils.clip_grad_norm_(model.parameters(), 0.05, norm_type)
        return loss + 0 * total  # (the norm is a result too: each call's)

    def step_in_two(model, x, y):
        loss = _cross_entropy(model, x, y)
        grads = [p.grad for p in model.parameters()]
        total = flow.nn.utils.get_total_norm(grads, norm_type)
        flow.nn.utils.clip_grads_with_norm_(model.parameters(), 0.05, total)
        return loss

    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    for fn in (step, step_in_two):
        _train_as_eager(make, fn, lambda m: flow.optim.SGD(m.parameters(), lr=0.1,
                                                            momentum=0.9),
                        [(x * 3, y) for x, y in _batches()])


def test_clip_grad_norm_error_if_nonfinite_is_checked_by_the_plan():
    model = nn.Linear(2, 1)
    weight = model.weight.detach().numpy().copy()

    def step(model, x):
        loss = model(x).sum()
        loss.backward()
        return flow.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)

    graph = graph_of(model, step, flow.optim.SGD(model.parameters(), lr=0.1))
    # dw = x = (1, 1), db = 1: the total 2-norm is sqrt(3), clipped to 1
    np.testing.assert_allclose(graph(flow.ones(1, 2)).item(), 3 ** 0.5, rtol=1e-6)
    np.testing.assert_allclose(model.weight.detach().numpy(), weight - 0.1 / 3 ** 0.5,
                               rtol=1e-6)
    weight = model.weight.detach().numpy().copy()
    with pytest.raises(RuntimeError, match="total norm of order 2.0 .* non-finite"):
        graph(flow.tensor([[float("inf"), 1.0]]))
    np.testing.assert_array_equal(model.weight.detach().numpy(), weight)  # no update


class _Optional(flow.nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x, scale=None, shift=None):
        h = self.model(x)
        if scale is not None:
            h = h * scale
        if shift is not None:
            h = h + shift
        return h


def test_keyword_inputs_are_bound_by_name_not_by_count():
    # graph(x, shift=b) after graph(x, scale=s): two inputs of the same meta both times, so
    # the plan took b as the traced scale and returned h * b (silently)
    model = nn.Linear(4, 3)
    x, s, b = flow.randn(2, 4), flow.full((3,), 2.0), flow.full((3,), 0.5)
    graph = _Optional(model)
    np.testing.assert_allclose(graph(x, scale=s).numpy(), (model(x) * s).detach().numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(graph(x, s).numpy(), (model(x) * s).detach().numpy(),
                               rtol=1e-6)  # (the same call, by position)
    with pytest.raises(RuntimeError, match="ONLY accepts static inputs"):
        graph(x, shift=b)
    dynamic = flow.nn.Graph.with_dynamic_input_shape(size=4)(
        type("Dynamic", (_Optional,), {}))(model)
    dynamic(x, scale=s)
    np.testing.assert_allclose(dynamic(x, shift=b).numpy(), (model(x) + b).detach().numpy(),
                               rtol=1e-6)


def test_a_parameter_no_optimizer_holds_accumulates_its_gradient_across_calls():
    # the optimizers zero only their own parameters' grads: another parameter's .grad sums
    # every call's, as eagerly (the graph kept only the last call's)
    def make():
        return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))

    flow.manual_seed(0)
    eager = make()
    compiled = copy.deepcopy(eager)
    opt_e = flow.optim.SGD(eager[0].parameters(), lr=0.1)
    opt_g = flow.optim.SGD(compiled[0].parameters(), lr=0.1)
    graph = graph_of(compiled, _cross_entropy, opt_g)
    for i, (x, y) in enumerate(_batches()):
        opt_e.zero_grad()
        _cross_entropy(eager, x, y)
        opt_e.step()
        graph(x, y)
        for p, q in zip(eager[2].parameters(), compiled[2].parameters()):
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-7,
                                       err_msg=f"call {i}")


def test_gradient_accumulation_gives_an_input_its_gradient():
    # each micro-batch's gradient, over k (the mean loss's), gathered into the input's .grad
    # as eagerly; the input got none
    def step(model, x, y):
        loss = F.cross_entropy(model(x * 2.0), y)
        loss.backward()
        return loss

    flow.manual_seed(0)
    eager = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    compiled = copy.deepcopy(eager)
    opt_g = flow.optim.SGD(compiled.parameters(), lr=0.1)
    graph = graph_of(compiled, step, opt_g)
    graph.config.set_gradient_accumulation_steps(2)
    for i, (x, y) in enumerate(_batches()):
        xe, xg = x.clone().requires_grad_(), x.clone().requires_grad_()
        loss = sum(F.cross_entropy(eager(xc * 2.0), yc) for xc, yc in
                   zip(xe.chunk(2), y.chunk(2))) / 2
        loss.backward()
        graph(xg, y)
        np.testing.assert_allclose(xg.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-7,
                                   err_msg=f"call {i}")
        with flow.no_grad():
            for p in eager.parameters():
                p -= 0.1 * p.grad
                p.grad = None


@pytest.mark.parametrize("name, fn", [
    ("vmap", lambda a: flow.func.vmap(lambda u: u * 2 + u.sin())(a)),
    ("jacrev", lambda a: flow.func.jacrev(lambda u: u.sin())(a)),
    ("vmap of grad", lambda a: flow.func.vmap(flow.func.grad(lambda u: (u ** 3).sum()))(
        a[None] * flow.arange(1.0, 4.0)[:, None])),
], ids=["vmap", "jacrev", "vmap_grad"])
def test_function_transforms_inside_build_are_replayed(name, fn):
    """vmap inside build (jacrev, per-example gradients): its batching rules ran their ops
    on the physical tensors eagerly, past the tracer (which had no apply_full), so the plan
    held no node for them and returned the first call's values on every call, with no
    error. They are recorded now."""
    graph = flow.nn.Graph.trace(fn)
    for a in ([1.0, 2.0], [3.0, -4.0], [0.5, 0.25]):
        x = flow.tensor(a)
        np.testing.assert_allclose(graph(x).numpy(), fn(x).numpy(), rtol=1e-6)


def test_a_value_check_under_vmap_inside_build_is_made_by_the_plan():
    """A check of input values under vmap (an integer division by zero) was made once at
    trace time: the vmap level handed it to no tracer. It reaches the plan now."""
    graph = flow.nn.Graph.trace(lambda a, b: flow.func.vmap(lambda u, v: u // v)(a, b))
    assert graph(flow.tensor([4, 5]), flow.tensor([2, 1])).tolist() == [2, 5]
    assert graph(flow.tensor([6, 6]), flow.tensor([3, 2])).tolist() == [2, 3]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        graph(flow.tensor([4, 5]), flow.tensor([0, 1]))


@pytest.mark.parametrize("fn", [
    lambda a: flow.func.hessian(lambda u: (u ** 3).sum())(a),
    lambda a: flow.func.grad(lambda v: flow.func.grad(lambda u: (u ** 3).sum())(v).sum())(a),
    lambda a: flow.func.jvp(flow.func.grad(lambda u: (u ** 3).sum()), (a,), (a * 0 + 1,))[1],
], ids=["hessian", "grad_of_grad", "jvp_of_grad"])
def test_a_transform_of_a_gradient_inside_build_is_refused(fn):
    """hessian, grad of grad, jvp of grad inside build: the traced gradient did not carry
    the transforms' levels, so the graph gave zeros or the first call's values with no
    error. Refused inside build; flow.compile runs such a function eagerly."""
    x = flow.tensor([1.0, 2.0])
    with pytest.raises(NotImplementedError, match="differentiating a gradient"):
        flow.nn.Graph.trace(fn)(x)
    compiled = flow.compile(fn)
    with pytest.warns(UserWarning, match="eagerly"):
        compiled(x)
    for a in ([3.0, 4.0], [-1.0, 0.5]):
        x = flow.tensor(a)
        np.testing.assert_allclose(compiled(x).numpy(), fn(x).numpy(), rtol=1e-6)


def _add_twice(x, y):
    return x * 2 + y


def _write_second(x, y):
    y.mul_(3)
    return x + 1


@pytest.mark.parametrize("fn", [_add_twice, _write_second])
def test_inputs_aliased_unlike_the_traced_call_are_not_given_the_traced_plan(fn):
    """One tensor passed twice at the trace is one value of the plan, which then read one
    position for both: a later call with two tensors gave b * 2 + b for a * 2 + b; and a plan
    writing into an input traced unaliased ran with aliased inputs. The same for an input
    that was a parameter when traced."""
    def pair(same):
        a = flow.ones(3)
        return (a, a) if same else (a, flow.full((3,), 5.0))

    for traced_same in (True, False):
        graph, compiled = flow.nn.Graph.trace(fn), flow.compile(fn)
        graph(*pair(traced_same))
        compiled(*pair(traced_same))
        if traced_same or fn is _write_second:  # (else: two reads, right either way)
            with pytest.raises(StalePlanError, match="shared memory"):
                graph(*pair(not traced_same))
        for same in (not traced_same, traced_same, not traced_same):
            assert compiled(*pair(same)).tolist() == fn(*pair(same)).tolist()
    flow.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    q, k, v = flow.randn(3, 2, 3, 4).unbind(0)
    self_attention = flow.compile(mha)
    assert self_attention(q, q, q)[0].tolist() == mha(q, q, q)[0].tolist()
    assert self_attention(q, k, v)[0].tolist() == mha(q, k, v)[0].tolist()
    linear = nn.Linear(3, 3)
    with_weight = flow.compile(lambda x: linear(x) + x)
    with_weight(linear.weight)
    x = flow.ones(3, 3)
    assert with_weight(x).tolist() == (linear(x) + x).tolist()


def test_a_training_graph_called_under_no_grad_raises_as_its_eager_step():
    """A training graph (backward in build, an optimizer) compiled with grad, then called
    under no_grad (an eval loop by mistake): eagerly the backward raises; the plan trained on
    the batch silently."""
    model = nn.Linear(3, 2)
    graph = graph_of(model, _summed, flow.optim.SGD(model.parameters(), lr=0.1))
    x = flow.ones(2, 3)
    graph(x)
    held = model.weight.clone()
    for mode in (flow.no_grad, flow.inference_mode):
        with mode(), pytest.raises(RuntimeError, match="does not require grad"):
            graph(x)
    assert model.weight.tolist() == held.tolist()
    graph(x)  # (with grad: trains on)
    assert model.weight.tolist() != held.tolist()


def _summed(model, x):
    loss = model(x).sum()
    loss.backward()
    return loss
