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

Point records (POINTS frames, 24 bytes each) are written as COLUMNS frames since
version 2: the same records column by column (``encode_columns``). Where each column
lies is said in one place, ``columns_layout`` (the order: ``COLUMN_ORDER``), and every
decoder reads it there: ``decode_columns`` here (standard library), numpy and Arrow in
``nblog.reader`` (``_logfile``, ``_columns_read``).

The header checksum lets a reader tell a torn tail (a valid header whose payload
runs past the end of the file: "not written yet") from corruption (a header that
fails its checksum: skip ahead to the next ``NBF``). This module writes frames; the one
walk that finds them again, for every reader, is ``_walk``.

Damage is bounded by design: a frame holds at most ``FRAME_POINTS_MAX`` points
(``point_frames``), so one damaged byte costs at most that many points of one rank, and
the frames every later record depends on (the session header, tag definitions:
``DOUBLED_FRAMES``) are written twice in a row, so one damaged byte costs none of them.

This module imports only the standard library.
"""

from __future__ import annotations

import json
import math
import struct
import sys
import zlib
from typing import NamedTuple  # loaded by `import nblog` anyway (the writer's own modules)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

FORMAT_VERSION = 2  # 2: COLUMNS frames; files of version 1 (POINTS frames only) are still read
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
FRAME_COLUMNS = 8  # POINT records stored column by column (encode_columns): 12-16 bytes a point
KNOWN_FRAMES = frozenset(range(1, 9))
#: Frame type -> its name in messages (a damaged frame is named by the type in its header).
FRAME_NAMES = {FRAME_SESSION: "session header", FRAME_TAGS: "tag definitions", FRAME_POINTS: "points",
               FRAME_TEXT: "text", FRAME_MEDIA: "media references", FRAME_STATS: "stats",
               FRAME_END: "session end", FRAME_COLUMNS: "points"}

#: Points in one POINTS or COLUMNS frame at most (``point_frames``): a frame is the unit a
#: damaged byte costs, so one bad byte loses at most this many points of one rank. The
#: 48 bytes of frame and columns head it adds per frame are 0.012 bytes a point.
FRAME_POINTS_MAX = 4096
#: The frame types written twice in a row (``redundant_frames``): the session header and
#: the tag definitions, a few hundred bytes a session, without which the points of a
#: whole session (its clocks) or of every use of a tag (its name) could not be read.
DOUBLED_FRAMES = frozenset({FRAME_SESSION, FRAME_TAGS})

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

# A block of points of one dict (``add_scalar({...})``), packed by the caller in one
# call and split into POINT records by the writer thread: it never reaches a file.
# It lies in the writer's point buffer among POINT records, in 24-byte slots, and its
# first slot has BLOCK_MARK where a record has its tag id (ids stay below MAX_TAG_ID).
# u32 words: count n, 0, tag 0, tag 1 (0 when n == 1), BLOCK_MARK, tags 2..n-1, a
# pad word to 8 bytes; then step i64, ms u32, 4 pad bytes; n values f64; zero pad to
# a multiple of 24. Native byte order (little-endian machines only: see block_packer).
BLOCK_MARK = 0xFFFFFFFF
BLOCK_MARK_BYTES = struct.pack("<I", BLOCK_MARK)
BLOCK_MAX_TAGS = 1024  # wider dicts are packed point by point


def block_layout(n: int) -> tuple[int, int, int]:
    """``(size, step offset, values offset)`` in bytes of a block of ``n`` points."""
    words = 5 + max(n - 2, 0)
    step_at = 4 * (words + (words & 1))
    values_at = step_at + 16
    end = values_at + 8 * n
    return -(-end // POINT_SIZE) * POINT_SIZE, step_at, values_at


def block_packer(tids: tuple[int, ...]) -> Callable[..., bytes] | None:
    """A callable ``(step, ms, *values) -> bytes`` packing one block of the points of
    ``tids`` (1 to ``BLOCK_MAX_TAGS`` tag ids), or None where blocks are not used (a
    big-endian machine). Values must be float, int or bool (``struct`` converts them
    as ``float()`` does; an int too large raises ``struct.error``/``OverflowError``)."""
    from functools import partial

    n = len(tids)
    if not _LITTLE or not 1 <= n <= BLOCK_MAX_TAGS:
        return None
    size, step_at, values_at = block_layout(n)
    words = 5 + max(n - 2, 0)
    pad_words = step_at // 4 - words
    tail = size - values_at - 8 * n
    fmt = "@" + "I" * words + "4x" * pad_words + "qI4x" + "d" * n + (f"{tail}x" if tail else "")
    head = (n, 0, tids[0], tids[1] if n > 1 else 0, BLOCK_MARK, *tids[2:])
    return partial(struct.Struct(fmt).pack, *head)


def block_tids(buf: bytes | bytearray | memoryview, at: int) -> tuple[int, ...]:
    """The tag ids of the block starting at byte ``at`` of ``buf``."""
    words = memoryview(buf)[at : at + 24].cast("I")
    n = words[0]
    if n == 1:
        return (words[2],)
    rest = memoryview(buf)[at + 20 : at + 20 + 4 * (n - 2)].cast("I")
    return (words[2], words[3], *rest)


# A COLUMNS payload: this head, then the columns of COLUMN_ORDER: the n values (f64),
# the steps, the milliseconds, the tag ids. Steps of 2 or 4 bytes are their low bits
# (the rest: step_base, whose low bits are zero); 8 bytes: the steps themselves
# (step_base 0). Milliseconds of 2 bytes: low bits (ms_base holds the high 16); 4 bytes:
# themselves. Tags: when pattern > 0, ``pattern`` u32 ids repeated from the first record
# on (record i has id i mod pattern); else tag_width (2 or 4) bytes each.
# n, pattern, tag_width, step_width, ms_width, 0, step_base, ms_base; 32 bytes (the
# values after it stay 8-byte aligned)
COLUMNS_HEAD = struct.Struct("<IIBBBBqI8x")
#: The columns of a COLUMNS payload in the order they follow its head. The writer
#: (``encode_columns``) and every reader (through ``columns_layout``) take the order from
#: here: a format that orders them otherwise changes this tuple alone.
COLUMN_ORDER = ("value", "step", "ms", "tag")
_LITTLE = sys.byteorder == "little"
_CODES = {2: "H", 4: "I", 8: "q"}  # struct codes of the column widths


class Column(NamedTuple):
    """One column of a COLUMNS payload, as :func:`columns_layout` finds it.

    Attributes:
        start, stop: its bytes, ``payload[start:stop]``.
        width: bytes an item (2, 4 or 8).
        code: the ``struct`` code of an item, little-endian: "d" (f64), "H" (u16),
            "I" (u32), "q" (i64). numpy's dtype is ``"<" + code``.
        base: added to each item to give the field (the high bits of steps and
            milliseconds stored in 2 or 4 bytes); 0 where the items are the fields.
    """

    start: int
    stop: int
    width: int
    code: str
    base: int


class ColumnsLayout(NamedTuple):
    """Where the columns of one COLUMNS payload lie: the one description of the layout
    that the standard-library, numpy and Arrow decoders all read (:func:`columns_layout`).

    Attributes:
        n: records in the frame.
        pattern: 0, or the period of the tag ids: ``tag`` then holds ``pattern`` u32
            ids and record ``i`` has id ``tag[i % pattern]``.
        value, step, ms, tag: the columns (:class:`Column`); ``step`` and ``ms`` have
            ``n`` items, ``tag`` has ``n`` (or ``pattern``), ``value`` ``n`` f64.
    """

    n: int
    pattern: int
    value: Column
    step: Column
    ms: Column
    tag: Column


def _uniform(col: memoryview) -> bool:
    """Whether every item of the strided view ``col`` is the same."""
    raw = col.tobytes()
    return raw.count(raw[: col.itemsize]) == len(col)


def encode_columns(records: bytes | memoryview) -> bytes | None:
    """A COLUMNS payload holding the POINT records ``records`` (in order), or None
    where it cannot be made here (a big-endian machine: write POINTS). No loop per
    point: strided views of the records, copied in C; the columns in
    :data:`COLUMN_ORDER`."""
    n = len(records) // POINT_SIZE
    if not _LITTLE or not n or len(records) % POINT_SIZE:
        return None
    view = memoryview(records)
    q, u, h = view.cast("q"), view.cast("I"), view.cast("H")
    cols = {"value": view.cast("d")[1::3].tobytes()}
    base = q[0]
    if base >= 0 and _uniform(u[1::6]) and _uniform(h[1::12]):
        step_w, step_base = 2, base & ~0xFFFF
        cols["step"] = h[0::12].tobytes()
    elif base >= 0 and _uniform(u[1::6]):
        step_w, step_base = 4, base & ~0xFFFFFFFF
        cols["step"] = u[0::6].tobytes()
    else:
        step_w, step_base = 8, 0
        cols["step"] = q[0::3].tobytes()
    if _uniform(h[11::12]):
        ms_w, ms_base = 2, u[5] & 0xFFFF0000
        cols["ms"] = h[10::12].tobytes()
    else:
        ms_w, ms_base = 4, 0
        cols["ms"] = u[5::6].tobytes()
    tids = u[4::6].tobytes()
    at = tids.find(tids[:4], 4)
    while at > 0 and at % 4:
        at = tids.find(tids[:4], at + 1)
    period = at // 4 if at > 0 else n
    tag_w = 2 if _uniform(h[9::12]) and h[9] == 0 else 4
    if 4 * period < tag_w * n and tids[4 * period :] == tids[: -4 * period]:
        tag_w, pattern = 0, period
        cols["tag"] = tids[: 4 * period]
    else:
        pattern = 0
        cols["tag"] = h[8::12].tobytes() if tag_w == 2 else tids
    head = COLUMNS_HEAD.pack(n, pattern, tag_w, step_w, ms_w, 0, step_base, ms_base)
    return b"".join([head, *(cols[name] for name in COLUMN_ORDER)])


#: Layouts by (head bytes, payload length): the consecutive frames of a log mostly share
#: a head (the same widths and bases), so a read computes a few layouts, not one a frame.
_LAYOUTS: dict[tuple[bytes, int], ColumnsLayout] = {}


def columns_layout(payload: bytes | memoryview) -> ColumnsLayout:
    """Where each column of a COLUMNS payload starts, its width and its base, from its
    head (``COLUMNS_HEAD``), checked against the payload's length. The one place the
    layout is computed: every decoder (``decode_columns``, the numpy and Arrow readers,
    the last-step scan) reads the columns where this says.

    Raises:
        ValueError: the payload is malformed (sizes, widths or bases that do not fit).
    """
    size = COLUMNS_HEAD.size
    if len(payload) < size:
        raise ValueError("truncated columns head")
    key = (bytes(payload[:size]), len(payload))
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = _layout(payload)
        if len(_LAYOUTS) >= 256:
            _LAYOUTS.clear()
        _LAYOUTS[key] = layout
    return layout


def _layout(payload: bytes | memoryview) -> ColumnsLayout:
    """:func:`columns_layout`, computed."""
    n, pattern, tag_w, step_w, ms_w, _zero, step_base, ms_base = COLUMNS_HEAD.unpack_from(payload, 0)
    if step_w not in (2, 4, 8) or ms_w not in (2, 4) or (pattern == 0 and tag_w not in (2, 4)):
        raise ValueError("columns of an unknown width")
    if pattern > n or (pattern and tag_w):
        raise ValueError("bad tag pattern")
    if step_w < 8 and (step_base < 0 or step_base & ((1 << 8 * step_w) - 1)):
        raise ValueError("bad step base")
    if step_w == 8 and step_base:
        raise ValueError("bad step base")
    if (ms_w == 2 and ms_base & 0xFFFF) or (ms_w == 4 and ms_base):
        raise ValueError("bad ms base")
    codes = _CODES
    # (items, width, code, base) of each column
    specs = {"value": (n, 8, "d", 0), "step": (n, step_w, codes[step_w], step_base),
             "ms": (n, ms_w, codes[ms_w], ms_base),
             "tag": (pattern, 4, "I", 0) if pattern else (n, tag_w, codes[tag_w], 0)}
    cols = {}
    at = COLUMNS_HEAD.size
    for name in COLUMN_ORDER:
        items, width, code, base = specs[name]
        stop = at + items * width
        cols[name] = Column(at, stop, width, code, base)
        at = stop
    if at != len(payload):
        raise ValueError("columns do not fill the frame")
    return ColumnsLayout(n, pattern, cols["value"], cols["step"], cols["ms"], cols["tag"])


def decode_columns(payload: bytes | memoryview) -> bytes:
    """The POINT records of a COLUMNS payload, as a POINTS payload would hold them
    (standard library only: the start and end scans of ``_steps``; bulk readers
    decode with numpy or Arrow, ``nblog.reader``), the columns where
    :func:`columns_layout` says.

    Raises:
        ValueError: the payload is malformed (sizes, widths or bases that do not fit).
    """
    lay = columns_layout(payload)
    n, pattern = lay.n, lay.pattern
    src = memoryview(bytes(payload))  # a copy: aligned, so the casts below copy at full speed
    values = src[lay.value.start : lay.value.stop]
    steps = src[lay.step.start : lay.step.stop]
    ms = src[lay.ms.start : lay.ms.stop]
    tags = src[lay.tag.start : lay.tag.stop]
    step_w, step_base = lay.step.width, lay.step.base
    ms_w, ms_base = lay.ms.width, lay.ms.base
    if not _LITTLE:  # slow but right: field by field
        vals = struct.unpack(f"<{n}d", values)
        st = struct.unpack(f"<{n}{lay.step.code}", steps)
        mss = struct.unpack(f"<{n}{lay.ms.code}", ms)
        if pattern:
            pat = struct.unpack(f"<{pattern}I", tags)
            tg = [pat[i % pattern] for i in range(n)]
        else:
            tg = list(struct.unpack(f"<{n}{lay.tag.code}", tags))
        return b"".join(POINT.pack(step_base + st[i], vals[i], tg[i], ms_base + mss[i]) for i in range(n))
    from array import array  # a shared library: loaded by readers only

    out = bytearray(n * POINT_SIZE)
    if not n:
        return bytes(out)
    dst = memoryview(out)
    q, d, u, h = dst.cast("q"), dst.cast("d"), dst.cast("I"), dst.cast("H")
    d[1::3] = values.cast("d")
    if step_w == 8:
        q[0::3] = steps.cast("q")
    elif step_w == 4:
        u[0::6] = steps.cast("I")
        u[1::6] = memoryview(array("I", (step_base >> 32,)) * n)
    else:
        h[0::12] = steps.cast("H")
        h[1::12] = memoryview(array("H", ((step_base >> 16) & 0xFFFF,)) * n)
        u[1::6] = memoryview(array("I", (step_base >> 32,)) * n)
    if ms_w == 4:
        u[5::6] = ms.cast("I")
    else:
        h[10::12] = ms.cast("H")
        h[11::12] = memoryview(array("H", (ms_base >> 16,)) * n)
    if pattern:  # the ids repeated to n of them: one copy, whatever the period
        u[4::6] = memoryview((tags.tobytes() * -(-n // pattern))[: 4 * n]).cast("I")
    elif lay.tag.width == 4:
        u[4::6] = tags.cast("I")
    else:
        h[8::12] = tags.cast("H")
    return bytes(out)


def points_payload(kind: int, payload: bytes | memoryview) -> bytes | memoryview:
    """The POINT records of a POINTS frame (its payload) or of a COLUMNS frame
    (decoded). Raises ``ValueError`` for a malformed COLUMNS payload."""
    return decode_columns(payload) if kind == FRAME_COLUMNS else payload


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


def point_frames(records: bytes | bytearray | memoryview) -> bytes:
    """The POINT records ``records`` (whole, in order) framed for an event log: COLUMNS
    frames of at most :data:`FRAME_POINTS_MAX` records each (POINTS frames on a machine
    where columns cannot be made, see ``encode_columns``), concatenated."""
    size = FRAME_POINTS_MAX * POINT_SIZE
    view = memoryview(records)
    out = []
    for at in range(0, len(view), size):
        piece = view[at : at + size]
        columns = encode_columns(piece)
        out.append(frame(FRAME_POINTS, piece) if columns is None else frame(FRAME_COLUMNS, columns))
    return b"".join(out)


def doubled(framed: bytes) -> bytes:
    """One framed record written twice in a row, as every frame type of
    :data:`DOUBLED_FRAMES` is: one damaged byte lies in one copy, and a reader takes the
    other (``LogFile`` reports the damaged one as recovered)."""
    return framed + framed


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
