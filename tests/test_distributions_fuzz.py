"""flow.distributions against torch.distributions through every deterministic method
(log_prob, entropy, mean, mode, variance, stddev, cdf, icdf, kl_divergence) with random
batched parameters in either parameterisation, values and gradients: see
tests/distributions_fuzz.py."""
from __future__ import annotations

import distributions_fuzz as df
import fuzz_common
import pytest


@pytest.mark.parametrize("seed", range(300))
def test_distribution_case_matches_torch(seed):
    verdict = df.check(seed)
    assert verdict is None, f"{df.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_distribution_cases_match_torch():
    fuzz_common.assert_seeds_agree(df.check, range(300, 3000))
