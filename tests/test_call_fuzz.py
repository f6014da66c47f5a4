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
                  10064: "squeeze_(d0, d1)", 102724: "adaptive_avg_pool of an integer",
                  129057: "trapezoid/cumulative_trapezoid", 137155: "gaussian_nll_loss of",
                  88522: "max(d, keepdim)", 177852: "gaussian_nll_loss with"}


@pytest.mark.parametrize("block", range(4))
def test_methods_read_their_arguments_as_torch(block):
    fuzz_common.assert_seeds_agree(cf.check, range(block * 500, block * 500 + 500))


@pytest.mark.parametrize("block", range(4))
def test_functions_read_their_arguments_as_torch(block):
    start = cf.FUNCTION_SEEDS + block * 500
    fuzz_common.assert_seeds_agree(cf.check, range(start, start + 500))


@pytest.mark.slow
def test_many_calls_read_their_arguments_as_torch():
    fuzz_common.assert_seeds_agree(cf.check, range(2000, 60000))
    fuzz_common.assert_seeds_agree(cf.check, range(cf.FUNCTION_SEEDS + 2000,
                                                   cf.FUNCTION_SEEDS + 40000))


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
         "m.special.multigammaln(m.ones(3, dtype=m.bool), 1)",
         "m.nn.functional.softmin(m.ones(4, dtype=m.bool), 0, dtype=m.float64)",
         "m.nn.functional.softmax(m.ones(4), 0, m.float64)",
         "m.nn.functional.log_softmax(m.ones(4), 0, m.float64).double()",
         "m.nn.functional.pairwise_distance(m.ones(3, dtype=m.bool), m.ones(3))",
         # the torch.* losses: no reduction unless asked (F.*'s mean was returned)
         "m.kl_div(m.tensor([[0.2, -0.5], [1.0, 0.3]]), m.tensor([[0.1, 0.6], [0.3, 0.5]]))",
         "m.binary_cross_entropy_with_logits(m.tensor([0.2, -0.5]), m.tensor([0.0, 1.0]))",
         "m.cosine_embedding_loss(m.eye(2) + 0.5, m.ones(2, 2), m.tensor([1.0, -1.0]))",
         "m.hinge_embedding_loss(m.tensor([0.2, -0.5, 1.5]), m.tensor([1.0, -1.0, -1.0]))",
         "m.margin_ranking_loss(m.tensor([0.2, 1.0]), m.tensor([0.5, 0.1]), m.ones(2))",
         "m.triplet_margin_loss(m.eye(2), m.ones(2, 2), m.zeros(2, 2))",
         "m.kl_div(m.tensor([0.2, -0.5]), m.tensor([0.1, 0.6]), 1)",
         # a 0-d operand promotes as one with dims (torch broadcasts first)
         "m.nn.functional.mse_loss(m.tensor([0.2, -0.5]), m.tensor(0.6, dtype=m.float64))",
         "m.nn.functional.l1_loss(m.tensor(0.6, dtype=m.float64), m.tensor([0.2, -0.5]))",
         "m.nn.functional.smooth_l1_loss(m.tensor([0.2, 1.5]), m.tensor(0.6, dtype=m.float64))",
         "m.nn.functional.cosine_similarity(m.tensor([0.2, 1.5]), m.tensor(0.6, "
         "dtype=m.float64), 0)",
         # Number arguments: a 0-d tensor read as its number, one with dims refused
         "m.nn.functional.threshold(m.tensor([1, -2, 3]), 0.5, m.tensor(2.5, dtype=m.float64))",
         "m.nn.functional.threshold(m.tensor([1.0, -2.0]), m.tensor([0.5, 1.0]), 2.0)",
         "m.nn.functional.leaky_relu(m.tensor([1.0, -2.0]), m.ones(2), True)",
         "m.nn.functional.threshold_(m.ones(2, dtype=m.bool), -1, True)",
         "m.chain_matmul(m.ones(3), m.ones(3))",
         "m.linalg.householder_product(m.eye(3, dtype=m.float64), m.ones(2, dtype=m.int64))",
         "m.gradient(m.ones(3, 4, dtype=m.bool))",
         "m.nn.functional.l1_loss(m.ones(3, 4, dtype=m.bool), m.ones(4))",
         # an integer input reads the threshold in its dtype, truncated (-1.5 is -1)
         "m.nn.functional.threshold(m.tensor([-2, -1, 0, 1, 3]), -1.5, 9)",
         "m.nn.functional.threshold(m.tensor([-2, -1, 0, 1, 3]), 1.7, 9)",
         "m.kl_div(m.ones(2, 3) * 0.3, m.ones(2, 3) * 0.5, 3)",
         "m.nuclear_norm(m.eye(2), True)", "m.ones(3, 4).count_nonzero(0, 1)",
         "m.ones(()).broadcast_to(2, 3)",
         "m.nn.functional.cosine_similarity(m.ones(3), m.ones(3), 0, -1)",
         "m.broadcast_shapes(m.ones(3), 2)"]


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
            results.append([(str(t.dtype).split(".")[-1], np.asarray(t.tolist())) for t in r])
        except Exception as e:  # noqa: BLE001 - raise/no-raise compared
            results.append(type(e))
    want, got = results
    if isinstance(want, type):
        assert isinstance(got, type), (call, got)
    else:
        assert not isinstance(got, type), (call, got)
        assert len(want) == len(got)
        for (wd, w), (gd, g) in zip(want, got):
            assert wd == gd and w.shape == g.shape, (call, wd, gd, w.shape, g.shape)
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
