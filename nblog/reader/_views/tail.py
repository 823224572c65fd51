"""Following one rank of a run while it is written: the engine of ``nb tail`` and the TUI.

:class:`Follower` turns a rank's event logs into :class:`Event` objects, session file by
session file, in file order. Each :meth:`Follower.poll` reads only the bytes appended
since the previous one (:class:`~nblog.reader._file.logfile.LogFile` keeps the offsets and leaves a
partial last frame for later: "not written yet"), picks up new session files (a resume)
and, while the run folder does not exist yet, simply finds nothing.

Memory is bounded by a window of the file, not by the file: each session file is read
in windows of :data:`_WINDOW` bytes (a larger one only for a frame that does not fit),
and ``poll(last=N)`` keeps at most N records of each kind from one window to the next,
decoding only the last N into events, so ``nb tail -n 5`` of a gigabyte log holds a
few MiB, never the log. :meth:`Follower.stream` with a large N reads the logs twice
(count, then yield the last N as they are read), so even ``nb tail -n 100000000``
holds a window, not N events.

Imports numpy (``import nblog`` does not import this module).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from ..._errors import RunNotFoundError
from ...format import _format as F
from .._file.logfile import Delta, LogFile, _unwrap
from .._file.select import tag_matcher
from .._file.wrap import unwrap_ms
from .._runfiles.locate import resolve_run
from .._runfiles.rankfiles import KIND_CODES, WINDOW, RankFiles, follow, read_on

_WINDOW = WINDOW  # bytes of a file read (and held) per LogFile poll
#: ``Follower.stream(last)`` above this reads the logs twice instead of keeping ``last`` records.
_STREAM_ABOVE = 10_000

#: Every kind of event; ``nb tail`` shows all but "system" unless asked.
KINDS = ("scalar", "timer", "text", "media", "system")
DEFAULT_KINDS = ("scalar", "timer", "text", "media")


@dataclass(frozen=True)
class Event:
    """One logged record of one rank.

    ``value`` is set for scalars, timers (seconds) and system metrics; ``text`` for text;
    ``meta`` (the media description) for media. ``wall_time`` is unix seconds.
    """

    rank: int
    session: int
    step: int
    kind: str
    tag: str
    wall_time: float
    value: float | None = None
    text: str | None = None
    meta: dict | None = None

    def to_json(self) -> dict:
        """A JSON-able dict with stable keys; non-finite values become the strings
        ``"nan"``, ``"inf"`` and ``"-inf"`` (JSON has no such numbers)."""
        return {
            "rank": self.rank,
            "session": self.session,
            "step": self.step,
            "kind": self.kind,
            "tag": self.tag,
            "wall_time": self.wall_time,
            "value": json_number(self.value),
            "text": self.text,
            "meta": self.meta,
        }


json_number = F.json_number  # one rule for non-finite numbers in JSON (nblog.format._format)


_PICKED_DTYPE = np.dtype([("step", "<i8"), ("value", "<f8"), ("tag", "<i8"), ("ms", "<i8")])


class _Picked:
    """The shown records of one session's poll so far, at most ``last`` of each kind
    (None: all of them): points as numpy rows, texts and media as decoded tuples."""

    def __init__(self, last: int | None):
        self.last = last
        self._points: list[np.ndarray] = []
        self._n = 0
        self.texts: deque | list = deque(maxlen=last) if last is not None else []
        self.media: deque | list = deque(maxlen=last) if last is not None else []

    def __bool__(self) -> bool:
        return bool(self._n or self.texts or self.media)

    def add_points(self, rows: np.ndarray) -> None:
        if not len(rows):
            return
        self._points.append(rows)
        self._n += len(rows)
        if self.last is not None and self._n > 2 * self.last + (1 << 16):
            self._points = [self.points()]  # trim now and then: bounded by 2N + a window
            self._n = len(self._points[0])

    def add_texts(self, items: Iterable[tuple]) -> None:
        self.texts.extend(items)

    def add_media(self, items: Iterable[tuple]) -> None:
        self.media.extend(items)

    def count(self) -> int:
        """How many records are kept (points, texts and media)."""
        return len(self.points()) + len(self.texts) + len(self.media)

    def points(self) -> np.ndarray:
        """The points kept, the last ``last`` of them."""
        if not self._points:
            return np.empty(0, _PICKED_DTYPE)
        rows = np.concatenate(self._points) if len(self._points) > 1 else self._points[0]
        if self.last is not None:
            rows = rows[max(0, len(rows) - self.last) :]
        return rows


class _Counter:
    """Counts the records :meth:`Follower._pick` would keep, keeping none."""

    last = None

    def __init__(self) -> None:
        self.n = 0

    def add_points(self, rows: np.ndarray) -> None:
        self.n += len(rows)

    def add_texts(self, items: Iterable[tuple]) -> None:
        self.n += sum(1 for _ in items)

    def add_media(self, items: Iterable[tuple]) -> None:
        self.n += sum(1 for _ in items)


class _Session:
    """One session file being followed."""

    def __init__(self, session: int, file: LogFile):
        self.session = session
        self.file = file
        self.prev_ms = 0  # last unwrapped millisecond value decoded
        self.allowed = np.zeros(0, bool)  # tag id → shown
        self.allowed_n = -1  # len(file.tags) when ``allowed`` was built

    def wall0(self) -> float:
        return float(self.file.header.get("wall_start") or 0.0)


class Follower:
    """Follow the events of one rank of a run.

    Args:
        run: a run id, a unique prefix, ``project/run id`` or a path to a run folder;
            it may not exist yet (:meth:`poll` returns nothing until it does).
        root: where ids are looked up (default ``$NB_DIR``, else ``./nb_runs``).
        rank: the rank to follow (default 0).
        kinds: the kinds of events to return (:data:`KINDS`); system metrics are left
            out by default.
        tags: shell-style globs; only tags matching one of them are returned.
        files: the run folder's :class:`~nblog.reader._runfiles.rankfiles.RankFiles`, shared by
            the Followers of many ranks (``nb watch``): its owner lists the folder
            (:meth:`~nblog.reader._runfiles.rankfiles.RankFiles.scan`) before each poll and this
            Follower never does (None: its own, listed at each poll).

    Not thread-safe: poll from one thread. Files are read, never written.

    Raises:
        AmbiguousRunError: (from :meth:`resolve`, :meth:`poll`) ``run`` matches several runs.
        FormatVersionError: (from :meth:`poll`) a file of a newer format version.
    """

    def __init__(
        self,
        run: str | os.PathLike,
        root: str | os.PathLike | None = None,
        *,
        rank: int = 0,
        kinds: Iterable[str] = DEFAULT_KINDS,
        tags: str | Iterable[str] | None = None,
        files: RankFiles | None = None,
    ):
        kinds = tuple(kinds)
        unknown = [k for k in kinds if k not in KIND_CODES]
        if unknown:
            raise ValueError(f"unknown event kinds {unknown}; known: {', '.join(KINDS)}")
        self.query = run
        self.root = root
        self.rank = rank
        self.dir: str | None = None
        self._kinds = {KIND_CODES[k] for k in kinds}
        self._match = tag_matcher(tags)
        self._sessions: dict[int, _Session] = {}
        self._files: RankFiles | None = files  # once the run folder is known
        self._shared = files is not None  # scanned by its owner, not here

    def resolve(self) -> str | None:
        """The run folder, or None while no run matches ``run`` (it may appear later)."""
        if self.dir is None:
            try:
                self.dir = resolve_run(self.query, self.root)
            except RunNotFoundError:
                return None
        return self.dir

    def poll(self, last: int | None = None) -> list[Event]:
        """Events appended since the previous poll, in file order, session by session.

        ``last=N`` keeps only the last N of them (and decodes only those): the
        ``nb tail -n N`` start; the file is read window by window, keeping at most N
        records of each kind between windows, so memory is bounded by N and a window,
        not by the log. Within one session's poll, records are ordered by the time
        they were logged.
        """
        if self.resolve() is None:
            return []
        self._discover()
        keep: deque[Event] | list[Event] = deque(maxlen=last) if last is not None else []
        for s in sorted(self._sessions):
            sess = self._sessions[s]
            lf = sess.file
            picked = _Picked(last)
            for delta in read_on(lf):
                if delta:
                    self._pick(sess, delta, picked)
            if picked:
                keep.extend(self._events(sess, picked))
        return list(keep)

    def stream(self, last: int | None = None) -> Iterator[Event]:
        """Like :meth:`poll`, but yields the events one by one, building each only
        when it is asked for: ``nb tail -n N`` of any N.

        For a large ``last`` (more than :data:`_STREAM_ABOVE`) on a first poll, the
        logs are read twice, window by window: once counting the records shown, once
        yielding the last ``last`` of them, so memory is bounded by a read window,
        never by ``last`` nor by the log; records are then ordered by the time they
        were logged within each window. Otherwise it is :meth:`poll`.

        Raises:
            FormatVersionError: a file of a newer format version.
        """
        if last is None or last <= _STREAM_ABOVE:
            yield from self.poll(last)
            return
        if self.resolve() is None:
            return
        self._discover()
        order = sorted(self._sessions)
        if any(self._sessions[s].file.offset or self._sessions[s].file.version is not None for s in order):
            yield from self.poll(last)  # not a first poll: what is new since the last one is small
            return
        total = 0
        for s in order:  # pass 1: count, keeping nothing
            counter = _Counter()
            self._read_session(self._sessions[s], counter)
            total += counter.n
        skip = max(0, total - last)
        files = self._files
        assert files is not None  # made by _discover
        for s in order:  # pass 2: from the start again, yielding what is past ``skip``
            old = self._sessions[s]
            if old.file.version == -1 or old.file._warned:  # not a log, or unreadable: said once in pass 1
                continue
            sess = self._sessions[s] = _Session(s, files.reopen(self.rank, s))
            for delta in read_on(sess.file):
                if delta:
                    picked = self._window(sess, delta)
                    n = picked.count()
                    if skip >= n:
                        skip -= n
                    else:
                        yield from self._iter_events(sess, picked, skip)
                        skip = 0

    def _window(self, sess: _Session, delta: Delta) -> _Picked:
        picked = _Picked(None)
        self._pick(sess, delta, picked)
        return picked

    def _read_session(self, sess: _Session, counter: _Counter) -> None:
        """Poll ``sess``'s file window by window to its end, counting what is shown."""
        for delta in read_on(sess.file):
            if delta:
                self._pick(sess, delta, counter)

    def sessions(self) -> list[int]:
        """Session numbers of this rank's event logs found so far (after a poll)."""
        return sorted(self._sessions)

    def logs(self) -> list[tuple[int, LogFile]]:
        """``(session, LogFile)`` of the session files read so far, in session order: each
        LogFile keeps its header, its END record and its failure and alert events as it
        is polled (``nb watch`` reads them)."""
        return [(s, self._sessions[s].file) for s in sorted(self._sessions)]

    def follow(
        self,
        interval: float = 0.25,
        *,
        timeout: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> Iterator[list[Event]]:
        """Yield each non-empty batch of new events, polling every ``interval`` seconds,
        until ``timeout`` seconds have passed (None: forever). ``sleep`` and ``clock``
        are injectable for tests."""
        return follow(self.poll, interval, timeout=timeout, sleep=sleep, clock=clock)

    # -- internals -----------------------------------------------------------------

    def _discover(self) -> None:
        if self._files is None:
            run_dir = self.dir
            assert run_dir is not None  # resolved before the first discovery
            self._files = RankFiles(run_dir, keep=False, window=_WINDOW)
        if not self._shared:
            self._files.scan()
        for s, lf in self._files.open_new(self.rank):
            self._sessions[s] = _Session(s, lf)

    def _allowed(self, sess: _Session) -> np.ndarray:
        tags = sess.file.tags
        if sess.allowed_n != len(tags):
            n = max(tags, default=-1) + 1
            allowed = np.zeros(n, bool)
            for tid, (kind, name) in tags.items():
                allowed[tid] = kind in self._kinds and self._match(name)
            sess.allowed, sess.allowed_n = allowed, len(tags)
        return sess.allowed

    def _pick(self, sess: _Session, delta: Delta, picked: _Picked | _Counter) -> None:
        """Add the shown records of one window to ``picked`` (points stay numpy rows)."""
        lf = sess.file
        dtype = np.dtype(F.NUMPY_POINT_DTYPE)
        for chunk in delta.points:  # frame by frame: views of the window, no copy of it
            raw = np.frombuffer(chunk, dtype=dtype)
            ms = _unwrap(raw["ms"], sess.prev_ms)
            if len(ms):
                sess.prev_ms = int(ms[-1])
            allowed = self._allowed(sess)
            tid = raw["tag"].astype(np.int64)
            ok = np.zeros(len(raw), bool)
            known = tid < len(allowed)
            ok[known] = allowed[tid[known]]
            idx = np.flatnonzero(ok)
            if picked.last is not None:
                idx = idx[max(0, len(idx) - picked.last) :]
            rows = np.empty(len(idx), _PICKED_DTYPE)
            rows["step"], rows["value"], rows["tag"], rows["ms"] = raw["step"][idx], raw["value"][idx], tid[idx], ms[idx]
            picked.add_points(rows)
        picked.add_texts(x for x in delta.texts if self._shown(lf, x[1], F.KIND_TEXT))
        picked.add_media(x for x in delta.media if self._shown(lf, x[1], F.KIND_MEDIA))

    def _events(self, sess: _Session, picked: _Picked) -> list[Event]:
        lf = sess.file
        wall0 = sess.wall0()
        # (ms, step, order, event): points, texts and media merged by the time they
        # were logged; records of the same millisecond by step, points first.
        items: list[tuple[int, int, int, Event]] = []
        pts = picked.points()
        steps, values, tids, mss = (pts[name].tolist() for name in ("step", "value", "tag", "ms"))
        for step, value, t, m in zip(steps, values, tids, mss, strict=True):
            kind, name = lf.tags[t]
            ev = Event(self.rank, sess.session, step, F.KIND_NAMES[kind], name, wall0 + m / 1000.0, value=value)
            items.append((m, step, len(items), ev))
        for step, t, m, text in picked.texts:
            m = unwrap_ms(m, sess.prev_ms)
            ev = Event(self.rank, sess.session, step, "text", lf.tags[t][1], wall0 + m / 1000.0, text=text)
            items.append((m, step, len(items), ev))
        for step, t, m, _offset, _length, meta in picked.media:
            m = unwrap_ms(m, sess.prev_ms)
            ev = Event(self.rank, sess.session, step, "media", lf.tags[t][1], wall0 + m / 1000.0, meta=meta)
            items.append((m, step, len(items), ev))
        if picked.texts or picked.media:
            items.sort(key=lambda x: (x[0], x[1], x[2]))
        return [x[3] for x in items]

    def _iter_events(self, sess: _Session, picked: _Picked, skip: int = 0) -> Iterator[Event]:
        """The events of ``picked`` in :meth:`_events`' order, the first ``skip`` left
        out, each built only when it is asked for (a few thousand at a time)."""
        lf = sess.file
        wall0 = sess.wall0()
        pts = picked.points()
        extra = [(step, t, unwrap_ms(m, sess.prev_ms), "text", text, None) for step, t, m, text in picked.texts]
        extra += [(step, t, unwrap_ms(m, sess.prev_ms), "media", None, meta)
                  for step, t, m, _offset, _length, meta in picked.media]
        n = len(pts) + len(extra)
        if extra:  # merged by the time logged, then step, points first (the order added)
            ms = np.concatenate([pts["ms"], np.array([x[2] for x in extra], np.int64)])
            steps = np.concatenate([pts["step"], np.array([x[0] for x in extra], np.int64)])
            perm = np.lexsort((np.arange(n), steps, ms))
        else:
            perm = None
        npts = len(pts)
        for lo in range(skip, n, 4096):
            idx = perm[lo : lo + 4096] if perm is not None else np.arange(lo, min(n, lo + 4096))
            is_pt = idx < npts
            sub = pts[idx[is_pt]]
            rows = zip(sub["step"].tolist(), sub["value"].tolist(), sub["tag"].tolist(), sub["ms"].tolist(),
                       strict=True)
            for i, point in zip(idx.tolist(), is_pt.tolist(), strict=True):
                if point:
                    step, value, t, m = next(rows)
                    kind, name = lf.tags[t]
                    yield Event(self.rank, sess.session, step, F.KIND_NAMES[kind], name, wall0 + m / 1000.0,
                                value=value)
                else:
                    step, t, m, kind, text, meta = extra[i - npts]
                    yield Event(self.rank, sess.session, step, kind, lf.tags[t][1], wall0 + m / 1000.0,
                                text=text, meta=meta)

    def _shown(self, lf: LogFile, tid: int, kind: int) -> bool:
        entry = lf.tags.get(tid)
        return entry is not None and entry[0] == kind and kind in self._kinds and self._match(entry[1])
