"""Non-reentrant checkpoint's semantics against torch's: early stop of the recomputation (what
the function does after its last saved tensor does not run again: module forward hooks, side
effects), `set_checkpoint_early_stop` and `early_stop=`, one recomputation per backward run,
the errors of a recomputation that saves other tensors (CheckpointError), and the helpers of
torch.utils.checkpoint. Each case runs the same code with `m` = torch and `m` = flowgrad and
compares the events it logged, the gradients, and the exception raised (its type)."""
import warnings

import numpy as np
import pytest
import torch
import torch.utils.checkpoint  # noqa: F401 - m.utils.checkpoint below

import flowgrad as flow
import flowgrad.utils.checkpoint  # noqa: F401


def _cp(m):
    return m.utils.checkpoint


def _x(m, values=(0.5, -1.0, 2.0)):
    return m.tensor(np.array(values), requires_grad=True)


def _logged(fn):
    """fn(m, log) -> tensors to compare, run with the shared log of events."""
    def run(m):
        log = []
        out = fn(m, log)
        return log, [t.detach().numpy().tolist() if hasattr(t, "detach") else t
                     for t in (out or [])]
    return run


@_logged
def _early_stop_plain(m, log):
    def f(t):
        log.append("start")
        u = t.exp()
        log.append("saved exp's output")
        v = u * 3  # saves nothing that needs grad: no tensor after exp's
        log.append("end")
        return v
    x = _x(m)
    y = _cp(m).checkpoint(f, x, use_reentrant=False)
    log.append("backward")
    y.sum().backward()
    return [x.grad]


@_logged
def _early_stop_off_by_context(m, log):
    def f(t):
        log.append("start")
        u = t.exp()
        log.append("end")
        return u * 3
    x = _x(m)
    with _cp(m).set_checkpoint_early_stop(False):
        y = _cp(m).checkpoint(f, x, use_reentrant=False)
    log.append("backward")
    y.sum().backward()  # (outside the block: the setting was read at forward time)
    return [x.grad]


@_logged
def _early_stop_off_by_argument(m, log):
    def f(t):
        log.append("start")
        return t.sin().exp()
    x = _x(m)
    y = _cp(m).checkpoint(f, x, use_reentrant=False, early_stop=False)
    y.sum().backward()
    return [x.grad]


@_logged
def _context_wins_over_argument(m, log):
    def f(t):
        log.append("start")
        u = t.exp()
        log.append("end")
        return u.sum()
    x = _x(m)
    with _cp(m).set_checkpoint_early_stop(True):
        y = _cp(m).checkpoint(f, x, use_reentrant=False, early_stop=False)
    y.backward()
    return [x.grad]


@_logged
def _module_hooks(m, log):
    m.manual_seed(0)
    block = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.GELU(), m.nn.LayerNorm(4)).double()
    with m.no_grad():
        for p in block.parameters():
            p.copy_(m.tensor(np.linspace(-1, 1, p.numel()).reshape(tuple(p.shape))))
    block.register_forward_pre_hook(lambda mod, i: log.append("pre"))
    block.register_forward_hook(lambda mod, i, o: log.append(("post", round(o.sum().item(), 9))))
    block[0].register_forward_hook(lambda mod, i, o: log.append("linear done"))
    x = m.tensor(np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]]), requires_grad=True)
    y = _cp(m).checkpoint(block, x, use_reentrant=False)
    log.append("backward")
    y.pow(2).sum().backward()
    return [x.grad] + [p.grad for p in block.parameters()]


@_logged
def _per_backward_run(m, log):
    def f(t):
        log.append("run")
        return t.exp() * t
    x = _x(m)
    y = _cp(m).checkpoint(f, x, use_reentrant=False)
    y.sum().backward(retain_graph=True)
    first = x.grad.clone()
    y.sum().backward()
    return [first, x.grad]


