"""flowgrad.utils.data: datasets, samplers, default_collate (against torch's) and the
DataLoader in the main process and with worker processes (fork and spawn)."""
import collections
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import flowgrad as flow
from flowgrad.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    get_worker_info,
    random_split,
)

Point = collections.namedtuple("Point", "x y")


def _ds(n=10):
    return TensorDataset(flow.arange(2.0 * n).reshape(n, 2), flow.arange(n))


def _to_py(obj):
    """Collated output as plain Python, tagging tensors with dtype and shape."""
    if isinstance(obj, (flow.Tensor, torch.Tensor)):
        return ("T", str(obj.dtype).split(".")[-1], tuple(obj.shape), obj.tolist())
    if isinstance(obj, dict):
        return {k: _to_py(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj).__name__, [_to_py(v) for v in obj]
    return obj


def _sample(m, i):
    return {"f": float(i) / 2, "i": i, "b": i % 2 == 0, "s": f"s{i}",
            "np": np.full((2,), i, np.float32), "npi": np.int16(i), "t": m.full((2, 2), i),
            "tup": (i, [i * 1.5]), "p": Point(i, m.tensor(float(i)))}


def test_default_collate_matches_torch():
    ours = default_collate([_sample(flow, i) for i in range(3)])
    theirs = tdata.default_collate([_sample(torch, i) for i in range(3)])
    assert _to_py(ours) == _to_py(theirs)
    assert isinstance(ours["p"], Point)


@pytest.mark.parametrize("batch,exc,match", [
    ([np.array(["a"]), np.array(["b"])], TypeError, "found <U1"),
    ([object(), object()], TypeError, "found <class 'object'>"),
    ([[1, 2], [3]], RuntimeError, "equal size"),
])
def test_default_collate_errors(batch, exc, match):
    with pytest.raises(exc, match=match):
        default_collate(batch)


def test_datasets():
    ds = _ds(5)
    assert len(ds) == 5 and ds[2][1].item() == 2 and ds[-1][0].tolist() == [8.0, 9.0]
    cat = ConcatDataset([ds, Subset(ds, [4, 0])])
    assert len(cat) == 7 and cat[5][1].item() == 4 and cat[-1][1].item() == 0
    assert len(ds + ds) == 10
    st = StackDataset(a=ds, b=list("vwxyz"))
    assert st[1]["b"] == "w" and len(st) == 5
    with pytest.raises(ValueError, match="Size mismatch between tensors"):
        TensorDataset(flow.zeros(3), flow.zeros(4))
    with pytest.raises(ValueError, match="should not be an empty iterable"):
        ConcatDataset([])
    with pytest.raises(ValueError, match="does not support IterableDataset"):
        ConcatDataset([_Count(3)])
    with pytest.raises(ValueError, match="should not exceed dataset length"):
        cat[-8]
    with pytest.raises(NotImplementedError, match="__getitem__"):
        Dataset()[0]


def test_random_split():
    ds = _ds(10)
    a, b, c = random_split(ds, [5, 3, 2], generator=flow.Generator().manual_seed(1))
    idx = a.indices + b.indices + c.indices
    assert sorted(idx) == list(range(10)) and [len(a), len(b), len(c)] == [5, 3, 2]
    again = random_split(ds, [5, 3, 2], generator=flow.Generator().manual_seed(1))
    assert again[0].indices == a.indices
    fr = random_split(ds, [0.34, 0.33, 0.33], generator=flow.Generator().manual_seed(0))
    assert [len(s) for s in fr] == [4, 3, 3]  # remainders round-robin, as torch
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        random_split(ds, [5, 4])
    with pytest.raises(ValueError, match="Fraction at index 0 is not between 0 and 1"):
        random_split(ds, [1.5, -0.5])


def test_samplers_match_torch_where_deterministic():
    data = range(7)
    assert list(SequentialSampler(data)) == list(tdata.SequentialSampler(data))
    for drop in (False, True):
        ours = BatchSampler(SequentialSampler(data), 3, drop)
        theirs = tdata.BatchSampler(tdata.SequentialSampler(data), 3, drop)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_random_samplers():
    g = flow.Generator().manual_seed(3)
    perm = list(RandomSampler(range(10), generator=g))
    assert sorted(perm) == list(range(10))
    assert list(RandomSampler(range(10), generator=flow.Generator().manual_seed(3))) == perm
    more = list(RandomSampler(range(4), num_samples=10, generator=g))
    assert len(more) == 10 and sorted(more[:8]) == sorted(list(range(4)) * 2)
    rep = RandomSampler(range(3), replacement=True, num_samples=50, generator=g)
    assert len(list(rep)) == len(rep) == 50 and set(rep) <= {0, 1, 2}
    flow.manual_seed(5)
    first = list(RandomSampler(range(20)))
    flow.manual_seed(5)
    assert list(RandomSampler(range(20))) == first  # seeded from the global generator
    sub = list(SubsetRandomSampler([10, 20, 30], generator=g))
    assert sorted(sub) == [10, 20, 30]
    w = list(WeightedRandomSampler([0.0, 1.0, 3.0], 200, generator=g))
    assert 0 not in w and w.count(2) > w.count(1)
    nr = list(WeightedRandomSampler(flow.tensor([1.0, 1.0, 1.0, 0.0]), 3, replacement=False,
                                    generator=g))
    assert sorted(nr) == [0, 1, 2]


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: RandomSampler(range(3), replacement=1), TypeError, "replacement should be"),
    (lambda: RandomSampler(range(3), num_samples=0), ValueError, "num_samples should be"),
    (lambda: WeightedRandomSampler([1.0], 0), ValueError, "num_samples should be"),
    (lambda: WeightedRandomSampler([1.0], 1, replacement=0), ValueError, "replacement"),
    (lambda: WeightedRandomSampler([[1.0]], 1), ValueError, "1d sequence"),
    (lambda: list(WeightedRandomSampler([1.0, 0.0], 3, replacement=False)), RuntimeError,
     "without replacement"),  # (as torch: more than the weights, when iterated)
    (lambda: BatchSampler(range(3), 0, False), ValueError, "batch_size should be"),
    (lambda: BatchSampler(range(3), 2, 1), ValueError, "drop_last should be"),
])
def test_sampler_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def _labels(loader):
    return [b[1].tolist() for b in loader]


