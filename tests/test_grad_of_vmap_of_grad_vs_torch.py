"""Per-example gradients (vmap of func.grad, vjp or jacrev) that something outside the vmap
differentiates: an outer func.grad, vjp or jacrev, or a plain backward(), against torch.func.
The tensor differentiated outside enters the vmap batched, as an unbatched argument, captured
by the closure, or through a tensor computed from it inside the vmap before the inner grad.

Until this file the inner grad recorded on the per-example tensors alone: an outer func.grad
was refused with NotImplementedError, and a backward() (or a loss that added such a penalty
to another term) lost the per-example gradients' dependence on the captured weights with no
error: the penalty's share of `w.grad` was 0.

(At the end: jacfwd, whose per-input vmapped jvps ran the function once per input, and
vmap(jacfwd(f)) writing through a view of its input.)
"""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
import torch

import flowgrad as flow

X = np.linspace(-0.9, 0.8, 8).reshape(2, 4)
W = np.array([0.7, -0.4, 1.3, 0.2])


def _poly(m, p, w):
    return ((p * w).sin() * p + (p ** 3) * w).sum()


def _inplace(m, p, w):
    y = p * w
    y.add_(p.cos())
    y[1:].mul_(w[:3])
    return (y.tanh() * w).sum()


def _view_write(m, p, w):
    y = p * 2.0
    v = y[1:]
    v.add_(w[:3] * p[:3])
    return (y * y * w).sum()


BODIES = {"poly": _poly, "inplace": _inplace, "view_write": _view_write}


def _inner(m, kind, body, w):
    """The per-example gradient of body(., w) at one example p, as `kind` computes it."""
    F = m.func

    def scalar(p):
        return body(m, p, w)
    if kind == "grad":
        return F.grad(scalar)
    if kind == "vjp":
        return lambda p: F.vjp(scalar, p)[1](m.ones((), dtype=p.dtype))[0]
    if kind == "jacrev":
        return F.jacrev(scalar)
    return F.grad(lambda p: F.grad(scalar)(p).pow(2).sum())  # "grad_grad"


def _penalty(m, route, inner, body, x, w):
    """sum of squares of the per-example gradients, w reaching the vmap by `route`."""
    F = m.func
    if route == "batched":  # (w stacked per example, differentiated there)
        ws = w.unsqueeze(0).expand(x.shape[0], -1) * 1.0
        g = F.vmap(lambda p, wi: _inner(m, inner, body, wi)(p))(x, ws)
    elif route == "unbatched":
        g = F.vmap(lambda p, wi: _inner(m, inner, body, wi)(p), in_dims=(0, None))(x, w)
    elif route == "captured":
        g = F.vmap(lambda p: _inner(m, inner, body, w)(p))(x)
    elif route == "computed":  # (a tensor made from w inside vmap, before the inner grad)
        g = F.vmap(lambda p: _inner(m, inner, body, (w * p).cos() + w)(p))(x)
    else:  # "input": x itself differentiated outside
        g = F.vmap(lambda p: _inner(m, inner, body, w.detach())(p))(x * w)
    return (g ** 2).sum()


def _outer(m, outer, route, inner, body):
    F = m.func
    x = m.tensor(X)
    w = m.tensor(W)
    try:
        if outer == "grad":
            out = F.grad(lambda v: _penalty(m, route, inner, body, x, v))(w)
        elif outer == "vjp":
            value, fn = F.vjp(lambda v: _penalty(m, route, inner, body, x, v), w)
            out = fn(m.ones_like(value))[0]
        elif outer == "jacrev":
            out = F.jacrev(lambda v: _penalty(m, route, inner, body, x, v))(w)
        else:  # "backward", beside a term of its own
            w.requires_grad_()
            ((w * w).sum() + _penalty(m, route, inner, body, x, w)).backward()
            out = w.grad
        return out.detach().numpy()
    except RuntimeError as error:  # (NotImplementedError included)
        return type(error)


OUTERS = ["grad", "vjp", "jacrev", "backward"]
ROUTES = ["batched", "unbatched", "captured", "computed", "input"]
INNERS = ["grad", "vjp", "jacrev", "grad_grad"]


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("outer,route,inner", list(itertools.product(OUTERS, ROUTES, INNERS)))
def test_per_example_gradients_differentiated_outside_as_torch(outer, route, inner, body):
    theirs = _outer(torch, outer, route, inner, BODIES[body])
    ours = _outer(flow, outer, route, inner, BODIES[body])
    assert not isinstance(theirs, type), theirs  # (torch computes every row)
    assert not isinstance(ours, type), ours
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-11)
    assert np.abs(theirs).max() > 1e-3  # (the outer derivative is not zero here)


