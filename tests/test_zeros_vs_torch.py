"""Zeros are zeros, not `x * 0`: where a transform or a rule hands out a zero (an unused
input's gradient, a tangent nothing carried, the other outputs' cotangents of a jacrev
row, a constant's derivative), torch makes `zeros_like`, and `x * 0` would be nan wherever
x is inf or nan. Each case puts an inf or a nan where such a zero is made and compares
values and gradients (nan in the same places) with torch's."""
import numpy as np
import pytest
import torch

import flowgrad as flow

INF, NAN = float("inf"), float("nan")


def _t(m, values):
    return m.tensor(values, dtype=m.float64)


def _leaf_grad(m, fn, values, dy=None):
    """(fn(x), x.grad or None) after fn(x).backward(dy)."""
    x = _t(m, values).requires_grad_()
    y = fn(m, x)
    y.backward(m.ones_like(y) if dy is None else _t(m, dy))
    return [y, x.grad]


CASES = {
    "jvp_of_a_detached_overflow": lambda m: m.func.jvp(
        lambda a: a.exp().detach(), (_t(m, [1.0, 800.0]),), (_t(m, [1.0, 1.0]),)),
    "jacfwd_two_inputs_one_inf": lambda m: m.func.jacfwd(
        lambda a, b: a.sin() + b.sum(), argnums=(0, 1))(_t(m, [1.0, 2.0]), _t(m, [INF, 1.0])),
    "jacrev_two_outputs": lambda m: m.func.jacrev(
        lambda a: (a * INF, a.sin()))(_t(m, [1.0, 2.0])),
    "vjp_of_an_output_without_grad": lambda m: m.func.vjp(
        lambda a: a.detach(), _t(m, [INF, NAN]))[1](_t(m, [1.0, 1.0])),
    "grad_of_an_unused_input": lambda m: m.func.grad(
        lambda a, b: a.sin().sum(), argnums=1)(_t(m, [1.0, 2.0]), _t(m, [INF, NAN])),
    "vmap_grad_of_an_unused_input": lambda m: m.func.vmap(m.func.grad(
        lambda a, b: a.sin().sum(), argnums=1))(_t(m, [[1.0], [2.0]]), _t(m, [[INF], [NAN]])),
    "vmap_grad_of_a_constant": lambda m: m.func.vmap(m.func.grad(
        lambda a: (a.detach() * 2).sum()))(_t(m, [[INF, 1.0], [NAN, 2.0]])),
    "angle_of_real_with_inf_dy": lambda m: _leaf_grad(
        m, lambda m, x: x.angle(), [1.0, -2.0], [INF, NAN]),
    "vector_norm_ord_0": lambda m: _leaf_grad(
        m, lambda m, x: m.linalg.vector_norm(x, 0), [1.0, 0.0], INF),
    "matrix_power_0_of_inf": lambda m: _leaf_grad(
        m, lambda m, x: m.linalg.matrix_power(x.reshape(2, 2), 0), [1.0, INF, NAN, 3.0]),
    "vander_N_1_of_inf": lambda m: [m.vander(_t(m, [1.0, INF, NAN]).requires_grad_(), N=1)],
}


def _arrays(out):
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in _arrays(o)]
    return [None if out is None else np.asarray(out.detach().numpy())]


@pytest.mark.parametrize("name", sorted(CASES))
def test_zeros_handed_out_are_zeros_as_torch(name):
    ours, theirs = CASES[name](flow), CASES[name](torch)
    if name.startswith("vander"):  # a constant: torch's ones, outside the graph
        assert ours[0].requires_grad == theirs[0].requires_grad
    ours, theirs = _arrays(ours), _arrays(theirs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert (a is None) == (b is None), (a, b)
        if a is not None:
            np.testing.assert_array_equal(a, b)  # nan where torch's nan, and nowhere else
