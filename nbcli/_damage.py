"""What ``nb`` does when a reader skips damaged bytes of an event log: the one rule of
every command.

The reader library issues a :class:`nblog.DamagedLogWarning` for each damaged range it
reads (which rank, file, bytes and, where known, how many points). While a command runs,
:func:`watching` prints each one on stderr as a ``warning:`` line as it is read, and
counts those that lost data. A command whose output left damaged data out exits with
:data:`EXIT_DAMAGED` (3) after its output is complete, unless ``--allow-damaged`` was
given (:func:`allow`, the option's callback); a damaged copy of a frame written twice,
whose other copy was read, is reported and costs nothing.

``nb tui`` holds the lines while Textual owns the terminal (:func:`hold`) and prints them
when it is restored. Standard library only at import; one command per process (the state
is reset by :func:`watching`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from nblog import DamagedLogWarning
from nblog.reader.lowlevel import plural

from ._output import error, warn

#: The exit status of a command that left damaged data out (``man nb``, EXIT STATUS).
EXIT_DAMAGED = 3


class _State:
    allowed = False  # --allow-damaged
    lost = 0  # warnings of damage that lost data
    held: list[str] | None = None  # lines kept while a full-screen app owns the terminal
    listeners: list[Callable[[str], None]] = []  # told each line (from the thread that read it)


def allow(value: bool) -> bool:
    """The ``--allow-damaged`` callback: a command exits 0 despite damage (still reported)."""
    if value:
        _State.allowed = True
    return value


def hold() -> None:
    """Keep the warnings instead of printing them, until :func:`release` (``nb tui``)."""
    if _State.held is None:
        _State.held = []


def listen(callback: Callable[[str], None]) -> None:
    """Call ``callback(line)`` for each damaged range reported from now on, in the thread
    that read it, and at once for those held so far (``nb tui`` shows each in a
    notification)."""
    _State.listeners.append(callback)
    for line in list(_State.held or ()):
        callback(line)


def release() -> None:
    """Print the warnings kept since :func:`hold`."""
    held, _State.held = _State.held, None
    for line in held or ():
        warn(line)


def failed() -> bool:
    """Whether damaged data was left out and ``--allow-damaged`` was not given."""
    return _State.lost > 0 and not _State.allowed


def lost() -> bool:
    """Whether damaged data was left out so far (``--allow-damaged`` or not)."""
    return _State.lost > 0


def conclude() -> None:
    """The closing ``error:`` line of a command that exits :data:`EXIT_DAMAGED`."""
    error(f"damaged bytes of {plural(_State.lost, 'event-log range')} were skipped "
          "(warnings above): the output lacks what they held",
          "--allow-damaged exits 0 all the same; `nb show RUN` lists each rank's damaged bytes")


@contextmanager
def watching() -> Iterator[None]:
    """Around one command: print every :class:`~nblog.DamagedLogWarning` on stderr (each
    range once), count those that lost data; other warnings are shown as usual."""
    _State.allowed, _State.lost, _State.held, _State.listeners = False, 0, None, []
    with warnings.catch_warnings():  # restores the filters and showwarning after
        warnings.simplefilter("always", DamagedLogWarning)
        seen: set[tuple[str, int, int, int | None]] = set()  # each range once (a second reader reads it again)
        lost: set[tuple[str, int, int]] = set()
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: object = None, line: str | None = None) -> None:
            if not isinstance(message, DamagedLogWarning):
                shown(message, category, filename, lineno, file, line)  # type: ignore[arg-type]
                return
            key = (message.path, message.start, message.stop, message.points)
            if key in seen:
                return
            seen.add(key)
            if message.lost and key[:3] not in lost:
                lost.add(key[:3])
                _State.lost += 1
            text = str(message).removeprefix("nblog: ")
            if _State.held is not None:
                _State.held.append(text)
            else:
                warn(text)
            for callback in _State.listeners:
                callback(text)

        warnings.showwarning = show
        yield
