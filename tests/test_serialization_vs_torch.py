"""flowgrad.save / flowgrad.load against torch.save / torch.load, in the same process: round
trips, files crossing between the two (zip and legacy formats), storage sharing, load's
arguments (map_location, mmap, weights_only), damaged files, and load_state_dict."""
import collections
import io
import pickle
import zipfile

import ml_dtypes
import numpy as np
import pytest
import torch

import flowgrad as flow

NT = collections.namedtuple("NT", "a b")
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]


def _numpy(t):
    if isinstance(t, torch.Tensor):
        t = t.detach()
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16) \
            if t.dtype == torch.bfloat16 else t.numpy()
    return np.asarray(t._data)


def _same(t, f, where="obj"):
    """flowgrad's object `f` matches torch's `t`: types, dtypes, shapes, strides, values,
    requires_grad, Parameter-ness, and the _metadata of OrderedDicts."""
    if isinstance(t, torch.Tensor) and t.is_sparse:
        assert getattr(f, "is_sparse", False), where
        _same(t._indices(), f._indices(), where + ".indices")
        _same(t._values(), f._values(), where + ".values")
        assert tuple(f.shape) == tuple(t.shape), where
    elif isinstance(t, torch.Tensor):
        assert type(f).__name__ == type(t).__name__, (where, type(f), type(t))
        assert str(f.dtype).split(".")[1] == str(t.dtype).split(".")[1], (where, f.dtype)
        assert tuple(f.shape) == tuple(t.shape), (where, f.shape, t.shape)
        assert tuple(f.stride()) == tuple(t.stride()), (where, f.stride(), t.stride())
        assert f.requires_grad == t.requires_grad, where
        assert _numpy(f).tobytes() == np.ascontiguousarray(_numpy(t)).tobytes(), where
    elif isinstance(t, (torch.Size, torch.device, torch.dtype, torch.layout)):
        assert type(f).__name__ == type(t).__name__, (where, type(f))
        assert str(f).split(".")[-1] == str(t).split(".")[-1], (where, f, t)
    elif isinstance(t, dict):
        assert type(f) is type(t) and list(f) == list(t), (where, type(f), list(f))
        assert getattr(f, "_metadata", None) == getattr(t, "_metadata", None), where
        for k in t:
            _same(t[k], f[k], f"{where}[{k!r}]")
    elif isinstance(t, (list, tuple)):
        assert type(f) is type(t) and len(f) == len(t), (where, type(f))
        for i, (a, b) in enumerate(zip(t, f)):
            _same(a, b, f"{where}[{i}]")
    else:
        assert type(f) is type(t) and (f == t or f != f and t != t), (where, f, t)


def _with_metadata(lib):
    sd = collections.OrderedDict(w=lib.arange(4.0))
    sd._metadata = collections.OrderedDict([("", {"version": 1})])
    return sd


