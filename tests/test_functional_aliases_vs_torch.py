"""torch.autograd.functional (jacobian, hessian, hvp, jvp; loops, vectorized, forward mode)
over functions reading `.data`, detaching and writing in place, against torch.

Its forward mode is torch's legacy vmap and a plain dual level, not functorch, so `.data`
and `detach_()` there are the plain ones: no tangent and no graph. flowgrad stripped the
innermost level alone, as inside func.jvp, so autograd inside still differentiated
through them: hessian(..., outer_jacobian_strategy="forward-mode") of sum(x * x.data) was
1 where it is 0, with no error.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow


def _poly(m, x):
    return (x ** 3).sin() + x * x.sum()


def _data_read(m, x):
    return x * x.data + x.detach() * x ** 2


def _data_of_an_op(m, x):
    y = x.sin()
    return y.data * x ** 2 + y


def _detached_in_place(m, x):
    y = x * x
    y.detach_()
    return y * x + x ** 3


def _data_written(m, x):
    y = x * 2
    y.data.mul_(3)
    return y * x


def _written_under_no_grad(m, x):
    y = x * 3
    with m.no_grad():
        y.add_(1.0)
    return y * x


def _view_written(m, x):
    y = x * 2
    v = y[1:]
    v.mul_(x[:2])
    return y * x


BODIES = [_poly, _data_read, _data_of_an_op, _detached_in_place, _data_written,
          _written_under_no_grad, _view_written]
STRATEGIES = ["jacobian", "jacobian_vectorized", "jacobian_forward", "hessian",
              "hessian_vectorized", "hessian_forward", "hvp", "jvp"]


def _run(m, body, strategy):
    functional = m.autograd.functional

    def f(x):
        return body(m, x)

    def total(x):
        return f(x).sum()
    x = m.tensor([0.4, -0.7, 1.1], dtype=m.float64)
    v = m.tensor([0.3, 0.9, -0.5], dtype=m.float64)
    result = {
        "jacobian": lambda: functional.jacobian(f, x),
        "jacobian_vectorized": lambda: functional.jacobian(f, x, vectorize=True),
        "jacobian_forward": lambda: functional.jacobian(f, x, vectorize=True,
                                                        strategy="forward-mode"),
        "hessian": lambda: functional.hessian(total, x),
        "hessian_vectorized": lambda: functional.hessian(total, x, vectorize=True),
        "hessian_forward": lambda: functional.hessian(
            total, x, vectorize=True, outer_jacobian_strategy="forward-mode"),
        "hvp": lambda: functional.hvp(total, x, v)[1],
        "jvp": lambda: functional.jvp(f, x, v)[1],
    }[strategy]()
    return result.detach().numpy()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("body", BODIES, ids=[b.__name__[1:] for b in BODIES])
def test_functional_through_aliases_as_torch(body, strategy):
    np.testing.assert_allclose(_run(flow, body, strategy), _run(torch, body, strategy),
                               rtol=1e-12, atol=1e-12)
