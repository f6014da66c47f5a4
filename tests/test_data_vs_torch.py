"""flowgrad.utils.data against torch.utils.data, in one process: default_collate and
default_convert, DataLoader arguments and persistent workers, datasets and samplers.

Each case is a function of `m`, a namespace holding a framework (`m.t`) and its
utils.data (`m.d`). It runs under torch and under flowgrad; both must raise (flowgrad an
instance of torch's exception class) or both return results of the same structure,
container types, dtypes, shapes and values. Random orders are compared as sorted values
plus a same-seed reproducibility flag, since the two RNG streams differ."""
import collections
import collections.abc as cabc
import typing
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import flowgrad as flow
import flowgrad.utils.data as fdata

TORCH = SimpleNamespace(t=torch, d=tdata)
FLOW = SimpleNamespace(t=flow, d=fdata)

P = collections.namedtuple("P", "x y")


class Q(typing.NamedTuple):
    a: int
    b: str


class Pair(list):
    """A list whose constructor takes two items, not an iterable."""

    def __init__(self, a, b):
        super().__init__([a, b])


class Ro(cabc.Sequence):
    def __init__(self, *a):
        self.a = list(a)

    def __getitem__(self, i):
        return self.a[i]

    def __len__(self):
        return len(self.a)


def _dd(**kw):
    d = collections.defaultdict(list)
    d.update(kw)
    return d


def _py(obj):
    """A comparable picture of `obj`: container types, tensor dtypes, shapes, values."""
    if isinstance(obj, (torch.Tensor, flow.Tensor)):
        return "T", str(obj.dtype).split(".")[-1], tuple(obj.shape), obj.tolist()
    if isinstance(obj, np.ndarray):
        return "nd", obj.dtype.str, obj.tolist()
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return "nt", type(obj).__name__, [_py(v) for v in obj]
    if isinstance(obj, cabc.Mapping):
        factory = getattr(obj, "default_factory", None)
        return type(obj).__name__, factory, [(k, _py(v)) for k, v in obj.items()]
    if isinstance(obj, cabc.Sequence) and not isinstance(obj, (str, bytes)):
        return type(obj).__name__, [_py(v) for v in obj]
    return type(obj).__name__, obj


def _outcome(case, m):
    try:
        return None, _py(case(m))
    except Exception as exc:  # the class is what is compared
        return exc, None


def _check(case):
    t_exc, t_out = _outcome(case, TORCH)
    f_exc, f_out = _outcome(case, FLOW)
    if t_exc is not None:
        assert f_exc is not None, f"torch raised {t_exc!r}; flowgrad returned {f_out}"
        assert isinstance(f_exc, type(t_exc)), f"torch raised {t_exc!r}, flowgrad {f_exc!r}"
    else:
        assert f_exc is None, f"torch returned {t_out}; flowgrad raised {f_exc!r}"
        assert f_out == t_out


def _collate(*batch):
    return lambda m: m.d.default_collate(list(batch))


def _convert(data):
    return lambda m: m.d.default_convert(data)


