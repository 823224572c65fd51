"""Exceptions raised by nblog.

::

    NbError                      base of everything nblog raises on purpose
    ├── RunNotFoundError         (also LookupError) no run matches an id, prefix or path
    ├── AmbiguousRunError        (also LookupError) a prefix matches several runs; .candidates
    ├── FormatVersionError       a file was written by a newer format version; .path, .version
    ├── BlobError                (also ValueError) a media blob is missing, torn or corrupt; .path, .offset
    └── StrictModeError          (also ValueError) bad data with NB_STRICT=1; .tag, .value

    DamagedLogWarning            (a UserWarning) a reader skipped damaged bytes of an event log;
                                 .path, .rank, .session, .start, .stop, .frame, .points, .lost

``init`` also raises the built-in ``ValueError`` (bad names, bad launcher variables,
bad resume value), ``FileExistsError`` (an explicit run id that exists without
``resume="auto"``), ``FileNotFoundError`` (``resume="must"`` on a missing run) and
``PermissionError`` / ``OSError`` (unwritable root), each naming the argument or path.
"""

from __future__ import annotations


class NbError(Exception):
    """Base class of the exceptions nblog raises on purpose."""


class RunNotFoundError(NbError, LookupError):
    """No run matches ``query``; ``searched`` is the folder that was looked in."""

    def __init__(self, query: str, searched: str):
        self.query = query
        self.searched = searched
        super().__init__(f"no run matches {query!r} (looked in {searched})")


class AmbiguousRunError(NbError, LookupError):
    """A run id prefix matches several runs; ``candidates`` lists their ids."""

    def __init__(self, query: str, candidates: list[str]):
        self.query = query
        self.candidates = candidates
        super().__init__(
            f"{query!r} matches {len(candidates)} runs: {', '.join(candidates[:10])}"
            + (" ..." if len(candidates) > 10 else "")
        )


class FormatVersionError(NbError):
    """A file was written in a newer format version than this reader knows."""

    def __init__(self, path: str, version: int, known: int):
        self.path = path
        self.version = version
        self.known = known
        super().__init__(
            f"{path} uses event-log format version {version}; this nblog reads up to "
            f"version {known}: upgrade nblog (pip install -U nblog) to read it"
        )


class StrictModeError(NbError, ValueError):
    """Bad data passed to a logging call while ``NB_STRICT=1``."""

    def __init__(self, message: str, tag: object = None, value: object = None):
        self.tag = tag
        self.value = value
        super().__init__(message)


class BlobError(NbError, ValueError):
    """A referenced media blob is missing, torn or fails its checksum; ``path`` is the
    media pack, ``offset`` the blob's offset in it (bytes). Raised by
    ``RunReader.media_bytes`` and ``RunReader.image``: never wrong bytes."""

    def __init__(self, message: str, path: str = "", offset: int = -1):
        self.path = path
        self.offset = offset
        super().__init__(message)


class DamagedLogWarning(UserWarning):
    """A reader skipped damaged bytes of an event log (a frame failing its checksum, bytes
    that are no frame, a frame that does not decode): issued once per damaged range, by
    every reader (``RunReader``, ``LiveRun``, ``Follower``, ``Watcher``, export), when it
    reads the range. ``nb`` prints it and exits with status 3 unless ``--allow-damaged``.

    Attributes:
        path: the event log. rank, session: whose log it is (None: the name says no).
        start, stop: the damaged bytes, ``[start, stop)`` offsets in the file.
        frame: what the damaged bytes held, by their frame header ("points", "tag
            definitions", "text", ...); None when the header itself is damaged.
        points: points left out, where known (a points frame's count; the points whose
            tag names were lost); None: unknown.
        lost: False when nothing was lost (a damaged copy of a frame written twice, whose
            other copy was read; a damaged file header, the format read from the session
            header): reported all the same.
    """

    def __init__(self, message: str, *, path: str, rank: int | None, session: int | None, start: int,
                 stop: int, frame: str | None, points: int | None, lost: bool):
        super().__init__(message)
        self.path = path
        self.rank = rank
        self.session = session
        self.start = start
        self.stop = stop
        self.frame = frame
        self.points = points
        self.lost = lost