def test_dataloader_batches_like_torch():
    n = 10
    ours = _ds(n)
    theirs = tdata.TensorDataset(torch.arange(2.0 * n).reshape(n, 2), torch.arange(n))
    for kw in [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=10),
               dict(batch_size=4, sampler=[9, 1, 5, 5, 0])]:
        a, b = DataLoader(ours, **kw), tdata.DataLoader(theirs, **kw)
        assert len(a) == len(b)
        assert [_to_py(x) for x in a] == [_to_py(x) for x in b]
    a = DataLoader(ours, batch_size=None)
    b = tdata.DataLoader(theirs, batch_size=None)
    assert [_to_py(x) for x in a] == [_to_py(x) for x in b]
    bs = [[0, 1], [5], [9, 8, 7]]
    assert _labels(DataLoader(ours, batch_sampler=bs)) == bs
    assert DataLoader(ours, batch_size=2, collate_fn=len).__iter__().__next__() == 2


def test_shuffle_reproducible_and_independent_of_workers():
    ds = _ds(20)
    runs = [_labels(DataLoader(ds, batch_size=4, shuffle=True, num_workers=w,
                               generator=flow.Generator().manual_seed(7))) for w in (0, 2, 0)]
    assert runs[0] == runs[1] == runs[2]
    assert sorted(sum(runs[0], [])) == list(range(20)) and runs[0][0] != [0, 1, 2, 3]
    loader = DataLoader(ds, batch_size=20, shuffle=True,
                        generator=flow.Generator().manual_seed(7))
    assert _labels(loader) != _labels(loader)  # a new order every epoch


class _Echo(Dataset):
    """Sample i -> (i, worker id, the value worker_init_fn stored); fails on `bad`."""

    def __init__(self, n, bad=None):
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise ValueError(f"bad sample {i}")
        info = get_worker_info()
        return i, -1 if info is None else info.id, _INIT.get("x", 0)


_INIT = {}


def _init(worker_id):
    _INIT["x"] = 100 + worker_id


def test_workers_order_init_fn_and_worker_info():
    loader = DataLoader(_Echo(11), batch_size=2, num_workers=3, worker_init_fn=_init)
    batches = list(loader)
    assert sum((b[0].tolist() for b in batches), []) == list(range(11))
    assert [b[1].tolist()[0] for b in batches] == [0, 1, 2, 0, 1, 2]  # round robin
    assert [b[2].tolist()[0] for b in batches] == [100, 101, 102, 100, 101, 102]
    assert get_worker_info() is None and "x" not in _INIT


