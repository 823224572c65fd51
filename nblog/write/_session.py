"""Resuming a run: the session history of ``run.json`` that rank 0 continues, never lost
to a stale or torn read: read with retries, backed up, taken from a kept copy when the file
is missing or unreadable, and completed from the headers of rank 0's event logs.

Used by :func:`nblog.init` on rank 0; the file itself (``RunFile``, the atomic writers) is
``nblog.format._runfile``.
"""

from __future__ import annotations

import json
import os
from struct import error as struct_error

from ..format import _format as F
from ..format._filenames import (
    RUN_JSON,
    RUN_JSON_BACKUP,
    event_file_name,
    is_aside_of,
    parse_event_file_name,
)
from ..format._runfile import (
    open_regular,
    read_json_file,
    read_run_json_retrying,
    write_json_atomic,
)
from ..format._steps import HEAD as _HEAD
from ..format._steps import TAIL as _TAIL
from ..format._steps import log_last_step
from ..format._walk import frames, read_header, readable_version


def sessions_from_logs(run_dir: str) -> list[dict]:
    """Session entries of run.json rebuilt from rank 0's event logs, in session order,
    marked ``"rebuilt": true``: start, host, pid, world size and restart counts from
    the header; first_step and last_step from the records (None: none); end (unix
    seconds), end_reason and duration_s from the END record (None: the session never
    ended, as after a kill -9); ``"config_unknown": true`` since headers hold no config
    (the session may have been started with a changed one). Reads the log's first
    256 KiB and last 2 MiB at most (:mod:`nblog.format._steps`' scan)."""
    try:
        names = os.listdir(run_dir)
    except OSError:
        return []
    found = {rs[1] for rs in map(parse_event_file_name, names) if rs is not None and rs[0] == 0}
    n = max(found, default=-1) + 1
    while os.path.lexists(os.path.join(run_dir, event_file_name(0, n))):  # past a stale listing
        found.add(n)
        n += 1
    out = []
    for session in found:
        head = read_header(os.path.join(run_dir, event_file_name(0, session)))
        entry: dict = {"session": session, "rebuilt": True}
        for key, src in (("start", "wall_start"), ("host", "host"), ("pid", "pid"),
                         ("world_size", "world_size"), ("restart_counts", "restart_counts")):
            if src in head:
                entry[key] = head[src]
        entry.update(_log_record_summary(os.path.join(run_dir, event_file_name(0, session))))
        entry["config_unknown"] = True
        out.append(entry)
    return sorted(out, key=lambda e: e["session"])


def _log_record_summary(path: str) -> dict:
    """first_step, last_step, end, end_reason and duration_s of an event log, from
    its first 256 KiB (first step) and last 2 MiB (last step, END record); standard
    library only, the frames found as every reader finds them (``nblog.format._walk``).
    Never raises: an unreadable log gives Nones."""
    out: dict = {"first_step": None, "last_step": log_last_step(path), "end": None, "end_reason": None}
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(min(size, _HEAD))
            f.seek(max(0, size - _TAIL))
            tail = f.read(_TAIL) if size > _HEAD else head
    except OSError:
        return out
    if readable_version(head) is None:
        return out
    system: set[int] = set()
    for kind, payload in frames(head, F.FILE_HEADER.size):
        try:
            if kind == F.FRAME_TAGS:
                system.update(t for t, k, _ in F.decode_tag_defs(bytes(payload)) if k == F.KIND_SYSTEM)
            elif kind in (F.FRAME_POINTS, F.FRAME_COLUMNS):
                records = F.points_payload(kind, payload)
                step = next((st for st, _v, t, _ms in F.POINT.iter_unpack(records) if t not in system), None)
            elif kind in (F.FRAME_TEXT, F.FRAME_MEDIA):
                items = F.decode_texts(bytes(payload)) if kind == F.FRAME_TEXT else F.decode_media(bytes(payload))
                step = items[0][0] if items else None
            else:
                continue
        except (ValueError, UnicodeDecodeError, struct_error):
            continue
        if kind != F.FRAME_TAGS and step is not None:
            out["first_step"] = step
            break
    end = None
    for kind, payload in frames(tail, 0 if tail is not head else F.FILE_HEADER.size):
        if kind == F.FRAME_END:
            end = payload
    if end is not None:
        try:
            obj = json.loads(bytes(end).decode("utf-8"))
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            wall, reason, ms = obj.get("wall"), obj.get("reason"), obj.get("ms")
            if isinstance(wall, (int, float)) and not isinstance(wall, bool):
                out["end"] = wall
            out["end_reason"] = reason if isinstance(reason, str) else None
            if isinstance(obj.get("status"), str):
                out["end_status"] = obj["status"]
            if isinstance(ms, int) and not isinstance(ms, bool) and ms >= 0:
                out["duration_s"] = round(ms / 1000.0, 3)
    return out


