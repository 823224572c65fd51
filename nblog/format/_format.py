"""The on-disk event-log format, shared by the writer and every reader.

An event log (``events.r<rank>.s<session>.log``) is an 8-byte file header followed
by frames. Everything is little-endian. Full description: ``man 5 nb-format``.

File header (8 bytes)::

    magic   4s   b"NBEV"
    version u16  FORMAT_VERSION
    flags   u16  0 (reserved)

Frame (16-byte header, then ``length`` payload bytes)::

    magic   3s   b"NBF"
    type    u8   FRAME_* below
    length  u32  payload length in bytes
    crc     u32  zlib.crc32 of the payload
    hcrc    u32  zlib.crc32 of the first 12 header bytes

The header checksum lets a reader tell a torn tail (a valid header whose payload
runs past the end of the file: "not written yet") from corruption (a header that
fails its checksum: skip ahead to the next ``NBF``).

This module imports only the standard library; bulk decoding with numpy lives in
``_logfile``.
"""

from __future__ import annotations

import json
import math
import struct
import zlib

FORMAT_VERSION = 1
FILE_MAGIC = b"NBEV"
FILE_HEADER = struct.Struct("<4sHH")
FRAME_MAGIC = b"NBF"
FRAME_HEADER = struct.Struct("<3sBIII")
FRAME_HEADER_SIZE = FRAME_HEADER.size  # 16
MAX_FRAME_LENGTH = 1 << 30  # a header declaring more is corrupt, never allocated

# Frame types.
FRAME_SESSION = 1  # JSON: the session header (rank, host, pid, clocks, ...)
FRAME_TAGS = 2  # tag definitions: repeated TAG_DEF + utf-8 name
FRAME_POINTS = 3  # repeated POINT records (scalars, timers, system metrics)
FRAME_TEXT = 4  # repeated TEXT_HEAD + utf-8 text
FRAME_MEDIA = 5  # repeated MEDIA_HEAD + JSON metadata (media pack references)
FRAME_STATS = 6  # JSON: heartbeat and counters (dropped points, ...); with "event": a failure or alert
FRAME_END = 7  # JSON: the session ended (status, reason, counters)
KNOWN_FRAMES = frozenset(range(1, 8))

# Tag kinds, stored in each tag definition.
KIND_SCALAR = 0
KIND_TIMER = 1
KIND_SYSTEM = 2
KIND_TEXT = 3
KIND_MEDIA = 4
KIND_NAMES = {
    KIND_SCALAR: "scalar",
    KIND_TIMER: "timer",
    KIND_SYSTEM: "system",
    KIND_TEXT: "text",
    KIND_MEDIA: "media",
}

# One numeric point: step i64, value f64, tag id u32, milliseconds since the
# session's monotonic start (mod 2**32; readers unwrap) u32. 24 bytes.
POINT = struct.Struct("<qdII")
POINT_SIZE = POINT.size
NUMPY_POINT_DTYPE = [("step", "<i8"), ("value", "<f8"), ("tag", "<u4"), ("ms", "<u4")]

TAG_DEF = struct.Struct("<IBI")  # tag id, kind, name length in bytes
TEXT_HEAD = struct.Struct("<qIII")  # step, tag id, ms, text length in bytes
MEDIA_HEAD = struct.Struct("<qIIQQI")  # step, tag id, ms, pack offset, blob length, meta length

MAX_TAG_CHARS = 1024  # longer tags are refused (warned, skipped, counted)
MAX_TAG_ID = 1 << 20  # distinct tags per session; a definition of a larger id is corrupt


def file_header() -> bytes:
    """Return the 8 bytes that open every event log."""
    return FILE_HEADER.pack(FILE_MAGIC, FORMAT_VERSION, 0)


def frame(kind: int, payload: bytes | bytearray | memoryview) -> bytes:
    """Frame ``payload`` as one record of type ``kind`` (header + payload)."""
    head = struct.pack("<3sBI", FRAME_MAGIC, kind, len(payload)) + struct.pack(
        "<I", zlib.crc32(payload)
    )
    return head + struct.pack("<I", zlib.crc32(head)) + bytes(payload)


def json_frame(kind: int, obj: dict) -> bytes:
    """Frame a JSON object (session header, stats, end)."""
    return frame(kind, json.dumps(obj, separators=(",", ":"), default=repr).encode())


