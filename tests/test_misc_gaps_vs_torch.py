"""torch 2.13 functions flowgrad added late, each against torch: histogramdd (torch's binning,
bit for bit), nonzero_static, empty_permuted (strides), slice_copy (values and gradients)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from helpers import check, gradcheck
from vs_torch import assert_same_raise, outcome

import flowgrad as flow

torch.set_num_threads(1)  # (torch's histogram sums per thread: one thread, one order)


def _flow(t):
    """A torch tensor as a flowgrad one of the same dtype (bfloat16 through float32)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return flow.tensor(t.float().numpy()).to(flow.bfloat16)
    return flow.tensor(t.numpy())


def _np(t):
    return (t.float() if t.dtype == torch.bfloat16 else t).detach().numpy() \
        if isinstance(t, torch.Tensor) else t.float().numpy() if t.dtype == flow.bfloat16 \
        else t.detach().numpy()


def _convert(value):
    if isinstance(value, torch.Tensor):
        return _flow(value)
    if isinstance(value, list):
        return [_convert(v) for v in value]
    return value


def _same_tensor(ours, theirs, exact=True):
    assert tuple(ours.shape) == tuple(theirs.shape), (ours.shape, theirs.shape)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    a, b = _np(ours).astype(np.float64), _np(theirs).astype(np.float64)
    if exact:
        np.testing.assert_array_equal(a, b)
    else:  # (a density divides by a float32 total that torch sums in another order)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=0)


# ---- histogramdd ---------------------------------------------------------------------------
def _points(shape, dtype=torch.float32, seed=0, grid=False):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, shape) / 2 if grid else rng.standard_normal(shape)
    return torch.tensor(a).to(dtype)


P = _points((40, 2))
G = _points((40, 2), grid=True, seed=1)  # values on bin edges, the last edge included
W = _points((40,), seed=2)
SORTED = [torch.tensor([-1.0, -0.2, 0.3, 1.5]), torch.tensor([-2.0, 0.0, 0.5])]
UNSORTED = [torch.tensor([0.4, -1.0, 2.0, 0.1, 1.0]), torch.tensor([-1.0, 0.5, 0.0, 3.0])]
HIST_CASES = [
    ("int_bins", P, 4, {}),
    ("list_bins", P, [3, 5], {}),
    ("tuple_bins", P, (1, 2), {}),
    ("on_edges", G, [4, 2], {}),
    ("on_edges_range", G, [3, 3], {"range": [0.0, 2.0, 0.5, 1.5]}),
    ("out_of_range", P, [4, 4], {"range": [-0.5, 0.5, 0.0, 1.0]}),
    ("weights", P, [3, 4], {"weight": W}),
    ("density", P, [3, 4], {"density": True}),
    ("density_weights", P, [3, 4], {"weight": W, "density": True}),
    ("density_weights_range", G, [2, 5], {"weight": W, "density": True,
                                          "range": [0.0, 1.0, -1.0, 3.0]}),
    ("edge_tensors", P, SORTED, {}),
    ("edge_tensors_weights", G, SORTED, {"weight": W, "density": True}),
    ("unsorted_edges", P, UNSORTED, {}),  # (torch's upper_bound steps, reproduced)
    ("one_point", torch.tensor([[1.0, 2.0]]), [2, 2], {}),  # (a range of one value widens)
    ("scalar_weight", torch.tensor([[1.0, 2.0]]), [2, 2], {"weight": torch.tensor(3.0)}),
    ("empty", torch.zeros(0, 2), [2, 3], {}),
    ("empty_density", torch.zeros(0, 2), [2, 3], {"density": True}),
    ("zero_weights_density", P, 2, {"weight": torch.zeros(40), "density": True}),
    ("no_dims", torch.zeros(3, 0), [], {}),
    ("nan", torch.tensor([[float("nan"), 0.5], [0.2, 0.5]]), 2, {"range": [0.0, 1.0] * 2}),
    ("three_d", _points((4, 5, 3), seed=3), [2, 3, 2], {"weight": _points((4, 5), seed=4)}),
    ("float64", _points((30, 3), torch.float64), [3, 2, 4], {"density": True}),
    ("float16_range", _points((30, 2), torch.float16), 6, {"range": [-1.0, 1.5, -0.3, 2.0]}),
    ("bfloat16_range", _points((30, 2), torch.bfloat16), [6, 5],
     {"range": [-1.0, 1.5, -0.3, 2.0], "weight": _points((30,), torch.bfloat16)}),
    ("float16_edges", G.half(), [e.half() for e in SORTED], {}),
]


