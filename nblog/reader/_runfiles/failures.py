"""The first failure of a run, named from every rank's files: failure marks and the
lines ``nb ls``, ``nb show``, ``nb report`` and ``nb watch`` print; and where ranks
stopped (:func:`failed_ranks`: failures and sessions that ended without an END record,
:func:`unended_sessions`), as ``nb show`` and the straggler rule's cut take it. Standard
library only: ``nb ls`` imports it.

A rank that records an uncaught exception (in the main thread or another one) writes,
besides the failure event in its own event log, a failure mark
``failure.r<rank>.s<session>.json`` into the run folder: a JSON object of a few hundred
bytes (rank, session, host, pid, type, message cut at 500 characters, step, wall,
thread), once per rank and session, for its first failure. Only rank 0 writes
``run.json``, so without the marks a listing would have to read every rank's event
log to know that rank 3 failed; with them it finds the failures in the folder listing
it reads anyway, and opens the marks of the latest session only.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ...format._filenames import parse_failure_file_name
from ...format._runfile import open_regular
from .._file.words import plural
from .progress import this_host, writer_alive

#: Bytes of a failure mark read at most (they are a few hundred).
MAX_MARK_BYTES = 64 << 10


def failure_line(failure: dict | None, after: int = 0) -> str | None:
    """``failed: rank 3 (host7), step 812, RuntimeError: CUDA out of memory`` for the
    failure event or mark ``failure`` (None: None); `` (thread NAME)`` when it was
    raised in a thread other than the main one; then how many other ranks failed
    after it."""
    if not failure:
        return None
    where = f"rank {failure.get('rank')}"
    if failure.get("host"):
        where += f" ({failure['host']})"
    step = failure.get("step")
    message = (failure.get("message") or "").strip().splitlines()
    first_line = message[0] if message else ""
    if len(first_line) > 300:
        first_line = first_line[:297] + "..."
    what = str(failure.get("type") or "?") + (f": {first_line}" if message else "")
    line = f"failed: {where}, " + (f"step {step}, " if step is not None else "before the first step, ") + what
    if isinstance(failure.get("thread"), str):
        line += f" (thread {failure['thread']})"
    if after:
        line += f" ({plural(after, 'other rank')} failed after it)"
    return line


def unended_line(session: dict) -> str:
    """``rank 2 (host) session 0 ended without an END record (killed? last step N)``."""
    step = session.get("last_step")
    host = f" ({session['host']})" if session.get("host") else ""
    return (f"rank {session['rank']}{host} session {session['session']} ended without an END record "
            f"(killed? last step {step if step is not None else 'none'})")


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def read_marks(run_dir: str, names: Iterable[str], session: int | None = None) -> list[dict]:
    """The failure marks among the file names ``names`` of ``run_dir`` (of ``session``
    only, unless None), earliest first (by wall time, then rank). Each: rank, session
    (from the file name), host, pid, type, message, step, wall, thread; a mark that
    cannot be read or is not a JSON object counts with what its name says."""
    out = []
    for name in names:
        rs = parse_failure_file_name(name)
        if rs is None or (session is not None and rs[1] != session):
            continue
        rec = _read_mark(os.path.join(run_dir, name))
        out.append({"rank": rs[0], "session": rs[1],
                    "host": rec.get("host") if isinstance(rec.get("host"), str) else None,
                    "pid": _int(rec.get("pid")),
                    "type": rec.get("type") if isinstance(rec.get("type"), str) else None,
                    "message": rec.get("message") if isinstance(rec.get("message"), str) else None,
                    "step": _int(rec.get("step")), "wall": _number(rec.get("wall")),
                    "thread": rec.get("thread") if isinstance(rec.get("thread"), str) else None})
    out.sort(key=lambda m: (m["wall"] is None, m["wall"] or 0.0, m["rank"]))
    return out


def _read_mark(path: str) -> dict:
    """A mark's JSON object; {} when it cannot be read, is too large or is not one."""
    try:
        with open_regular(path) as f:
            data = f.read(MAX_MARK_BYTES + 1)
        rec = json.loads(data.decode("utf-8")) if len(data) <= MAX_MARK_BYTES else None
    except (OSError, ValueError, RecursionError):
        return {}
    return rec if isinstance(rec, dict) else {}


