"""Runs under a root: list them for ``nb ls`` (a row each), find the latest of a project.
A RUN argument is resolved to one folder by ``nblog.reader._runfiles.locate``.

Listing reads ``run.json`` and file sizes and modification times, so it stays fast on
thousands of runs. Event contents are read only where run.json may be behind the logs
(``nblog.reader._runfiles.progress``: one definition of the last step): the end of rank 0's
event log of a session that has not ended and was written since run.json (a run still
running, or killed with ``kill -9``), or of a session run.json does not know. The
listing cache keeps what was read, by the log's size and modification time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from ...format._filenames import (
    EVENTS_PREFIX,
    FAILURE_PREFIX,
    MEDIA_PREFIX,
    RUN_JSON,
    parse_event_file_name,
)
from ...format._runfile import read_json_file
from .._file.gcpause import paused_gc
from .._runfiles.locate import default_root
from .._runfiles.progress import (
    STALE_AFTER_S,
    base_status,
    log_last_step,
    session_writer,
    this_host,
    writer_alive,
)
from .listing_cache import ListingCache


def run_row(run_dir: str, now: float | None = None, stale_after: float = STALE_AFTER_S) -> dict:
    """One row of ``nb ls`` for ``run_dir``, from run.json and file metadata only.

    Keys: id, project, name, status (:func:`~nblog.reader._runfiles.progress.run_status`: running / finished / failed /
    preempted / stale / unknown), ranks
    (ranks with event logs), world_size, sessions, last_step (the run's last step,
    ``nblog.reader._runfiles.progress``: rank 0's latest session that logged one, the higher of
    run.json's figure and its event log's), last_step_updated (unix seconds: when rank 0
    recorded last_step in run.json, every few seconds while the step moves, or when
    its event log was last written where the log holds a later step; None when
    unknown), started (unix seconds), duration_s (active time:
    sessions added up, queue gaps left out), last_write (unix seconds), size_bytes, path,
    failure (the earliest uncaught exception of the latest session on any rank, from
    the failure marks failing ranks write (nblog/reader/_runfiles/failures.py): rank, session,
    host, pid, type, message, step, wall, thread; for a run without marks, rank 0's as
    run.json records it; None otherwise), failed_after (how many other ranks failed
    after it), failure_line (``failed: rank 3 (host7), step 812, RuntimeError: ...``,
    or None). A run with a failure mark of its latest session is "failed", whatever
    rank 0 wrote in run.json.
    """
    row = _summary(os.path.abspath(run_dir), time.time() if now is None else now, stale_after, False)
    assert row is not None
    return row


def run_info(meta: Mapping) -> list:
    """What a row of ``nb ls`` takes from a parsed run.json, as a list in the order of
    :data:`nblog.reader._runs.listing_cache.INFO` (what the listing cache keeps): name,
    created, world_size, sessions (how many), status (:func:`~nblog.reader._runfiles.progress.base_status`), closed_s
    (active seconds of the sessions whose end does not depend on the files), open_start
    (start of a last session still open: it lasts until the last write), last_step
    (of the latest session that recorded one), last_step_updated, failure (the latest
    session's, as rank 0 recorded it), last_session (the highest session number, or
    None), step_session (the session of last_step, or None), step_ended (whether that
    session has ended: its last_step is final) and writer (``[host, pid, start]`` of
    the latest session)."""
    sessions = meta.get("sessions") or []
    closed = 0.0
    open_start = last_step = last_step_updated = step_session = None
    step_ended = False
    for i, s in enumerate(sessions):
        if not isinstance(s, dict):
            continue
        start = s.get("start")
        if not isinstance(start, (int, float)):
            continue
        end = s.get("end")
        active = s.get("duration_s")  # monotonic, recorded at the end: immune to clock jumps
        if isinstance(end, (int, float)) and isinstance(active, (int, float)) and not isinstance(active, bool):
            closed += max(0.0, float(active))
        elif isinstance(end, (int, float)):
            closed += max(0.0, float(end) - float(start))
        elif i == len(sessions) - 1:
            open_start = start  # until the last write: added last, as the sessions come
        else:
            closed += max(0.0, float(s.get("updated") or start) - float(start))
        if s.get("last_step").__class__ is int:
            last_step = s["last_step"]
            updated = s.get("updated")
            last_step_updated = updated if isinstance(updated, (int, float)) and not isinstance(updated, bool) else None
            step_session = s["session"] if s.get("session").__class__ is int else None
            step_ended = isinstance(end, (int, float))
    numbers = [s["session"] for s in sessions if isinstance(s, dict) and s.get("session").__class__ is int]
    return [meta.get("name"), meta.get("created"), meta.get("world_size"), len(sessions), base_status(meta),
            closed, open_start, last_step, last_step_updated, _failure(sessions), max(numbers) if numbers else None,
            step_session, step_ended, session_writer(sessions)]


def _summary(run_dir: str, now: float, stale_after: float, only_runs: bool, metas: list | None = None,
             cache: ListingCache | None = None, where: tuple[str, str] | None = None,
             here: str | None = None) -> dict | None:
    """:func:`run_row` of an absolute path; None if ``only_runs`` and it holds
    neither run.json nor an event log. One directory listing, one stat per event log
    or media file, and run.json opened once (its stat taken from the open file); the
    end of rank 0's latest event log only where run.json may be behind it
    (:func:`_last_step`). ``metas``, when given, gets the ``config`` and ``summary``
    entries of run.json appended (``{}`` when it is unreadable). With a ``cache`` whose
    stamps match, the listing and the read of run.json become a ``stat`` each.
    ``where``: ``(project, id)``, the names of the folder and its parent when the
    caller knows them. ``here``: this machine's name (default: looked up)."""
    ranks: set[int] = set()
    marks: list[str] = []  # failure marks (reader/_runfiles/failures.py): any rank's uncaught exception
    logs0: dict[int, tuple[str, os.stat_result]] = {}  # rank 0's event logs: session -> (name, stat)
    last_write = 0.0
    json_mtime = 0.0
    size = 0
    has_json = False
    names = cache.names(run_dir) if cache is not None else None
    unchanged = names is not None  # the folder is as listed last time (cache.unchanged_info)
    if names is None:
        try:
            names = os.listdir(run_dir)
        except OSError:
            names = []
        if cache is not None:
            cache.put_names(run_dir, [n for n in names
                                      if n == RUN_JSON or n.startswith((EVENTS_PREFIX, MEDIA_PREFIX, FAILURE_PREFIX))])
    prefix = run_dir + os.sep
    for name in names:
        if name.startswith(EVENTS_PREFIX):
            try:
                rs = _EVENT_NAMES[name]
            except KeyError:
                rs = parse_event_file_name(name)
                if len(_EVENT_NAMES) < 65536:  # a name is parsed once: the same few repeat run after run
                    _EVENT_NAMES[name] = rs
            if rs is None:
                continue
        elif name == RUN_JSON:
            has_json = True
            continue
        elif name.startswith(MEDIA_PREFIX):
            rs = None
        elif name.startswith(FAILURE_PREFIX):
            marks.append(name)
            continue
        else:
            continue
        try:
            st = os.stat(prefix + name)
        except OSError:
            continue
        size += st.st_size
        if st.st_mtime > last_write:
            last_write = st.st_mtime
        if rs is not None:
            ranks.add(rs[0])
            if rs[0] == 0:
                logs0[rs[1]] = (name, st)
    if only_runs and not has_json and not ranks:
        return None
    info = extra = None
    if has_json or not only_runs:
        known = cache.unchanged_info(run_dir) if unchanged and has_json and cache is not None else None
        hit = None
        if known is None:
            hit = cache.info(prefix + RUN_JSON, run_dir) if cache is not None and has_json else None
        json_st: os.stat_result | None = None
        if known is not None:
            info, extra, json_size, json_mtime = known
            size += json_size
            if json_mtime > last_write:
                last_write = json_mtime
        elif hit is not None:
            info, extra, json_st = hit
        else:
            meta, json_st = read_json_file(prefix + RUN_JSON)
            if meta is not None:
                info = run_info(meta)
                extra = {k: meta[k] for k in ("config", "summary") if k in meta}
                if cache is not None:
                    cache.put_info(run_dir, info, extra, json_st)
        if json_st is not None:
            size += json_st.st_size
            json_mtime = json_st.st_mtime
            if json_mtime > last_write:
                last_write = json_mtime
    if info is None:
        info = _NO_INFO
    if metas is not None:
        metas.append(extra or {})
    name, created, world_size, n_sessions, status, duration, open_start, last_step, last_step_updated, \
        failure, last_session, step_session, step_ended, writer = info
    if logs0:
        last_step, last_step_updated = _last_step(run_dir, last_step, last_step_updated, step_session, step_ended,
                                                  json_mtime, logs0, cache)
    if status == "running" and not writer_alive(writer[0], writer[1], writer[2], last_write, now, stale_after,
                                                this_host() if here is None else here):
        status = "stale"
    if open_start is not None:
        duration += max(0.0, float(last_write) - float(open_start))
    row = {
        # the folder's names, which RUN arguments resolve to (a copied or linked run
        # folder keeps its run.json's id: listing that would name a run that does not open)
        "id": where[1] if where is not None else os.path.basename(os.path.normpath(run_dir)),
        "project": where[0] if where is not None else os.path.basename(os.path.dirname(os.path.normpath(run_dir))),
        "name": name,
        "status": status,
        "ranks": len(ranks),
        "world_size": world_size,
        "sessions": n_sessions,
        "last_step": last_step,
        "last_step_updated": last_step_updated,
        "started": created,
        "duration_s": round(duration, 3),
        "last_write": last_write or None,
        "size_bytes": size,
        "path": run_dir,
        **_failed(run_dir, failure, last_session, marks),
    }
    if row.pop("_marked"):
        row["status"] = "failed"  # a rank failed in the latest session, whatever rank 0 wrote
    return row


