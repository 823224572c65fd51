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
    preempted = "preempted"
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
    where: Annotated[
        str | None,
        typer.Option("--where", "-w", metavar="EXPR", show_default=False,
                     help="Only runs for which this SQL WHERE fragment is true, e.g. "
                          "\"optim.lr < 3e-4 and train/loss.min < 0.1 and status = 'finished'\" (see above)."),
    ] = None,
    columns: Annotated[
        list[str] | None,
        typer.Option("--columns", "-c", metavar="KEYS", show_default=False,
                     help="Show the run id and these keys (comma-separated; repeatable) instead of the "
                          "default columns; --json carries the same."),
    ] = None,
    sort: Annotated[
        str | None,
        typer.Option("--sort", metavar="KEY", show_default=False,
                     help="Sort by this key, smallest first (runs without it last)."),
    ] = None,
    desc: Annotated[bool, typer.Option("--desc", help="Sort descending (alone: oldest run first).")] = False,
    group: Annotated[
        str | None,
        typer.Option("--group", "-g", metavar="KEY", show_default=False,
                     help="One row per value of this key: how many runs, and the mean/min/max of each "
                          "number of --columns (or --sort)."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", "-n", metavar="N", min=0, show_default=False,
                     help="At most N rows in the table, 0 for all [default: 50 on a terminal, all when piped; "
                          "--json carries all]."),
    ] = None,
    root: Root = None,
    as_json: Json = False,
) -> None:
    """List runs: id, project, name, status, ranks, sessions, last step, start, active duration.

    Status is running, finished or failed as run.json says; preempted: still "running" but
    its last session ended (SIGTERM, as a requeue expects); or stale: still "running" but
    its process is gone (on this machine, by its pid; elsewhere, nothing written for longer
    than 3 minutes: live writers record a heartbeat every minute). The last step is rank 0's,
    from run.json or, where run.json may be behind (a killed run), the end of its event log.
    Reads run.json and file sizes and times, and event logs only there (and see tags below).

    Keys of --where, --columns, --sort and --group: a field (id, project, name, status,
    ranks, world_size, sessions, last_step, started and last_write in unix seconds,
    duration in seconds, size_bytes, path); a config key, nested keys joined with dots
    (optim.lr; config.KEY when a field has its name); or a scalar tag of rank 0: TAG is
    its last value, TAG.last, TAG.step (step of the last value), TAG.min, TAG.max. Tag
    values come from run.json, or, for runs without a summary there, from the event
    logs of the runs the rest of --where leaves.

    --where is SQL as Polars reads it (=, <>, <, and, or, not, in (...), between,
    like, is null, ...): text in single quotes ('failed'); a bare word with . or /
    (optim.lr, train/loss.min) is one key, so divide with spaces (a / b); put other
    keys in double quotes ("val/top-1" > 0.9, "val/top-1".max: quoted and bare parts
    joined by dots are one key). A bad expression or an unknown key is a usage error
    (exit 2).
    """
    if project and project_opt and project != project_opt:
        raise typer.BadParameter(f"PROJECT {project!r} and --project {project_opt!r} differ", param_hint="--project")
    project = project or project_opt
    if bad_project(project):
        raise typer.BadParameter(f"{project!r} is not a project name", param_hint="PROJECT")
    keys = [k.strip() for c in columns or () for k in c.split(",") if k.strip()]
    if columns is not None and not keys:
        raise typer.BadParameter("no key given", param_hint="--columns")
    for opt, key in (("--sort", sort), ("--group", group)):
        if key is not None and not key.strip():
            raise typer.BadParameter("no key given", param_hint=opt)
    if where is not None or keys or sort is not None or group is not None:
        from nblog.reader import QueryError

        try:
            code = run_ls(project, name, [s.value for s in status or ()], root, as_json, where, keys, sort, desc,
                          group, limit=limit)
        except QueryError as exc:
            raise typer.BadParameter(exc.message + (f" (hint: {exc.hint})" if exc.hint else ""),
                                     param_hint=exc.option) from None
    else:
        code = run_ls(project, name, [s.value for s in status or ()], root, as_json, desc=desc, limit=limit)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("ls")(ls)


__all__ = ["ls", "register"]
