"""Results' memory as torch's: strides, is_contiguous (also for channels_last), whether the
result shares its input's memory (a view) or is new, and the values of input and result after
an in-place write through the result's flattened reshape (a view of it only where the layout
allows, so a different layout is a different value). One table line a case."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import flowgrad as flow


def _x(m, *shape):
    return m.arange(1.0, math.prod(shape) + 1, dtype=m.float64).reshape(shape)


def _facts(m, build):
    """build(m) -> (input, result): what the result's memory is, then both after a write."""
    x, y = build(m)
    facts = [tuple(y.shape), y.stride(), y.is_contiguous(),
             y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()]
    if y.ndim in (4, 5):
        fmt = m.channels_last if y.ndim == 4 else m.channels_last_3d
        facts.append(y.is_contiguous(memory_format=fmt))
    flat = y.reshape(-1)
    flat.mul_(-1)
    return facts, x.tolist(), y.tolist()


# name: build(m) -> (input, result)
CASES = {
    # einsum with no summed letter: torch's diagonal/permute view of the operand (a write to
    # it reaches the operand); flowgrad's was a new C-order copy
    "einsum_transpose": lambda m: (x := _x(m, 3, 4), m.einsum("ij->ji", x)),
    "einsum_permute": lambda m: (x := _x(m, 2, 3, 4), m.einsum("ijk->kij", x)),
    "einsum_identity": lambda m: (x := _x(m, 3, 4), m.einsum("ij", x)),
    "einsum_diagonal": lambda m: (x := _x(m, 3, 3), m.einsum("ii->i", x)),
    "einsum_diag_permute": lambda m: (x := _x(m, 3, 4, 3), m.einsum("iji->ji", x)),
    "einsum_triple_diag": lambda m: (x := _x(m, 3, 3, 3), m.einsum("iii->i", x)),
    "einsum_ellipsis": lambda m: (x := _x(m, 2, 3, 4), m.einsum("ab...->...ba", x)),
    "einsum_sum": lambda m: (x := _x(m, 3, 4), m.einsum("ij->j", x)),
}


@pytest.mark.parametrize("name", CASES)
def test_result_memory_as_torch(name):
    want, got = _facts(torch, CASES[name]), _facts(flow, CASES[name])
    assert got[0] == want[0], (name, want[0], got[0])
    for w, g in zip(want[1:], got[1:]):
        np.testing.assert_array_equal(np.array(g), np.array(w))


def _einsum_view_grads(m):
    """A write through einsum's view of a result that requires grad: the gradient goes
    through the write to the input, as torch's; a leaf's view is refused."""
    a = _x(m, 3, 3).requires_grad_()
    y = a * 1
    m.einsum("ii->i", y).mul_(m.tensor([2.0, 3.0, 4.0], dtype=m.float64))
    m.einsum("ij->ji", y)[0].add_(m.tensor([5.0, 6.0, 7.0], dtype=m.float64))
    (y * _x(m, 3, 3)).sum().backward()
    with pytest.raises(RuntimeError, match="leaf"):
        m.einsum("ij->ji", a).mul_(2)
    e = a.exp()
    m.einsum("ij->ji", e).add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-?place operation"):
        e.sum().backward()
    return y, a.grad


def test_einsum_view_gradients_as_torch():
    for w, g in zip(_einsum_view_grads(torch), _einsum_view_grads(flow)):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12)