_EVENT_NAMES: dict[str, tuple[int, int] | None] = {}


def _last_step(run_dir: str, recorded: int | None, updated: float | None, recorded_session: int | None,
               ended: bool, json_mtime: float, logs0: dict[int, tuple[str, os.stat_result]],
               cache: ListingCache | None) -> tuple[int | None, float | None]:
    """The run's last step (``nblog.reader._runfiles.progress``) from run.json's figure and rank
    0's event logs, reading a log only where run.json may be behind it, and when it was
    written (unix seconds: run.json's ``updated``, or the log's modification time when
    the log's figure is higher).

    ``recorded`` is run.json's last step of session ``recorded_session`` (its latest
    that recorded one; ``ended``: that session ended, so the figure is final);
    ``logs0`` maps rank 0's session numbers to their log's name and stat. Sessions
    newer than ``recorded_session`` (none recorded: killed before run.json's first
    progress update, or run.json unreadable) are read from the latest down until one
    holds a step. The log of ``recorded_session`` itself is read when that session has
    not ended and the log was written at or after run.json (a ``kill -9`` leaves up to
    a progress interval of steps in the log only); otherwise run.json's figure stands:
    every write of it takes the steps the log holds. ``cache`` keeps each read by the
    log's size and modification time, so a killed run is read once."""
    for n in sorted(logs0, reverse=True):
        if recorded_session is not None and n < recorded_session:
            break
        name, st = logs0[n]
        if n == recorded_session:
            if ended or st.st_mtime < json_mtime:
                return recorded, updated
            logged = _log_step(run_dir, name, st, cache)
            if logged is not None and (recorded is None or logged > recorded):
                return logged, st.st_mtime
            return recorded, updated
        logged = _log_step(run_dir, name, st, cache)
        if logged is not None:
            return logged, st.st_mtime
    return recorded, updated


