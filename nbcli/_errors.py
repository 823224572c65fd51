"""The error boundary of ``nb``: what an exception that reaches it prints.

Every command and the fast ``nb ls`` path hand an error they do not handle themselves to
:func:`report`: one ``error: ...`` line, its details and a hint on stderr, never a
traceback (``nb --debug`` shows that). Its own module so that the command tree
(:mod:`nbcli._tree`) and the entry point (:mod:`nbcli.app`) both use it without
importing each other.
"""

from __future__ import annotations

from nblog import AmbiguousRunError, FormatVersionError, NbError, RunNotFoundError

from ._output import error


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
