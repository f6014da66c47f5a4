"""~180 ops under CPU autocast from float32, bfloat16 and mixed inputs: the output dtype (or
the refusal) must be torch's (tests/autocast_sweep.py). A new difference fails; the known
ones are listed with the reason."""
from __future__ import annotations

import autocast_sweep as sweep

_TORCH_REFUSES = "torch refuses (no bfloat16 kernel, or mixed operand dtypes); flowgrad computes"
_NO_BF16_LINALG = ("flowgrad refuses bfloat16 in matrix_exp and solve_triangular "
                   "(NumPy's LAPACK has no bfloat16); torch computes them")
KNOWN = {
    **dict.fromkeys([("special.ndtri", "bfloat16"), ("special.ndtri", "mixed"),
                     ("special.log_ndtr", "bfloat16"), ("special.log_ndtr", "mixed"),
                     ("special.erfcx", "bfloat16"), ("special.erfcx", "mixed"),
                     ("special.zeta", "bfloat16")], _TORCH_REFUSES),
    **dict.fromkeys([("matrix_exp", "bfloat16"), ("matrix_exp", "mixed"),
                     ("solve_triangular", "bfloat16")], _NO_BF16_LINALG),
    ("pinv", "float32"): ("torch's linalg.pinv is a composite whose matmuls autocast casts to "
                          "bfloat16; flowgrad's one pinv kernel keeps float32"),
}


def test_autocast_output_dtypes_match_torch():
    diffs = sweep.differences()
    new = {k: v for k, v in diffs.items() if k not in KNOWN}
    assert not new, "\n".join(f"{k}: torch {v[0]}, flowgrad {v[1]}" for k, v in new.items())
    assert not set(KNOWN) - set(diffs), f"now equal to torch: {sorted(set(KNOWN) - set(diffs))}"
