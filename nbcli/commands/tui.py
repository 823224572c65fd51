"""``nb tui [RUN|PROJECT]``: the Textual terminal UI (its own issue; a placeholder here)."""

from __future__ import annotations

from typing import Annotated

import typer

from .._options import Root
from .._output import error


def tui(
    target: Annotated[
        str | None,
        typer.Argument(metavar="[RUN|PROJECT]", help="A run (id, prefix, PROJECT/RUN_ID, path) or a project.",
                       show_default=False),
    ] = None,
    root: Root = None,
) -> None:
    """Browse runs in a terminal UI: tag tree, live plots, ranks, timers, system metrics, text."""
    error("the terminal UI is not part of this build yet",
          "use `nb show RUN`, `nb tail -f RUN` and `nb timers RUN` meanwhile")
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("tui")(tui)
