"""The in-place random fills torch's tensors have (exponential_, cauchy_, log_normal_,
geometric_, random_, bernoulli_, Tensor.bernoulli), flow.poisson, and the size/offset
properties (itemsize, nbytes, storage_offset), against torch.

Draws come from different generators, so values are compared as distributions: flowgrad's
and torch's samples of 20,000 draws must agree by a two-sample Kolmogorov-Smirnov distance
(scipy's ks_2samp p-value above 1e-4), plus the support, dtype and the errors torch raises."""
from __future__ import annotations

import graph_helpers
import numpy as np
import pytest
import torch
from scipy import stats

import flowgrad as flow

N = 20_000

# (method, args, dtype name): each a sample compared with torch's
SAMPLERS = [
    ("exponential_", (), "float32"),
    ("exponential_", (2.5,), "float64"),
    ("cauchy_", (), "float32"),
    ("cauchy_", (1.0, 0.5), "float64"),
    ("log_normal_", (), "float32"),
    ("log_normal_", (0.0, 0.5), "float64"),
    ("geometric_", (0.3,), "float32"),
    ("geometric_", (0.7,), "int64"),
    ("geometric_", (0.2,), "int32"),
    ("random_", (3, 9), "float32"),
    ("random_", (10,), "int64"),
    ("random_", (), "int8"),
    ("random_", (), "uint8"),
    ("random_", (), "bool"),
    ("random_", (), "float16"),
    ("random_", (-5, 5), "int16"),
    ("bernoulli_", (), "float32"),
    ("bernoulli_", (0.2,), "float64"),
    ("bernoulli_", (0.7,), "int64"),
    ("bernoulli_", (0.4,), "bool"),
]


def _sample(module, method, args, dtype, seed):
    module.manual_seed(seed)
    t = module.zeros(N, dtype=getattr(module, dtype))
    out = getattr(t, method)(*args)
    assert out is t
    return t


@pytest.mark.parametrize("method,args,dtype", SAMPLERS)
def test_sampler_matches_torchs_distribution(method, args, dtype):
    ours = _sample(flow, method, args, dtype, 0)
    theirs = _sample(torch, method, args, dtype, 0)
    assert ours.dtype.name == str(theirs.dtype).split(".")[1]
    a = ours.numpy().astype(np.float64)
    b = theirs.numpy().astype(np.float64)
    if method in ("exponential_", "log_normal_"):
        assert a.min() > 0
    elif method != "cauchy_":  # counts: integers, within torch's bounds
        assert (a == np.round(a)).all() and a.min() >= min(b.min(), 1 if method ==
                                                            "geometric_" else 0)
    if method == "random_" and args:
        low, high = (0, args[0]) if len(args) == 1 else args
        assert low <= a.min() and a.max() < high
    p = stats.ks_2samp(a, b).pvalue
    assert p > 1e-4, f"{method}{args} {dtype}: KS p={p:.2g}"


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_random_without_bounds_reaches_the_dtypes_range(dtype):
    """random_() on int64 draws up to 2**63 - 1 and on float64 up to 2**53, as torch's."""
    x = flow.zeros(2000, dtype=getattr(flow, dtype)).random_().numpy()
    top = 2.0 ** 63 if dtype == "int64" else 2.0 ** 53
    assert x.max() > top / 4 and x.max() <= top and (x == np.round(x)).all()


@pytest.mark.parametrize("method", ["exponential_", "cauchy_", "log_normal_", "geometric_",
                                    "random_", "bernoulli_"])
def test_sampler_is_seeded_and_bumps_the_version(method):
    args = (0.5,) if method == "geometric_" else ()
    flow.manual_seed(5)
    a = getattr(flow.empty(50), method)(*args).numpy()
    flow.manual_seed(5)
    x = flow.empty(50)
    before = x._version
    b = getattr(x, method)(*args).numpy()
    np.testing.assert_array_equal(a, b)
    assert x._version == before + 1
    g = flow.Generator().manual_seed(5)
    flow.manual_seed(6)
    np.testing.assert_array_equal(getattr(flow.empty(50), method)(*args, generator=g).numpy(), a)


