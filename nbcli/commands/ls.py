"""``nb ls [PROJECT]``: the runs under a root, newest first."""

from __future__ import annotations

import fnmatch
import os
from enum import Enum
from typing import Annotated

import typer

from .._options import Json, Root
from .._output import Column, Output, data, emit_json, fmt_duration, fmt_time, info

_STATUS_STYLE = {"running": "green", "finished": "", "failed": "red bold", "stale": "yellow", "unknown": "dim"}


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
    from nblog._catalog import default_root, list_runs

    if project and project_opt and project != project_opt:
        raise typer.BadParameter(f"PROJECT {project!r} and --project {project_opt!r} differ", param_hint="--project")
    project = project or project_opt
    if project is not None and ("/" in project or project in ("", ".", "..")):
        raise typer.BadParameter(f"{project!r} is not a project name", param_hint="PROJECT")
    root = root or default_root()
    rows = list_runs(root, project)
    if name is not None:
        rows = [r for r in rows if fnmatch.fnmatchcase(r["name"] or "", name)]
    if status:
        wanted = {s.value for s in status}
        rows = [r for r in rows if r["status"] in wanted]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        where = os.path.abspath(root)
        if not os.path.isdir(where):
            info(f"no runs: {where} does not exist (pass --root DIR or set NB_DIR)")
        else:
            info(f"no runs match under {where}")
    out = Output()
    columns = [
        Column("ID"), Column("PROJECT"), Column("NAME"), Column("STATUS"), Column("RANKS", True),
        Column("SESSIONS", True), Column("LAST STEP", True), Column("STARTED"), Column("DURATION", True),
    ]
    if not rows and out.rich:
        return
    out.table(
        columns,
        (
            [
                data(r["id"], "bold"),
                data(r["project"]),
                data(r["name"] if r["name"] is not None else "-"),
                data(r["status"], _STATUS_STYLE.get(r["status"], "")),
                r["ranks"],
                r["sessions"],
                r["last_step"],
                fmt_time(r["started"]),
                fmt_duration(r["duration_s"]),
            ]
            for r in rows
        ),
    )


def register(app: typer.Typer) -> None:
    app.command("ls")(ls)


__all__ = ["ls", "register"]
