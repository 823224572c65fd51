"""The file names of a run folder: each written and parsed here, and nowhere else.

A run folder (``<root>/<project>/<run id>/``, ``man 5 nb-format``) holds::

    run.json                            the run (rank 0; nblog/format/_runfile.py)
    run.json.bak                        the last run.json read whole, written by each resume
    events.r<R>.s<S>.log                rank R's event log of session S (_format)
    envelope.r<R>.s<S>.bin              its min/max sidecar, rank 0 (_envelope)
    media.r<R>.pack                     rank R's media pack (_pack)
    media.r<R>.s<S>.pack                the pack of a session that found another's there
    console.r<R>.s<S>.log               rank R's captured console (nblog/write/_console.py)
    provenance.r<R>.s<S>.json           what session S of rank R ran (nblog/write/_provenance.py)
    provenance.r<R>.s<S>.diff           and rank 0's uncommitted diff
    failure.r<R>.s<S>.json              rank R's first uncaught exception of session S
    stacks.r<R>.s<S>.<N>.jsonl          rank R's N-th hang dump (nblog/write/_hang.py)
    stacks.r<R>.s<S>.moved.json         the note that rank R moved again after a stall
    stacks.r<R>.s<S>.faulthandler.txt   faulthandler's stacks when the GIL was held

and, for a moment, the hidden names of a file being replaced (``_filesafety``)::

    .<name>.<pid>.<hex>.tmp             the new content, before the rename
    .<name>.<pid>.<hex>.old             the old file moved aside, where a rename cannot
                                        replace a file (it is left only by an update
                                        that was interrupted)

``<R>`` and ``<S>`` are written in decimal. Each ``*_file_name`` has its
``parse_*_file_name``: ``(rank, session)`` of a name of that kind, else None (names of
other kinds, and names that are not nb's, which every reader ignores). The parsers
accept what earlier versions of nblog wrote: any decimal digits for event logs and
console files, at most nine for provenance files and failure marks.

The ``*_PREFIX`` constants are the quick test a listing of thousands of runs makes
before parsing a name. Imports the standard library only.
"""

from __future__ import annotations

import os
import re

RUN_JSON = "run.json"
RUN_JSON_BACKUP = "run.json.bak"  # the last run.json read whole, written by each resume

EVENTS_PREFIX = "events."  # every event log's name starts so
MEDIA_PREFIX = "media."  # every media pack's
FAILURE_PREFIX = "failure."  # every failure mark's
HANG_PREFIX = "stacks."  # every hang dump's, note's and faulthandler file's

_EVENT = re.compile(r"^events\.r(\d+)\.s(\d+)\.log$")
_ENVELOPE = re.compile(r"^envelope\.r(\d+)\.s(\d+)\.bin$")
_CONSOLE = re.compile(r"^console\.r(\d+)\.s(\d+)\.log$")
_PROVENANCE = re.compile(r"^provenance\.r(\d{1,9})\.s(\d{1,9})\.json$")
_FAILURE = re.compile(r"^failure\.r(\d{1,9})\.s(\d{1,9})\.json$")
_HANG = re.compile(r"^stacks\.r(\d{1,9})\.s(\d{1,9})\.(?:(\d{1,9})\.jsonl|(moved)\.json)$")
# a pack's rank as this version writes it (no leading zero); a session in ASCII digits
_PACK = re.compile(r"^media\.r(0|[1-9][0-9]*)(?:\.s([0-9]+))?\.pack$")


def _pair(m: re.Match[str] | None) -> tuple[int, int] | None:
    return (int(m.group(1)), int(m.group(2))) if m else None


def event_file_name(rank: int, session: int) -> str:
    """``events.r<rank>.s<session>.log``."""
    return f"events.r{rank}.s{session}.log"


def parse_event_file_name(name: str) -> tuple[int, int] | None:
    """``(rank, session)`` of an event log name, or None for any other file."""
    return _pair(_EVENT.match(name))


def envelope_file_name(rank: int, session: int) -> str:
    """``envelope.r<rank>.s<session>.bin``: the envelope sidecar of that event log, a
    per-tag min/max summary the writer keeps (``_envelope``; ``man nb-format``, ENVELOPE
    FILES). A cache: readers fall back to the event log."""
    return f"envelope.r{int(rank)}.s{int(session)}.bin"


def parse_envelope_file_name(name: str) -> tuple[int, int] | None:
    """``(rank, session)`` of an envelope sidecar's name, or None for any other file."""
    return _pair(_ENVELOPE.match(name))


def envelope_path_for(log_path: str) -> str | None:
    """The sidecar path of an event log path, or None when the name is not an event log's."""
    folder, name = os.path.split(log_path)
    rs = parse_event_file_name(name)
    return None if rs is None else os.path.join(folder, envelope_file_name(*rs))


