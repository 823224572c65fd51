"""Finding the frames of an event log in its bytes: the one walk every reader takes.

An event log (``man 5 nb-format``) is an 8-byte file header, then frames of a 16-byte
header and a payload; ``_format`` holds the constants, writes the frames and encodes
and decodes each record kind (the COLUMNS layout: ``_format.columns_layout``). This
module reads the framing, once, for every reader:

- **The file header.** :func:`file_version`: the version of a file header this reader
  knows (magic, a version it reads, reserved flags 0); :func:`newer_version`: one of a
  newer format (refused); :func:`header_version`: the version field as it stands. A damaged file header must not cost the whole file: it is
  read past when the session header after it names a format this reader knows
  (:func:`named_version`; both rules together: :func:`readable_version`).
- **The frame walk.** :func:`frame_heads` goes from frame header to frame header; bytes
  that are no frame (a header that fails its checksum, or declares more than
  ``MAX_FRAME_LENGTH``) are skipped up to the next ``NBF`` magic as one range, and it
  stops before a torn tail (a frame that runs past the end, or bytes with no magic
  after them: a header still being written). :func:`walk` adds the payloads'
  checksums (computed in one batch, so that a big read can spread them over threads)
  and keeps a torn tail apart from corruption: a last frame whose payload fails its
  checksum is not written yet, as a frame cut by ``kill -9`` is. :func:`frames` yields
  the whole frames whose checksums hold, one at a time.
- **The session header** (the SESSION frame, written twice right after the file
  header): :func:`session_at` reads one copy, :func:`read_header` a file's (its first
  copy, else its second).

Who takes what: ``nblog.reader``'s ``LogFile`` (every reader of a whole log) takes
:func:`walk` and the file-header rules; the last-step scan (``_steps``) and the summary
of a resumed session (``nblog.write._session``) take :func:`frames` and
:func:`readable_version`; :func:`read_header` serves ``nb ls``, the session history of
a resume and the sidecar checks (with :func:`header_version`). Standard library only.
"""

from __future__ import annotations

import zlib

from . import _format as F
from ._runfile import open_regular

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

#: The type :func:`frame_heads` and :func:`walk` give bytes that are no frame.
NO_FRAME = -1


def header_version(data: bytes) -> int | None:
    """The version field of a file header (``data``: the file's first bytes) that
    has the event-log magic, whatever it says; None: no such header."""
    if len(data) < F.FILE_HEADER.size:
        return None
    magic, version, _flags = F.FILE_HEADER.unpack_from(data, 0)
    return int(version) if magic == F.FILE_MAGIC else None


def file_version(data: bytes) -> int | None:
    """The format version of the file header at the start of ``data`` when it is
    one this reader knows: the magic, a version from 1 to ``FORMAT_VERSION``, the
    reserved flags 0. None otherwise (damaged, not an event log, or newer)."""
    if len(data) < F.FILE_HEADER.size:
        return None
    magic, version, flags = F.FILE_HEADER.unpack_from(data, 0)
    return int(version) if magic == F.FILE_MAGIC and 1 <= version <= F.FORMAT_VERSION and not flags else None


def newer_version(data: bytes) -> int | None:
    """The version of a file header of a newer format than this reader knows (the
    magic, a version above ``FORMAT_VERSION``): such a file is refused, never read as
    damaged. None otherwise."""
    version = header_version(data)
    return version if version is not None and version > F.FORMAT_VERSION else None


def named_version(header: dict | None) -> int | None:
    """The format version a session header names (its ``format_version``) when this
    reader knows it; None otherwise (no header, no such key, another value)."""
    named = header.get("format_version") if header is not None else None
    return named if named.__class__ is int and 1 <= named <= F.FORMAT_VERSION else None


def readable_version(data: bytes) -> int | None:
    """The format to read an event log in, from its first bytes ``data``: its file
    header's version (:func:`file_version`), else, for a damaged file header, the
    version the session header right after it names (:func:`named_version`). None:
    not an event log this reader reads (the rule of ``LogFile``, which also reports
    the damaged header)."""
    version = file_version(data)
    return version if version is not None else named_version(session_at(data, F.FILE_HEADER.size))


def frame_heads(data: bytes, pos: int = 0) -> Iterator[tuple[int, int, int, int]]:
    """Walk the frame headers of ``data`` from ``pos``: ``(start, type, stop, payload
    CRC)`` of each frame whose header holds (its payload is ``data[start + 16:stop]``,
    not checked here), in order, and ``(start, NO_FRAME, stop, 0)`` for each range of
    bytes that are no frame, skipped up to the next ``NBF`` magic (a header that fails
    its checksum or declares more than ``MAX_FRAME_LENGTH`` bytes; consecutive ones
    make one range). ``pos`` may lie inside a frame (the end of a log read alone).

    The walk stops before a torn tail: a frame whose payload runs past the end of
    ``data``, or bytes with no magic after them (maybe a header still being written).
    It ends where the last item stops (``pos`` when there is none)."""
    end = len(data)
    hsize = F.FRAME_HEADER_SIZE
    magic_of, max_length = F.FRAME_MAGIC, F.MAX_FRAME_LENGTH
    unpack = F.FRAME_HEADER.unpack_from
    crc32 = zlib.crc32
    view = memoryview(data)
    junk = -1  # where bytes that are no frame began, until a frame comes
    while end - pos >= hsize:
        magic, kind, length, crc, hcrc = unpack(data, pos)
        if magic != magic_of or crc32(view[pos : pos + 12]) != hcrc or length > max_length:
            nxt = data.find(magic_of, pos + 1)
            if nxt < 0:
                break  # maybe garbage, maybe a header being written: the tail
            if junk < 0:
                junk = pos
            pos = nxt
            continue
        stop = pos + hsize + length
        if stop > end:
            break  # torn, or still being written
        if junk >= 0:
            yield junk, NO_FRAME, pos, 0
            junk = -1
        yield pos, kind, stop, crc
        pos = stop
    if junk >= 0:
        yield junk, NO_FRAME, pos, 0


