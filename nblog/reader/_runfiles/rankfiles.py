"""A run's event logs, rank by rank and session by session: the one place readers find,
order and read them.

- :func:`event_files` lists a run folder's ``events.r<rank>.s<session>.log`` files (the
  names ``man nb-format`` gives them); :func:`ranks_with_logs` the ranks that wrote one.
- :class:`RankFiles` holds the :class:`~nblog.reader._file.logfile.LogFile` of each session of
  each rank a reader asked about, in session order, and picks up new sessions (a resume)
  and new ranks when asked to :meth:`RankFiles.scan`. :meth:`RankFiles.read_on` is the
  incremental poll of a file being written: it polls until everything appended so far
  is parsed (a window at a time for windowed readers), leaving a torn or growing tail
  for the next call (truncation is kept apart from corruption by ``LogFile``).
- :func:`hide_thresholds` is the hiding rule (``man nb-format``, HIDING RULE), per rank:
  a point of session *s* at a step >= the first step of any later session of that rank
  is hidden. :func:`active_offsets`: seconds of a rank's earlier sessions.
- :meth:`RankFiles.machines`: the machines that sampled system metrics.
- :func:`follow`: the one "poll every interval until a timeout" loop of ``nb tail -f``,
  ``nb logs -f`` and ``nb watch``.

:class:`~nblog.reader.RunReader` (whole frames), :class:`~nblog.reader.LiveRun` (live
series) and :class:`~nblog.reader.Follower` (the last N records, following) are built
on this module and keep only what is theirs. Standard library only at import.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

from ...format import _format as F
from ...format._filenames import parse_event_file_name
from ...format._walk import read_header
from .._file.logfile import Delta, LogFile

#: Bytes of a file read (and held) per poll by windowed readers (``nb tail``, the TUI's
#: events): memory bounded by a window, not by the log.
WINDOW = 4 << 20

#: Record kind name ("scalar", "timer", "system", "text", "media") -> its code in the
#: format (the inverse of ``KIND_NAMES`` of the format).
KIND_CODES: dict[str, int] = {name: code for code, name in F.KIND_NAMES.items()}


def event_files(run_dir: str | os.PathLike) -> dict[tuple[int, int], str]:
    """The event logs of a run folder: ``(rank, session)`` -> path; ``{}`` when the
    folder cannot be listed (not there yet, deleted, unreadable)."""
    run_dir = os.fspath(run_dir)
    try:
        names = os.listdir(run_dir)
    except OSError:
        return {}
    out = {}
    for name in names:
        rs = parse_event_file_name(name)
        if rs is not None:
            out[rs] = os.path.join(run_dir, name)
    return out


def ranks_with_logs(run_dir: str | os.PathLike) -> list[int]:
    """The ranks with at least one event log in ``run_dir``, ascending."""
    return sorted({r for r, _s in event_files(run_dir)})


def hide_thresholds(sessions: list[tuple[int, LogFile]]) -> dict[int, int | None]:
    """The hiding rule (``man nb-format``, HIDING RULE) for one rank's sessions, in
    session order.

    Returns, per session number, the smallest first step of any later session: points
    of that session at a step >= it are hidden. None: the session hides nothing.
    """
    out: dict[int, int | None] = {}
    best: int | None = None
    for s, lf in reversed(sessions):
        out[s] = best
        if lf.first_step is not None:
            best = lf.first_step if best is None else min(best, lf.first_step)
    return out


def active_offsets(sessions: list[tuple[int, LogFile]]) -> dict[int, float]:
    """Per session number: seconds that one rank's earlier sessions ran (active time
    leaves out the queue gap between a preempted session and its restart)."""
    out, total = {}, 0.0
    for s, lf in sessions:
        out[s] = total
        total += lf.max_ms / 1000.0
    return out


def read_on(lf: LogFile) -> Iterator[Delta]:
    """Poll ``lf`` until everything appended so far is parsed, yielding each poll's
    :class:`~nblog.reader._file.logfile.Delta` (one read, or one window, each). Stops at a
    torn or growing tail (parsed by a later call) and at a file that cannot be read.

    Raises:
        FormatVersionError: the file was written by a newer format version.
    """
    while True:
        before = lf.offset
        yield lf.poll()
        if lf.offset == before or lf.size - lf.offset <= lf.pending_bytes:
            return


def read_all(lf: LogFile) -> LogFile:
    """Poll ``lf`` to the end of what is written (:func:`read_on`); returns ``lf``."""
    for _delta in read_on(lf):
        pass
    return lf


class RankFiles:
    """The session files of the ranks of one run folder that a reader opened.

    Args:
        run_dir: the run folder (it may not exist yet, or be deleted while read).
        keep: the ``keep`` of each LogFile opened (False: records are not kept on it).
        window: the ``window`` of each LogFile opened (None: the default read size).

    Files are opened by :meth:`open_rank` / :meth:`open_new`, never polled here: the
    reader polls them (:func:`read_on`). Not thread-safe; readers lock around it.
    """

    def __init__(self, run_dir: str | os.PathLike, *, keep: bool = True, window: int | None = None):
        self.dir = os.fspath(run_dir)
        self.keep = keep
        self.window = window
        self.listing: dict[tuple[int, int], str] = {}
        self._by_rank: dict[int, dict[int, str]] = {}  # the listing by rank (open_new of 8,192 ranks)
        self.gone = False  # the folder could not be listed at the last scan, and is not a folder
        self._files: dict[int, dict[int, LogFile]] = {}
        self._headers: dict[tuple[int, int], dict] = {}

    def scan(self, replace: bool = False) -> bool:
        """List the folder again: new session files of any rank join :attr:`listing`
        (a file that disappeared stays listed, unless ``replace``: then the listing is
        what the folder holds now, empty when it cannot be listed). Returns True if a
        file is new."""
        if replace:
            self.listing = {}
            self._by_rank = {}
        try:
            names = os.listdir(self.dir)
        except OSError:
            self.gone = not os.path.isdir(self.dir)
            return False
        self.gone = False
        self.names = names  # every name of the last listing (nb watch's hang rule looks for dumps in it)
        new = False
        for name in names:
            rs = parse_event_file_name(name)
            if rs is not None and rs not in self.listing:
                self.listing[rs] = self._by_rank.setdefault(rs[0], {})[rs[1]] = os.path.join(self.dir, name)
                new = True
        return new

    def ranks(self) -> list[int]:
        """Ranks listed at the last :meth:`scan`, ascending."""
        return sorted({r for r, _s in self.listing})

    def listed(self, rank: int) -> list[int]:
        """The sessions of ``rank`` listed at the last :meth:`scan`, ascending."""
        return sorted(self._by_rank.get(rank) or ())

    def opened(self) -> list[int]:
        """Ranks opened so far, ascending."""
        return sorted(self._files)

    def is_open(self, rank: int) -> bool:
        return rank in self._files

    def _new_file(self, path: str) -> LogFile:
        if self.window is None:
            return LogFile(path, keep=self.keep)
        return LogFile(path, keep=self.keep, window=self.window)

    def open_new(self, rank: int) -> list[tuple[int, LogFile]]:
        """Open the listed session files of ``rank`` not opened yet (the rank counts as
        opened from now on); returns them, in session order, unread."""
        files = self._files.setdefault(rank, {})
        new = []
        for s, path in sorted((self._by_rank.get(rank) or {}).items()):
            if s not in files:
                lf = files[s] = self._new_file(path)
                new.append((s, lf))
        return new

    def reopen(self, rank: int, session: int) -> LogFile:
        """A fresh LogFile for a session already opened (read again from its start)."""
        lf = self._files[rank][session] = self._new_file(self._files[rank][session].path)
        return lf

    def sessions(self, rank: int) -> list[tuple[int, LogFile]]:
        """``(session, LogFile)`` of the opened files of ``rank``, in session order."""
        return sorted((self._files.get(rank) or {}).items())

    def thresholds(self, rank: int) -> dict[int, int | None]:
        """:func:`hide_thresholds` of ``rank``'s opened sessions."""
        return hide_thresholds(self.sessions(rank))

    def offsets(self, rank: int) -> dict[int, float]:
        """:func:`active_offsets` of ``rank``'s opened sessions."""
        return active_offsets(self.sessions(rank))

    def header(self, rank: int, session: int) -> dict:
        """The session header of a listed file, read once without opening the rank
        (``{}`` until it can be read)."""
        key = (rank, session)
        if not self._headers.get(key):
            path = self.listing.get(key)
            self._headers[key] = read_header(path) if path else {}
        return self._headers[key]

    def machines(self, load: Callable[[int], list[tuple[int, LogFile]]],
                 needs_system: bool = False) -> list[dict]:
        """The machines that sampled system metrics: one dict per (hostname, sampling
        rank: local rank 0 of each machine) with the machine description it recorded
        (cpu_count, memory_total_bytes, gpus, ...) once read.

        Args:
            load: reads a rank and returns its :meth:`sessions` (the reader's own loading).
            needs_system: leave out a sampling rank that has no system-metric tag.
        """
        out: dict[tuple[str, int], dict] = {}
        for r, s in sorted(self.listing):
            head = self.header(r, s)
            if head.get("local_rank") != 0:
                continue
            files = load(r)
            if needs_system and not any(k == F.KIND_SYSTEM for _s, lf in files for k, _n in lf.tags.values()):
                continue
            host = head.get("host") or "?"
            entry = out.setdefault((host, r), {"hostname": host, "rank": r})
            for _s, lf in files:
                if lf.machine:
                    entry.update({k: v for k, v in lf.machine.items() if k != "hostname"})
        return list(out.values())


def follow(
    poll: Callable[[], list],
    interval: float,
    *,
    timeout: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    every: bool = False,
    done: Callable[[], bool] | None = None,
) -> Iterator[list]:
    """Call ``poll`` every ``interval`` seconds and yield what it returns (only
    non-empty batches, unless ``every``), until ``timeout`` seconds have passed (None:
    never) or ``done()`` is true after a poll. ``sleep`` and ``clock`` (monotonic
    seconds) are injectable for tests."""
    deadline = None if timeout is None else clock() + timeout
    while True:
        batch = poll()
        if batch or every:
            yield batch
        if done is not None and done():
            return
        if deadline is not None:
            left = deadline - clock()
            if left <= 0:
                return
            sleep(min(interval, left))
        else:
            sleep(interval)


__all__ = ["KIND_CODES", "WINDOW", "RankFiles", "active_offsets", "event_files", "follow", "hide_thresholds",
           "ranks_with_logs", "read_all", "read_on"]
