"""utils.tensorboard.SummaryWriter: the event files it writes, read back by an independent
decoder of the TFRecord framing and the protocol-buffer wire format (TensorBoard itself is
not installable here): CRC-32C against its published check value, every record's masked
CRCs, the scalars, histograms, text and PNG images with their tags, steps and wall times."""
import os
import struct
import zlib

import numpy as np
import pytest

import flowgrad as flow
from flowgrad.utils.tensorboard import SummaryWriter
from flowgrad.utils.tensorboard.events import crc32c


def _fields(data):
    """{field number: [values]} of one protobuf message (varints as ints, fixed64 as
    doubles, fixed32 as floats, length-delimited as bytes)."""
    out, i = {}, 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = struct.unpack("<d", data[i:i + 8])[0], i + 8
        elif wire == 5:
            value, i = struct.unpack("<f", data[i:i + 4])[0], i + 4
        elif wire == 2:
            n, i = _varint(data, i)
            value, i = data[i:i + n], i + n
        else:
            raise AssertionError(f"wire type {wire}")
        out.setdefault(field, []).append(value)
    return out


def _varint(data, i):
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def _masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _events(logdir):
    """Every event of the one event file in logdir, decoded, CRCs checked."""
    (name,) = [n for n in os.listdir(logdir) if n.startswith("events.out.tfevents.")]
    raw = open(os.path.join(logdir, name), "rb").read()
    out, i = [], 0
    while i < len(raw):
        header = raw[i:i + 8]
        (length,), (hcrc,) = struct.unpack("<Q", header), struct.unpack("<I", raw[i + 8:i + 12])
        data = raw[i + 12:i + 12 + length]
        (dcrc,) = struct.unpack("<I", raw[i + 12 + length:i + 16 + length])
        assert hcrc == _masked(crc32c(header)) and dcrc == _masked(crc32c(data))
        out.append(_fields(data))
        i += 16 + length
    return out


def _values(event):
    """(tag, Summary.Value fields) of an event's summary."""
    (summary,) = event[5]
    (value,) = _fields(summary)[1]
    fields = _fields(value)
    return fields[1][0].decode(), fields


def test_crc32c_check_value():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC catalogue's check value
    assert crc32c(b"") == 0


def test_scalars_and_file_version(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        for step in range(3):
            w.add_scalar("train/loss", flow.tensor(1.0 / (step + 1)), step, walltime=100.0 + step)
        w.add_scalar("lr", 0.5, 7)
    first, *rest = _events(tmp_path)
    assert first[3] == [b"brain.Event:2"]
    got = [(_values(e)[0], e.get(2, [0])[0], e[1][0], _values(e)[1][2][0]) for e in rest]
    assert got[:3] == [("train/loss", s, 100.0 + s, pytest.approx(1.0 / (s + 1)))
                       for s in range(3)]
    assert got[3][:2] == ("lr", 7) and got[3][3] == 0.5


def test_add_scalars_writes_one_run_per_curve(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_scalars("run/a", {"sin": 0.25, "cos": flow.tensor([0.75])}, 3)
    dirs = sorted(d for d in os.listdir(tmp_path) if os.path.isdir(tmp_path / d))
    assert dirs == ["run_a_cos", "run_a_sin"]
    (event,) = _events(tmp_path / "run_a_cos")[1:]
    tag, fields = _values(event)
    assert (tag, event[2][0], fields[2][0]) == ("run/a", 3, 0.75)


@pytest.mark.parametrize("bins", ["tensorflow", "auto", 5])
def test_histogram(tmp_path, bins):
    data = np.random.default_rng(0).standard_normal(500)
    with SummaryWriter(str(tmp_path)) as w:
        w.add_histogram("w", flow.tensor(data), 4, bins=bins)
    (event,) = _events(tmp_path)[1:]
    tag, fields = _values(event)
    histo = _fields(fields[5][0])
    lo, hi, num, total, squares = (histo[k][0] for k in range(1, 6))
    limits = np.frombuffer(histo[6][0], "<f8")
    counts = np.frombuffer(histo[7][0], "<f8")
    assert tag == "w" and event[2][0] == 4
    assert (lo, hi, num) == (data.min(), data.max(), 500)
    np.testing.assert_allclose([total, squares], [data.sum(), data @ data])
    assert counts.sum() == 500 and counts[0] == 0 and len(limits) == len(counts)
    assert np.all(np.diff(limits) > 0) and limits[-1] >= data.max() and limits[0] <= data.min()
    if bins == "tensorflow":  # torch's buckets: 1e-12 growing by 10%
        ratios = limits[limits > 1e-3][1:] / limits[limits > 1e-3][:-1]
        np.testing.assert_allclose(ratios, 1.1)


def test_text(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        w.add_text("notes", "**hello** é", 1)
    (event,) = _events(tmp_path)[1:]
    tag, fields = _values(event)
    assert tag == "notes/text_summary"
    assert _fields(_fields(fields[9][0])[1][0])[1] == [b"text"]
    tensor = _fields(fields[8][0])
    assert tensor[1] == [7] and tensor[8] == ["**hello** é".encode()]


def _png_pixels(png):
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    i, chunks = 8, {}
    while i < len(png):
        (n,) = struct.unpack(">I", png[i:i + 4])
        kind, data = png[i + 4:i + 8], png[i + 8:i + 8 + n]
        assert struct.unpack(">I", png[i + 8 + n:i + 12 + n])[0] == zlib.crc32(kind + data)
        chunks[kind] = data
        i += 12 + n
    w, h, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    channels = {0: 1, 2: 3, 6: 4}[color]
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, -1)
    assert depth == 8 and not rows[:, 0].any()  # filter type 0 on every row
    return rows[:, 1:].reshape(h, w, channels)


@pytest.mark.parametrize("layout", ["CHW", "HWC", "HW", "NCHW"])
def test_images(tmp_path, layout):
    rng = np.random.default_rng(1)
    image = rng.random((2, 3, 4, 5)) if layout == "NCHW" else rng.random((3, 4, 5))
    if layout == "HWC":
        image = image.transpose(1, 2, 0)
    if layout == "HW":
        image = image[0]
    with SummaryWriter(str(tmp_path)) as w:
        adder = w.add_images if layout == "NCHW" else w.add_image
        adder("img", flow.tensor(image), 2, dataformats=layout)
    (event,) = _events(tmp_path)[1:]
    tag, fields = _values(event)
    img = _fields(fields[4][0])
    pixels = _png_pixels(img[4][0])
    if layout == "CHW":
        expected = image.transpose(1, 2, 0)
    elif layout == "HWC":
        expected = image
    elif layout == "HW":
        expected = np.stack([image] * 3, 2)
    else:  # two images side by side
        expected = np.concatenate(list(image.transpose(0, 2, 3, 1)), 1)
    np.testing.assert_array_equal(pixels, (expected * 255).clip(0, 255).astype(np.uint8))
    assert (img[1][0], img[2][0], img[3][0]) == pixels.shape


def test_default_logdir_and_unsupported_calls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_exp")
    assert w.get_logdir().startswith("runs" + os.sep) and w.get_logdir().endswith("_exp")
    with pytest.raises(NotImplementedError, match="add_graph"):
        w.add_graph(flow.nn.Linear(1, 1))
    w.close()
    w.add_scalar("after_close", 1.0)  # a new event file, as torch's reopened writer
    w.close()
    assert len(os.listdir(w.get_logdir())) == 2
