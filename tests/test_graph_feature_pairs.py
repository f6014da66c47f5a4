"""nn.Graph against eager flowgrad on training-script features alone and in pairs
(tests/graph_feature_pairs.py): every feature, and a fixed sample of the pairs (the whole set,
406 combinations, is the slow test)."""
import itertools
import random

import graph_feature_pairs as gfp
import pytest

PAIRS = [p for p in itertools.combinations(gfp.FEATURES, 2) if not gfp.REFUSED & set(p)]
SAMPLE = random.Random(0).sample(PAIRS, 24)


@pytest.mark.parametrize("feats", [(f,) for f in gfp.FEATURES if f not in gfp.REFUSED] + SAMPLE,
                         ids=lambda f: "+".join(f))
def test_graph_trains_as_eager(feats):
    assert gfp.differ(feats) is None


@pytest.mark.slow
def test_every_pair():
    differ = {feats: gfp.differ(feats) for feats in PAIRS}
    assert not {k: v for k, v in differ.items() if v}


def test_post_accumulate_grad_hooks_are_refused_by_the_graph_alone():
    assert gfp.differ(("post_acc_hook",)).startswith("eager: ok | graph: NotImplementedError")
