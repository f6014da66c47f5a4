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