def _log_step(run_dir: str, name: str, st: os.stat_result, cache: ListingCache | None) -> int | None:
    """:func:`nblog.reader._runfiles.progress.log_last_step` of the log ``name`` of ``run_dir``,
    from ``cache`` when it read the log at this size and modification time."""
    if cache is not None:
        hit = cache.log_step(run_dir, name, st)
        if hit is not None:
            return hit[0]
    step = log_last_step(os.path.join(run_dir, name))
    if cache is not None:
        cache.put_log_step(run_dir, name, st, step)
    return step


def _failed(run_dir: str, failure: dict | None, last_session: int | None, marks: list[str]) -> dict:
    """failure, failed_after and failure_line of a run's row, and marked (whether a
    rank's failure mark says the latest session failed): the earliest failure mark of
    the latest session (``last_session``, run.json's), else ``failure`` (run.json's:
    rank 0's, as runs of older nblog recorded it)."""
    if not marks and failure is None:
        return _NO_FAILURE
    marked, after = None, 0
    if marks:  # only runs with a mark pay for reading it
        from ...format._filenames import parse_failure_file_name
        from .._runfiles.failures import first_failure, read_marks

        if last_session is None:  # no run.json: the marks' latest session
            numbers = [rs[1] for rs in map(parse_failure_file_name, marks) if rs is not None]
            last_session = max(numbers) if numbers else None
        if last_session is not None:
            marked, after = first_failure(read_marks(run_dir, marks, last_session))
    if marked is not None:
        failure = marked
    line = None
    if failure is not None:
        from .._runfiles.failures import failure_line

        line = failure_line(failure, after)
    return {"failure": failure, "failed_after": after, "failure_line": line, "_marked": marked is not None}


def _failure(sessions: list) -> dict | None:
    """The latest session's ``failure`` (rank 0's uncaught exception), else None."""
    last = sessions[-1] if sessions and isinstance(sessions[-1], dict) else {}
    failure = last.get("failure")
    return failure if isinstance(failure, dict) else None


_NO_INFO = run_info({})  # a run without a readable run.json
_NO_FAILURE = {"failure": None, "failed_after": 0, "failure_line": None, "_marked": False}  # copied into rows


