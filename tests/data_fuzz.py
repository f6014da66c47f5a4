"""Differential fuzzing of flowgrad.utils.data: random datasets, samplers and DataLoaders
built and iterated in torch and in flowgrad.

A seed draws a dataset (a list of tensors, tuples, dicts, named tuples, NumPy arrays,
strings, numbers or nested samples; a TensorDataset; a Subset, ConcatDataset, StackDataset or
random_split part of one; an IterableDataset or a ChainDataset of them), a sampler setup
(the default, shuffle, SequentialSampler, RandomSampler with or without replacement and
num_samples, SubsetRandomSampler, WeightedRandomSampler, a BatchSampler or a user's list of
batches as batch_sampler, DistributedSampler with its options and set_epoch), and the
DataLoader's arguments (batch_size, None and 0 included, drop_last, shuffle, collate_fn,
generator, conflicting options; worker processes, persistent or not, only in the slow tier).
Each step (building each piece and the warnings that gives, len() and list() of each
sampler, len() of the loader, a first epoch perhaps stopped early, then two whole ones) must
agree: both raise (flowgrad an instance of torch's exception class) or both give the same
container types, dtypes, shapes and values.

flowgrad reproduces torch's CPU random streams (randperm, randint, int64 seeds, multinomial
with and without replacement), so random orders are compared exactly: with a seeded
generator= and with the global seed. The order torch leaves unspecified (WeightedRandomSampler
without replacement running into weights of 0: ties in its topk) is compared without its
values: structure, types, dtypes and shapes, and flowgrad's indices must be valid (distinct
without replacement). Every case must also give the same result run twice.

    .venv/bin/python tests/data_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/data_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import collections
import collections.abc as cabc
import gc
import itertools
import random
import warnings

import fuzz_common
import numpy as np
import torch
import torch.utils.data as tdata
from test_data_vs_torch import FLOW, TORCH, _py

import flowgrad as flow
import flowgrad.utils.data as fdata

P = collections.namedtuple("P", "x y")
SAMPLE_KINDS = ["tensor", "tuple", "dict", "namedtuple", "numpy", "str", "int", "float",
                "bool", "nested", "npscalar", "list", "ordered", "bytes", "none", "ragged",
                "mixednum", "tensor0d"]
DTYPES = ["float32", "float64", "int64", "int32", "int16", "int8", "uint8", "float16", "bool"]


class _Stream:
    """An iterable dataset over `items` (with `__len__` when `sized`)."""

    def __init__(self, items, sized=True):
        self.items = items
        self.sized = sized

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        if not self.sized:
            raise TypeError("this stream has no length")
        return len(self.items)


class TorchStream(_Stream, tdata.IterableDataset):
    pass


class FlowStream(_Stream, fdata.IterableDataset):
    pass


STREAM = {"torch": TorchStream, "flowgrad": FlowStream}


def collate_count(batch):
    """A user collate_fn: the batch's length (of a sample, without batching)."""
    return len(batch) if hasattr(batch, "__len__") else -1


def collate_identity(batch):
    """A user collate_fn: the samples as they come."""
    return batch


def _name(m):
    return "torch" if m is TORCH else "flowgrad"


def _sample(kind, rng, shape, dtype, i):
    """Sample i of a list dataset, from NumPy data (tensors are made per framework)."""
    a = (rng.standard_normal(shape) * 3).astype(dtype) if dtype != "bool" else \
        rng.random(shape) < 0.5
    return {"tensor": ("T", a), "tuple": ("tuple", [("T", a), i, float(i) / 2]),
            "dict": ("dict", {"x": a, "y": i, "s": f"s{i}"}),
            "namedtuple": ("P", [a, float(i)]), "numpy": a, "str": f"w{i}", "int": i * 3 - 4,
            "float": i * 0.25, "bool": i % 2 == 0,
            "nested": ("dict", {"a": [("T", a), ("tuple", [i, f"n{i}"])],
                                "b": {"c": np.float32(i)}}),
            "npscalar": a.reshape(-1)[0] if a.size else np.float32(i),
            "list": [("T", a), i], "ordered": ("ordered", [("b", a), ("a", i * 0.5)]),
            "bytes": f"b{i}".encode(), "none": None,
            "ragged": ("T", np.zeros(i % 3, dtype)), "mixednum": i if i % 2 else i + 0.5,
            "tensor0d": ("T", np.array(i, dtype))}[kind]


