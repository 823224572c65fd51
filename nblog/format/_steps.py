"""The last step: of an event log, of a session, of a rank. One definition, standard
library only, for the writer (where a resumed session's counter starts) and every reader
(``nb ls``, ``nb show``, the TUI, the report, ``nb watch``).

A *logged step* is the step of a scalar, timer, text or media record; system metrics
are measurements of a machine at a time and never count. Then:

- an event log's last step is the highest logged step it holds (not the step of its
  last record: ``add_hparams`` at step 0 after steps 0-49 leaves 49);
- a session's last step is the higher of what ``run.json`` recorded for it and what its
  event log holds (``run.json`` is updated every few seconds, so a ``kill -9`` leaves it
  behind the log; a point refused or lost to a full disk may leave the log behind it);
- a rank's last step is the last step of its latest session that logged a step: by the
  hiding rule (``man 5 nb-format``) every earlier session's visible points lie below
  that session's first step, so this is the highest step a reader shows.

A run's last step is rank 0's (rank 0 writes ``run.json``).

Reading a log whole would make listing as slow as the log is long, so
:func:`log_last_step` reads its start (for the tag definitions, which come first) and
its end (at least :data:`TAIL` bytes: more than one whole POINTS frame of 1 MiB), with
the standard library only: ``init`` never imports numpy. Steps nearly always grow
within a session, so the highest step among the records near the end is the highest
step of the log. When the end holds no logged step (a long text, or hours of system
metrics alone at the end), the window doubles until it does, up to 64 MiB. The frames
are found as every reader finds them (``_walk``: the file header, damaged or not, and
the frame walk), and a COLUMNS frame's step column where ``_format.columns_layout`` says.
"""

from __future__ import annotations

import os
import sys

from . import _format as F
from ._filenames import parse_event_file_name
from ._runfile import open_regular
from ._walk import frames, readable_version

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

#: Bytes read at the start of a log: its session header and first tag definitions.
HEAD = 256 << 10
#: Bytes read at least at the end of a log: more than one whole POINTS frame (1 MiB).
TAIL = (2 << 20) + 64
#: The widest end read for a logged step (then the start of the log is used).
MAX_TAIL = 64 << 20
_LITTLE = sys.byteorder == "little"


def higher(a: int | None, b: int | None) -> int | None:
    """The higher of two steps, either of which may be None (unknown)."""
    if a is None:
        return b
    if b is None:
        return a
    return a if a >= b else b


def latest_step(steps: Iterable[tuple[int, int | None]]) -> int | None:
    """A rank's last step from ``(session, last step or None)`` pairs: the step of the
    highest-numbered session that has one; None when none has."""
    best: tuple[int, int] | None = None
    for session, step in steps:
        if step is not None and (best is None or session > best[0]):
            best = (session, step)
    return None if best is None else best[1]


def rank_last_step(run_dir: str, recorded: Mapping[int, int] | None = None, rank: int = 0,
                   before: int | None = None, read: Callable[[str], int | None] | None = None) -> int | None:
    """The last step of ``rank`` in ``run_dir``: that of its latest session that logged
    one, each session's being the higher of ``recorded`` (run.json's ``last_step`` by
    session number; pass it for rank 0) and its event log's (:func:`log_last_step`).

    Args:
        run_dir: the run folder.
        recorded: session number -> the last step run.json recorded for it.
        rank: whose event logs to read.
        before: only sessions numbered below this (None: all).
        read: the last step of a log path (default :func:`log_last_step`): a caller
            that keeps what it read before passes its own.

    Returns:
        The step, or None when no session logged one. Never raises: an unreadable
        folder or log counts as holding no step.
    """
    read = log_last_step if read is None else read
    recorded = recorded or {}
    files: dict[int, str] = {}
    try:
        names = os.listdir(run_dir)
    except OSError:
        names = []
    for name in names:
        rs = parse_event_file_name(name)
        if rs is not None and rs[0] == rank:
            files[rs[1]] = os.path.join(run_dir, name)
    for n in sorted(set(files) | set(recorded), reverse=True):
        if before is not None and n >= before:
            continue
        found = higher(recorded.get(n), read(files[n]) if n in files else None)
        if found is not None:
            return found
    return None


def recorded_steps(sessions: object) -> dict[int, int]:
    """session number -> ``last_step`` of run.json's session entries (``sessions``: its
    list), for the entries that have a valid one."""
    out: dict[int, int] = {}
    for s in sessions if isinstance(sessions, list) else ():
        if not isinstance(s, dict):
            continue
        n, step = s.get("session"), s.get("last_step")
        if n.__class__ is int and step.__class__ is int and step >= 0:
            out[n] = step
    return out


