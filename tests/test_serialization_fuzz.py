"""Random checkpoints (nests of tensors of every dtype, views sharing storages, Parameters,
state_dicts, plain values, objects weights_only refuses) saved and loaded by flowgrad and by
torch, across formats, file paths and BytesIO, load arguments and damaged files, must load
alike: see tests/serialization_fuzz.py (its KNOWN lists what the comparison leaves out)."""
from __future__ import annotations

import io
import pickle
import zipfile

import fuzz_common
import numpy as np
import pytest
import serialization_fuzz as sf
import torch

import flowgrad as flow


@pytest.mark.parametrize("seed", range(400))
def test_checkpoint_loads_like_torch(seed):
    verdict = sf.check(seed)
    assert verdict is None, f"{sf.Case(seed).describe()}\n{verdict}"


@pytest.mark.slow
def test_many_checkpoints_load_like_torch():
    fuzz_common.assert_seeds_agree(sf.check, range(400, 20000))


def _torch_bytes(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


def _outcome(fn):
    try:
        fn()
    except Exception as exc:  # the type is compared with torch's
        return type(exc)
    return None


def test_flowgrad_torch_format_records_are_64_byte_aligned_for_torch_mmap(tmp_path):
    # torch.load(mmap=True) maps the storages in place: flowgrad wrote its zip records
    # unaligned, and writing a complex128 tensor mapped from one crashed the process
    obj = {"a": flow.ones(3, dtype=flow.complex128), "b": flow.ones(5, dtype=flow.int8),
           "c": flow.arange(4.0)}
    flow.save(obj, tmp_path / "f.pt")
    loaded = torch.load(tmp_path / "f.pt", mmap=True)
    assert {k: v.data_ptr() % 64 for k, v in loaded.items()} == dict.fromkeys(obj, 0)
    assert torch.equal(loaded["c"], torch.arange(4.0))


@pytest.mark.parametrize("weights_only", [True, None])
def test_weights_only_refuses_a_frozenset_as_torch(weights_only):
    blob = _torch_bytes({"s": frozenset([1, 2])})
    assert _outcome(lambda: torch.load(io.BytesIO(blob), weights_only=weights_only)) is \
        pickle.UnpicklingError
    with pytest.raises(pickle.UnpicklingError, match="builtins.frozenset"):
        flow.load(io.BytesIO(blob), weights_only=weights_only)
    assert flow.load(io.BytesIO(blob), weights_only=False) == {"s": frozenset([1, 2])}


def test_a_view_as_another_dtype_keeps_its_strides_and_storage_in_torch_format():
    # t.view(bfloat16) of an int16 tensor: saved as a contiguous copy (strides lost, and the
    # sharing with the other views of that memory)
    out = {}
    for m in (torch, flow):
        base = m.tensor(np.arange(8, dtype=np.int16)).view(m.bfloat16)
        obj = [base.reshape(2, 4).t(), base[2:]]
        buf = io.BytesIO()
        m.save(obj, buf, **({"format": "torch"} if m is flow else {}))
        buf.seek(0)
        loaded = torch.load(buf)
        loaded[0][2, 0] = 9.0  # element 2 of the storage, element 0 of the slice
        out[m.__name__] = [(t.stride(), t.storage_offset(), t.view(torch.int16).tolist())
                           for t in loaded]
    assert out["flowgrad"] == out["torch"]


@pytest.mark.parametrize("map_location", ["cuda", {"cpu": "cuda:0"}, 3, "nowhere"])
def test_map_location_is_checked_when_a_storage_is_read_as_torch(map_location):
    # torch.load maps each storage as it reads it: a file without tensors loads whatever
    # map_location says, one with tensors raises; flowgrad checked before reading the file
    for legacy in (False, True):
        blob = _torch_bytes({"step": 3}, _use_new_zipfile_serialization=not legacy)
        got = _outcome(lambda: flow.load(io.BytesIO(blob), map_location=map_location))
        assert got is _outcome(lambda: torch.load(io.BytesIO(blob), map_location=map_location))
    blob = _torch_bytes({"w": torch.ones(2)})
    assert _outcome(lambda: torch.load(io.BytesIO(blob), map_location=map_location)) in \
        (RuntimeError, TypeError)
    with pytest.raises((RuntimeError, TypeError)):
        flow.load(io.BytesIO(blob), map_location=map_location)
    flow.save({"step": 3}, buf := io.BytesIO())  # flowgrad's own format alike
    assert flow.load(io.BytesIO(buf.getvalue()), map_location=map_location) == {"step": 3}


def test_map_location_dict_maps_the_storages_own_location():
    blob = _torch_bytes({"w": torch.ones(2)})
    ml = {"cuda:0": "cuda:1"}  # the file's storages are 'cpu': not mapped, no CUDA needed
    torch.load(io.BytesIO(blob), map_location=ml)
    assert flow.load(io.BytesIO(blob), map_location=ml)["w"].tolist() == [1.0, 1.0]


def _drop(blob, record):
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(blob)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith(record):
                zout.writestr(info.filename, zin.read(info))
    return out.getvalue()


def _flip_storage_byte(blob):
    b = bytearray(blob)
    info = zipfile.ZipFile(io.BytesIO(blob)).getinfo("archive/data/0")
    h = info.header_offset
    start = h + 30 + int.from_bytes(b[h + 26:h + 28], "little") + \
        int.from_bytes(b[h + 28:h + 30], "little")
    b[start + 2] ^= 0xFF
    return bytes(b)


DAMAGED = [  # (label, damaged bytes, what torch raises, what flowgrad's message says)
    ("truncated zip", lambda: _torch_bytes({"x": torch.arange(9.0)})[:100], RuntimeError,
     "not a valid torch zip checkpoint"),
    ("no version record", lambda: _drop(_torch_bytes({"x": torch.arange(9.0)}), "/version"),
     RuntimeError, "version record"),
    ("no data.pkl", lambda: _drop(_torch_bytes({"x": torch.arange(9.0)}), "data.pkl"),
     RuntimeError, "without the data.pkl"),
    ("no storage record", lambda: _drop(_torch_bytes({"x": torch.arange(9.0)}), "data/0"),
     RuntimeError, "record 'archive/data/0' is missing"),
    ("legacy bad magic", lambda: b"\x80\x02\x8a\x0a" + bytes(
        [x ^ 0x11 for x in _torch_bytes([], _use_new_zipfile_serialization=False)[4:12]]) +
     _torch_bytes([], _use_new_zipfile_serialization=False)[12:], RuntimeError,
     "bad magic number"),
]


@pytest.mark.parametrize("label,make,torch_raises,match", DAMAGED, ids=[d[0] for d in DAMAGED])
def test_damaged_files_raise_torchs_type(label, make, torch_raises, match):
    blob = make()
    assert _outcome(lambda: torch.load(io.BytesIO(blob))) is torch_raises
    with pytest.raises(torch_raises, match=match):
        flow.load(io.BytesIO(blob))


def test_a_damaged_storage_is_refused_naming_the_record():
    blob = _flip_storage_byte(_torch_bytes({"x": torch.arange(9.0)}))
    torch.load(io.BytesIO(blob))  # torch reads the wrong value (KNOWN: it checks no CRC)
    with pytest.raises(RuntimeError, match="'archive/data/0' is damaged .*CRC"):
        flow.load(io.BytesIO(blob))


@pytest.mark.parametrize("label,blob", [
    ("legacy", _torch_bytes({"x": torch.ones(2)}, _use_new_zipfile_serialization=False)),
    ("empty", b""), ("truncated zip", _torch_bytes({"x": torch.ones(2)})[:60]),
    ("neither format", b"\x80\x02\x8a\x0b" + bytes(60)),
    ("zip", _torch_bytes({"x": torch.ones(2)}))])
def test_mmap_of_a_file_object_raises_as_torch(label, blob):
    want = _outcome(lambda: torch.load(io.BytesIO(blob), mmap=True))
    assert want is not None
    assert _outcome(lambda: flow.load(io.BytesIO(blob), mmap=True)) is want


def test_views_of_one_memory_as_two_dtypes_are_refused_in_torch_format_as_torch():
    # torch.save refuses them (its storages are untyped); flowgrad's torch format wrote two
    # storages, so the loaded tensors no longer shared memory. Its own format keeps them.
    for m in (torch, flow):
        x = m.arange(4.0)
        with pytest.raises(RuntimeError, match="view the same data as different types"):
            m.save([x, x.view(m.int32)], io.BytesIO(),
                   **({"format": "torch"} if m is flow else {}))
    x = flow.arange(4.0)
    flow.save([x, x.view(flow.int32)], buf := io.BytesIO())
    y = flow.load(io.BytesIO(buf.getvalue()))
    y[1][0] = 0
    assert y[0][0].item() == 0.0


def test_a_size_one_dimension_keeps_its_stride_in_safetensors():
    # NumPy calls x[::2] of 2 elements contiguous: it was stored as such and came back with
    # stride (1,); torch.load gives (2,)
    for m, save in ((torch, lambda o, b: torch.save(o, b)), (flow, lambda o, b: flow.save(o, b))):
        buf = io.BytesIO()
        save([m.arange(2.0)[::2], m.ones(3, 1)[:, :1].t()], buf)
        buf.seek(0)
        loaded = m.load(buf)
        assert [t.stride() for t in loaded] == [(2,), (1, 1)], m.__name__


def test_a_legacy_file_with_damaged_system_info_loads_as_in_torch():
    # torch reads nothing from the system info record; flowgrad refused the file unless it
    # said little_endian (a big-endian file, saying so, is still refused)
    blob = _torch_bytes({"x": torch.arange(3.0)}, _use_new_zipfile_serialization=False)
    damaged = blob.replace(b"little_endian", b"little_endiaX")
    assert torch.load(io.BytesIO(damaged))["x"].tolist() == [0.0, 1.0, 2.0]
    assert flow.load(io.BytesIO(damaged))["x"].tolist() == [0.0, 1.0, 2.0]


def test_a_missing_record_raises_before_map_location_is_used_as_torch():
    # torch reads a storage's record, then maps it: a missing record is the error
    blob = _drop(_torch_bytes({"x": torch.arange(3.0)}), "data/0")
    assert _outcome(lambda: torch.load(io.BytesIO(blob), map_location=3)) is RuntimeError
    with pytest.raises(RuntimeError, match="'archive/data/0' is missing"):
        flow.load(io.BytesIO(blob), map_location=3)


def test_a_zip_version_python_cannot_read_raises_runtime_error_naming_the_file():
    # (torch's reader ignores the field and loads it; Python's zipfile raised a bare
    # NotImplementedError('zip file version 9.0'))
    b = bytearray(_torch_bytes({"x": torch.arange(3.0)}))
    b[b.find(b"PK\x01\x02") + 6] = 90  # the central directory's "version needed" of data.pkl
    with pytest.raises(RuntimeError, match="BytesIO.*zip file version 9.0.*corrupt"):
        flow.load(io.BytesIO(bytes(b)))


def test_map_location_meta_takes_torch_values_from_the_same_file():
    # torch's legacy format orders storages by their addresses: the file the fuzzer re-saved
    # for torch's values without meta could hold the flipped byte in another tensor than the
    # file flowgrad loaded (seed 11606929 differed in one run of two)
    case = sf.Case(11606929)
    _, (got, exc) = sf.run(case)
    want = case.plain[0]
    assert exc is None and list(want) == list(got)
    assert all(np.array_equal(want[k].numpy(), got[k].detach().numpy()) for k in want)
    assert sf.check(11606929) is None