# (call, the tensor it is made on): each raises in torch and in flowgrad, the same exception
ERRORS = [
    (lambda t: t.exponential_(0), "float32"),
    (lambda t: t.exponential_(-1.0), "float32"),
    (lambda t: t.exponential_(), "int64"),
    (lambda t: t.cauchy_(0.0, 0.0), "float32"),
    (lambda t: t.cauchy_(), "bool"),
    (lambda t: t.log_normal_(1.0, 0.0), "float32"),
    (lambda t: t.log_normal_(), "int64"),
    (lambda t: t.geometric_(0), "float32"),
    (lambda t: t.geometric_(1), "float32"),
    (lambda t: t.geometric_(0.5), "bool"),
    (lambda t: t.random_(5, 3), "float32"),
    (lambda t: t.random_(-1), "int64"),
    (lambda t: t.random_(0, 1000), "int8"),
    (lambda t: t.random_(-200, 0), "int8"),
    (lambda t: t.random_(-1, 5), "uint8"),
    (lambda t: t.random_(0, 3), "bool"),
    (lambda t: t.random_(0, 70000), "float16"),
    (lambda t: t.bernoulli_(1.5), "float32"),
    (lambda t: t.bernoulli_(-0.1), "float32"),
    (lambda t: t.bernoulli_(t.new_tensor([0.5, 1.5, 0.0])), "float32"),
    (lambda t: t.bernoulli_(t.new_tensor([0.5, float("nan"), 0.0])), "float64"),
    (lambda t: (t - 0.5).bernoulli(), "float32"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_bad_arguments_raise_as_torch_and_write_nothing(case):
    call, dtype = ERRORS[case]
    with pytest.raises(Exception) as theirs:
        call(torch.zeros(3, dtype=getattr(torch, dtype)))
    x = flow.zeros(3, dtype=getattr(flow, dtype))
    before = x._version
    with pytest.raises(type(theirs.value)):
        call(x)
    assert x._version == before and not x.numpy().any()


def test_leaf_requiring_grad_refuses_and_a_filled_tensor_gets_zero_gradient():
    for module in (torch, flow):
        with pytest.raises(RuntimeError, match="leaf"):
            module.zeros(2, requires_grad=True).exponential_()
    x = flow.ones(3, requires_grad=True)
    y = x * 2
    y.cauchy_()
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3, np.float32))
    tx = torch.ones(3, requires_grad=True)
    ty = tx * 2
    ty.cauchy_()
    (ty * 3).sum().backward()
    np.testing.assert_array_equal(tx.grad.numpy(), x.grad.numpy())


def test_bernoulli_with_probabilities():
    p = [0.0, 1.0, 0.5]
    for module in (torch, flow):
        x = module.zeros(4000, 3).bernoulli_(module.tensor(p))
        assert x.shape == (4000, 3) and x[:, 0].sum() == 0 and x[:, 1].sum() == 4000
        assert abs(float(x[:, 2].mean()) - 0.5) < 0.05
        rows = x[:, 2].numpy()
        assert 0 < rows.sum() < len(rows)  # one draw per element, not one per column
        assert module.zeros(5, dtype=module.bool).bernoulli_(module.ones(5)).all()
        y = module.zeros(2, 3, dtype=module.float64).bernoulli(1.0)
        assert y.dtype == module.float64 and y.shape == (2, 3) and y.sum() == 6
        assert module.tensor([0.0, 1.0]).bernoulli().tolist() == [0.0, 1.0]


def test_fills_inside_nn_graph_draw_anew_as_eagerly():
    def step(x):
        return (x + flow.empty(4).exponential_(2.0), x + flow.empty(4).random_(0, 100),
                x * flow.empty(4).bernoulli_(0.5), x + flow.empty(4).log_normal_())

    graph_helpers.assert_draws_as_eager(step, flow.zeros(4))