def _per_sample_norm_penalty(m):
    """A model's loss plus the mean squared norm of its per-sample gradients (computed by
    vmap(grad) through functional_call), trained with backward(): a gradient penalty."""
    m.manual_seed(0)
    model = m.nn.Sequential(m.nn.Linear(4, 5), m.nn.Tanh(), m.nn.Linear(5, 1)).double()
    with m.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(m.tensor(np.cos(np.arange(p.numel()) + 3.0 * i).reshape(p.shape)))
    x, y = m.tensor(X), m.tensor([0.5, -0.25], dtype=m.float64)
    params = dict(model.named_parameters())

    def loss(ps, xi, yi):
        out = m.func.functional_call(model, ps, (xi.unsqueeze(0),))
        return ((out.squeeze() - yi) ** 2)

    grads = m.func.vmap(m.func.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    penalty = sum((g ** 2).sum() for g in grads.values()) / x.shape[0]
    (loss(params, x[0], y[0]) + penalty).backward()
    return [p.grad.numpy() for p in model.parameters()]


def test_a_per_sample_gradient_penalty_trains_as_torch():
    for ours, theirs in zip(_per_sample_norm_penalty(flow), _per_sample_norm_penalty(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


def test_per_example_gradients_of_constants_have_no_graph():
    # (nothing outside differentiates: the result requires no grad, as torch's)
    for m in (torch, flow):
        g = m.func.vmap(m.func.grad(lambda p, w: (p * w).sin().sum()), in_dims=(0, None))(
            m.tensor(X), m.tensor(W))
        assert not g.requires_grad


def _no_grad_write_through_an_expand(m):
    """backward() of a vmapped function that fills an expand of its input under no_grad:
    the write is not recorded, so the gradient still flows through the expand to x."""
    x = m.tensor(X.reshape(2, 4, 1), requires_grad=True)

    def f(x1):
        t = x1.expand(2, 4, 3)
        with m.no_grad():
            t.fill_(0.3)
        return t.sin() * 2 + x1
    m.func.vmap(f)(x * 1.0).sum().backward()
    return x.grad.numpy()


def _data_of_an_inner_input(m):
    """x.data of the inner grad's input strips the inner grad alone: the outer one still
    differentiates through it."""
    def per_example(p):
        return m.func.grad(lambda q: ((q + q.data) * q).sin().sum())(p)
    return m.func.grad(lambda a: (m.func.vmap(per_example)(a) * a.cos()).sum())(
        m.tensor(X)).numpy()


@pytest.mark.parametrize("case", [_no_grad_write_through_an_expand, _data_of_an_inner_input])
def test_writes_and_data_seen_from_outside_the_vmap_as_torch(case):
    # (before: the no_grad write gave the vmap's physical tensor new examples with no
    # history, and .data cut the physical graph: both wrong, silently)
    np.testing.assert_allclose(case(flow), case(torch), rtol=1e-10, atol=1e-12)


def test_a_write_into_a_vmapped_leaf_that_requires_grad_is_refused_as_torch():
    # (before: flowgrad wrote into a copy of the leaf's examples, and computed)
    for m in (torch, flow):
        x = m.tensor(X, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf"):
            m.func.vmap(lambda r: r.sub_(0.75))(x)
        with pytest.raises(RuntimeError, match="leaf"):
            m.func.vmap(lambda r: r.sub_(0.75), in_dims=1)(x)


def _data_written(m, x):
    d = x.data
    y = x * 2
    d.mul_(1.0)
    return (y * x.data).sum() + (x ** 3).sum()


@pytest.mark.parametrize("route", ["leaf", "leaf_dim1", "computed", "backward"])
def test_a_write_to_the_data_of_an_inner_input_as_torch(route):
    # x.data of the inner grad's input is the vmap's batched tensor: torch refuses the write
    # where that is the outer level's leaf (or a view of one) and computes where it is not
    # (before: the inner input was taken for the outer level's input, refused everywhere)
    def run(m):
        F = m.func
        a = m.tensor(X)
        per = F.vmap(F.grad(lambda x: _data_written(m, x)),
                     in_dims=1 if route == "leaf_dim1" else 0)
        try:
            if route == "backward":
                a.requires_grad_()
                per(a).sum().backward()
                return a.grad.numpy()
            return F.grad(lambda b: per(b * 1.0 if route == "computed" else b).sum())(
                a).numpy()
        except RuntimeError as error:
            return type(error)
    ours, theirs = run(flow), run(torch)
    if isinstance(theirs, type):
        assert ours is theirs
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def _jacfwd_of_a_writer(m):
    """jacfwd in two inputs of a function that writes into one: torch runs it once."""
    calls = []

    def f(x1, x2):
        calls.append(1)
        t = x2.sigmoid()
        x1.relu_()
        x2.zero_()
        return x1 * 2, t
    jac = m.func.jacfwd(f, argnums=(0, 1))(m.tensor(X[0]), m.tensor(W[:3]))
    return [j.numpy() for row in jac for j in row], len(calls)


def test_jacfwd_runs_the_function_once_as_torch():
    # (it ran once per input: the write into x2 was seen by the later run, whose Jacobian of
    # sigmoid(x2) was sigmoid'(0) everywhere, silently)
    (ours, our_calls), (theirs, their_calls) = _jacfwd_of_a_writer(flow), _jacfwd_of_a_writer(
        torch)
    assert our_calls == their_calls == 1
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _clamps_a_view_of_its_input(m, x):
    x[1].clamp_(-0.5, 0.5)
    return x


@pytest.mark.parametrize("how", ["vmap_of_jacfwd", "unbatched_tangent"])
def test_a_write_through_a_view_of_a_jvp_input_batched_outside_as_torch(how):
    # vmap(jacfwd(f)) with f clamping a view of its input: jacfwd's basis is the same for
    # every example, and the per-example write reached the view's tangent alone: the
    # Jacobian kept 1 where the clamp cut it, silently. jvp now batches such a tangent as its
    # primal. (With a tangent the caller leaves unbatched torch raises; flowgrad computes.)
    xs = np.array([[0.1, -1.8, 0.3], [2.0, 0.2, -0.9]])

    def run(m):
        F, x = m.func, m.tensor(xs)
        f = functools.partial(_clamps_a_view_of_its_input, m)
        if how == "vmap_of_jacfwd":
            return F.vmap(F.jacfwd(f))(x).numpy()
        one = m.ones(3, dtype=m.float64)
        return F.vmap(lambda r: F.jvp(f, (r,), (one,))[1])(x).numpy()
    want = run(torch) if how == "vmap_of_jacfwd" else np.array([[1.0, 0, 1], [1, 1, 1]])
    np.testing.assert_allclose(run(flow), want)
