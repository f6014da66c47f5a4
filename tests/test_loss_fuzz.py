"""Every loss over its options (reductions, weights, ignore_index, label smoothing,
probability targets, margins, p, eps, swap, empty batches, K-dimensional inputs) against
torch, value and gradients: see tests/loss_fuzz.py."""
from __future__ import annotations

import fuzz_common
import loss_fuzz as lf
import numpy as np
import pytest

import flowgrad as flow


@pytest.mark.parametrize("seed", range(400))
def test_loss_case_matches_torch(seed):
    verdict = lf.check(seed)
    assert verdict is None, f"{lf.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_loss_cases_match_torch():
    fuzz_common.assert_seeds_agree(lf.check, range(400, 4000))


@pytest.mark.parametrize("fn, target", [
    ("multi_margin_loss", np.zeros(0, np.int64)),
    ("multilabel_margin_loss", np.zeros((0, 3), np.int64)),
])
def test_margin_losses_of_an_empty_batch(fn, target):
    # torch 2.13 returns its uninitialised output here; flowgrad: mean of nothing, sum of 0
    x = flow.zeros(0, 3, requires_grad=True)
    loss = getattr(flow.nn.functional, fn)
    assert np.isnan(loss(x, flow.tensor(target)).item())
    assert loss(x, flow.tensor(target), reduction="sum").item() == 0.0
    assert tuple(loss(x, flow.tensor(target), reduction="none").shape) == (0,)
