"""flowgrad.profiler against torch.profiler: the same script runs under both, with the same
schedule decisions, trace callbacks, ranges, nesting of events, table layout and errors;
profiling changes no value or gradient (under autocast, inference mode and func transforms
too). flowgrad's event names are its own ops' ('matmul', 'matmul_backward'), torch's are
ATen's ('aten::mm', 'MmBackward0'), so names are compared only for the user's ranges."""
import json
import os

import numpy as np
import pytest
import torch
import torch.profiler

import flowgrad as flow
import flowgrad.profiler


def _step(m, x, w):
    with m.profiler.record_function("forward"):
        loss = (x @ w).tanh().pow(2).sum()
    with m.profiler.record_function("backward"):
        loss.backward()
    return loss


def _tensors(m):
    rng = np.random.default_rng(0)
    return (m.tensor(rng.standard_normal((4, 3))),
            m.tensor(rng.standard_normal((3, 2)), requires_grad=True))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kw", [dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=0, active=1),
                                dict(wait=2, warmup=1, active=1, repeat=2),
                                dict(wait=1, warmup=0, active=2, repeat=1, skip_first=3)])
def test_schedule_and_trace_callbacks_as_torch(kw):
    seen = {}
    for m in (torch, flow):
        s = m.profiler.schedule(**kw)
        actions = [s(i).name for i in range(12)]
        ready = []
        x, w = _tensors(m)
        with m.profiler.profile(activities=[m.profiler.ProfilerActivity.CPU], schedule=s,
                                on_trace_ready=lambda p: ready.append(p.step_num)) as prof:
            for _ in range(8):
                _step(m, x, w)
                prof.step()
        seen[m] = actions, ready
    assert seen[flow] == seen[torch]


def test_ranges_nest_and_times_add_up():
    results = {}
    for m in (torch, flow):
        x, w = _tensors(m)
        with m.profiler.profile(record_shapes=True) as prof:
            _step(m, x, w)
        averages = prof.key_averages()
        keys = {e.key for e in averages}
        ranges = {e.key: e for e in averages if e.key in ("forward", "backward")}
        for e in averages:
            assert 0 <= e.self_cpu_time_total <= e.cpu_time_total + 1e-6
        for e in ranges.values():
            assert e.count == 1 and e.self_cpu_time_total < e.cpu_time_total  # ops inside
        events = prof.events()
        inside = [e for e in events if e.cpu_parent is not None and
                  e.cpu_parent.name == "forward"]
        assert inside  # the forward's ops are its children
        results[m] = sorted(ranges), len(keys) > 4
    assert results[flow] == results[torch]


def test_input_shapes_and_table_layout_as_torch():
    tables = {}
    for m in (torch, flow):
        a = m.ones(5, 3, requires_grad=True)
        b = m.ones(3, 4)
        with m.profiler.profile(record_shapes=True) as prof:
            (a @ b).sum().backward()
        grouped = prof.key_averages(group_by_input_shape=True)
        assert [[5, 3], [3, 4]] in [e.input_shapes for e in grouped]
        table = grouped.table(sort_by="self_cpu_time_total", row_limit=3)
        lines = table.splitlines()
        tables[m] = ([line.split() for line in lines[1:2]], lines[-1].split(":")[0],
                     len(lines))
    assert tables[flow] == tables[torch]


def test_chrome_trace_and_tensorboard_handler(tmp_path):
    counts = []
    for m in (torch, flow):
        x, w = _tensors(m)
        directory = tmp_path / m.__name__
        with m.profiler.profile(schedule=m.profiler.schedule(wait=0, warmup=0, active=1),
                                on_trace_ready=m.profiler.tensorboard_trace_handler(
                                    str(directory), worker_name="w0")) as prof:
            _step(m, x, w)
            prof.step()
        files = sorted(os.listdir(directory))
        counts.append(len(files))  # (the step's cycle, and the one the exit cut short)
        assert all(f.startswith("w0.") and f.endswith(".pt.trace.json") for f in files)
        trace = json.loads((directory / files[0]).read_text())
        names = {e.get("name") for e in trace["traceEvents"]}
        assert {"forward", "backward"} <= names
        assert all(e["dur"] >= 0 for e in trace["traceEvents"] if e.get("ph") == "X")
    assert counts[0] == counts[1] == 2


def test_records_nothing_when_disabled_or_outside_and_nests():
    for m in (torch, flow):
        x, w = _tensors(m)
        disabled = m.autograd.profiler.profile(enabled=False)
        with disabled as prof:
            _step(m, x, w)
        assert prof is None  # (torch's __enter__ returns nothing then)
        with m.profiler.record_function("alone"):  # no profile: nothing happens
            (x * 2).sum()

        @m.profiler.record_function("decorated")
        def f(t):
            return t * 3
        with m.profiler.profile() as prof:
            f(x)
        assert "decorated" in {e.key for e in prof.key_averages()}
        with m.profiler.profile():
            with m.profiler.profile() as inner:  # (torch's outer one then keeps nothing)
                (x * 2).sum()
        assert "forward" not in {e.key for e in inner.key_averages()}
        assert len(inner.events()) > 0


@pytest.mark.parametrize("where", ["plain", "no_grad", "inference_mode", "autocast", "vmap",
                                   "grad"])
def test_profiling_changes_no_number(where):
    def run(profiled):
        x, w = _tensors(flow)
        x = x.float()
        w = w.detach().float().requires_grad_(True)
        ctx = {"no_grad": flow.no_grad, "inference_mode": flow.inference_mode,
               "autocast": lambda: flow.autocast("cpu", dtype=flow.bfloat16)}.get(where)
        prof = flow.profiler.profile() if profiled else None
        if prof is not None:
            prof.__enter__()
        try:
            if where == "vmap":
                out = flow.func.vmap(lambda row: (row @ w).tanh())(x)
            elif where == "grad":
                out = flow.func.grad(lambda v: (x @ v).tanh().sum())(w.detach())
            elif ctx is not None:
                with ctx():
                    out = (x @ w).tanh()
            else:
                out = (x @ w).tanh()
                out.sum().backward()
                out = (out, w.grad)
        finally:
            if prof is not None:
                prof.__exit__(None, None, None)
        return [t.detach().float().numpy() for t in (out if isinstance(out, tuple) else (out,))]
    plain, profiled = run(False), run(True)
    for a, b in zip(plain, profiled, strict=True):
        np.testing.assert_array_equal(a, b)
    assert flow.autograd.interpreter.current is flow.autograd.interpreter.AutogradInterpreter


def test_a_compiled_graph_run_is_one_range():
    """A plan calls no op: the profiler sees each run of an nn.Graph's plan as one range named
    after the graph, and its first call (trace and compile) as another."""
    model = flow.nn.Linear(3, 2)

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x).sum()

    step = Step()
    with flow.profiler.profile() as prof:
        for _ in range(4):
            step(flow.ones(2, 3))
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts[f"nn.Graph {step.name}"] == 3
    assert counts[f"nn.Graph {step.name} (trace and compile)"] == 1  # the first call
