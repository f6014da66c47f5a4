"""Every OpInfo through graph mode against eager flowgrad (opinfo_graph.py does the work): an
eval nn.Graph of the op on the sample's tensors as inputs, called on two data (values, dtype,
shape, raise/no-raise, the first call's outputs still as they were, the inputs after each call);
a training-style build whose backward() fills the inputs' .grad as eager's, accumulating on a
third call; the sample's other tensors captured by build and written between calls; and
flow.compile(fullgraph=True) with gradients through backward() outside.

The default tier runs the first float64 sample of every other OpInfo (the CPU budget) through
the eval graph and the backward graph (DEFAULT_KINDS); the slow tier each OpInfo's first
float64, int64 and bool sample through every check (and only it checks that each KNOWN entry
still matches something). Every sample: `python tests/opinfo_graph.py`. A finding fails unless
KNOWN explains it (a pattern its messages match, with the reason).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import torch  # noqa: E402
from opinfo_graph import DTYPES, KINDS, probe  # noqa: E402
from opinfo_vs_torch import assert_explained, full_name, one_thread, op_db  # noqa: E402
from test_opinfo_vs_torch import MISSING  # noqa: E402

import flowgrad as flow  # noqa: E402
from flowgrad.graph.graph import StalePlanError  # noqa: E402

DEFAULT_KINDS = ("graph", "grad")

_HOST_READ = (r"reads its value, which the compiled plan cannot do|build\(\) returned a "
              r"(bool|int|float)|build\(\) read the values of a captured tensor",
              "a host read inside build (item(), bool(), a value-shaped result, an op taking a "
              "tensor's values as sizes): graph mode refuses it with a clear error naming the "
              "line (tests/test_graph_host_reads.py); of a captured tensor, the plan is stale "
              "once its values change (StalePlanError; flow.compile traces anew)")

KNOWN: dict[str, tuple[str, str]] = {
    **{name: _HOST_READ for name in (
        "item", "allclose", "equal", "unique", "unique_consecutive", "bincount",
        "nn.functional.one_hot", "linspace.tensor_overload", "logspace.tensor_overload",
        "tensor_split")},
    **{name: (r"StalePlanError\(\"nn.Graph: the size of nonzero's result",
              "a size that depends on values is static in a plan, as input shapes are: the "
              "2nd call's data has another count of non-zeros (flow.compile traces anew)")
       for name in ("nonzero", "argwhere")},
    "to_sparse": (r"build\(\) returned a SparseTensor",
                  "a graph returns dense tensors (sparse tensors are eager only)"),
}

DB = op_db()


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():  # small tensors: thread pools only spin
        yield


@pytest.fixture(autouse=True)
def _streams(keep_global_random_streams):
    """(each call of the sweep seeds flowgrad's generator)"""


def _check(info, first_only):
    name = full_name(info)
    if name in MISSING:  # (test_opinfo_vs_torch.py checks that they are still missing)
        pytest.skip("not in flowgrad")
    if first_only:
        findings = probe(info, DTYPES[:1], DEFAULT_KINDS, first_only=True)
    else:
        findings = probe(info, DTYPES, KINDS, first_only=True)
    assert_explained(name, findings, KNOWN, stale_check=not first_only)


@pytest.mark.parametrize("info", DB[::2], ids=[full_name(info) for info in DB[::2]])
def test_opinfo_graph_first_sample_vs_eager(info):
    _check(info, first_only=True)


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_graph_vs_eager(info):
    _check(info, first_only=False)


# ---- the fixes this sweep found, on their own ------------------------------------------------
RESIZES = [
    ("resize_", lambda m, x: (x * 2).resize_(6)),
    ("resize_ grows", lambda m, x: (x * 2).resize_(8)[:6] + 0),
    ("resize_ shrinks", lambda m, x: (x * 2).resize_(2, 2)),
    ("resize_as_", lambda m, x: (x * 2).resize_as_(m.ones(3, 2))),
]


@pytest.mark.parametrize("name,step", RESIZES, ids=[n for n, _ in RESIZES])
def test_resize_inside_build_follows_each_call(name, step):
    """resize_ of a tensor made inside build set its array outside any op: the plan kept the
    traced call's array, so the 2nd call of `(x * 2).resize_(6)` gave [0, 2, 4, 6, 8, 10]
    (the 1st call's) for torch's [0, 4, 8, 12, 16, 20]."""
    graph = flow.nn.Graph.trace(lambda x: step(flow, x))
    for k in (1.0, 2.0, -3.0):
        data = np.arange(6.0).reshape(2, 3) * k
        expected = step(torch, torch.tensor(data)).numpy()
        got = graph(flow.tensor(data)).numpy()
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", ["resize_", "t_", "unsqueeze_", "squeeze_", "transpose_"])
def test_shape_change_of_a_graph_input_inside_build_refuses(name):
    """A layout change in place of a graph input changed the caller's tensor on the traced
    call only (the plan cannot), and the input signature was taken after it: the next call
    with a tensor of the first call's shape was refused as a different input. Now a clear
    error at trace time; on a tensor made inside build it is allowed."""
    args = {"resize_": (6,), "t_": (), "unsqueeze_": (0,), "squeeze_": (),
            "transpose_": (0, 1)}[name]
    graph = flow.nn.Graph.trace(lambda x: getattr(x, name)(*args) * 1)
    with pytest.raises(NotImplementedError, match=f"{name} changes the shape of a graph input"):
        graph(flow.ones(2, 3) if name != "squeeze_" else flow.ones(1, 3))
    made = flow.nn.Graph.trace(lambda x: getattr(x * 2, name)(*args))
    for k in (1.0, 3.0):
        shape = (2, 3) if name != "squeeze_" else (1, 3)
        data = np.arange(6.0)[:int(np.prod(shape))].reshape(shape) * k
        expected = getattr(torch.tensor(data) * 2, name)(*args).numpy()
        np.testing.assert_array_equal(made(flow.tensor(data)).numpy(), expected)


CAPTURED_READS = [
    ("tensor_split", lambda m, x, idx: m.tensor_split(x, idx)[0] * 1),
    ("tolist", lambda m, x, idx: x * idx.tolist()[0]),
    ("repeat_interleave", lambda m, x, idx: x[:2].repeat_interleave(idx) * 1),
]


@pytest.mark.parametrize("name,step", CAPTURED_READS, ids=[n for n, _ in CAPTURED_READS])
def test_captured_tensor_read_inside_build_is_guarded(name, step):
    """build reading a captured tensor's values (tensor_split's indices, tolist) froze them:
    after `idx.copy_([2, 4])` the plan of tensor_split(x, idx)[0] still gave [0.] where torch
    gives [0., 1.]. The graph now raises StalePlanError once they change; flow.compile traces
    anew and follows them."""
    idx = flow.tensor([1, 3])
    t_idx = torch.tensor([1, 3])
    x, t_x = flow.arange(6.0), torch.arange(6.0)
    graph = flow.nn.Graph.trace(lambda x: step(flow, x, idx))
    compiled = flow.compile(lambda x: step(flow, x, idx), fullgraph=True)
    for f in (graph, compiled):
        np.testing.assert_array_equal(f(x).numpy(), step(torch, t_x, t_idx).numpy())
    idx.copy_(flow.tensor([2, 4]))
    t_idx.copy_(torch.tensor([2, 4]))
    with pytest.raises(StalePlanError, match="read the values of a captured tensor"):
        graph(x)
    for _ in range(2):
        np.testing.assert_array_equal(compiled(x).numpy(), step(torch, t_x, t_idx).numpy())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_captured_tensor_holding_nan_still_matches_its_guard(dtype):
    """The guard compares nan as equal to nan for every float kind: a bfloat16 (NumPy kind V)
    tensor holding a nan read inside build raised StalePlanError on an unchanged second call."""
    held = flow.tensor([1.0, float("nan")], dtype=getattr(flow, dtype))
    graph = flow.nn.Graph.trace(lambda x: x * sum(v == v for v in held.tolist()))
    for _ in range(2):
        np.testing.assert_array_equal(graph(flow.ones(2)).numpy(), [1.0, 1.0])


def test_compiled_backward_leaves_grad_none_where_no_gradient_flows():
    """flow.compile's backward graph gave zeros for an input or parameter no gradient reaches:
    `x * 2 + y.detach()` gave y.grad [0., 0.] and an unused submodule's weight a zero matrix,
    where torch (and eager flowgrad) leave .grad None."""
    def step(x, y):
        return x * 2 + y.detach()

    f = flow.compile(step, fullgraph=True)
    t_x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    t_y = torch.tensor([3.0, 0.0], dtype=torch.float64, requires_grad=True)
    step(t_x, t_y).sum().backward()
    assert t_y.grad is None
    for _ in range(2):
        x = flow.tensor([1.0, 2.0], dtype=flow.float64, requires_grad=True)
        y = flow.tensor([3.0, 0.0], dtype=flow.float64, requires_grad=True)
        f(x, y).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), t_x.grad.numpy())
        assert y.grad is None

    class Two(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = flow.nn.Linear(2, 2), flow.nn.Linear(2, 2)

        def forward(self, x):
            return self.used(x)

    model = Two()
    compiled = flow.compile(model, fullgraph=True)
    compiled(flow.ones(1, 2)).sum().backward()
    assert model.used.weight.grad is not None
    assert model.unused.weight.grad is None and model.unused.bias.grad is None


def test_nonzero_as_tuple_of_a_0d_tensor_follows_each_call():
    """nonzero(x, as_tuple=True) of a 0-d tensor reshaped to the traced count: a plan traced
    on 3.0 raised "cannot reshape array of size 0 into shape (1,)" on 0.0 (torch: an empty
    index vector). The count is static in a plan now (StalePlanError); flow.compile follows
    each call."""
    graph = flow.nn.Graph.trace(lambda x: flow.nonzero(x, as_tuple=True))
    compiled = flow.compile(lambda x: flow.nonzero(x, as_tuple=True))
    for v in (3.0, -1.0, 0.0, 2.0):
        (expected,) = torch.nonzero(torch.tensor(v), as_tuple=True)
        (got,) = compiled(flow.tensor(v))
        assert got.dtype == flow.int64
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
        if v:
            np.testing.assert_array_equal(graph(flow.tensor(v))[0].numpy(), expected.numpy())
        else:
            with pytest.raises(StalePlanError, match=r"it was \(1, 1\).*is \(0, 1\)"):
                graph(flow.tensor(v))
