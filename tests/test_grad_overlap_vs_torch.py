"""The gradients autograd.grad returns overlap themselves (a stride 0 over a dim of size > 1:
an expanded tensor) exactly where torch's do, for every row of the op tables. An in-place
write to such a gradient raises in both or in neither: torch's mean backward, for one, gives
a dense tensor (sum_backward / numel), so `g.div_(2)` works on it.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import _outputs, _to, make_arrays
from test_saved_versions_vs_torch import _rows

import flowgrad as flow


def _overlapping(t):
    return any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride()))


def _grads(m, fn, arrays):
    inputs = [_to(m, a, True) for a in arrays]
    wanted = [t for t in inputs if getattr(t, "requires_grad", False)]
    outputs = [o for o in _outputs(fn(m, *inputs)) if getattr(o, "requires_grad", False)]
    if not outputs or not wanted:
        return None
    rng = np.random.default_rng(1)
    loss = sum((o * m.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype)).sum()
               for o in outputs)
    return m.autograd.grad(loss, wanted, allow_unused=True)


@pytest.mark.parametrize(("fn", "specs"), _rows())
def test_gradient_overlaps_itself_as_torch(fn, specs):
    arrays = make_arrays(specs, np.float64, 0)
    ours = _grads(flow, fn, [a.copy() if isinstance(a, np.ndarray) else a for a in arrays])
    theirs = _grads(torch, fn, [a.copy() if isinstance(a, np.ndarray) else a for a in arrays])
    if ours is None:
        assert theirs is None
        return
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert (a is None) == (b is None), f"gradient {i}: present in one only"
        if a is not None:
            assert _overlapping(a) == _overlapping(b), (
                f"gradient {i}: flowgrad strides {a.stride()}, torch {b.stride()} "
                f"(shape {tuple(b.shape)})")
