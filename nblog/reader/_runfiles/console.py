"""Reading the console files of a run: the engine of ``nb logs``.

A console file (``console.r<rank>.s<session>.log``, written by :mod:`nblog.write._console_tee`,
format in nb-format(5)) is a sequence of lines ``<unix time>\\t<step or ->\\t<o|e|!>\\t<text>\\n``.
Only lines ending in a newline count: a last line without one is "not written yet"
(or cut by a ``kill -9`` of the helper) and is left for the next poll. Lines that do
not parse are skipped and counted (:attr:`ConsoleLogs.skipped`).

:class:`ConsoleLogs` lists a run's console files (of some ranks, or all), reads them
whole or their last N lines (read backwards from the end in blocks, so memory is
bounded by N lines, not by the files), merges the ranks by time, filters by a regular
expression, and follows new lines (:meth:`ConsoleLogs.follow`, with ``sleep`` and
``clock`` injectable, as :meth:`nblog.reader._views.tail.Follower.follow`).

Standard library only. Files are read, never written.
"""

from __future__ import annotations

import heapq
import os
import re
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from ... import _log as log
from ..._errors import RunNotFoundError
from ...format._filenames import parse_console_file_name
from ...format._runfile import open_regular
from .locate import resolve_run
from .rankfiles import follow

_BLOCK = 1 << 16  # bytes read at a time
_LONGEST = 1 << 20  # a longer line (nb writes at most 64 KiB and a stamp) is skipped, counted
_STREAMS = {b"o": "stdout", b"e": "stderr", b"!": "nb"}


@dataclass(frozen=True)
class ConsoleLine:
    """One stamped line of a rank's console.

    ``wall_time`` is unix seconds (millisecond resolution) when the helper read it;
    ``step`` the run's current step then (None before the first one); ``stream`` is
    ``"stdout"``, ``"stderr"`` or ``"nb"`` (nb's own notes, such as lines dropped);
    ``text`` the line without its newline, decoded as UTF-8 with invalid bytes replaced.
    """

    rank: int
    session: int
    wall_time: float
    step: int | None
    stream: str
    text: str

    def to_json(self) -> dict:
        """A JSON-able dict with stable keys (``step`` null before the first step)."""
        return {"rank": self.rank, "session": self.session, "wall_time": self.wall_time,
                "step": self.step, "stream": self.stream, "text": self.text}


def parse_line(raw: bytes, rank: int, session: int) -> ConsoleLine | None:
    """One line (without its newline) of a console file, or None if malformed."""
    parts = raw.split(b"\t", 3)
    if len(parts) != 4:
        return None
    t, step, stream, text = parts
    name = _STREAMS.get(stream)
    if name is None:
        return None
    try:
        wall = float(t)
        s = None if step == b"-" else int(step)
    except ValueError:
        return None
    if s is not None and s < 0 or wall != wall:
        return None
    return ConsoleLine(rank, session, wall, s, name, text.decode("utf-8", "replace"))


def _no_lines() -> Generator[bytes, None, None]:
    """No lines, as a generator: callers close what :meth:`_File.backward` gives."""
    yield from ()


class _File:
    """One console file: its rank, session, and how far it has been read."""

    def __init__(self, rank: int, session: int, path: str):
        self.rank = rank
        self.session = session
        self.path = path
        self.offset = 0  # bytes consumed: always just after a newline
        self._warned = False

    def _warn(self, err: OSError) -> None:
        if not self._warned:
            self._warned = True
            log.warning("nblog: cannot read %s: %s; its lines are left out", self.path, err.strerror or err)

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except OSError:
            return 0

    def forward(self, stop: int | None = None) -> Iterator[bytes]:
        """Whole lines from ``offset`` to ``stop`` (default: the size now), advancing
        ``offset`` past each line yielded. The file is opened for each block read, so
        merging the files of thousands of ranks holds no descriptor between blocks."""
        end = self.size() if stop is None else stop
        carry = b""
        pos = self.offset
        skipping = False  # inside a line too long to be one of nb's
        while pos < end:
            try:
                with open_regular(self.path) as f:
                    f.seek(pos)
                    block = f.read(min(_BLOCK, end - pos))
            except FileNotFoundError:
                return
            except OSError as err:  # a FIFO or device under the name, no permission, EMFILE
                self._warn(err)
                return
            if not block:
                return
            pos += len(block)
            lines = (carry + block).split(b"\n")
            carry = lines.pop()
            if skipping and lines:
                self.offset += len(lines[0]) + 1
                lines[0] = b""  # malformed: counted by the caller
                skipping = False
                yield lines.pop(0)
            for line in lines:
                self.offset += len(line) + 1
                yield line
            if len(carry) > _LONGEST:
                self.offset += len(carry)
                carry = b""
                skipping = True

    def backward(self) -> tuple[Generator[bytes, None, None], int]:
        """Whole lines from the end back to the start (newest first), and the offset
        just after the last whole line (where following should start)."""
        try:
            f = open_regular(self.path)
        except FileNotFoundError:
            return _no_lines(), 0
        except OSError as err:
            self._warn(err)
            return _no_lines(), 0
        size = os.fstat(f.fileno()).st_size
        # the end of the last whole line
        end = size
        while end > 0:
            start = max(0, end - _BLOCK)
            f.seek(start)
            block = f.read(end - start)
            i = block.rfind(b"\n")
            if i >= 0:
                end = start + i + 1
                break
            end = start
        return self._back(f, end), end

    @staticmethod
    def _back(f: BinaryIO, end: int) -> Generator[bytes, None, None]:
        with f:
            carry = b""
            pos = end - 1  # leave out the newline that ends the last line
            skipping = False  # inside a line too long to be one of nb's
            while pos > 0:
                start = max(0, pos - _BLOCK)
                f.seek(start)
                lines = (f.read(pos - start) + carry).split(b"\n")
                carry = lines[0]
                if skipping and len(lines) > 1:
                    lines[-1] = b""  # the head of the long line: malformed, counted
                    skipping = False
                yield from reversed(lines[1:])
                if len(carry) > _LONGEST:
                    carry = b""
                    skipping = True
                pos = start
            if end > 0:
                yield carry


