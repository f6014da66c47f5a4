"""Edge values against torch: infinities, NaNs and signed zeros through lerp's two formulas,
remainder's zero results, and the dtypes round's decimals= refuses. Values are compared with
their signs (a zero's too) and NaN positions."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from vs_torch import assert_same_raise, outcome

import flowgrad as flow

NAN, INF = float("nan"), float("inf")
EDGES = [-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, NAN, INF, -INF, 3.75]

CALLS = {
    "lerp small weight": lambda T, x: T.lerp(x, T.zeros_like(x), 0.25),
    "lerp half weight": lambda T, x: T.lerp(x, T.zeros_like(x), 0.5),
    "lerp weight 1": lambda T, x: T.lerp(x, T.ones_like(x) * 3, 1.0),
    "lerp large weight": lambda T, x: T.lerp(T.zeros_like(x), x, 0.75),
    "lerp negative weight": lambda T, x: T.lerp(x, T.ones_like(x), -0.75),
    "lerp tensor weight": lambda T, x: T.lerp(x, T.zeros_like(x),
                                              T.linspace(-1, 2, x.numel())),
    "lerp float64": lambda T, x: T.lerp(x.double(), T.zeros_like(x).double(), 0.7),
    "method lerp_": lambda T, x: x.clone().lerp_(T.zeros_like(x), 0.9),
    "remainder by negative": lambda T, x: T.remainder(x, -1.5),
    "remainder by positive": lambda T, x: T.remainder(x, 1.5),
    "remainder float64": lambda T, x: T.remainder(x.double(), -0.5),
    "x % y": lambda T, x: x % T.full_like(x, -2.5),
    "round int decimals": lambda T, x: T.round(T.tensor([15, 25]), decimals=-1),
    "round int": lambda T, x: T.round(T.tensor([15, 25])),
    "round decimals": lambda T, x: T.round(x, decimals=1),
    "unary plus of bool": lambda T, x: +(x > 0), "positive of bool": lambda T, x: T.positive(x > 0),
    "unary plus": lambda T, x: +x,
}


@pytest.mark.parametrize("name", list(CALLS))
def test_edge_values_as_torch(name):
    expected, torch_error = outcome(lambda: CALLS[name](torch, torch.tensor(EDGES)))
    got, error = outcome(lambda: CALLS[name](flow, flow.tensor(EDGES)))
    assert_same_raise(torch_error, error)
    if torch_error is None:
        e, g = expected.numpy(), got.numpy()
        assert g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=2e-7, atol=0)
        finite = ~np.isnan(e)
        np.testing.assert_array_equal(np.signbit(g[finite]), np.signbit(e[finite]))


def test_lerp_gradients_through_both_formulas():
    """The weight picks the formula per element; the gradients are those of the line."""
    x = flow.tensor([1.0, -2.0, 0.5, 3.0], dtype=flow.float64, requires_grad=True)
    end = flow.tensor([0.5, 1.0, -1.0, 2.0], dtype=flow.float64, requires_grad=True)
    weight = flow.tensor([0.1, 0.5, 0.9, -0.7], dtype=flow.float64, requires_grad=True)
    assert flow.autograd.gradcheck(flow.lerp, (x, end, weight))
    assert flow.autograd.gradgradcheck(flow.lerp, (x, end, weight))
    for w in (0.25, 0.75):
        assert flow.autograd.gradcheck(lambda a, b, w=w: flow.lerp(a, b, w), (x, end))