@pytest.mark.parametrize("case", HIST_CASES, ids=[c[0] for c in HIST_CASES])
def test_histogramdd_against_torch(case):
    name, points, bins, kw = case
    theirs = torch.histogramdd(points, bins, **kw)
    ours = flow.histogramdd(_flow(points), _convert(bins),
                            **{k: _convert(v) for k, v in kw.items()})
    assert type(ours.bin_edges) is tuple and len(ours.bin_edges) == len(theirs.bin_edges)
    exact = not (kw.get("density") and kw.get("weight") is not None)
    _same_tensor(ours.hist, theirs.hist, exact)
    assert ours.hist is ours[0] and ours.bin_edges is ours[1]
    for e_ours, e_theirs in zip(ours.bin_edges, theirs.bin_edges):
        _same_tensor(e_ours, e_theirs)


def test_histogramdd_edges_are_torch_linspace_bit_for_bit():
    """Equal-width edges are torch.linspace's (one fused multiply-add per edge in float32 and
    float64, every step rounded in float16/bfloat16), and binning against them agrees."""
    rng = np.random.default_rng(5)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for _ in range(25):
            lo, hi = sorted(rng.standard_normal(2) * rng.choice([1, 10, 100]))
            n = int(rng.integers(1, 60))
            points = torch.tensor(rng.uniform(lo, hi, (50, 1))).to(dtype)
            theirs = torch.histogramdd(points, [n], range=[float(lo), float(hi)])
            ours = flow.histogramdd(_flow(points), [n], range=[float(lo), float(hi)])
            _same_tensor(ours.bin_edges[0], theirs.bin_edges[0])
            _same_tensor(ours.hist, theirs.hist)


def test_histogramdd_in_one_dim_is_torch_histogram():
    """torch computes histogram with histogramdd's kernel: values on (and next to) the edges
    land in the same bins, with the same edges."""
    rng = np.random.default_rng(6)
    for trial in range(40):
        a = rng.standard_normal(200).astype(np.float32)
        if trial % 2:
            a = np.round(a * 4) / 4
        kw = {"range": (-1.0, 1.0)} if trial % 3 == 0 else {}
        n = int(rng.integers(1, 30))
        theirs = torch.histogram(torch.tensor(a), n, **kw)
        ours = flow.histogramdd(flow.tensor(a).unsqueeze(-1), n,
                                range=list(kw["range"]) if kw else None)
        _same_tensor(ours.hist, theirs.hist)
        _same_tensor(ours.bin_edges[0], theirs.bin_edges)


X2 = torch.tensor([[0.0, 1.0], [1.0, 0.0], [2.0, 0.0]])
E = torch.tensor([0.0, 1.0])
HIST_ERRORS = [
    ("one_dim_input", torch.tensor([1.0, 2.0]), [2], {}),
    ("wrong_bin_count", X2, [2], {}),
    ("zero_bins", X2, [0, 2], {}),
    ("minus_one_bins", X2, [-1, 2], {}),
    ("negative_bins", X2, [-3, 2], {}),
    ("half_without_range", X2.half(), [2, 2], {}),
    ("long_input", X2.long(), [2, 2], {}),
    ("long_input_range", X2.long(), [2, 2], {"range": [0.0, 1.0, 0.0, 1.0]}),
    ("long_edges", X2.long(), [E.long(), E.long()], {}),
    ("complex_input", X2.to(torch.complex64), [2, 2], {}),
    ("short_range", X2, [2, 2], {"range": [0.0, 1.0, 0.0]}),
    ("int_range", X2, [2, 2], {"range": [0, 1, 0, 1]}),  # (accepted)
    ("tensor_range", X2, [2, 2], {"range": torch.tensor([0.0, 1.0, 0.0, 1.0])}),
    ("list_weight", X2, [2, 2], {"weight": [1.0, 1.0, 1.0]}),
    ("max_below_min", X2, [2, 2], {"range": [2.0, 0.0, 0.0, 1.0]}),
    ("infinite_range", X2, [2, 2], {"range": [0.0, float("inf"), 0.0, 1.0]}),
    ("nan_data_range", torch.tensor([[float("nan"), 1.0]]), [2, 2], {}),
    ("half_range_overflow", X2.half(), [2, 2], {"range": [0.0, 1e6, 0.0, 1.0]}),
    ("edges_dtype", X2, [E, E.double()], {}),
    ("edges_2d", X2, [E, E[None]], {}),
    ("one_edge", X2, [E, E[:1]], {}),
    ("no_edges", X2, [E, E[:0]], {}),
    ("edge_count", X2, [E], {}),
    ("mixed_bins", X2, [E, 3], {}),
    ("float_bins", X2, 2.5, {}),
    ("tensor_bins", X2, E, {}),
    ("weight_shape", X2, [2, 2], {"weight": torch.ones(2)}),
    ("weight_shape_2d", X2, [2, 2], {"weight": torch.ones(3, 1)}),
    ("weight_dtype", X2, [2, 2], {"weight": torch.ones(3).double()}),
]


