"""Per-sample gradients of common modules (vmap of func.grad through functional_call, the
Opacus pattern), and a penalty on them differentiated again by func.grad and by backward(),
against torch computing the same per example in a loop (torch's vmap gets layer_norm's
second derivative wrong, off by up to 60% here, and cannot batch its RNNs). Also the
Hessian of the loss in a module's first parameter (hessian, jacrev of jacrev) and the
gradients of an ensemble of two models (vmap of grad over stacked parameters)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

B = 3


def _model(m, name):
    nn = m.nn
    make = {
        "linear": lambda: nn.Linear(6, 3),
        "conv1d": lambda: nn.Conv1d(2, 3, 3, padding=1),
        "conv2d": lambda: nn.Conv2d(2, 3, 3, stride=2, padding=1),
        "conv_transpose2d": lambda: nn.ConvTranspose2d(2, 3, 3, stride=2),
        "lstm": lambda: nn.LSTM(4, 3, batch_first=True),
        "gru": lambda: nn.GRU(4, 3, num_layers=2, batch_first=True),
        "rnn": lambda: nn.RNN(4, 3, batch_first=True, bidirectional=True),
        "layer_norm": lambda: nn.Sequential(nn.Linear(6, 4), nn.LayerNorm(4)),
        "group_norm": lambda: nn.Sequential(nn.Conv1d(4, 4, 1), nn.GroupNorm(2, 4)),
        "batch_norm_eval": lambda: nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4)).eval(),
        "embedding": lambda: nn.Sequential(nn.Embedding(10, 4), nn.Flatten(0),
                                           nn.Linear(12, 2)),
        "attention": lambda: nn.MultiheadAttention(4, 2, batch_first=True),
        "encoder_layer": lambda: nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0,
                                                            batch_first=True),
        "bilinear": lambda: nn.Bilinear(3, 2, 2),
        "prelu": lambda: nn.Sequential(nn.Linear(6, 4), nn.PReLU()),
    }[name]
    m.manual_seed(0)
    model = make().double()
    with m.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(m.tensor(np.cos(np.arange(p.numel()) * 0.7 + i).reshape(p.shape) * 0.5))
    return model


INPUTS = {"linear": (6,), "conv1d": (2, 5), "conv2d": (2, 5, 5), "conv_transpose2d": (2, 3, 3),
          "lstm": (5, 4), "gru": (5, 4), "rnn": (5, 4), "layer_norm": (6,),
          "group_norm": (4, 3), "batch_norm_eval": (6,), "embedding": "indices",
          "attention": (3, 4), "encoder_layer": (3, 4), "bilinear": "pair", "prelu": (6,)}


def _inputs(m, name):
    rng = np.random.default_rng(1)
    shape = INPUTS[name]
    if shape == "indices":
        return (m.tensor(rng.integers(0, 10, (B, 3))),)
    if shape == "pair":
        return m.tensor(rng.normal(size=(B, 3))), m.tensor(rng.normal(size=(B, 2)))
    return (m.tensor(rng.normal(size=(B,) + shape)),)


def _loss_of(m, name, model):
    buffers = dict(model.named_buffers())

    def loss(params, *x):
        args = tuple(t.unsqueeze(0) for t in x)
        if name == "attention":
            args = (args[0], args[0], args[0])
        out = m.func.functional_call(model, (params, buffers), args)
        out = out[0] if isinstance(out, tuple) else out
        return (out.sin() ** 2).sum()
    return loss


def _per_sample(m, name, params, model, xs):
    """{name: the B per-sample gradients}: flowgrad by vmap, torch by a loop."""
    loss = _loss_of(m, name, model)
    if m is flow:
        return flow.func.vmap(flow.func.grad(loss), in_dims=(None,) + (0,) * len(xs))(
            params, *xs)
    grads = [torch.func.grad(loss)(params, *(x[i] for x in xs)) for i in range(B)]
    return {k: torch.stack([g[k] for g in grads]) for k in params}


def _run(m, name, mode):
    model = _model(m, name)
    xs = _inputs(m, name)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def penalty(ps):
        return sum((g ** 2).sum() for g in _per_sample(m, name, ps, model, xs).values())
    if mode == "per_sample":
        out = _per_sample(m, name, params, model, xs)
    elif mode == "penalty_grad":
        out = m.func.grad(penalty)(params)
    else:  # "penalty_backward"
        leaves = {k: v.clone().requires_grad_() for k, v in params.items()}
        penalty(leaves).backward()
        out = {k: v.grad for k, v in leaves.items()}
    return {k: v.detach().numpy() for k, v in out.items()}


def _second_order(m, name, how):
    model = _model(m, name)
    xs = _inputs(m, name)
    params = {k: v.detach() for k, v in model.named_parameters()}
    loss = _loss_of(m, name, model)
    if how == "ensemble_grad":
        stacked = {k: m.stack([v, v * 0.5]) for k, v in params.items()}
        grads = m.func.vmap(m.func.grad(lambda p: loss(p, *(x[0] for x in xs))))(stacked)
        return {k: v.numpy() for k, v in grads.items()}
    first = next(iter(params))

    def of_first(p):
        return loss({**params, first: p}, *(x[0] for x in xs))
    transform = m.func.hessian if how == "hessian" else (
        lambda f: m.func.jacrev(m.func.jacrev(f)))
    return {first: transform(of_first)(params[first]).numpy()}


@pytest.mark.parametrize("how", ["hessian", "jacrev_of_jacrev", "ensemble_grad"])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_second_order_and_ensembles_of_a_module_as_torch(name, how):
    ours = _second_order(flow, name, how)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        theirs = _second_order(torch, name, how)
    for k in theirs:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-8, atol=1e-10, err_msg=k)


@pytest.mark.parametrize("mode", ["per_sample", "penalty_grad", "penalty_backward"])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_per_sample_gradients_of_a_module_as_torch(name, mode):
    ours = _run(flow, name, mode)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        theirs = _run(torch, name, mode)  # (the fused kernels have no double backward)
    assert sorted(ours) == sorted(theirs)
    for k in theirs:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-8, atol=1e-10, err_msg=k)
