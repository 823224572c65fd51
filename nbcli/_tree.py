"""The ``nb`` Typer application: the command tree and the error boundary around it.

Imported on first use by :mod:`nbcli.app` (``from nbcli.app import app`` works as
before); see there for the exit codes.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from . import __version__
from . import _damage as damage
from ._errors import closed_pipe_exit, is_closed_pipe, report
from .commands import diff, export, hang, ls, media, resume_id, show, tail, timers, tui
from .commands import import_ as import_cmd
from .commands import logs as logs_cmd
from .commands import plot as plot_cmd
from .commands import report as report_cmd
from .commands import serve as serve_cmd
from .commands import watch as watch_cmd


class NbGroup(TyperGroup):
    """The root command group: turns exceptions from any subcommand into a message, and
    a closed standard output into a quiet exit (:mod:`nbcli._errors`)."""

    # Typer calls it with its typer.Context (TyperGroup.context_class); the base classes
    # name click's Context, of which typer.Context is a subclass
    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        with damage.watching():  # damaged event-log bytes: reported as read, exit 3 (nbcli._damage)
            try:
                result = super().invoke(ctx)
            except (typer.Exit, SystemExit) as stop:
                code = stop.exit_code if isinstance(stop, typer.Exit) else stop.code
                if code in (0, None) and damage.failed():
                    damage.conclude()
                    raise typer.Exit(damage.EXIT_DAMAGED) from None
                raise
            except (typer.Abort, KeyboardInterrupt):
                raise
            except Exception as exc:
                if is_closed_pipe(exc):  # the reader went away (`nb show RUN | head -1`)
                    raise typer.Exit(closed_pipe_exit()) from None
                if _is_click_exception(exc):
                    raise
                if ctx.params.get("debug") or os.environ.get("NB_DEBUG", "") not in ("", "0"):
                    raise
                report(exc)
                raise typer.Exit(1) from None
            if damage.failed():
                damage.conclude()
                raise typer.Exit(damage.EXIT_DAMAGED)
            return result

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


for _module in (ls, show, tail, export, timers, resume_id, media, tui, hang):
    _module.register(app)
plot_cmd.register(app)  # nb plot
report_cmd.register(app)  # nb report
diff.register(app)
logs_cmd.register(app)  # nb logs
import_cmd.register(app)  # nb import
watch_cmd.register(app)  # nb watch
serve_cmd.register(app)  # nb serve

__all__ = ["NbGroup", "app"]