def _make(m, spec):
    """The framework object of a sample spec: ("T", array) a tensor, ("P", ...) a P."""
    if isinstance(spec, tuple) and spec[0] == "T":
        return m.t.tensor(spec[1].copy())
    if isinstance(spec, tuple) and spec[0] == "tuple":
        return tuple(_make(m, s) for s in spec[1])
    if isinstance(spec, tuple) and spec[0] == "P":
        return P(*(_make(m, s) for s in spec[1]))
    if isinstance(spec, tuple) and spec[0] == "ordered":
        return collections.OrderedDict((k, _make(m, v)) for k, v in spec[1])
    if isinstance(spec, tuple) and spec[0] == "dict":
        return {k: _make(m, v) for k, v in spec[1].items()}
    if isinstance(spec, dict):
        return {k: _make(m, v) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_make(m, s) for s in spec]
    return spec.copy() if isinstance(spec, np.ndarray) else spec


class Case:
    """One dataset + sampler + DataLoader setup, drawn from a seed."""

    def __init__(self, seed, workers=False):
        r = random.Random(seed)
        rng = np.random.default_rng(seed)
        self.seed = seed
        self.n = r.choice([0, 1, 2, 3, 5, 6, 7, 10, 13])
        self.kind = r.choice(SAMPLE_KINDS)
        shape = r.choice([(), (2,), (3,), (2, 2), (0,)])
        dtype = r.choice(DTYPES)
        self.samples = [_sample(self.kind, rng, shape, dtype, i) for i in range(self.n)]
        self.X = rng.standard_normal((self.n, 2)).astype(r.choice(["float32", "float64"]))
        self.y = rng.integers(0, 5, self.n)
        self.wrap = r.choice(["list", "list", "tensords", "subset", "concat", "stack_args",
                              "stack_kwargs", "split", "iterable", "chain"])
        n = self.n
        self.subset_idx = [r.randrange(-n, n) for _ in range(r.randint(0, n + 2))] if n else []
        self.idx_tensor = r.random() < 0.2  # Subset's indices a tensor
        self.base = r.choice(["items", "items", "tensords", "tensor", "stack", "subset"])
        self.cut = r.randint(0, n)
        if r.random() < 0.5:
            k = r.randint(1, 3)
            self.split = [r.choice([0.1, 0.2, 0.25, 0.3, 0.5, 1 / 3]) for _ in range(k)]
            if r.random() < 0.7:
                self.split[-1] = max(0.0, 1.0 - sum(self.split[:-1]))
        else:
            cuts = sorted(r.randint(0, n) for _ in range(r.randint(0, 2)))
            self.split = [b - a for a, b in zip([0] + cuts, cuts + [n])]
            if r.random() < 0.15:
                self.split[0] += r.choice([-1, 1, -n - 1])
        self.part = r.randrange(len(self.split))
        self.sized = r.random() < 0.8
        self.sampler = r.choice(["default", "default", "shuffle", "sequential", "random",
                                 "subset_random", "weighted", "batch_sampler", "user_batches",
                                 "distributed", "list_indices"])
        if self.wrap in ("iterable", "chain") and r.random() < 0.8:
            self.sampler = "default"
        if self.sampler == "weighted" and self.kind in ("ragged", "mixednum"):
            # (types and shapes that depend on the index: an inexact order shows them)
            self.kind = "int"
            self.samples = [_sample("int", rng, shape, dtype, i) for i in range(n)]
        self.replacement = r.random() < 0.4 if r.random() < 0.95 else r.choice([1, None])
        self.num_samples = r.choice([None, None, None, 1, 3, 8, 20, 0, -1, 2.0])
        self.weights = r.choice(["pos", "pos", "zeros_some", "all_zero", "negative", "2d",
                                 "nan", "tensor"])
        self.replicas = r.choice([1, 2, 3, 4])
        self.rank = r.choice([0, 1, 2, 3, -1])
        self.dshuffle = r.random() < 0.6
        self.ddrop = r.random() < 0.4
        self.dseed = r.randint(0, 9) if r.random() < 0.97 else r.choice([1.5, True])
        self.epoch = r.choice([None, 0, 1, 4])
        self.batch_size = r.choice([1, 1, 2, 3, 4, None, 0, -1, 2.0, True]) \
            if r.random() < 0.3 else r.choice([1, 2, 3, 4, None])
        self.bs_inner = r.choice([1, 2, 3, 0])
        self.drop_last = r.random() < 0.3
        if self.sampler in ("batch_sampler", "user_batches") and r.random() < 0.8:
            self.batch_size, self.drop_last = 1, False
        self.shuffle = r.choice([None, False, True]) if r.random() < 0.2 else None
        self.collate = r.choice([None, None, None, "default_collate", "default_convert",
                                 "count", "identity"])
        self.generator = r.random() < 0.6
        self.user_batches = [[r.randrange(n) for _ in range(r.randint(0, 3))]
                             for _ in range(r.randint(0, 4))] if n else []
        self.workers = r.choice([0, 0, 1, 2]) if workers else r.choice([0] * 30 + [-1, 0.0])
        self.sampler_iter = r.random() < 0.5  # also list(sampler) by itself
        self.w = rng.random(n + 3) + 0.1  # (cut to the dataset's length)
        if self.weights == "zeros_some":
            self.w[rng.random(n + 3) < 0.5] = 0.0
        self.take = r.choice([None, None, 0, 1, 2])  # the first epoch stops after `take`
        self.worker_kw = {}  # (drawn last: the cases without workers stay as they were)
        if workers and r.random() < 0.5:
            self.worker_kw = {"persistent_workers": r.random() < 0.5,  # (not in_order=False:
                              "prefetch_factor": r.choice([None, 1, 3])}  # arrival order)

    def describe(self):
        keys = ["n", "kind", "wrap", "sized", "sampler", "replacement", "num_samples",
                "weights", "replicas", "rank", "dshuffle", "ddrop", "dseed", "epoch",
                "batch_size", "bs_inner", "drop_last", "shuffle", "collate", "generator",
                "workers", "worker_kw", "take", "base", "idx_tensor", "sampler_iter", "split",
                "part", "subset_idx", "cut", "user_batches"]
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in keys)

    def inexact(self):
        """Whether the order is one flowgrad documents as not torch's: it is compared by
        structure, not values (a weighted draw without replacement reaching weights of 0,
        whose order torch's topk leaves unspecified)."""
        return (self.sampler == "weighted" and not self.replacement
                and self.weights == "zeros_some")

    # --- building, per framework -------------------------------------------------------
    def dataset(self, m, gen):
        items = [_make(m, s) for s in self.samples]
        if self.wrap == "list":
            return items
        if self.wrap == "tensords":
            return m.d.TensorDataset(m.t.tensor(self.X.copy()), m.t.tensor(self.y.copy()))
        if self.wrap in ("subset", "split", "concat") and self.base != "items":
            items = {"tensor": lambda: m.t.tensor(self.X.copy()),
                     "tensords": lambda: m.d.TensorDataset(m.t.tensor(self.X.copy()),
                                                           m.t.tensor(self.y.copy())),
                     "stack": lambda: m.d.StackDataset(items, m.t.tensor(self.y.copy())),
                     "subset": lambda: m.d.Subset(items, list(range(self.n))[::-1])}[
                         self.base]()
        if self.wrap == "subset":
            idx = m.t.tensor(self.subset_idx, dtype=m.t.int64) if self.idx_tensor else \
                self.subset_idx
            return m.d.Subset(items, idx)
        if self.wrap == "concat":
            if self.base != "items" and self.base != "tensor":
                return m.d.ConcatDataset([items, items])
            return m.d.ConcatDataset([items[:self.cut], items[self.cut:]])
        if self.wrap == "stack_args":
            return m.d.StackDataset(items, list(range(self.n)))
        if self.wrap == "stack_kwargs":
            return m.d.StackDataset(a=items, b=m.t.tensor(self.y.copy()))
        if self.wrap == "split":
            return m.d.random_split(items, self.split, generator=gen)[self.part]
        stream = STREAM[_name(m)]
        if self.wrap == "iterable":
            return stream(items, self.sized)
        return m.d.ChainDataset([stream(items[:self.cut], self.sized),
                                 stream(items[self.cut:], self.sized)])

    def _weights(self, m, ds):
        try:  # as many as the dataset's samples: an inexact order raises nowhere else
            w = self.w[:len(ds)]
        except TypeError:
            w = self.w[:self.n]
        return {"negative": list(-w), "2d": [list(w)], "nan": list(w * np.nan),
                "all_zero": list(w * 0.0), "tensor": m.t.tensor(w.copy())}.get(
                    self.weights, list(w))

    def samplers(self, m, ds, gen):
        """(sampler, batch_sampler, shuffle) for the DataLoader."""
        g = gen if self.generator else None
        s = self.sampler
        if s in ("default", "shuffle"):
            return None, None, (True if s == "shuffle" else self.shuffle)
        if s == "sequential":
            return m.d.SequentialSampler(ds), None, self.shuffle
        if s == "random":
            return m.d.RandomSampler(ds, replacement=self.replacement,
                                     num_samples=self.num_samples, generator=g), None, \
                self.shuffle
        if s == "subset_random":
            return m.d.SubsetRandomSampler(self.subset_idx, generator=g), None, self.shuffle
        if s == "weighted":
            return m.d.WeightedRandomSampler(self._weights(m, ds), self.num_samples,
                                             replacement=self.replacement,
                                             generator=g), None, self.shuffle
        if s == "batch_sampler":
            inner = m.d.SequentialSampler(ds) if not self.generator else \
                m.d.RandomSampler(ds, generator=g)
            return None, m.d.BatchSampler(inner, self.bs_inner, self.drop_last), self.shuffle
        if s == "list_indices":  # any iterable of indices is a sampler
            return list(self.subset_idx), None, self.shuffle
        if s == "user_batches":
            return None, [list(b) for b in self.user_batches], self.shuffle
        ds_sampler = m.d.DistributedSampler(ds, num_replicas=self.replicas, rank=self.rank,
                                            shuffle=self.dshuffle, seed=self.dseed,
                                            drop_last=self.ddrop)
        if self.epoch is not None:
            ds_sampler.set_epoch(self.epoch)
        return ds_sampler, None, self.shuffle

    def loader_kwargs(self, m, gen):
        kw = {}
        if self.batch_size != 1:
            kw["batch_size"] = self.batch_size
        if self.drop_last:
            kw["drop_last"] = True
        if self.collate is not None:
            kw["collate_fn"] = {"default_collate": m.d.default_collate,
                                "default_convert": m.d.default_convert,
                                "count": collate_count,
                                "identity": collate_identity}[self.collate]
        if self.generator:
            kw["generator"] = gen
        if self.workers != 0 or isinstance(self.workers, float):
            kw["num_workers"] = self.workers
            kw.update(self.worker_kw)
        return kw


