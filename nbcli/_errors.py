"""The error boundary of ``nb``: what an exception that reaches it prints, and what a
closed standard output means.

Every command and the fast ``nb ls`` path hand an error they do not handle themselves to
:func:`report`: one ``error: ...`` line, its details and a hint on stderr, never a
traceback (``nb --debug`` shows that). Its own module so that the command tree
(:mod:`nbcli._tree`) and the entry point (:mod:`nbcli.app`) both use it without
importing each other.

A closed standard output (``nb ls | head -1``: the reader went away) is one rule for
every command, applied here: no message, exit status :data:`CLOSED_PIPE_STATUS` (1).
Not 0, because nb did not deliver all it had to write: a script that pipes ``nb export
RUN -o -`` into a consumer that dies early must not read success, and ``set -o
pipefail`` sees the same as from ``cat``/``yes`` killed by SIGPIPE (141); and it is
what Click (under Typer) already does for ``--help`` and usage output. It is found
where it happens (a write, or Polars streaming into stdout) or when stdout is flushed
at the end (:func:`finish_stdout`), never as Python's "Exception ignored ...
BrokenPipeError" at exit (status 120). A standard output closed before nb started
(``nb ls >&-``: Python then has no ``sys.stdout``) is the same rule
(:func:`stand_in_for_closed_stdout`): what nb writes there is lost, so exit 1; a command
that wrote nothing there (``nb export RUN -o FILE >&-``) keeps its status.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any

from nblog import AmbiguousRunError, FormatVersionError, NbError, RunNotFoundError

from ._output import error

#: The exit status of any command whose standard output was closed by its reader.
CLOSED_PIPE_STATUS = 1


def _hint(exc: BaseException) -> tuple[str, list[str], str | None]:
    """``(message, detail lines, hint)`` for an exception that reached the boundary."""
    if isinstance(exc, AmbiguousRunError):
        return (
            f"{exc.query!r} matches {len(exc.candidates)} runs:",
            list(exc.candidates),
            "give more characters of the id, or PROJECT/RUN_ID",
        )
    if isinstance(exc, RunNotFoundError):
        return (
            f"no run matches {exc.query!r} (looked in {exc.searched})",
            [],
            "`nb ls` lists the runs under a root; pass --root DIR or set NB_DIR to look elsewhere",
        )
    if isinstance(exc, FormatVersionError):
        return str(exc), [], "upgrade nblog, the distribution of nb (pip install -U nblog), to read this run"
    if isinstance(exc, NbError):
        return str(exc), [], None
    if isinstance(exc, PermissionError):
        return str(exc), [], "check the permissions of that path"
    if isinstance(exc, OSError):
        return str(exc), [], None
    return (
        f"internal error: {type(exc).__name__}: {exc}",
        [],
        "run again with `nb --debug ...` for the traceback, and report it",
    )


def report(exc: BaseException) -> None:
    """Print ``error: …``, its details and a hint for ``exc`` on stderr."""
    message, details, hint = _hint(exc)
    error(message, hint, details)


def is_closed_pipe(exc: BaseException) -> bool:
    """Whether ``exc`` says that the reader of a pipe went away (EPIPE): an OSError with
    that errno, or Polars' error for it ("Broken pipe (os error 32)", an OSError
    without errno or a ComputeError) while it streams into stdout."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc.errno == errno.EPIPE
    if not isinstance(exc, OSError) and not type(exc).__module__.startswith("polars"):
        return False
    text = str(exc)
    return f"os error {errno.EPIPE})" in text or "Broken pipe" in text


def closed_pipe_exit() -> int:
    """Point stdout at /dev/null, so that no later flush (at exit) fails again, and
    return :data:`CLOSED_PIPE_STATUS`. Prints nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # no real file behind sys.stdout (a test's capture)
        pass
    return CLOSED_PIPE_STATUS


class _Discarded(io.FileIO):
    """``/dev/null`` on file descriptor 1, counting the bytes written to it (lost)."""

    lost = 0
    stand_in: io.TextIOWrapper | None = None  # the stdout over it, once made

    def write(self, b: Any) -> int:
        n = super().write(b) or 0
        type(self).lost += n
        return n


def stand_in_for_closed_stdout() -> None:
    """Where standard output was closed before nb started (``sys.stdout`` is None), put
    ``/dev/null`` on file descriptor 1 and a stdout over it that counts what is written:
    no later open file takes descriptor 1 (a print would land in it), no write fails, and
    :func:`finish_stdout` exits :data:`CLOSED_PIPE_STATUS` if anything was lost. Does
    nothing when stdout is open."""
    if sys.stdout is not None:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    if devnull != 1:
        os.dup2(devnull, 1)
        os.close(devnull)
    stand_in = io.TextIOWrapper(io.BufferedWriter(_Discarded(1, "w", closefd=False)), encoding="utf-8")
    sys.stdout = _Discarded.stand_in = stand_in


def stdout_closed_at_start() -> bool:
    """Whether stdout is the stand-in of :func:`stand_in_for_closed_stdout`: a command
    whose output is stdout (``nb export RUN -o -``) and that hands its file to a writer
    of its own counts it lost with :func:`lose_stdout`."""
    return _Discarded.stand_in is not None and sys.stdout is _Discarded.stand_in


def lose_stdout() -> None:
    """Count the output of a command whose stdout was closed before it started as lost
    (exit :data:`CLOSED_PIPE_STATUS`): for writers that bypass the counting stdout."""
    _Discarded.lost += 1


def finish_stdout(code: int) -> int:
    """Flush stdout at the end of a command that exits with ``code``: ``code``, or
    :data:`CLOSED_PIPE_STATUS` when the flush finds the pipe closed, or output went to a
    stdout closed before nb started, and ``code`` is 0 (a failure's own status is kept).
    Output still buffered is lost either way."""
    try:
        sys.stdout.flush()
    except Exception as exc:
        if not is_closed_pipe(exc):
            raise
        status = closed_pipe_exit()
        return code or status
    if _Discarded.lost:
        return code or CLOSED_PIPE_STATUS
    return code
