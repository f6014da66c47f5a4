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
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<scalar_mul_backward>)"


@pytest.mark.parametrize("fn", ["rand_like", "randn_like"])
def test_random_like_of_an_integer_tensor_raises(fn):
    with pytest.raises(RuntimeError, match="needs a floating dtype"):
        getattr(flow, fn)(flow.tensor([1, 2]))
