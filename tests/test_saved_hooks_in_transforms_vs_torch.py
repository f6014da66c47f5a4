"""Saved-tensor hooks (saved_tensors_hooks, save_on_cpu, checkpoint) and torch.func, against
torch: torch refuses them while func.grad or vjp runs (either inside the other), and allows
them under jvp and vmap. flowgrad ran them under grad, and vmap(grad(checkpoint(f))) came
out zeros, with no error."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow


def _block(m, w):
    def block(x):
        return ((x @ w).tanh() * x).sin()
    return block


def _run(m, case):
    F, G = m.func, m.autograd.graph
    checkpoint = (torch.utils.checkpoint if m is torch else flow.utils.checkpoint).checkpoint
    x = m.tensor([0.4, -0.7, 1.1], dtype=m.float64)
    w = m.tensor([[0.5, -1.0, 0.3], [0.2, 0.8, -0.6], [1.1, 0.1, 0.4]], dtype=m.float64)
    block = _block(m, w)

    def hooked(y):
        with G.saved_tensors_hooks(lambda t: t, lambda t: t):
            return block(y).sum()

    def checkpointed(y):
        return checkpoint(block, y, use_reentrant=False).sum()
    try:
        if case == "hooks inside grad":
            out = F.grad(hooked)(x)
        elif case == "grad inside hooks":
            with G.saved_tensors_hooks(lambda t: t, lambda t: t):
                out = F.grad(lambda y: block(y).sum())(x)
        elif case == "save_on_cpu inside vjp":
            def f(y):
                with G.save_on_cpu():
                    return block(y)
            out = F.vjp(f, x)[1](m.ones(3, dtype=m.float64))[0]
        elif case == "checkpoint inside vmap(grad)":
            out = F.vmap(F.grad(checkpointed))(m.stack([x, x * 2]))
        elif case == "hooks inside jvp":
            out = F.jvp(hooked, (x,), (m.ones(3, dtype=m.float64),))[1]
        elif case == "hooks inside vmap":
            out = F.vmap(hooked)(m.stack([x, x * 2]))
        else:  # checkpoint under autograd, then func.jvp of it
            out = F.jvp(checkpointed, (x,), (m.ones(3, dtype=m.float64),))[1]
    except RuntimeError as error:
        assert "don't yet support saved tensor hooks" in str(error)
        return RuntimeError
    return out.detach().numpy()


@pytest.mark.parametrize("case", ["hooks inside grad", "grad inside hooks",
                                  "save_on_cpu inside vjp", "checkpoint inside vmap(grad)",
                                  "hooks inside jvp", "hooks inside vmap", "checkpoint in jvp"])
def test_saved_tensor_hooks_in_func_transforms_as_torch(case):
    ours, theirs = _run(flow, case), _run(torch, case)
    if ours is RuntimeError or theirs is RuntimeError:
        assert ours is theirs
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
