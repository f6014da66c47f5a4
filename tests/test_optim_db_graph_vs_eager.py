"""torch's optimizer database (OptimizerInfo) stepped by flowgrad's nn.Graph against the same
steps run eagerly (tests/optim_db_graph.py runs them; its script form prints a report): one
and two groups, fused updates, torch's scheduler lists, eager steps and writes between graph
calls, options changed between calls, clipping, gradient accumulation, a graph state_dict
saved and loaded, a torch checkpoint loaded. The default tier runs each optimizer's first
input; the slow tier every input, and the inputs with torch's global options (foreach,
differentiable, fused). KNOWN lists what still differs, with the reason; an entry that no
longer differs fails, so the list only shrinks. The regression tests after it are the fixes
the sweep led to."""
import io
import re

import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import optim_db_graph as sweep  # noqa: E402
import optim_db_vs_torch as eager_db  # noqa: E402

import flowgrad as flow  # noqa: E402

DB = sweep.optim_db()
IDS = [sweep.name_of(info) for info in DB]
# name: (pattern of its findings' "where: message", reason)
KNOWN: dict[str, tuple[str, str]] = {}


def _check(info, findings, every_variant=True):
    """`every_variant`: the findings of every variant (KNOWN's entries must all still be
    found; some run must have been compared)."""
    assert not (findings and findings[0][2] == "missing"), f"flowgrad has no {info}"
    real = [f for f in findings if not f[2].startswith("skip")]
    pattern = KNOWN.get(sweep.name_of(info), (None,))[0]
    unexplained = [f for f in real
                   if pattern is None or not re.search(pattern, f"{f[1]}: {f[2]}")]
    assert not unexplained, "\n".join(f"[{k}] {where}\n    {m}" for k, where, m in unexplained[:6])
    assert not every_variant or pattern is None or real, \
        "no finding matches KNOWN any more: remove it"
    assert not every_variant or sweep.COMPARED.get(sweep.name_of(info)) or \
        info.step_requires_closure, \
        "every run raised eagerly: the sweep compared nothing"


@pytest.mark.parametrize("info", DB, ids=IDS)
def test_graph_steps_as_eager(info):
    _check(info, sweep.probe(info, first_only=True))


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=IDS)
def test_graph_steps_as_eager_every_input(info):
    _check(info, sweep.probe(info))


@pytest.mark.slow
@pytest.mark.parametrize("info", [i for i in DB if not i.step_requires_closure],
                         ids=[n for i, n in zip(DB, IDS) if not i.step_requires_closure])
def test_graph_steps_as_eager_with_global_options(info):
    _check(info, sweep.probe(info, options=True), every_variant=False)


# ---- regression tests ----------------------------------------------------------------------
def _linear_warmup(opt):
    return flow.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=4)


def test_graph_state_dict_resumes_the_lr_schedule():
    """graph.state_dict() holds its lr_sch's state, as OneFlow's: a graph loaded from it goes
    on with the schedule where it was (the loaded graph restarted the warm-up: after four
    steps of a LinearLR warm-up to 0.1, its rates were 0.108, 0.131, 0.155 for 0.1)."""
    values, xs = eager_db._values(False), sweep.batches()
    expected = sweep.train(flow.optim.SGD, {"lr": 0.1}, values, xs, True,
                           scheduler_fns=[_linear_warmup])
    actual = sweep._saved_and_loaded(flow.optim.SGD, {"lr": 0.1}, values, xs, [_linear_warmup])
    after = sweep.RESUME_AFTER
    assert [t[-1] for t in actual[0]] == pytest.approx([t[-1] for t in expected[0][after:]])
    assert sweep._compare_runs((expected[0][after:], expected[1], expected[2][after:]),
                               actual) is None


def test_graph_state_dict_holds_the_lr_schedulers_through_flow_save():
    values = eager_db._values(False)
    holder, _, opt, (sch,) = sweep._setup(flow.optim.Adam, {"lr": 0.1}, values,
                                          scheduler_fns=[_linear_warmup])
    graph = sweep.make_graph(holder, opt, [sch])
    for x in sweep.batches()[:2]:
        graph(flow.tensor(x))
    buffer = io.BytesIO()
    flow.save(graph.state_dict(), buffer)
    buffer.seek(0)
    loaded = flow.load(buffer)
    assert loaded["_lr_schedulers"] == [sch.state_dict()]
    assert loaded["_lr_schedulers"][0]["last_epoch"] == 2
    assert sorted(loaded["_optimizers"][0]["state"]) == [0, 1, 2]


