"""``nb ls [PROJECT]``: the runs under a root, newest first."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from .._ls import bad_project, run_ls
from .._options import Json, Root


class Status(str, Enum):
    running = "running"
    finished = "finished"
    failed = "failed"
    stale = "stale"


def ls(
    project: Annotated[
        str | None, typer.Argument(metavar="[PROJECT]", help="Only runs of this project.", show_default=False)
    ] = None,
    project_opt: Annotated[
        str | None,
        typer.Option("--project", "-p", metavar="PROJECT", help="Only runs of this project (same as the argument).",
                     show_default=False),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", metavar="GLOB", help="Only runs whose name matches this shell-style glob.",
                     show_default=False),
    ] = None,
    status: Annotated[
        list[Status] | None,
        typer.Option("--status", "-s", help="Only runs with this status; repeat for several.", show_default=False),
    ] = None,
    root: Root = None,
    as_json: Json = False,
) -> None:
    """List runs: id, project, name, status, ranks, sessions, last step, start, active duration.

    Status is running, finished or failed as run.json says, or stale: still "running" but
    nothing written for longer than 3 minutes (live writers record a heartbeat every minute).
    Reads run.json and file sizes and times only, never the event logs.
    """
    if project and project_opt and project != project_opt:
        raise typer.BadParameter(f"PROJECT {project!r} and --project {project_opt!r} differ", param_hint="--project")
    project = project or project_opt
    if bad_project(project):
        raise typer.BadParameter(f"{project!r} is not a project name", param_hint="PROJECT")
    code = run_ls(project, name, [s.value for s in status or ()], root, as_json)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("ls")(ls)


__all__ = ["ls", "register"]
