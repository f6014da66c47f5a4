"""matmul and the other products (mm, bmm, mv, dot, addmm/addmv/addbmm/baddbmm, tensordot,
kron, linear, bilinear, einsum with random subscripts) on broadcast, empty and strided operands
against torch, values and gradients: see tests/product_fuzz.py.

The differing cases are all ones torch refuses and flowgrad computes: kron of a transposed
input (torch's view fails), bilinear with zero in1 features (torch's reshape(-1, 0)), addmv of
a broadcast input over a matrix with no columns."""
from __future__ import annotations

import fuzz_common
import product_fuzz as pf
import pytest

TORCH_REFUSES = {7, 172, 187, 232, 234, 261, 306}


@pytest.mark.parametrize("seed", [s for s in range(400) if s not in TORCH_REFUSES])
def test_product_case_matches_torch(seed):
    verdict = pf.check(seed)
    assert verdict is None, f"{pf.generate(seed)}\n{verdict}"


@pytest.mark.parametrize("seed", sorted(TORCH_REFUSES))
def test_cases_torch_refuses_still_refused_by_torch_only(seed):
    assert "torch raised" in (pf.check(seed) or "")


@pytest.mark.slow
def test_many_product_cases_match_torch():
    fuzz_common.assert_seeds_agree(_differs_where_torch_runs, range(400, 3000))


def _differs_where_torch_runs(seed):
    verdict = pf.check(seed)
    return None if verdict and "torch raised" in verdict else verdict
