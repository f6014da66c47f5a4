"""Tensor methods called with random argument lists, in torch and in flowgrad: equal results
where both run, a refusal where torch refuses (but for flowgrad's lenient argument parsing,
which must write nothing), see tests/call_fuzz.py. The fixes it led to are tested beside
their families (tests/test_argument_errors.py: relu's inplace, deprecated signatures)."""
from __future__ import annotations

import re

import call_fuzz as cf
import fuzz_common
import pytest

# a seed showing each difference call_fuzz.KNOWN keeps on purpose
KNOWN_EXAMPLES = {26043: "polygamma at a pole", 9713: "a bool inside an int list",
                  10064: "squeeze_(d0, d1)"}


@pytest.mark.parametrize("block", range(4))
def test_methods_read_their_arguments_as_torch(block):
    fuzz_common.assert_seeds_agree(cf.check, range(block * 500, block * 500 + 500))


@pytest.mark.slow
def test_many_calls_read_their_arguments_as_torch():
    fuzz_common.assert_seeds_agree(cf.check, range(2000, 60000))


@pytest.mark.parametrize("seed", sorted(KNOWN_EXAMPLES))
def test_each_known_difference_is_still_one(seed):
    # (a KNOWN entry whose difference is gone must be taken out)
    known, cf.KNOWN = cf.KNOWN, {}
    try:
        verdict = cf.check(seed)
    finally:
        cf.KNOWN = known
    reasons = [r for r, p in cf.KNOWN.items() if verdict and re.search(p, verdict)]
    assert len(reasons) == 1 and reasons[0].startswith(KNOWN_EXAMPLES[seed]), verdict
    assert len(KNOWN_EXAMPLES) == len(cf.KNOWN)


def test_a_lenient_call_that_writes_its_input_is_a_difference(monkeypatch):
    """The check behind x.relu(1): torch refuses the argument, and flowgrad may take it only
    if nothing it was given changes (Tensor.relu was F.relu, whose inplace wrote x)."""
    import flowgrad as flow
    seed = next(s for s in range(100000) if cf.generate(s)[0] == "relu"
                and len(cf.generate(s)[2]) == 1 and cf.generate(s)[2][0] not in (0, False)
                and not cf.generate(s)[3] and cf.generate(s)[1][2] in ("float32", "float64")
                and cf.generate(s)[1][1])
    assert cf.check(seed) is None
    monkeypatch.setattr(flow.Tensor, "relu", flow.nn.functional.relu)
    assert "only torch raised TypeError" in cf.check(seed)


# what the fuzz found, fixed: each call runs as torch's or raises where it raises
FOUND = ["m.tensor(2.0).sort(1)", "m.tensor(2.0).argsort(-2)", "m.tensor(2.0).flip(2)",
         "m.tensor(2.0).nanmedian(1)", "m.tensor(2.0).sort(0)", "m.tensor(2.0).flip(0)",
         "m.ones(4, 4, 4).hsplit(1, 2)", "m.ones(4, 4).vsplit(1, 3)",
         "m.ones(4, 4, 4).dsplit(1, 2)", "m.ones(2, 3, dtype=m.int64).prelu(m.tensor(1))",
         "m.ones(3, dtype=m.bool).mvlgamma(1)", "m.ones(()).broadcast_to(3)",
         "m.special.multigammaln(m.ones(3, dtype=m.bool), 1)"]


@pytest.mark.parametrize("call", FOUND)
def test_found_calls_as_torch(call):
    import numpy as np
    import torch

    import flowgrad as flow
    results = []
    for m in (torch, flow):
        try:
            r = eval(call, {"m": m})  # noqa: S307 - the table's own calls
            r = r if isinstance(r, tuple) else (r,)
            results.append([np.asarray(t.tolist()) for t in r])
        except Exception as e:  # noqa: BLE001 - raise/no-raise compared
            results.append(type(e))
    want, got = results
    if isinstance(want, type):
        assert isinstance(got, type), (call, got)
    else:
        assert not isinstance(got, type), (call, got)
        assert len(want) == len(got) and all(np.array_equal(a, b) for a, b in zip(want, got))
