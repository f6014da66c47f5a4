"""Random datasets, samplers and DataLoaders (every dataset class and sample kind, every
sampler, batch_sampler and DistributedSampler setup, DataLoader arguments with their
conflicts, two epochs, worker processes in the slow tier) built and iterated in torch and in
flowgrad must agree step for step: the same errors, lengths, batch structure, dtypes and
values. See tests/data_fuzz.py."""
from __future__ import annotations

import data_fuzz as dfz
import fuzz_common
import numpy as np
import pytest
import torch

import flowgrad as flow
import flowgrad.utils.data as fdata

pytestmark = [pytest.mark.usefixtures("keep_global_random_streams"),
              pytest.mark.filterwarnings("ignore:Length of split")]


# seeds whose difference is not utils.data's: seed -> why it is left
KNOWN = {
    8654: "torch.as_tensor([np.bool_, int]) raises TypeError (np.bool_ has no __index__ under "
          "NumPy 2); flowgrad's tensor creation makes int64: a creation quirk, not collation",
    19050: "the same: default_collate of a (np.bool_, int) sample, torch.as_tensor refuses it",
}


@pytest.mark.parametrize("seed", range(600))
def test_data_pipeline_matches_torch(seed):
    verdict = dfz.check(seed)
    assert verdict is None, f"{dfz.Case(seed).describe()}\n{verdict}"


@pytest.mark.slow
def test_many_data_pipelines_match_torch():
    fuzz_common.assert_seeds_agree(dfz.check, range(600, 20000), KNOWN)


@pytest.mark.slow
def test_data_pipelines_with_workers_match_torch():
    fuzz_common.assert_seeds_agree(lambda s: dfz.check(s, workers=True), range(400))


@pytest.mark.parametrize("weights, num_samples, replacement", [
    ([1.0, -1.0], 1, True), ([1.0, float("nan")], 2, True), ([0.0, 0.0], 2, True),
    ([1.0, 0.0], 3, False), ([0.0, 0.0], 1, False), ([1.0, float("inf")], 2, True),
])
def test_weighted_sampler_checks_its_weights_when_iterated(weights, num_samples, replacement):
    # as torch's multinomial: the sampler is built (and has a length); iterating raises.
    # flowgrad raised in the constructor
    for d in (torch.utils.data, fdata):
        sampler = d.WeightedRandomSampler(weights, num_samples, replacement=replacement)
        assert len(sampler) == num_samples
        with pytest.raises(RuntimeError):
            list(sampler)


@pytest.mark.parametrize("seed", range(5))
def test_weighted_sampler_without_replacement_runs_into_zero_weights(seed):
    # torch draws the nonzero weights' indices first, then those of weight 0 (n_sample may
    # reach the number of weights); flowgrad raised RuntimeError past the nonzero ones
    weights = [0.0, 0.0, 1.0, 0.0, 2.0, 0.0]
    got = list(fdata.WeightedRandomSampler(
        weights, 6, replacement=False, generator=flow.Generator().manual_seed(seed)))
    assert sorted(got) == list(range(6))
    assert sorted(got[:2]) == [2, 4]
    want = list(torch.utils.data.WeightedRandomSampler(weights, 6, replacement=False))
    assert sorted(want) == sorted(got) and sorted(want[:2]) == sorted(got[:2])
    assert np.count_nonzero(np.asarray(weights)[got[2:]]) == 0



@pytest.mark.parametrize("seed", [1.5, True, "3", np.int64(3)], ids=["float", "bool", "str",
                                                                   "np_int64"])
def test_generator_manual_seed_takes_only_an_int(seed):
    # torch's Generator.manual_seed refuses what is not a Python int (RuntimeError; NumPy
    # integers TypeError), so DistributedSampler(seed=1.5) raises when iterated; flowgrad
    # took int(seed). torch.manual_seed (the global one) does take int(seed), flowgrad too
    shuffled = []
    for m in (torch, flow):
        with pytest.raises(RuntimeError if not isinstance(seed, np.integer) else TypeError):
            m.Generator().manual_seed(seed)
        try:  # (seed + epoch first: True + 0 is a seed, "3" + 0 a TypeError)
            shuffled.append(list(m.utils.data.DistributedSampler(range(4), num_replicas=2,
                                                                 rank=0, seed=seed)))
        except (RuntimeError, TypeError) as e:
            shuffled.append(type(e))
    assert shuffled[1] == shuffled[0]
    assert flow.manual_seed(seed).initial_seed() == torch.manual_seed(seed).initial_seed()


@pytest.mark.parametrize("num_workers, raises", [(0.0, None), (False, None), (1.0, TypeError)])
def test_dataloader_num_workers_only_checked_for_sign(num_workers, raises):
    # torch checks num_workers < 0 only: 0.0 loads in the main process, 1.0 fails when
    # iterated (range(1.0)); flowgrad refused every non-int with ValueError in the constructor
    for d in (torch.utils.data, fdata):
        loader = d.DataLoader([1, 2, 3], batch_size=2, num_workers=num_workers)
        if raises is None:
            assert [b.tolist() for b in loader] == [[1, 2], [3]]
        else:
            with pytest.raises(raises):
                list(loader)


@pytest.mark.parametrize("make", [
    lambda d: list(d.DataLoader([1, 2], shuffle=True, generator=5)),
    lambda d: list(d.RandomSampler([1, 2], generator=5)),
    lambda d: list(d.SubsetRandomSampler([1, 2], generator="g")),
    lambda d: d.random_split(range(4), [2, 2], generator=5),
], ids=["loader", "random_sampler", "subset_random_sampler", "random_split"])
def test_generator_that_is_not_one_is_a_type_error(make):
    # torch's random ops refuse it (TypeError); flowgrad failed inside with AttributeError
    for d in (torch.utils.data, fdata):
        with pytest.raises(TypeError):
            make(d)
