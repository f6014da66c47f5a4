"""Training and inference programs as users write them, with the changes users make between
calls (a scheduler stepped outside the graph, train()/eval() switches, a state_dict loaded, a
layer frozen, gradients accumulated over calls, another dtype or batch size): nn.Graph and
flow.compile against eager flowgrad, call after call. A plan either gives eager's numbers or
raises StalePlanError (nn.Graph; flow.compile traces anew)."""
from __future__ import annotations

import copy
import io

import numpy as np
import pytest

import flowgrad as flow
import flowgrad.nn.functional as F
from flowgrad import nn
from flowgrad.graph.graph import StalePlanError


def _close(a, b, what):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()),
                               rtol=1e-5, atol=1e-6, err_msg=what)


def _same_state(eager, compiled, what):
    for (name, p), q in zip(eager.state_dict().items(), compiled.state_dict().values()):
        _close(p, q, f"{what}: {name}")


def _mlp(norm=False):
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8) if norm else nn.Identity(),
                         nn.ReLU(), nn.Linear(8, 3))


def _batches(n=4):
    flow.manual_seed(1)
    return [(flow.randn(6, 4), flow.randint(0, 3, (6,))) for _ in range(n)]


class _Train(nn.Graph):
    def __init__(self, model, opt=None):
        super().__init__()
        self.model = model
        if opt is not None:
            self.add_optimizer(opt)

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def test_scheduler_and_user_set_options_outside_the_graph():
    eager = _mlp()
    graphed = copy.deepcopy(eager)
    opts = [flow.optim.AdamW(m.parameters(), lr=0.05, weight_decay=0.1)
            for m in (eager, graphed)]
    scheds = [flow.optim.lr_scheduler.ExponentialLR(o, 0.7) for o in opts]
    train = _Train(graphed, opts[1])
    for i, (x, y) in enumerate(_batches()):
        for o in opts:
            o.param_groups[0]["weight_decay"] = 0.1 * i
        opts[0].zero_grad()
        loss = F.cross_entropy(eager(x), y)
        loss.backward()
        opts[0].step()
        _close(train(x, y), loss, f"loss {i}")
        for s in scheds:
            s.step()
        _same_state(eager, graphed, f"call {i}")


def test_train_eval_switches_and_a_loaded_state_dict():
    eager = _mlp(norm=True)
    compiled_model = copy.deepcopy(eager)
    compiled = flow.compile(compiled_model)
    saved = io.BytesIO()
    flow.save(eager.state_dict(), saved)
    for i, (x, _) in enumerate(_batches(6)):
        if i == 4:
            for m in (eager, compiled_model):
                saved.seek(0)
                m.load_state_dict(flow.load(saved))
        for m in (eager, compiled_model):
            m.train(i % 3 != 2)
        _close(compiled(x), eager(x), f"call {i}")
        _same_state(eager, compiled_model, f"call {i}")


def test_gradients_accumulated_over_calls_and_a_layer_frozen():
    eager = _mlp()
    graphed = copy.deepcopy(eager)
    opts = [flow.optim.SGD(m.parameters(), lr=0.1) for m in (eager, graphed)]
    train = _Train(graphed)  # (no optimizer: .grad sums the calls' gradients)
    for i, (x, y) in enumerate(_batches()):
        loss = F.cross_entropy(eager(x), y)
        loss.backward()
        _close(train(x, y), loss, f"loss {i}")
        for p, q in zip(eager.parameters(), graphed.parameters()):
            _close(p.grad, q.grad, f"grad {i}")
        if i % 2:
            for o in opts:
                o.step()
                o.zero_grad()
    graphed[0].weight.requires_grad_(False)
    with pytest.raises(StalePlanError, match="requires_grad"):
        train(*_batches(1)[0])


def test_another_batch_size_or_dtype_in_flow_compile():
    eager = _mlp()
    compiled_model = copy.deepcopy(eager)
    compiled = flow.compile(compiled_model)
    for i, rows in enumerate([6, 3, 1, 6]):
        flow.manual_seed(i)
        x = flow.randn(rows, 4)
        _close(compiled(x), eager(x), f"rows {rows}")
    for m in (eager, compiled_model):
        m.double()
    x = flow.randn(2, 4, dtype=flow.float64)
    _close(compiled(x), eager(x), "float64")