def _each(view: memoryview, spans: list[tuple[int, int]]) -> list[int]:
    """The CRC-32 of each ``view[start:stop]`` of ``spans``, one after another."""
    crc32 = zlib.crc32
    return [crc32(view[a:b]) for a, b in spans]


def walk(data: bytes, pos: int = 0,
         checksums: Callable[[memoryview, list[tuple[int, int]]], list[int]] | None = None,
         ) -> tuple[list[tuple[int, int, int, bool]], int]:
    """The frames of ``data`` from ``pos``, each payload's checksum checked.

    Args:
        data: bytes of an event log (from a frame boundary, or from anywhere).
        pos: where to start.
        checksums: computes the CRC-32 of each ``view[start:stop]`` of a list of spans
            (default: one after another); a reader of big blocks passes one that
            spreads them over threads.

    Returns:
        ``(frames, stop)``: ``frames`` as :func:`frame_heads` walks them, each
        ``(start, type, stop, sound)`` where ``sound`` says whether the payload passed
        its checksum (False for bytes that are no frame, type ``NO_FRAME``); ``stop``:
        where the first byte not walked lies, the start of a torn tail (``len(data)``
        when there is none). A last frame whose payload fails its checksum counts as
        torn (not written yet, as after a ``kill -9``), not as damaged.
    """
    heads = list(frame_heads(data, pos))
    hsize = F.FRAME_HEADER_SIZE
    sums = (checksums or _each)(memoryview(data), [(p + hsize, stop) for p, kind, stop, _crc in heads if kind >= 0])
    out: list[tuple[int, int, int, bool]] = []
    i = 0
    for p, kind, stop, crc in heads:
        if kind >= 0:
            out.append((p, kind, stop, sums[i] == crc))
            i += 1
        else:
            out.append((p, kind, stop, False))
    stop = out[-1][2] if out else pos
    if out and out[-1][1] >= 0 and not out[-1][3] and stop == len(data):
        stop = out.pop()[0]
    return out, stop


def frames(data: bytes, pos: int = 0) -> Iterator[tuple[int, memoryview]]:
    """``(type, payload)`` of each whole frame of ``data`` from ``pos`` whose checksums
    hold, in order (a view of ``data``); everything else is passed over as
    :func:`frame_heads` walks it. ``pos`` may lie inside a frame (the end of a log)."""
    view = memoryview(data)
    hsize = F.FRAME_HEADER_SIZE
    crc32 = zlib.crc32
    for p, kind, stop, crc in frame_heads(data, pos):
        if kind >= 0:
            payload = view[p + hsize : stop]
            if crc32(payload) == crc:
                yield kind, payload


def session_at(data: bytes, pos: int) -> dict | None:
    """The session header (a dict) framed at ``data[pos:]``, when the frame there is
    whole, a SESSION frame, passes both checksums and holds a JSON object; else None."""
    for p, kind, stop, crc in frame_heads(data, pos):
        if p != pos or kind != F.FRAME_SESSION:
            return None
        payload = memoryview(data)[p + F.FRAME_HEADER_SIZE : stop]
        if zlib.crc32(payload) != crc:
            return None
        try:
            obj = F.loads_json(payload)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None
    return None


def read_header(path: str, limit: int = 1 << 16) -> dict:
    """The session header of the event log ``path``, reading at most ``limit`` bytes;
    {} if none (unreadable, not an event log, or of a newer format).

    The header is written twice (``DOUBLED_FRAMES``): a damaged first copy is read
    from the second; a damaged file header is read past when the session header names
    a format this reader knows (:func:`readable_version`'s rule, as ``LogFile``'s)."""
    try:
        with open_regular(path) as f:
            data = f.read(limit)
    except OSError:
        return {}
    if len(data) < F.FILE_HEADER.size:
        return {}
    pos = F.FILE_HEADER.size
    head = session_at(data, pos)
    if head is None:  # the second copy: after the first (its header sound), or at the next magic
        first = next(frame_heads(data, pos), None)  # the first copy, or bytes that are no frame
        if first is not None:
            head = session_at(data, first[2])
    if head is None:
        return {}
    return head if file_version(data) is not None or named_version(head) is not None else {}
