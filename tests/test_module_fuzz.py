"""nn modules over their constructor options (norm layers in train and eval with every
running-stats option, embeddings with padding_idx/max_norm/scale_grad_by_freq, EmbeddingBag
modes, RNN/LSTM/GRU with proj_size, layers, directions, batch_first, initial states, and
more) trained for two steps beside torch: see tests/module_fuzz.py."""
from __future__ import annotations

import fuzz_common
import module_fuzz as mf
import pytest

pytestmark = pytest.mark.usefixtures("keep_global_random_streams")


@pytest.mark.parametrize("seed", range(200))
def test_module_case_trains_as_torch(seed):
    verdict = mf.check(seed)
    assert verdict is None, f"{mf.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_module_cases_train_as_torch():
    fuzz_common.assert_seeds_agree(mf.check, range(200, 3000))
