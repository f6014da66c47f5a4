"""In-place and out= calls, most of them wrong, in torch and in flowgrad: a call flowgrad
refuses leaves every tensor as it was, and flowgrad raises where torch raises and agrees with
its values where both run (see tests/atomicity_fuzz.py). Below them, the fuzz's findings as
fixed cases live beside their families' tests (tests/test_shape_opinfo_fixes.py: resizes of
shared memory; tests/test_out_arg_fuzz.py: in-place comparisons)."""
from __future__ import annotations

import re

import atomicity_fuzz as af
import fuzz_common
import pytest
import torch

import flowgrad as flow

# a seed showing each difference atomicity_fuzz.KNOWN keeps on purpose
KNOWN_EXAMPLES = {294: "index_put_ of a value", 456: "set_ of a tensor",
                  614: "an out= that requires grad", 1133: "masked_scatter_",
                  1237: "an out= that is also the input", 5501: "growing a view",
                  720: "an out= sharing elements"}


@pytest.mark.parametrize("block", range(4))
def test_refused_in_place_and_out_calls_change_nothing(block):
    fuzz_common.assert_seeds_agree(af.check, range(block * 250, block * 250 + 250))


@pytest.mark.slow
def test_many_refused_in_place_and_out_calls_change_nothing():
    fuzz_common.assert_seeds_agree(af.check, range(1000, 12000))


@pytest.mark.parametrize("seed", sorted(KNOWN_EXAMPLES))
def test_each_known_difference_is_still_one(seed):
    # (a KNOWN entry whose difference is gone must be taken out)
    verdict = af._verdict(seed)
    reasons = [r for r, p in af.KNOWN.items() if verdict and re.search(p, verdict)]
    assert len(reasons) == 1 and reasons[0].startswith(KNOWN_EXAMPLES[seed]), verdict
    assert len(KNOWN_EXAMPLES) == len(af.KNOWN)


def test_known_floor_divide_into_an_out_that_requires_grad():
    h = torch.ones(2, requires_grad=True) * 2
    torch.floor_divide(torch.tensor([3, 4]), torch.tensor(2.0), out=h)
    assert h.requires_grad and type(h.grad_fn).__name__ == "NotImplemented"
    fh = flow.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic"):
        flow.floor_divide(flow.tensor([3, 4]), flow.tensor(2.0), out=fh)  # KNOWN


def test_the_check_sees_a_refused_call_that_changed_a_tensor(monkeypatch):
    # the harness itself: a refusal after a write is reported, naming the tensor
    original = flow.Tensor.add_

    def add_then_refuse(self, *args, **kwargs):
        original(self, 1.0)
        raise RuntimeError("refused after writing")

    monkeypatch.setattr(flow.Tensor, "add_", add_then_refuse)
    seed = next(s for s in range(5000)
                if af.generate(s)[2][0].startswith(("a.add_(", "b.add_(", "g.add_(")))
    assert "changed" in (af.check(seed) or "")
