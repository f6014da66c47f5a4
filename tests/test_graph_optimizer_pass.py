"""The optimizer pass: the update joins the compiled program as `update` nodes, with eager's
numbers, and frees each gradient as soon as it is used."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from graph_helpers import steps_match_eager, train_graph

import flowgrad as flow
import flowgrad.nn.functional as F


def _mlp(seed=0, sizes=(8, 16, 4)):
    flow.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers += [flow.nn.Linear(a, b)] + ([flow.nn.ReLU()] if i < len(sizes) - 2 else [])
    return flow.nn.Sequential(*layers)


def _batches(n, rows=6, features=8, classes=4, seed=2):
    rng = np.random.default_rng(seed)
    return [(flow.tensor(rng.standard_normal((rows, features)).astype(np.float32)),
             flow.tensor(rng.integers(0, classes, rows))) for _ in range(n)]


def _updates(graph):
    return [n for n in graph._compiled[0].nodes if n.phase == "update"]


def _pair(make_opt, **switches):
    eager, graphed = _mlp(), _mlp()
    opt_e, opt_g = make_opt(eager.parameters()), make_opt(graphed.parameters())
    train = train_graph(graphed, opt_g)
    for name, value in switches.items():
        getattr(train.config, name)(value)
    return eager, graphed, opt_e, opt_g, train


@pytest.mark.parametrize("make_opt", [
    lambda p: flow.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda p: flow.optim.Adam(p, lr=0.01, amsgrad=True),
    lambda p: flow.optim.AdamW(p, lr=0.01, foreach=False),
    lambda p: flow.optim.RMSprop(p, lr=0.01, momentum=0.5),
])
@pytest.mark.parametrize("fuse", [False, True])
def test_update_nodes_train_as_eager(make_opt, fuse):
    eager, graphed, opt_e, opt_g, train = _pair(make_opt, allow_fuse_model_update_ops=fuse)
    steps_match_eager(train, eager, opt_e, None, _batches(6))
    updates = _updates(train)
    # one node per parameter, placed early; fused: one node per param group
    assert len(updates) == (1 if fuse else 4)
    assert {p for n in updates for p in n.op.params} == set(graphed.parameters())
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.detach().numpy(), pe.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)
    assert all(p.grad is None for p in graphed.parameters())
    assert opt_g.state_dict()["state"].keys() == opt_e.state_dict()["state"].keys()


def test_update_follows_the_last_read_of_its_parameter_and_its_views():
    """The last layer's weight is read again after its gradient is ready (dx = dy @ W, and
    here through a view in a penalty): its update must come after every such read."""
    eager, graphed = _mlp(), _mlp()
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.5)
    opt_g = flow.optim.SGD(graphed.parameters(), lr=0.5)

    def loss_fn(model, x, y):
        w = model[0].weight
        return F.cross_entropy(model(x), y) + (w.t()[0] ** 2).sum() * 0.1

    train = train_graph(graphed, opt_g, loss_fn=loss_fn)
    steps_match_eager(train, eager, opt_e, None, _batches(4), loss_fn=loss_fn)
    nodes = train._compiled[0].nodes
    position = {id(n): i for i, n in enumerate(nodes)}
    for update in _updates(train):
        (param,) = update.op.params
        readers = [i for i, n in enumerate(nodes) for v in n.inputs
                   if v.kind == "state" and v.source is param]
        assert position[id(update)] > max(readers)


def test_scheduler_changes_the_rate_the_plan_uses():
    eager, graphed = _mlp(), _mlp()
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.2, momentum=0.5)
    opt_g = flow.optim.SGD(graphed.parameters(), lr=0.2, momentum=0.5)
    sch_e = flow.optim.lr_scheduler.StepLR(opt_e, step_size=1, gamma=0.5)
    sch_g = flow.optim.lr_scheduler.StepLR(opt_g, step_size=1, gamma=0.5)
    train = train_graph(graphed, opt_g, lr_sch=sch_g)
    steps_match_eager(train, eager, opt_e, sch_e, _batches(5))
    assert _updates(train) and opt_g.param_groups[0]["lr"] == opt_e.param_groups[0]["lr"]


def test_clipping_keeps_the_update_after_the_plan():
    eager, graphed = _mlp(), _mlp()
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.5)
    opt_g = flow.optim.SGD([{"params": graphed.parameters(), "clip_grad_max_norm": 0.1}],
                           lr=0.5)
    train = train_graph(graphed, opt_g)
    for x, y in _batches(4):
        loss_e = F.cross_entropy(eager(x), y)
        opt_e.zero_grad()
        loss_e.backward()
        flow.nn.utils.clip_grad_norm_(eager.parameters(), 0.1)
        opt_e.step()
        np.testing.assert_allclose(train(x, y).numpy(), loss_e.detach().numpy(), rtol=1e-5)
    assert not _updates(train)


def test_compiled_mlp_step_peaks_below_eager():
    """Each gradient is freed once its update has run, where eager keeps every .grad until
    zero_grad: the compiled step's peak allocation is lower."""
    x = flow.tensor(np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32))
    y = flow.tensor(np.random.default_rng(1).integers(0, 10, 64))
    model = _mlp(sizes=(256, 256, 256, 10))
    opt = flow.optim.SGD(model.parameters(), lr=0.01)
    train = train_graph(model, opt)

    def eager_step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    def peak(step):
        step()
        tracemalloc.start()
        step()
        result = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return result

    eager_peak, graph_peak = peak(eager_step), peak(lambda: train(x, y))
    assert graph_peak < 0.85 * eager_peak, (graph_peak, eager_peak)