def _step(events, label, fn):
    """Run `fn`, recording ("ok", value) or ("err", exception) under `label`; the value,
    or None after an error (the steps that need it are skipped)."""
    try:
        value = fn()
    except Exception as exc:  # (without its frames: they hold a worker loader's iterator)
        events.append((label, "err", exc.with_traceback(None)))
        return None, False
    events.append((label, "ok", value))
    return value, True


def run(case, m):
    """The case's steps under framework namespace `m`: [(label, "ok"/"err", value)]."""
    m.t.manual_seed(1000 + case.seed)
    gen = m.t.Generator().manual_seed(case.seed)
    events = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds, ok = _step(events, "dataset", lambda: case.dataset(m, gen))
    events.append(("dataset warnings", "ok", [(w.category.__name__, str(w.message))
                                              for w in caught]))
    if not ok:
        return events
    _step(events, "len(dataset)", lambda: len(ds))
    sam, ok = _step(events, "samplers", lambda: case.samplers(m, ds, gen))
    if not ok:
        return events
    sampler, batch_sampler, shuffle = sam
    for name, s in (("sampler", sampler), ("batch_sampler", batch_sampler)):
        if s is not None:
            _step(events, f"len({name})", lambda s=s: len(s))
            if case.sampler_iter:
                _step(events, f"list({name})", lambda s=s: list(s))
    kw = case.loader_kwargs(m, gen)
    if sampler is not None:
        kw["sampler"] = sampler
    if batch_sampler is not None:
        kw["batch_sampler"] = batch_sampler
    if shuffle is not None:
        kw["shuffle"] = shuffle
    dl, ok = _step(events, "DataLoader", lambda: m.d.DataLoader(ds, **kw))
    if not ok:
        return events
    _step(events, "len(loader)", lambda: len(dl))
    _step(events, "epoch 0", lambda: list(itertools.islice(dl, case.take)))
    for epoch in (1, 2):
        _step(events, f"epoch {epoch}", lambda: list(dl))
    return events


