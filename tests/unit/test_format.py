"""nblog.format._format: the file header, frames, checksums and payload codecs."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from nblog.format import _format as F


def test_file_header():
    head = F.file_header()
    assert len(head) == 8
    assert F.FILE_HEADER.unpack(head) == (b"NBEV", F.FORMAT_VERSION, 0)


@pytest.mark.parametrize("payload", [b"", b"x", bytes(range(256)) * 17])
def test_frame_layout_and_checksums(payload):
    data = F.frame(F.FRAME_POINTS, payload)
    assert len(data) == F.FRAME_HEADER_SIZE + len(payload) == 16 + len(payload)
    magic, kind, length, crc, hcrc = F.FRAME_HEADER.unpack_from(data)
    assert (magic, kind, length) == (b"NBF", F.FRAME_POINTS, len(payload))
    assert crc == zlib.crc32(payload)
    assert hcrc == zlib.crc32(data[:12])
    assert data[16:] == payload


def test_frame_accepts_bytearray_and_memoryview():
    raw = b"abc" * 8
    assert F.frame(3, bytearray(raw)) == F.frame(3, memoryview(raw)) == F.frame(3, raw)


def test_every_header_bit_is_covered_by_the_header_checksum():
    data = F.frame(F.FRAME_TAGS, b"payload")
    for bit in range(12 * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        assert zlib.crc32(bytes(flipped[:12])) != struct.unpack_from("<I", flipped, 12)[0]


def test_json_frame():
    data = F.json_frame(F.FRAME_SESSION, {"rank": 3, "host": "ü", "obj": object})
    obj = json.loads(data[16:])
    assert obj["rank"] == 3 and obj["host"] == "ü"
    assert obj["obj"].startswith("<class")  # non-JSON values become repr strings


def test_point_record_is_24_bytes_little_endian():
    assert F.POINT_SIZE == 24
    raw = F.POINT.pack(1, 2.5, 3, 4)
    assert raw == struct.pack("<q", 1) + struct.pack("<d", 2.5) + struct.pack("<II", 3, 4)


def test_tag_defs_round_trip():
    defs = [(0, F.KIND_SCALAR, "train/loss"), (1, F.KIND_TIMER, "data"), (7, F.KIND_TEXT, "ü 🔥 [b]")]
    assert F.decode_tag_defs(F.encode_tag_defs(defs)) == defs
    assert F.decode_tag_defs(b"") == []


def test_texts_round_trip():
    items = [(0, 1, 2, ""), (5, 1, 9, "line\nline"), (2**62, 3, 2**32 - 1, "ünï🔥" * 100)]
    assert F.decode_texts(F.encode_texts(items)) == items


def test_media_round_trip():
    items = [(3, 1, 10, 0, 100, {"kind": "image", "shape": [8, 8, 3]}), (4, 1, 11, 100, 5, {})]
    assert F.decode_media(F.encode_media(items)) == items


@pytest.mark.parametrize(
    ("decode", "payload"),
    [
        (F.decode_tag_defs, F.encode_tag_defs([(0, 0, "abc")])[:-1]),
        (F.decode_tag_defs, F.encode_tag_defs([(0, 0, "abc")])[:5]),
        (F.decode_texts, F.encode_texts([(0, 0, 0, "abc")])[:-1]),
        (F.decode_texts, b"\0" * 3),
        (F.decode_media, F.encode_media([(0, 0, 0, 0, 0, {"a": 1})])[:-1]),
        (F.decode_media, F.MEDIA_HEAD.pack(0, 0, 0, 0, 0, 2) + b"[]"),
    ],
)
def test_malformed_payloads_raise_value_error(decode, payload):
    with pytest.raises(ValueError):
        decode(payload)