def first_failure(marks: list[dict]) -> tuple[dict | None, int]:
    """The earliest of ``marks`` (as :func:`read_marks` returns them) and how many
    other ranks failed after it."""
    if not marks:
        return None, 0
    first = marks[0]
    return first, len({m["rank"] for m in marks[1:] if m["rank"] != first["rank"]})


def failed_ranks(failures: Iterable[Mapping[str, Any]], sessions: Iterable[Mapping[str, Any]],
                 status: str | None) -> list[tuple[int, int, int | None]]:
    """Where ranks stopped, as the straggler rule takes it
    (:func:`~nblog.reader.straggler_frames` ``failed=``).

    Args:
        failures: the run's failure events: rank, session, step (an int; a failure
            with no step, before the first one, is left out), wall (unix seconds or
            None).
        sessions: every session file of every rank: rank, session, closed (its END
            record was read), host, pid (of its header), last_wall (unix seconds of
            its last record, or None).
        status: the run's status as ``run.json`` has it.

    Returns:
        ``(rank, session, step)`` of each failure and ``(rank, session, None)`` of
        each session that ended without an END record by the rule of
        :func:`unended_sessions` (the run is over, the rank has a later session, or another
        rank closed the same session, unless its process is alive on this machine),
        earliest first (a failure by its time, a dead session by its last record;
        unknown times last): where several stopped at one step, the rule names the
        first, the rank the others waited for.
    """
    found: list[tuple[object, tuple[int, int, int | None]]] = [
        (f.get("wall"), (f["rank"], f["session"], f["step"])) for f in failures
        if isinstance(f.get("step"), int) and not isinstance(f.get("step"), bool)]
    found += [(f.get("last_wall"), (f["rank"], f["session"], None))
              for f in unended_sessions([dict(f) for f in sessions], status)]

    def when(item: tuple[object, tuple]) -> tuple[bool, float]:
        w = item[0]
        known = isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w)
        return (not known, float(w) if known else 0.0)  # type: ignore[arg-type]  # a number when known

    return [where for _w, where in sorted(found, key=when)]


def unended_sessions(files: list[dict], status: str | None) -> list[dict]:
    """The sessions of ``files`` (dicts with rank, session, closed, host, pid, and
    wall_start and duration_s or last_wall) that ended without an END record: not
    closed, and the run is not running (its status is known and not "running"), or the
    rank has a later session, or another rank's same session is closed while this
    one's writer is not alive (:func:`~nblog.reader.writer_alive`, the one rule)."""
    latest: dict[int, int] = {}
    closed_sessions: set[int] = set()
    for f in files:
        latest[f["rank"]] = max(latest.get(f["rank"], -1), f["session"])
        if f["closed"]:
            closed_sessions.add(f["session"])
    dead = status not in ("running", None)
    here = None if dead else this_host()
    out = []
    for f in files:
        if f["closed"]:
            continue
        wall0, dur = f.get("wall_start"), f.get("duration_s")
        last = f.get("last_wall")
        if last is None and isinstance(wall0, (int, float)) and isinstance(dur, (int, float)):
            last = wall0 + dur
        if dead or f["session"] < latest[f["rank"]] or (
                f["session"] in closed_sessions and not writer_alive(f.get("host"), f.get("pid"), wall0, last, here=here)):
            out.append(f)
    return out



__all__ = ["MAX_MARK_BYTES", "failed_ranks", "failure_line", "first_failure", "read_marks", "unended_line",
           "unended_sessions"]