def _optimizer_like(lib):
    return {"state": {0: {"step": lib.tensor(3.0), "exp_avg": lib.ones(2, 2) / 3}},
            "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0], "fused": None}]}


# (label, object built from the torch or the flowgrad namespace); every one is what torch.save
# writes and torch.load(weights_only=True) reads
OBJECTS = [(f"dtype {name}", lambda lib, name=name: lib.arange(6).reshape(2, 3).to(
    getattr(lib, name))) for name in DTYPES] + [
    ("0-d", lambda lib: lib.tensor(2.5)),
    ("empty", lambda lib: lib.zeros(0, 3, dtype=lib.int64)),
    ("transposed", lambda lib: lib.arange(6.0).reshape(2, 3).t()),
    ("stepped slice", lambda lib: lib.arange(10.0)[1::3]),
    ("expanded", lambda lib: lib.arange(3.0).expand(4, 3)),
    ("requires_grad leaf", lambda lib: lib.ones(2, requires_grad=True)),
    ("requires_grad non-leaf", lambda lib: lib.ones(2, requires_grad=True) * 2),
    ("parameter", lambda lib: lib.nn.Parameter(lib.ones(2))),
    ("frozen parameter", lambda lib: lib.nn.Parameter(lib.ones(2), requires_grad=False)),
    ("nested", lambda lib: {"a": [lib.ones(1), (lib.zeros(2), {"b": None})], 3: "s"}),
    ("OrderedDict with _metadata", _with_metadata),
    ("optimizer state_dict", _optimizer_like),
    ("plain values", lambda lib: [True, 3, -0.0, float("inf"), float("nan"), "s", None, 2 ** 70]),
    ("complex scalar", lambda lib: {"z": 1 + 2j}),
    ("bytes and bytearray", lambda lib: [b"ab", bytearray(b"c")]),
    ("set", lambda lib: {"s": {1, 2}}),
    ("tuple key", lambda lib: {(1, 2): lib.ones(1)}),
    ("Size", lambda lib: {"shape": lib.Size([2, 3])}),
    ("device", lambda lib: lib.device("cpu")),
    ("dtype", lambda lib: [lib.float16, lib.complex64]),
    ("layout", lambda lib: [lib.strided, lib.sparse_coo]),
    ("sparse", lambda lib: lib.sparse_coo_tensor([[0, 2]], [1.0, 5.0], (4,))),
    ("complex in a state_dict", lambda lib: {"w": lib.ones(2, dtype=lib.complex64)}),
    ("a few MB", lambda lib: {"big": lib.arange(1_000_000.0).reshape(1000, 1000)[::2]}),
]
IDS = [o[0] for o in OBJECTS]


def _torch_round_trip(obj, **save_kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **save_kw)
    buf.seek(0)
    return buf


@pytest.mark.parametrize("fmt", [None, "torch"])
@pytest.mark.parametrize("label,make", OBJECTS, ids=IDS)
def test_round_trip_matches_torch(label, make, fmt):
    want = torch.load(_torch_round_trip(make(torch)), weights_only=True)
    buf = io.BytesIO()
    flow.save(make(flow), buf, format=fmt)
    buf.seek(0)
    _same(want, flow.load(buf))


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("label,make", OBJECTS, ids=IDS)
def test_torch_file_loads_in_flowgrad(tmp_path, label, make, legacy):
    path = tmp_path / "t.ckpt"
    torch.save(make(torch), path, _use_new_zipfile_serialization=not legacy)
    _same(torch.load(path, weights_only=True), flow.load(path))


@pytest.mark.parametrize("label,make", OBJECTS, ids=IDS)
def test_flowgrad_file_loads_in_torch(tmp_path, label, make):
    flow.save(make(flow), tmp_path / "f.pt")
    _same(torch.load(tmp_path / "f.pt", weights_only=True), flow.load(tmp_path / "f.pt"))
    want = torch.load(_torch_round_trip(make(torch)), weights_only=True)
    _same(want, flow.load(tmp_path / "f.pt"))


def _views(lib):
    x = lib.arange(12.0).reshape(3, 4)
    return {"x": x, "t": x.t(), "col": x[:, 1], "step": x[::2, 1::2], "row": x[1].expand(2, 4),
            "alone": lib.arange(3.0).expand(2, 3)}


def _write(obj):
    obj["x"][1, 1] = -1.0  # seen through t, col, row after a load that kept the sharing
    obj["alone"][0, 0] = -2.0  # an expanded tensor aliases itself
    return obj


WRITERS = {
    "flowgrad safetensors": lambda obj, buf: flow.save(obj, buf),
    "flowgrad torch format": lambda obj, buf: flow.save(obj, buf, format="torch"),
}


@pytest.mark.parametrize("writer,reader", [
    ("torch zip", "flowgrad"), ("torch legacy", "flowgrad"), ("flowgrad safetensors", "flowgrad"),
    ("flowgrad torch format", "flowgrad"), ("flowgrad torch format", "torch")])
def test_storage_sharing_survives_like_torch(writer, reader):
    want = _write(torch.load(_torch_round_trip(_views(torch)), weights_only=True))
    if writer.startswith("torch"):
        buf = _torch_round_trip(_views(torch),
                                _use_new_zipfile_serialization=writer == "torch zip")
    else:
        buf = io.BytesIO()
        WRITERS[writer](_views(flow), buf)
        buf.seek(0)
    loaded = flow.load(buf) if reader == "flowgrad" else torch.load(buf, weights_only=True)
    got = _write(loaded)
    if reader == "torch":
        for k in want:
            assert torch.equal(got[k], want[k]), k
    else:
        _same(want, got)


def _outcome(fn):
    try:
        fn()
    except Exception as exc:  # the class is what is compared
        return type(exc)
    return None


def _saved(tmp_path, obj, legacy=False):
    path = tmp_path / "c.ckpt"
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return path


LOAD_ARGS = [
    ("map_location cpu", lambda lib, p: lib.load(p, map_location="cpu")),
    ("map_location device", lambda lib, p: lib.load(p, map_location=lib.device("cpu"))),
    ("map_location dict", lambda lib, p: lib.load(p, map_location={"cuda:0": "cpu"})),
    ("map_location callable", lambda lib, p: lib.load(p, map_location=lambda s, loc: s)),
    ("map_location cuda", lambda lib, p: lib.load(p, map_location="cuda")),
    ("map_location dict to cuda", lambda lib, p: lib.load(p, map_location={"cpu": "cuda"})),
    ("map_location int", lambda lib, p: lib.load(p, map_location=5)),
    ("mmap path", lambda lib, p: lib.load(p, mmap=True)),
    ("mmap str", lambda lib, p: lib.load(str(p), mmap=True)),
    ("mmap BytesIO", lambda lib, p: lib.load(io.BytesIO(p.read_bytes()), mmap=True)),
    ("open file", lambda lib, p: lib.load(open(p, "rb"))),  # noqa: SIM115
    ("weights_only False", lambda lib, p: lib.load(p, weights_only=False)),
]


@pytest.mark.parametrize("label,call", LOAD_ARGS, ids=[a[0] for a in LOAD_ARGS])
def test_load_arguments_raise_like_torch(tmp_path, label, call):
    if torch.cuda.is_available() and "cuda" in label:
        pytest.skip("compared with torch on a machine without CUDA")
    path = _saved(tmp_path, {"w": torch.arange(3.0)})
    assert _outcome(lambda: call(flow, path)) is _outcome(lambda: call(torch, path))


def test_mmap_of_a_legacy_file_raises_like_torch(tmp_path):
    path = _saved(tmp_path, {"w": torch.arange(3.0)}, legacy=True)
    assert _outcome(lambda: torch.load(path, mmap=True)) is RuntimeError
    with pytest.raises(RuntimeError, match="c.ckpt.*mmap can only be used"):
        flow.load(path, mmap=True)


class _Config:  # a class no loader allows by default
    pass


REFUSED = [
    ("namedtuple", lambda: NT(1, 2)),
    ("user class", lambda: {"cfg": _Config()}),
    ("defaultdict", lambda: collections.defaultdict(int, a=1)),
]


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("label,make", REFUSED, ids=[r[0] for r in REFUSED])
def test_weights_only_refuses_other_classes_like_torch(tmp_path, label, make, legacy):
    path = _saved(tmp_path, make(), legacy)
    assert _outcome(lambda: torch.load(path)) is pickle.UnpicklingError
    with pytest.raises(pickle.UnpicklingError, match="not an allowed global"):
        flow.load(path)
    assert flow.load(path, weights_only=False) == torch.load(path, weights_only=False) \
        or label == "user class"


@pytest.mark.parametrize("label,make", REFUSED[:1] + REFUSED[2:], ids=["namedtuple", "dict"])
def test_flowgrad_save_keeps_the_type_torch_keeps(label, make):
    buf = io.BytesIO()
    flow.save(make(), buf)  # not stored as a plain tuple/dict: torch's format keeps the type
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="not an allowed global"):
        flow.load(buf)
    buf.seek(0)
    assert type(flow.load(buf, weights_only=False)) is type(make())


