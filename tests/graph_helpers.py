"""Shared by the nn.Graph tests: the usual training step as a Graph, and the check that it
trains exactly as the same step run eagerly, with a different batch on every call."""
from __future__ import annotations

import numpy as np

import flowgrad as flow
import flowgrad.nn.functional as F


def cross_entropy(model, x, y):
    return F.cross_entropy(model(x), y)


def train_graph(model, optimizer, lr_sch=None, loss_fn=cross_entropy, accumulation=1):
    """The training step as an nn.Graph: `loss_fn(model, x, y)`, its backward, the optimizer."""
    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(optimizer, lr_sch=lr_sch)
            self.config.set_gradient_accumulation_steps(accumulation)

        def build(self, x, y):
            loss = loss_fn(self.model, x, y)
            loss.backward()
            return loss

    return Train()


def graph_of(model, step, optimizer=None):
    """An nn.Graph holding `model` (and, for a training graph, `optimizer`) whose build is
    `step(model, *inputs)`."""
    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            if optimizer is not None:
                self.add_optimizer(optimizer)

        def build(self, *args):
            return step(self.model, *args)

    return Step()


def sum_backward(model, x):
    """A step: model(x).sum(), its backward, the loss."""
    loss = model(x).sum()
    loss.backward()
    return loss


def steps_match_eager(train, eager, opt_e, sch_e, batches, loss_fn=cross_entropy):
    """Run each batch through the eager step and the graph; their losses must agree."""
    for x, y in batches:
        loss_e = loss_fn(eager, x, y)
        opt_e.zero_grad()
        loss_e.backward()
        opt_e.step()
        if sch_e is not None:
            sch_e.step()
        np.testing.assert_allclose(train(x, y).numpy(), loss_e.detach().numpy(), rtol=1e-5)
    assert train.is_compiled


def assert_draws_as_eager(step, x, calls=3):
    """A step that draws random numbers, traced by nn.Graph: each call of the plan draws
    fresh numbers, the same stream as `step` run eagerly from the same seed."""
    graph = flow.nn.Graph.trace(step)
    flow.manual_seed(3)
    compiled = [[t.numpy() for t in graph(x)] for _ in range(calls)]
    flow.manual_seed(3)
    eager = [[t.numpy() for t in step(x)] for _ in range(calls)]
    for got, want in zip(compiled, eager):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(compiled[1][0], compiled[2][0])
