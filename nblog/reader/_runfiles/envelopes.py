"""A scalar tag's min/max envelope, read from the writer's sidecars instead of the whole log.

:func:`read_envelopes` gives, per scalar tag of one rank, a few hundred segments along the
step axis (first and last step, min, max, last value, points), enough to draw a long run
at terminal width without reading its event logs: for each session it reads
``envelope.r<rank>.s<session>.bin`` (``nblog/format/_envelope.py``; ``man nb-format``,
ENVELOPE FILES) and only the part of the event log the sidecar does not cover (a run
still being written, a ``kill -9`` after the last sidecar write). A session without a
usable sidecar (older runs, small logs, a torn or foreign file, a log truncated under it)
is read whole, so the answer is always complete; ``max_log_bytes`` bounds what may be
read that way (a viewer that would rather read the full series then).

The event log stays the truth: a sidecar that does not match its log (another session
header, an offset past the log's end, a bad checksum) is ignored. The hiding rule
(``man nb-format``, HIDING RULE) applies per segment: segments of a session that start
at or after a later session's first step are left out, and one that straddles it ends
there (its min/max may still include a hidden point: a display summary, never data).

Imports numpy (``import nblog`` does not import this module).
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

import numpy as np

from ...format import _envelope as E
from ...format import _format as F
from ...format._filenames import envelope_file_name
from ...format._runfile import open_regular
from ...format._walk import header_version, read_header
from .._file.logfile import LogFile
from .rankfiles import event_files, read_on

_SEGMENT = np.dtype([("first", "<i8"), ("last", "<i8"), ("lo", "<f8"), ("hi", "<f8"), ("value", "<f8"),
                     ("n", "<u8")])
assert _SEGMENT.itemsize == E.SEGMENT.size


@dataclass(frozen=True)
class Envelope:
    """One scalar tag's envelope on one rank, sessions in order, hidden segments left out.

    Attributes (numpy arrays, one entry per segment, in log order): ``first_step`` and
    ``last_step`` (int64: the steps of the segment's first and last point), ``lo`` and
    ``hi`` (float64: its min and max finite value, NaN when it has none), ``last``
    (float64: the value of its last point), ``count`` (int64: its points), ``session``
    (int32). ``log_bytes_read``: bytes of event logs read to make it (0: the sidecars
    alone); ``points``: the points it summarises.
    """

    tag: str
    rank: int
    first_step: np.ndarray
    last_step: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    last: np.ndarray
    count: np.ndarray
    session: np.ndarray
    log_bytes_read: int

    @property
    def points(self) -> int:
        return int(self.count.sum())

    def __len__(self) -> int:
        return len(self.first_step)


@dataclass
class _Session:
    """What one session contributes: per tag name its segments, its first step, bytes read."""

    segments: dict[str, np.ndarray]
    first_step: int | None
    read: int


def read_envelopes(run_dir: str | os.PathLike, tags: list[str] | None = None, rank: int = 0, *,
                   max_log_bytes: int | None = None) -> dict[str, Envelope] | None:
    """The envelopes of ``rank``'s scalar tags (``tags``: those only; None: all).

    Args:
        run_dir: the run folder.
        tags: the tag names wanted (None: every scalar tag of the rank).
        rank: the rank.
        max_log_bytes: bytes of event logs this may read at most (tails past the
            sidecars and logs without one); None: no bound.

    Returns:
        tag -> :class:`Envelope` for each wanted tag with points (sorted by name); None
        when making them would read more than ``max_log_bytes`` of event logs.
    """
    run_dir = os.fspath(run_dir)
    files = sorted((s, path) for (r, s), path in event_files(run_dir).items() if r == rank)
    wanted = set(tags) if tags is not None else None
    budget = max_log_bytes
    sessions: list[tuple[int, _Session]] = []
    for s, path in files:
        got = _session(run_dir, rank, s, path, wanted, budget)
        if got is None:
            return None
        if budget is not None:
            budget -= got.read
        sessions.append((s, got))
    # the hiding rule per session: the smallest first step of any later session
    limits: dict[int, int | None] = {}
    best: int | None = None
    for s, got in reversed(sessions):
        limits[s] = best
        if got.first_step is not None:
            best = got.first_step if best is None else min(best, got.first_step)
    per_tag: dict[str, list[tuple[int, np.ndarray]]] = {}
    for s, got in sessions:
        for name, seg in got.segments.items():
            limit = limits[s]
            if limit is not None and len(seg):
                seg = seg[seg["first"] < limit].copy()
                seg["last"] = np.minimum(seg["last"], limit - 1)
            if len(seg):
                per_tag.setdefault(name, []).append((s, seg))
    read = sum(got.read for _s, got in sessions)
    out: dict[str, Envelope] = {}
    for name in sorted(per_tag):
        parts = per_tag[name]
        seg = np.concatenate([p for _s, p in parts])
        out[name] = Envelope(
            tag=name, rank=rank, first_step=seg["first"].astype(np.int64), last_step=seg["last"].astype(np.int64),
            lo=seg["lo"].astype(np.float64), hi=seg["hi"].astype(np.float64),
            last=seg["value"].astype(np.float64), count=seg["n"].astype(np.int64),
            session=np.concatenate([np.full(len(p), s, np.int32) for s, p in parts]), log_bytes_read=read,
        )
    return out


def _session(run_dir: str, rank: int, session: int, path: str, wanted: set[str] | None,
             budget: int | None) -> _Session | None:
    """One session's segments: the sidecar's plus the log's tail past it, or the whole
    log when there is no usable sidecar; None when that reads more than ``budget``."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return _Session({}, None, 0)
    side = _sidecar(os.path.join(run_dir, envelope_file_name(rank, session)), path, size, wanted)
    offset = side[2] if side is not None else 0
    if budget is not None and size - offset > budget:
        return None
    lf = LogFile(path, keep=False)
    segments: dict[str, np.ndarray] = {}
    first_step: int | None = None
    if side is not None:
        segments, first_step, offset, names = side
        if offset < size:
            lf.version = _version(path)
            lf.offset = offset
            lf.tags = {tid: (F.KIND_SCALAR, name) for tid, name in names.items()}
    tail = _tail_segments(lf, wanted) if offset < size else {}
    if first_step is None:
        first_step = lf.first_step
    for name, seg in tail.items():
        segments[name] = np.concatenate([segments[name], seg]) if name in segments else seg
    return _Session(segments, first_step, max(0, lf.offset - offset) if offset < size else 0)


def _version(path: str) -> int | None:
    try:
        with open_regular(path) as f:
            head = f.read(F.FILE_HEADER.size)
    except OSError:
        return None
    return header_version(head)


def _sidecar(side_path: str, log_path: str, log_size: int,
             wanted: set[str] | None) -> tuple[dict[str, np.ndarray], int | None, int, dict[int, str]] | None:
    """``(tag -> segments, first step, log bytes covered, tag id -> name)`` of a sidecar
    that matches its log, or None (missing, torn, foreign, newer than the log)."""
    try:
        with open_regular(side_path) as f:
            data = f.read()
    except OSError:
        return None
    head = E.decode_header(data)
    if head is None:
        return None
    meta, pos = head
    offset = meta["offset"]
    if offset > log_size or _version(log_path) is None:
        return None  # the log was truncated or replaced: the sidecar is not its summary
    header = read_header(log_path)
    if any(meta.get(k) != header.get(k) for k in ("rank", "session", "pid", "wall_start")):
        return None
    segments: dict[str, np.ndarray] = {}
    names: dict[int, str] = {}
    try:
        for tid, name, _points, nseg, crc in meta["tags"]:
            length = int(nseg) * _SEGMENT.itemsize
            body = data[pos : pos + length]
            if len(body) != length or zlib.crc32(body) != crc:
                return None
            pos += length
            names[int(tid)] = str(name)
            if nseg and (wanted is None or name in wanted):
                segments[str(name)] = np.frombuffer(body, _SEGMENT)
    except (TypeError, ValueError):
        return None
    first = meta.get("first_step")
    return segments, first if isinstance(first, int) else None, offset, names


def _tail_segments(lf: LogFile, wanted: set[str] | None) -> dict[str, np.ndarray]:
    """Segments of the scalar points ``lf`` reads from its offset to the end of what is
    written: each read's points per tag cut into pieces of about equal counts, merged
    down to ``E.MAX_SEGMENTS`` at the end (memory: one read's records at a time)."""
    dtype = np.dtype(F.NUMPY_POINT_DTYPE)
    parts: dict[str, list[np.ndarray]] = {}
    for delta in read_on(lf):
        ids = {tid: name for tid, (kind, name) in lf.tags.items()
               if kind == F.KIND_SCALAR and (wanted is None or name in wanted)}
        chunks = [np.frombuffer(p, dtype) for p in delta.points if len(p)]
        if not ids or not chunks:
            continue
        rec = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
        order = np.argsort(rec["tag"], kind="stable")  # one sort, then a slice per tag
        tag_sorted = rec["tag"][order]
        for tid, name in ids.items():
            a, b = np.searchsorted(tag_sorted, [tid, tid + 1])
            if b > a:
                rows = rec[order[a:b]]
                parts.setdefault(name, []).append(segments_of(rows["step"], rows["value"]))
    return {name: merge_segments(np.concatenate(p) if len(p) > 1 else p[0]) for name, p in parts.items()}


def merge_segments(seg: np.ndarray, cap: int = E.MAX_SEGMENTS) -> np.ndarray:
    """Neighbouring segments merged into at most ``cap`` groups of about equal point
    counts (``seg`` itself when it has no more than ``cap``)."""
    if len(seg) <= cap:
        return seg
    n = seg["n"].astype(np.int64)
    cum = np.cumsum(n) - n  # points before each segment
    group = cum * cap // max(int(cum[-1] + n[-1]), 1)
    starts = np.flatnonzero(np.concatenate([[True], np.diff(group) != 0]))
    ends = np.append(starts[1:], len(seg))
    out = np.empty(len(starts), _SEGMENT)
    out["first"] = seg["first"][starts]
    out["last"] = seg["last"][ends - 1]
    with np.errstate(invalid="ignore"):
        out["lo"] = np.fmin.reduceat(seg["lo"], starts)
        out["hi"] = np.fmax.reduceat(seg["hi"], starts)
    out["value"] = seg["value"][ends - 1]
    out["n"] = np.add.reduceat(seg["n"], starts)
    return out


def segments_of(steps: np.ndarray, values: np.ndarray, cap: int = E.MAX_SEGMENTS) -> np.ndarray:
    """One tag's points (in log order) as at most ``cap`` segments of about equal counts
    (at least ``E.POINTS_PER_SEGMENT`` points each where there are enough)."""
    n = len(values)
    k = max(1, min(cap, -(-n // E.POINTS_PER_SEGMENT)))
    starts = (np.arange(k, dtype=np.int64) * n) // k
    ends = np.append(starts[1:], n)
    v = np.asarray(values, np.float64)
    finite = np.isfinite(v)
    lo = np.minimum.reduceat(np.where(finite, v, np.inf), starts)
    hi = np.maximum.reduceat(np.where(finite, v, -np.inf), starts)
    none = ~np.logical_or.reduceat(finite, starts)
    lo[none] = np.nan
    hi[none] = np.nan
    out = np.empty(k, _SEGMENT)
    out["first"] = steps[starts]
    out["last"] = steps[ends - 1]
    out["lo"], out["hi"] = lo, hi
    out["value"] = v[ends - 1]
    out["n"] = ends - starts
    return out
