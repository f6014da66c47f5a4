"""DLPack exchange with torch and NumPy: memory shared both ways, torch's refusals."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int8", "bool", "complex64"])
def test_shared_both_ways(dtype):
    theirs = torch.from_numpy(np.arange(6).reshape(2, 3).astype(dtype))
    ours = flow.from_dlpack(theirs.T)  # a strided view travels as it is
    assert ours.dtype.name == dtype and tuple(ours.shape) == (3, 2)
    np.testing.assert_array_equal(ours.numpy(), theirs.T.numpy())
    if dtype != "bool":
        ours[0, 1] = 5
        assert theirs[1, 0].item() == 5  # the same memory
    mine = flow.arange(4)
    back = torch.from_dlpack(mine)
    back[2] = 9
    assert mine.tolist() == [0, 1, 9, 3] and np.from_dlpack(mine).tolist() == [0, 1, 9, 3]


def test_capsules_and_refusals():
    assert flow.from_dlpack(torch.utils.dlpack.to_dlpack(torch.arange(3))).tolist() == [0, 1, 2]
    assert torch.utils.dlpack.from_dlpack(flow.to_dlpack(flow.ones(2))).tolist() == [1.0, 1.0]
    assert flow.utils.dlpack.from_dlpack is flow.from_dlpack
    for m in (torch, flow):  # as torch: no export of a tensor that requires grad
        with pytest.raises(BufferError, match="require gradient"):
            m.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(RuntimeError, match="from_dlpack"):
        flow.from_dlpack(torch.ones(2, dtype=torch.bfloat16))


def test_copy_and_device_keywords():
    source = torch.zeros(3)
    copied = flow.from_dlpack(source, copy=True, device="cpu")
    copied += 1
    assert source.tolist() == [0.0, 0.0, 0.0] and copied.tolist() == [1.0, 1.0, 1.0]
    shared = flow.from_dlpack(source, copy=False)
    shared += 2
    assert source.tolist() == [2.0, 2.0, 2.0]
