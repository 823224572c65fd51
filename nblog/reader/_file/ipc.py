"""Columns of bytes as an Arrow IPC stream, so Polars reads them without numpy.

A COLUMNS frame (``man nb-format``) already holds its records column by column, little
endian: the values (f64), the steps and milliseconds (u16, u32 or i64) and the tag ids.
:func:`ipc_stream` frames such columns as an Arrow IPC stream (a Schema message, one
RecordBatch message per batch of rows, the end-of-stream marker; the Arrow columnar
format's "IPC streaming format"), which ``polars.read_ipc_stream`` turns into a frame
with one copy of the bytes, in Rust. Only what that needs is written: flat, non-null,
fixed-width integer and float columns, little endian, no compression.

The messages' metadata are FlatBuffers tables (Arrow's ``Message.fbs`` and
``Schema.fbs``); :class:`_Table` and :func:`_flatbuffer` write the few shapes used
here, front to back (every offset points forward, as FlatBuffers requires).

Standard library only: this is what lets a first read skip importing numpy (~60 ms).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

#: Column type -> (Arrow ``Type`` union tag, its table's fields, item size in bytes).
#: Int: bitWidth (int), is_signed (bool); FloatingPoint: precision (DOUBLE = 2).
_TYPES: dict[str, tuple[int, list, int]] = {
    "u8": (2, [("i32", 8), ("bool", False)], 1),
    "u16": (2, [("i32", 16), ("bool", False)], 2),
    "u32": (2, [("i32", 32), ("bool", False)], 4),
    "i32": (2, [("i32", 32), ("bool", True)], 4),
    "i64": (2, [("i32", 64), ("bool", True)], 8),
    "f64": (3, [("i16", 2)], 8),
}
_SCALARS = {"u8": "<B", "bool": "<?", "i16": "<h", "i32": "<i", "i64": "<q"}
_V5 = 4  # MetadataVersion.V5
_SCHEMA, _RECORD_BATCH = 1, 3  # MessageHeader union tags
_CONTINUATION = b"\xff\xff\xff\xff"


class _Table:
    """A FlatBuffers table: its fields in id order, each ``(kind, value)`` or None
    (absent). Kinds: a scalar ("u8", "bool", "i16", "i32", "i64"), "str", "table"
    (a :class:`_Table`), "tables" (a list of them), "structs" (packed 16-byte structs)."""

    __slots__ = ("fields",)

    def __init__(self, *fields: tuple[str, object] | None):
        self.fields = fields


def _pad(buf: bytearray, align: int, extra: int = 0) -> None:
    """Zero bytes until ``len(buf) + extra`` is a multiple of ``align``."""
    buf.extend(bytes(-(len(buf) + extra) % align))


def _write_table(buf: bytearray, table: _Table) -> int:
    """Append ``table`` (its vtable first, then the table, then what it refers to) to
    ``buf``; return the table's position."""
    # the table's inline part: soffset to the vtable, then each present field aligned
    layout: list[tuple[int, int, str, object]] = []  # (field id, offset in table, kind, value)
    size = 4
    for i, f in enumerate(table.fields):
        if f is None:
            continue
        kind, _v = f
        width = struct.calcsize(_SCALARS[kind]) if kind in _SCALARS else 4
        size += -size % width
        layout.append((i, size, kind, _v))
        size += width
    nfields = len(table.fields)
    _pad(buf, 2)
    vt = len(buf)
    slots = [0] * nfields
    for i, off, _k, _v in layout:
        slots[i] = off
    buf += struct.pack(f"<HH{nfields}H", 4 + 2 * nfields, size, *slots)
    _pad(buf, 8)  # the table itself 8-aligned, so its i64 fields are
    pos = len(buf)
    buf += bytes(size)
    struct.pack_into("<i", buf, pos, pos - vt)
    refs = []
    for _i, off, kind, value in layout:
        if kind in _SCALARS:
            struct.pack_into(_SCALARS[kind], buf, pos + off, value)
        else:
            refs.append((pos + off, kind, value))
    for at, kind, value in refs:  # what the table refers to, after it
        struct.pack_into("<I", buf, at, _write_ref(buf, kind, value) - at)
    return pos


