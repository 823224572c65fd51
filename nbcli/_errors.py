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
BrokenPipeError" at exit (status 120).
"""

from __future__ import annotations

import errno
import os
import sys

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


def finish_stdout(code: int) -> int:
    """Flush stdout at the end of a command that exits with ``code``: ``code``, or
    :data:`CLOSED_PIPE_STATUS` when the flush finds the pipe closed and ``code`` is 0
    (a failure's own status is kept). Output still buffered is lost either way."""
    try:
        sys.stdout.flush()
    except Exception as exc:
        if not is_closed_pipe(exc):
            raise
        status = closed_pipe_exit()
        return code or status
    return code
