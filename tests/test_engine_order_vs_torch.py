"""The order in which backward runs nodes, seen through hooks, against torch: torch's engine
takes the ready node with the highest sequence number (the node made last; a leaf's
accumulate_grad before any other), ties broken by its std::priority_queue, and so does
flowgrad's (engine.GraphTask.apply). Random graphs over several leaves, every tensor hooked
(tensor hooks and post-accumulate-grad hooks), the calls' order compared."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import flowgrad as flow


def _program(seed):
    """[(op, operand indices)] over 2-6 leaves: each op reads one or two earlier tensors."""
    r = random.Random(seed)
    leaves = r.randint(2, 6)
    steps = []
    for i in range(r.randint(1, 8)):
        n = leaves + i
        steps.append((r.choice(["mul", "add", "sin", "cat", "sum_with", "mul", "unbind",
                                "split", "exp_fn"]),
                      [r.randrange(n) for _ in range(2)]))
    return leaves, steps, r.random() < 0.5


def _exp(m):
    class Exp(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0]
    return Exp


def _calls(m, seed):
    leaves, steps, post_hooks = _program(seed)
    log = []
    g = np.random.default_rng(seed)
    ts = [m.tensor(g.standard_normal(3), requires_grad=True) for _ in range(leaves)]
    for i, t in enumerate(ts):
        if post_hooks:
            t.register_post_accumulate_grad_hook(lambda p, i=i: log.append(("acc", i)))
        else:
            t.register_hook(lambda gr, i=i: log.append(("leaf", i)))
    for k, (op, (a, b)) in enumerate(steps):
        x, y = ts[a], ts[b]
        out = {"mul": lambda: x * y, "add": lambda: x + y, "sin": lambda: x.sin(),
               "cat": lambda: m.cat([x, y])[:3], "sum_with": lambda: x.sum() + y,
               "unbind": lambda: m.stack([x.unbind()[2], y.unbind()[0], x.unbind()[1]]),
               "split": lambda: m.cat(x.split([1, 2])[::-1]) * y,
               "exp_fn": lambda: _exp(m).apply(x) + y}[op]()
        out.register_hook(lambda gr, k=k: log.append(("t", k)))
        ts.append(out)
    sum(t.sum() for t in ts[leaves:]).backward()
    return log


@pytest.mark.parametrize("seed", range(80))
def test_hooks_run_in_torch_order(seed):
    assert _calls(flow, seed) == _calls(torch, seed)


def test_many_ready_leaves_pop_as_torch_heap():
    """Six leaves ready at once: torch's heap does not pop them first in, first out."""
    def order(m):
        log, xs = [], [m.ones(2, requires_grad=True) for _ in range(6)]
        for i, x in enumerate(xs):
            x.register_hook(lambda g, i=i: log.append(i))
        m.cat(xs).sum().backward()
        return log
    assert order(flow) == order(torch)


def test_sequence_nr_grows_and_leaves_take_the_largest():
    x = flow.ones(2, requires_grad=True)
    a = x * 2
    b = a.sin()
    assert b.grad_fn._sequence_nr() > a.grad_fn._sequence_nr()
    assert a.grad_fn.next_functions[0][0]._sequence_nr() == 2 ** 64 - 1
