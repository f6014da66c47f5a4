"""Index, mask and count tensors of every integer dtype against torch: same raise/no-raise,
same values and dtype.

Each op takes only some dtypes for its indices, and NumPy indexes with any integer array:
gather, scatter*, index_select, index_add and index_reduce take int32 and int64;
index_copy, index_fill, take, put and take_along_dim(dim=...) int64 alone (index_fill raises
IndexError); `x[t]` and index_put take int32, int64, uint8 (a mask) and bool; where's
condition is bool or uint8; repeat_interleave's counts int32 or int64 (and keep their dtype);
embedding_bag promotes indices with offsets first. An empty index is not checked by gather.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from vs_torch import assert_same_raise, outcome

import flowgrad as flow

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "bool", "float32"]


def x(T):
    return T.arange(12.0).reshape(3, 4)


def i1(T, dt):
    return T.tensor([1, 0]).to(getattr(T, dt))


def i2(T, dt):
    return T.tensor([[1, 0], [1, 1]]).to(getattr(T, dt))


def _setitem(T, dt):
    t = x(T)
    t[:, i1(T, dt)] = T.tensor(5.0)
    return t


CALLS = {
    "gather": lambda T, dt: T.gather(x(T), 1, i2(T, dt)),
    "gather empty": lambda T, dt: T.gather(x(T), 1, i2(T, dt)[:, :0]),
    "take_along_dim": lambda T, dt: T.take_along_dim(x(T), i2(T, dt), 1),
    "take_along_dim flat": lambda T, dt: T.take_along_dim(x(T), i1(T, dt)),
    "scatter": lambda T, dt: T.zeros(3, 4).scatter(1, i2(T, dt), 1.0),
    "scatter_add": lambda T, dt: T.zeros(3, 4).scatter_add(1, i2(T, dt), T.ones(2, 2)),
    "scatter_reduce": lambda T, dt: T.zeros(3, 4).scatter_reduce(1, i2(T, dt), T.ones(2, 2),
                                                                 "amax"),
    "index_select": lambda T, dt: T.index_select(x(T), 1, i1(T, dt)),
    "index_add": lambda T, dt: x(T).index_add(1, i1(T, dt), T.ones(3, 2)),
    "index_copy": lambda T, dt: x(T).index_copy(1, i1(T, dt), T.ones(3, 2)),
    "index_fill": lambda T, dt: x(T).index_fill(1, i1(T, dt), -1.0),
    "index_reduce": lambda T, dt: x(T).index_reduce(1, i1(T, dt), T.ones(3, 2), "prod"),
    "take": lambda T, dt: T.take(x(T), i1(T, dt)),
    "put": lambda T, dt: x(T).put(i1(T, dt), T.tensor([9.0, 8.0])),
    "getitem": lambda T, dt: x(T)[i1(T, dt)],
    "getitem columns": lambda T, dt: x(T)[:, i1(T, dt)],
    "setitem": _setitem,
    "index_put": lambda T, dt: x(T).index_put((i1(T, dt),), T.tensor(5.0)),
    "where": lambda T, dt: T.where(i1(T, dt), 1.0, 0.0),
    "repeat_interleave": lambda T, dt: T.arange(2.0).repeat_interleave(i1(T, dt)),
    "repeat_interleave counts": lambda T, dt: T.repeat_interleave(i1(T, dt)),
    "embedding": lambda T, dt: T.nn.functional.embedding(i1(T, dt), x(T).t().contiguous()),
    "embedding_bag": lambda T, dt: T.nn.functional.embedding_bag(
        i1(T, dt), x(T).t().contiguous(), T.tensor([0, 1])),
    "embedding_bag offsets": lambda T, dt: T.nn.functional.embedding_bag(
        T.tensor([1, 0]), x(T).t().contiguous(), T.tensor([0, 1]).to(getattr(T, dt))),
    "bincount": lambda T, dt: T.bincount(i1(T, dt)),
    "one_hot": lambda T, dt: T.nn.functional.one_hot(i1(T, dt), 4),
    "masked_fill": lambda T, dt: x(T)[0, :2].masked_fill(i1(T, dt), 0.0),
    "masked_select": lambda T, dt: T.masked_select(x(T)[0, :2], i1(T, dt)),
}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", list(CALLS))
def test_index_dtype_as_torch(name, dt):
    expected, torch_error = outcome(lambda: CALLS[name](torch, dt))
    got, error = outcome(lambda: CALLS[name](flow, dt))
    assert_same_raise(torch_error, error)
    if torch_error is None:
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_index_dtype_message_names_op_and_remedy():
    with pytest.raises(RuntimeError, match=r"take\(\): Expected dtype int64 for index, got "
                                           r"flowgrad.int32; convert it with .long\(\)"):
        flow.take(flow.ones(3), flow.tensor([0], dtype=flow.int32))
    with pytest.raises(IndexError, match="index_fill"):
        flow.ones(3).index_fill(0, flow.tensor([0], dtype=flow.int32), 1.0)
    with pytest.raises(RuntimeError, match=r"where expected condition to be a boolean tensor.*"
                                           r"int64.*\.bool\(\)"):
        flow.where(flow.tensor([1, 0]), 1.0, 0.0)
