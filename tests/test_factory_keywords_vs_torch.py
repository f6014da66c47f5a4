"""The keywords torch's factories take beside the shape and dtype (layout=, pin_memory=,
memory_format=, device=, requires_grad=): the same raise/no-raise as torch for every factory.
pin_memory=True raises as torch's does without an accelerator; a sparse layout raises
NotImplementedError in flowgrad (its factories make strided tensors; torch makes a sparse one
for some and raises for others), where a layout used to be dropped silently."""
from __future__ import annotations

import pytest
import torch
from vs_torch import assert_same_raise, outcome

import flowgrad as flow

ARGS = {"full": ((2,), 1.0), "randint": (0, 3, (2,)), "arange": (3,), "range": (0, 3),
        "linspace": (0, 1, 3), "logspace": (0, 1, 3), "eye": (2,), "tensor": ([1.0],),
        "randperm": (3,), "empty_strided": ((2,), (1,)), "as_tensor": ([1.0],),
        "scalar_tensor": (1.0,), "tril_indices": (2, 2), "triu_indices": (2, 2),
        "normal": (0.0, 1.0, (2,)), "asarray": ([1.0],), "empty_permuted": ((2, 3), (1, 0)),
        "hann_window": (4,), "hamming_window": (4,), "blackman_window": (4,),
        "bartlett_window": (4,), "kaiser_window": (4,)}
LIKE = ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
        "randint_like")
FACTORIES = ["zeros", "ones", "empty", "rand", "randn", *ARGS, *LIKE]
KEYWORDS = [("layout", "strided"), ("pin_memory", False), ("pin_memory", True),
            ("device", "cpu"), ("requires_grad", False), ("requires_grad", True),
            ("memory_format", "contiguous_format"), ("memory_format", "channels_last")]


def _call(T, name, key, value):
    if key in ("layout", "memory_format"):
        value = getattr(T, value)
    args = ARGS.get(name, (2,))
    if name in LIKE:
        args = (T.ones(2),) + ((2.0,) if name == "full_like" else (3,) if name == "randint_like"
                               else ())
    return getattr(T, name)(*args, **{key: value})


@pytest.mark.parametrize("key,value", KEYWORDS, ids=[f"{k}={v}" for k, v in KEYWORDS])
@pytest.mark.parametrize("name", FACTORIES)
def test_factory_keywords_as_torch(name, key, value):
    _, torch_error = outcome(lambda: _call(torch, name, key, value))
    _, error = outcome(lambda: _call(flow, name, key, value))
    assert_same_raise(torch_error, error)


@pytest.mark.parametrize("name", ["zeros", "empty", "zeros_like", "arange", "tensor_pin"])
def test_what_flowgrad_cannot_make_raises(name):
    if name == "tensor_pin":
        with pytest.raises(RuntimeError, match="pin_memory"):
            flow.tensor([1.0], pin_memory=True)
        return
    with pytest.raises(NotImplementedError, match="strided"):
        _call(flow, name, "layout", "sparse_coo")


def test_clone_records_memory_format_and_tensor_flags():
    for T in (torch, flow):
        x = T.arange(24.0).reshape(1, 2, 3, 4)
        assert x.clone(memory_format=T.channels_last).is_contiguous(
            memory_format=T.channels_last)
        assert not x.clone().is_contiguous(memory_format=T.channels_last)
        last = x.contiguous(memory_format=T.channels_last)
        assert last.clone().is_contiguous(memory_format=T.channels_last)
        assert not last.clone(memory_format=T.contiguous_format).is_contiguous(
            memory_format=T.channels_last)
        assert x.is_shared() is False and x.is_quantized is False


@pytest.mark.parametrize("name", LIKE)
def test_like_factories_take_input_by_keyword(name):
    """torch.zeros_like(input=x): flowgrad's parameter was named x, so the keyword failed."""
    shapes = []
    for T in (torch, flow):
        x = T.ones(2, 3)
        extra = {"fill_value": 2.0} if name == "full_like" else \
            {"high": 3} if name == "randint_like" else {}
        shapes.append(tuple(getattr(T, name)(input=x, **extra).shape))
    assert shapes[0] == shapes[1] == (2, 3)


def test_conv_modules_take_device_and_dtype_positionally():
    """torch's Conv2d takes device and dtype tenth and eleventh; flowgrad's took an
    output_padding (the transposed modules') there."""
    for T in (torch, flow):
        conv = T.nn.Conv2d(1, 2, 3, 1, 0, 1, 1, True, "zeros", "cpu", T.float64)
        assert conv.weight.dtype == T.float64
