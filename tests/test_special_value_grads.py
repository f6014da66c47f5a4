"""Gradients at special inputs (nan, +-inf, +-0, the domain's edges) against torch, float64:
the value, the first derivative and the second (through create_graph). Inputs are tiled to
64 values, so torch takes its vectorized CPU kernels throughout (its scalar tail can differ
at nan: elu, hardtanh, hardshrink)."""
import math

import numpy as np
import pytest
import torch

import flowgrad as flow

NAN, INF = math.nan, math.inf
POINTS = [NAN, INF, -INF, 0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 0.2, 1.2, 7.0]
UNARY = {
    "elu": lambda m, x: m.nn.functional.elu(x, 0.8),
    "celu": lambda m, x: m.nn.functional.celu(x, 0.8),
    "selu": lambda m, x: m.nn.functional.selu(x),
    "hardtanh": lambda m, x: m.nn.functional.hardtanh(x),
    "relu6": lambda m, x: m.nn.functional.relu6(x),
    "hardshrink": lambda m, x: m.nn.functional.hardshrink(x),
    "softshrink": lambda m, x: m.nn.functional.softshrink(x),
    "logit": lambda m, x: m.logit(x),
    "logit_eps": lambda m, x: m.logit(x, 0.1),
}
BINARY = {
    "copysign": lambda m, a, b: m.copysign(a, b),
    "logaddexp": lambda m, a, b: m.logaddexp(a, b),
    "logaddexp2": lambda m, a, b: m.logaddexp2(a, b),
    "hypot": lambda m, a, b: m.hypot(a, b),
    "xlogy": lambda m, a, b: m.xlogy(a, b),
    "nextafter": lambda m, a, b: m.nextafter(a, b),
}
# second derivatives left apart: torch's div rule gives 0 * inf = nan where flowgrad's
# masked one gives 0 (logit outside its domain, copysign at x == 0)
NO_SECOND = {"logit", "logit_eps", "copysign"}


def _run(m, fn, xs, second):
    n = xs[0].size
    ins = [m.tensor(x, requires_grad=True) for x in xs]
    y = fn(m, *ins)
    dy = m.tensor(np.linspace(0.3, 1.7, n))
    gs = m.autograd.grad(y, ins, dy, create_graph=second, allow_unused=True,
                         materialize_grads=True)
    out = [y.detach().numpy()] + [g.detach().numpy() for g in gs]
    if second:
        v = m.tensor(np.linspace(-1.1, 0.9, n))
        s = sum((g * v).sum() for g in gs if g.requires_grad)
        if isinstance(s, int):
            return out
        out += [h.numpy() for h in m.autograd.grad(s, ins, allow_unused=True,
                                                   materialize_grads=True)]
    return out


def _compare(fn, xs, second):
    want = _run(torch, fn, xs, second)
    got = _run(flow, fn, xs, second)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-14, equal_nan=True,
                                   err_msg=f"output {k} (0: value, then d, then dd)")


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_points(name):
    x = np.resize(np.array(POINTS), 64)
    _compare(UNARY[name], [x], name not in NO_SECOND)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_special_points(name):
    pts = [NAN, INF, -INF, 0.0, -0.0, 0.5, -1.0, 2.0]
    a = np.array([p for p in pts for _ in pts])
    b = np.array([q for _ in pts for q in pts])
    _compare(BINARY[name], [a, b], name not in NO_SECOND)


def test_elu_second_derivative_at_zero_is_zero():
    # torch's elu_double_backward masks with x < 0: 0 at x == 0 (the kink)
    x = flow.tensor([0.0, -1.0], requires_grad=True, dtype=flow.float64)
    (g,) = flow.autograd.grad(flow.nn.functional.elu(x).sum(), [x], create_graph=True)
    (h,) = flow.autograd.grad(g.sum(), [x])
    assert h[0].item() == 0 and h[1].item() == pytest.approx(math.exp(-1))