def test_graph_refuses_an_optimizer_whose_step_needs_a_closure():
    """LBFGS in a graph: refused at add_optimizer, naming the closure (the graph traced and
    ran the backward, then failed in the step with Python's "missing 1 required positional
    argument: 'closure'", leaving the .grads set)."""
    holder, params, opt, _ = sweep._setup(flow.optim.LBFGS, {}, eager_db._values(False))
    with pytest.raises(NotImplementedError, match="closure"):
        sweep.make_graph(holder, opt)
    assert all(p.grad is None for p in params)


@pytest.mark.parametrize("kind", ["pre", "post", "global pre"])
def test_a_step_hook_registered_after_compiling_is_refused_not_skipped(kind):
    """The plan's update nodes run no step hook: one registered on the optimizer (or globally)
    after the graph compiled was silently never called (0 calls in 4 steps where eager made
    4; with a pre-hook halving the gradients, W ended 0.41 away from eager's). It is refused
    now, before the plan runs; a graph built with the hook trains as eager."""
    from flowgrad.graph.graph import StalePlanError

    values, xs = eager_db._values(False), sweep.batches()
    holder, params, opt, _ = sweep._setup(flow.optim.SGD, {"lr": 0.1, "momentum": 0.9},
                                          values)
    graph = sweep.make_graph(holder, opt)
    for x in xs[:2]:
        graph(flow.tensor(x))
    calls = []

    def hook(optimizer, args, kwargs):
        calls.append(1)
        for p in params:
            if p.grad is not None:
                p.grad.mul_(0.5)

    register = {"pre": opt.register_step_pre_hook, "post": opt.register_step_post_hook,
                "global pre": flow.optim.optimizer.register_optimizer_step_pre_hook}[kind]
    handle = register(hook)
    try:
        before = [p.detach().numpy().copy() for p in params]
        with pytest.raises(StalePlanError, match="step hook"):
            graph(flow.tensor(xs[2]))
        assert all((p.detach().numpy() == b).all() for p, b in zip(params, before))
        if kind == "global pre":  # a graph built with the hook in place steps eagerly,
            # hook included
            runs = [sweep.train(flow.optim.SGD, {"lr": 0.1, "momentum": 0.9}, values, xs,
                                in_graph) for in_graph in (False, True)]
            assert len(calls) == 2 * len(xs)
            assert sweep._compare_runs(*runs) is None
    finally:
        handle.remove()


@pytest.mark.parametrize("change", ["clipping", "accumulation"])
def test_an_option_that_takes_the_update_out_of_the_plan_set_after_compiling_is_refused(
        change):
    """clip_grad_max_norm added to the groups, or gradient accumulation set, after the graph
    compiled with the update inside its plan: the plan skipped the clipping (W ended 0.97
    from eager's after 4 steps of SGD with momentum), and with accumulation each micro-batch
    ran the plan's update and then the accumulated eager step updated again (0.93 off). Both
    are refused before the plan runs."""
    from flowgrad.graph.graph import StalePlanError

    values, xs = eager_db._values(False), sweep.batches(rows=4)
    holder, params, opt, _ = sweep._setup(flow.optim.SGD, {"lr": 0.1, "momentum": 0.9},
                                          values)
    graph = sweep.make_graph(holder, opt)
    for x in xs[:2]:
        graph(flow.tensor(x[:2]))
    x = xs[2][:2]
    if change == "clipping":
        for group in opt.param_groups:
            group.update(sweep.CLIP)
    else:
        graph.config.set_gradient_accumulation_steps(2)
        x = xs[2]
    before = [p.detach().numpy().copy() for p in params]
    with pytest.raises(StalePlanError, match="inside the plan"):
        graph(flow.tensor(x))
    assert all((p.detach().numpy() == b).all() for p, b in zip(params, before))