def list_runs(root: str | os.PathLike | None = None, project: str | None = None) -> list[dict]:
    """Summaries (:func:`run_row`) of every run under ``root``, newest first."""
    with paused_gc():
        rows = _rows(root, project, None)
        rows.sort(key=lambda r: (r["started"] or 0.0, r["id"]), reverse=True)
    return rows


def latest_run(root: str | os.PathLike | None, project: str, name: str | None = None) -> str | None:
    """The id of the newest run of ``project`` under ``root`` (default
    :func:`default_root`) whose name is ``name`` (any name when None): the first run
    :func:`list_runs` would list, or None when there is none.

    Only what that order needs is looked at: each run folder is listed (or, through the
    listing cache, stat'ed) and its run.json read (or stat'ed), never an event log, so
    ``nb resume-id --latest`` on 20,000 runs costs a ``stat`` or two a run. A run's
    name and start time are what its run.json says now: a run added, removed or
    resumed since the cache was written is seen (its folder changed).
    """
    root = os.path.abspath(os.fspath(root) if root is not None else default_root())
    with paused_gc():
        try:
            with os.scandir(os.path.join(root, project)) as it:
                dirs = [(e.path, e.name) for e in it if e.is_dir()]
        except OSError:
            return None
        return _latest(root, dirs, name)


def _latest(root: str, dirs: list[tuple[str, str]], name: str | None) -> str | None:
    """:func:`latest_run` among ``dirs`` (``(path, id)`` of each folder of the project)."""
    cache = ListingCache(root)
    best: tuple | None = None
    for path, rid in dirs:
        names = cache.names(path)
        unchanged = names is not None
        if names is None:
            try:
                names = os.listdir(path)
            except OSError:
                names = []
            cache.put_names(path, [n for n in names
                                   if n == RUN_JSON or n.startswith((EVENTS_PREFIX, MEDIA_PREFIX, FAILURE_PREFIX))])
        if RUN_JSON in names:
            known = cache.unchanged_info(path) if unchanged else None
            info = known[0] if known is not None else None
            if info is None:
                hit = cache.info(os.path.join(path, RUN_JSON), path)
                if hit is not None:
                    info = hit[0]
                else:
                    meta, st = read_json_file(os.path.join(path, RUN_JSON))
                    if meta is not None:
                        info = run_info(meta)
                        cache.put_info(path, info, None, st)
            if info is None:
                info = _NO_INFO
        elif any(n.startswith(EVENTS_PREFIX) and parse_event_file_name(n) for n in names):
            info = _NO_INFO  # a run whose rank 0 has not written run.json yet
        else:
            continue
        if name is not None and info[0] != name:
            continue
        key = (info[1] or 0.0, rid)
        if best is None or key > best:
            best = key
    cache.save(complete=False)
    return None if best is None else best[1]


def list_runs_meta(root: str | os.PathLike | None = None, project: str | None = None) -> list[tuple[dict, dict]]:
    """``(summary, meta)`` of every run under ``root``, newest first: the rows of
    :func:`list_runs`, each with the ``config`` and ``summary`` entries of its
    ``run.json`` (read once for both; ``{}`` when it is missing or not a JSON object,
    and the rest of it is not kept: holding 5,000 whole files costs a fifth more time)."""
    metas: list[dict] = []
    with paused_gc():
        pairs = list(zip(_rows(root, project, metas), metas, strict=True))
        pairs.sort(key=lambda rm: (rm[0]["started"] or 0.0, rm[0]["id"]), reverse=True)
    return pairs


def _rows(root: str | os.PathLike | None, project: str | None, metas: list | None) -> list[dict]:
    """The rows of the runs under ``root`` in folder order, with their run.json appended
    to ``metas`` when it is a list. :func:`list_runs` passes None: keeping every parsed
    run.json alive costs memory that the next one would have reused (a third more time
    on 5,000 runs)."""
    root = os.path.abspath(os.fspath(root) if root is not None else default_root())
    try:
        projects = [project] if project is not None else sorted(os.listdir(root))
    except OSError:
        return []
    return _listed(root, projects, project is None, metas)


def _listed(root: str, projects: list[str], complete: bool, metas: list | None) -> list[dict]:
    """:func:`_rows` of the absolute ``root``'s ``projects`` (``complete``: all of them)."""
    rows = []
    now = time.time()
    here = this_host()
    cache = ListingCache(root, query=metas is not None)
    for p in projects:
        try:
            with os.scandir(os.path.join(root, p)) as it:
                dirs = [(e.path, e.name) for e in it if e.is_dir()]
        except OSError:
            continue
        pname = os.path.basename(os.path.normpath(os.path.join(root, p)))
        for path, name in dirs:
            row = _summary(path, now, STALE_AFTER_S, True, metas, cache, (pname, name), here)
            if row is not None:
                rows.append(row)
    cache.save(complete=complete)
    return rows
