"""autograd.functional edge semantics against torch in-process: each row runs the same call on
flowgrad and on torch and asserts the same values (or the same exception type)."""
import numpy as np
import pytest
import torch

import flowgrad as flow

A = np.random.default_rng(1).standard_normal(3).astype("float32")
B = np.random.default_rng(2).standard_normal(4).astype("float32")
S = np.float32(0.7)


def run(m, case):
    try:
        return "ok", case(m, m.autograd.functional)
    except Exception as e:  # noqa: BLE001 - the exception type is the result compared
        return "err", type(e).__name__


def same(a, b):
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), (a, b)
        for p, q in zip(a, b):
            same(p, q)
        return
    if isinstance(a, (bool, str)):
        assert a == b, (a, b)
        return
    assert tuple(a.shape) == tuple(b.shape), (tuple(a.shape), tuple(b.shape))
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-5)


def t(m, a, **kw):
    return m.tensor(a, **kw)


CASES = {
    # silent wrong values: the forward-over-reverse Hessian was all zeros
    "hessian_forward_mode": lambda m, F: F.hessian(
        lambda x: (x.sin() * x).sum(), t(m, A), vectorize=True,
        outer_jacobian_strategy="forward-mode"),
    "hessian_forward_mode_tuple": lambda m, F: F.hessian(
        lambda a, b: (a.sin() * b.sum() ** 2).sum(), (t(m, A), t(m, B)), vectorize=True,
        outer_jacobian_strategy="forward-mode"),
    "hessian_forward_mode_scalar": lambda m, F: F.hessian(
        lambda x: x ** 2, t(m, S), vectorize=True, outer_jacobian_strategy="forward-mode"),
    # v=None is allowed for a single-element input
    "vhp_v_none": lambda m, F: F.vhp(lambda x: (x.exp() ** 3).sum(), t(m, [S])),
    "hvp_v_none": lambda m, F: F.hvp(lambda x: (x.exp() ** 3).sum(), t(m, S)),
    "hvp_v_none_big_input": lambda m, F: F.hvp(lambda x: (x ** 3).sum(), t(m, A)),
    # raise where torch raises
    "jacobian_forward_create_graph": lambda m, F: F.jacobian(
        lambda x: x ** 2, t(m, A), create_graph=True, vectorize=True, strategy="forward-mode"),
    "jacobian_forward_strict": lambda m, F: F.jacobian(
        lambda x: x ** 2, t(m, A), strict=True, strategy="forward-mode"),
    "jacobian_vectorize_strict": lambda m, F: F.jacobian(
        lambda x: x ** 2, t(m, A), strict=True, vectorize=True),
    "hessian_vectorize_strict": lambda m, F: F.hessian(
        lambda x: (x ** 3).sum(), t(m, A), strict=True, vectorize=True),
    "hessian_forward_create_graph": lambda m, F: F.hessian(
        lambda x: (x ** 3).sum(), t(m, A), create_graph=True, vectorize=True,
        outer_jacobian_strategy="forward-mode"),
    "jacobian_list_inputs": lambda m, F: F.jacobian(
        lambda a, b: a * b.sum(), [t(m, A), t(m, B)]),
    "vjp_list_v": lambda m, F: F.vjp(lambda x: x * 2, t(m, A), [m.ones(3)]),
    "jacobian_bad_strategy": lambda m, F: F.jacobian(lambda x: x, t(m, A), strategy="bogus"),
    "hessian_tuple_output": lambda m, F: F.hessian(lambda x: ((x ** 3).sum(),), t(m, A)),
    "vhp_tuple_output": lambda m, F: F.vhp(lambda x: ((x ** 3).sum(),), t(m, A), m.ones(3)),
    "hvp_tuple_output": lambda m, F: F.hvp(lambda x: ((x ** 3).sum(),), t(m, A), m.ones(3)),
    "hvp_strict_constant_output": lambda m, F: F.hvp(lambda x: m.ones(()), t(m, S), strict=True),
    "vhp_strict_linear": lambda m, F: F.vhp(lambda x: (3 * x).sum(), t(m, [S]), strict=True),
    "jvp_strict_linear_create_graph": lambda m, F: F.jvp(
        lambda x: x * 2, t(m, A, requires_grad=True), m.ones(3), strict=True, create_graph=True),
    "jvp_strict_detached_output": lambda m, F: F.jvp(
        lambda x: (x * 2, x.detach()), t(m, A), m.ones(3), strict=True),
    "vjp_strict_detached_output": lambda m, F: F.vjp(
        lambda x: (x * 2, x.detach()), t(m, A), (m.ones(3), m.ones(3)), strict=True),
    # graph kept to requires-grad inputs, as torch
    "jacobian_forward_keeps_graph": lambda m, F: F.jacobian(
        lambda x: x.sin() * x, t(m, A, requires_grad=True), vectorize=True,
        strategy="forward-mode").requires_grad,
}


@pytest.mark.parametrize("name", list(CASES))
def test_functional_matches_torch(name):
    ours, theirs = run(flow, CASES[name]), run(torch, CASES[name])
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "err":
        assert ours[1] == theirs[1], (ours, theirs)
    else:
        same(ours[1], theirs[1])


@pytest.mark.parametrize("call", [
    # a complex cotangent of a real output lost its imaginary part silently, and back
    lambda m, x: m.autograd.grad(x * 2, x, m.ones(3, dtype=m.complex64)),
    lambda m, x: (x * 2).backward(m.ones(3, dtype=m.complex64)),
    lambda m, x: m.autograd.grad((x * 2).sum(), []),
])
def test_grad_refuses_as_torch(call):
    for m in (torch, flow):
        with pytest.raises(RuntimeError):
            call(m, m.ones(3, requires_grad=True))


def test_grad_refuses_allow_unused_false_with_materialize_grads():
    for m in (torch, flow):
        x = m.ones(3, requires_grad=True)
        with pytest.raises(ValueError, match="allow_unused"):
            m.autograd.grad((x * 2).sum(), x, allow_unused=False, materialize_grads=True)
