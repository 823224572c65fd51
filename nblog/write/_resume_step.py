"""Where a resumed session's step counter starts: one after the run's last step.

``add_scalar`` without a step uses the run's own counter. A new session of an existing
run (``resume="auto"``/``"must"``, a Slurm requeue or torchrun restart of a derived id)
must continue after the steps already logged; starting again at 0 would make every
reader hide the whole earlier curve (the hiding rule, ``man 5 nb-format``).

The last step is read from rank 0's event logs, not only from ``run.json``: a session's
``last_step`` there is written every few seconds and at finish, so it is stale after a
``kill -9``. The event log holds every point that reached the disk. Reading a log
whole would make ``init`` as slow as the log is long, so only its start (for the tag
definitions, which come first) and its last ``_TAIL`` bytes are read, with the standard
library only (``init`` never imports numpy). Steps nearly always grow within a session,
so the highest step among the records near its end is its last step.

The highest step of the latest session that logged any scalar, timer, text or media
record is the highest step a reader shows: every earlier session's visible points are
below that session's first step.
"""

from __future__ import annotations

import os
import sys
import zlib

from ..format import _format as F
from ..format._runfile import open_regular, parse_event_file_name

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from collections.abc import Iterator

_HEAD = 256 << 10  # bytes read at the start of a log: its session header and first tags
_TAIL = (2 << 20) + 64  # bytes read at its end: more than one whole POINTS frame (1 MiB)
_LITTLE = sys.byteorder == "little"


def resume_step(run_dir: str, sessions: list, rank: int = 0, before: int | None = None) -> int:
    """The first step of the counter of a new session of ``rank`` in ``run_dir``.

    Args:
        run_dir: the run folder.
        sessions: run.json's session entries (their ``last_step`` counts as well).
        rank: whose event logs to read (rank 0 for every rank: one numbering).
        before: only sessions numbered below this count (None: all).

    Returns:
        One more than the highest step of the latest session that logged a step
        (its event log and its ``last_step`` in run.json, whichever is higher); 0
        when no session logged any.
    """
    files: dict[int, str] = {}
    try:
        names = os.listdir(run_dir)
    except OSError:
        names = []
    for name in names:
        rs = parse_event_file_name(name)
        if rs is not None and rs[0] == rank:
            files[rs[1]] = os.path.join(run_dir, name)
    recorded: dict[int, int] = {}
    if rank == 0:
        for s in sessions or []:
            if not isinstance(s, dict):
                continue
            n, step = s.get("session"), s.get("last_step")
            if n.__class__ is int and step.__class__ is int and step >= 0:
                recorded[n] = step
    for n in sorted(set(files) | set(recorded), reverse=True):
        if before is not None and n >= before:
            continue
        found = log_last_step(files[n]) if n in files else None
        if n in recorded:
            found = recorded[n] if found is None else max(found, recorded[n])
        if found is not None:
            return min(found + 1, (1 << 63) - 1)
    return 0


def log_last_step(path: str) -> int | None:
    """The highest step of a scalar, timer, text or media record near the end of the
    event log ``path`` (its last ``_TAIL`` bytes, and the whole log when it is short);
    None when there is none, or the file cannot be read. Never raises for a damaged
    or torn file: only whole frames whose checksums hold are used."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size <= _HEAD + _TAIL:
                head, tail = f.read(size), b""
            else:
                head = f.read(_HEAD)
                f.seek(size - _TAIL)
                tail = f.read(_TAIL)
    except OSError:
        return None
    if len(head) < F.FILE_HEADER.size or head[:4] != F.FILE_MAGIC:
        return None
    if F.FILE_HEADER.unpack_from(head, 0)[1] > F.FORMAT_VERSION:
        return None
    first = list(_frames(head, F.FILE_HEADER.size))
    last = list(_frames(tail, 0))
    system: set[int] = set()
    for kind, payload in first + last:
        if kind == F.FRAME_TAGS:
            try:
                defs = F.decode_tag_defs(bytes(payload))
            except (ValueError, UnicodeDecodeError):
                continue
            system.update(tid for tid, k, _ in defs if k == F.KIND_SYSTEM)
    best = _max_step(last, system)
    return best if best is not None else _max_step(first, system)  # a short log is all "first"


def _max_step(frames: list, system: set[int]) -> int | None:
    """The highest step of the scalar, timer, text and media records in ``frames``."""
    best = None
    for kind, payload in frames:
        step = None
        try:
            if kind in (F.FRAME_POINTS, F.FRAME_COLUMNS):
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


def _frames(data: bytes, pos: int) -> Iterator[tuple[int, memoryview]]:
    """``(type, payload)`` of each whole, checksummed frame in ``data`` from ``pos``,
    which may be in the middle of a frame (the tail of a log): bytes that are not a
    valid frame are skipped up to the next frame magic."""
    view = memoryview(data)
    end = len(data)
    hsize = F.FRAME_HEADER_SIZE
    crc32 = zlib.crc32
    while end - pos >= hsize:
        magic, kind, length, crc, hcrc = F.FRAME_HEADER.unpack_from(data, pos)
        stop = pos + hsize + length
        if (
            magic != F.FRAME_MAGIC
            or crc32(view[pos : pos + 12]) != hcrc
            or stop > end
            or crc32(view[pos + hsize : stop]) != crc
        ):
            pos = data.find(F.FRAME_MAGIC, pos + 1)
            if pos < 0:
                return
            continue
        yield kind, view[pos + hsize : stop]
        pos = stop
