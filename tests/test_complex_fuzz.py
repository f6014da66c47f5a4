"""Complex inputs against torch, values and Wirtinger gradients (tests/complex_fuzz.py). A new
difference fails; KNOWN would list ops flowgrad refuses for complex input with a clear error
where torch computes (none now: F.normalize, the last one, takes complex)."""
from __future__ import annotations

import complex_fuzz as cf

KNOWN: dict[tuple[str, str], str] = {}


def test_complex_ops_match_torch():
    diffs = cf.all_differences()
    new = {k: v for k, v in diffs.items() if k not in KNOWN}
    assert not new, "\n".join(f"{k}: {v[:300]}" for k, v in new.items())
    assert not set(KNOWN) - set(diffs), f"now equal to torch: {sorted(set(KNOWN) - set(diffs))}"


def test_acosh_gradient_is_the_principal_branch_s():
    # 1/sqrt(z^2 - 1) has the wrong sign over half the plane; torch's (and the principal
    # branch's) is 1/(sqrt(z - 1) sqrt(z + 1))
    assert cf.compare("unary", "acosh", 0) is None