def test_changing_the_param_groups_after_compiling_raises_instead_of_skipping_them():
    model, extra = _mlp(), flow.nn.Parameter(flow.ones(3))
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    train = train_graph(model, opt)
    (x, y), = _batches(1)
    train(x, y)
    train(x, y)
    opt.add_param_group({"params": [extra]})
    with pytest.raises(RuntimeError, match="param groups changed"):
        train(x, y)


_EVERY_OPTIMIZER = {  # each optimizer flowgrad has whose step needs no closure
    "Adafactor": lambda p: flow.optim.Adafactor(p, lr=0.01),
    "SparseAdam": lambda p: flow.optim.SparseAdam(p, lr=0.01),
    "Adadelta": lambda p: flow.optim.Adadelta(p, lr=0.5),
    "Adagrad": lambda p: flow.optim.Adagrad(p, lr=0.05),
    "Adamax": lambda p: flow.optim.Adamax(p, lr=0.01),
    "NAdam": lambda p: flow.optim.NAdam(p, lr=0.01),
    "RAdam": lambda p: flow.optim.RAdam(p, lr=0.01),
    "ASGD": lambda p: flow.optim.ASGD(p, lr=0.05),
    "Rprop": lambda p: flow.optim.Rprop(p, lr=0.01),
    "Muon": lambda p: flow.optim.Muon([q for q in p if q.ndim == 2], lr=0.02),  # (2-D only)
}


def _sparse_grads(opt, args, kwargs):
    for group in opt.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                p.grad = p.grad.to_sparse(1) if p.dim() > 1 else p.grad.to_sparse()


@pytest.mark.parametrize("name", sorted(_EVERY_OPTIMIZER))
def test_every_optimizer_updates_inside_the_plan_as_eagerly(name):
    eager, graphed, opt_e, opt_g, train = _pair(_EVERY_OPTIMIZER[name])
    if name == "SparseAdam":  # (eagerly it takes sparse gradients only, as torch's; a plan
        # reads dense ones as sparse, a row with any non-zero gradient as an entry)
        opt_e.register_step_pre_hook(_sparse_grads)
    steps_match_eager(train, eager, opt_e, None, _batches(4))
    assert len(_updates(train)) == sum(len(g["params"]) for g in opt_g.param_groups)
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.detach().numpy(), pe.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)


def test_lbfgs_needs_a_closure_and_stays_out_of_the_plan():
    from flowgrad.graph import GraphConfig
    from flowgrad.graph.optimizer_pass import in_plan

    assert not in_plan(flow.optim.LBFGS(_mlp().parameters()), GraphConfig())


def test_reduce_on_plateau_is_stepped_by_the_user_and_the_plan_reads_its_rate():
    eager, graphed = _mlp(), _mlp()
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.5)
    opt_g = flow.optim.SGD(graphed.parameters(), lr=0.5)
    sch_e = flow.optim.lr_scheduler.ReduceLROnPlateau(opt_e, patience=0, factor=0.5)
    sch_g = flow.optim.lr_scheduler.ReduceLROnPlateau(opt_g, patience=0, factor=0.5)
    with pytest.raises(TypeError, match="ReduceLROnPlateau"):
        train_graph(graphed, opt_g, lr_sch=sch_g)
    train = train_graph(graphed, opt_g)
    for x, y in _batches(4) * 2:
        loss_e = F.cross_entropy(eager(x), y)
        opt_e.zero_grad()
        loss_e.backward()
        opt_e.step()
        sch_e.step(loss_e.item())
        loss_g = train(x, y)
        sch_g.step(loss_g.item())
        np.testing.assert_allclose(loss_g.numpy(), loss_e.detach().numpy(), rtol=1e-5)
    assert opt_g.param_groups[0]["lr"] == opt_e.param_groups[0]["lr"] < 0.5


def _plain_pair(dtype, sizes=(96, 128, 10), **sgd):
    eager, graphed = _mlp(sizes=sizes).to(dtype), _mlp(sizes=sizes).to(dtype)
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.1, **sgd)
    opt_g = flow.optim.SGD(graphed.parameters(), lr=0.1, **sgd)
    return eager, graphed, opt_e, opt_g


