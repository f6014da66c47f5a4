"""flowgrad against torch on training-script features alone and in pairs
(tests/feature_pairs_vs_torch.py): every feature, and a fixed sample of the pairs (the whole
set is the slow test)."""
import itertools
import random

import feature_pairs_vs_torch as fp
import pytest

PAIRS = [p for p in itertools.combinations(fp.FEATURES, 2)
         if not any(q <= set(p) for q in fp.PERMISSIVE)]
# the pairs that found bugs, then a fixed sample of the rest
SAMPLE = [("ckpt", "amp"), ("ckpt_re", "amp"), ("ckpt_re", "double_bwd")] + \
    random.Random(0).sample(PAIRS, 24)


@pytest.mark.parametrize("feats", [(f,) for f in fp.FEATURES] + SAMPLE,
                         ids=lambda f: "+".join(f))
def test_as_torch(feats):
    assert fp.differ(feats) is None


@pytest.mark.slow
def test_every_pair():
    differ = {feats: fp.differ(feats) for feats in PAIRS}
    assert not {k: v for k, v in differ.items() if v}