class ConsoleLogs:
    """The console files of a run, of some ranks or all.

    Args:
        run: a run id, a unique prefix, ``project/run id`` or a path to a run folder;
            it may not exist yet (nothing is found until it does).
        root: where ids are looked up (default ``$NB_DIR``, else ``./nb_runs``).
        ranks: the ranks to read (None: every rank).
        grep: only lines whose text matches this regular expression (``re.search``).

    Not thread-safe. Raises ``AmbiguousRunError`` (from any method) when ``run``
    matches several runs, and ``re.error`` at construction for a bad ``grep``.
    """

    def __init__(self, run: str | os.PathLike, root: str | os.PathLike | None = None, *,
                 ranks: Iterable[int] | None = None, grep: str | None = None):
        self.query = run
        self.root = root
        self.ranks = None if ranks is None else set(ranks)
        self._re = re.compile(grep) if grep is not None else None
        self.dir: str | None = None
        self._files: dict[tuple[int, int], _File] = {}
        self.skipped = 0  # malformed lines

    def resolve(self) -> str | None:
        """The run folder, or None while no run matches."""
        if self.dir is None:
            try:
                self.dir = resolve_run(self.query, self.root)
            except RunNotFoundError:
                return None
        return self.dir

    def all_ranks(self) -> list[int]:
        """The ranks with a console file in the run, of any rank (after a discovery)."""
        if self.resolve() is None:
            return []
        try:
            names = os.listdir(self.dir)
        except OSError:
            return []
        return sorted({rs[0] for rs in map(parse_console_file_name, names) if rs is not None})

    def files(self) -> list[tuple[int, int]]:
        """``(rank, session)`` of the console files found so far, sorted (discovers new ones)."""
        self._discover()
        return sorted(self._files)

    def read(self, last: int | None = None) -> Iterator[ConsoleLine]:
        """The lines written so far, merged by time across files (oldest first); with
        ``last``, only the last N (after ``grep``). Following (:meth:`poll`) goes on
        from where this stopped: consume the iterator before polling. Memory: N lines
        and a block, or a block per file."""
        self._discover()
        files = [self._files[k] for k in sorted(self._files)]
        if last is None:
            streams = [self._parsed(f, f.forward()) for f in files]
            return heapq.merge(*streams, key=_key)
        if last <= 0:
            for f in files:
                f.offset = f.backward()[1]
            return iter(())
        picked = []
        for f in files:
            lines, end = f.backward()
            f.offset = end
            mine: list[ConsoleLine] = []
            for line in self._parsed(f, lines):
                mine.append(line)
                if len(mine) >= last:
                    break
            lines.close()  # its file: one open at a time, however many ranks
            mine.reverse()
            picked.append(mine)
        out = deque(heapq.merge(*picked, key=_key), maxlen=last)
        return iter(out)

    def poll(self) -> list[ConsoleLine]:
        """Whole lines appended since the last read or poll, merged by time; new files
        (a new rank, a resumed session) are read from their start."""
        if self.resolve() is None:
            return []
        self._discover()
        batches = []
        for k in sorted(self._files):
            f = self._files[k]
            if f.size() > f.offset:
                batches.append(list(self._parsed(f, f.forward())))
        return list(heapq.merge(*batches, key=_key))

    def follow(self, interval: float = 0.25, *, timeout: float | None = None,
               sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.monotonic) -> Iterator[list[ConsoleLine]]:
        """Yield each non-empty batch of new lines, polling every ``interval`` seconds,
        until ``timeout`` seconds have passed (None: forever)."""
        yield from follow(self.poll, interval, timeout=timeout, sleep=sleep, clock=clock)

    def _discover(self) -> None:
        run_dir = self.resolve()
        if run_dir is None:
            return
        try:
            names = os.listdir(run_dir)
        except OSError:
            return
        for name in names:
            rs = parse_console_file_name(name)
            if rs is None or rs in self._files or (self.ranks is not None and rs[0] not in self.ranks):
                continue
            self._files[rs] = _File(rs[0], rs[1], os.path.join(run_dir, name))

    def _parsed(self, f: _File, raw: Iterable[bytes]) -> Iterator[ConsoleLine]:
        match = self._re.search if self._re is not None else None
        for line in raw:
            parsed = parse_line(line, f.rank, f.session)
            if parsed is None:
                self.skipped += 1
                continue
            if match is None or match(parsed.text):
                yield parsed


def _key(line: ConsoleLine) -> float:
    return line.wall_time
