"""Datasets: map-style (`__getitem__`/`__len__`) and iterable-style, and ways to combine
and split them.

>>> import flowgrad as flow
>>> from flowgrad.utils.data import TensorDataset, random_split
>>> ds = TensorDataset(flow.arange(10.0), flow.arange(10))
>>> ds[3]
(tensor(3.), tensor(3))
>>> a, b = random_split(ds, [0.8, 0.2], generator=flow.Generator().manual_seed(0))
>>> len(a), len(b)
(8, 2)
"""
from __future__ import annotations

import bisect
import collections.abc as abc
import itertools
import math
import operator

from ..._warn import warn
from ...random import default_generator, torch_randperm
from ...torch_format import loadable

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset",
           "ChainDataset", "Subset", "random_split"]


class _BadDatasetsError(ValueError, AssertionError):
    """Invalid datasets given to a dataset class. torch raises AssertionError here; the
    ValueError base keeps `except ValueError` (flowgrad's earlier class) working too."""


class _NotIterableDatasetError(TypeError, AssertionError):
    """ChainDataset given a map-style dataset (AssertionError in torch)."""


@loadable  # (load(weights_only=False) rebuilds it)
class Dataset:
    """A map-style dataset: subclasses define `__getitem__(index)` (and usually
    `__len__`). `a + b` concatenates."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset, abc.Iterable):
    """An iterable-style dataset: subclasses define `__iter__` (an abstract method, so one
    without it cannot be instantiated, as in torch). With worker processes each worker
    iterates its own copy; split the work with `get_worker_info()`."""

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are tuples of rows of the given tensors (same first dimension).

    >>> import flowgrad as flow
    >>> from flowgrad.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(flow.arange(6.0).reshape(3, 2), flow.tensor([0, 1, 0]))
    >>> len(ds)
    3
    >>> ds[1]
    (tensor([2., 3.]), tensor(1))
    """

    def __init__(self, *tensors):
        if any(tensors[0].size(0) != t.size(0) for t in tensors):
            raise _BadDatasetsError("Size mismatch between tensors: TensorDataset needs "
                                    "tensors with the same first dimension, got "
                                    f"{[tuple(t.shape) for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Samples are tuples (or dicts, with keyword datasets) of the datasets' samples."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        datasets = args or list(kwargs.values())
        if not datasets:
            raise ValueError("StackDataset: at least one dataset should be passed")
        self._length = len(datasets[0])
        if any(self._length != len(d) for d in datasets):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        """The samples at `indices`, using each dataset's own `__getitems__` if it has one
        (the DataLoader fetches a batch this way)."""
        named = isinstance(self.datasets, dict)
        samples = [{} if named else [] for _ in indices]
        for key, d in (self.datasets.items() if named else enumerate(self.datasets)):
            if callable(getattr(d, "__getitems__", None)):
                items = d.__getitems__(indices)
                if len(items) != len(indices):
                    raise ValueError("Nested dataset's output size mismatch. Expected "
                                     f"{len(indices)}, got {len(items)}")
            else:
                items = [d[i] for i in indices]
            for sample, item in zip(samples, items):
                if named:
                    sample[key] = item
                else:
                    sample.append(item)
        return samples if named else [tuple(s) for s in samples]

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """The datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise _BadDatasetsError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise _BadDatasetsError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    @staticmethod
    def cumsum(sequence):
        """The running totals of the lengths of `sequence`'s items."""
        return list(itertools.accumulate(len(e) for e in sequence))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            yield from self._check(d)

    def __len__(self):
        return sum(len(self._check(d)) for d in self.datasets)

    @staticmethod
    def _check(d):
        if not isinstance(d, IterableDataset):
            raise _NotIterableDatasetError("ChainDataset only supports IterableDataset, got "
                                           f"{type(d).__name__}; wrap it in an "
                                           "IterableDataset or use ConcatDataset")
        return d


class Subset(Dataset):
    """The samples of `dataset` at `indices`."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices
        # the DataLoader fetches through __getitems__, which would bypass the override
        if type(self).__getitem__ is not Subset.__getitem__ and \
                type(self).__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__. When "
                "subclassing Subset and overriding __getitem__, you must also override "
                "__getitems__ to ensure DataLoader works correctly with your custom logic. "
                "A simple implementation:\n\ndef __getitems__(self, indices):\n"
                "    return [self.__getitem__(idx) for idx in indices]")

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        """The samples at `indices` (through the dataset's `__getitems__` if it has one)."""
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=default_generator):
    """Split `dataset` into non-overlapping random subsets of the given lengths, or of the
    given fractions of its length (remainders go round-robin to the first subsets)."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            subset_lengths.append(int(math.floor(n * frac)))
        remainder = n - sum(subset_lengths)
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warn(f"Length of split at index {i} is 0. This might result in an "
                     "empty dataset.", UserWarning, stacklevel=2)
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input "
                         f"dataset! (lengths sum to {sum(lengths)}, the dataset has {n})")
    try:
        lengths = [operator.index(length) for length in lengths]
    except TypeError:
        raise TypeError(f"random_split: lengths must be integers (or fractions that sum to "
                        f"1), got {lengths}") from None
    perm = torch_randperm(sum(lengths), generator)
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset:offset + length]))
        offset += length
    return out
