"""An empty batch (N = 0) through the layers a training loop meets, against torch: the output
shape, the gradients (empty, or zeros for weights), and module state (BatchNorm's running
statistics stay, its counter moves) come out as torch's, where kernels that reshaped with -1
(ambiguous on zero elements) or refused fewer than two values per channel used to raise."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

CASES = [
    ("unfold_fold", lambda m, x: m.nn.functional.fold(
        m.nn.functional.unfold(x, (2, 3)), (4, 5), (2, 3)), (0, 2, 4, 5)),
    ("max_pool_unpool", lambda m, x: m.nn.functional.max_unpool1d(
        *m.nn.functional.max_pool1d(x, 2, return_indices=True), 2), (0, 2, 4)),
    ("batch_norm_train", lambda m, x: m.nn.functional.batch_norm(
        x, None, None, m.ones(3), m.zeros(3), training=True), (0, 3, 2)),
    ("conv2d", lambda m, x: m.nn.functional.conv2d(x, m.ones(4, 2, 3, 3)), (0, 2, 5, 5)),
    ("max_pool2d", lambda m, x: m.nn.functional.max_pool2d(x, 2), (0, 2, 4, 4)),
    ("avg_pool2d", lambda m, x: m.nn.functional.avg_pool2d(x, 2), (0, 2, 4, 4)),
    ("linear", lambda m, x: m.nn.functional.linear(x, m.ones(4, 3), m.ones(4)), (0, 3)),
    ("layer_norm", lambda m, x: m.nn.functional.layer_norm(x, (3,)), (0, 3)),
    ("softmax", lambda m, x: m.softmax(x, 1), (0, 3)),
    ("cross_entropy_sum", lambda m, x: m.nn.functional.cross_entropy(
        x, m.zeros(0, dtype=m.int64), reduction="sum"), (0, 3)),
]


@pytest.mark.parametrize("fn,shape", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_empty_batch(fn, shape):
    results = []
    for m in (flow, torch):
        x = m.zeros(*shape, requires_grad=True)
        y = fn(m, x)
        y.sum().backward()
        results.append((tuple(y.shape), y.detach().numpy(), tuple(x.grad.shape)))
    (shape_f, y_f, grad_f), (shape_t, y_t, grad_t) = results
    assert shape_f == shape_t and grad_f == grad_t
    np.testing.assert_array_equal(y_f, y_t)


def test_batch_norm_module_on_an_empty_batch():
    states = []
    for m in (flow, torch):
        bn = m.nn.BatchNorm1d(3)
        bn(m.zeros(0, 3, requires_grad=True)).sum().backward()
        states.append([bn.running_mean.tolist(), bn.running_var.tolist(),
                       int(bn.num_batches_tracked), bn.weight.grad.tolist(),
                       bn.bias.grad.tolist()])
    assert states[0] == states[1]
