"""nn.Graph (lazy mode) against eager flowgrad: a different batch on every call, the same
losses, parameters and optimizer state; and the errors of OneFlow's contract."""
import random
import sys
import warnings

import numpy as np
import pytest
from graph_helpers import graph_of, steps_match_eager, train_graph

import flowgrad as flow
import flowgrad.nn.functional as F
from flowgrad.graph.ir import StalePlanError


def _mlp(seed=0):
    flow.manual_seed(seed)
    return flow.nn.Sequential(flow.nn.Linear(8, 16), flow.nn.Tanh(), flow.nn.Linear(16, 16),
                              flow.nn.ReLU(), flow.nn.Linear(16, 4))


def _batches(n, seed=1):
    rng = np.random.default_rng(seed)
    return [(flow.tensor(rng.standard_normal((12, 8)).astype(np.float32)),
             flow.tensor(rng.integers(0, 4, 12))) for _ in range(n)]


OPTIMIZERS = {
    "sgd_momentum": lambda ps: (flow.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                               weight_decay=1e-3), None),
    "adam": lambda ps: (flow.optim.Adam(ps, lr=1e-2), None),
    # plain SGD: the plan's update nodes take SGD._step_plain; the scheduler's lr is read anew
    "sgd_plain_steplr": lambda ps: (lambda o: (o, flow.optim.lr_scheduler.StepLR(
        o, step_size=3, gamma=0.5)))(flow.optim.SGD(ps, lr=0.1)),
    "adamw_cosine": lambda ps: (lambda o: (o, flow.optim.lr_scheduler.CosineAnnealingLR(
        o, T_max=7)))(flow.optim.AdamW(ps, lr=1e-2, weight_decay=0.1)),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_graph_matches_eager(name):
    batches = _batches(20)
    eager, graphed = _mlp(), _mlp()
    opt_e, sch_e = OPTIMIZERS[name](eager.parameters())
    opt_g, sch_g = OPTIMIZERS[name](graphed.parameters())

    train = train_graph(graphed, opt_g, lr_sch=sch_g)
    steps_match_eager(train, eager, opt_e, sch_e, batches)
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.detach().numpy(), pe.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    assert all(p.grad is None for p in graphed.parameters())  # zeroed after each step


