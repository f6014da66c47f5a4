"""TensorBoard's event files, encoded by hand: each event is a protocol buffer (`Event` of
tensorboard/compat/proto/event.proto, with `Summary` of summary.proto) written as a TFRecord
(length, masked CRC-32C of the length, data, masked CRC-32C of the data). Only the fields
SummaryWriter writes are here, each as (field number, wire type) on one line."""
from __future__ import annotations

import struct
import zlib

import numpy as np

# ---- protocol buffer wire format ------------------------------------------------------------
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def _varint(n):
    n &= (1 << 64) - 1  # negative int64: ten bytes, as protobuf writes them
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def varint_field(field, n):
    return _key(field, _VARINT) + _varint(int(n))


def double_field(field, x):
    return _key(field, _FIXED64) + struct.pack("<d", float(x))


def float_field(field, x):
    return _key(field, _FIXED32) + struct.pack("<f", float(x))


def bytes_field(field, data):
    data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return _key(field, _BYTES) + _varint(len(data)) + data


def packed_doubles(field, values):
    return bytes_field(field, np.asarray(values, "<f8").tobytes())


# ---- the messages ---------------------------------------------------------------------------
def event(wall_time, step=None, summary=None, file_version=None):
    """Event: wall_time 1 (double), step 2 (int64), file_version 3, summary 5."""
    out = double_field(1, wall_time)
    if step is not None:
        out += varint_field(2, step)
    if file_version is not None:
        out += bytes_field(3, file_version)
    if summary is not None:
        out += bytes_field(5, summary)
    return out


def summary(*values):
    """Summary: repeated Value value = 1."""
    return b"".join(bytes_field(1, v) for v in values)


def scalar_value(tag, value):
    """Summary.Value: tag 1, simple_value 2 (float)."""
    return bytes_field(1, tag) + float_field(2, value)


def histogram_value(tag, lo, hi, num, total, sum_squares, limits, counts):
    """Summary.Value: tag 1, histo 5 (HistogramProto: min 1, max 2, num 3, sum 4,
    sum_squares 5, bucket_limit 6 and bucket 7, packed doubles)."""
    histo = (double_field(1, lo) + double_field(2, hi) + double_field(3, num) +
             double_field(4, total) + double_field(5, sum_squares) +
             packed_doubles(6, limits) + packed_doubles(7, counts))
    return bytes_field(1, tag) + bytes_field(5, histo)


def text_value(tag, text):
    """Summary.Value: tag 1, metadata 9 (plugin_data 1: plugin_name 1 = "text"), tensor 8
    (TensorProto: dtype 1 = DT_STRING (7), tensor_shape 2 (dim 2: size 1 = 1), string_val 8)."""
    metadata = bytes_field(1, bytes_field(1, "text"))
    tensor = (varint_field(1, 7) + bytes_field(2, bytes_field(2, varint_field(1, 1))) +
              bytes_field(8, text.encode("utf-8")))
    return bytes_field(1, tag) + bytes_field(9, metadata) + bytes_field(8, tensor)


def image_value(tag, height, width, channels, png):
    """Summary.Value: tag 1, image 4 (height 1, width 2, colorspace 3,
    encoded_image_string 4)."""
    image = (varint_field(1, height) + varint_field(2, width) + varint_field(3, channels) +
             bytes_field(4, png))
    return bytes_field(1, tag) + bytes_field(4, image)


# ---- TFRecord framing ------------------------------------------------------------------------
def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli), as TFRecord checks its records with."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    """One TFRecord: the length, its masked CRC, the data, its masked CRC."""
    header = struct.pack("<Q", len(data))
    return (header + struct.pack("<I", _masked(crc32c(header))) + data +
            struct.pack("<I", _masked(crc32c(data))))


# ---- PNG, for images -------------------------------------------------------------------------
def png(pixels):
    """A PNG file of `pixels`, uint8 (H, W, C) with C 1, 3 or 4 (no filter, zlib)."""
    height, width, channels = pixels.shape
    color_type = {1: 0, 3: 2, 4: 6}[channels]
    rows = np.concatenate([np.zeros((height, 1), np.uint8),
                           np.ascontiguousarray(pixels, np.uint8).reshape(height, -1)], 1)

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
            chunk(b"IDAT", zlib.compress(rows.tobytes())) + chunk(b"IEND", b""))