def _batches_of(dtype, n=5):
    return [(x.to(dtype), y) for x, y in _batches(n, rows=64, features=96, classes=10)]


def _fallbacks(monkeypatch):
    """The parameters whose fused step fell back to computing the gradient first."""
    from flowgrad.graph import optimizer_pass

    seen, kernel = [], optimizer_pass.UpdateOp.kernel

    def spy(self, xp, *grads):
        seen.extend(tuple(p.shape) for p in self.params)
        return kernel(self, xp, *grads)
    monkeypatch.setattr(optimizer_pass.UpdateOp, "kernel", spy)
    return seen


@pytest.mark.parametrize("dtype", [flow.float32, flow.float64, flow.float16])
def test_plain_sgd_steps_join_the_gradient_products(dtype, monkeypatch):
    """Plain SGD: a weight's step is one GEMM adding -lr * dy^T x into it, a bias's one gemv,
    the gradients never stored; eager's numbers up to the last ulps. What BLAS cannot take
    (a small product, float16) computes the gradient, then runs the update, as before."""
    from flowgrad import blas

    eager, graphed, opt_e, opt_g = _plain_pair(dtype)
    train = train_graph(graphed, opt_g)
    fallbacks = _fallbacks(monkeypatch)
    steps_match_eager(train, eager, opt_e, None, _batches_of(dtype))
    assert [n.op.name for n in _updates(train)] == ["sgd_update[linear_wgrad]",
                                                    "sgd_update[sum]"] * 2
    rtol = {flow.float32: 1e-6, flow.float64: 1e-13, flow.float16: 0}[dtype]
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.detach().numpy(), pe.detach().numpy(), rtol=rtol,
                                   atol=rtol / 10)
    if dtype == flow.float16:  # no BLAS for it: every step as before, eager's bits
        assert set(fallbacks) == {tuple(p.shape) for p in graphed.parameters()}
    elif ("gemm", np.dtype(np.float32)) in blas._ROUTINES:  # MKL: only the 64x128x10 product
        assert set(fallbacks) == {(10, 128)}


def test_a_fused_step_falls_back_when_the_group_stops_being_plain():
    """The plan asks at every run whether the step is still plain: a new rate (a scheduler),
    then momentum set after compiling, train as eagerly."""
    eager, graphed, opt_e, opt_g = _plain_pair(flow.float32)
    sch_e = flow.optim.lr_scheduler.StepLR(opt_e, step_size=1, gamma=0.5)
    sch_g = flow.optim.lr_scheduler.StepLR(opt_g, step_size=1, gamma=0.5)
    train = train_graph(graphed, opt_g, lr_sch=sch_g)
    batches = _batches_of(flow.float32, 6)
    steps_match_eager(train, eager, opt_e, sch_e, batches[:3])
    for opt in (opt_e, opt_g):
        opt.param_groups[0]["momentum"] = 0.9
    steps_match_eager(train, eager, opt_e, sch_e, batches[3:])
    assert opt_g.state_dict()["state"].keys() == opt_e.state_dict()["state"].keys()
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.detach().numpy(), pe.detach().numpy(), rtol=1e-6,
                                   atol=1e-7)


def test_a_gradient_read_twice_or_kept_is_not_fused():
    """A weight used by two layers (its gradient is a sum) or a gradient hook's reader keeps
    the update as its own node."""
    eager, graphed, opt_e, opt_g = _plain_pair(flow.float32)
    for model in (eager, graphed):
        model[0].bias.register_hook(lambda g: g * 2)

    train = train_graph(graphed, opt_g)
    steps_match_eager(train, eager, opt_e, None, _batches_of(flow.float32, 3))
    names = [n.op.name for n in _updates(train)]
    assert "sgd_update" in names and "sgd_update[linear_wgrad]" in names


def test_a_fused_weight_step_takes_every_leading_dim(monkeypatch):
    """A linear layer on (batch, time, features): its weight's step is the GEMM over all
    batch * time rows, as eager's gradient."""
    def loss_fn(model, x, y):
        return F.cross_entropy(model(x.reshape(8, 8, 96)).reshape(64, 10), y)

    eager, graphed, opt_e, opt_g = _plain_pair(flow.float32)
    train = train_graph(graphed, opt_g, loss_fn=loss_fn)
    fallbacks = _fallbacks(monkeypatch)
    steps_match_eager(train, eager, opt_e, None, _batches_of(flow.float32, 4),
                      loss_fn=loss_fn)
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.detach().numpy(), pe.detach().numpy(), rtol=1e-6,
                                   atol=1e-7)
    assert "sgd_update[linear_wgrad]" in [n.op.name for n in _updates(train)]
    from flowgrad import blas
    if ("gemm", np.dtype(np.float32)) in blas._ROUTINES:  # (without MKL, NumPy computes it)
        assert (128, 96) not in fallbacks
