"""An op that promotes an operand (float32 * float64, float * int) saves that operand as torch
does: torch promotes inside the kernel and saves the tensor itself, so an in-place write to it
after the op makes the backward raise. flowgrad casts before the op; the cast shares the
operand's version counter (`ops.compare.promoted`), so it raises too, rather than give the
gradient at the values from before the write.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

BINARY = {
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "rdiv": lambda m, a, b: b / a,
    "pow": lambda m, a, b: m.pow(a.abs() + 0.5, b),
    "atan2": lambda m, a, b: m.atan2(a, b),
    "hypot": lambda m, a, b: m.hypot(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b),
    "fmin": lambda m, a, b: m.fmin(a, b),
    "copysign": lambda m, a, b: m.copysign(a, b),
    "xlogy": lambda m, a, b: m.xlogy(a, b.abs() + 1),
    "logaddexp": lambda m, a, b: m.logaddexp(a, b),
    "where_mul": lambda m, a, b: m.where(a > 0, a, b) * b,
    "clamp": lambda m, a, b: m.clamp(a, min=b - 1, max=b + 1),
}
# (dtype of a, dtype of b, whether b requires grad): one of the two is promoted
PAIRS = [("float64", "float32", True), ("float32", "float64", True),
         ("float64", "float32", False), ("float32", "int64", False)]


def _run(m, fn, da, db, b_grad, written):
    a = m.tensor([0.7, -1.3, 2.1], dtype=getattr(m, da), requires_grad=True)
    b = m.tensor([1.5, 2.0, -0.5] if db != "int64" else [2, 1, 3], dtype=getattr(m, db),
                 requires_grad=b_grad)
    y = fn(m, a, b)
    with m.no_grad():
        (a if written == "a" else b).add_(1)
    try:
        y.sum().backward()
    except RuntimeError:
        return "raises"
    return [None if t.grad is None else t.grad.numpy() for t in (a, b)]


@pytest.mark.parametrize("written", ["a", "b"])
@pytest.mark.parametrize("da,db,b_grad", PAIRS)
@pytest.mark.parametrize("name", list(BINARY))
def test_write_to_a_promoted_operand_raises_as_torch(name, da, db, b_grad, written):
    fn = BINARY[name]
    want = _run(torch, fn, da, db, b_grad, written)
    got = _run(flow, fn, da, db, b_grad, written)
    assert (want == "raises") == (got == "raises"), (name, want, got)
    if want != "raises":
        for w, g in zip(want, got):
            assert (w is None) == (g is None)
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=1e-6)
                assert g.dtype == w.dtype


def test_the_promoted_copy_does_not_alias_the_operand():
    """The cast shares the counter only: the operand's values and the op's result are as
    before, and an in-place op that promotes its operand still runs and differentiates."""
    a = flow.tensor([1.0, 2.0], dtype=flow.float32, requires_grad=True)
    b = flow.tensor([3.0, 4.0], dtype=flow.float64, requires_grad=True)
    y = a * 1.0
    y.mul_(b)   # (a float32 result written with a float64 product: torch accepts it)
    y.sum().backward()
    assert a.grad.tolist() == [3.0, 4.0] and b.grad.tolist() == [1.0, 2.0]
    assert b.grad.dtype == flow.float64 and y.dtype == flow.float32
