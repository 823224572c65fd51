"""The ``nb`` entry point and its single error boundary.

Exit codes: 0 success; 1 a runtime failure (no such run, ambiguous prefix, unreadable
file, ``--latest`` found nothing, ...); 2 a usage error (unknown option, bad value).
Library errors become ``error: …`` and a ``hint: …`` on stderr, with no traceback
unless ``--debug`` (or ``NB_DEBUG=1``) is given.

This module stays light: the Typer command tree (``app``, in :mod:`nbcli._tree`) is
built on first use, because importing Typer, and the Pydantic it runs every option
value through, costs about 0.3 s of a one-second budget. ``nb ls`` in its plain forms
is answered without it (:func:`nbcli._ls.fast_argv`); everything else, and every
``nb ls`` the fast parser is not sure about, goes through Typer.
"""

from __future__ import annotations

import errno
import os
import sys

from nblog import AmbiguousRunError, FormatVersionError, NbError, RunNotFoundError

from ._output import error

TYPE_CHECKING = False  # not from typing: this module is on the path of `nb ls`, kept light
if TYPE_CHECKING:  # provided by __getattr__ on first use
    from typing import Any

    from ._tree import NbGroup, app


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


def _debugging() -> bool:
    return os.environ.get("NB_DEBUG", "") not in ("", "0")


def _fast(argv: list[str]) -> int | None:
    """Run ``nb ls`` without Typer when ``argv`` is one of its plain forms: the exit
    code, or None when Typer must handle ``argv`` (anything else, --help, a usage
    error, shell completion, --debug)."""
    if argv[:1] != ["ls"] or _debugging() or "_NB_COMPLETE" in os.environ or "_TYPER_COMPLETE_ARGS" in os.environ:
        return None
    from ._ls import fast_argv, run_ls

    args = fast_argv(argv[1:])
    if args is None:
        return None
    try:
        code = run_ls(**args)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            report(exc)
            return 1
        # the reader went away (`nb ls | head`): as Click does, exit 1 quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (AttributeError, OSError, ValueError):  # no real file behind sys.stdout
            pass
        return 1
    except Exception as exc:
        report(exc)
        return 1


def main() -> None:
    """Entry point of the ``nb`` console script."""
    code = _fast(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from ._tree import app

    app(prog_name="nb")


def __getattr__(name: str) -> Any:
    # ``from nbcli.app import app``: the Typer tree, imported on first use
    if name in ("app", "NbGroup"):
        from . import _tree

        return getattr(_tree, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["NbGroup", "app", "main", "report"]