@pytest.mark.parametrize("case", HIST_ERRORS, ids=[c[0] for c in HIST_ERRORS])
def test_histogramdd_refuses_as_torch(case):
    name, points, bins, kw = case
    _, torch_error = outcome(lambda: torch.histogramdd(points, bins, **kw))
    _, error = outcome(lambda: flow.histogramdd(
        _flow(points), _convert(bins), **{k: _convert(v) for k, v in kw.items()}))
    assert_same_raise(torch_error, error)
    assert type(error) is type(torch_error), (torch_error, error)
    assert error is None or "histogram" in str(error), error


def test_histogramdd_records_a_gradient_that_raises():
    """torch records a node whose backward is not implemented, so a loss reaching the
    histogram raises rather than skipping it; edge tensors come back as given (flowgrad
    recorded nothing: a loss through it ran)."""
    for m in (torch, flow):
        edges = [m.tensor([0.0, 1.0], requires_grad=True), m.tensor([0.0, 0.5, 1.0])]
        w = m.ones(2, requires_grad=True)
        out = m.histogramdd(m.tensor([[0.0, 1.0], [1.0, 0.0]]), edges, weight=w)
        assert out.hist.requires_grad
        assert out.bin_edges[0] is edges[0] and out.bin_edges[1] is edges[1]
        x = m.tensor([[0.0, 1.0], [1.0, 0.0]], requires_grad=True)
        counted = m.histogramdd(x, 2)
        assert counted.hist.requires_grad and counted.bin_edges[0].requires_grad
        with pytest.raises(RuntimeError):
            (counted.hist.sum() + x.sum()).backward()


# ---- nonzero_static --------------------------------------------------------------------------
MIXED = torch.tensor([[0.0, 1.5, 0.0], [-2.0, 0.0, float("nan")]])
NONZERO_CASES = [
    ("fewer", MIXED, {"size": 2}),
    ("padded", MIXED, {"size": 6}),
    ("fill", MIXED, {"size": 5, "fill_value": 7}),
    ("big_fill", MIXED, {"size": 4, "fill_value": 2 ** 40}),
    ("size_zero", MIXED, {"size": 0}),
    ("all_zero", torch.zeros(2, 3, 2), {"size": 3}),
    ("zero_dim_nonzero", torch.tensor(3.0), {"size": 2}),
    ("zero_dim_zero", torch.tensor(0.0), {"size": 2}),
    ("empty", torch.zeros(2, 0, 3), {"size": 2}),
    ("bool", torch.tensor([True, False, True]), {"size": 3, "fill_value": -5}),
    ("int", torch.tensor([[0, 4], [5, 0]]), {"size": 3}),
    ("complex", torch.tensor([1 + 0j, 0j, 1j]), {"size": 4}),
    ("bfloat16", torch.tensor([0.0, 2.0, 0.0, 1.0]).bfloat16(), {"size": 3}),
    ("negative_size", MIXED, {"size": -1}),
    ("float_size", MIXED, {"size": 2.0}),
    ("float_fill", MIXED, {"size": 2, "fill_value": 1.5}),
]


@pytest.mark.parametrize("case", NONZERO_CASES, ids=[c[0] for c in NONZERO_CASES])
def test_nonzero_static_against_torch(case):
    name, x, kw = case
    theirs, torch_error = outcome(lambda: torch.nonzero_static(x, **kw))
    ours, error = outcome(lambda: flow.nonzero_static(_flow(x), **kw))
    assert_same_raise(torch_error, error)
    if error is not None:
        assert type(error) is type(torch_error) and "nonzero_static" in str(error)
        return
    _same_tensor(ours, theirs)
    _same_tensor(_flow(x).nonzero_static(**kw), x.nonzero_static(**kw))


