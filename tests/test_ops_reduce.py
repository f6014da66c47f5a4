"""Reductions, statistics and scans against torch (forward and backward) and by float64
finite differences to second order. One line per case."""
import math
import warnings

import numpy as np
import pytest
import torch
from helpers import Positive, check, gradcheck

import flowgrad as flow

ZEROS = np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [0.5, -2.0, 1.0]])
MODE = np.array([[1.0, 2.0, 1.0, 3.0, 2.0, 1.0], [4.0, 0.5, 0.5, 4.0, 2.0, 3.0]])
TIES = np.array([[1.0, 3.0, 3.0, 0.5], [2.0, 2.0, -1.0, 2.0]])

# (id, fn, *specs): each runs through `check` and `gradcheck` (second order)
CASES = [
    ("sum_all", lambda m, x: m.sum(x), (3, 4)),
    ("sum_neg_dim_keep", lambda m, x: x.sum(-1, keepdim=True), (2, 3, 4)),
    ("sum_tuple", lambda m, x: m.sum(x, (0, 2)), (2, 3, 4)),
    ("mean_tuple_keep", lambda m, x: x.mean((0, -1), keepdim=True), (2, 3, 4)),
    # leading dims summed first, then the rest (ops.summation.add_reduce): a bias's (0, 2, 3)
    ("sum_channel_keep", lambda m, x: x.sum((0, 2, 3), keepdim=True), (2, 3, 2, 2)),
    ("sum_lead_two_then_last", lambda m, x: m.sum(x, (0, 1, 3)), (2, 2, 3, 2)),
    ("mean_channel", lambda m, x: x.mean((0, 2)), (3, 2, 4)),
    ("prod_all", lambda m, x: m.prod(x), (2, 3)),
    ("prod_dim", lambda m, x: x.prod(1, keepdim=True), (3, 4)),
    ("prod_zero", lambda m, x: m.prod(x, 0), ZEROS[:2]),
    ("prod_zeros_all", lambda m, x: m.prod(x), ZEROS[1:]),
    ("var", lambda m, x: m.var(x), (3, 4)),
    ("var_dim_biased", lambda m, x: m.var(x, 1, unbiased=False), (3, 4)),
    ("var_correction", lambda m, x: x.var(dim=(0, 1), correction=2, keepdim=True), (2, 3, 2)),
    ("std", lambda m, x: m.std(x, 0), (4, 3)),
    ("std_correction0", lambda m, x: x.std(dim=-1, correction=0, keepdim=True), (3, 4)),
    ("var_mean", lambda m, x: m.var_mean(x, 1), (3, 4)),
    ("std_mean", lambda m, x: m.std_mean(x, (0, 1), correction=0), (3, 4)),
    ("amax_tuple", lambda m, x: m.amax(x, (0, 2), keepdim=True), (2, 3, 4)),
    ("amin_dim", lambda m, x: x.amin(-1), (3, 4)),
    ("amax_ties", lambda m, x: m.amax(x, 1), TIES),
    ("max_all", lambda m, x: x.max(), (3, 4)),
    ("max_dim", lambda m, x: m.max(x, 1), (3, 4)),
    ("min_dim_keep", lambda m, x: m.min(x, 0, keepdim=True), (3, 4)),
    ("logsumexp", lambda m, x: m.logsumexp(x, 1), (3, 4)),
    ("logsumexp_tuple", lambda m, x: x.logsumexp((0, 2), keepdim=True), (2, 3, 2)),
    ("logsumexp_big", lambda m, x: m.logsumexp(x * 1e4, 0), (3, 2)),
    ("norm_fro", lambda m, x: m.norm(x), (3, 4)),
    ("norm_p1_dim", lambda m, x: m.norm(x, 1, dim=1), (3, 4)),
    ("norm_inf", lambda m, x: m.norm(x, float("inf"), dim=(0, 1)), (3, 4)),
    ("norm_p3_keep", lambda m, x: x.norm(3, dim=0, keepdim=True), (3, 4)),
    ("cumsum", lambda m, x: m.cumsum(x, 1), (3, 4)),
    ("cumsum_neg", lambda m, x: x.cumsum(-3), (3, 2, 2)),
    ("cumprod", lambda m, x: m.cumprod(x, 1), (3, 4)),
    ("cumprod_zeros", lambda m, x: m.cumprod(x, 0), ZEROS),
    ("cummax", lambda m, x: m.cummax(x, 1), (3, 4)),
    ("cummin", lambda m, x: x.cummin(0), (3, 4)),
    ("median_all", lambda m, x: m.median(x), (3, 5)),
    ("median_dim", lambda m, x: m.median(x, 1), (3, 5)),
    ("median_dim_keep", lambda m, x: x.median(0, keepdim=True), (4, 3)),
    ("mode_values", lambda m, x: m.mode(x, 1)[0], MODE),
]

