"""Samplers: iterables over dataset indices (or batches of them) for the DataLoader.

>>> import flowgrad as flow
>>> from flowgrad.utils.data import BatchSampler, SequentialSampler
>>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
[[0, 1], [2, 3], [4]]
"""
from __future__ import annotations

import numpy as np

from ...random import (
    Generator,
    default_generator,
    torch_int64,
    torch_multinomial_by_exponentials,
    torch_multinomial_with_replacement,
    torch_randint,
    torch_randperm,
)
from ...tensor import Tensor
from ...torch_format import loadable

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


def _fresh_generator(generator):
    """`generator` itself, or (as torch) a new one seeded from the global generator, so
    `flowgrad.manual_seed` makes every epoch's order reproducible."""
    if generator is not None:
        return generator
    return Generator().manual_seed(torch_int64(default_generator))


@loadable  # (load(weights_only=False) rebuilds it)
class Sampler:
    """Base class: subclasses define `__iter__` (and `__len__` when it is known)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


_CHUNK = 4096


class RandomSampler(Sampler):
    """A random permutation of the indices (each epoch a new one), or `num_samples` draws
    with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        gen = _fresh_generator(self.generator)
        if self.replacement:
            if n == 0:  # torch's class; NumPy would say ValueError('high <= 0')
                raise RuntimeError(f"RandomSampler: cannot draw num_samples="
                                   f"{self.num_samples} indices from an empty data_source")
            # torch's draws: 32 at a time (num_samples may exceed memory: 10**10)
            for _ in range(self.num_samples // 32):
                yield from torch_randint(n, 32, gen)
            yield from torch_randint(n, self.num_samples % 32, gen)
            return
        for _ in range(self.num_samples // n):
            yield from torch_randperm(n, gen)
        yield from torch_randperm(n, gen)[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in torch_randperm(len(self.indices), self.generator):  # (torch: no fresh one)
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights`."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) \
                or num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        w = np.asarray(weights._data if isinstance(weights, Tensor) else weights, np.float64)
        if w.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        self.weights = Tensor._wrap(w)
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        # the weights' values are checked here, as torch's multinomial does (a sampler with
        # bad weights can be built and measured; iterating it raises)
        w = self.weights._data
        if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise RuntimeError("WeightedRandomSampler: invalid multinomial distribution: the "
                               "weights must be finite, non-negative and not all zero")
        if not self.replacement and self.num_samples > w.size:
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                               f"replacement (num_samples={self.num_samples}, {w.size} "
                               "weights)")
        if self.replacement and self.num_samples > 1:  # torch's draws (its stream, not fresh)
            yield from torch_multinomial_with_replacement(w, self.num_samples, self.generator)
            return
        # without replacement, or one draw: torch's exponential draws (weights over Exp(1)
        # samples, the largest first); zero weights come last, in index order where torch's
        # topk leaves their order unspecified
        yield from torch_multinomial_by_exponentials(w[None], self.num_samples,
                                                     self.generator)[0]

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Group another sampler's indices into lists of `batch_size`."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