def test_eval_graph_with_nested_outputs_none_input_and_keywords():
    model = _mlp()
    model.eval()

    class Eval(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x, mask=None, *, scale):
            logits = self.model(x) * scale
            return {"logits": logits, "pair": (logits.softmax(-1), logits.argmax(-1))}

    graph = Eval()
    for x, _ in _batches(3):
        got = graph(x, None, scale=2.0)
        want = model(x) * 2.0
        np.testing.assert_allclose(got["logits"].numpy(), want.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(got["pair"][0].numpy(), want.softmax(-1).detach().numpy(),
                                   rtol=1e-6)
        assert got["pair"][1].tolist() == want.argmax(-1).tolist()


def test_build_arguments_bound_by_name_for_every_kind_of_build():
    import functools

    class Plain(flow.nn.Graph):
        def build(self, x, mask):
            return x * mask

    class Static(flow.nn.Graph):
        @staticmethod
        def build(x, mask):  # no self: two arguments, not one
            return x * mask

    def logged(build):
        @functools.wraps(build)
        def run(self, *args, **kwargs):
            return build(self, *args, **kwargs)
        return run

    class Wrapped(flow.nn.Graph):
        @logged
        def build(self, x, mask):
            return x * mask

    x, m = flow.tensor([1.0, 2.0]), flow.tensor([3.0, 4.0])
    for make in (Plain, Static, Wrapped):
        graph = make()
        assert graph(x, m).tolist() == [3.0, 8.0]
        assert graph(x, mask=m * 2).tolist() == [6.0, 16.0]  # the same plan, by position
        assert graph(mask=m, x=x * 3).tolist() == [9.0, 24.0]


def test_eager_writes_to_parameters_are_seen_and_graph_steps_are_visible():
    model = flow.nn.Linear(3, 1)
    graph = flow.nn.Graph.trace(model)
    x = flow.ones(2, 3)
    graph(x)
    with flow.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(0.5)
    assert graph(x).tolist() == [[3.5], [3.5]]


def test_dropout_in_a_graph_draws_fresh_masks_and_follows_the_seed():
    class Drop(flow.nn.Graph):
        def build(self, x):
            return F.dropout(x, 0.5, training=True)

    x = flow.ones(64)
    flow.manual_seed(3)
    graph = Drop()
    a, b = graph(x), graph(x)
    assert a.tolist() != b.tolist()
    flow.manual_seed(3)
    eager = [F.dropout(x, 0.5, training=True) for _ in range(2)]
    assert [a.tolist(), b.tolist()] == [e.tolist() for e in eager]


def test_static_inputs_only():
    class Fwd(flow.nn.Graph):
        def build(self, x):
            return x * 2

    graph = Fwd()
    graph(flow.ones(2, 3))
    with pytest.raises(RuntimeError, match="nn.Graph ONLY accepts static inputs tensor meta.*"
                                           "The input index is 0"):
        graph(flow.ones(3, 3))


def test_reading_a_value_inside_build_names_the_line():
    class Peek(flow.nn.Graph):
        def build(self, x):
            if x.sum() > 0:  # a Python branch on data
                return x
            return -x

    with pytest.raises(RuntimeError, match=r"bool\(\) of a tensor .*test_graph.py:\d+"):
        Peek()(flow.ones(2))


def test_in_place_ops_inside_build_match_eager():
    def step(x):
        y = x * 1
        y.mul_(2)
        y[0] = 5.0
        y[1:].add_(x[1:])
        y.relu_()
        return y * 3

    class Inplace(flow.nn.Graph):
        def build(self, x):
            return step(x)

    graph = Inplace()
    for x, _ in _batches(3):
        np.testing.assert_array_equal(graph(x).numpy(), step(x).numpy())


def test_using_a_view_after_its_base_was_written_in_build_is_refused():
    class Stale(flow.nn.Graph):
        def build(self, x):
            y = x * 1
            row = y[0]
            y.mul_(2)
            return row + 1

    with pytest.raises(NotImplementedError, match="after an in-place write"):
        Stale()(flow.ones(2, 3))


def test_cnn_with_batch_norm_and_dropout_trains_as_eager():
    def make():
        flow.manual_seed(0)
        return flow.nn.Sequential(
            flow.nn.Conv2d(1, 4, 3, padding=1), flow.nn.BatchNorm2d(4), flow.nn.ReLU(),
            flow.nn.MaxPool2d(2), flow.nn.Flatten(), flow.nn.Dropout(0.25),
            flow.nn.Linear(4 * 4 * 4, 3))

    rng = np.random.default_rng(2)
    batches = [(flow.tensor(rng.standard_normal((6, 1, 8, 8)).astype(np.float32)),
                flow.tensor(rng.integers(0, 3, 6))) for _ in range(5)]
    eager, graphed = make(), make()
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.05, momentum=0.9)
    opt_g = flow.optim.SGD(graphed.parameters(), lr=0.05, momentum=0.9)

    train = train_graph(graphed, opt_g)
    for i, (x, y) in enumerate(batches):
        flow.manual_seed(100 + i)  # the same dropout masks in both
        loss_e = F.cross_entropy(eager(x), y)
        opt_e.zero_grad()
        loss_e.backward()
        opt_e.step()
        flow.manual_seed(100 + i)
        loss_g = train(x, y)
        np.testing.assert_allclose(loss_g.numpy(), loss_e.detach().numpy(), rtol=1e-5)
    for (name, a), (_, b) in zip(eager.state_dict().items(), graphed.state_dict().items()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_contract_errors():
    class NoSuper(flow.nn.Graph):
        def __init__(self):
            self.model = flow.nn.Linear(1, 1)

    with pytest.raises(RuntimeError, match="super\\(\\).__init__"):
        NoSuper()

    class NoBuild(flow.nn.Graph):
        pass

    with pytest.raises(NotImplementedError, match="must override build"):
        NoBuild()(flow.ones(1))

    class Attrs(flow.nn.Graph):
        def __init__(self, value):
            super().__init__()
            self.thing = value

    model = flow.nn.Linear(1, 1)
    with pytest.raises(RuntimeError, match="add_optimizer"):
        Attrs(flow.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(RuntimeError, match="is a Tensor"):
        Attrs(flow.ones(1))


def test_state_dict_round_trip_and_printing(tmp_path):
    model = _mlp()
    opt = flow.optim.Adam(model.parameters(), lr=1e-2)

    graph = train_graph(model, opt)
    for x, y in _batches(2):
        graph(x, y)
    path = tmp_path / "graph.safetensors"
    flow.save(graph.state_dict(), path)
    state = flow.load(path)
    other_model = _mlp(seed=5)
    other_opt = flow.optim.Adam(other_model.parameters(), lr=1e-2)

    other = train_graph(other_model, other_opt)
    other.load_state_dict(state)
    for p, q in zip(model.parameters(), other_model.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    assert other_opt.state_dict()["state"].keys() == opt.state_dict()["state"].keys()
    text = repr(graph)
    assert "(model): Sequential" in text and "cross_entropy" in text and "[backward]" in text


def test_backward_ops_are_recorded_by_the_autograd_pass():
    """The backward is a pass over the traced job: its ops are in the Program, each
    produced by a registered rule, and the plan runs them without any eager autograd."""
    model = flow.nn.Linear(4, 2)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).tanh().sum()
            loss.backward()
            return loss

    graph = Train()
    graph(flow.ones(3, 4))
    program = graph._compiled[0]
    backward_ops = {n.op.name for n in program.nodes if n.phase == "backward"}
    assert "tanh_grad" in backward_ops, backward_ops
    updated = [p for n in program.nodes if n.phase == "update" for p in n.op.params]
    assert set(updated) == set(model.parameters()) and not program.grads


def test_gradient_accumulation_is_the_full_batch_step():
    """Mean-reduced loss over k equal micro-batches: the mean gradient is the full batch's,
    so k micro-batches and one update equal one eager step on the whole batch."""
    batches = _batches(4)
    eager, graphed = _mlp(), _mlp()
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt_g = flow.optim.SGD(graphed.parameters(), lr=0.1, momentum=0.9)

    train = train_graph(graphed, opt_g, accumulation=3)
    for x, y in batches:
        losses = train(x, y)
        assert tuple(losses.shape) == (3,)
        want = [F.cross_entropy(eager(xs), ys).item() for xs, ys in zip(x.chunk(3), y.chunk(3))]
        np.testing.assert_allclose(losses.numpy(), want, rtol=1e-5)
        opt_e.zero_grad()
        F.cross_entropy(eager(x), y).backward()
        opt_e.step()
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.detach().numpy(), pe.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_dynamic_input_shapes_compile_one_plan_per_signature():
    model = _mlp()

    @flow.nn.Graph.with_dynamic_input_shape(size=2)
    class Fwd(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x).sum(-1)

    graph = Fwd()
    rng = np.random.default_rng(0)
    for n in (3, 5, 3, 7, 5, 3):
        x = flow.tensor(rng.standard_normal((n, 8)).astype(np.float32))
        np.testing.assert_allclose(graph(x).numpy(), model(x).sum(-1).detach().numpy(),
                                   rtol=1e-6)
    assert len(graph._plans) == 2


def test_graph_trace_of_a_function():
    w = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    step = flow.nn.Graph.trace(lambda x: (x @ w).relu())
    for x in (flow.ones(1, 2), -flow.ones(1, 2), flow.tensor([[2.0, -1.0]])):
        assert step(x).tolist() == (x @ w).relu().tolist()


class _Cube(flow.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return dy * 3 * x * x


def _penalised_loss(model, x, y):
    """cross-entropy + a gradient penalty (the input gradient's squared norm) through a
    custom Function: differentiating twice, as WGAN-GP does."""
    x = x.detach().requires_grad_()
    logits = model(_Cube.apply(x * 0.5))
    loss = F.cross_entropy(logits, y)
    (gx,) = flow.autograd.grad(loss, [x], create_graph=True)
    return loss + 0.1 * (gx * gx).sum()


def test_gradient_penalty_and_custom_function_inside_build_match_eager():
    batches = _batches(5)
    eager, graphed = _mlp(), _mlp()
    opt_e = flow.optim.Adam(eager.parameters(), lr=1e-2)
    opt_g = flow.optim.Adam(graphed.parameters(), lr=1e-2)

    train = train_graph(graphed, opt_g, loss_fn=_penalised_loss)
    for x, y in batches:
        loss_e = _penalised_loss(eager, x, y)
        opt_e.zero_grad()
        loss_e.backward()
        opt_e.step()
        np.testing.assert_allclose(train(x, y).numpy(), loss_e.detach().numpy(), rtol=1e-5)
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(pg.detach().numpy(), pe.detach().numpy(), rtol=1e-4,
                                   atol=1e-6)


def test_a_kernel_failing_at_run_time_names_the_op_and_the_build_line():
    class Gather(flow.nn.Graph):
        def build(self, x, idx):
            return x[idx] * 2  # the line the error must name

    graph = Gather()
    x = flow.arange(6.0).reshape(3, 2)
    assert graph(x, flow.tensor([2, 0])).tolist() == [[8.0, 10.0], [0.0, 2.0]]
    with pytest.raises(IndexError, match=r"nn.Graph: op index failed .*test_graph.py:\d+: "
                                         r"return x\[idx\] \* 2"):
        graph(x, flow.tensor([5, 0]))


class _Triple(flow.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0  # custom forward

    @staticmethod
    def backward(ctx, g):
        return g * 3.0  # custom backward


def test_each_recorded_op_names_the_user_line_that_made_it():
    """Forward ops name their build line; the ops a registered rule records, the backward()
    line (found once per autograd pass); a custom Function's own lines name themselves."""
    from flowgrad.graph.passes import trace
    from flowgrad.graph.sites import user_line

    def step(x):
        loss = _Triple.apply(x).tanh().sum()  # forward line
        loss.backward()  # backward line
        return loss

    program = trace(step, flow.ones(3, requires_grad=True))
    lines = [(n.phase, n.op.name, user_line(n.where).split("# ")[-1]) for n in program.nodes]
    assert lines == [("forward", "scalar_mul", "custom forward"),
                     ("forward", "tanh", "forward line"), ("forward", "sum", "forward line"),
                     ("backward", "expand", "backward line"),
                     ("backward", "tanh_grad", "backward line"),
                     ("backward", "scalar_mul", "custom backward")], lines


def _probe():
    """A user_site of the caller, and the (file, line) its frame's f_lineno says now."""
    from flowgrad.graph.sites import user_site

    caller = sys._getframe(1)
    return user_site(1), (caller.f_code.co_filename, caller.f_lineno)


def test_a_user_site_names_the_line_the_frame_was_at():
    """The recorded site (code object, instruction offset) is turned into a line only for a
    message: the line it gives is the one f_lineno gave at the call, on a call spanning
    lines and in a loop too."""
    from flowgrad.graph.sites import user_line

    probes = [_probe(),
              (0, _probe(
              ))[1]]
    for _ in range(2):
        probes.append((lambda: _probe())())
    for site, (filename, line) in probes:
        assert user_line(site).startswith(f"{filename}:{line}: "), (user_line(site), line)
    assert len({line for _, (_, line) in probes}) == 3


def test_depend_keeps_an_otherwise_unused_op_in_the_plan():
    class Step(flow.nn.Graph):
        def build(self, x):
            return F.depend(x * 2, x.exp())  # nothing reads exp: only depend keeps it

    step = Step()
    for _ in range(2):
        assert step(flow.ones(2)).tolist() == [2.0, 2.0]
    assert "exp" in {n.op.name for n in step._compiled[0].nodes}
    x = flow.ones(2, requires_grad=True)
    F.depend(x * 3, x * 5).sum().backward()  # eagerly: the identity, gradient to x only
    assert x.grad.tolist() == [3.0, 3.0]


def test_an_unused_random_draw_still_advances_the_generator():
    class Step(flow.nn.Graph):
        def build(self, x):
            flow.rand(3)  # unused, but eagerly it moved the generator
            return x + flow.rand(2)

    step = Step()
    x = flow.zeros(2)
    flow.manual_seed(7)
    got = [step(x).tolist() for _ in range(3)]
    flow.manual_seed(7)
    want = []
    for _ in range(3):
        flow.rand(3)
        want.append((x + flow.rand(2)).tolist())
    assert got == want


def test_graph_trace_watches_the_modules_its_function_reaches():
    """Graph.trace(fn) with fn closing over a module (or Graph.trace(module)): the module was
    not the graph's, so a setting changed after compiling (p, a mask set from None), or a
    plain tensor attribute replaced (also in a graph's own module), kept the traced plan's
    numbers with no error. They raise StalePlanError now, as for a graph's own modules."""
    class Scaled(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale, self.mask, self.p = flow.tensor(2.0), None, 0.5

        def forward(self, x):
            y = x * self.scale * self.p
            return (y if self.mask is None else y * self.mask).sum()

    changes = {"p": lambda m: setattr(m, "p", 0.25),
               "mask": lambda m: setattr(m, "mask", flow.zeros(3)),
               "scale": lambda m: setattr(m, "scale", flow.tensor(3.0))}
    for name, change in changes.items():
        for wrap in (lambda m: flow.nn.Graph.trace(lambda x: m(x) + 1),
                     flow.nn.Graph.trace, lambda m: graph_of(m, lambda m, x: m(x))):
            module = Scaled()
            graph = wrap(module)
            assert graph(flow.ones(3)).item() in (3.0, 4.0)
            change(module)
            with pytest.raises(StalePlanError, match=name):
                graph(flow.ones(3))


_SCALE = 2.0  # a global the functions below read (changed by the test, then put back)
_MASK = flow.ones(3)
_WEIGHTS = [1.0, 1.0, 1.0]


class _Settings:
    """A config object whose attribute a traced function reads."""


def test_globals_and_closure_variables_the_trace_read_are_watched():
    """A compiled function or a module's forward reading a Python number from a global, a
    closure variable, a config object's or a module class's attribute (a temperature, a
    schedule's factor), a list of numbers changed in place, or a tensor bound to a global
    name (in a hook's function too): the plan froze what it traced, so after the user
    changed it every call gave the traced numbers with no error. flow.compile traces anew
    (as torch.compile recompiles), and a graph raises StalePlanError naming the variable."""
    global _SCALE, _MASK
    cfg = _Settings()
    offset = 0.5

    def fn(x):
        return (x * _SCALE * _MASK * flow.tensor(_WEIGHTS) / cfg.temperature + offset).sum()

    def set_offset(value):
        nonlocal offset
        offset = value

    class Scaled(flow.nn.Module):
        def forward(self, x):
            return (x * _SCALE).sum()

    def set_scale(value):
        global _SCALE
        _SCALE = value

    def set_mask(value):
        global _MASK
        _MASK = flow.full((3,), value)

    changes = {"_SCALE": set_scale, "offset": set_offset, "_MASK": set_mask,
               "temperature": lambda value: setattr(cfg, "temperature", value),
               "_WEIGHTS": lambda value: _WEIGHTS.__setitem__(0, value)}  # (in place)
    x = flow.tensor([1.0, 2.0, 3.0])
    try:
        for name, change in changes.items():
            for value in (3.0, 0.25):
                for make in (flow.compile, flow.nn.Graph.trace):
                    _SCALE, _MASK, cfg.temperature, offset = 2.0, flow.ones(3), 1.0, 0.5
                    _WEIGHTS[0] = 1.0
                    compiled = make(fn)
                    assert compiled(x).item() == fn(x).item() == 13.5
                    change(value)
                    if make is flow.compile:
                        assert compiled(x).item() == fn(x).item() != 13.5
                        continue
                    with pytest.raises(StalePlanError, match=name):
                        compiled(x)
        _SCALE = 2.0
        graph = graph_of(Scaled(), lambda m, x: m(x))
        assert graph(x).item() == 12.0
        _SCALE = 3.0
        with pytest.raises(StalePlanError, match="global _SCALE"):
            graph(x)

        class Tempered(flow.nn.Module):
            temperature = 2.0  # (a class attribute, read as self.temperature)

            def forward(self, x):
                return (x / self.temperature).sum()

        graph = graph_of(Tempered(), lambda m, x: m(x))
        assert graph(x).item() == 3.0
        Tempered.temperature = 3.0
        with pytest.raises(StalePlanError, match="class attribute temperature of"):
            graph(x)
        hooked = flow.nn.Identity()  # (a hook's function reads it)
        hooked.register_forward_hook(lambda module, args, out: out * _SCALE)
        _SCALE = 2.0
        graph = graph_of(hooked, lambda m, x: m(x).sum())
        assert graph(x).item() == 12.0
        _SCALE = 3.0
        with pytest.raises(StalePlanError, match="global _SCALE"):
            graph(x)

        class Weighted(flow.nn.Graph):  # (the graph's own config object and list)
            def __init__(self):
                super().__init__()
                self.cfg, self.weights = _Settings(), [1.0, 2.0, 3.0]
                self.cfg.temperature = 2.0

            def build(self, x):
                return (x * flow.tensor(self.weights) / self.cfg.temperature).sum()

        for change, name in [(lambda g: setattr(g.cfg, "temperature", 1.0), "temperature"),
                             (lambda g: g.weights.__setitem__(0, 0.0), "weights")]:
            graph = Weighted()
            assert graph(x).item() == 7.0
            change(graph)
            with pytest.raises(StalePlanError, match=name):
                graph(x)
        # a NumPy array's values copied at trace time (flow.tensor(array)); one read by
        # reference (from_numpy shares its memory) is each call's already
        array = np.ones(3, np.float32)
        copied = flow.nn.Graph.trace(lambda x: (x * flow.tensor(array)).sum())
        shared = flow.nn.Graph.trace(lambda x: (x * flow.from_numpy(array)).sum())
        assert copied(x).item() == shared(x).item() == 6.0
        array[0] = 3.0
        assert shared(x).item() == 8.0
        with pytest.raises(StalePlanError, match="NumPy array"):
            copied(x)
    finally:
        _SCALE, _MASK, _WEIGHTS[0] = 2.0, flow.ones(3), 1.0


def test_the_default_dtype_and_an_autocast_region_a_plan_was_traced_in_are_kept():
    """A graph or compiled model called under another default dtype (set_default_dtype), or
    inside an autocast region (or outside the one it was traced in): the plan kept the traced
    dtypes and casts, so the numbers were float32 where eager's were float64 or bfloat16, with
    no error, and flow.compile's backward (run outside the region) recomputed the forward
    without its casts: other gradients. A graph now traces under the region it is called in
    and raises StalePlanError in another state; flow.compile keeps a plan per state."""
    flow.manual_seed(0)
    model = flow.nn.Sequential(flow.nn.Linear(4, 4), flow.nn.Tanh(), flow.nn.Linear(4, 2))
    x = flow.randn(3, 4)

    def shift(x):
        return model(x) + flow.arange(2) / 3

    def run(fn, amp, dtype=flow.float32):
        model.zero_grad()
        flow.set_default_dtype(dtype)
        try:
            with flow.autocast("cpu", enabled=amp):
                out = fn(x)
        finally:
            flow.set_default_dtype(flow.float32)
        out.float().pow(2).sum().backward()
        return out.dtype, out.detach().float().tolist(), [p.grad.tolist() for p in
                                                          model.parameters()]

    compiled = flow.compile(shift)
    for amp, dtype in [(False, flow.float32), (True, flow.float32), (False, flow.float64),
                       (True, flow.float32), (False, flow.float32)]:
        assert run(compiled, amp, dtype) == run(shift, amp, dtype)
    graph = flow.nn.Graph.trace(shift)
    with flow.no_grad():
        with flow.autocast("cpu"):
            assert graph(x).tolist() == shift(x).tolist() != model(x).float().tolist()
        with pytest.raises(StalePlanError, match=r"under autocast \(flowgrad.bfloat16\) and is "
                                                 r"called outside autocast"):
            graph(x)
        flow.set_default_dtype(flow.float64)
        try:
            with flow.autocast("cpu"), pytest.raises(StalePlanError,
                                                     match="default dtype was flowgrad.float32"):
                graph(x)
        finally:
            flow.set_default_dtype(flow.float32)


def test_a_compiled_models_backward_with_create_graph_is_differentiated():
    """A gradient penalty through flow.compile (autograd.grad(out, x, create_graph=True),
    then a loss of that gradient): the compiled backward's gradients had no graph, so the
    penalty's part of the parameters' and the input's gradients was missing, with no error
    (torch.compile raises). The backward is recomputed eagerly when it is differentiated."""
    flow.manual_seed(0)
    model = flow.nn.Sequential(flow.nn.Linear(3, 4), flow.nn.Tanh(), flow.nn.Dropout(0.3),
                               flow.nn.Linear(4, 1))
    compiled = flow.compile(model)
    x = flow.randn(5, 3)

    def step(fn):
        model.zero_grad()
        xi = x.clone().requires_grad_(True)
        flow.manual_seed(1)
        out = fn(xi)
        g, = flow.autograd.grad(out.sum(), xi, create_graph=True)
        (out.mean() + (g.norm(dim=1) - 1).pow(2).mean()).backward()
        return [t.tolist() for t in [xi.grad] + [p.grad for p in model.parameters()]]

    for _ in range(2):
        got, want = step(compiled), step(model)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_a_failed_trace_leaves_the_state_and_the_generator_as_they_were():
    """A build that fails after in-place writes and random draws (a value read after a
    BatchNorm): the trace's writes and draws had run eagerly and stayed, so flow.compile's
    eager fallback updated the running stats a second time and drew other numbers than
    eager, with no error. A failed trace puts the written arrays and the generator back."""
    class Checked(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = flow.nn.BatchNorm1d(2)
            self.register_buffer("calls", flow.zeros(()))

        def forward(self, x):
            self.calls += 1
            y = self.bn(x) + flow.randn(2)
            return y * 2 if y.sum().item() > 100 else y  # (a read: the trace fails)

    x = flow.randn(4, 2)
    results = []
    for wrap in (lambda m: m, flow.compile):
        flow.manual_seed(0)
        model = Checked()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = wrap(model)(x)
        results.append([out.tolist(), model.calls.item(), model.bn.running_mean.tolist(),
                        flow.rand(1).item()])
    assert results[0] == results[1]
    state = [t.clone() for t in (model.calls, model.bn.running_mean)]
    with pytest.raises(RuntimeError, match="reads its value"):
        flow.nn.Graph.trace(model)(x)
    assert [t.tolist() for t in (model.calls, model.bn.running_mean)] == [
        t.tolist() for t in state]


def test_tensors_build_stores_outside_the_graph_are_warned_about():
    """A forward hook's activations[name] = out.detach(), a list appended inside build: the
    plan runs build once, so they kept the first call's values on every later call, with no
    word. A warning names them and the remedy; a graph keeping nothing gets none."""
    model = flow.nn.Sequential(flow.nn.Linear(4, 4), flow.nn.ReLU(), flow.nn.Linear(4, 2))
    activations, history = {}, []
    handle = model[0].register_forward_hook(
        lambda module, args, out: activations.__setitem__("lin", out.detach()))

    def step(x):
        loss = model(x).sum()
        history.append(loss.detach() * 2)
        return loss

    with pytest.warns(UserWarning, match=r"still held outside .*\(2: .*\(3, 4\) from linear"
                                         r".*first call's values.*Return them from build"):
        flow.nn.Graph.trace(step)(flow.ones(3, 4))
    handle.remove()
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train = graph_of(model, lambda m, x: _backward(m(x).sum()), opt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            train(flow.ones(3, 4))


def _backward(loss):
    loss.backward()
    return loss


@pytest.mark.parametrize("draw", [lambda: random.random(), lambda: np.random.rand(),
                                  lambda: np.random.beta(0.4, 0.4)])
def test_a_python_or_numpy_global_draw_inside_build_is_refused(draw):
    """random.random() or np.random's global stream inside build (a mixup's lambda, a
    scheduled-sampling coin): drawn once at trace time, the plan reused the number on every
    call with no error. Refused now, both streams put back; flow.compile runs such a function
    eagerly, with eager's numbers."""
    lin = flow.nn.Linear(3, 3)

    def step(x):
        return (lin(x) * draw()).sum()

    random.seed(1)
    np.random.seed(1)
    states = random.getstate(), np.random.get_state()[1].copy()
    with pytest.raises(RuntimeError, match="drew numbers from .*flow.rand"):
        flow.nn.Graph.trace(step)(flow.ones(2, 3))
    assert random.getstate() == states[0]
    assert (np.random.get_state()[1] == states[1]).all()
    compiled = flow.compile(step)
    with pytest.warns(UserWarning, match="running .* eagerly"):
        got = [compiled(flow.ones(2, 3)).item() for _ in range(3)]
    random.seed(1)
    np.random.seed(1)
    assert got == [step(flow.ones(2, 3)).item() for _ in range(3)]


def test_debug_logs_the_trace_and_each_pass_by_level(capsys):
    def step(x):
        return (x * 2.0).tanh().sum()

    for level, shows, hides in ((0, ["traced 3 nodes", "pass fuse_elementwise", "codegen"],
                                 ["optimized program", "def plan"]),
                                (1, ["optimized program"], ["traced program", "def plan"]),
                                (2, ["traced program", "def plan"], [])):
        graph = flow.nn.Graph.trace(step)
        graph.debug(level)
        graph(flow.ones(3))
        out = capsys.readouterr().out
        assert all(s in out for s in shows) and not any(s in out for s in hides), out
    graph = flow.nn.Graph.trace(step)
    graph.debug(-1)
    graph(flow.ones(3))
    assert capsys.readouterr().out == ""


class _TwoOutputs(flow.autograd.Function):
    """Two outputs; asks for None (not zeros) for an output that gets no gradient."""
    seen = []

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        _TwoOutputs.seen.append((ga is None, gb is None))
        return (0 if ga is None else ga * 2) + (0 if gb is None else gb * 3)


def _overwritten(model, x, y):
    # p's product is overwritten by fill (its gradient: zeros, as torch's fill), the first
    # output of the custom Function alone is used
    a, _ = _TwoOutputs.apply(model.q * x)
    return (flow.fill(model.p * x, 2.0) * model.q).sum() + a.sum() * y


@pytest.mark.parametrize("opt", ["sgd_momentum_decay", "adamw"])
def test_a_reached_node_without_gradient_runs_on_zeros_as_eager(opt):
    """The autograd pass runs a node the loss reaches even when no gradient arrived (zeros
    in, as the eager engine): p gets a zero gradient, not None (which an optimizer skips:
    no weight decay or momentum step), and a Function that set_materialize_grads(False)
    still gets None."""
    def make():
        model = flow.nn.Module()
        model.p = flow.nn.Parameter(flow.full((3,), 0.7))
        model.q = flow.nn.Parameter(flow.ones(3))
        params = list(model.parameters())
        optimizer = (flow.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=0.1)
                     if opt == "sgd_momentum_decay" else flow.optim.AdamW(params, lr=0.1))
        return model, optimizer

    eager, opt_e = make()
    model, optimizer = make()
    batches = [(flow.full((3,), float(i + 1)), flow.tensor(0.5 * i)) for i in range(3)]
    _TwoOutputs.seen.clear()
    steps_match_eager(train_graph(model, optimizer, loss_fn=_overwritten), eager, opt_e, None,
                      batches, loss_fn=_overwritten)
    assert set(_TwoOutputs.seen) == {(False, True)}
    for a, b in zip(model.parameters(), eager.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
    assert not np.allclose(model.p.detach().numpy(), 0.7)  # decayed: its gradient was zeros


def test_the_first_call_leaves_no_reference_cycle():
    """The trace's eager autograd graph (every saved activation of the first call) is freed
    by reference counting when the first call returns, not kept until the cycle collector
    runs; nested outputs still come back in their structure."""
    import gc

    model = _mlp()

    def nested(model, x, y):
        loss = F.cross_entropy(model(x), y)
        return {"loss": loss, "parts": (loss * 2, [None, loss + 1])}

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.1))

        def build(self, x, y):
            out = nested(self.model, x, y)
            out["loss"].backward()
            return out

    graph = Step()
    (x, y), = _batches(1)
    gc.collect()
    gc.disable()
    try:
        out = graph(x, y)
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert list(out) == ["loss", "parts"] and out["parts"][1][0] is None
    np.testing.assert_allclose(out["parts"][1][1].numpy(), out["loss"].numpy() + 1)


class _Counting(flow.nn.Module):
    """A module whose forward changes a plain attribute: a Python side effect."""

    def __init__(self):
        super().__init__()
        self.lin = flow.nn.Linear(2, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


def test_a_python_side_effect_in_build_is_refused_and_undone():
    """The plan cannot repeat `self.calls += 1`: later calls computed with calls == 1 and
    left it at 1, silently. Refused at the first call, the attribute put back."""
    model = _Counting()
    with pytest.raises(NotImplementedError, match=r"build\(\) changed module 'model' "
                                                  r"\(_Counting\)'s attribute calls from 0 to 1"):
        graph_of(model, lambda m, x: m(x))(flow.ones(1, 2))
    assert model.calls == 0


def test_compile_runs_a_module_with_python_side_effects_eagerly():
    flow.manual_seed(0)
    compiled_model = _Counting()
    flow.manual_seed(0)
    eager = _Counting()
    compiled = flow.compile(compiled_model)
    with pytest.warns(UserWarning, match="running _Counting eagerly"):
        got = [compiled(flow.ones(1, 2)).sum().item() for _ in range(3)]
    want = [eager(flow.ones(1, 2)).sum().item() for _ in range(3)]
    assert got == want and compiled_model.calls == eager.calls == 3


def test_no_public_name_is_a_raw_op():
    """The tracer takes the caller of one of flowgrad's ops to be flowgrad's code (its frame
    is not looked at: tracer._CALLER_SKIP), so no public function or Tensor method may be an
    op itself; a user's call to one would name the line above the user's."""
    import flowgrad.fft
    import flowgrad.linalg
    import flowgrad.nn.functional
    import flowgrad.special
    from flowgrad.ops.registry import Op

    namespaces = [flow, flow.Tensor, flowgrad.nn.functional, flowgrad.special, flowgrad.linalg,
                  flowgrad.fft]
    found = [f"{getattr(ns, '__name__', ns)}.{name}" for ns in namespaces
             for name, value in vars(ns).items() if isinstance(value, Op)]
    assert not found, found


def test_ops_called_as_methods_and_operators_name_their_user_line():
    from flowgrad.graph.passes import trace
    from flowgrad.graph.sites import user_line

    def step(x):
        bad = x.isnan()  # isnan line
        good = bad.logical_not()  # logical_not line
        return flow.where(~good, 0.0, x).isfinite()  # isfinite line

    program = trace(step, flow.tensor([1.0, float("nan")]))
    lines = {n.op.name: user_line(n.where).split("# ")[-1] for n in program.nodes}
    assert lines["isnan"] == "isnan line" and lines["logical_not"] == "logical_not line" and \
        lines["bitwise_not"] == lines["isfinite"] == "isfinite line", lines


def test_sequence_lengths_as_a_list_input_pack_inside_build():
    """pack_padded_sequence reads its lengths on the host, so a lengths tensor inside build is
    refused (a read); a Python list of them is an argument of build, part of the compiled
    signature as values: the same lengths run the plan, others raise OneFlow's static-input
    error, or compile a plan of their own with dynamic shapes."""
    rnn, twin = flow.nn.GRU(3, 4, batch_first=True), flow.nn.GRU(3, 4, batch_first=True)
    twin.load_state_dict(rnn.state_dict())

    def loss_of(model, x, lengths):
        packed = flow.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                        enforce_sorted=False)
        return model(packed)[1].pow(2).sum()

    def make(dynamic):
        class Step(flow.nn.Graph):
            def __init__(self):
                super().__init__()
                self.rnn = twin

            def build(self, x, lengths):
                return loss_of(twin, x, lengths)
        return flow.nn.Graph.with_dynamic_input_shape(4)(Step)() if dynamic else Step()

    x = flow.tensor(np.random.default_rng(0).standard_normal((3, 5, 3)).astype(np.float32))
    static, dynamic = make(False), make(True)
    lengths = [5, 2, 4]
    assert static(x, lengths).item() == pytest.approx(loss_of(rnn, x, lengths).item(), rel=1e-6)
    lengths[0] = 3  # the caller's list changed: the signature kept the traced values
    with pytest.raises(RuntimeError, match=r"ONLY accepts static inputs.*\('list', \(5, 2, 4\)"):
        static(x, lengths)
    for lengths in ([5, 2, 4], (1, 5, 3), [5, 2, 4]):
        assert dynamic(x, lengths).item() == pytest.approx(loss_of(rnn, x, lengths).item(),
                                                           rel=1e-6)
    with pytest.raises(TypeError, match="lists or tuples of scalars"):
        static(x, [flow.ones(1)])


def test_a_buffer_assigned_anew_inside_build_is_written_back_each_call():
    """self.avg = self.avg * 0.9 + ... rebinds the buffer eagerly on every call (as
    self.hidden = h.detach() a plain tensor attribute); the plan read the tensor it traced and
    never saw the new one, so later calls computed with the first call's values (no error).
    It is a write-back of the plan now; a parameter rebound, or a buffer given another shape,
    is refused with the remedy."""
    class Running(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("avg", flow.zeros(3))
            self.lin = flow.nn.Linear(3, 3)

        def forward(self, x):
            self.avg = self.avg * 0.9 + 0.1 * x.mean(0).detach()
            return self.lin(x - self.avg).sum()

    class Carried(flow.nn.Module):  # truncated BPTT: a plain tensor attribute carried over
        def __init__(self):
            super().__init__()
            self.rnn = flow.nn.RNN(3, 4, batch_first=True)
            self.avg = flow.zeros(1, 4, 4)

        def forward(self, x):
            out, h = self.rnn(x.unsqueeze(1).expand(-1, 2, -1), self.avg)
            self.avg = h.detach()
            return out.pow(2).sum()

    for make in (Running, Carried):
        eager, traced = make(), make()
        traced.load_state_dict(eager.state_dict())
        graph = flow.nn.Graph.trace(traced)
        avg = traced.avg
        rng = np.random.default_rng(0)
        for _ in range(3):
            x = flow.tensor(rng.standard_normal((4, 3)).astype(np.float32))
            assert graph(x).item() == pytest.approx(eager(x).item(), rel=1e-6)
            np.testing.assert_allclose(traced.avg.numpy(), eager.avg.numpy(), rtol=1e-6)
        assert traced.avg is avg  # the traced tensor holds the values

    class Reshaped(Running):
        def forward(self, x):
            self.avg = x.mean(1)  # (4,), not (3,)
            return self.avg.sum()

    class Doubled(Running):
        def forward(self, x):
            self.lin.weight = flow.nn.Parameter(self.lin.weight.detach() * 2)
            return self.lin(x).sum()

    for make, match in ((Reshaped, r"Tensor \(4,\) to Reshaped\.avg.*copy_"),
                        (Doubled, r"Parameter \(3, 3\) to Linear\.weight \(a Parameter")):
        module = make()
        avg, weight = module.avg, module.lin.weight
        with pytest.raises(NotImplementedError, match=match):
            flow.nn.Graph.trace(module)(flow.ones(4, 3))
        assert module.avg is avg and module.lin.weight is weight  # put back as they were

    class Failing(Running):  # build raises after the assignment: the module as it was
        def forward(self, x):
            self.avg = self.avg * 0.9
            self.fresh = self.avg * 2  # (an attribute the module did not have)
            return self.lin(x).sum(dim=5)

    module = Failing()
    avg = module.avg
    with pytest.raises(IndexError):
        flow.nn.Graph.trace(module)(flow.ones(4, 3))
    assert module.avg is avg and not hasattr(module, "fresh")


def test_a_tensor_attribute_build_sets_follows_every_call():
    """self.last_attn = attn.detach() (an attribute that held None, or none at all, or a buffer
    registered as None): the module kept the first call's tensor on every later call of the
    plan, with no error (a logged attention map or statistic stuck at its first value). Each
    call binds the plan's result now, a new tensor as eagerly (one kept from an earlier call
    keeps its values), shared with an output as eagerly when it is one."""
    class Logged(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = flow.nn.Linear(3, 3)
            self.last = None
            self.register_buffer("peak", None)

        def forward(self, x):
            y = self.lin(x).relu()
            self.last = y.detach()
            self.stat = y.mean()  # (never set in __init__; with its history, eagerly)
            self.peak = y.amax(0).detach()
            return y, self.last.sum()

    for wrap in (flow.nn.Graph.trace, lambda m: graph_of(m, lambda m, x: m(x))):
        _attributes_follow_each_call(Logged, wrap)


def _attributes_follow_each_call(Logged, wrap):
    eager, traced = Logged(), Logged()
    traced.load_state_dict(eager.state_dict())
    graph = wrap(traced)
    rng = np.random.default_rng(0)
    kept = []
    for _ in range(3):
        x = flow.tensor(rng.standard_normal((4, 3)).astype(np.float32))
        y, total = graph(x)
        y_eager, total_eager = eager(x)
        assert total.item() == pytest.approx(total_eager.item(), rel=1e-6)
        for name in ("last", "stat", "peak"):
            np.testing.assert_allclose(getattr(traced, name).numpy(),
                                       getattr(eager, name).detach().numpy(), rtol=1e-6)
        assert not traced.stat.requires_grad
        kept.append((traced.last, y_eager.detach().numpy().copy()))
    for last, expected in kept:  # three tensors, each with its call's values
        np.testing.assert_allclose(last.numpy(), expected, rtol=1e-6)
    assert traced.last.data_ptr() == y.data_ptr()  # y.detach() shares y's memory, as eagerly
