"""The ``nb`` entry point; its error boundary is :mod:`nbcli._errors` (shared with the
command tree).

Exit codes: 0 success; 1 a runtime failure (no such run, ambiguous prefix, unreadable
file, ``--latest`` found nothing, standard output closed by its reader, ...); 2 a usage
error (unknown option, bad value). Library errors become ``error: …`` and a ``hint: …``
on stderr, with no traceback unless ``--debug`` (or ``NB_DEBUG=1``) is given. A closed
standard output is one rule for every command (:mod:`nbcli._errors`): :func:`main`
flushes stdout before it exits, so it is found there at the latest.

This module stays light: the Typer command tree (``app``, in :mod:`nbcli._tree`) is
built on first use, because importing Typer, and the Pydantic it runs every option
value through, costs about 0.3 s of a one-second budget. ``nb ls`` in its plain forms
(:func:`nbcli._ls.fast_argv`) and ``nb resume-id PROJECT --latest``
(:func:`nbcli._resume.fast_argv`) are answered without it; everything else, and every
argument list the fast parsers are not sure about, goes through Typer.
"""

from __future__ import annotations

import os
import sys

from ._errors import (
    closed_pipe_exit,
    finish_stdout,
    is_closed_pipe,
    report,
    stand_in_for_closed_stdout,
)

TYPE_CHECKING = False  # not from typing: this module is on the path of `nb ls`, kept light
if TYPE_CHECKING:  # provided by __getattr__ on first use
    from collections.abc import Callable
    from typing import Any

    from ._tree import NbGroup, app


def _debugging() -> bool:
    return os.environ.get("NB_DEBUG", "") not in ("", "0")


def _fast(argv: list[str]) -> int | None:
    """Run ``nb ls`` and ``nb resume-id PROJECT --latest`` without Typer when ``argv``
    is one of their plain forms: the exit code, or None when Typer must handle ``argv``
    (anything else, --help, a usage error, shell completion, --debug)."""
    if argv[:1] not in (["ls"], ["resume-id"]) or _debugging() or "_NB_COMPLETE" in os.environ \
            or "_TYPER_COMPLETE_ARGS" in os.environ:
        return None
    from ._ls import TyperReports, fast_argv, run_ls

    run: Callable[..., int] = run_ls
    if argv[0] == "resume-id":
        from . import _resume

        args, run = _resume.fast_argv(argv[1:]), _resume.print_latest
    else:
        args = fast_argv(argv[1:])
    if args is None:
        return None
    try:
        return run(**args)
    except TyperReports:  # a usage error: Typer reports it on the same words (exits 2)
        from ._tree import app

        app(args=argv, prog_name="nb")
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if is_closed_pipe(exc):  # the reader went away (`nb ls | head`): the one rule
            return closed_pipe_exit()
        report(exc)
        return 1


def main() -> None:
    """Entry point of the ``nb`` console script: the command's exit status, after
    stdout is flushed (a closed pipe found then exits 1 quietly, see :mod:`nbcli._errors`)."""
    stand_in_for_closed_stdout()
    code: str | int | None = _fast(sys.argv[1:])
    if code is None:
        from ._tree import app

        try:
            app(prog_name="nb")
            code = 0
        except SystemExit as exc:
            code = exc.code
    if code is None or isinstance(code, int):
        code = finish_stdout(code or 0)
    sys.exit(code)


def __getattr__(name: str) -> Any:
    # ``from nbcli.app import app``: the Typer tree, imported on first use
    if name in ("app", "NbGroup"):
        from . import _tree

        return getattr(_tree, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["NbGroup", "app", "main", "report"]
