"""torch.func's ensembling helpers against torch: stack_module_state + vmap(functional_call)
values and gradients, replace_all_batch_norm_modules_, functionalize, and the errors."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import flowgrad as flow


def _models(m, n):
    rng = np.random.default_rng(0)
    models = []
    for _ in range(n):
        net = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.BatchNorm1d(4), m.nn.Tanh(),
                              m.nn.Linear(4, 2))
        with m.no_grad():
            for p in net.parameters():
                p.copy_(m.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
        models.append(net)
    return models


def _ensemble_step(m):
    models = _models(m, 3)
    for net in models:
        m.func.replace_all_batch_norm_modules_(net)
    params, buffers = m.func.stack_module_state(models)
    x = m.tensor(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))

    def run(p, b, x):
        return m.func.functional_call(models[0], (p, b), (x,))

    out = m.func.vmap(run, in_dims=(0, 0, None))(params, buffers, x)
    (out ** 2).sum().backward()
    return out, params, buffers, models


def test_stacked_ensemble_matches_torch():
    ours, theirs = _ensemble_step(flow), _ensemble_step(torch)
    np.testing.assert_allclose(ours[0].detach().numpy(), theirs[0].detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    assert list(ours[1]) == list(theirs[1]) and list(ours[2]) == list(theirs[2]) == []
    for k in theirs[1]:
        assert ours[1][k].is_leaf and ours[1][k].requires_grad
        np.testing.assert_allclose(ours[1][k].grad.numpy(), theirs[1][k].grad.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=k)
    for net in ours[3]:  # the models' own parameters are not part of that graph
        assert all(p.grad is None for p in net.parameters())
        assert net[1].running_mean is None and not net[1].track_running_stats


def test_buffers_are_stacked_and_errors_as_torch():
    for m in (torch, flow):
        nets = _models(m, 2)
        _, buffers = m.func.stack_module_state(nets)
        assert {k: tuple(v.shape) for k, v in buffers.items()} == {
            "1.running_mean": (2, 4), "1.running_var": (2, 4), "1.num_batches_tracked": (2,)}
        with pytest.raises(RuntimeError, match="at least one model"):
            m.func.stack_module_state([])
        with pytest.raises(RuntimeError, match="training/eval"):
            m.func.stack_module_state([nets[0], copy.deepcopy(nets[1]).eval()])
        frozen = copy.deepcopy(nets[1]).requires_grad_(False)
        with pytest.raises(RuntimeError, match="requires_grad"):
            m.func.stack_module_state([nets[0], frozen])


def test_functionalize_gives_the_same_numbers():
    for m in (torch, flow):
        x = m.ones(2)
        assert m.func.functionalize(lambda t: t.add_(1) * 2)(x).tolist() == [4.0, 4.0]
        assert x.tolist() == [2.0, 2.0]  # the input's mutation is kept, as torch's