# cases with exact ties: the derivative there is a convention (torch splits or picks an index),
# which one-sided finite differences cannot see; these are compared with torch only
NO_FINITE_DIFFERENCES = {"amax_ties", "mode_values"}
FD_CASES = [c for c in CASES if c[0] not in NO_FINITE_DIFFERENCES]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_against_torch(case):
    name, fn, *specs = case
    check(fn, *specs, atol=1e-4 if "big" in name else 1e-5)


@pytest.mark.parametrize("case", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_finite_differences(case):
    name, fn, *specs = case
    if "big" in name:
        fn, specs = (lambda m, x: m.logsumexp(x * 10, 0)), specs
    gradcheck(fn, *specs)


# integer-valued and index outputs: compared exactly with torch
INDEX_CASES = [
    ("argmax", lambda m, x: m.argmax(x, 1), (3, 4)),
    ("argmin_keep", lambda m, x: x.argmin(0, keepdim=True), (3, 4)),
    ("argmax_all", lambda m, x: m.argmax(x), (3, 4)),
    ("max_indices", lambda m, x: m.max(x, -1).indices, (3, 4)),
    ("all", lambda m, x: m.all(x > -1), (3, 4)),
    ("all_dim", lambda m, x: (x > 0).all(1), (3, 4)),
    ("any_tuple", lambda m, x: m.any(x > 1, (0, 1), keepdim=True), (2, 3, 4)),
    ("count_nonzero", lambda m, x: m.count_nonzero(m.relu(x), 0), (3, 4)),
    ("count_nonzero_all", lambda m, x: m.count_nonzero(m.relu(x)), (3, 4)),
    ("cummax_idx", lambda m, x: m.cummax(x, 1).indices, TIES),
    ("cummin_idx", lambda m, x: m.cummin(x, 0).indices, (4, 3)),
    ("median_idx", lambda m, x: m.median(x, 1).indices, (3, 5)),
    ("mode", lambda m, x: m.mode(m.round(x * 2), 1), (4, 7)),
    ("mode_keep", lambda m, x: m.mode(m.round(x), 0, keepdim=True), (7, 3)),
    ("prod_int", lambda m, x: m.prod((x * 3).long(), 1), (3, 3)),
    ("sum_int_dtype", lambda m, x: m.sum((x * 3).int(), 0).dtype == m.int64, (3, 3)),
]


@pytest.mark.parametrize("case", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_index_outputs(case):
    name, fn, *specs = case
    rng = np.random.default_rng(3)
    x = rng.standard_normal(specs[0]).astype(np.float32) if isinstance(specs[0], tuple) \
        else specs[0].astype(np.float32)
    ours, theirs = fn(flow, flow.tensor(x)), fn(torch, torch.tensor(x))
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    for a, b in zip(ours, theirs):
        if isinstance(b, bool):
            assert a == b
            continue
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_array_equal(np.asarray(a.numpy()), b.numpy())


def test_logsumexp_large_inputs_stay_finite():
    x = np.array([[1e4, 1e4 - 1.0, -1e4], [-1e4, -1e4, -1e4]], np.float32)
    a = flow.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    flow.logsumexp(a, 1).sum().backward()
    torch.logsumexp(b, 1).sum().backward()
    np.testing.assert_allclose(flow.logsumexp(a, 1).detach().numpy(),
                               torch.logsumexp(b, 1).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert math.isinf(flow.logsumexp(flow.tensor([-math.inf, -math.inf]), 0).item())


def test_prod_gradient_with_one_and_two_zeros():
    for row in ([2.0, 0.0, 3.0, 4.0], [2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 1.0]):
        a, b = flow.tensor(row, requires_grad=True), torch.tensor(row, requires_grad=True)
        a.prod().backward()
        b.prod().backward()
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_std_of_constant_has_zero_gradient():
    a, b = flow.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    a.std().backward()
    b.std().backward()
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


ERRORS = [
    ("sum_dim_range", lambda: flow.ones(2, 3).sum(2), IndexError, r"sum.*out of range"),
    ("mean_int", lambda: flow.ones(2, dtype=flow.int64).mean(), RuntimeError,
     r"mean\(\).*floating"),
    ("var_int", lambda: flow.var(flow.ones(3, dtype=flow.int64)), RuntimeError,
     r"var\(\).*floating point"),
    ("var_both", lambda: flow.var(flow.ones(3), unbiased=True, correction=1), RuntimeError,
     r"var\(\): pass either"),
    ("std_dim_range", lambda: flow.std(flow.ones(3), 1), IndexError, r"std.*out of range"),
    ("prod_tuple", lambda: flow.prod(flow.ones(2, 3), (0, 1)), TypeError, r"prod\(\)"),
    ("amax_empty", lambda: flow.amax(flow.ones(0, 3), 0), IndexError, r"amax\(\).*non-zero"),
    ("cumsum_dim", lambda: flow.cumsum(flow.ones(2, 3), 2), IndexError, r"cumsum.*range"),
    ("cummax_dim", lambda: flow.cummax(flow.ones(2, 3), -3), IndexError, r"cummax.*range"),
    ("median_empty", lambda: flow.median(flow.ones(0), 0), IndexError, r"median\(\).*empty"),
    ("mode_dim", lambda: flow.mode(flow.ones(2, 3), 5), IndexError, r"mode.*range"),
    ("logsumexp_dim", lambda: flow.logsumexp(flow.ones(2), 1), IndexError, r"logsumexp"),
    ("norm_p_str", lambda: flow.norm(flow.ones(2), "abc"), RuntimeError, r"norm: p must"),
    ("norm_int", lambda: flow.norm(flow.ones(2, dtype=flow.int64)), RuntimeError,
     r"vector_norm.*floating point.*int64"),
    ("sum_repeated_dim", lambda: flow.sum(flow.ones(2, 3), (1, -1)), RuntimeError,
     r"sum: dim .* multiple times"),
    ("any_dim", lambda: flow.any(flow.ones(2), 3), IndexError, r"any.*out of range"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_arguments(case):
    name, fn, exc, match = case
    with pytest.raises(exc, match=match):
        fn()


def test_positive_inputs_helper_used():
    # norm of strictly positive entries with a fractional order (|x|^p is smooth there)
    gradcheck(lambda m, x: m.norm(x, 2.5, dim=1), Positive((2, 3)))
    check(lambda m, x: m.norm(x, 0.5), Positive((2, 3)))


INDEX_OPS = [
    pytest.param(lambda m, x: m.max(x, 1), (4, 5), id="max_dim"),
    pytest.param(lambda m, x: m.min(x, 0, keepdim=True), (4, 5), id="min_dim_keep"),
    pytest.param(lambda m, x: m.median(x, 1), (4, 5), id="median_dim"),
    pytest.param(lambda m, x: m.mode(x, 1), (4, 5), id="mode"),
    pytest.param(lambda m, x: m.cummax(x, 1), (4, 5), id="cummax"),
    pytest.param(lambda m, x: m.nn.functional.max_pool2d(x, 2, 1, return_indices=True),
                 (2, 3, 5, 6), id="max_pool2d"),
    pytest.param(lambda m, x: m.nn.functional.adaptive_max_pool2d(x, (2, 3), True),
                 (2, 3, 5, 6), id="adaptive_max_pool2d"),
]


@pytest.mark.parametrize("fn,shape", INDEX_OPS)
def test_written_indices_leave_the_gradient(fn, shape):
    """A (values, indices) op's rule reads a private copy of its indices: writing the returned
    indices in place leaves the gradient as the forward saw it, where torch (which saves the
    returned tensor) refuses the backward. flowgrad accepts what torch refuses here."""
    x0 = np.random.default_rng(3).standard_normal(shape)
    grads = {}
    for m, write in ((torch, False), (torch, True), (flow, True)):
        x = m.tensor(x0, requires_grad=True)
        values, indices = fn(m, x)
        if write:
            indices.zero_()
        try:
            (values * m.arange(values.numel(), dtype=values.dtype).reshape(values.shape)
             ).sum().backward()
        except RuntimeError as e:
            assert "modified by an inplace operation" in str(e) and m is torch
            continue
        grads[m, write] = x.grad.numpy()
    assert set(grads) == {(torch, False), (flow, True)}
    np.testing.assert_array_equal(grads[flow, True], grads[torch, False])


@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_of_an_empty_float_tensor_is_nan_with_a_history(name):
    # torch: nan with a grad_fn, whose gradient is the empty tensor (flowgrad's had none, so
    # backward through it raised)
    for m in (torch, flow):
        x = m.zeros(0, dtype=m.float64, requires_grad=True)
        y = getattr(m, name)(x)
        y.backward()
        assert np.isnan(y.item()) and y.grad_fn is not None and tuple(x.grad.shape) == (0,)


def test_empty_tensors_print_their_dtype_as_torchs():
    # no values to tell an int64 or a bool from, so torch names every dtype but the default
    for dtype in ("int64", "bool", "float64", "int32"):
        for shape in ((0,), (0, 3)):
            got = [repr(m.zeros(shape, dtype=getattr(m, dtype))).replace(m.__name__, "m")
                   for m in (torch, flow)]
            assert got[1] == got[0]


@pytest.mark.parametrize("shape,dim", [((0,), -1), ((3, 0, 4), 1), ((1, 0), -1), ((2, 3), 0)])
def test_unique_consecutive_over_an_empty_dim_matches_torch(shape, dim):
    # reshape(n, -1) of a zero-size array raised NumPy's ValueError (reduce_fuzz seed 14023)
    got = []
    for m in (torch, flow):
        r = m.unique_consecutive(m.zeros(shape), return_inverse=True, return_counts=True,
                                 dim=dim)
        got.append([(tuple(t.shape), t.tolist()) for t in r])
    assert got[1] == got[0]


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "amax", "var", "std", "logsumexp",
                                  "norm", "all", "nansum", "cumsum", "cumprod", "cummax",
                                  "logcumsumexp", "softmax", "log_softmax", "matmul", "tril",
                                  "roll", "index_select", "masked_fill", "avg_pool2d",
                                  "one_hot"])
def test_reductions_scans_and_products_of_a_strided_input_are_contiguous(name):
    # torch allocates these outputs C-contiguous, so a .view() of them works; NumPy kept a
    # permuted input's layout and flowgrad's view raised "use .reshape" (program fuzz 9001366)
    a = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    calls = {"norm": lambda t: t.norm(dim=1), "all": lambda t: (t > 0).all(1),
             "cummax": lambda t: t.cummax(1).values, "matmul": lambda t: t @ t.mT,
             "softmax": lambda t: t.softmax(1), "log_softmax": lambda t: t.log_softmax(1),
             "tril": lambda t: t.tril(), "roll": lambda t: t.roll(1, 1)}
    got = []
    for m in (torch, flow):
        calls.update({"index_select": lambda t: t.index_select(1, m.tensor([2, 0])),
                      "masked_fill": lambda t: t.masked_fill(t > 0, 0.0),
                      "avg_pool2d": lambda t: m.nn.functional.avg_pool2d(t, 2),
                      "one_hot": lambda t: m.nn.functional.one_hot((t > 0).long(), 2)})
        t = m.tensor(a).permute(3, 1, 0, 2)
        y = calls.get(name, lambda t: getattr(t, name)(1))(t)
        got.append((y.is_contiguous(), tuple(y.stride()), y.reshape(-1).tolist()))
        y.view(-1)  # raises where the output is not contiguous
    assert got[1][:2] == got[0][:2]
    np.testing.assert_allclose(got[1][2], got[0][2], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["prod", "median", "nanmedian"])
def test_keepdim_true_without_a_dim_is_refused_as_torch(name):
    # torch's reduction of all elements of prod/median/nanmedian takes no keepdim (and dim=None
    # is no int): a TypeError; flowgrad's median ignored keepdim (a 0-d result where the call
    # asked for kept dims) and its prod kept them (found beside out_arg_fuzz seed 8007337)
    for m in (torch, flow):
        x = m.tensor([[1.0, 2.0], [3.0, 4.0]])
        for call in (lambda: getattr(m, name)(x, None, True),
                     lambda: getattr(m, name)(x, keepdim=True),
                     lambda: getattr(x, name)(keepdim=True)):
            with pytest.raises(TypeError):
                call()
    values = flow.median(flow.tensor([[1.0, 2.0], [3.0, 4.0]]), 1, True).values
    assert tuple(values.shape) == (2, 1)  # (an int dim keeps it)


# torch's overloads of all elements take no keepdim, and the dim overloads of prod, max, min,
# median, nanmedian, logsumexp and the softmaxes take no None (F.softmax alone picks a dim)
DIM_CALLS = [
    lambda m, x: m.sum(x, keepdim=True), lambda m, x: x.mean(keepdim=True),
    lambda m, x: m.sum(x, dtype=m.float64, keepdim=True), lambda m, x: m.sum(x, None, True),
    lambda m, x: x.mean(None, True), lambda m, x: m.prod(x, None),
    lambda m, x: x.prod(keepdim=True), lambda m, x: m.max(x, keepdim=True),
    lambda m, x: x.min(None), lambda m, x: m.max(x, dim=None), lambda m, x: x.median(None),
    lambda m, x: m.nanmedian(x, dim=None), lambda m, x: m.median(x, keepdim=True),
    lambda m, x: m.logsumexp(x, None), lambda m, x: x.logsumexp(dim=None, keepdim=True),
    lambda m, x: m.logsumexp(x, ()), lambda m, x: m.logsumexp(x, [], keepdim=True),
    lambda m, x: m.logsumexp(x[:0], ()), lambda m, x: m.softmax(x, None),
    lambda m, x: x.log_softmax(None), lambda m, x: m.special.softmax(x, None),
    lambda m, x: m.nn.functional.softmax(x, None), lambda m, x: m.sum(x, ()),
]


@pytest.mark.parametrize("k", range(len(DIM_CALLS)))
def test_dim_none_and_keepdim_without_dim_as_torch(k):
    outcomes = []
    for m in (torch, flow):
        x = m.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (F.softmax's implicit-dim warning)
                outcomes.append(np.asarray(DIM_CALLS[k](m, x).detach().numpy()))
        except (TypeError, RuntimeError) as error:
            outcomes.append(type(error))
    if isinstance(outcomes[0], type):
        assert outcomes[1] is outcomes[0]
    else:
        assert outcomes[1].shape == outcomes[0].shape
        np.testing.assert_allclose(outcomes[1], outcomes[0], rtol=1e-6)


@pytest.mark.parametrize("call", [
    "x.sum(keepdim=False)", "x.mean(keepdim=False)", "x.prod(keepdim=False)",
    "x.max(keepdim=False)", "x.min(keepdim=True)", "x.median(keepdim=False)",
    "x.nanmedian(keepdim=True)", "t.max(x, None)", "x.prod(None)", "t.logsumexp(x, None)",
    "x.sum(None, False)", "x.sum(dim=None, keepdim=True)", "x.mean(None, True)", "x.max()",
    "x.sum(0, True)", "t.max(x, x)"])
def test_dim_and_keepdim_parse_as_torch(call):
    """keepdim given (True or False) without a dim, and dim=None where the dim overload takes
    an int only, raise torch's TypeError (two helpers' fixes merged: keepdim's default is
    None = not given, dim's NO_DIM = left out); the rest run with torch's shapes."""
    import torch

    results = []
    for t in (torch, flow):
        try:
            out = eval(call, {"t": t, "x": t.ones(2, 3)})
            results.append(tuple(out.shape))
        except TypeError:
            results.append("TypeError")
    assert results[0] == results[1]