@_logged
def _partial_backward_then_full(m, log):
    w = m.tensor(np.array([1.5, -0.5, 2.0]), requires_grad=True)

    def f(t):
        log.append("run")
        return (t * w).tanh() * w
    x = _x(m)
    y = _cp(m).checkpoint(f, x, use_reentrant=False)
    (gx,) = m.autograd.grad(y.sum(), x, retain_graph=True)
    y.sum().backward()
    return [gx, x.grad, w.grad]


@_logged
def _double_backward(m, log):
    def f(t):
        log.append("run")
        return t.sin() * t.exp()
    x = _x(m)
    y = _cp(m).checkpoint(f, x, use_reentrant=False)
    (g,) = m.autograd.grad(y.sum(), x, create_graph=True)
    (h,) = m.autograd.grad(g.sum(), x)
    return [g, h]


@_logged
def _nested_checkpoints(m, log):
    def inner(t):
        log.append("inner")
        return t.tanh() * t
    def outer(t):
        log.append("outer start")
        u = _cp(m).checkpoint(inner, t.exp(), use_reentrant=False)
        log.append("outer end")
        return u.sin()
    x = _x(m)
    y = _cp(m).checkpoint(outer, x, use_reentrant=False)
    y.sum().backward()
    return [x.grad]


def _diverging(kind):
    @_logged
    def run(m, log):
        calls = []

        def f(t):
            calls.append(1)
            log.append("run")
            if len(calls) == 1:
                return t.exp()
            if kind == "fewer":
                return t * 2
            if kind == "more":
                return t.exp().sin()
            return t[:2].exp()  # "shape"
        x = _x(m)
        if kind == "more":
            with _cp(m).set_checkpoint_early_stop(False):
                y = _cp(m).checkpoint(f, x, use_reentrant=False)
        else:
            y = _cp(m).checkpoint(f, x, use_reentrant=False)
        y.sum().backward()
        return [x.grad]
    return run


@_logged
def _more_with_early_stop(m, log):
    calls = []

    def f(t):
        calls.append(1)
        log.append("run")
        u = t.exp()
        return u if len(calls) == 1 else u.sin()  # the extra save is never reached
    x = _x(m)
    y = _cp(m).checkpoint(f, x, use_reentrant=False)
    y.sum().backward()
    return [x.grad]


@_logged
def _input_written_after_forward(m, log):
    x = _x(m)
    h = x * 2
    y = _cp(m).checkpoint(lambda t: t.sin(), h, use_reentrant=False)
    with m.no_grad():
        h.add_(1)
    y.sum().backward()
    return [x.grad]


def _norm_statistics(kind):
    @_logged
    def run(m, log):
        """A norm layer's running statistics under a checkpoint: torch's batch_norm updates
        them before it saves what its backward reads, so the recomputation updates them
        again; instance_norm copies them back after, which the early stop skips."""
        if kind == "batch":
            mod, shape = m.nn.BatchNorm1d(3).double(), (4, 3)
        else:
            mod, shape = m.nn.InstanceNorm1d(3, track_running_stats=True).double(), (2, 3, 4)
        x = m.tensor(np.arange(np.prod(shape), dtype=np.float64).reshape(shape) % 7,
                     requires_grad=True)
        y = _cp(m).checkpoint(mod, x, use_reentrant=False)
        y.pow(2).sum().backward()
        log.append(int(mod.num_batches_tracked))
        return [mod.running_mean, mod.running_var, x.grad]
    return run


CASES = {
    "batch_norm_statistics": _norm_statistics("batch"),
    "instance_norm_statistics": _norm_statistics("instance"),
    "early_stop": _early_stop_plain,
    "early_stop_off_by_context": _early_stop_off_by_context,
    "early_stop_off_by_argument": _early_stop_off_by_argument,
    "context_wins_over_argument": _context_wins_over_argument,
    "module_hooks": _module_hooks,
    "per_backward_run": _per_backward_run,
    "partial_backward_then_full": _partial_backward_then_full,
    "double_backward": _double_backward,
    "nested_checkpoints": _nested_checkpoints,
    "fewer_saved": _diverging("fewer"),
    "more_saved_without_early_stop": _diverging("more"),
    "other_shape_saved": _diverging("shape"),
    "more_saved_with_early_stop": _more_with_early_stop,
    "input_written_after_forward": _input_written_after_forward,
}


