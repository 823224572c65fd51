"""The first failure of a run, named from every rank's files: failure marks and the
lines ``nb ls``, ``nb show``, ``nb report`` and ``nb watch`` print. Standard library
only: ``nb ls`` imports it.

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
import os
from collections.abc import Iterable

from ...format._filenames import parse_failure_file_name
from ...format._runfile import open_regular
from .._file.words import plural

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


__all__ = ["MAX_MARK_BYTES", "failure_line", "first_failure", "read_marks", "unended_line"]