COLLATE = {
    "py_int_then_float": _collate(1, 2.5, 3),
    "py_bool_then_int": _collate(True, 2),
    "py_floats_float64": _collate(1.5, 2, 3),
    "py_ints_int64": _collate(1, 2),
    "none": _collate(None, None),
    "np_str_scalars": _collate(np.str_("a"), np.str_("b")),
    "np_scalars_mixed": _collate(np.float64(1.5), np.float32(2)),
    "np_bool_scalars": _collate(np.bool_(True), np.bool_(False)),
    "np_float16_arrays": _collate(np.ones(2, np.float16), np.zeros(2, np.float16)),
    "np_uint8_arrays": _collate(np.ones(2, np.uint8), np.zeros(2, np.uint8)),
    "np_str_arrays": _collate(np.array(["a"]), np.array(["b"])),
    "np_shapes_differ": _collate(np.zeros(2), np.zeros(3)),
    "tensor_views": lambda m: m.d.default_collate(list(m.t.arange(12.0).reshape(3, 4).t())),
    "tensor_0d_dtypes": lambda m: m.d.default_collate([m.t.tensor(1, dtype=m.t.int8),
                                                      m.t.tensor(2.0)]),
    "unequal_lists": _collate([1, 2], [3]),
    "defaultdict": _collate(_dd(x=1), _dd(x=2)),
    "ordereddict": _collate(collections.OrderedDict(b=1, a=2.0),
                            collections.OrderedDict(b=3, a=4.0)),
    "namedtuple_str_field": _collate(Q(1, "x"), Q(2, "y")),
    "namedtuple_tensor": lambda m: m.d.default_collate([P(1, m.t.zeros(2)),
                                                       P(2, m.t.ones(2))]),
    "tuple_of_str": _collate((1, "x"), (2, "y")),
    "list_subclass_init": _collate(Pair(1, 2), Pair(3, 4)),
    "custom_sequence": _collate(Ro(1, 2.0), Ro(3, 4.0)),
    "nested": _collate({"a": [np.float32(1), {"b": (1, "x")}]},
                       {"a": [np.float32(2), {"b": (2, "y")}]}),
    "collate_fn_map": lambda m: m.d._utils.collate.collate(
        [(1, "a"), (2, "b")], collate_fn_map={
            **m.d._utils.collate.default_collate_fn_map, str: lambda b, **k: "".join(b)}),
    "convert_defaultdict": _convert(_dd(x=np.ones(2))),
    "convert_list_subclass": _convert(Pair(np.ones(1), 2)),
    "convert_np_scalar": _convert(np.float16(1.5)),
    "convert_np_str": _convert(np.str_("a")),
    "convert_tuple": _convert((np.zeros(2), 1, "a")),
    "convert_namedtuple": _convert(P(np.zeros(2, np.float32), "s")),
    "convert_str_array": _convert(np.array(["a", "b"])),
}


@pytest.mark.parametrize("case", COLLATE.values(), ids=COLLATE.keys())
def test_collate(case):
    _check(case)


class Counting:
    """Counts its fetches: a worker's copy keeps counting only if the worker persists."""

    def __init__(self):
        self.n = 0

    def __getitem__(self, i):
        self.n += 1
        return self.n

    def __len__(self):
        return 4


def _epochs(m, **kw):
    dl = m.d.DataLoader(Counting(), batch_size=2, **kw)
    return [b.tolist() for b in dl] + [b.tolist() for b in dl]


class FailsAt1:
    def __getitem__(self, i):
        if i == 1:
            raise KeyError("boom")
        return i

    def __len__(self):
        return 2


def _worker_key_error(m):
    try:
        list(m.d.DataLoader(FailsAt1(), num_workers=1))
    except KeyError as exc:
        text = str(exc)  # the worker's traceback, as lines (not one repr'd string)
        return [s in text for s in ("worker process 0", "\nOriginal Traceback", "'boom'")]
    return None


def _set_batch_size(m):
    dl = m.d.DataLoader([1, 2, 3])
    dl.batch_size = 2


def _shuffled(m, seed):
    def run():
        gen = m.t.Generator().manual_seed(seed)
        return [b.tolist() for b in m.d.DataLoader(list(range(10)), batch_size=4,
                                                   shuffle=True, generator=gen)]
    a = run()
    return sorted(sum(a, [])), [len(b) for b in a], a == run()


LOADER = {
    "mp_context_without_workers": lambda m: m.d.DataLoader([1], multiprocessing_context="fork"),
    "mp_context_bad_name": lambda m: m.d.DataLoader([1], num_workers=1,
                                                    multiprocessing_context="bogus"),
    "mp_context_bad_type": lambda m: m.d.DataLoader([1], num_workers=1,
                                                    multiprocessing_context=5),
    "timeout_without_workers": lambda m: list(m.d.DataLoader([1], timeout=2)),
    "prefetch_factor_zero": lambda m: list(m.d.DataLoader([1, 2], num_workers=1,
                                                          prefetch_factor=0)),
    "set_batch_size_later": _set_batch_size,
    "persistent_workers_state": lambda m: _epochs(m, num_workers=1, persistent_workers=True),
    "shuffle_seeded": lambda m: _shuffled(m, 3),
    "worker_key_error_message": _worker_key_error,
    "iterator_len": lambda m: len(iter(m.d.DataLoader([1, 2, 3], batch_size=2))),
}


