"""torch.fft over n/s, dim, norm and real/complex inputs against torch, values and
gradients: see tests/fft_fuzz.py."""
from __future__ import annotations

import fft_fuzz as ff
import fuzz_common
import pytest


@pytest.mark.parametrize("seed", range(300))
def test_fft_case_matches_torch(seed):
    verdict = ff.check(seed)
    assert verdict is None, f"{ff.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_fft_cases_match_torch():
    fuzz_common.assert_seeds_agree(ff.check, range(300, 3000))
