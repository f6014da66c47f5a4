"""float32 sums, means, variances and scans over many elements keep torch's accuracy.

NumPy adds along a leading (or middle) dim row after row and scans in float32, so over a
million rows its error grows with the count (2e-4 relative for a column of 0.1s); torch's
cascade sums and double-accumulated CPU scans stay near 1e-7. Each case checks flowgrad and
torch against the float64 result of the same float32 input (flowgrad's bound is torch's own
error, with room: 2e-6 relative)."""
import numpy as np
import pytest
import torch

import flowgrad as flow

RNG = np.random.default_rng(0)
COLUMN = np.full((1_000_003, 1), 0.1, np.float32)
TALL = (RNG.standard_normal((400_000, 4)) * 0.5 + 3).astype(np.float32)
SEQUENCES = (RNG.standard_normal((4, 100_000, 8)) + 3).astype(np.float32)
RUN = np.full(100_000, 0.1, np.float32)
GROWTH = np.full(100_000, 1.00001, np.float32)

CASES = {
    "sum_down_a_column": (COLUMN, lambda m, x: x.sum(0), lambda a: a.sum(0)),
    "mean_down_a_column": (COLUMN, lambda m, x: x.mean(0), lambda a: a.mean(0)),
    "sum_of_tall_rows": (TALL, lambda m, x: m.sum(x, dim=0), lambda a: a.sum(0)),
    "var_of_tall_rows": (TALL, lambda m, x: x.var(0), lambda a: a.var(0, ddof=1)),
    "std_of_tall_rows": (TALL, lambda m, x: x.std(0), lambda a: a.std(0, ddof=1)),
    "var_mean_of_tall_rows": (TALL, lambda m, x: m.var_mean(x, 0, correction=0)[0],
                              lambda a: a.var(0)),
    "mean_over_a_long_middle_dim": (SEQUENCES, lambda m, x: x.mean(1), lambda a: a.mean(1)),
    "sum_over_two_middle_dims": (SEQUENCES.reshape(4, 1000, 100, 8),
                                 lambda m, x: x.sum((1, 2)), lambda a: a.sum((1, 2))),
    "cumsum": (RUN, lambda m, x: x.cumsum(0), np.cumsum),
    "reverse_cumsum_grad": (RUN, lambda m, x: _grad(m, x, lambda t: (t.cumsum(0) * 0.1).sum()),
                            lambda a: 0.1 * np.arange(a.size, 0, -1)),
    "cumprod": (GROWTH, lambda m, x: x.cumprod(0), np.cumprod),
    "bias_grad_of_a_big_batch": (TALL, lambda m, x: _bias_grad(m, x),
                                 lambda a: np.full(3, 0.1 * a.shape[0])),
}


def _grad(m, x, loss):
    x = x.clone().requires_grad_()
    loss(x).backward()
    return x.grad


def _bias_grad(m, x):
    layer = m.nn.Linear(4, 3)
    (layer(x) * 0.1).sum().backward()
    return layer.bias.grad


@pytest.mark.parametrize("name", list(CASES))
def test_long_float32_reduction_is_as_accurate_as_torch(name):
    data, call, exact = CASES[name]
    truth = np.asarray(exact(data.astype(np.float64)), np.float64)
    ours = call(flow, flow.tensor(data)).detach().numpy()
    theirs = call(torch, torch.tensor(data)).detach().numpy()
    assert ours.dtype == theirs.dtype == np.float32
    scale = np.maximum(np.abs(truth), 1e-30)
    their_error = float((np.abs(theirs - truth) / scale).max())
    our_error = float((np.abs(ours - truth) / scale).max())
    assert their_error < 2e-6, f"{name}: torch itself is {their_error:.1e} off"
    assert our_error < 2e-6, f"{name}: {our_error:.1e} relative error (torch's {their_error:.1e})"
