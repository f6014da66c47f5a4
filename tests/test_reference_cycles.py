"""Calls a training loop makes every step leave no reference cycle behind: what they made is
freed by reference counting when the last reference goes, not kept (activations, gradients,
saved tensors) until the cycle collector runs. One row per call; each runs once to warm up
(first-time caches), then again with the collector off, and the collector must find nothing."""
import collections
import gc
import weakref

import numpy as np
import pytest

import flowgrad as flow
import flowgrad.nn.functional as F


def _mlp():
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(6, 8), flow.nn.ReLU(), flow.nn.Linear(8, 3))


def _batch():
    rng = np.random.default_rng(0)
    return (flow.tensor(rng.standard_normal((5, 6)).astype(np.float32)),
            flow.tensor(rng.integers(0, 3, 5)))


def _eager_step():
    model, (x, y) = _mlp(), _batch()
    opt = flow.optim.Adam(model.parameters(), lr=0.1)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def _graph_first_call():
    (x, y) = _batch()
    graphs = []  # kept alive: a graph (with its plan) is long-lived, its first call is not

    def first_call():
        model = _mlp()
        opt = flow.optim.SGD(model.parameters(), lr=0.1)

        class Step(flow.nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(opt)

            def build(self, x, y):
                loss = F.cross_entropy(self.model(x), y)
                loss.backward()
                return {"loss": loss, "both": (loss, [loss])}
        graphs.append(Step())
        graphs[-1](x, y)
    return first_call


def _multi_dot():
    ms = [flow.randn(3, 4, requires_grad=True), flow.randn(4, 5), flow.randn(5, 2)]
    return lambda: flow.linalg.multi_dot(ms).sum().backward()


def _func_grad():
    x = flow.randn(4)
    return lambda: flow.func.grad(lambda t: {"a": (t.sin() ** 2).sum()}["a"])(x)


def _func_vjp():
    x = flow.randn(4)
    return lambda: flow.func.vjp(lambda t: (t.sin(), [t.cos()]), x)[1]((x, [x]))


def _grad_scaler():
    scaler = flow.GradScaler("cpu", init_scale=4.0)
    loss = flow.ones(2, requires_grad=True)
    return lambda: scaler.scale([loss, (loss, loss)])


def _load_optimizer_state():
    model = _mlp()
    opt = flow.optim.Adam(model.parameters())
    model(_batch()[0]).sum().backward()
    opt.step()
    state = opt.state_dict()
    return lambda: opt.load_state_dict(state)


def _data_loader():
    data = flow.utils.data.TensorDataset(flow.arange(20.0).reshape(10, 2), flow.arange(10))
    loader = flow.utils.data.DataLoader(data, batch_size=3, shuffle=True)
    return lambda: [b for b in loader]


def _scheduler_and_clipping():
    model = _mlp()
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sch = flow.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=1000)
    x, y = _batch()

    def step():
        F.cross_entropy(model(x), y).backward()
        flow.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sch.step()
        opt.zero_grad()
    return step


def _checkpointed_hooked_autocast():
    model = _mlp()
    model[0].register_forward_hook(lambda m, i, o: o * 1.0)
    model[2].register_full_backward_hook(lambda m, gi, go: None)
    x, y = _batch()

    def step():
        with flow.autocast("cpu", dtype=flow.bfloat16):
            out = flow.utils.checkpoint.checkpoint(model, x, use_reentrant=False)
        F.cross_entropy(out.float(), y).backward()
    return step


def _double_backward():
    x = flow.randn(4, requires_grad=True)

    def step():
        g, = flow.autograd.grad((x.tanh() ** 3).sum(), x, create_graph=True)
        g.sum().backward()
    return step


def _vmap_jacrev():
    x = flow.randn(3, 4)
    return lambda: flow.func.vmap(flow.func.jacrev(lambda t: t.sin() * t))(x)


def _rnn_step():
    flow.manual_seed(0)
    lstm = flow.nn.LSTM(4, 5, num_layers=2, batch_first=True)
    x = flow.randn(2, 3, 4)
    return lambda: lstm(x)[0].sum().backward()


CALLS = {
    "eager_training_step": _eager_step,
    "nn_graph_first_call": _graph_first_call,
    "linalg_multi_dot": _multi_dot,
    "func_grad": _func_grad,
    "func_vjp": _func_vjp,
    "grad_scaler_scale_nested": _grad_scaler,
    "optimizer_load_state_dict": _load_optimizer_state,
    "data_loader_epoch": _data_loader,
    "scheduler_and_clipping": _scheduler_and_clipping,
    "checkpoint_hooks_autocast": _checkpointed_hooked_autocast,
    "double_backward": _double_backward,
    "vmap_of_jacrev": _vmap_jacrev,
    "lstm_step": _rnn_step,
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_leaves_no_reference_cycle(name):
    call = CALLS[name]()
    call()
    found = []
    for _ in range(2):  # (a call's own cycles come back every call; the collector also counts
        gc.collect()    # what another thread left meanwhile, once: seen under xdist)
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)  # (what was collected: named when the test fails)
        try:
            call()
            found.append(gc.collect())
            kinds = collections.Counter(type(o).__qualname__ for o in gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        if found[-1] == 0:
            break
    assert found[-1] == 0, (f"{name}: {found} objects in reference cycles, call after call: "
                            f"{kinds.most_common(12)}")


def test_a_graph_class_no_longer_used_is_not_kept_alive_by_its_compile():
    """A graph's first call looks at its class's methods (python_reads): the lookup is cached
    per class without holding the class, so a class nothing uses any more is freed with what
    its methods' closures hold (an lru_cache kept the last 1024 alive)."""
    def compiled_class():
        lin = flow.nn.Linear(2, 2)

        class Step(flow.nn.Graph):
            def __init__(self):
                super().__init__()
                self.lin = lin

            def build(self, x):
                return self.lin(x).sum()

        Step()(flow.ones(1, 2))
        return weakref.ref(Step), weakref.ref(lin)

    classes, modules = compiled_class()
    gc.collect()
    assert classes() is None and modules() is None