@pytest.mark.parametrize("case", LOADER.values(), ids=LOADER.keys())
def test_dataloader(case):
    _check(case)


class Stream:
    """A minimal IterableDataset body, made a subclass of each framework's class."""

    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


def _stream(m, items):
    return type("S", (Stream, m.d.IterableDataset), {})(items)


def _subset_override(m):
    cls = type("S", (m.d.Subset,), {"__getitem__": lambda self, i: 0})
    return cls([1, 2], [0])


def _split(n, lengths, kind=list):
    def case(m):
        parts = m.d.random_split(range(n), kind(lengths),
                                 generator=m.t.Generator().manual_seed(0))
        return [len(p) for p in parts], sorted(i for p in parts for i in p)
    return case


DATASETS = {
    "tensordataset_size_mismatch": lambda m: m.d.TensorDataset(m.t.zeros(3), m.t.zeros(4)),
    "concat_empty": lambda m: m.d.ConcatDataset([]),
    "concat_cumsum": lambda m: m.d.ConcatDataset.cumsum([[1, 2], [], [3]]),
    "concat_negative": lambda m: [m.d.ConcatDataset([[1, 2, 3], [4]])[-i] for i in (1, 4)],
    "subset_getitems": lambda m: m.d.Subset([10, 11, 12, 13], [3, 1]).__getitems__([1, 0]),
    "subset_override_getitem": _subset_override,
    "stack_getitems_tuple": lambda m: m.d.StackDataset([1, 2], [3, 4]).__getitems__([1, 0]),
    "stack_getitems_dict": lambda m: m.d.StackDataset(a=[1, 2], b=[3, 4]).__getitems__([1]),
    "stack_no_datasets": lambda m: m.d.StackDataset(),
    "chain_len_map_style": lambda m: len(m.d.ChainDataset([_stream(m, [1]), [2]])),
    "chain_iter_map_style": lambda m: list(m.d.ChainDataset([_stream(m, [1]), [2]])),
    "chain_ok": lambda m: (list(_stream(m, [1]) + _stream(m, [2, 3])),
                           len(m.d.ChainDataset([_stream(m, [1]), _stream(m, [2, 3])]))),
    "iterable_dataset_abstract": lambda m: m.d.IterableDataset(),
    "split_tensor_lengths": lambda m: _split(3, m.t.tensor([1, 2]), list)(m),
    "split_float_lengths": _split(3, [1.0, 2.0]),
    "split_fractions_11": _split(11, [0.3, 0.3, 0.4]),
    "split_fractions_7": _split(7, [0.1, 0.1, 0.1, 0.7]),
    "split_thirds": _split(5, [1 / 3, 1 / 3, 1 / 3]),
    "random_sampler_empty_replacement": lambda m: list(
        m.d.RandomSampler(range(0), replacement=True, num_samples=3)),
    "random_sampler_empty": lambda m: list(m.d.RandomSampler(range(0), num_samples=3)),
}


@pytest.mark.parametrize("case", DATASETS.values(), ids=DATASETS.keys())
def test_datasets(case):
    _check(case)


@pytest.mark.parametrize("make", [
    lambda: fdata.default_collate([np.uint16(3), np.uint16(4)]),
    lambda: fdata.default_convert(np.array([1, 2], np.uint32)),
], ids=["collate_uint16_scalars", "convert_uint32_array"])
def test_unsupported_numpy_dtype_is_named(make):
    # torch has these dtypes; flowgrad does not, and must say so (not KeyError, not int64)
    with pytest.raises(TypeError, match="does not support NumPy dtype uint"):
        make()