def _write_ref(buf: bytearray, kind: str, value: object) -> int:
    """Append a string, table or vector; return its position (a vector's: its length)."""
    if kind == "table":
        assert isinstance(value, _Table)
        return _write_table(buf, value)
    if kind == "str":
        assert isinstance(value, str)
        raw = value.encode()
        _pad(buf, 4)
        pos = len(buf)
        buf += struct.pack("<I", len(raw)) + raw + b"\0"
        return pos
    if kind == "structs":  # 16-byte structs of two i64: the length just before them, 8-aligned
        assert isinstance(value, bytes)
        _pad(buf, 8, 4)
        pos = len(buf)
        buf += struct.pack("<I", len(value) // 16) + value
        return pos
    assert kind == "tables" and isinstance(value, list)
    _pad(buf, 4)
    pos = len(buf)
    buf += struct.pack("<I", len(value)) + bytes(4 * len(value))
    for k, t in enumerate(value):
        at = pos + 4 + 4 * k
        struct.pack_into("<I", buf, at, _write_table(buf, t) - at)
    return pos


def _flatbuffer(root: _Table) -> bytes:
    """``root`` as a FlatBuffers buffer (a u32 offset to the root table, then it)."""
    buf = bytearray(8)
    struct.pack_into("<I", buf, 0, _write_table(buf, root))
    return bytes(buf)


def _message(header_type: int, header: _Table, body_length: int) -> bytes:
    """One IPC message's framing and metadata (its body follows): the continuation
    marker, the metadata's length, the metadata padded to 8 bytes."""
    meta = _flatbuffer(_Table(("i16", _V5), ("u8", header_type), ("table", header), ("i64", body_length)))
    meta += bytes(-len(meta) % 8)
    return _CONTINUATION + struct.pack("<i", len(meta)) + meta


def _schema(columns: Sequence[tuple[str, str]]) -> bytes:
    fields = [
        _Table(("str", name), ("bool", False), ("u8", _TYPES[typ][0]), ("table", _Table(*_TYPES[typ][1])),
               None, ("tables", []))
        for name, typ in columns
    ]
    return _message(_SCHEMA, _Table(("i16", 0), ("tables", fields)), 0)  # endianness Little


def ipc_stream(columns: Sequence[tuple[str, str]], batches: Iterable[tuple[int, Sequence[bytes | memoryview]]]) -> bytes:
    """An Arrow IPC stream of ``columns`` (name, type: "u8", "u16", "u32", "i32", "i64",
    "f64") holding ``batches``: each ``(rows, buffers)``, one buffer per column holding
    its ``rows`` items, little endian, packed (exactly ``rows * item size`` bytes).

    Raises:
        ValueError: a buffer of the wrong size.
    """
    out: list[bytes | memoryview] = [_schema(columns)]
    for rows, buffers in batches:
        nodes = b"".join(struct.pack("<qq", rows, 0) for _ in columns)
        specs = []
        body: list[bytes | memoryview] = []
        at = 0
        for (_name, typ), data in zip(columns, buffers, strict=True):
            if len(data) != rows * _TYPES[typ][2]:
                raise ValueError("a column of the wrong size")
            specs.append(struct.pack("<qqqq", at, 0, at, len(data)))  # no validity bitmap, the data
            pad = -len(data) % 8
            body += (data, bytes(pad))
            at += len(data) + pad
        batch = _Table(("i64", rows), ("structs", nodes), ("structs", b"".join(specs)))
        out.append(_message(_RECORD_BATCH, batch, at))
        out += body
    out.append(_CONTINUATION + bytes(4))
    return b"".join(out)
