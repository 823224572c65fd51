"""Incremental reading of one event log.

:class:`LogFile` keeps the offset of the first byte it has not consumed. Each
:meth:`LogFile.poll` reads only the bytes appended since, parses the complete frames
among them and leaves a partial last frame for the next poll ("not written yet",
as TensorBoard's event-file loader does). Corruption is kept apart from truncation:

- a frame whose header fails its checksum is skipped up to the next ``NBF`` magic,
  and its bytes are counted in ``skipped_bytes``;
- a frame whose payload fails its checksum is skipped and counted when more data
  follows it; at the very end of the file it counts as not yet written
  (``pending_bytes``), which is also what a ``kill -9`` leaves behind.

Every damaged range is recorded once (:attr:`LogFile.damage`, a :class:`Damage` each:
where, what frame, how many points) and reported as it is read, with a
:class:`~nblog.DamagedLogWarning`: no reader skips bytes without a word. A damaged copy
of a frame the writer writes twice (``F.DOUBLED_FRAMES``) whose other copy is read
costs nothing and says so; a damaged file header is read past when the session header
after it names the format; points whose tag definitions were lost are counted.

The file header and the frame walk are the format's (``nblog.format._walk``: one walk
for every reader, the torn-tail rule included); what is this module's own is what a
reader does with what the walk finds: damage recorded and reported, frames decoded,
the state of a log read so far, and the payloads' checksums of a big read computed in
two threads (:func:`_checksums`, handed to the walk).

Point records are kept as raw payload bytes and decoded in bulk with numpy by
:meth:`LogFile.points` (imported only then). A COLUMNS frame is kept as it is in the file
(its layout checked, ``F.columns_layout``): bulk readers take its columns straight from
it (:meth:`LogFile.point_chunks`), and it becomes 24-byte records only where those are
asked for (:attr:`LogFile.chunks`, :attr:`Delta.points`). Every decoder of its columns
(the standard library's here, numpy's :func:`_columns_of`, Arrow's in
``_columns_read``) reads them where ``F.columns_layout`` says.
"""

from __future__ import annotations

import os
import struct
import sys
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from ... import _log as log
from ..._errors import DamagedLogWarning, FormatVersionError
from ...format import _format as F
from ...format import _walk as W
from ...format._filenames import parse_event_file_name
from ...format._runfile import open_regular
from .words import plural
from .wrap import unwrap_ms, unwrap_ms_array

TYPE_CHECKING = False  # numpy is imported where points are asked for, typing never
if TYPE_CHECKING:
    import numpy as np

_READ_LIMIT = 1 << 30  # bytes read per poll at most; the rest waits for the next poll


@dataclass
class Damage:
    """One damaged range of an event log, as :class:`LogFile` skipped it.

    Attributes:
        start, stop: byte offsets in the file, ``[start, stop)``.
        frame: what the bytes held, by their frame header's type (``F.FRAME_NAMES``:
            "points", "tag definitions", ...), "file header", or None where the frame
            header itself is damaged (what followed it is unknown).
        points: points left out, where known: a points frame's count, or the points whose
            tag definitions were lost (:attr:`LogFile.damage`'s last entry, growing as
            they are read). None: unknown.
        recovered: nothing was lost: a damaged copy of a frame written twice whose other
            copy was read, or a file header whose format the session header gave.
    """

    start: int
    stop: int
    frame: str | None
    points: int | None = None
    recovered: bool = False

    @property
    def size(self) -> int:
        """Bytes damaged."""
        return self.stop - self.start


