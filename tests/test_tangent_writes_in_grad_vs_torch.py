"""jvp(grad(f)) where f writes in place a tensor whose tangent was made outside the grad
transform (the jvp input's): forward AD updates that tangent in place, its own write, which
the grad level must not refuse as a write to a captured tensor. Before, the refusal was
caught and the tangent replaced instead of written, so the tangents of views of the tensor
kept the old values: jvp(grad(f)) came out wrong, silently (vmap_fuzz jvp_of_grad seeds
245508, 226844, 364246, 43327). Each row: torch.func's value, and finite differences of
grad(f) agree with it."""
import numpy as np
import pytest
import torch

import flowgrad as flow


def _detached_then_written_twice_through_a_view(m, x, y):
    x.detach_()
    v = x.reshape(1, -1)
    v.add_(y)
    v.tanh_()
    return (x.sin() * 0.3).sum() + (v.cos() * 0.2).sum() + (y.sin() * 0.7).sum()


def _written_under_no_grad_then_view_read(m, x, y):
    v = x[0:1]
    with m.no_grad():
        x.mul_(2.0)
        v.add_(1.0)
    return (v * y).sum() + (x * y).sin().sum()


def _detached_then_written_directly(m, x, y):
    x.detach_()
    x.add_(y)
    x.exp_()
    return (x * y).sum()


CASES = [_detached_then_written_twice_through_a_view, _written_under_no_grad_then_view_read,
         _detached_then_written_directly]


def _jvp_of_grad(m, body, x, y, vx, vy):
    def f(a, b):
        return body(m, a, b)
    args = (m.tensor(x), m.tensor(y))
    tangents = (m.tensor(vx), m.tensor(vy))
    out = m.func.jvp(m.func.grad(f, argnums=(0, 1)), args, tangents)[1]
    return [t.detach().numpy() for t in out]


@pytest.mark.parametrize("body", CASES, ids=lambda f: f.__name__[1:])
def test_jvp_of_grad_writes_the_outer_tangent_in_place(body):
    x, y = np.array([0.4, -0.6]), np.array([0.9, 0.2])
    vx, vy = np.cos(x), np.cos(y)
    ours = _jvp_of_grad(flow, body, x, y, vx, vy)
    theirs = _jvp_of_grad(torch, body, x, y, vx, vy)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)

    def grads(h):
        def f(a, b):
            return body(torch, a, b)
        args = (torch.tensor(x + h * vx), torch.tensor(y + h * vy))
        return torch.func.grad(f, argnums=(0, 1))(*args)
    plus, minus = grads(1e-6), grads(-1e-6)
    for a, p, q in zip(ours, plus, minus):
        np.testing.assert_allclose(a, ((p - q) / 2e-6).numpy(), rtol=1e-5, atol=1e-7)
