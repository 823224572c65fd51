"""The ``nb`` Typer application and its single error boundary.

Exit codes: 0 success; 1 a runtime failure (no such run, ambiguous prefix, unreadable
file, ``--latest`` found nothing, ...); 2 a usage error (unknown option, bad value).
Library errors become ``error: …`` and a ``hint: …`` on stderr, with no traceback
unless ``--debug`` (or ``NB_DEBUG=1``) is given.
"""

from __future__ import annotations

import errno
import os
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from nblog import AmbiguousRunError, FormatVersionError, NbError, RunNotFoundError

from . import __version__
from ._output import error
from .commands import export, ls, media, resume_id, show, tail, timers, tui


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
        return str(exc), [], "upgrade nb (pip install -U nb) to read this run"
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


class NbGroup(TyperGroup):
    """The root command group: turns exceptions from any subcommand into a message."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            if _is_click_exception(exc) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE):
                raise
            if ctx.params.get("debug") or os.environ.get("NB_DEBUG", "") not in ("", "0"):
                raise
            message, details, hint = _hint(exc)
            error(message, hint, details)
            raise typer.Exit(1) from None


def _is_click_exception(exc: BaseException) -> bool:
    from typer._click.exceptions import ClickException

    return isinstance(exc, ClickException)


app = typer.Typer(
    cls=NbGroup,
    name="nb",
    help="Inspect, tail, export and resume training runs logged with nblog.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_show_locals=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nb {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", envvar="NB_DEBUG", help="Show the traceback of an error.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Inspect, tail, export and resume training runs logged with nblog.

    RUN is a run id, a unique prefix of one, PROJECT/RUN_ID or a path to a run folder;
    runs are looked up under --root, else $NB_DIR, else ./nb_runs.
    """


for _module in (ls, show, tail, export, timers, resume_id, media, tui):
    _module.register(app)


def main() -> None:
    """Entry point of the ``nb`` console script."""
    app(prog_name="nb")


__all__ = ["app", "main"]