def _session_numbers(sessions: list) -> set:
    return {s.get("session") for s in sessions if isinstance(s, dict)}


def load_run_json_for_resume(run_dir: str) -> dict | None:
    """run.json of a run that rank 0 continues, never losing its history to a read
    that a stale cache cut short.

    The file is read with retries (:func:`read_run_json_retrying`). Read whole, it is
    also copied to ``run.json.bak``. Missing or unreadable, the history is taken from
    ``run.json.bak`` or a copy left aside by an interrupted update, and a warning says
    so. Either way, sessions that rank 0's event-log headers show and run.json does not
    (a stale copy) are added back. None: the folder holds no run yet (no run.json, no
    backup, no event log of rank 0): a new run.
    """
    obj, state = read_run_json_retrying(run_dir)
    rebuilt = sessions_from_logs(run_dir)
    data: dict | None
    if state == "ok" and obj is not None:  # "ok" comes with the object
        try:
            write_json_atomic(os.path.join(run_dir, RUN_JSON_BACKUP), obj)
        except OSError:
            pass
        data = obj
    else:
        data = None
        for cand in _kept_copies(run_dir):
            got = read_json_file(cand)[0]
            if got is not None and (data is None or len(got.get("sessions") or []) > len(data.get("sessions") or [])):
                data = got
        if data is None and not rebuilt:
            if state == "unreadable":
                from .. import _log as log

                log.warning("nblog: %s exists but is not a JSON object, and no copy of it "
                            "or event log is there to continue from; writing it afresh",
                            os.path.join(run_dir, RUN_JSON))
            return None
        data = dict(data or {})
        from .. import _log as log

        log.warning(
            "nblog: %s is %s; continuing the run from %s (%d sessions known)",
            os.path.join(run_dir, RUN_JSON),
            "missing" if state == "missing" else "unreadable (re-read several times)",
            "its last copy and the event logs' headers" if data else "the event logs' headers",
            len(_session_numbers(data.get("sessions") or []) | {e["session"] for e in rebuilt}),
        )
    sessions = [s for s in (data.get("sessions") or []) if isinstance(s, dict)]
    known = _session_numbers(sessions)
    added = [e for e in rebuilt if e["session"] not in known]
    if added:
        data = dict(data)
        data["sessions"] = sorted(sessions + added, key=lambda e: e.get("session") if isinstance(e.get("session"), int) else -1)
        hosts = list(data.get("hosts") or [])
        for e in added:
            if isinstance(e.get("host"), str) and e["host"] not in hosts:
                hosts.append(e["host"])
        data["hosts"] = hosts
        starts = [e["start"] for e in added if isinstance(e.get("start"), (int, float))]
        if "created" not in data and starts:
            data["created"] = min(starts)
    return data


def _kept_copies(run_dir: str) -> list[str]:
    """Copies of run.json that an update may leave: one moved aside by an update that
    was interrupted (newest first), then ``run.json.bak``."""
    try:
        names = os.listdir(run_dir)
    except OSError:
        names = []
    aside = [os.path.join(run_dir, n) for n in names if is_aside_of(n, RUN_JSON)]
    aside.sort(key=lambda p: _mtime(p), reverse=True)
    return aside + [os.path.join(run_dir, RUN_JSON_BACKUP)]


def _mtime(path: str) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0