def test_nonzero_static_has_no_gradient():
    x = torch.tensor([0.0, 2.0], requires_grad=True)
    assert torch.nonzero_static(x, size=2).grad_fn is None
    out = flow.nonzero_static(_flow(x).requires_grad_(), size=2)
    assert not out.requires_grad and out.grad_fn is None


def test_nonzero_static_positional_size_refused():
    _, torch_error = outcome(lambda: torch.nonzero_static(MIXED, 2))
    _, error = outcome(lambda: flow.nonzero_static(_flow(MIXED), 2))
    assert type(error) is type(torch_error) is TypeError


# ---- empty_permuted --------------------------------------------------------------------------
SHAPES = [(), (0,), (1,), (1, 3, 5), (5, 3, 1), (1, 0, 5, 1), (2, 3, 4), (2, 0, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_empty_permuted_strides_as_torch(shape):
    for layout in itertools.permutations(range(len(shape))):
        theirs = torch.empty_permuted(shape, layout)
        ours = flow.empty_permuted(shape, layout)
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert ours.stride() == theirs.stride(), (shape, layout)
        assert ours.is_contiguous() == theirs.is_contiguous()
        assert ours.dtype == flow.float32


def test_empty_permuted_options_as_torch():
    for kw in ({"dtype": torch.int32}, {"dtype": torch.float64, "requires_grad": True},
               {"layout": torch.strided, "pin_memory": False}):
        theirs = torch.empty_permuted([2, 3], [1, 0], **kw)
        ours = flow.empty_permuted([2, 3], [1, 0], **_convert_options(kw))
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        assert ours.requires_grad == theirs.requires_grad and ours.stride() == theirs.stride()


def _convert_options(kw):
    names = {torch.int32: flow.int32, torch.float64: flow.float64, torch.strided: flow.strided}
    return {k: names.get(v, v) if not isinstance(v, bool) else v for k, v in kw.items()}


@pytest.mark.parametrize("args", [((2, 3), (0, 0)), ((2, 3), (0,)), ((2, 3), (0, 2)),
                                  ((2, 3), (0, -1)), ((2, -3), (0, 1))], ids=str)
def test_empty_permuted_refuses_as_torch(args):
    _, torch_error = outcome(lambda: torch.empty_permuted(*args))
    _, error = outcome(lambda: flow.empty_permuted(*args))
    assert_same_raise(torch_error, error)
    assert type(error) is type(torch_error) and "empty_permuted" in str(error)


def test_empty_permuted_int_requires_grad_refused():
    _, torch_error = outcome(lambda: torch.empty_permuted((2,), (0,), dtype=torch.int64,
                                                          requires_grad=True))
    _, error = outcome(lambda: flow.empty_permuted((2,), (0,), dtype=flow.int64,
                                                   requires_grad=True))
    assert type(error) is type(torch_error) is RuntimeError


# ---- slice_copy ------------------------------------------------------------------------------
SLICES = [(), (0,), (1, 1, 3), (1, -3, None, 2), (1, 10, 20), (1, 3, 1), (1, -10, 2),
          (-1, 1), (0, None, -1), (2, 1, 4, 3)]


@pytest.mark.parametrize("args", SLICES, ids=str)
def test_slice_copy_against_torch(args):
    def fn(lib, x):
        y = lib.slice_copy(x, *args)
        assert y.is_contiguous()
        return y

    check(fn, (3, 4, 5))


@pytest.mark.parametrize("args", [(1, 1, 3), (2, -4, None, 2), (0, 1, None, 5)], ids=str)
def test_slice_copy_second_order(args):
    gradcheck(lambda lib, x: lib.slice_copy(x, *args) ** 2, (3, 4, 5))


def test_slice_copy_tensor_bound_and_keywords():
    x = torch.arange(12.0).reshape(3, 4)
    theirs = torch.slice_copy(x, dim=1, start=torch.tensor(1), end=3, step=2)
    ours = flow.slice_copy(_flow(x), dim=1, start=flow.tensor(1), end=3, step=2)
    _same_tensor(ours, theirs)


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.slice_copy(x, 1, 0, 2, 0),
    lambda lib, x: lib.slice_copy(x, 1, 0, 2, -1),
    lambda lib, x: lib.slice_copy(x, 2),
    lambda lib, x: lib.slice_copy(x[0, 0], 0),
    lambda lib, x: lib.slice_copy(x, 1, 1.5, 3),
    lambda lib, x: lib.slice_copy(x, 1, True, 3),
], ids=["zero_step", "negative_step", "bad_dim", "zero_dim", "float_start", "bool_start"])
def test_slice_copy_refuses_as_torch(call):
    x = torch.arange(12.0).reshape(3, 4)
    _, torch_error = outcome(lambda: call(torch, x))
    _, error = outcome(lambda: call(flow, _flow(x)))
    assert_same_raise(torch_error, error)
    assert type(error) is type(torch_error) and "slice" in str(error)


