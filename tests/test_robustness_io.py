"""Checkpoint robustness: concurrent saves to one path, checksums, pathological metadata,
and views sharing storage after a round trip (compared with torch.save / torch.load)."""
import io
import json
import os
import threading

import numpy as np
import pytest
import torch
from safetensors import serialize

import flowgrad as flow


def _header(blob):
    n = int.from_bytes(blob[:8], "little")
    return n, json.loads(blob[8:8 + n])


# ---- (a) concurrent savers and loaders of one path ---------------------------------------
def test_threads_saving_and_loading_one_path_never_collide(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    flow.save({"w": flow.full((20000,), -1.0), "tid": -1}, path)
    errors, stop = [], threading.Event()
    loads = [0]

    def saver(tid):
        try:
            for _ in range(15):
                flow.save({"w": flow.full((20000,), float(tid)), "tid": tid}, path)
        except Exception as exc:  # noqa: BLE001 - collected and asserted on below
            errors.append(repr(exc))

    def loader():
        try:
            while not stop.is_set():
                out = flow.load(path)
                w = out["w"].numpy()
                assert w.shape == (20000,) and (w == out["tid"]).all(), "mixed file"
                loads[0] += 1
        except Exception as exc:  # noqa: BLE001
            errors.append(repr(exc))

    readers = [threading.Thread(target=loader) for _ in range(2)]
    writers = [threading.Thread(target=saver, args=(t,)) for t in range(4)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == []
    assert loads[0] > 0
    assert flow.load(path)["tid"] in range(4)
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]  # no temporary files left behind


def test_failed_save_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "c.safetensors"
    flow.save({"epoch": 1}, path)
    with pytest.raises(TypeError, match="cannot store an object of type object"):
        flow.save({"x": object()}, path)
    assert os.listdir(tmp_path) == ["c.safetensors"]
    assert flow.load(path) == {"epoch": 1}


# ---- (b) checksums -------------------------------------------------------------------------
def test_flipped_data_byte_raises_checksum_error(tmp_path):
    path = tmp_path / "c.safetensors"
    flow.save({"w": flow.arange(64.0), "n": 3}, path)
    blob = bytearray(path.read_bytes())
    n, header = _header(blob)
    assert header["__metadata__"]["checksum"].startswith("sha256:")
    begin = 8 + n + header["w"]["data_offsets"][0]
    blob[begin + 37] ^= 0x10  # one bit of one float in the data section
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="bad.safetensors.?: checksum mismatch"):
        flow.load(bad)
    assert flow.load(path)["w"].tolist() == list(np.arange(64.0))


def test_file_without_checksum_still_loads():
    structure = json.dumps({"D": [["w", {"T": "w", "dtype": "float32", "shape": [2]}]]})
    data = np.array([1.5, 2.5], np.float32)
    from safetensors import TensorSpec
    blob = serialize({"w": TensorSpec(dtype="float32", shape=[2], data_ptr=data.ctypes.data,
                                      data_len=data.nbytes)},
                     metadata={"format": "flowgrad-checkpoint-1", "structure": structure})
    assert flow.load(io.BytesIO(blob))["w"].tolist() == [1.5, 2.5]


# ---- (c) pathological structure ------------------------------------------------------------
@pytest.mark.parametrize("depth", [100_000, 1_000])
def test_deeply_nested_structure_raises_value_error(depth):
    structure = '{"L": [' * depth + '{"V": 1}' + "]}" * depth
    blob = serialize({}, metadata={"format": "flowgrad-checkpoint-1", "structure": structure})
    with pytest.raises(ValueError, match="nests .* levels deep"):
        flow.load(io.BytesIO(blob))


def test_brackets_inside_strings_do_not_count_as_nesting():
    obj = {"s": "[" * 5000 + "{" * 5000, "t": ['"]' * 10]}
    buf = io.BytesIO()
    flow.save(obj, buf)
    buf.seek(0)
    assert flow.load(buf) == obj


