"""Shared-memory storage (flowgrad.multiprocessing): `Module.share_memory()` then training in
worker processes updates the parent's weights, as torch's Hogwild example relies on. Before,
share_memory() did nothing and each forked worker trained its own copy: the parent's model
came back untrained, with no error. Real processes, fork and spawn, bounded in time."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import flowgrad as flow
import flowgrad.multiprocessing as mp


def _train(rank, model, steps):
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    x = flow.ones(4, 3)
    for _ in range(steps):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()


def _add_rank(rank, t):
    t.add_(rank + 1)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_train_the_parents_shared_model(method):
    ctx = mp.get_context(method)
    flow.manual_seed(0)
    model = flow.nn.Linear(3, 2)
    model.share_memory()
    assert all(p.is_shared() for p in model.parameters())
    before = [p.detach().numpy().copy() for p in model.parameters()]
    procs = [ctx.Process(target=_train, args=(rank, model, 5)) for rank in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    # every SGD step of a batch of 4 ones subtracts lr * 4 from each weight and bias: 10 steps
    for b, p in zip(before, model.parameters()):
        np.testing.assert_allclose(b - p.detach().numpy(), 4.0, rtol=1e-5)


def test_spawned_writes_reach_a_shared_tensor_and_its_views():
    t = flow.zeros(2, 3).share_memory_()
    flow.multiprocessing.spawn(_add_rank, args=(t[1],), nprocs=2)
    np.testing.assert_array_equal(t.numpy(), [[0, 0, 0], [3, 3, 3]])


def test_sharing_keeps_values_identity_and_what_is_not_shared():
    t = flow.arange(6.0).reshape(2, 3)
    view_before = t[0]
    assert not t.is_shared() and t.share_memory_() is t and t.is_shared()
    assert t.share_memory_() is t  # a no-op the second time
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3))
    assert t[1].is_shared() and not copy.deepcopy(t).is_shared()
    assert not view_before.is_shared()  # (a view taken before keeps the old storage)
    p = flow.nn.Parameter(flow.ones(2)).share_memory_()
    q = pickle.loads(pickle.dumps(p))  # by the block's name: the same memory
    q.data.add_(1)
    assert type(q) is flow.nn.Parameter and q.requires_grad
    np.testing.assert_array_equal(p.detach().numpy(), [2.0, 2.0])