# the cases where torch raises (the others must run to their end)
RAISING = {"fewer_saved", "more_saved_without_early_stop", "other_shape_saved",
           "input_written_after_forward"}


def _outcome(run, m):
    try:
        return run(m), None
    except Exception as e:  # noqa: BLE001 - the type is compared with torch's
        return None, type(e).__name__


@pytest.mark.parametrize("name", list(CASES))
def test_checkpoint_semantics_match_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs, their_error = _outcome(CASES[name], torch)
        ours, our_error = _outcome(CASES[name], flow)
    assert (their_error is not None) == (name in RAISING)
    assert our_error == their_error
    if theirs is None:
        return
    assert ours[0] == theirs[0]  # the events, in order
    for a, b in zip(ours[1], theirs[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_checkpoint_error_is_a_runtime_error_naming_both_runs_in_debug():
    calls = []

    def f(t):
        calls.append(1)
        return t.exp() if len(calls) == 1 else t[:1].exp()
    x = flow.ones(2, requires_grad=True)
    with flow.utils.checkpoint.set_checkpoint_debug_enabled(True):
        y = flow.utils.checkpoint.checkpoint(f, x, use_reentrant=False)
    assert issubclass(flow.utils.checkpoint.CheckpointError, RuntimeError)
    with pytest.raises(flow.utils.checkpoint.CheckpointError,
                       match=r"(?s)recomputed tensor 0 has shape \(1,\).*original forward:\n"
                             r"  0: \(2,\).*recomputation:\n  0: \(1,\)"):
        y.sum().backward()
    assert x.grad is None  # nothing ran


def test_helpers_as_torch():
    cp, tcp = flow.utils.checkpoint, torch.utils.checkpoint
    for m, mod in ((flow, cp), (torch, tcp)):
        x = m.ones(2, requires_grad=True) * 2
        y, n = mod.detach_variable((x, 3))
        assert (y.requires_grad, y.grad_fn, n) == (True, None, 3)
        with pytest.raises(RuntimeError):
            mod.detach_variable([x])
        assert mod.get_device_states(x) == ([], [])
        mod.set_device_states([], [])
        assert mod.DefaultDeviceType.get_device_type() == "cpu"
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            mod.check_backward_validity((m.ones(1),))
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            mod.checkpoint(m.sin, m.ones(2), use_reentrant=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mod.check_backward_validity((m.ones(1, requires_grad=True), 2))
    assert cp.CheckpointFunction.apply(flow.sin, True, flow.zeros(1, requires_grad=True)) == 0


def _reentrant_over_a_no_grad_view(m, custom):
    """The checkpoint's only input is a view made under no_grad of t = x * x (it requires
    grad, yet has no history): torch still runs the Function's backward, whose inner
    backward reaches t, which the function closes over. flowgrad skipped the node's rule
    (no input had a history), and x got no gradient."""
    x = m.tensor([[-0.17, -1.01], [0.55, 0.28]], dtype=m.float64, requires_grad=True)
    t = x * x
    with m.no_grad():
        v = t.expand_as(t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if custom:
            calls = []

            class Spy(m.autograd.Function):
                @staticmethod
                def forward(ctx, u):
                    return u * 2.0

                @staticmethod
                def backward(ctx, g):
                    calls.append(g.tolist())
                    return g * 2.0
            Spy.apply(v).sum().backward()
            return calls
        y = m.utils.checkpoint.checkpoint(lambda u: u.sin() * t, v, use_reentrant=True)
    y.sum().backward(retain_graph=True)
    return x.grad.tolist()


@pytest.mark.parametrize("custom", [False, True])
def test_a_function_over_inputs_with_no_history_runs_its_backward_as_torch(custom):
    # (program_fuzz 11508900)
    assert _reentrant_over_a_no_grad_view(flow, custom) == \
        _reentrant_over_a_no_grad_view(torch, custom)