def test_worker_exception_is_reraised():
    with pytest.raises(ValueError, match="Caught ValueError in DataLoader worker process 1"):
        list(DataLoader(_Echo(8, bad=3), batch_size=2, num_workers=2))


class _Count(IterableDataset):
    """0..n-1, split between workers by get_worker_info as torch's docs show."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))

    def __len__(self):
        return self.n


def test_iterable_dataset():
    assert _flat(DataLoader(_Count(7), batch_size=3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert _flat(DataLoader(_Count(7), batch_size=3, drop_last=True)) == [[0, 1, 2],
                                                                          [3, 4, 5]]
    assert len(DataLoader(_Count(7), batch_size=3)) == 3
    out = _flat(DataLoader(_Count(9), batch_size=2, num_workers=2))
    assert out == [[0, 2], [1, 3], [4, 6], [5, 7], [8]]  # worker 0, 1, 0, 1, 0 as torch
    assert list(DataLoader(_Count(3), batch_size=None)) == [0, 1, 2]


def _flat(loader):
    return [b.tolist() for b in loader]


def test_spawn_start_method():
    ctx = multiprocessing.get_context("spawn")
    loader = DataLoader(_ds(6), batch_size=4, num_workers=1, multiprocessing_context=ctx,
                        shuffle=True, generator=flow.Generator().manual_seed(2))
    ref = DataLoader(_ds(6), batch_size=4, shuffle=True,
                     generator=flow.Generator().manual_seed(2))
    assert _labels(loader) == _labels(ref)


@pytest.mark.parametrize("kw,exc,match", [
    (dict(num_workers=-1), ValueError, "num_workers option should be non-negative"),
    (dict(timeout=-1), ValueError, "timeout option should be non-negative"),
    (dict(prefetch_factor=2), ValueError, "prefetch_factor option could only be specified"),
    (dict(persistent_workers=True), ValueError, "persistent_workers option needs"),
    (dict(sampler=[0], shuffle=True), ValueError, "mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), ValueError, "batch_sampler option is mutually"),
    (dict(batch_size=None, drop_last=True), ValueError, "batch_size=None option disables"),
    (dict(iterable=True, shuffle=True), ValueError, "expected unspecified shuffle option"),
    (dict(iterable=True, sampler=[0]), ValueError, "expected unspecified sampler option"),
])
def test_dataloader_errors(kw, exc, match):
    ds = _Count(3) if kw.pop("iterable", False) else _ds(3)
    with pytest.raises(exc, match=match):
        DataLoader(ds, **kw)


_ORPHAN_SCRIPT = """
import sys, time
import flowgrad as flow
import flowgrad.utils.data.dataloader as dl
from flowgrad.utils.data import DataLoader, TensorDataset
dl._USE_PDEATHSIG = sys.argv[1] == "1"
it = iter(DataLoader(TensorDataset(flow.arange(64.0)), batch_size=2, num_workers=2,
                     multiprocessing_context=sys.argv[2]))
next(it)
print(" ".join(str(w.pid) for w in it._workers), flush=True)
time.sleep(120)
"""


def _running(pid):
    """Whether `pid` exists and is not a zombie (an orphan that exited but that a
    non-reaping init has not collected)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("pdeathsig,method", [("1", "fork"), ("0", "fork"),
                                              ("1", "forkserver")],
                         ids=["pdeathsig-fork", "watchdog-only-fork", "pdeathsig-forkserver"])
def test_workers_exit_when_the_main_process_is_killed(pdeathsig, method):
    proc = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT, pdeathsig, method],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2 and all(_running(p) for p in pids), line
        time.sleep(0.2)
        assert all(_running(p) for p in pids)  # workers live while the loader does
    finally:
        proc.kill()  # SIGKILL: no cleanup runs in the main process
        proc.wait()
        proc.stdout.close()
    deadline = time.monotonic() + 8.0
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if _running(p)]
    for p in left:  # don't leak them into the rest of the run if the test fails
        os.kill(p, signal.SIGKILL)
    assert left == [], f"DataLoader workers {left} outlived their killed main process"
