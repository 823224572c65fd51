"""A run kept up to date in memory, for live viewers (the TUI).

:class:`LiveRun` follows the event logs of the ranks a viewer asked about. Each
:meth:`LiveRun.refresh` reads only the bytes appended since the previous one (through
:class:`~nblog.reader._file.logfile.LogFile`, which leaves a torn or growing tail for later), picks
up new session files, and appends the new points to the :class:`Series` already
extracted. Points are kept at full resolution, per file, as the raw records they were
read as (no copy); a series of one tag is extracted on demand and then extended.

The hiding rule (``man nb-format``, HIDING RULE) is applied per rank exactly as :class:`~nblog.RunReader`
does: a point of session *s* at a step ≥ the first step of a later session of the same
rank is hidden (system metrics never). A new session, or a later session's first step
becoming known, rebuilds that rank's series from the records in memory.

Thread-safety: every public method takes one lock; call them from any thread, but the
arrays a :class:`Series` hands out are views that stay valid and unchanged (appends
go past their end).

Imports numpy (``import nblog`` does not import this module).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

import numpy as np

from ...format import _format as F
from ...format._runfile import read_run_json
from .._file.logfile import LogFile, _unwrap, damage_record
from .._runfiles.progress import latest_step
from .._runfiles.rankfiles import KIND_CODES, RankFiles, active_offsets, hide_thresholds, read_on

_RAW = np.dtype(F.NUMPY_POINT_DTYPE)
_COMPACT_BELOW = 256 << 10  # records in blocks smaller than this are merged ...
_COMPACT_COUNT = 64  # ... once this many small blocks piled up


class Series:
    """One tag of one rank at full resolution; grows as the run is written.

    Attributes (numpy views of the first :attr:`n` points, in file order with hidden
    points left out): ``step`` (int64), ``value`` (float64), ``wall`` (unix seconds),
    ``active`` (seconds of this rank's sessions so far, queue gaps left out),
    ``session`` (int32). :attr:`version` grows at every change; :attr:`rebuilt` grows
    when the series was rebuilt rather than appended to.
    """

    _FIELDS = (("step", np.int64), ("value", np.float64), ("wall", np.float64),
               ("active", np.float64), ("session", np.int32))

    def __init__(self, rank: int, kind: str, tag: str):
        self.rank, self.kind, self.tag = rank, kind, tag
        self.n = 0
        self.version = 0
        self.rebuilt = 0
        self._buf = {name: np.empty(0, dt) for name, dt in self._FIELDS}

    def _clear(self) -> None:
        self.n = 0
        self.version += 1
        self.rebuilt += 1

    def _fill(self, picks: list, session: int, wall0: float, offset: float, wrapped: bool) -> None:
        """Append the records ``idx`` of each ``(block, start ms, idx)`` in ``picks``
        (raw records of session ``session``, whose clock started at unix time ``wall0``
        and after ``offset`` active seconds); ``wrapped``: unwrap u32 milliseconds."""
        k = sum(len(idx) for _b, _start, idx in picks)
        need = self.n + k
        cap = len(self._buf["step"])
        if need > cap:
            new_cap = max(need + need // 4, cap + cap // 4, 256)  # headroom: live appends don't copy
            for name, dt in self._FIELDS:
                nb = np.empty(new_cap, dt)
                nb[: self.n] = self._buf[name][: self.n]
                self._buf[name] = nb
        buf, o = self._buf, self.n
        for b, start, idx in picks:
            sl = slice(o, o + len(idx))
            np.take(b["step"], idx, out=buf["step"][sl])
            np.take(b["value"], idx, out=buf["value"][sl])
            ms = b["ms"][idx]
            secs = np.divide(_unwrap(ms, start) if wrapped else ms, 1000.0, out=buf["wall"][sl])
            np.add(secs, offset, out=buf["active"][sl])
            secs += wall0
            buf["session"][sl] = session
            o += len(idx)
        self.n = need
        self.version += 1

    def __len__(self) -> int:
        return self.n

    def __getattr__(self, name: str) -> np.ndarray:
        buf = self.__dict__.get("_buf")
        if buf is not None and name in buf:
            return buf[name][: self.n]
        raise AttributeError(name)

    def x(self, axis: str) -> np.ndarray:
        """The x values for ``axis``: "step", "wall" or "active" (float64)."""
        if axis == "step":
            return self.step.astype(np.float64)
        return getattr(self, axis)


class _File:
    """One session file of one rank: the parser and the point records read so far."""

    def __init__(self, rank: int, session: int, lf: LogFile):
        self.rank, self.session, self.path = rank, session, lf.path
        self.lf = lf
        self.blocks: list[np.ndarray] = []  # raw records, file order
        self.starts: list[int] = []  # unwrapped ms before each block (for unwrapping)
        self.prev_ms = 0
        self.texts: list[tuple[int, int, int, str]] = []
        self.last_step: int | None = None  # the highest of a scalar, timer, text or media record
        self.seen: set[int] = set()  # tag ids with at least one record (a tag can be defined without)

    def poll(self) -> int:
        """Read what was appended; returns the index of the first new block."""
        first = len(self.blocks)
        for delta in read_on(self.lf):
            system = None
            for raw in delta.points:
                arr = np.frombuffer(raw, dtype=_RAW)
                if not len(arr):
                    continue
                self.starts.append(self.prev_ms)
                self.blocks.append(arr)
                if self.lf.ms_wrapped:  # a session of 24.8 days or more
                    self.prev_ms = int(_unwrap(arr["ms"], self.prev_ms)[-1])
                else:  # no time reached 2**31 ms: none wrapped
                    self.prev_ms = int(arr["ms"][-1])
                if system is None:
                    system = np.zeros(max(self.lf.tags, default=0) + 1, bool)
                    for tid, (k, _n) in self.lf.tags.items():
                        system[tid] = k == F.KIND_SYSTEM
                    every_known = not system.any()
                t = arr["tag"]
                if len(self.seen) < len(self.lf.tags):  # some tag has no record yet: O(block), else free
                    self.seen.update(i for i in np.unique(t).tolist() if i in self.lf.tags)  # ids up to 2**32-1: no bincount
                if every_known and int(t.max()) < len(system):
                    steps = arr["step"]  # no system metric in this block (the common case)
                else:
                    known = t < len(system)
                    steps = arr["step"][known & ~system[np.minimum(t, len(system) - 1)]]
                if len(steps):
                    top = int(steps.max())
                    self.last_step = top if self.last_step is None else max(self.last_step, top)
            for item in delta.texts:
                self.seen.add(item[1])
                self.last_step = item[0] if self.last_step is None else max(self.last_step, item[0])
            for ref in delta.media:  # a media record's step counts as a point's (_progress)
                self.last_step = ref[0] if self.last_step is None else max(self.last_step, ref[0])
            self.texts.extend(delta.texts)
        new = len(self.blocks) - first
        self._compact(first)
        return len(self.blocks) - new

    def _compact(self, keep_from: int) -> None:
        """Merge the run of small blocks just before ``keep_from`` (a long live run
        adds one block per flush) once it is long enough."""
        i0 = keep_from
        while i0 > 0 and len(self.blocks[i0 - 1]) * _RAW.itemsize < _COMPACT_BELOW:
            i0 -= 1
        if keep_from - i0 < _COMPACT_COUNT:
            return
        self.blocks[i0:keep_from] = [np.concatenate(self.blocks[i0:keep_from])]
        self.starts[i0:keep_from] = [self.starts[i0]]

    @property
    def wall0(self) -> float:
        return float(self.lf.header.get("wall_start") or 0.0)

    def tids(self, kind: int, names: set[str] | None) -> dict[int, str]:
        return {tid: name for tid, (k, name) in self.lf.tags.items() if k == kind and (names is None or name in names)}


class LiveRun:
    """A run folder followed incrementally. See the module docstring.

    Args:
        run_dir: the run folder (it may be deleted while followed: :attr:`gone`).
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.dir = os.fspath(run_dir)
        self.gone = False
        self._lock = threading.RLock()
        self._files: dict[int, dict[int, _File]] = {}  # rank → session → file
        self._series: dict[tuple[int, str, str], Series] = {}
        self._sig: dict[int, tuple] = {}
        self._rf = RankFiles(self.dir, keep=False)  # the event logs: listing, LogFiles, headers
        self._meta: dict = {}
        self._scan()

    # -- files ---------------------------------------------------------------------

    def _scan(self) -> None:
        self._rf.scan()
        self.gone = self._rf.gone
        if not self.gone:
            self._meta = read_run_json(self.dir) or self._meta

    def _load_rank(self, rank: int) -> dict[int, _File]:
        files = self._files.get(rank)
        if files is None:
            files = self._files[rank] = {}
            self._add_new_sessions(rank)
        return files

    def _add_new_sessions(self, rank: int) -> bool:
        files = self._files[rank]
        added = False
        for s, lf in self._rf.open_new(rank):
            f = files[s] = _File(rank, s, lf)
            f.poll()
            added = True
        return added

    def _sessions(self, rank: int) -> list:
        return [(s, self._files[rank][s].lf) for s in sorted(self._files[rank])]

    def _thresholds(self, rank: int) -> dict[int, int | None]:
        return hide_thresholds(self._sessions(rank))

    def _offsets(self, rank: int) -> dict[int, float]:
        return active_offsets(self._sessions(rank))

    def _signature(self, rank: int) -> tuple:
        sessions = sorted(self._files[rank])
        th = self._thresholds(rank)
        return tuple((s, th[s], self._files[rank][s].lf.max_ms if s != sessions[-1] else None) for s in sessions)

    # -- extraction ------------------------------------------------------------------

    def _extract(self, rank: int, kind: str, series: dict[str, Series], since: dict[int, int] | None) -> None:
        """Append to ``series`` (tag → Series of ``rank``) the points of blocks from
        ``since[session]`` on (None: every block), copied once, straight from the raw
        records into the series' columns."""
        code = KIND_CODES[kind]
        files = self._files[rank]
        th = self._thresholds(rank) if kind != "system" else {}
        off = self._offsets(rank)
        for s in sorted(files):
            f = files[s]
            first = 0 if since is None else since.get(s, 0)
            if first >= len(f.blocks):
                continue
            ids: dict[str, list[int]] = {}
            for tid, name in f.tids(code, set(series)).items():
                ids.setdefault(name, []).append(tid)
            if not ids:
                continue
            blocks = list(zip(f.blocks[first:], f.starts[first:], strict=True))
            limit = th.get(s)
            shown = [None if limit is None else b["step"] < limit for b, _start in blocks]
            for name, tids in ids.items():
                picks = []
                for (b, start), keep in zip(blocks, shown, strict=True):
                    hit = b["tag"] == tids[0] if len(tids) == 1 else np.isin(b["tag"], tids)
                    if keep is not None:
                        hit &= keep
                    idx = np.flatnonzero(hit)
                    if len(idx):
                        picks.append((b, start, idx))
                if picks:
                    series[name]._fill(picks, s, f.wall0, off[s], f.lf.ms_wrapped)

    def series(self, rank: int, tags: Iterable[str], kind: str = "scalar") -> dict[str, Series]:
        """The :class:`Series` of ``tags`` of ``rank`` (kind "scalar", "timer" or
        "system"); a tag never logged gives an empty series that fills if it appears."""
        with self._lock:
            self._load_rank(rank)
            if rank not in self._sig:
                self._sig[rank] = self._signature(rank)
            out, missing = {}, {}
            for tag in tags:
                key = (rank, kind, tag)
                s = self._series.get(key)
                if s is None:
                    s = self._series[key] = missing[tag] = Series(rank, kind, tag)
                out[tag] = s
            if missing:
                self._extract(rank, kind, missing, None)
            return out

    def forget(self, keep: Iterable[tuple[int, str, str]]) -> None:
        """Drop extracted series not in ``keep`` (bounded memory for viewers)."""
        keep = set(keep)
        with self._lock:
            for key in [k for k in self._series if k not in keep]:
                del self._series[key]

    def refresh(self) -> bool:
        """Read what was appended to the loaded ranks' files, pick up new session files,
        extend or rebuild the series; re-read ``run.json``. True if anything changed."""
        with self._lock:
            was_gone = self.gone
            self._scan()
            changed = was_gone != self.gone
            for rank, files in self._files.items():
                before = {s: len(f.blocks) for s, f in files.items()}
                sizes = {s: (f.lf.offset, len(f.lf.tags), len(f.texts)) for s, f in files.items()}
                added = self._add_new_sessions(rank)
                firsts = {}
                for s, f in files.items():
                    if s in before:
                        firsts[s] = f.poll()
                now = {s: (f.lf.offset, len(f.lf.tags), len(f.texts)) for s, f in files.items()}
                if not added and now == sizes:
                    continue
                changed = True
                sig = self._signature(rank)
                mine = [(k, s) for k, s in self._series.items() if k[0] == rank]
                by_kind: dict[str, dict[str, Series]] = {}
                for (_r, kind, tag), ser in mine:
                    by_kind.setdefault(kind, {})[tag] = ser
                if sig != self._sig.get(rank):
                    self._sig[rank] = sig
                    for group in by_kind.values():
                        for ser in group.values():
                            ser._clear()
                    for kind, group in by_kind.items():
                        self._extract(rank, kind, group, None)
                else:
                    since = {s: firsts.get(s, 0) for s in files}
                    for kind, group in by_kind.items():
                        self._extract(rank, kind, group, since)
            return changed

    # -- what is there ---------------------------------------------------------------

    @property
    def meta(self) -> dict:
        """``run.json`` as last read (kept when the file disappears)."""
        return self._meta

    def ranks(self) -> list[int]:
        """Ranks with at least one event log."""
        with self._lock:
            return self._rf.ranks()

    def loaded_ranks(self) -> list[int]:
        with self._lock:
            return sorted(self._files)

    def tags(self, rank: int, kind: str = "scalar") -> list[str]:
        """Sorted tags of ``rank`` of one kind that have at least one record (loads the
        rank): a tag defined but never given a point (every value rejected) is left out."""
        code = KIND_CODES[kind]
        with self._lock:
            files = self._load_rank(rank)
            return sorted({name for f in files.values() for tid, (k, name) in f.lf.tags.items()
                           if k == code and tid in f.seen})

    def sessions(self, rank: int) -> list[dict]:
        """Per session of ``rank``: session, host, wall_start, first_step, duration_s,
        end (the END frame or None), pending_bytes, skipped_bytes, blocks."""
        with self._lock:
            files = self._load_rank(rank)
            return [
                {
                    "session": s,
                    "host": f.lf.header.get("host"),
                    "wall_start": f.lf.header.get("wall_start"),
                    "first_step": f.lf.first_step,
                    "duration_s": f.lf.max_ms / 1000.0,
                    "end": f.lf.end,
                    "pending_bytes": f.lf.pending_bytes,
                    "skipped_bytes": f.lf.skipped_bytes,
                    "blocks": len(f.blocks),  # arrays of records held (merged as they pile up)
                }
                for s, f in sorted(files.items())
            ]

    def header(self, rank: int, session: int) -> dict:
        """The session header of a file (read once, without loading the rank)."""
        with self._lock:
            return self._rf.header(rank, session)

    def machines(self) -> list[dict]:
        """Machines that recorded system metrics: one dict per (hostname, sampling rank)
        with the machine record (cpu_count, memory_total_bytes, gpus, ...) once read.
        Loads the sampling ranks (local rank 0 of each machine)."""
        with self._lock:
            return self._rf.machines(lambda r: [(s, f.lf) for s, f in sorted(self._load_rank(r).items())],
                                     needs_system=True)

    def text(self, rank: int, tags: Iterable[str] | None = None) -> list[tuple[int, int, str, str, float]]:
        """Logged text of ``rank``, hidden records left out: (session, step, tag, text,
        wall_time) in file order."""
        wanted = set(tags) if tags is not None else None
        with self._lock:
            files = self._load_rank(rank)
            th = self._thresholds(rank)
            out = []
            for s, f in sorted(files.items()):
                limit = th[s]
                for step, tid, ms, text in f.texts:
                    kind, name = f.lf.tags.get(tid, (None, None))
                    if kind != F.KIND_TEXT or name is None or (wanted is not None and name not in wanted):
                        continue
                    if limit is not None and step >= limit:
                        continue
                    out.append((s, step, name, text, f.wall0 + ms / 1000.0))
            return out

    def damage(self) -> list[dict]:
        """Every damaged range of the loaded ranks' event logs read so far, as
        :meth:`nblog.RunReader.damage` gives them (rank, session, path, start, stop, bytes,
        frame, points, lost); ``[]``: nothing damaged. Each was also issued as a
        :class:`~nblog.DamagedLogWarning` when it was read."""
        with self._lock:
            return [damage_record(d, r, s, f.path) for r, files in sorted(self._files.items())
                    for s, f in sorted(files.items()) for d in f.lf.damage]

    def last_step(self, rank: int = 0) -> int | None:
        """The last step of a loaded ``rank`` (``nblog.reader._runfiles.progress``, as every view
        says it): the highest step of a scalar, timer, text or media record of its
        latest session that has one (an earlier session's higher steps are hidden)."""
        with self._lock:
            return latest_step((s, f.last_step) for s, f in (self._files.get(rank) or {}).items())
