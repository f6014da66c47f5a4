"""nn modules over their constructor options trained by nn.Graph against the same module
trained eagerly (tests/graph_module_fuzz.py)."""
from __future__ import annotations

import fuzz_common
import graph_module_fuzz as gmf
import numpy as np
import pytest

import flowgrad as flow

pytestmark = pytest.mark.usefixtures("keep_global_random_streams")


@pytest.mark.parametrize("seed", range(150))
def test_compiled_module_trains_as_eager(seed):
    verdict = gmf.check(seed)
    assert verdict is None, verdict


@pytest.mark.slow
def test_many_compiled_modules_train_as_eager():
    fuzz_common.assert_seeds_agree(gmf.check, range(150, 1500))


def test_embedding_max_norm_renormalises_each_calls_rows_in_a_graph():
    # before: the renormalisation wrote into the weight's array directly, so only the traced
    # call renormalised; the compiled plan used rows above max_norm from then on
    emb = flow.nn.Embedding(5, 2, max_norm=1.0).double()
    with flow.no_grad():
        emb.weight.copy_(flow.tensor(np.arange(10.0).reshape(5, 2)))

    class Lookup(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.emb = emb

        def build(self, i):
            return self.emb(i)

    graph = Lookup()
    graph(flow.tensor([0, 1]))
    out = graph(flow.tensor([3, 4]))
    np.testing.assert_allclose(np.linalg.norm(out.numpy(), axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(emb.weight.detach().numpy()[3:], axis=1), 1.0,
                               rtol=1e-6)


def test_batchnorm_cumulative_average_compiles():
    # momentum=None read the batch count with item() inside build, which a graph refuses
    eager, compiled = (flow.nn.BatchNorm1d(3, momentum=None).double() for _ in range(2))

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.bn = compiled

        def build(self, x):
            return self.bn(x)

    graph = Step()
    for i in range(4):
        x = flow.tensor(np.random.default_rng(i).standard_normal((5, 3)))
        np.testing.assert_allclose(graph(x).numpy(), eager(x).detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(compiled.running_var.numpy(), eager.running_var.numpy(),
                               rtol=1e-12)
    assert int(compiled.num_batches_tracked) == 4