def console_file_name(rank: int, session: int) -> str:
    """``console.r<rank>.s<session>.log``: what a rank wrote to fd 1 and 2 while
    captured (``man nb-format``, CONSOLE FILES)."""
    return f"console.r{rank}.s{session}.log"


def parse_console_file_name(name: str) -> tuple[int, int] | None:
    """``(rank, session)`` of a console file's name, or None for any other file."""
    return _pair(_CONSOLE.match(name))


def provenance_file_name(rank: int, session: int, ext: str = "json") -> str:
    """``provenance.r<rank>.s<session>.<ext>`` (``json``: the record; ``diff``: rank
    0's uncommitted diff)."""
    return f"provenance.r{int(rank)}.s{int(session)}.{ext}"


def parse_provenance_file_name(name: str) -> tuple[int, int] | None:
    """``(rank, session)`` of a provenance record's name (``.json``; not the diff), or None."""
    return _pair(_PROVENANCE.match(name))


def failure_file_name(rank: int, session: int) -> str:
    """``failure.r<rank>.s<session>.json``: the failure mark of a rank's session (a
    JSON object: rank, session, host, pid, type, message, step, wall, thread), written
    with its first uncaught exception so that listings find every rank's failures
    without reading event logs (see nblog/reader/_runfiles/failures.py, man nb-format)."""
    return f"failure.r{int(rank)}.s{int(session)}.json"


def parse_failure_file_name(name: str) -> tuple[int, int] | None:
    """``(rank, session)`` of a failure mark's name, or None for any other file."""
    return _pair(_FAILURE.match(name))


def hang_dump_file_name(rank: int, session: int, n: int) -> str:
    """``stacks.r<rank>.s<session>.<n>.jsonl``: the ``n``-th hang dump (from 1) of a
    rank's session: a summary line, then its threads' stacks and Flight Recorder record
    (``man nb-format``, HANG DUMPS)."""
    return f"stacks.r{int(rank)}.s{int(session)}.{int(n)}.jsonl"


def hang_moved_file_name(rank: int, session: int) -> str:
    """``stacks.r<rank>.s<session>.moved.json``: the rank moved again after its last stall."""
    return f"stacks.r{int(rank)}.s{int(session)}.moved.json"


def hang_faulthandler_file_name(rank: int, session: int) -> str:
    """``stacks.r<rank>.s<session>.faulthandler.txt``: the standard library's
    faulthandler output, written when the interpreter was held in C code (empty: none)."""
    return f"stacks.r{int(rank)}.s{int(session)}.faulthandler.txt"


def parse_hang_file_name(name: str) -> tuple[int, int, int | None] | None:
    """``(rank, session, n)`` of a hang dump's name, ``(rank, session, None)`` of a
    moved note's, or None for any other file."""
    m = _HANG.match(name)
    if m is None:
        return None
    n = m.group(3)
    return int(m.group(1)), int(m.group(2)), None if n is None else int(n)


def pack_file_name(rank: int) -> str:
    """``media.r<rank>.pack``: a rank's media pack (``_pack``)."""
    return f"media.r{rank}.pack"


def session_pack_file_name(rank: int, session: int) -> str:
    """``media.r<rank>.s<session>.pack``: the pack of a session that found
    ``media.r<rank>.pack`` made by another session."""
    return f"media.r{rank}.s{session}.pack"


def parse_pack_file_name(name: str) -> tuple[int, int | None] | None:
    """``(rank, session)`` of a media pack's name (session None: ``media.r<rank>.pack``),
    or None for any other file."""
    m = _PACK.match(name)
    if m is None:
        return None
    return int(m.group(1)), None if m.group(2) is None else int(m.group(2))


def temp_file_name(name: str) -> str:
    """``.<name>.<pid>.<8 hex digits>.tmp``: a new name, each call, for the new content
    of ``name`` (a file name, not a path) before it is renamed in place of ``name``."""
    return f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def is_temp_of(temp: str, name: str) -> bool:
    """Whether ``temp`` is a name :func:`temp_file_name` gives ``name``."""
    return temp.startswith(f".{name}.") and temp.endswith(".tmp")


def aside_file_name(name: str) -> str:
    """``.<name>.<pid>.<8 hex digits>.old``: where the old ``name`` goes for a moment
    when a rename cannot replace a file."""
    return f".{name}.{os.getpid()}.{os.urandom(4).hex()}.old"


def is_aside_of(aside: str, name: str) -> bool:
    """Whether ``aside`` is a copy of ``name`` moved aside (:func:`aside_file_name`):
    one an interrupted update left holds ``name``'s last content."""
    return aside.startswith(f".{name}.") and aside.endswith(".old")
