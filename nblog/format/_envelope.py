"""The envelope sidecar: a small min/max summary per scalar tag of one event log.

``envelope.r<rank>.s<session>.bin`` beside ``events.r<rank>.s<session>.log`` (see
``man 5 nb-format``, ENVELOPE FILES). Rank 0's writer thread keeps it (:class:`Builder`)
from what it already computes for the run summary: for every 1 MiB chunk of points it
writes, each scalar tag's first and last step, min, max, last value and count in that
chunk become one *segment*; neighbouring segments are merged (equal point counts)
whenever a tag has more than :data:`MAX_SEGMENTS`. No loop per point: a few Python
operations per tag and chunk.

The file is a cache, never the truth: it is written atomically (temp file + rename,
``_filesafety.write_atomic``, by the writer thread) at most every :data:`WRITE_INTERVAL_S` seconds while the log grows, and at session end,
only once the event log holds :data:`MIN_LOG_BYTES` (small logs are read whole faster
than a sidecar pays off). It records how many bytes of the log it covers (``offset``);
a reader reads the log's tail past that offset, or the whole log when the sidecar is
missing, torn, from another file or newer than the log.

Layout (little-endian)::

    magic b"NBENV\\x00" (6 bytes), u16 version (1)
    u32 header length H, u32 CRC-32 of the header
    header: H bytes of UTF-8 JSON, an object: rank, session, pid, wall_start (of the
        log's session header), offset (bytes of the log covered), first_step (the log's
        first step, null when none), tags: [[tag id, name, points, segments, CRC-32 of
        its segments], ...] for every scalar tag defined before offset (a tag without
        points yet has 0 segments: a reader of the tail knows its id)
    per tag, in the header's order: segments x SEGMENT (48 bytes: first step i64,
        last step i64, min f64, max f64, last value f64, points u64)

A segment without a finite value has min NaN and max NaN. Imports the standard library
only (the writer thread uses it).
"""

from __future__ import annotations

import json
import struct
import zlib

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from collections.abc import Sequence

MAGIC = b"NBENV\x00"
VERSION = 1
HEAD = struct.Struct("<6sHII")  # magic, version, header length, header CRC-32
SEGMENT = struct.Struct("<qqdddQ")  # first step, last step, min, max, last value, points
MAX_SEGMENTS = 512  # per tag: what a wide terminal draws, two per column
POINTS_PER_SEGMENT = 128  # at least, on average: the sidecar stays under 0.4 bytes a point
MIN_LOG_BYTES = 4 << 20  # no sidecar for a smaller event log (read whole in ~30 ms)
WRITE_INTERVAL_S = 30.0  # between two writes of a growing log's sidecar, at least
MAX_HEADER = 64 << 20  # a header declaring more is corrupt, never allocated
_NAN = float("nan")


class Builder:
    """The envelope of one event log, kept by its writer thread (not thread-safe: the
    writer calls it holding its lock)."""

    def __init__(self) -> None:
        self.segments: dict[int, list[list]] = {}  # tag id -> [first, last, min, max, last value, n]
        self.points: dict[int, int] = {}
        self.changes = 0

    def add(self, tid: int, steps: Sequence[int], values: Sequence[float], lo: float | None,
            hi: float | None) -> None:
        """One tag's points of one chunk (``steps``, ``values`` in log order, not empty),
        with their min and max (None: no finite value), as one segment."""
        n = len(values)
        segs = self.segments.get(tid)
        if segs is None:
            segs = self.segments[tid] = []
            self.points[tid] = 0
        segs.append([steps[0], steps[n - 1], _NAN if lo is None else lo, _NAN if hi is None else hi,
                     values[n - 1], n])
        total = self.points[tid] = self.points[tid] + n
        cap = min(MAX_SEGMENTS, max(1, total // POINTS_PER_SEGMENT))
        if len(segs) > cap:
            self.segments[tid] = merge(segs, cap)
        self.changes += 1

    def encode(self, header: dict, names: dict[int, str], offset: int, first_step: int | None) -> bytes:
        """The sidecar's bytes: ``header`` is the log's session header, ``names`` tag id
        -> name, ``offset`` the bytes of the log written so far."""
        tags, bodies = [], []
        for tid, name in names.items():  # every scalar tag defined so far, with points or not
            segs = self.segments.get(tid, [])
            body = b"".join(SEGMENT.pack(*seg) for seg in segs)
            tags.append([tid, name, self.points.get(tid, 0), len(segs), zlib.crc32(body)])
            bodies.append(body)
        meta = {"rank": header.get("rank"), "session": header.get("session"), "pid": header.get("pid"),
                "wall_start": header.get("wall_start"), "offset": offset, "first_step": first_step,
                "tags": tags}
        raw = json.dumps(meta, separators=(",", ":"), allow_nan=False).encode("utf-8")
        return HEAD.pack(MAGIC, VERSION, len(raw), zlib.crc32(raw)) + raw + b"".join(bodies)


def merge(segs: list[list], cap: int) -> list[list]:
    """Merge neighbouring segments into at most ``cap`` of about equal point counts."""
    total = sum(s[5] for s in segs)
    while len(segs) > cap:
        target = 2 * total / max(cap - 1, 1)
        out: list[list] = []
        cur: list | None = None
        for s in segs:
            if cur is not None and cur[5] + s[5] <= target:
                lo, hi = cur[2], cur[3]
                cur = [cur[0], s[1], s[2] if lo != lo or s[2] < lo else lo, s[3] if hi != hi or s[3] > hi else hi,
                       s[4], cur[5] + s[5]]
                out[-1] = cur
            else:
                cur = list(s)
                out.append(cur)
        if len(out) == len(segs):  # nothing merged (a huge segment between small ones): pair them
            out = [_pair(segs[i], segs[i + 1]) if i + 1 < len(segs) else segs[i] for i in range(0, len(segs), 2)]
        segs = out
    return segs


def _pair(a: list, b: list) -> list:
    lo = b[2] if a[2] != a[2] or b[2] < a[2] else a[2]
    hi = b[3] if a[3] != a[3] or b[3] > a[3] else a[3]
    return [a[0], b[1], lo, hi, b[4], a[5] + b[5]]


def decode_header(data: bytes) -> tuple[dict, int] | None:
    """``(header, offset of the first segment)`` of a sidecar's first bytes, or None
    when they are not a whole, valid sidecar header of this version."""
    if len(data) < HEAD.size:
        return None
    magic, version, length, crc = HEAD.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION or length > MAX_HEADER or len(data) < HEAD.size + length:
        return None
    raw = data[HEAD.size : HEAD.size + length]
    if zlib.crc32(raw) != crc:
        return None
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("offset"), int) or not isinstance(meta.get("tags"), list):
        return None
    return meta, HEAD.size + length
