"""Tensor.untyped_storage(), Tensor.is_nested and flow.from_file against torch's."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import flowgrad as flow

# (name, what is made of x = arange(6.0).reshape(2, 3))
DERIVED = {
    "itself": lambda x: x,
    "a slice": lambda x: x[1:],
    "a transpose": lambda x: x.t(),
    "an expand": lambda x: x[:1].expand(4, 3),
    "a reshape": lambda x: x.reshape(3, 2),
    "detach": lambda x: x.detach(),
    "a clone": lambda x: x.clone(),
    "contiguous of a transpose": lambda x: x.t().contiguous(),
    "an element": lambda x: x[1, 2],
}


def _storage_facts(m, name):
    x = m.arange(6.0).reshape(2, 3)
    y = DERIVED[name](x)
    s, base = y.untyped_storage(), x.untyped_storage()
    return (s.data_ptr() == base.data_ptr(), s.nbytes(), len(s), s.size(), s.element_size(),
            list(s[0:8]), s.tolist()[8:16], str(s.device), y.is_nested)


@pytest.mark.parametrize("name", sorted(DERIVED))
def test_untyped_storage_as_torch(name):
    assert _storage_facts(flow, name) == _storage_facts(torch, name)


def _from_file(m, path, case):
    np.arange(6, dtype=np.float32).tofile(path)
    try:
        if case == "default dtype":
            t = m.from_file(path, size=4)
        elif case == "private write":
            t = m.from_file(path, shared=False, size=6, dtype=m.float32)
            t[0] = 9.0
        elif case == "shared write":
            t = m.from_file(path, shared=True, size=6, dtype=m.float32)
            t[0] = 9.0
        elif case == "too small":
            t = m.from_file(path, size=100)
        elif case == "shared grows the file":
            t = m.from_file(path, shared=True, size=8, dtype=m.float32)
        elif case == "missing file":
            t = m.from_file(path + ".none", size=3)
        elif case == "new shared file":
            t = m.from_file(path + ".new", shared=True, size=3, dtype=m.int32)
            os.remove(path + ".new")
        elif case == "size 0":
            t = m.from_file(path)
        elif case == "int view of the bytes":
            t = m.from_file(path, size=3, dtype=m.int64)
        else:
            t = m.from_file(path, size=2, dtype=m.float64, requires_grad=True)
            (t * t).sum().backward()
            return t.grad.tolist()
    except RuntimeError:
        return RuntimeError
    return t.tolist(), str(t.dtype).split(".")[-1], np.fromfile(path, np.float32).tolist()


@pytest.mark.parametrize("case", ["default dtype", "private write", "shared write", "too small",
                                  "shared grows the file", "missing file", "new shared file",
                                  "size 0", "int view of the bytes", "requires grad"])
def test_from_file_as_torch(case, tmp_path):
    ours = _from_file(flow, str(tmp_path / "flowgrad.bin"), case)
    assert ours == _from_file(torch, str(tmp_path / "torch.bin"), case)


def test_from_file_refuses_an_accelerator():
    with pytest.raises(RuntimeError, match="device"):
        flow.from_file(os.devnull, size=0, device="cuda")
