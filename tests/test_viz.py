"""flowgrad.utils.viz on a real model: DOT structure, leaf names, saved bytes, rendering."""
import re
import shutil

import pytest

import flowgrad as flow
from flowgrad.utils import viz


def _cnn():
    flow.manual_seed(0)
    model = flow.nn.Sequential(
        flow.nn.Conv2d(1, 4, 3), flow.nn.BatchNorm2d(4), flow.nn.ReLU(), flow.nn.MaxPool2d(2),
        flow.nn.Flatten(), flow.nn.Linear(4 * 3 * 3, 10))
    x = flow.randn(2, 1, 8, 8)
    loss = flow.nn.functional.cross_entropy(model(x), flow.tensor([1, 7]))
    return model, loss


def test_dot_names_every_parameter_and_links_the_graph():
    model, loss = _cnn()
    params = dict(model.named_parameters())
    dot = viz.make_dot(loss, params=params)
    for name, p in params.items():
        assert f'label="{name} {tuple(p.shape)}"' in dot  # each leaf by its parameter name
    for op in ("cross_entropy_backward", "linear_backward", "conv_backward",
               "relu_backward", "max_pool_backward"):
        assert op in dot, op
    nodes = set(re.findall(r"^  (n\d+) \[", dot, re.M))
    edges = re.findall(r"^  (n\d+) -> (n\d+);", dot, re.M)
    assert {b for _, b in edges} | {"n0"} == nodes  # every node reached, from the root
    assert len(edges) >= len(nodes) - 1


def test_memory_report_matches_the_saved_arrays():
    model, loss = _cnn()
    report = viz.memory_report(loss)
    arrays = {}
    for node in viz._walk(loss.grad_fn):
        for _, data, _ in viz.saved_tensors(node):
            arrays[id(data)] = data
    total = sum(a.nbytes for a in arrays.values())
    assert report.splitlines()[-1] == f"total saved: {len(arrays)} tensors, " + (
        f"{total / 1024:.1f} KiB" if total >= 1024 else f"{total} B")
    conv_row = next(r for r in report.splitlines() if r.startswith("conv_backward"))
    assert int(conv_row.split()[1]) >= 1
    loss.backward()  # without retain_graph the saved tensors are freed
    assert "total saved: 0 tensors" in viz.memory_report(loss)


def test_packed_tensors_and_errors():
    x = flow.ones(3, requires_grad=True)
    with flow.autograd.graph.save_on_cpu():
        y = (x * x).sum()
    assert "(packed by hooks)" in viz.make_dot(y)
    with pytest.raises(ValueError, match="no backward graph"):
        viz.make_dot(flow.ones(2))
    leaf_only = viz.make_dot(x)
    assert "leaf (3,)" in leaf_only


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
@pytest.mark.parametrize("fmt, magic", [("svg", b"<?xml"), ("png", b"\x89PNG")])
def test_render(tmp_path, fmt, magic):
    model, loss = _cnn()
    path = viz.render(loss, tmp_path / f"graph.{fmt}", format=fmt,
                      params=dict(model.named_parameters()))
    data = open(path, "rb").read()
    assert data.startswith(magic) and len(data) > 1000
    if fmt == "svg":
        assert b"0.weight" in data


def test_render_without_dot_says_how(monkeypatch):
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="graphviz"):
        viz.render(flow.ones(1, requires_grad=True) * 2, "x.svg")
