"""DistributedSampler: each rank reads its own share of a dataset, index for index as
torch's (same seed and epoch, same indices on each rank).

torch shuffles with `torch.randperm(n, generator)` seeded with `seed + epoch`: a
Fisher-Yates pass over MT19937's 32-bit draws (`r[i] <-> r[i + draw % (n - i)]`), which
NumPy's MT19937 with torch's (legacy) seeding reproduces exactly.

>>> from flowgrad.utils.data.distributed import DistributedSampler
>>> list(DistributedSampler(range(10), num_replicas=3, rank=1, shuffle=False))
[1, 4, 7, 0]
>>> list(DistributedSampler(range(10), num_replicas=2, rank=0, seed=1))
[5, 1, 0, 9, 7]
"""
from __future__ import annotations

import math

from ...random import _RANDPERM_SMALL, Generator
from ...random import torch_randperm as _randperm
from .sampler import Sampler

__all__ = ["DistributedSampler"]



def torch_randperm(n, seed):
    """The permutation `torch.randperm(n, generator=torch.Generator().manual_seed(seed))`
    gives on the CPU, as a list."""
    if n >= _RANDPERM_SMALL:
        raise NotImplementedError(
            f"DistributedSampler: reproducing torch's shuffle of {n} >= {_RANDPERM_SMALL} "
            f"indices is not implemented; pass shuffle=False and shuffle the dataset yourself")
    return _randperm(n, Generator().manual_seed(seed))


class DistributedSampler(Sampler):
    """Rank `rank`'s indices of `dataset` among `num_replicas` ranks (default: the process
    group's rank and size). With `shuffle`, the order changes with `set_epoch(epoch)`; the
    tail is padded with the first indices (or dropped, `drop_last`) so every rank gets
    the same number."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            from ... import distributed as dist

            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        indices = torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Set the epoch: with shuffle, each epoch has its own order (the same on all
        ranks). Call it before iterating each epoch."""
        self.epoch = epoch