class _Columns:
    """A COLUMNS payload as read (a view of the bytes read), its layout checked
    (``F.columns_layout``); decoded by whoever reads its points."""

    __slots__ = ("payload", "layout", "n")

    def __init__(self, payload: memoryview):
        self.payload = payload
        self.layout = F.columns_layout(payload)  # ValueError: malformed
        self.n = self.layout.n

    def _at(self, i: int) -> tuple[int, int, int]:
        """``(step, tag id, ms)`` of record ``i``, read from the columns (no numpy)."""
        lay = self.layout
        p = self.payload
        unpack = struct.unpack_from
        s, m, t = lay.step, lay.ms, lay.tag
        step = s.base + unpack("<" + s.code, p, s.start + s.width * i)[0]
        ms = m.base + unpack("<" + m.code, p, m.start + m.width * i)[0]
        k = i % lay.pattern if lay.pattern else i
        return step, unpack("<" + t.code, p, t.start + t.width * k)[0], ms

    def tag_counts(self) -> tuple[list[int], list[int] | None]:
        """``(tag ids, weights)``: each record's tag id (weights None), or, for a tag
        pattern, the pattern's ids and how many records each stands for. No numpy."""
        from array import array

        n, pattern, t = self.n, self.layout.pattern, self.layout.tag
        col = array(t.code)
        col.frombytes(self.payload[t.start : t.stop])
        if sys.byteorder != "little":
            col.byteswap()
        if pattern:
            return col.tolist(), [n // pattern + (i < n % pattern) for i in range(pattern)]
        return col.tolist(), None

    def records(self) -> Iterator[tuple[int, float, int, int]]:
        """``(step, value, tag id, ms)`` of each record in order, one at a time
        (the first-step scan stops at the first one it wants)."""
        at = self.layout.value.start
        for i in range(self.n):
            step, tid, ms = self._at(i)
            yield step, struct.unpack_from("<d", self.payload, at + 8 * i)[0], tid, ms

    def last_ms(self) -> int:
        """The (wrapped, u32) milliseconds of the last record; the frame has one."""
        return self._at(self.n - 1)[2]


class _ColumnChunk:
    """The records of one COLUMNS frame as four numpy columns, indexed like a
    structured array of ``NUMPY_POINT_DTYPE`` (``chunk["step"]``...) and sized by
    ``len``; the columns are decoded on the first index, the values column a view."""

    __slots__ = ("_cols", "_columns")

    def __init__(self, cols: _Columns):
        self._cols = cols
        self._columns: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return self._cols.n

    def __getitem__(self, name: str) -> np.ndarray:
        if self._columns is None:
            self._columns = _columns_of(self._cols.payload, self._cols.layout)
        return self._columns[name]


_PARALLEL_CRC = 4 << 20  # bytes of payloads from which their checksums are computed in two threads


def _checksums(view: memoryview, spans: list[tuple[int, int]]) -> list[int]:
    """The CRC-32 of each ``view[start:stop]`` of ``spans``, in order; in two threads
    (two halves by bytes) when they hold ``_PARALLEL_CRC`` bytes or more."""
    crc32 = zlib.crc32
    total = sum(stop - start for start, stop in spans)
    if total < _PARALLEL_CRC or len(spans) < 2 or (os.cpu_count() or 1) < 2:
        return [crc32(view[a:b]) for a, b in spans]
    from concurrent.futures import ThreadPoolExecutor

    half, acc, cut = total // 2, 0, len(spans)
    for k, (a, b) in enumerate(spans):
        acc += b - a
        if acc >= half:
            cut = k + 1
            break

    def part(sub: list[tuple[int, int]]) -> list[int]:
        return [crc32(view[a:b]) for a, b in sub]

    with ThreadPoolExecutor(1, thread_name_prefix="nblog-crc") as pool:
        later = pool.submit(part, spans[cut:])
        first = part(spans[:cut])  # this thread takes the first half meanwhile
        return first + later.result()


def _as_records(chunks: list[memoryview | _Columns]) -> list[memoryview]:
    """``chunks`` with each COLUMNS frame replaced (in place) by its POINTS records."""
    for i, c in enumerate(chunks):
        if isinstance(c, _Columns):
            chunks[i] = _records_of_columns(c.payload)
    return chunks  # type: ignore[return-value]  # every item is a memoryview now


@dataclass
class Delta:
    """What one :meth:`LogFile.poll` found: new frames' contents, in file order."""

    # the new point frames: a POINTS payload, or a COLUMNS frame not decoded yet (:attr:`points`)
    pending: list[memoryview | _Columns] = field(default_factory=list, repr=False)
    texts: list[tuple[int, int, int, str]] = field(default_factory=list)
    media: list[tuple[int, int, int, int, int, dict]] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)  # failures and alerts (also in stats)

    def __bool__(self) -> bool:
        return bool(self.pending or self.texts or self.media or self.stats)

    @property
    def points(self) -> list[memoryview]:
        """The new POINTS payloads (24-byte records, file order); COLUMNS frames are
        decoded into records on the first access."""
        return _as_records(self.pending)


