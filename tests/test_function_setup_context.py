"""Custom Function in torch's setup_context style, and the ctx flags, against torch."""
import numpy as np
import torch

import flowgrad as flow


def _sort_fn(m):
    class Sort(m.autograd.Function):
        @staticmethod
        def forward(x):
            values, idx = x.sort()
            return values, idx

        @staticmethod
        def setup_context(ctx, inputs, output):
            values, idx = output
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            ctx.set_materialize_grads(False)
            ctx.shape = inputs[0].shape

        @staticmethod
        @m.autograd.function.once_differentiable
        def backward(ctx, dvalues, didx):
            (idx,) = ctx.saved_tensors
            grad = m.zeros(ctx.shape)
            grad[idx] = dvalues
            return grad
    return Sort


def _run(m):
    x = m.tensor([3.0, 1.0, 2.0], requires_grad=True)
    values, idx = _sort_fn(m).apply(x)
    (values * m.tensor([1.0, 10.0, 100.0])).sum().backward()
    return values.detach().numpy(), idx.requires_grad, x.grad.numpy()


def test_setup_context_style_matches_torch():
    ours, theirs = _run(flow), _run(torch)
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert ours[1] == theirs[1] is False
    np.testing.assert_array_equal(ours[2], theirs[2])


def test_materialize_false_passes_none():
    for m in (flow, torch):
        seen = []

        class Two(m.autograd.Function):
            @staticmethod
            def forward(x):
                return x * 2, x * 3

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.set_materialize_grads(False)

            @staticmethod
            def backward(ctx, da, db):
                seen.append(db is None)
                return da * 2

        x = m.ones(2, requires_grad=True)
        a, _ = Two.apply(x)
        a.sum().backward()
        assert seen == [True] and x.grad.tolist() == [2.0, 2.0]