def log_last_step(path: str) -> int | None:
    """The highest logged step (scalar, timer, text or media record) near the end of
    the event log ``path``: among the records of its last :data:`TAIL` bytes, else of
    an end twice as long, and so on up to :data:`MAX_TAIL` (then its first
    :data:`HEAD` bytes), or of the whole log when it is short. None when it holds
    none, or cannot be read. Never raises for a damaged or torn file: only whole
    frames whose checksums hold are used."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size <= HEAD + TAIL:
                data = f.read(size)
                return _scan(data, data[:0])
            head = f.read(HEAD)
            window = TAIL
            while True:
                window = min(window, size - HEAD)
                f.seek(size - window)
                found = _scan(head, f.read(window))
                if found is not None or window >= min(size - HEAD, MAX_TAIL):
                    return found
                window *= 2
    except OSError:
        return None


def _scan(head: bytes, tail: bytes) -> int | None:
    """The highest logged step of the frames of ``tail``, else of ``head`` (the start
    of the log; all of it when ``tail`` is empty), system tags known from the tag
    definitions of both. None for a file that is not an event log of a known version
    (``_walk.readable_version``: read past a damaged file header as readers do)."""
    if readable_version(head) is None:
        return None
    first = list(frames(head, F.FILE_HEADER.size))
    last = list(frames(tail, 0))
    system = system_tags(first + last)
    best = max_step(last, system)
    return best if best is not None else max_step(first, system)


def system_tags(found: Iterable[tuple[int, memoryview]]) -> set[int]:
    """The ids of system tags defined in the TAGS frames among ``found`` ((type, payload))."""
    system: set[int] = set()
    for kind, payload in found:
        if kind == F.FRAME_TAGS:
            try:
                defs = F.decode_tag_defs(bytes(payload))
            except (ValueError, UnicodeDecodeError):
                continue
            system.update(tid for tid, k, _ in defs if k == F.KIND_SYSTEM)
    return system


def max_step(found: Iterable[tuple[int, memoryview]], system: set[int]) -> int | None:
    """The highest step of the scalar, timer, text and media records of the frames
    ``found`` ((type, payload) pairs); ``system``: the ids of system tags, left out."""
    best = None
    for kind, payload in found:
        step = None
        try:
            if kind == F.FRAME_COLUMNS and _LITTLE:
                step = _max_columns_step(payload, system)
            elif kind in (F.FRAME_POINTS, F.FRAME_COLUMNS):
                step = _max_point_step(memoryview(F.points_payload(kind, payload)), system)
            elif kind == F.FRAME_TEXT:
                step = max((s for s, *_ in F.decode_texts(bytes(payload))), default=None)
            elif kind == F.FRAME_MEDIA:
                step = max((s for s, *_ in F.decode_media(bytes(payload))), default=None)
        except (ValueError, UnicodeDecodeError):
            continue
        if step is not None and (best is None or step > best):
            best = step
    return best


def _max_columns_step(payload: memoryview, system: set[int]) -> int | None:
    """The highest step of the non-system point records of a COLUMNS payload, from its
    step column (little-endian machines), without rebuilding the records when no
    record is of a system tag; ``ValueError`` for a malformed payload."""
    lay = F.columns_layout(payload)
    if not lay.n:
        return None
    data = memoryview(bytes(payload))  # aligned: the casts below read at full speed
    if system:
        tags = data[lay.tag.start : lay.tag.stop]
        ids = tags.cast("I") if lay.tag.width == 4 else tags.cast("H")
        if not system.isdisjoint(ids):  # system records among them: record by record
            return _max_point_step(memoryview(F.decode_columns(payload)), system)
    s = lay.step
    steps = data[s.start : s.stop]
    column = steps.cast("q") if s.width == 8 else steps.cast("I") if s.width == 4 else steps.cast("H")
    return s.base + max(column)


def _max_point_step(payload: memoryview, system: set[int]) -> int | None:
    """The highest step of the non-system point records in a POINTS payload."""
    n = len(payload)
    if n % F.POINT_SIZE or not n:
        return None
    if _LITTLE:  # the records' fields as strided views, iterated in C
        steps = payload.cast("q")[::3]
        if not system:
            return max(steps)
        tids = payload.cast("I")[4::6]
        return max((s for s, t in zip(steps, tids, strict=True) if t not in system), default=None)
    return max((s for s, _v, t, _ms in F.POINT.iter_unpack(payload) if t not in system), default=None)