class LogFile:
    """One ``events.r<rank>.s<session>.log``, read incrementally.

    Attributes:
        path: the file.
        header: the session header (dict; empty until read).
        tags: tag id → (kind, name).
        texts, media, stats: every record of those kinds read so far, in file order.
        events: the failures and alerts read so far (the ``event`` object of each
            STATS frame that has one, a dict with a str ``kind``), kept even when
            ``keep`` is False: they are few, and a poller finds them here cheaply.
        end: the END frame (dict) once the session closed the file, else None.
        first_step: the first step of a non-system record, once one was read.
        max_ms: the largest session-relative millisecond seen (points, stats, end).
        skipped_bytes: corrupt bytes skipped; unknown_frames: frames of unknown type.
        damage: each damaged range skipped so far (:class:`Damage`), in file order, each
            reported once with a :class:`~nblog.DamagedLogWarning` as it was read.
        pending_bytes: bytes at the end not parsed (yet): a torn or growing tail.
    """

    def __init__(self, path: str, keep: bool = True, window: int = _READ_LIMIT):
        self.path = path
        self.keep = keep
        self.window = window  # bytes read (and held) per poll, more only for a frame that does not fit
        self.offset = 0
        self.version: int | None = None
        self.header: dict = {}
        self.tags: dict[int, tuple[int, str]] = {}
        self._chunks: list[memoryview | _Columns] = []  # views of the bytes read, file order
        self.texts: list[tuple[int, int, int, str]] = []
        self.media: list[tuple[int, int, int, int, int, dict]] = []
        self.stats: list[dict] = []
        self.events: list[dict] = []
        self.machine: dict | None = None
        self.end: dict | None = None
        self.first_step: int | None = None
        self.max_ms = 0
        self.skipped_bytes = 0
        self.damage: list[Damage] = []
        self._reported = 0  # damage entries warned about so far
        # the damage that may have held tag definitions (unrecovered): the points read after
        # it whose tag has no definition are counted into its ``points`` (reported as it grows)
        self._tags_lost: Damage | None = None
        self._orphans_reported = 0
        self.unknown_frames = 0
        self.pending_bytes = 0
        self.size = 0
        self._views: list = []  # numpy views of the POINTS payloads in self._chunks, made on demand
        self._warned = False  # about a file that cannot be read

    # -- parsing -------------------------------------------------------------------

    def poll(self) -> Delta:
        """Read and parse what was appended since the last poll: at most :attr:`window`
        bytes, twice as many (again and again) while not one whole frame fits in them
        and more of the file follows, up to the largest frame there can be.

        Raises:
            FormatVersionError: the file was written by a newer format version.
        """
        delta = Delta()
        want = self.window
        while True:
            try:
                with open_regular(self.path) as f:
                    size = self.size = os.fstat(f.fileno()).st_size
                    if size <= self.offset:
                        return delta
                    if self.version == -1:  # not an nb event log: skipped unread
                        self.skipped_bytes += size - self.offset
                        self.offset = size
                        return delta
                    # Read, never mapped: a mapped page of a file truncated under the reader
                    # (on any disk) is a SIGBUS, and bytes decoded from a mapping after their
                    # checksum was checked could change in between. What is parsed is this
                    # private copy, checked and decoded alike.
                    f.seek(self.offset)
                    data = f.read(min(size - self.offset, want))
            except FileNotFoundError:
                return delta
            except OSError as err:  # not a regular file (a FIFO, a device) or unreadable
                if not self._warned:
                    self._warned = True
                    log.warning("nblog: cannot read %s: %s; skipped", self.path, err.strerror or err)
                return delta
            pos = 0
            if self.version is None:
                if len(data) < F.FILE_HEADER.size:
                    self.pending_bytes = len(data)
                    return delta
                version = W.file_version(data)
                if version is None:
                    version = self._past_file_header(data, size)
                    if version is None:  # no event log, or one of a newer format (raised)
                        return delta
                self.version = version
                pos = F.FILE_HEADER.size
            stop = self._parse(data, pos, delta)
            self.offset += stop
            self.pending_bytes = len(data) - stop
            if stop > 0 or self.offset + len(data) >= size or want >= F.MAX_FRAME_LENGTH:
                return delta
            want *= 2  # no whole frame in the window, and more of the file after it

    def _past_file_header(self, data: bytes, size: int) -> int | None:
        """The format version of a file whose 8-byte header is not that of an event log
        this reader knows, or None (then the file is skipped, and reported, unless it is
        of a newer format: that raises).

        A damaged file header (one byte of it) must not cost the whole file: where a
        sound session header follows it and names a format this reader knows, the file
        is read in that format and the header reported as damaged, with nothing lost.

        Raises:
            FormatVersionError: the file is of a newer format (the session header, when
                sound, agrees with the file header).
        """
        named = W.named_version(W.session_at(data, F.FILE_HEADER.size))
        if named is not None:
            self._damaged(0, F.FILE_HEADER.size, "file header", 0, recovered=True)
            self._report()
            return named
        newer = W.newer_version(data)
        if newer is not None:
            raise FormatVersionError(self.path, newer, F.FORMAT_VERSION)
        self.version = -1
        self.skipped_bytes += size - self.offset
        self.offset = size
        self.damage.append(Damage(0, size, "file header"))
        self._report(f"not an nb event log (no file header nb knows): all {size} bytes skipped")
        return None

    def _damaged(self, start: int, stop: int, frame: str | None, points: int | None = None,
                 recovered: bool = False) -> None:
        """Record the damaged bytes ``[start, stop)`` of the file (offsets in the file);
        adjacent ranges of unknown frames (garbage between frames) make one entry."""
        last = self.damage[-1] if len(self.damage) > self._reported else None  # not reported yet
        if last is not None and frame is None and last.frame is None and last.stop == start:
            last.stop = stop
            return
        self.damage.append(Damage(start, stop, frame, points, recovered))
        if not recovered and frame in (None, "tag definitions"):
            self._tags_lost = self.damage[-1]

    def _report(self, what: str | None = None) -> None:
        """Warn (:class:`~nblog.DamagedLogWarning`) about each damage entry not reported
        yet, and about points of lost tag definitions counted since the last report."""
        lost = self._tags_lost
        if lost is not None and lost in self.damage[: self._reported] and (lost.points or 0) > self._orphans_reported:
            more = (lost.points or 0) - self._orphans_reported
            self._warn(lost, f"{plural(more, 'more point')} of tags whose definitions were damaged there left out")
        for d in self.damage[self._reported :]:
            self._warn(d, what)
        self._reported = len(self.damage)
        if lost is not None:
            self._orphans_reported = lost.points or 0

    def _count_orphans(self, ids: Iterator[int] | list[int], weights: list[int] | None = None) -> None:
        """Count the points of ``ids`` (tag ids; ``weights``: how many points each stands
        for) that have no definition, after a damage that may have held some."""
        lost = self._tags_lost
        tags = self.tags
        if weights is None:
            n = sum(1 for tid in ids if tid not in tags)
        else:
            n = sum(w for tid, w in zip(ids, weights, strict=True) if tid not in tags)
        if n and lost is not None:
            lost.points = (lost.points or 0) + n

    def _warn(self, d: Damage, what: str | None = None) -> None:
        rs = parse_event_file_name(os.path.basename(self.path))
        rank, session = rs if rs is not None else (None, None)
        who = f"rank {rank} session {session}: " if rs is not None else ""
        if what is None:
            if d.recovered:
                what = (f"a damaged copy of the {d.frame}; the other copy was read, nothing lost"
                        if d.frame != "file header" else "the file header; the session header named the format, nothing lost")
            elif d is self._tags_lost and d.points and d.frame is None:
                what = (f"a frame header: what the frame held was left out, and {plural(d.points, 'point')} read after it "
                        "whose tags have no definition (it may have held them)")
            elif d is self._tags_lost and d.points:
                what = f"a frame of {d.frame}; {plural(d.points, 'point')} of the tags it defined left out"
            elif d.frame is None:
                what = "a frame header; what the frame held was left out"
            else:
                what = (f"a frame of points; {plural(d.points, 'point')} left out" if d.frame == "points" and d.points is not None
                        else f"a frame of {d.frame}; what it held was left out")
        where = f"{d.size} bytes damaged at bytes {d.start}-{d.stop}: " if d.start or d.stop < self.size else ""
        message = f"nblog: {who}{self.path}: {where}{what}"
        warnings.warn(DamagedLogWarning(message, path=self.path, rank=rank, session=session, start=d.start,
                                        stop=d.stop, frame=d.frame, points=d.points, lost=not d.recovered),
                      stacklevel=2)

    def _parse(self, data: bytes, pos: int, delta: Delta) -> int:
        """Parse the frames of ``data`` from ``pos``; return where the first frame not
        parsed (torn, still being written) starts.

        The walk is the format's (``W.walk``: header to header, then the payloads'
        checksums, in two threads for a large read: :func:`_checksums`); each frame
        it found is then decoded, or its damage recorded, in order.
        """
        hsize = F.FRAME_HEADER_SIZE
        view = memoryview(data)
        walk, stopped = W.walk(data, pos, _checksums)
        base = self.offset
        for j, (p, kind, stop, sound) in enumerate(walk):
            if kind < 0:
                self.skipped_bytes += stop - p
                copy = _copy_of(walk, j)
                self._damaged(base + p, base + stop, None if copy is None else F.FRAME_NAMES[copy],
                              recovered=copy is not None)
                continue
            if not sound:
                self.skipped_bytes += stop - p
                self._damaged(base + p, base + stop, F.FRAME_NAMES.get(kind, f"type {kind}"),
                              _points_in(kind, view[p + hsize : stop]),
                              recovered=_copy_of(walk, j) is not None)
                continue
            try:
                self._frame(kind, view[p + hsize : stop], delta)
            except (ValueError, UnicodeDecodeError) as err:
                self.skipped_bytes += stop - p
                self._damaged(base + p, base + stop, F.FRAME_NAMES.get(kind, f"type {kind}"),
                              _points_in(kind, view[p + hsize : stop]),
                              recovered=_copy_of(walk, j) is not None)
                log.debug("nblog: bad frame in %s at %d: %s", self.path, base + p, err)
        self._report()
        return stopped

    def _frame(self, kind: int, payload: memoryview, delta: Delta) -> None:
        if kind == F.FRAME_COLUMNS:  # kept as it is: decoded by whoever reads the points
            cols = _Columns(payload)  # its head checked here: ValueError skips the frame
            if self._tags_lost is not None:
                self._count_orphans(*cols.tag_counts())
            if self.first_step is None:
                self._first_step_of(cols.records())
            if cols.n:
                self.max_ms = max(self.max_ms, unwrap_ms(cols.last_ms(), self.max_ms))
            delta.pending.append(cols)
            if self.keep:
                self._chunks.append(cols)
        elif kind == F.FRAME_POINTS:
            if len(payload) % F.POINT_SIZE:
                raise ValueError("points payload is not a whole number of records")
            # a view into the bytes just read, not a copy (they stay alive while it does)
            raw = payload
            if self._tags_lost is not None:
                self._count_orphans([rec[2] for rec in F.POINT.iter_unpack(raw)])
            if self.first_step is None:
                self._first_step_of(F.POINT.iter_unpack(raw))
            if len(raw):
                last_ms = F.POINT.unpack_from(raw, len(raw) - F.POINT_SIZE)[3]
                self.max_ms = max(self.max_ms, unwrap_ms(last_ms, self.max_ms))
            delta.pending.append(raw)
            if self.keep:
                self._chunks.append(raw)
        elif kind == F.FRAME_TAGS:
            for tid, tkind, name in F.decode_tag_defs(payload.tobytes()):
                self.tags[tid] = (tkind, name)
        elif kind == F.FRAME_TEXT:
            items = F.decode_texts(payload.tobytes())
            if self._tags_lost is not None:
                self._count_orphans([x[1] for x in items])
            if items and self.first_step is None:
                self.first_step = items[0][0]
            delta.texts.extend(items)
            if self.keep:
                self.texts.extend(items)
        elif kind == F.FRAME_MEDIA:
            refs = F.decode_media(payload.tobytes())
            if self._tags_lost is not None:
                self._count_orphans([x[1] for x in refs])
            if refs and self.first_step is None:
                self.first_step = refs[0][0]
            delta.media.extend(refs)
            if self.keep:
                self.media.extend(refs)
        elif kind in (F.FRAME_STATS, F.FRAME_END, F.FRAME_SESSION):
            obj = F.loads_json(payload)
            if not isinstance(obj, dict):
                raise ValueError("JSON frame is not an object")
            if kind == F.FRAME_SESSION:
                self.header = obj
                return
            if isinstance(obj.get("ms"), int):
                self.max_ms = max(self.max_ms, obj["ms"])
            if kind == F.FRAME_END:
                self.end = obj
            else:
                if isinstance(obj.get("machine"), dict):
                    self.machine = obj["machine"]
                event = obj.get("event")
                if isinstance(event, dict) and isinstance(event.get("kind"), str):
                    self.events.append(event)
                    delta.events.append(event)
                delta.stats.append(obj)
                if self.keep:
                    self.stats.append(obj)
        else:
            self.unknown_frames += 1
            if self.unknown_frames == 1:
                log.warning(
                    "nblog: %s has frames of a type this version does not know (%d); skipped",
                    self.path,
                    kind,
                )

    def _first_step_of(self, records: Iterator[tuple[int, float, int, int]]) -> None:
        for step, _v, tid, _ms in records:
            if self.tags.get(tid, (F.KIND_SCALAR, ""))[0] != F.KIND_SYSTEM:
                self.first_step = step
                return

    # -- bulk decoding -------------------------------------------------------------

    @property
    def chunks(self) -> list[memoryview]:
        """The point frames read so far as POINTS payloads (24-byte records, file
        order): views of the bytes read, COLUMNS frames decoded into records on the
        first access (bulk readers take :meth:`point_chunks` instead)."""
        return _as_records(self._chunks)

    def point_chunks(self) -> list:
        """The point frames read so far, file order, each indexable by field name
        (``raw["step"]`` i8, ``"value"`` f8, ``"tag"`` u4, ``"ms"`` u4 *wrapped*) and
        sized by ``len``: a POINTS payload as a numpy structured array of
        ``NUMPY_POINT_DTYPE`` that is a view of the bytes read, a COLUMNS frame as
        its four columns (each decoded once, contiguous; no 24-byte records made).
        Bulk readers decode these straight into their output; :attr:`ms_wrapped` says
        whether ``ms`` needs :func:`_unwrap`."""
        import numpy as np

        views = self._views
        views.extend([None] * (len(self._chunks) - len(views)))
        dtype = np.dtype(F.NUMPY_POINT_DTYPE)
        out: list = []
        for i, c in enumerate(self._chunks):
            if isinstance(c, _Columns):
                # its columns are made for each call, never held: the frame stays at its
                # size in the file (12-16 bytes a point) between reads
                out.append(_ColumnChunk(c))
            else:  # a POINTS payload, or a COLUMNS frame turned into records by .chunks
                if views[i] is None:
                    views[i] = np.frombuffer(c, dtype=dtype)
                out.append(views[i])
        return out

    @property
    def ms_wrapped(self) -> bool:
        """Whether some record's u32 milliseconds may have wrapped past 2**32: only in a
        session that ran 24.8 days or more (its ``max_ms`` reached 2**31)."""
        return self.max_ms >= (1 << 31)

    @property
    def n_points(self) -> int:
        """Point records read so far."""
        return sum(c.n if isinstance(c, _Columns) else len(c) // F.POINT_SIZE for c in self._chunks)

    def points(self) -> np.ndarray:
        """All point records read so far as a numpy structured array (a new one each
        call: the file's points are held once, as the bytes read).

        Fields: ``step`` (int64), ``value`` (float64), ``tag`` (uint32 tag id),
        ``ms`` (int64, unwrapped milliseconds since the session's start).
        """
        import numpy as np

        out_dtype = np.dtype([("step", "<i8"), ("value", "<f8"), ("tag", "<u4"), ("ms", "<i8")])
        chunks = self.point_chunks()
        out = np.empty(sum(len(c) for c in chunks), out_dtype)
        wrapped = self.ms_wrapped
        prev = 0
        o = 0
        for raw in chunks:
            part = out[o : o + len(raw)]
            for name in ("step", "value", "tag"):
                part[name] = raw[name]
            if not wrapped:
                part["ms"] = raw["ms"]
            elif len(raw):
                part["ms"] = _unwrap(raw["ms"], prev)
                prev = int(part["ms"][-1])
            o += len(raw)
        return out


def damage_record(d: Damage, rank: int, session: int, path: str) -> dict:
    """One damaged range as readers list it (``RunReader.damage``, ``nb show --json``)."""
    return {"rank": rank, "session": session, "path": path, "start": d.start, "stop": d.stop, "bytes": d.size,
            "frame": d.frame, "points": d.points, "lost": not d.recovered}


def _points_in(kind: int, payload: memoryview) -> int | None:
    """The points a damaged frame of ``kind`` held, where its payload still says: a
    POINTS frame's length; a COLUMNS head whose count fits the frame's length (checked
    against it, ``F.columns_layout``). None: not a points frame, or not known."""
    if kind == F.FRAME_POINTS:
        return len(payload) // F.POINT_SIZE
    if kind == F.FRAME_COLUMNS:
        try:
            return F.columns_layout(payload).n
        except ValueError:
            return None
    return None


def _copy_of(walk: list[tuple[int, int, int, bool]], j: int) -> int | None:
    """Whether entry ``j`` of ``walk`` (``(pos, kind, stop, sound)`` each, as ``W.walk``
    gives them; kind ``W.NO_FRAME``: bytes that are no frame) is one of the two copies
    of a frame type written twice (``F.DOUBLED_FRAMES``) and the other copy, right
    before or after it with the same length (and type, where the damaged one's header
    says it), passed its checksum: then nothing was lost. A copy whose header is
    damaged is bytes that are no frame, as long as the frame, up to the frame after
    it. Returns the copy's frame type, or None."""
    p, kind, stop, _sound = walk[j]
    if kind >= 0 and kind not in F.DOUBLED_FRAMES:
        return None
    for k in (j - 1, j + 1):
        if 0 <= k < len(walk) and walk[k][3]:
            q, other, qstop, _ = walk[k]
            if (other == kind or (kind < 0 and other in F.DOUBLED_FRAMES)) and qstop - q == stop - p \
                    and (qstop == p or q == stop):
                return other
    return None


def _unwrap(ms32: np.ndarray, start: int) -> np.ndarray:
    """Undo the 2**32 wrap of u32 milliseconds, continuing after ``start``: the rule of
    :mod:`nblog.reader._file.wrap` (:func:`~nblog.reader._file.wrap.unwrap_ms_array`)."""
    return unwrap_ms_array(ms32, start)


def _columns_of(payload: memoryview, layout: F.ColumnsLayout | None = None) -> dict[str, np.ndarray]:
    """The four columns of a COLUMNS payload, where ``F.columns_layout`` says (``layout``
    when already checked), each contiguous, decoded with numpy in a few vector
    operations: step (int64), value (float64, a view of the payload where it is
    aligned), tag (uint32), ms (uint32, as written: wrapped).

    Raises:
        ValueError: the payload is malformed.
    """
    import numpy as np

    lay = layout or F.columns_layout(payload)
    n, pattern = lay.n, lay.pattern
    raw = np.frombuffer(payload, np.uint8)
    # a frame lies anywhere in the file: unaligned columns copy ~50x slower (the address
    # from the array interface: ``raw.ctypes`` would import ctypes on a first read)
    if raw.__array_interface__["data"][0] % 8:
        raw = raw.copy()

    def column(c: F.Column) -> np.ndarray:
        return raw[c.start : c.stop].view("<" + c.code)

    value = column(lay.value)
    step = column(lay.step)
    if lay.step.width != 8:
        step = np.add(step, np.int64(lay.step.base), dtype=np.int64)
    ms = column(lay.ms)
    if lay.ms.width != 4:
        ms = np.add(ms, np.uint32(lay.ms.base), dtype=np.uint32)
    ids = column(lay.tag)
    if pattern:
        tag = np.full(n, ids[0], np.uint32) if pattern == 1 else np.tile(ids, -(-n // pattern))[:n]
    else:
        tag = ids.astype(np.uint32)
    return {"step": step, "value": value, "tag": tag, "ms": ms}


def _records_of_columns(payload: memoryview) -> memoryview:
    """The POINT records of a COLUMNS payload (``F.columns_layout``), decoded with numpy
    in a few vector operations (~10x the standard library's ``F.decode_columns``).

    Raises:
        ValueError: the payload is malformed.
    """
    import numpy as np

    cols = _columns_of(payload)
    out = np.empty(len(cols["step"]), np.dtype(F.NUMPY_POINT_DTYPE))
    for name, col in cols.items():
        out[name] = col
    return memoryview(out.view(np.uint8).data)
