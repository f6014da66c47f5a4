"""Tensor repr matches torch's text, but for the module name."""
import numpy as np
import pytest
import torch

import flowgrad as flow

VALUES = [
    [0.0, 1.0], [-1.0, 2.0], [0.001, 2.0], [0.6931, 1000.6932], [1.0, 2000.0], [1e9, 1.0],
    [0.0, 0.0], [1e-5, 0.5], [1.5, -2.5], [float("nan"), 1.5, float("inf")],
    [[3.0, -1.0], [-1.0, 2.0]], [[0.1234, -5.6789], [10.5, 0.0]], 27.0, [1, -20, 300],
    [True, False], [[[1.0]]],
]


@pytest.mark.parametrize("value", VALUES, ids=[str(i) for i in range(len(VALUES))])
def test_repr_matches_torch(value):
    assert repr(flow.tensor(value)) == repr(torch.tensor(value))


@pytest.mark.parametrize("dtype", ["float64", "float16", "int32", "uint8"])
def test_repr_names_non_default_dtypes_like_torch(dtype):
    a = np.array([1, 2], dtype=dtype)
    ours = repr(flow.tensor(a))
    theirs = repr(torch.tensor(a)).replace("torch.", "flowgrad.")
    assert ours == theirs


def test_repr_shows_requires_grad_and_grad_fn():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<MulBackward0>)"


@pytest.mark.parametrize("fn", ["rand_like", "randn_like"])
def test_random_like_of_an_integer_tensor_raises(fn):
    with pytest.raises(RuntimeError, match="needs a floating dtype"):
        getattr(flow, fn)(flow.tensor([1, 2]))


_RNG = np.random.default_rng(0)
LONG = [  # wrapped rows, summarized tensors, widths chosen from the values shown
    np.arange(30.0), np.arange(30.0) * 1.5, np.linspace(0, 1, 25), _RNG.standard_normal((3, 12)),
    _RNG.standard_normal((2, 3, 11)), np.arange(40), np.arange(100) * 1000,
    _RNG.standard_normal(17) * 1e-5, np.arange(2000.0), _RNG.standard_normal((50, 50)),
    np.arange(1001), _RNG.standard_normal((2, 1001)), _RNG.standard_normal((7, 8, 9)),
    np.array([np.nan, -np.inf, 1e-3, 123456.0]), np.zeros((2, 3)), np.arange(12).reshape(3, 4) > 5,
    (_RNG.standard_normal(30) + 1j * _RNG.standard_normal(30)).astype(np.complex64),
    np.array(3.25), np.array(-1e-7), np.arange(-5, 5, dtype=np.int8),
]
OPTIONS = [{}, {"precision": 2}, {"precision": 6}, {"sci_mode": True}, {"sci_mode": False},
           {"threshold": 10}, {"threshold": 10, "edgeitems": 1}, {"linewidth": 40},
           {"profile": "short"}, {"profile": "full"}, {"threshold": 5, "edgeitems": 0}]


@pytest.fixture
def default_printoptions():
    yield
    flow.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


@pytest.mark.parametrize("options", OPTIONS, ids=[str(o) for o in OPTIONS])
def test_long_tensors_and_print_options_match_torch(options, default_printoptions):
    flow.set_printoptions(**options)
    torch.set_printoptions(**options)
    for value in LONG:
        value = value.astype(np.float32) if value.dtype == np.float64 else value
        ours = repr(flow.tensor(value))
        theirs = repr(torch.tensor(value)).replace("torch.", "flowgrad.")
        assert ours == theirs, f"{value.dtype} {value.shape}\n{ours}\n{theirs}"


def test_a_suffix_past_linewidth_goes_on_its_own_line_as_torch(default_printoptions):
    value = np.linspace(0, 1, 8)  # float64: a dtype suffix, and requires_grad
    ours = repr(flow.tensor(value, requires_grad=True))
    theirs = repr(torch.tensor(value, requires_grad=True)).replace("torch.", "flowgrad.")
    assert ours == theirs and "\n" in ours