def test_deep_but_allowed_nesting_round_trips_and_too_deep_save_is_refused():
    obj = 1
    for i in range(150):
        obj = [obj] if i % 2 else {"k": obj}
    buf = io.BytesIO()
    flow.save(obj, buf)
    buf.seek(0)
    assert flow.load(buf) == obj
    for _ in range(100):
        obj = [obj]
    with pytest.raises(ValueError, match="more than 200 levels deep"):
        flow.save(obj, io.BytesIO())


# ---- (d) views share storage after load, as with torch -------------------------------------
def _round_trip(obj):
    buf = io.BytesIO()
    flow.save(obj, buf)
    buf.seek(0)
    return flow.load(buf)


def _torch_round_trip(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf)


VIEWS = [
    ("slice", lambda x: x[1:]),
    ("transpose", lambda x: x.t()),
    ("strided", lambda x: x[:, ::2]),
    ("row", lambda x: x[1]),
    ("same", lambda x: x.view(3, 2)),
]


@pytest.mark.parametrize("name,make", VIEWS, ids=[v[0] for v in VIEWS])
def test_view_and_base_share_storage_after_load_like_torch(name, make):
    fx, tx = flow.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    fo = _round_trip({"a": fx, "b": make(fx)})
    to = _torch_round_trip({"a": tx, "b": make(tx)})
    np.testing.assert_array_equal(fo["b"].numpy(), to["b"].numpy())
    assert fo["b"].stride() == to["b"].stride()
    fo["a"].mul_(10).add_(1)
    to["a"].mul_(10).add_(1)
    np.testing.assert_array_equal(fo["b"].numpy(), to["b"].numpy())  # write shows in view
    fo["b"].zero_()
    to["b"].zero_()
    np.testing.assert_array_equal(fo["a"].numpy(), to["a"].numpy())  # and back


def test_overlapping_views_without_their_base_share_and_separate_tensors_do_not():
    x = flow.arange(10.0)
    other = flow.ones(3)
    out = _round_trip({"p": x[:6], "q": x[4:], "o": other, "nested": [x[4:]]})
    out["p"][5] = -1.0
    assert out["q"][1].item() == -1.0 and out["nested"][0][1].item() == -1.0
    assert out["q"] is not out["nested"][0]  # two tensors saved, two tensors loaded
    out["o"][0] = 7.0
    assert other[0].item() == 1.0 and out["p"][0].item() == 0.0
    assert x[5].item() == 5.0  # the saved tensors are untouched


def test_tied_parameter_and_detached_copy_share_and_keep_flags():
    w = flow.nn.Parameter(flow.randn(3, 2))
    out = _round_trip({"w": w, "tied": w.detach()})
    assert isinstance(out["w"], flow.nn.Parameter) and out["w"].requires_grad
    assert not out["tied"].requires_grad
    with flow.no_grad():
        out["w"].add_(1.0)
    np.testing.assert_array_equal(out["tied"].numpy(), w.detach().numpy() + 1.0)


def test_arrays_of_different_dtypes_over_one_buffer_share_after_load():
    ints = np.arange(4, dtype=np.int32)
    out = _round_trip({"i": ints, "f": ints.view(np.float32)})
    out["f"][0] = 1.0
    assert out["i"][0] == np.float32(1.0).view(np.int32)


def test_view_metadata_reaching_outside_its_storage_is_refused():
    x = flow.arange(6.0)
    buf = io.BytesIO()
    flow.save({"a": x, "b": x[2:]}, buf)
    n, header = _header(buf.getvalue())
    meta = header["__metadata__"]
    tree = json.loads(meta["structure"])
    tree["D"][1][1]["view"]["offset"] = 16
    tree["D"][1][1]["shape"] = [40]  # 40 floats from byte 16 of a 24-byte storage
    data = np.frombuffer(buf.getvalue()[8 + n:], np.float32).copy()
    from safetensors import TensorSpec
    blob = serialize({"a": TensorSpec(dtype="float32", shape=[6], data_ptr=data.ctypes.data,
                                      data_len=data.nbytes)},
                     metadata={"format": meta["format"], "structure": json.dumps(tree)})
    with pytest.raises(ValueError, match="does not fit in storage 'a'"):
        flow.load(io.BytesIO(blob))
