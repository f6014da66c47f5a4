"""flowgrad.save / flowgrad.load: exact round trips through safetensors, and clear errors
for truncated or tampered files."""
import io
import json
import math
import pathlib
from collections import OrderedDict

import numpy as np
import pytest
from safetensors.numpy import save_file

import flowgrad as flow


def _same(a, b):
    """Exact equality of nests, tensors compared by dtype, shape and bytes."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, flow.Tensor):
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        assert a._data.tobytes() == b._data.tobytes()
        assert a.requires_grad == b.requires_grad
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys())
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def _arr(dtype, shape):
    return flow.tensor(np.arange(int(np.prod(shape))).reshape(shape).astype(dtype))


TENSORS = [
    ("f32", lambda: flow.randn(3, 4)),
    ("f64", lambda: flow.randn(2, dtype=flow.float64)),
    ("f16", lambda: flow.randn(5).half()),
    ("bf16", lambda: flow.randn(2, 3).to(flow.bfloat16)),
    ("i64", lambda: flow.tensor([np.iinfo(np.int64).min, -1, np.iinfo(np.int64).max])),
    ("i32", lambda: _arr(np.int32, (2, 2))),
    ("i16", lambda: _arr(np.int16, (3,))),
    ("i8", lambda: _arr(np.int8, (3,))),
    ("u8", lambda: _arr(np.uint8, (4,))),
    ("bool", lambda: flow.tensor([True, False, True])),
    ("0d", lambda: flow.tensor(3.5)),
    ("0d-int", lambda: flow.tensor(7)),
    ("empty", lambda: flow.zeros(0, 3)),
    ("empty-int", lambda: flow.zeros(2, 0, dtype=flow.int64)),
    ("strided", lambda: flow.randn(3, 4).t()),
    ("special", lambda: flow.tensor([math.nan, math.inf, -math.inf, -0.0])),
]


@pytest.mark.parametrize("name,make", TENSORS, ids=[t[0] for t in TENSORS])
def test_tensor_round_trip(tmp_path, name, make):
    t = make()
    flow.save({"t": t, "nested": [t, (t,)]}, tmp_path / "x.safetensors")
    out = flow.load(tmp_path / "x.safetensors")
    _same(out["t"], flow.tensor(t._data.copy()))
    assert out["nested"][0] is out["nested"][1][0] is out["t"]  # stored once, shared again


def _training_state():
    w = flow.nn.Parameter(flow.randn(3, 2))
    b = flow.randn(3, requires_grad=True)
    opt = flow.optim.Adam([{"params": [w]}, {"params": [b], "lr": 0.01}], lr=0.1, amsgrad=True)
    for _ in range(2):
        opt.zero_grad()
        (w.sum() * b.sum()).backward()
        opt.step()
    return w, b, opt


def test_checkpoint_round_trip_exact(tmp_path):
    w, b, opt = _training_state()
    ckpt = {"model": OrderedDict(weight=w, bias=b.detach()), "optim": opt.state_dict(),
            "epoch": 3, "best": math.inf, "loss": math.nan, "note": "ok", "flags": [True, None],
            "pair": (1, 2.5), "arr": np.arange(3, dtype=np.float32), 7: "int key",
            "dtype": flow.float16, "np": np.float32(0.25)}
    path = str(tmp_path / "ckpt.safetensors")
    flow.save(ckpt, path)
    out = flow.load(path)
    expected = dict(ckpt, np=0.25)
    _same(out, expected)
    assert isinstance(out["model"]["weight"], flow.nn.Parameter)
    assert out["model"]["weight"].requires_grad and not out["model"]["bias"].requires_grad
    assert out["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert list(out["optim"]["state"].keys()) == [0, 1]


def test_optimizer_resumes_from_checkpoint(tmp_path):
    w, b, opt = _training_state()
    buf = io.BytesIO()
    flow.save({"w": w, "b": b, "optim": opt.state_dict()}, buf)
    buf.seek(0)
    ckpt = flow.load(buf)
    w2, b2 = ckpt["w"], ckpt["b"]
    opt2 = flow.optim.Adam([{"params": [w2]}, {"params": [b2], "lr": 0.5}], lr=0.5,
                           amsgrad=True)
    opt2.load_state_dict(ckpt["optim"])
    for o, (x, y) in ((opt, (w, b)), (opt2, (w2, b2))):
        o.zero_grad()
        (x.sum() * y.sum()).backward()
        o.step()
    np.testing.assert_array_equal(w.detach().numpy(), w2.detach().numpy())
    np.testing.assert_array_equal(b.detach().numpy(), b2.detach().numpy())


def test_plain_safetensors_file_loads_flat(tmp_path):
    path = tmp_path / "plain.safetensors"
    save_file({"a": np.ones((2, 2), np.float32), "b": np.arange(3)}, str(path))
    out = flow.load(pathlib.Path(path))
    assert sorted(out) == ["a", "b"] and out["b"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("obj,match", [
    ({"x": object()}, "cannot store an object of type object at x"),
    ({(1, 2): flow.ones(1)}, "dict keys must be"),
    ({"a": [1, {"b": {1, 2}}]}, "at a.1.b"),
])
def test_save_rejects_unsupported_and_keeps_old_file(tmp_path, obj, match):
    path = tmp_path / "c.safetensors"
    flow.save({"epoch": 1}, path)
    with pytest.raises(TypeError, match=match):
        flow.save(obj, path)
    assert flow.load(path) == {"epoch": 1}


def _raw(header, payload=b""):
    h = json.dumps(header).encode()
    return len(h).to_bytes(8, "little") + h + payload


def _meta(structure):
    return {"format": "flowgrad-checkpoint-1", "structure": json.dumps(structure)}


T2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
NODE = {"T": "w", "dtype": "float32", "shape": [2]}
BAD = [
    ("truncated", lambda good: good[:-3], "not a valid safetensors file"),
    ("empty", lambda good: b"", "not a valid safetensors file"),
    ("huge header", lambda good: (10 ** 9).to_bytes(8, "little") + good[8:],
     "not a valid safetensors file"),
    ("garbage header", lambda good: good[:8] + b"{" * (len(good) - 8),
     "not a valid safetensors file"),
    ("wrong sizes", lambda good: _raw({"w": dict(T2, shape=[3])}, bytes(8)),
     "not a valid safetensors file"),
    ("structure not json", lambda good: _raw(
        {"__metadata__": {"format": "flowgrad-checkpoint-1", "structure": "{nope"}, "w": T2},
        bytes(8)), "not valid JSON"),
    ("missing tensor", lambda good: _raw(
        {"__metadata__": _meta({"D": [["w", dict(NODE, T="v")]]}), "w": T2}, bytes(8)),
     "refers to tensor 'v'"),
    ("shape mismatch", lambda good: _raw(
        {"__metadata__": _meta({"D": [["w", dict(NODE, shape=[1, 2])]]}), "w": T2}, bytes(8)),
     "float32\\[2\\] in the file but float32\\[1, 2\\]"),
    ("dtype mismatch", lambda good: _raw(
        {"__metadata__": _meta(dict(NODE, dtype="int32")), "w": T2}, bytes(8)),
     "in the metadata"),
    ("unreferenced tensor", lambda good: _raw(
        {"__metadata__": _meta({"V": 3}), "w": T2}, bytes(8)), "not referenced"),
    ("malformed node", lambda good: _raw(
        {"__metadata__": _meta({"D": [["w", {"X": 1}]]}), "w": T2}, bytes(8)),
     "malformed"),
    ("object value", lambda good: _raw(
        {"__metadata__": _meta({"V": {"__reduce__": "os.system"}}), "w": T2}, bytes(8)),
     "not a plain value"),
    ("unknown format", lambda good: _raw(
        {"__metadata__": {"format": "other", "structure": "{}"}, "w": T2}, bytes(8)),
     "unknown checkpoint format"),
]


@pytest.mark.parametrize("name,corrupt,match", BAD, ids=[b[0] for b in BAD])
def test_corrupt_files_raise_clear_errors(tmp_path, name, corrupt, match):
    good_path = tmp_path / "good.safetensors"
    flow.save({"w": flow.ones(2)}, good_path)
    bad_path = tmp_path / "bad.safetensors"
    bad_path.write_bytes(corrupt(good_path.read_bytes()))
    with pytest.raises(ValueError, match=match) as info:
        flow.load(bad_path)
    assert "bad.safetensors" in str(info.value)
    assert flow.load(good_path)["w"].tolist() == [1.0, 1.0]
