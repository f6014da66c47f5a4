"""torch.autograd.graph.allow_mutation_on_saved_tensors: an in-place write into a tensor saved
for backward copies it first, so backward reads the values the forward used, against torch.

Where the write goes through another view of the saved tensor's memory (a slice of it, or
its base), torch copies nothing and its backward silently reads the new values; flowgrad
copies for any write into that memory, so the oracle there is the program without the
write (torch's gradient of the values the forward used)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow


def _mul_input(m, b):
    out = (b * b).sum()
    b.mul_(2)
    return out


def _exp_output(m, b):
    e = b.exp()
    out = e.sum()
    e.add_(1)
    return out


def _written_under_no_grad(m, b):
    out = (b * b).sum()
    with m.no_grad():
        b.add_(5)
    return out


def _written_twice(m, b):
    out = (b * b.sin()).sum()
    b.mul_(2)
    b.add_(1)
    return out


def _written_through_data(m, b):
    out = (b * b).sum()
    b.data.mul_(2)
    return out


def _setitem(m, b):
    out = (b.tanh() * 3).sum()
    b[1] = 7.0
    return out


def _index_put(m, b):
    out = (b * b).sum()
    b.index_put_((m.tensor([0, 2]),), m.tensor([4.0, 5.0], dtype=m.float64))
    return out


def _unsaved_tensor_written(m, b):
    c = b * 2
    out = (b * b).sum() + c.sum()
    c.mul_(3)
    return out


def _two_saved_written(m, b):
    c = b + 1
    out = (b * c).sum()
    b.mul_(2)
    c.zero_()
    return out


CASES = [_mul_input, _exp_output, _written_under_no_grad, _written_twice,
         _written_through_data, _setitem, _index_put, _unsaved_tensor_written,
         _two_saved_written]


def _slice_written(m, b):
    out = (b * b).sum()
    b[1:].mul_(3)
    return out


def _base_of_a_saved_view_written(m, b):
    v = b[1:]
    out = (v * v).sum()
    b.zero_()
    return out


VIEW_CASES = [_slice_written, _base_of_a_saved_view_written]


def _gradient(m, body, allow=True):
    a = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
    try:
        if allow:
            with m.autograd.graph.allow_mutation_on_saved_tensors():
                out = body(m, a.clone())
                out.backward()
        else:
            body(m, a.clone()).backward()
    except RuntimeError:
        return RuntimeError
    return a.grad.numpy()


@pytest.mark.parametrize("body", CASES, ids=[c.__name__[1:] for c in CASES])
def test_a_saved_tensor_written_in_place_as_torch(body):
    np.testing.assert_allclose(_gradient(flow, body), _gradient(torch, body), rtol=1e-12)


def _without_the_write(m, body):
    """The gradient of body's output with every in-place write left out."""
    a = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
    b = a.clone()
    if body is _slice_written:
        out = (b * b).sum()
    else:
        v = b[1:]
        out = (v * v).sum()
    out.backward()
    return a.grad.numpy()


@pytest.mark.parametrize("body", VIEW_CASES, ids=[c.__name__[1:] for c in VIEW_CASES])
def test_a_write_through_another_view_is_copied_for_too(body):
    # (torch's gradient here reads the written values: the difference is deliberate)
    np.testing.assert_allclose(_gradient(flow, body), _without_the_write(torch, body))
    assert not np.allclose(_gradient(torch, body), _without_the_write(torch, body))


@pytest.mark.parametrize("body", CASES[:3], ids=[c.__name__[1:] for c in CASES[:3]])
def test_without_the_context_the_write_is_refused(body):
    assert _gradient(flow, body, allow=False) is RuntimeError
    assert _gradient(torch, body, allow=False) is RuntimeError


def _backward_outside(m):
    a = m.tensor([1.0, 2.0], requires_grad=True)
    with m.autograd.graph.allow_mutation_on_saved_tensors():
        b = a * 1
        out = (b * b).sum()
    try:
        out.backward()
    except (RuntimeError, AssertionError) as error:  # (torch's is an AssertionError)
        return "outside of the 'allow_mutation_on_saved_tensors' context" in str(error)
    return False


def test_backward_outside_the_context_raises_as_torch():
    assert _backward_outside(flow) and _backward_outside(torch)


def test_contexts_do_not_nest_and_leave_nothing_behind():
    graph = flow.autograd.graph
    with pytest.raises(RuntimeError, match="cannot be nested"):
        with graph.allow_mutation_on_saved_tensors():
            with graph.allow_mutation_on_saved_tensors():
                pass
    with pytest.raises(ValueError):
        with graph.allow_mutation_on_saved_tensors():
            raise ValueError("inside")
    assert flow.autograd.meta.BEFORE_WRITE == []
    assert flow.autograd.saved_hooks.state.stack == ()
    x = flow.ones(2, requires_grad=True)  # (and a write into a saved tensor raises again)
    b = x * 1
    out = (b * b).sum()
    b.mul_(2)
    with pytest.raises(RuntimeError):
        out.backward()