def encode_tag_defs(defs: list[tuple[int, int, str]]) -> bytes:
    """Encode ``(tag id, kind, name)`` definitions into a TAGS payload."""
    out = bytearray()
    for tid, kind, name in defs:
        raw = name.encode("utf-8", "surrogatepass")
        out += TAG_DEF.pack(tid, kind, len(raw))
        out += raw
    return bytes(out)


def decode_tag_defs(payload: bytes) -> list[tuple[int, int, str]]:
    """Decode a TAGS payload; raises ``ValueError`` when it is malformed (a name that
    is not UTF-8, an id of ``MAX_TAG_ID`` or more: readers size tables by ids)."""
    defs = []
    pos, end = 0, len(payload)
    size = TAG_DEF.size
    while pos < end:
        if pos + size > end:
            raise ValueError("truncated tag definition")
        tid, kind, n = TAG_DEF.unpack_from(payload, pos)
        pos += size
        if pos + n > end:
            raise ValueError("tag name runs past the frame")
        if tid >= MAX_TAG_ID:
            raise ValueError(f"tag id {tid} is out of range")
        defs.append((tid, kind, payload[pos : pos + n].decode("utf-8")))
        pos += n
    return defs


def encode_texts(items: list[tuple[int, int, int, str]]) -> bytes:
    """Encode ``(step, tag id, ms, text)`` items into a TEXT payload."""
    out = bytearray()
    for step, tid, ms, text in items:
        raw = text.encode("utf-8", "surrogatepass")
        out += TEXT_HEAD.pack(step, tid, ms, len(raw))
        out += raw
    return bytes(out)


def decode_texts(payload: bytes) -> list[tuple[int, int, int, str]]:
    """Decode a TEXT payload; raises ``ValueError`` when it is malformed."""
    items = []
    pos, end = 0, len(payload)
    size = TEXT_HEAD.size
    while pos < end:
        if pos + size > end:
            raise ValueError("truncated text record")
        step, tid, ms, n = TEXT_HEAD.unpack_from(payload, pos)
        pos += size
        if pos + n > end:
            raise ValueError("text runs past the frame")
        items.append((step, tid, ms, payload[pos : pos + n].decode("utf-8")))
        pos += n
    return items


def json_number(value: float | None) -> float | str | None:
    """``value`` itself when finite (or None), else ``"nan"``, ``"inf"`` or ``"-inf"``:
    JSON has no such numbers (``run.json``'s summary, ``--json`` outputs)."""
    if value is None or math.isfinite(value):
        return value
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


def number_from_json(value: object) -> float | None:
    """The inverse of :func:`json_number`: a JSON number, or "nan"/"inf"/"-inf", as a
    float; None for anything else (``null``, a bool, other strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("nan", "inf", "-inf"):
        return float(value)
    return None


def loads_json(raw: bytes | bytearray | memoryview) -> object:
    """``json.loads`` for bytes read from a file, which may be hostile: raises
    ``ValueError`` (never ``RecursionError``) for nesting too deep to decode, and for
    a lone surrogate escaped as ``\\udXXX``, which no UTF-8 text (and no Polars
    string) can hold."""
    data = bytes(raw)
    try:
        obj = json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if b"\\ud" in data or b"\\uD" in data:  # escaped surrogates: pairs are fine, lone ones are not
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None
    return obj


def encode_media(items: list[tuple[int, int, int, int, int, dict]]) -> bytes:
    """Encode ``(step, tag id, ms, offset, length, meta)`` media references."""
    out = bytearray()
    for step, tid, ms, offset, length, meta in items:
        raw = json.dumps(meta, separators=(",", ":"), default=repr).encode()
        out += MEDIA_HEAD.pack(step, tid, ms, offset, length, len(raw))
        out += raw
    return bytes(out)


def decode_media(payload: bytes) -> list[tuple[int, int, int, int, int, dict]]:
    """Decode a MEDIA payload; raises ``ValueError`` when it is malformed."""
    items = []
    pos, end = 0, len(payload)
    size = MEDIA_HEAD.size
    while pos < end:
        if pos + size > end:
            raise ValueError("truncated media record")
        step, tid, ms, offset, length, n = MEDIA_HEAD.unpack_from(payload, pos)
        pos += size
        if pos + n > end:
            raise ValueError("media metadata runs past the frame")
        if offset >= 1 << 63 or length >= 1 << 63:  # no file holds that much
            raise ValueError("media reference out of range")
        meta = loads_json(payload[pos : pos + n])
        if not isinstance(meta, dict):
            raise ValueError("media metadata is not an object")
        items.append((step, tid, ms, offset, length, meta))
        pos += n
    return items