def test_poisson_against_torch():
    rates = [0.5, 3.0, 20.0]
    for dtype in ("float32", "float64"):
        flow.manual_seed(0)
        torch.manual_seed(0)
        ours = flow.poisson(flow.tensor(rates, dtype=getattr(flow, dtype)).expand(N, 3))
        theirs = torch.poisson(torch.tensor(rates, dtype=getattr(torch, dtype)).expand(N, 3))
        assert ours.dtype.name == dtype
        for i in range(3):
            assert stats.ks_2samp(ours.numpy()[:, i], theirs.numpy()[:, i]).pvalue > 1e-4
    for bad in ([-1.0], [float("nan")]):
        with pytest.raises(RuntimeError, match="non-negative"):
            torch.poisson(torch.tensor(bad))
        with pytest.raises(RuntimeError, match="non-negative"):
            flow.poisson(flow.tensor(bad))
    with pytest.raises(NotImplementedError):
        flow.poisson(flow.tensor([1, 2]))


VIEWS = [
    lambda m: m.arange(6).view(2, 3)[1, 1:],
    lambda m: m.arange(12.0).reshape(3, 4).t()[2:],
    lambda m: m.arange(12.0).reshape(3, 4)[:, 1].unsqueeze(0),
    lambda m: m.arange(12.0).reshape(3, 4)[1:, ::2],
    lambda m: m.arange(6.0)[3:].clone(),
    lambda m: m.arange(6.0).expand(2, 6)[1, 2:],
    lambda m: m.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1)[1],
    lambda m: m.arange(8, dtype=m.float64).view(m.int32)[3:],
    lambda m: m.ones(3, 4, dtype=m.float16).diagonal(1),
    lambda m: m.arange(10.0).narrow(0, 4, 3).unfold(0, 2, 1),
]


@pytest.mark.parametrize("case", range(len(VIEWS)))
def test_storage_offset_nbytes_itemsize_as_torch(case):
    ours, theirs = VIEWS[case](flow), VIEWS[case](torch)
    assert ours.storage_offset() == theirs.storage_offset()
    assert (ours.nbytes, ours.itemsize) == (theirs.nbytes, theirs.itemsize)


# random draws whose parameters torch refuses: a negative or nan std, a nan or infinite bound
REFUSED_DRAWS = [
    lambda m: m.normal(m.zeros(2), m.tensor([-1.0, 1.0])),
    lambda m: m.normal(0.0, -1.0, size=(2,)),
    lambda m: m.normal(m.zeros(2), m.tensor([float("nan"), 1.0])),
    lambda m: m.zeros(2).normal_(0.0, float("nan")),
    lambda m: m.zeros(2).uniform_(0.0, float("nan")),
    lambda m: m.zeros(2).uniform_(float("-inf"), 0.0),
]


@pytest.mark.parametrize("case", range(len(REFUSED_DRAWS)))
def test_draws_with_bad_parameters_raise_as_torch(case):
    with pytest.raises(RuntimeError):
        REFUSED_DRAWS[case](torch)
    with pytest.raises(RuntimeError):
        REFUSED_DRAWS[case](flow)


@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool", "float32"])
@pytest.mark.parametrize("name", ["uniform_", "normal_", "exponential_", "cauchy_",
                                  "log_normal_", "geometric_", "bernoulli_", "random_"])
def test_random_fill_of_each_dtype_raises_as_torch(name, dtype):
    """The exception class of each in-place draw into each dtype is torch's (uniform_ and
    normal_ of an integer tensor: NotImplementedError, its dtype dispatch's)."""
    kinds = []
    for m in (torch, flow):
        try:
            getattr(m.zeros(3, dtype=getattr(m, dtype)), name)()
            kinds.append(None)
        except Exception as error:  # noqa: BLE001 - the class is what is compared
            kinds.append(type(error).__name__)
    assert kinds[1] == kinds[0]