def _rezip(blob, fn):
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(blob)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info.filename, fn(data) if info.filename.endswith("data.pkl")
                          else data)
    return out.getvalue()


# (label, damage, legacy, what flowgrad raises: a damaged pickle UnpicklingError, where torch's
# pickle reader raises what it runs into; damaged storage data torch's RuntimeError)
DAMAGED = [
    ("truncated data.pkl", lambda b, legacy: _rezip(b, lambda d: d[:len(d) // 2]), False,
     pickle.UnpicklingError),
    ("empty data.pkl", lambda b, legacy: _rezip(b, lambda d: b""), False,
     pickle.UnpicklingError),
    ("flipped data.pkl byte", lambda b, legacy: _rezip(
        b, lambda d: d[:20] + bytes([d[20] ^ 0xFF]) + d[21:]), False, pickle.UnpicklingError),
    ("legacy: truncated storage", lambda b, legacy: b[:-50], True, RuntimeError),
    ("legacy: truncated pickle", lambda b, legacy: b[:30], True, pickle.UnpicklingError),
    ("legacy: storage count wrong", lambda b, legacy: b[:-408] + b"\x07" + b[-407:], True,
     RuntimeError),
]


@pytest.mark.parametrize("label,damage,legacy,raises", DAMAGED, ids=[d[0] for d in DAMAGED])
def test_damaged_files_raise_naming_the_file(tmp_path, label, damage, legacy, raises):
    path = _saved(tmp_path, {"x": torch.arange(100.0), "y": [1, 2]}, legacy)
    path.write_bytes(damage(path.read_bytes(), legacy))
    want = _outcome(lambda: torch.load(path))
    assert want is not None and (raises is not RuntimeError or want is RuntimeError)
    with pytest.raises(raises, match="c.ckpt"):
        flow.load(path)


UNREADABLE = [
    ("uint16", lambda: torch.ones(2, dtype=torch.uint16), "uint16"),
    ("float8", lambda: torch.ones(2, dtype=torch.float8_e4m3fn), "float8"),
]


@pytest.mark.parametrize("label,make,match", UNREADABLE, ids=[u[0] for u in UNREADABLE])
def test_what_flowgrad_cannot_hold_is_refused_clearly(tmp_path, label, make, match):
    path = _saved(tmp_path, make())
    torch.load(path)  # torch reads it
    with pytest.raises(pickle.UnpicklingError, match=f"c.ckpt.*{match}"):
        flow.load(path)
    with pytest.raises(pickle.UnpicklingError, match=match):
        flow.load(path, weights_only=False)  # not the weights-only refusal: it cannot


STATE_DICTS = [
    ("plain", lambda sd: sd),
    ("missing key", lambda sd: {"weight": sd["weight"]}),
    ("unexpected key", lambda sd: dict(sd, extra=sd["bias"])),
    ("shape mismatch", lambda sd: dict(sd, bias=sd["bias"][:2])),
    ("float64", lambda sd: {k: v.double() for k, v in sd.items()}),
    ("int64", lambda sd: {k: v.long() for k, v in sd.items()}),
    ("transposed storage", lambda sd: dict(sd, weight=sd["weight"].t().contiguous().t())),
]


@pytest.mark.parametrize("assign", [False, True])
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("label,edit", STATE_DICTS, ids=[s[0] for s in STATE_DICTS])
def test_load_state_dict_from_a_torch_file(tmp_path, label, edit, strict, assign):
    torch.manual_seed(0)
    src = torch.nn.Linear(2, 3)
    torch.save(edit(src.state_dict()), tmp_path / "sd.pt")
    tm, fm = torch.nn.Linear(2, 3), flow.nn.Linear(2, 3)
    out = {}
    for name, lib, m in (("torch", torch, tm), ("flow", flow, fm)):
        try:
            res = m.load_state_dict(lib.load(tmp_path / "sd.pt"), strict=strict, assign=assign)
            out[name] = (sorted(res.missing_keys), sorted(res.unexpected_keys))
        except Exception as exc:  # the class is what is compared
            out[name] = type(exc)
    assert out["flow"] == out["torch"]
    if not isinstance(out["torch"], type):  # the loaded parameters (the rest are random)
        loaded = [k for k, _ in tm.named_parameters() if k not in out["torch"][0]]
        _same([tm.get_parameter(k) for k in loaded], [fm.get_parameter(k) for k in loaded])
