"""torch.func's transforms over pytrees (a dict of a module's parameters, lists, tuples) with
functional_call, against torch: per-example gradients, jacrev/jacfwd/hessian of the
parameters, jvp with dict primals. jacrev, jacfwd (so hessian) and jvp took only tensors
(AttributeError on a dict); grad and vjp took pytrees already."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

_RNG = np.random.default_rng(0)
_WEIGHTS = {k: _RNG.standard_normal(s) for k, s in [
    ("0.weight", (5, 4)), ("0.bias", (5,)), ("2.weight", (5,)), ("2.bias", (5,)),
    ("3.weight", (3, 5)), ("3.bias", (3,))]}
_X = _RNG.standard_normal((6, 4))
_Y = _RNG.integers(0, 3, 6)


def _setup(m, inplace=False):
    net = m.nn.Sequential(m.nn.Linear(4, 5), m.nn.ReLU(inplace=inplace), m.nn.LayerNorm(5),
                          m.nn.Linear(5, 3)).double()
    params = {k: m.tensor(v) for k, v in _WEIGHTS.items()}
    return net, params, m.tensor(_X), m.tensor(_Y)


def _leaves(tree):
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in _leaves(t)]
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in _leaves(tree[k])]
    return [tree.detach().numpy()]


def _run(m, case):
    F = m.func
    net, params, x, y = _setup(m, inplace=case.endswith("inplace"))
    small = {"3.bias": params["3.bias"], "2.weight": params["2.weight"]}

    def loss(p, xb, yb):
        out = F.functional_call(net, {**params, **p}, (xb.unsqueeze(0),))
        return m.nn.functional.cross_entropy(out, yb.unsqueeze(0))

    def outputs(p):
        return F.functional_call(net, {**params, **p}, (x,))
    if case.startswith("per_example_grads"):
        return F.vmap(F.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    if case == "jacrev_of_params":
        return F.jacrev(outputs)(params)
    if case == "jacfwd_of_params":
        return F.jacfwd(outputs)(small)
    if case == "hessian_of_params":
        return F.hessian(lambda p: loss(p, x[0], y[0]))(small)
    if case == "jvp_of_params":
        tangents = {k: m.ones_like(v) for k, v in params.items()}
        return F.jvp(lambda p: F.grad(loss)(p, x[0], y[0]), (params,), (tangents,))
    if case == "jacrev_of_a_list":
        return F.jacrev(lambda pair: pair[0] * pair[1].sum())([x[0], x[1]])
    if case == "jacfwd_of_a_list":
        return F.jacfwd(lambda pair: pair[0] * pair[1].sum())([x[0], x[1]])
    if case == "jvp_of_a_list":
        return F.jvp(lambda pair: pair[0] * pair[1].sum(), ([x[0], x[1]],), ([x[2], x[3]],))
    return F.jacrev(lambda a, b: (a * b).sin(), argnums=(0, 1))(x[0], x[1])


CASES = ["per_example_grads", "per_example_grads_inplace", "jacrev_of_params",
         "jacfwd_of_params", "hessian_of_params", "jvp_of_params", "jacrev_of_a_list",
         "jacfwd_of_a_list", "jvp_of_a_list", "jacrev_of_two_arguments"]


@pytest.mark.parametrize("case", CASES)
def test_transforms_of_pytrees_as_torch(case):
    ours, theirs = _leaves(_run(flow, case)), _leaves(_run(torch, case))
    assert [a.shape for a in ours] == [b.shape for b in theirs]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_jvp_refuses_tangents_of_another_structure():
    with pytest.raises(RuntimeError, match="structure"):
        flow.func.jvp(lambda d: d["a"] * 2, ({"a": flow.ones(2), "b": flow.ones(2)},),
                      ({"a": flow.ones(2)},))


def _non_tensor_output(m, extra, out_dims):
    try:
        return m.func.vmap(lambda x: (x.sum(), extra), out_dims=out_dims)(m.ones(4, 3))[1]
    except ValueError as error:
        assert "must only return Tensors" in str(error)
        return ValueError


@pytest.mark.parametrize("out_dims", [0, (0, None)])
@pytest.mark.parametrize("extra", [None, 3, "text"])
def test_vmap_hands_back_a_non_tensor_output_only_with_out_dims_none(extra, out_dims):
    assert _non_tensor_output(flow, extra, out_dims) == _non_tensor_output(torch, extra, out_dims)


def _out_dims_outcome(m, fn, out_dims):
    try:
        return tuple(m.func.vmap(fn, out_dims=out_dims)(m.ones(2, 3, 4)).shape)
    except (IndexError, ValueError) as error:
        return type(error)


@pytest.mark.parametrize("out_dims", [None, -3, -2, 0, 1, 2])
@pytest.mark.parametrize("fn", [lambda x: x.sum(0), lambda x: x.sum()])
def test_vmap_out_dims_are_checked_against_the_result_as_torch(fn, out_dims):
    """out_dims past a per-example result's dims raise torch's IndexError (flowgrad took
    them modulo the dims: out_dims=1 of a 0-d result stacked at 0); None for a batched
    result raises its ValueError (flowgrad: a TypeError from `None % n`)."""
    assert _out_dims_outcome(flow, fn, out_dims) == _out_dims_outcome(torch, fn, out_dims)
