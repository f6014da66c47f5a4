"""utils.benchmark against torch.utils.benchmark: the Timer's API and what its Measurements
say (runs per replicate, replicate counts, statistics from the times, torch's repr layout),
select_unit, merge, Compare's table, and the same refusals. Times themselves differ."""
import re

import pytest
import torch
import torch.utils.benchmark as torch_benchmark

import flowgrad as flow
from flowgrad.utils import benchmark


def _repr_shape(m):
    """The repr with the object address and the numbers blanked out."""
    text = re.sub(r" at 0x[0-9a-f]+", "", repr(m)).replace("torch.utils.benchmark.utils."
                                                            "common.", "")
    text = text.replace("flowgrad.utils.benchmark.", "")
    return re.sub(r"\d+(\.\d+)?", "N", text)


@pytest.mark.parametrize("kwargs", [{}, {"label": "adds", "sub_label": "8",
                                         "description": "float"},
                                    {"setup": "y = x + 1"}])
def test_timeit_measurement_as_torch(kwargs):
    ours = benchmark.Timer("x + 1", globals={"x": flow.ones(8)}, **kwargs).timeit(50)
    theirs = torch_benchmark.Timer("x + 1", globals={"x": torch.ones(8)}, **kwargs).timeit(50)
    for m in (ours, theirs):
        assert m.number_per_run == 50 and len(m.times) == 1 and m.times[0] > 0
        assert m.median == m.mean == m.times[0] and m.iqr == 0
    assert _repr_shape(ours) == _repr_shape(theirs)
    assert ours.title == theirs.title and ours.stmt == theirs.stmt
    assert ours.as_row_name == theirs.as_row_name


def test_statistics_of_given_times_as_torch():
    times = [3e-6, 1e-6, 2e-6, 4e-6, 10e-6, 2.5e-6]
    ours = benchmark.Measurement(10, [t * 10 for t in times], benchmark.TaskSpec("s", "pass"))
    theirs = torch_benchmark.Measurement(10, [t * 10 for t in times],
                                         torch_benchmark.TaskSpec("s", "pass"))
    for name in ("median", "mean", "iqr", "significant_figures", "has_warnings"):
        assert getattr(ours, name) == pytest.approx(getattr(theirs, name)), name
    assert _repr_shape(ours) == _repr_shape(theirs)
    merged_ours = benchmark.Measurement.merge([ours, ours])
    merged_theirs = torch_benchmark.Measurement.merge([theirs, theirs])
    assert len(merged_ours) == len(merged_theirs) == 1
    assert merged_ours[0].times == pytest.approx(merged_theirs[0].times)


@pytest.mark.parametrize("t", [3e-10, 2e-8, 5e-6, 0.004, 2.0, 300.0])
def test_select_unit_as_torch(t):
    assert benchmark.select_unit(t) == torch_benchmark.utils.common.select_unit(t)


def test_blocked_and_adaptive_autorange():
    timer = benchmark.Timer("x.sum()", globals={"x": flow.ones(16)})
    m = timer.blocked_autorange(min_run_time=0.05)
    assert sum(m.raw_times) >= 0.05 and m.number_per_run >= 1 and len(m.times) >= 1
    seen = []
    m = timer.adaptive_autorange(threshold=0.5, max_run_time=0.5,
                                 callback=lambda n, t: seen.append(n))
    assert len(m.times) >= 4 or sum(m.raw_times) > 0.5
    assert seen and set(seen) == {m.number_per_run}


@pytest.mark.parametrize("call", ["repeat", "autorange"])
def test_refusals_as_torch(call):
    for mod, x in ((benchmark, flow.ones(1)), (torch_benchmark, torch.ones(1))):
        with pytest.raises(NotImplementedError, match="blocked_autorange"):
            getattr(mod.Timer("x", globals={"x": x}), call)()


def test_compare_table():
    ms = [benchmark.Timer(stmt, globals={"x": flow.ones(8)}, label="ops", sub_label=size,
                          description=desc).timeit(20)
          for stmt, size, desc in [("x + 1", "8", "add"), ("x * 2", "8", "mul"),
                                   ("x + 1", "16", "add")]]
    compare = benchmark.Compare(ms)
    compare.trim_significant_figures()
    text = str(compare)
    lines = text.splitlines()
    assert lines[0] == "[-- ops --]" and "add" in lines[1] and "mul" in lines[1]
    assert lines[2].strip().startswith("8") and lines[3].strip().startswith("16")
    assert text.endswith(").") and "Times are in" in text
    unit, scale = benchmark.select_unit(min(m.median for m in ms))
    cells = [c.strip() for c in lines[2].split("|")]
    for m, cell in zip(ms[:2], cells[1:]):
        shown = float(f"{m.median / scale:.{m.significant_figures}g}")
        assert cell == f"{shown:.1f}"
    assert lines[3].split("|")[2].strip() == ""  # no mul at 16
