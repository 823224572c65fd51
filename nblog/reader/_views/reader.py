"""RunReader: a run's event logs into Polars frames, full resolution, every rank.

Imports polars (``import nblog`` does not), and numpy where a method needs it
(:meth:`RunReader.scalars` of files of the current format does not). Files are read incrementally:
:meth:`RunReader.refresh` reads only what was appended since the last read, so the
same reader serves one-off analysis, ``nb tail -f`` and the TUI.

The hiding rule (``man nb-format``, HIDING RULE): within one rank, a point of session *s* at a step ≥ the
first step of any later session of that rank is hidden — a restart from a checkpoint
gives a clean curve. System metrics are never hidden. ``include_hidden=True`` returns
hidden points too, with a ``hidden`` column.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import polars as pl

from ...format import _format as F
from ...format._names import check_name
from ...format._runfile import read_run_json_retrying
from .._file.gcpause import paused_gc
from .._file.logfile import LogFile, _unwrap, damage_record
from .._file.select import tag_set as _as_tags
from .._runfiles.locate import resolve_run
from .._runfiles.rankfiles import KIND_CODES, RankFiles, active_offsets, hide_thresholds, read_all

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np  # imported on first use

if TYPE_CHECKING:
    from PIL import Image

    from .._runfiles.envelopes import Envelope
    from .._runfiles.media import Record

#: Columns of :meth:`RunReader.scalars` and :meth:`RunReader.timers` frames.
POINT_SCHEMA = {
    "rank": pl.Int32,
    "session": pl.Int32,
    "step": pl.Int64,
    "tag": pl.String,
    "value": pl.Float64,
    "wall_time": pl.Float64,  # unix seconds
    "active_time": pl.Float64,  # seconds of this rank's sessions so far, queue gaps left out
}
#: Columns of :meth:`RunReader.text` frames.
TEXT_SCHEMA = {
    "rank": pl.Int32,
    "session": pl.Int32,
    "step": pl.Int64,
    "tag": pl.String,
    "text": pl.String,
    "wall_time": pl.Float64,
}
#: Columns of :meth:`RunReader.system` frames.
SYSTEM_SCHEMA = {
    "hostname": pl.String,
    "rank": pl.Int32,
    "session": pl.Int32,
    "wall_time": pl.Float64,
    "step": pl.Int64,
    "tag": pl.String,
    "value": pl.Float64,
}
#: Columns of :meth:`RunReader.failures` frames.
FAILURE_SCHEMA = {
    "rank": pl.Int32,
    "session": pl.Int32,
    "step": pl.Int64,  # the rank's current step when it failed (null: none yet)
    "wall_time": pl.Float64,
    "host": pl.String,
    "type": pl.String,  # the exception's class name
    "message": pl.String,
    "traceback": pl.String,
    "thread": pl.String,  # the thread it ended, when not the main one (threading.excepthook)
}
#: Columns of :meth:`RunReader.alerts` frames.
ALERT_SCHEMA = {
    "rank": pl.Int32,
    "session": pl.Int32,
    "step": pl.Int64,
    "wall_time": pl.Float64,
    "host": pl.String,
    "level": pl.String,  # info, warn, error
    "title": pl.String,
    "text": pl.String,
    "suppressed": pl.Int64,  # alerts of this title left out (rate limit) just before this one
}


def _safe_name(value: object) -> str | None:
    """``value`` if it is a valid path component (``_names.check_name``), else None."""
    try:
        return check_name(value, "name")
    except ValueError:
        return None


class RunReader:
    """Read one run.

    Args:
        run: a run id, a unique prefix of one, ``project/run id``, or a path to a run
            folder.
        root: where to look for ids (default ``$NB_DIR``, else ``./nb_runs``).

    Raises:
        RunNotFoundError, AmbiguousRunError: ``run`` names no run, or several.
        FormatVersionError: (from the reading methods) a file of a newer format.

    Readers tolerate torn tails (``kill -9``), empty files, files still being written,
    unknown frame types (skipped, warned once) and corrupt frames (skipped, counted in
    :meth:`sessions`). Frames come in file order: rank, then session, then as logged.
    """

    def __init__(self, run: str | os.PathLike, root: str | os.PathLike | None = None):
        self.dir = resolve_run(run, root)
        self._files = RankFiles(self.dir)  # the ranks read so far, session by session
        self._meta: dict | None = None
        self._meta_retry_at = 0.0

    # -- metadata ------------------------------------------------------------------

    @property
    def meta(self) -> dict:
        """The run's ``run.json`` (``{}`` if missing or unreadable).

        A run.json that exists but does not parse is re-read a few times first (a
        network file system's stale cached size cuts a read short); ``{}`` is kept for
        at most a second, then the file is read again, and :meth:`refresh` reads it again.
        """
        if self._meta is None or (not self._meta and time.monotonic() >= self._meta_retry_at):
            obj, _state = read_run_json_retrying(self.dir)
            self._meta = obj or {}
            self._meta_retry_at = time.monotonic() + 1.0
        return self._meta

    @property
    def id(self) -> str:
        """The run id: run.json's, when it is a valid name (callers build file names
        from it), else the folder's name."""
        return _safe_name(self.meta.get("id")) or os.path.basename(self.dir)

    @property
    def project(self) -> str:
        return _safe_name(self.meta.get("project")) or os.path.basename(os.path.dirname(self.dir))

    @property
    def config(self) -> dict:
        """The run's config as stored in ``run.json``."""
        return self.meta.get("config") or {}

    def ranks(self) -> list[int]:
        """Ranks that have at least one event log, ascending."""
        self._files.scan(replace=True)
        return self._files.ranks()

    def refresh(self) -> bool:
        """Re-read ``run.json`` and read what was appended to the loaded ranks' files
        (and new session files of those ranks). Returns True if anything was new."""
        self._meta = None
        changed = False
        rf = self._files
        rf.scan(replace=True)
        for r in rf.opened():
            rf.open_new(r)
        for r in rf.opened():
            for _s, lf in rf.sessions(r):
                before = (lf.offset, len(lf.tags))
                lf.poll()
                changed |= (lf.offset, len(lf.tags)) != before
        return changed

    def _load(self, ranks: list[int]) -> None:
        """Read the files of every rank in ``ranks`` not loaded yet, several at a time:
        reading and checksumming release the GIL, so files load in parallel."""
        rf = self._files
        todo = [r for r in ranks if not rf.is_open(r)]
        if len(todo) < 2:
            return
        rf.scan(replace=True)
        new = [lf for r in todo for _s, lf in rf.open_new(r)]
        workers = min(len(new), os.cpu_count() or 1, 8)
        if workers < 2:
            for lf in new:
                read_all(lf)
            return
        from concurrent.futures import ThreadPoolExecutor

        # a few batches per thread, not a task per file: 8,192 small files were 8,192 tasks
        batches = [new[i :: workers * 4] for i in range(workers * 4)]
        with ThreadPoolExecutor(workers, thread_name_prefix="nblog-read") as pool:
            for _ in pool.map(lambda batch: [read_all(lf) for lf in batch], batches):
                pass

    def _rank_files(self, rank: int) -> list[tuple[int, LogFile]]:
        """``(session, LogFile)`` of ``rank``, read to the end the first time."""
        rf = self._files
        if not rf.is_open(rank):
            rf.scan(replace=True)
            for _s, lf in rf.open_new(rank):
                read_all(lf)
        return rf.sessions(rank)

    def files(self, rank: int = 0) -> list[LogFile]:
        """The loaded :class:`~nblog.reader._file.logfile.LogFile` of each session of ``rank``."""
        return [lf for _s, lf in self._rank_files(rank)]

    def _thresholds(self, files: list[tuple[int, LogFile]]) -> dict[int, int | None]:
        return hide_thresholds(files)

    def _offsets(self, files: list[tuple[int, LogFile]]) -> dict[int, float]:
        return active_offsets(files)

    def sessions(self, rank: int = 0) -> list[dict]:
        """One dict per session of ``rank``: session, path, size_bytes, host, pid,
        wall_start, duration_s, first_step, last_step (the highest step of a scalar,
        timer, text or media record in its event log, hidden or not: not the step of
        the last record; see ``nblog.reader._runfiles.progress``), points, hidden_points, end (the
        END frame or None), dropped (counters), skipped_bytes, pending_bytes,
        unknown_frames, restart_counts, damage (each damaged range skipped, as
        :meth:`damage` gives them)."""
        files = self._rank_files(rank)
        thresholds = self._thresholds(files)
        out = []
        for s, lf in files:
            kinds = self._kinds(lf)  # 255: no definition read (records not readable)
            t = thresholds[s]
            points = hidden = 0
            last_step = None
            for raw in lf.point_chunks():  # views of the bytes read: nothing decoded
                tid = raw["tag"]
                k = kinds[np.minimum(tid, len(kinds) - 1)]
                keep = (tid < len(kinds)) & (k != F.KIND_SYSTEM) & (k != 255)
                n = int(np.count_nonzero(keep))
                if n:
                    steps = raw["step"][keep]
                    points += n
                    top = int(steps.max())
                    if last_step is None or top > last_step:
                        last_step = top
                    if t is not None:
                        hidden += int(np.count_nonzero(steps >= t))
            for step in [x[0] for x in lf.texts] + [x[0] for x in lf.media]:  # as the points' steps
                if last_step is None or step > last_step:
                    last_step = step
            if t is not None:
                hidden += sum(1 for x in lf.texts if x[0] >= t) + sum(1 for x in lf.media if x[0] >= t)
            dropped = (lf.end or (lf.stats[-1] if lf.stats else {})).get("dropped") or {}
            out.append(
                {
                    "session": s,
                    "path": lf.path,
                    "size_bytes": lf.size,
                    "host": lf.header.get("host"),
                    "pid": lf.header.get("pid"),
                    "wall_start": lf.header.get("wall_start"),
                    "duration_s": lf.max_ms / 1000.0,
                    "first_step": lf.first_step,
                    "last_step": last_step,
                    "points": points,
                    "hidden_points": hidden,
                    "end": lf.end,
                    "dropped": dropped,
                    "skipped_bytes": lf.skipped_bytes,
                    "pending_bytes": lf.pending_bytes,
                    "unknown_frames": lf.unknown_frames,
                    "restart_counts": lf.header.get("restart_counts") or {},
                    "damage": [damage_record(d, rank, s, lf.path) for d in lf.damage],
                }
            )
        return out

    def damage(self) -> list[dict]:
        """Every damaged range of the event logs this reader has read so far (each also
        issued as a :class:`~nblog.DamagedLogWarning` when it was read), rank by rank, in
        file order: rank, session, path, start and stop (byte offsets in the file),
        bytes, frame (what the bytes held: "points", "tag definitions", ...; None where
        a frame header was damaged), points (left out, where known; else None), lost
        (False: a damaged copy of a frame written twice whose other copy was read, or a
        damaged file header read past: nothing was lost). ``[]``: nothing damaged."""
        rf = self._files
        return [damage_record(d, r, s, lf.path) for r in rf.opened() for s, lf in rf.sessions(r)
                for d in lf.damage]

    def tags(self, rank: int = 0, kind: str | None = "scalar") -> list[str]:
        """Sorted tag names of ``rank`` of one kind ("scalar", "timer", "system",
        "text", "media"), or of every kind with ``kind=None``."""
        want = None if kind is None else KIND_CODES[kind]
        names = set()
        for _s, lf in self._rank_files(rank):
            for k, name in lf.tags.values():
                if want is None or k == want:
                    names.add(name)
        return sorted(names)

    def envelope(self, tag: str, rank: int = 0) -> Envelope | None:
        """The min/max envelope of scalar ``tag`` of ``rank`` (a few hundred segments
        along the step axis: first/last step, min, max, last value, points), from the
        writer's sidecar files, reading only what they do not cover; a session without
        one is read whole (:func:`nblog.reader._runfiles.envelopes.read_envelopes`). For
        drawing long runs; :meth:`scalars` has the data. None: no points of ``tag``."""
        from .._runfiles.envelopes import read_envelopes

        return (read_envelopes(self.dir, [tag], rank) or {}).get(tag)

    # -- frames ----------------------------------------------------------------------

    @staticmethod
    def _kinds(lf: LogFile) -> np.ndarray:
        n = max(lf.tags, default=-1) + 1
        kinds = np.full(max(n, 1), 255, dtype=np.uint8)
        for tid, (k, _name) in lf.tags.items():
            kinds[tid] = k
        return kinds

    def _point_frame(self, kind: int, tags: str | Iterable[str] | None, rank: int, all_ranks: bool, include_hidden: bool) -> pl.DataFrame:
        names, plan = self._point_plan(kind, tags, rank, all_ranks, include_hidden)
        return self._plan_frame(names, plan, include_hidden)

    def _point_frames(self, kind: int, tags: str | Iterable[str] | None, rank: int, all_ranks: bool,
                      include_hidden: bool, rows: int = 1 << 22) -> Iterator[pl.DataFrame]:
        """The frame of :meth:`_point_frame` in pieces of about ``rows`` rows, in its order,
        each made only when asked for (``nb export`` streams them into one file and never
        holds the whole frame). A session whose u32 ms wrapped stays in one piece."""
        names, plan = self._point_plan(kind, tags, rank, all_ranks, include_hidden)
        part: list = []
        held = 0
        made = False
        for r, s, offset, wall0, wrapped, remap, picks in plan:
            step_n = len(picks) if wrapped else 1
            for i in range(0, len(picks), step_n):
                part.append((r, s, offset, wall0, wrapped, remap, picks[i : i + step_n]))
                held += sum(p[-1] for p in picks[i : i + step_n])
                if held >= rows:
                    yield self._plan_frame(names, part, include_hidden)
                    part, held, made = [], 0, True
        plan.clear()
        if part or not made:  # the rest; or one empty frame, which has the columns
            yield self._plan_frame(names, part, include_hidden)

    def _point_plan(self, kind: int, tags: str | Iterable[str] | None, rank: int, all_ranks: bool,
                    include_hidden: bool) -> tuple[list[str], list]:
        """Points of ``kind`` as a frame, decoded straight from the bytes read.

        Two passes over each file's POINTS payloads (numpy views, no copies): pick the
        records, then copy them once into preallocated columns that Polars takes over
        without a copy. No per-file pieces are concatenated and no intermediate
        structured arrays are made.
        """
        wanted = _as_tags(tags)
        ranks = self.ranks() if all_ranks else [rank]
        self._load(ranks)
        names: list[str] = []
        name_index: dict[str, int] = {}
        plan = []
        for r in ranks:
            files = self._rank_files(r)
            thresholds = self._thresholds(files)
            offsets = self._offsets(files)
            for s, lf in files:
                chunks = lf.point_chunks()
                if not chunks:
                    continue
                # per-file tag id → global name index (-1: not wanted, other kind, unknown)
                remap = np.full(max(lf.tags, default=-1) + 1, -1, dtype=np.int32)
                for tid, (k, name) in lf.tags.items():
                    if k == kind and (wanted is None or name in wanted):
                        if name not in name_index:
                            name_index[name] = len(names)
                            names.append(name)
                        remap[tid] = name_index[name]
                if not (remap >= 0).any():
                    continue
                every = bool(remap.min() >= 0)  # every tag of the file is wanted
                t = thresholds[s] if kind != F.KIND_SYSTEM else None
                picks = []
                for raw in chunks:
                    tid = raw["tag"]
                    if every and int(tid.max(initial=0)) < len(remap):
                        mask = None
                    else:
                        mask = tid < len(remap)
                        mask[mask] = remap[tid[mask]] >= 0
                    hidden = (raw["step"] >= t) if t is not None else None
                    if hidden is not None and not include_hidden:
                        mask = ~hidden if mask is None else mask & ~hidden
                    n = len(raw) if mask is None else int(np.count_nonzero(mask))
                    if n:
                        picks.append((raw, mask, hidden, n))
                if picks:
                    wall0 = float(lf.header.get("wall_start") or 0.0)
                    plan.append((r, s, offsets[s], wall0, lf.ms_wrapped, remap, picks))
        return names, plan

    def _plan_frame(self, names: list[str], plan: list, include_hidden: bool) -> pl.DataFrame:
        total = sum(n for *_x, picks in plan for *_y, n in picks)
        if not total:
            df = pl.DataFrame(schema=POINT_SCHEMA)
            return df.with_columns(pl.lit(False).alias("hidden")) if include_hidden else df
        rank_col = np.empty(total, np.int32)
        session_col = np.empty(total, np.int32)
        step = np.empty(total, np.int64)
        codes = np.empty(total, np.int32)
        value = np.empty(total, np.float64)
        wall = np.empty(total, np.float64)
        active = np.empty(total, np.float64)
        hidden_col = np.zeros(total, bool) if include_hidden else None
        # Work units: a file's records in groups of up to 64 payloads (1 MiB each), with
        # their place in the output; filled in parallel threads (numpy copies release the
        # GIL). A session of 24.8 days or more is one unit: its u32 ms unwrap in order.
        units = []
        o = 0
        for r, s, offset, wall0, wrapped, remap, picks in plan:
            step_n = len(picks) if wrapped else 64
            for i in range(0, len(picks), step_n):
                group = picks[i : i + step_n]
                units.append((o, r, s, offset, wall0, wrapped, remap, group))
                o += sum(p[-1] for p in group)

        def fill(unit: tuple) -> None:
            start, r, s, offset, wall0, wrapped, remap, group = unit
            o = start
            prev = 0
            for raw, mask, hidden, n in group:
                sl = slice(o, o + n)
                ms = raw["ms"]
                if wrapped:
                    ms = _unwrap(ms, prev)
                    prev = int(ms[-1])
                if mask is None:
                    step[sl] = raw["step"]
                    value[sl] = raw["value"]
                    np.take(remap, raw["tag"], out=codes[sl])
                    np.divide(ms, 1000.0, out=active[sl])
                else:
                    np.compress(mask, raw["step"], out=step[sl])
                    np.compress(mask, raw["value"], out=value[sl])
                    np.take(remap, raw["tag"][mask], out=codes[sl])
                    np.divide(ms[mask], 1000.0, out=active[sl])
                if hidden_col is not None and hidden is not None:
                    hidden_col[sl] = hidden if mask is None else hidden[mask]
                o += n
            sl = slice(start, o)
            rank_col[sl] = r
            session_col[sl] = s
            np.add(active[sl], wall0, out=wall[sl])  # active holds seconds since the session's start
            active[sl] += offset

        workers = min(len(units), os.cpu_count() or 1, 8)
        if workers < 2:
            for unit in units:
                fill(unit)
        else:
            from concurrent.futures import ThreadPoolExecutor

            # units batched to >= 64k records each (a task per small file cost more than its copy)
            batches: list[list] = [[]]
            held = 0
            for unit in units:
                batches[-1].append(unit)
                held += sum(p[-1] for p in unit[-1])
                if held >= 1 << 16:
                    batches.append([])
                    held = 0
            def fill_all(batch: list) -> None:
                for u in batch:
                    fill(u)

            with ThreadPoolExecutor(workers, thread_name_prefix="nblog-read") as pool:
                for _ in pool.map(fill_all, batches):
                    pass
        plan.clear()
        tag = pl.Series("tag", names, dtype=pl.String).gather(pl.Series(codes))
        codes = None  # type: ignore[assignment]  # the indices are not needed any more: freed
        df = pl.DataFrame(
            {
                "rank": rank_col,
                "session": session_col,
                "step": step,
                "tag": tag,
                "value": value,
                "wall_time": wall,
                "active_time": active,
            },
            schema=POINT_SCHEMA,
        )
        if hidden_col is not None:
            df = df.with_columns(pl.Series("hidden", hidden_col, dtype=pl.Boolean))
        return df

    def scalars(
        self,
        tags: str | Iterable[str] | None = None,
        *,
        rank: int = 0,
        all_ranks: bool = False,
        include_hidden: bool = False,
    ) -> pl.DataFrame:
        """Scalars as a frame with columns rank (Int32), session (Int32), step (Int64),
        tag (String), value (Float64), wall_time (Float64, unix s), active_time
        (Float64, s); plus hidden (Boolean) with ``include_hidden=True``.

        Args:
            tags: a tag or a list of tags (exact names); None for all.
            rank: the rank to read (rank 0 by default: the one that logs scalars).
            all_ranks: every rank merged, rank by rank.
            include_hidden: also points hidden by a later session's restart.
        """
        from .._file.columns import columns_frame  # Polars alone, no numpy: the common case

        df = columns_frame(self, F.KIND_SCALAR, tags, rank, all_ranks, include_hidden, POINT_SCHEMA)
        return df if df is not None else self._point_frame(F.KIND_SCALAR, tags, rank, all_ranks, include_hidden)

    def timers(
        self,
        tags: str | Iterable[str] | None = None,
        *,
        rank: int = 0,
        all_ranks: bool = False,
        include_hidden: bool = False,
    ) -> pl.DataFrame:
        """Timer occurrences, one row each, ``value`` in seconds; columns as :meth:`scalars`."""
        # every rank's files: thousands of small objects (a LogFile, its tags, header and
        # chunks per file), none in a cycle, which the cyclic collector scanned again and again
        with paused_gc():
            return self._point_frame(F.KIND_TIMER, tags, rank, all_ranks, include_hidden)

    def timer_stats(
        self, tags: str | Iterable[str] | None = None, *, all_ranks: bool = True, rank: int = 0,
        last_steps: int | None = None,
    ) -> pl.DataFrame:
        """Per timer and rank: count, mean_s, p50_s, p95_s, max_s, total_s (seconds).

        Aggregation happens here, at read time, never in the training loop.
        ``last_steps`` keeps only the last N steps of each rank.
        """
        from .stragglers import timer_stats_of  # nb timers shows these beside the straggler rule

        return timer_stats_of(self.timers(tags, all_ranks=all_ranks, rank=rank), last_steps)

    def text(
        self,
        tags: str | Iterable[str] | None = None,
        *,
        rank: int = 0,
        all_ranks: bool = False,
        include_hidden: bool = False,
    ) -> pl.DataFrame:
        """Logged text: columns rank, session, step, tag, text, wall_time (+ hidden)."""
        wanted = _as_tags(tags)
        rows: dict[str, list] = {k: [] for k in ("rank", "session", "step", "tag", "text", "wall_time", "hidden")}
        for r in self.ranks() if all_ranks else [rank]:
            files = self._rank_files(r)
            thresholds = self._thresholds(files)
            for s, lf in files:
                t = thresholds[s]
                wall0 = float(lf.header.get("wall_start") or 0.0)
                for step, tid, ms, text in lf.texts:
                    kind, name = lf.tags.get(tid, (None, None))
                    if kind != F.KIND_TEXT or (wanted is not None and name not in wanted):
                        continue
                    hidden = t is not None and step >= t
                    if hidden and not include_hidden:
                        continue
                    for k, v in zip(rows, (r, s, step, name, text, wall0 + ms / 1000.0, hidden), strict=True):
                        rows[k].append(v)
        schema = dict(TEXT_SCHEMA)
        if include_hidden:
            schema["hidden"] = pl.Boolean
        else:
            rows.pop("hidden")
        return pl.DataFrame(rows, schema=schema)

    # -- media (implementation in _media_read) -------------------------------------------

    def media(
        self,
        tag: str | Iterable[str] | None = None,
        *,
        rank: int = 0,
        kind: str | None = None,
        include_hidden: bool = False,
    ) -> pl.DataFrame:
        """Media records, without their bytes: columns rank, session, step, tag, kind
        ("image", "histogram", "audio"), format ("png", "jpeg", "wav", "histogram"),
        wall_time, offset, length (of the blob in the session's media pack:
        ``media.r<rank>.s<session>.pack`` when it exists, else ``media.r<rank>.pack``), width,
        height, channels, sample_rate, bins, caption (null where a kind has none) and
        meta (all metadata as a JSON string); plus hidden with ``include_hidden=True``.
        Schema: ``nblog.reader._runfiles.media.MEDIA_SCHEMA``. Reads no media bytes."""
        from .._runfiles.media import media_frame

        return media_frame(self, tag, rank, kind, include_hidden)

    def media_bytes(self, record: Record) -> bytes:
        """The stored bytes of one media record (a row of :meth:`media` as a dict, or a
        one-row frame): a PNG, JPEG or WAV file, or a histogram blob. Give the record's
        ``session`` (rows of :meth:`media` have it): without it, a run whose sessions
        wrote packs of their own is searched for the one reference with that offset.

        Raises:
            BlobError: the blob is missing or fails its checksum (never wrong bytes).
            ValueError: no session given and several sessions have such a reference.
            OSError: the media pack cannot be read.
        """
        from .._runfiles.media import media_bytes

        return media_bytes(self, record)

    def image(self, record: Record) -> Image.Image:
        """The image of one record of kind "image" as a loaded ``PIL.Image.Image``."""
        from .._runfiles.media import image

        return image(self, record)

    def histogram(self, record: Record) -> tuple[np.ndarray, np.ndarray]:
        """The bins of one record of kind "histogram" (a row of :meth:`media` as a dict,
        or a one-row frame): ``(edges, counts)``, float64 edges [bins+1] and int64
        counts [bins], the last bin including its right edge (``numpy.histogram``).

        Raises:
            BlobError: the blob is missing or fails its checksum.
            ValueError: the blob is not a histogram.
            OSError: the media pack cannot be read.
        """
        from ...media._media_encode import decode_histogram

        return decode_histogram(self.media_bytes(record))

    def histograms(
        self, tag: str | Iterable[str] | None = None, *, rank: int = 0, include_hidden: bool = False
    ) -> pl.DataFrame:
        """Histograms, one row per (record, bin): rank, session, step, tag, wall_time,
        bin, bin_left, bin_right, count, then the record's statistics num (finite
        values), min, max, sum, sum_squares, nan, pos_inf, neg_inf; plus hidden with
        ``include_hidden=True``. Schema: ``nblog.reader._runfiles.media.HISTOGRAM_SCHEMA``.

        A histogram whose blob is missing, torn or corrupt is left out, with one
        warning saying how many (as ``nb media`` skips it): the others still read."""
        from .._runfiles.media import histograms

        return histograms(self, tag, rank, include_hidden)

    # -- machines and system metrics ----------------------------------------------------

    def machines(self) -> list[dict]:
        """Machines seen: one dict per (hostname, rank that sampled it), with the machine
        description the sampler recorded (cpu_count, memory_total_bytes, gpus, ...)."""
        self._files.scan(replace=True)
        return self._files.machines(self._rank_files)

    def system(self, machine: str | None = None, tags: str | Iterable[str] | None = None) -> pl.DataFrame:
        """System metrics (never hidden) as a frame: hostname, rank, session, wall_time,
        step (the last step that process saw), tag, value. ``machine`` selects one
        hostname; None returns every machine."""
        frames = []
        for m in self.machines():
            if machine is not None and m["hostname"] != machine:
                continue
            df = self._point_frame(F.KIND_SYSTEM, tags, m["rank"], False, False)
            if len(df):
                frames.append(df.with_columns(pl.lit(m["hostname"], pl.String).alias("hostname")))
        if not frames:
            return pl.DataFrame(schema=SYSTEM_SCHEMA)
        return pl.concat(frames).select(list(SYSTEM_SCHEMA))

    # -- failures and alerts (events) ---------------------------------------------------

    def events(self, kind: str | None = None) -> list[dict]:
        """Every event (failure or alert) of every rank, earliest first: the stored
        object with ``rank``, ``session`` and ``host`` (of the event log) added;
        ``kind`` ("failure", "alert") keeps one kind. Fields of hostile files that have
        the wrong type are None. Reads every rank's event logs."""
        self._load(self.ranks())
        out = []
        for r in self.ranks():
            for s, lf in self._rank_files(r):
                host = _text_or_none(lf.header.get("host"))
                for ev in lf.events:
                    if kind is not None and ev.get("kind") != kind:
                        continue
                    e = {k: ev.get(k) for k in ev if isinstance(k, str)}
                    e["kind"] = ev.get("kind")
                    for k in ("step", "suppressed", "ms"):
                        if not _is_int(e.get(k)):
                            e[k] = None
                    wall = e.get("wall")
                    e["wall"] = float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) else None
                    e.update(rank=r, session=s, host=host)
                    out.append(e)
        out.sort(key=lambda e: (e["wall"] is None, e["wall"] or 0.0, e["rank"], e["session"]))
        return out

    def failures(self) -> pl.DataFrame:
        """Uncaught exceptions, one row per failing rank and session, earliest first:
        rank, session, step, wall_time, host, type, message, traceback, thread (None:
        the main thread; :data:`FAILURE_SCHEMA`). A rank killed by a signal has no row: its session
        has no END record (:meth:`sessions`, ``end`` None)."""
        rows = [{"rank": e["rank"], "session": e["session"], "step": e["step"], "wall_time": e["wall"],
                 "host": e["host"], "type": _text_or_none(e.get("type")),
                 "message": _text_or_none(e.get("message")), "traceback": _text_or_none(e.get("traceback")),
                 "thread": _text_or_none(e.get("thread"))}
                for e in self.events("failure")]
        return pl.DataFrame(rows, schema=FAILURE_SCHEMA)

    def alerts(self) -> pl.DataFrame:
        """Alerts the training code raised with ``run.alert``, on any rank, earliest
        first: rank, session, step, wall_time, host, level, title, text, suppressed
        (:data:`ALERT_SCHEMA`)."""
        rows = [{"rank": e["rank"], "session": e["session"], "step": e["step"], "wall_time": e["wall"],
                 "host": e["host"], "level": _text_or_none(e.get("level")),
                 "title": _text_or_none(e.get("title")), "text": _text_or_none(e.get("text")),
                 "suppressed": e["suppressed"]}
                for e in self.events("alert")]
        return pl.DataFrame(rows, schema=ALERT_SCHEMA)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


def _text_or_none(v: object) -> str | None:
    return v if isinstance(v, str) else None