def _picture(case, events, m):
    """The comparable form of `events`: errors by class, values by `_py` (inexact orders:
    with their values left out)."""
    out = []
    for label, status, value in events:
        if status == "err":
            out.append((label, "err", value))
            continue
        if label in ("dataset", "samplers", "DataLoader"):
            out.append((label, "ok", None))
            continue
        inexact = case.inexact() and label.startswith(("epoch", "list("))
        out.append((label, "ok", _form(value) if inexact else _py(value)))
    return out


def _form(obj):
    """`_py(obj)` without the values: container types, tensor dtypes and shapes, and the
    types of the rest."""
    if isinstance(obj, (torch.Tensor, flow.Tensor)):
        return "T", str(obj.dtype).split(".")[-1], tuple(obj.shape)
    if isinstance(obj, np.ndarray):
        return "nd", obj.dtype.str, obj.shape
    if isinstance(obj, cabc.Mapping):
        return type(obj).__name__, [(k, _form(v)) for k, v in obj.items()]
    if isinstance(obj, cabc.Sequence) and not isinstance(obj, (str, bytes)):
        return type(obj).__name__, [_form(v) for v in obj]
    return type(obj).__name__


def _weighted_valid(case, events):
    """flowgrad's weighted draws (not torch's stream): indices of nonzero weights, distinct
    without replacement; None when valid, else a message."""
    for label, status, value in events:
        if label.startswith("epoch") and status == "ok":
            flat = [i for b in value for i in (b.tolist() if hasattr(b, "tolist") else [b])] \
                if case.batch_size is not None else []
            if case.collate is None and case.wrap == "list" and case.kind == "int" and flat:
                idx = [(v + 4) // 3 for v in flat]
                if any(i >= case.n or case.w[i] <= 0 for i in idx):
                    return f"{label}: an index of weight 0 drawn: {idx}"
                if not case.replacement and len(set(idx)) != len(idx):
                    return f"{label}: without replacement, repeated indices {idx}"
    return None


def check(seed, workers=False):
    """None when flowgrad's steps agree with torch's, else a message."""
    case = Case(seed, workers)
    want = _picture(case, run(case, TORCH), TORCH)
    if case.workers:
        gc.collect()  # torch's workers gone before flowgrad forks its own
    got_events = run(case, FLOW)
    got = _picture(case, got_events, FLOW)
    for (label, ws, wv), (glabel, gs, gv) in zip(want, got):
        if ws == "err":
            if gs != "err":
                return f"{label}: torch raised {type(wv).__name__}: {wv}; flowgrad gave {gv}"
            if not isinstance(gv, type(wv)):
                return (f"{label}: torch raised {type(wv).__name__}: {wv}; flowgrad "
                        f"{type(gv).__name__}: {gv}")
            continue
        if gs == "err":
            return f"{label}: flowgrad raised {type(gv).__name__}: {gv}; torch gave {wv}"
        if gv != wv:
            return f"{label}: flowgrad {gv}, torch {wv}"
    if len(want) != len(got):
        return f"steps: flowgrad {[e[0] for e in got]}, torch {[e[0] for e in want]}"
    if case.sampler == "weighted" and (msg := _weighted_valid(case, got_events)):
        return msg
    again = _picture(case, run(case, FLOW), FLOW)
    if [(lab, s, v if s == "ok" else type(v)) for lab, s, v in again] != \
            [(lab, s, v if s == "ok" else type(v)) for lab, s, v in got]:
        return "flowgrad gives another result when the case runs again"
    return None


def main():
    fuzz_common.main(__doc__, lambda seed: Case(seed).describe(), check, seeds="0:500")


if __name__ == "__main__":
    main()
