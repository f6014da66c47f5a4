"""autograd.backward / autograd.grad argument edges, each run in torch and in flowgrad: the
same outcome (the exception's class, or the same values and requires_grad flags). One line
per case; `x(m)` is a fresh leaf [1., 2.] of framework m."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow


def x(m):
    return m.tensor([1.0, 2.0], requires_grad=True)


def _backward_then_grad(m, call):
    a = x(m)
    call(m, a)
    return a.grad


CASES = {
    "backward_lists": lambda m: _backward_then_grad(
        m, lambda m, a: m.autograd.backward([a * 2], [m.ones(2)])),
    "backward_tuples": lambda m: _backward_then_grad(
        m, lambda m, a: m.autograd.backward((a * 2,), (m.ones(2),))),
    "backward_bare_tensors": lambda m: _backward_then_grad(
        m, lambda m, a: m.autograd.backward(a * 2, m.ones(2))),
    "backward_wrong_grad_shape": lambda m: _backward_then_grad(
        m, lambda m, a: m.autograd.backward(a * 2, m.ones(3))),
    "backward_implicit_nonscalar": lambda m: m.autograd.backward(x(m) * 2),
    "backward_twice_without_retain": lambda m: (lambda loss: (loss.backward(), loss.backward()))(
        (x(m) * x(m)).sum()),
    "backward_of_integers": lambda m: m.tensor([1, 2]).sum().backward(),
    "grad_materialized_unused": lambda m: m.autograd.grad(
        (x(m) * 2).sum(), [x(m)], materialize_grads=True, allow_unused=True),
    # an unused input's zeros are differentiable with create_graph (they were not)
    "grad_materialized_create_graph": lambda m: (lambda a, b: m.autograd.grad(
        (a * a).sum(), [a, b], materialize_grads=True, create_graph=True,
        allow_unused=True))(x(m), x(m)),
    "grad_materialize_without_allow_unused": lambda m: m.autograd.grad(
        (x(m) * 2).sum(), [x(m)], materialize_grads=True, allow_unused=False),
    "grad_batched": lambda m: (lambda a: m.autograd.grad(
        a * 2, a, m.eye(2), is_grads_batched=True))(x(m)),
    "grad_batched_wrong_shape": lambda m: (lambda a: m.autograd.grad(
        a * 2, a, m.ones(2), is_grads_batched=True))(x(m)),
    "grad_implicit_nonscalar": lambda m: (lambda a: m.autograd.grad(a * 2, a))(x(m)),
    "grad_of_non_leaf": lambda m: (lambda h: m.autograd.grad((h * h).sum(), h))(x(m) * 3),
    "grad_input_without_grad": lambda m: m.autograd.grad((x(m) * 2).sum(), m.ones(2)),
    "grad_empty_outputs": lambda m: m.autograd.grad([], [x(m)]),
    "grad_twice_with_retain": lambda m: (lambda a: (lambda loss: (
        m.autograd.grad(loss, a, retain_graph=True), m.autograd.grad(loss, a))[1])(
        (a * a).sum()))(x(m)),
    "grad_of_integer_output": lambda m: m.autograd.grad(m.tensor(3), [x(m)]),
    # any iterable of inputs, as torch (a generator raised AttributeError)
    "grad_inputs_generator": lambda m: (lambda a: m.autograd.grad(
        (a * a).sum(), (t for t in [a])))(x(m)),
    "grad_outputs_count_mismatch": lambda m: (lambda a: m.autograd.grad(
        [a.sum(), a.prod()], [a], [m.tensor(1.0)]))(x(m)),
    # a .grad made before the leaf changed shape (`.data =` another shape): without
    # create_graph torch adds the new gradient in place, so only one that broadcasts to the
    # old .grad's shape is taken; with it, out of place (flowgrad broadcast both silently)
    "grad_of_another_shape_in_place": lambda m: _regrad(m, (3, 1), (1, 3), False),
    "grad_of_a_broadcasting_shape_in_place": lambda m: _regrad(m, (3, 3), (1, 3), False),
    "grad_of_another_shape_out_of_place": lambda m: _regrad(m, (3, 1), (1, 3), True),
    # `.data =` takes tensors alone, and no integer one under a leaf that requires grad
    # (flowgrad took an array, a list, a number, None and int64 data)
    "data_set_to_an_array": lambda m: setattr(m.ones(2), "data", np.ones(2)),
    "data_set_to_a_list": lambda m: setattr(m.ones(2), "data", [1.0, 2.0]),
    "data_set_to_a_number": lambda m: setattr(m.ones(2), "data", 3.0),
    "data_set_to_none": lambda m: setattr(m.ones(2), "data", None),
    "data_set_to_int_under_requires_grad": lambda m: setattr(
        x(m), "data", m.ones(3, dtype=m.int64)),
    "data_set_to_int_without_requires_grad": lambda m: (lambda a: (
        setattr(a, "data", m.arange(3)), a)[1])(m.ones(2)),
}


def _regrad(m, before, after, create_graph):
    a = m.ones(*before, requires_grad=True)
    (a * 2).sum().backward(create_graph=create_graph)
    a.data = m.ones(*after)
    (a * 3).sum().backward(create_graph=create_graph)
    return a.grad


def _outcome(m, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = CASES[case](m)
        except Exception as e:  # noqa: BLE001 - the exception's class is the outcome
            return type(e).__name__
    tensors = result if isinstance(result, (tuple, list)) else [result]
    return [None if t is None else (t.tolist(), t.requires_grad) for t in tensors
            if t is None or hasattr(t, "requires_grad")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_engine_edge_as_torch(case):
    assert _outcome(flow, case) == _outcome(torch, case)
