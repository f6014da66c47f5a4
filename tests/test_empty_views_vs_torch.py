"""The gradient through a view with no elements, under create_graph, against torch.

torch regenerates a view after an in-place write by as_strided, and as_strided's gradient for
no elements is zeros with no history. So `autograd.grad(f(v), base, create_graph=True)`
through an empty view v that was regenerated (its base written, or v itself) gives a result
that does not require grad; a fresh view's gradient (its own op's) does. flowgrad's
regenerated views replayed their chain and always required grad (program_fuzz 1306608,
1414738, and about a third of its other hits past the tested range). The values were
already the same zeros.
"""
from __future__ import annotations

import pytest
import torch

import flowgrad as flow

VIEWS = {
    "narrow": lambda t: t.narrow(0, 2, 0),
    "slice": lambda t: t[1:1],
    "narrow then transpose": lambda t: t.narrow(1, 0, 0).t(),
    "as_strided": lambda t: t.as_strided((0, 3), (3, 1), 6),
}
WRITES = {
    "none": lambda t, v: None,
    "base scaled": lambda t, v: t.mul_(2),
    "base masked_fill_": lambda t, v: t.masked_fill_(t > 0, 1.5),
    "base row set": lambda t, v: t.__setitem__(0, 1.0),
    "the view itself": lambda t, v: v.relu_(),
    "another view": lambda t, v: t[0].add_(1.0),
}


def _gradient(m, view, write):
    x = m.tensor([[0.2, -0.5, 1.1], [0.7, -1.3, 0.4], [1.5, 0.3, -0.8]], dtype=m.float64,
                 requires_grad=True)
    t = x * 1.0
    v = VIEWS[view](t)
    WRITES[write](t, v)
    g, = m.autograd.grad((v.tanh() * v).sum(), [t], create_graph=True)
    return g.tolist(), g.requires_grad, g.grad_fn is not None


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_the_gradient_through_an_empty_view_has_torchs_history(view, write):
    assert _gradient(flow, view, write) == _gradient(torch, view, write)


def test_the_table_has_both_answers():
    """A guard on the table: some gradients require grad (a fresh view's), some not."""
    answers = {_gradient(torch, v, w)[1] for v in VIEWS for w in WRITES}
    assert answers == {False, True}