# ---- under nn.Graph: each call bins / finds its own data ---------------------------------------
@pytest.mark.parametrize("fn", [
    lambda x: flow.histogramdd(x, [2, 3]),
    lambda x: flow.histogramdd(x, [flow.tensor([0.0, 1.0, 4.0]), flow.tensor([0.0, 5.0])],
                               weight=x[:, 0]),
    lambda x: flow.nonzero_static(x, size=5),
    lambda x: flow.slice_copy(x, 0, 1, None, 2),
], ids=["histogramdd_counts", "histogramdd_edges", "nonzero_static", "slice_copy"])
def test_compiled_calls_see_their_own_data(fn):
    class Step(flow.nn.Graph):
        def build(self, x):
            return fn(x)

    graph = Step()
    for x in (flow.tensor([[0.0, 1.0], [2.0, 0.0], [3.0, 3.0]]),
              flow.tensor([[1.0, 0.0], [0.5, 4.0], [0.0, 0.0]])):
        got, want = graph(x), fn(x)
        got = [got] if isinstance(got, flow.Tensor) else [got[0], *got[1]]
        want = [want] if isinstance(want, flow.Tensor) else [want[0], *want[1]]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_shared_binning_gives_torch_histc():
    """stats.bin_points is torch's one binning kernel: its "guess" method (no search) on
    linspace edges is torch.histc's, for odds.histc/histogram to share."""
    from flowgrad.ops.stats import bin_points, linspace_edges

    rng = np.random.default_rng(8)
    for trial in range(30):
        dtype = (np.float32, np.float64)[trial % 2]
        a = (np.round(rng.standard_normal(300) * 8) / 8).astype(dtype)
        n = int(rng.integers(1, 40))
        edges = linspace_edges(-1.0, 1.0, n + 1, np.dtype(dtype))
        ours = bin_points(np, a.reshape(-1, 1), [edges], method="guess")
        np.testing.assert_array_equal(ours, torch.histc(torch.tensor(a), n, -1.0, 1.0).numpy())


def test_histogram_is_histogramdd_of_one_dim_as_torch():
    """flow.histogram used NumPy's histogram: its edges (NumPy's linspace) differed from
    torch's in most random calls and counts at bin boundaries in some; it is histogramdd's 1-D
    case now, as torch's."""
    rng = np.random.default_rng(1)
    for k in range(120):
        dtype = (np.float32, np.float64)[k % 2]
        x = (rng.standard_normal(rng.integers(1, 50)) * 10 ** rng.uniform(-3, 3)).astype(dtype)
        bins = int(rng.integers(1, 30))
        span = (float(x.min()) - rng.uniform(0, 1), float(x.max()) + rng.uniform(0, 1)) \
            if k % 3 == 0 else None
        w = rng.uniform(0, 1, x.shape).astype(dtype) if k % 5 == 0 else None
        results = [lib.histogram(lib.from_numpy(x), bins, range=span, density=k % 7 == 0,
                                 weight=None if w is None else lib.from_numpy(w))
                   for lib in (torch, flow)]
        (t_hist, t_edges), (f_hist, f_edges) = results
        np.testing.assert_array_equal(f_edges.numpy(), t_edges.numpy())
        np.testing.assert_allclose(f_hist.numpy(), t_hist.numpy(), rtol=1e-6)
        assert f_hist.dtype == flow.float32 if dtype == np.float32 else flow.float64
    assert type(flow.histogram(flow.ones(3), 2)).__name__ == "histogram"
