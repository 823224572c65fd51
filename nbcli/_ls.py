"""What ``nb ls`` does, without Typer: list, filter, print; and a parser of its plain
argument forms, so the entry point can answer them without importing Typer.

:mod:`nbcli.commands.ls` declares the command for Typer (help, completion, usage
errors) and calls :func:`run_ls`; :func:`nbcli.app.main` calls :func:`fast_argv` first
and hands Typer every argument list it does not fully understand, so both paths run
the same code and only Typer ever reports a usage error.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Sequence

from ._output import (
    Column,
    Output,
    data,
    emit_json,
    error,
    fmt_duration,
    fmt_last_step,
    fmt_time,
    info,
)

STATUSES = ("running", "finished", "failed", "stale")
_STATUS_STYLE = {"running": "green", "finished": "", "failed": "red bold", "stale": "yellow", "unknown": "dim"}
_COLUMNS = [
    Column("ID"), Column("PROJECT"), Column("NAME"), Column("STATUS"), Column("RANKS", True),
    Column("SESSIONS", True), Column("LAST STEP", True), Column("STARTED"), Column("DURATION", True),
]
_MAX_LISTED = 12  # a missing project's message lists the projects there when at most this many


def bad_project(project: str | None) -> bool:
    """Whether ``project`` cannot be a project folder name (a usage error)."""
    return project is not None and ("/" in project or project in ("", ".", ".."))


def run_ls(
    project: str | None = None,
    name: str | None = None,
    statuses: Sequence[str] = (),
    root: str | None = None,
    as_json: bool = False,
) -> int:
    """List the runs under ``root`` (default ``$NB_DIR``, else ``./nb_runs``), newest
    first, keeping those of ``project``, whose name matches the glob ``name`` and whose
    status is one of ``statuses`` (all when empty); print them as a table or JSON.

    Returns the exit code: 1 when ``root`` is not a folder (it does not exist or is a
    file; a message on stderr, nothing on stdout, also with ``as_json``); 1 when
    ``project`` has no run there (a message on stderr names the projects that exist),
    except with ``as_json``, which prints ``[]`` and returns 0; otherwise 0, also when
    the filters leave nothing (a note on stderr).
    """
    from nblog._catalog import default_root, list_runs

    root = root or default_root()
    where = os.path.abspath(root)
    if not os.path.isdir(where):
        what = f"no runs of project {project!r}" if project is not None else "no runs"
        error(f"{what}: {where} {_missing(where)}", "pass --root DIR or set NB_DIR")
        return 1
    rows = list_runs(root, project)
    if project is not None and not rows and not as_json:
        _no_such_project(project, root)
        return 1
    if name is not None:
        rows = [r for r in rows if fnmatch.fnmatchcase(r["name"] or "", name)]
    if statuses:
        wanted = set(statuses)
        rows = [r for r in rows if r["status"] in wanted]
    if as_json:
        emit_json(rows)
        return 0
    if not rows:
        info(f"no runs match under {where}")
    out = Output()
    if not rows and out.rich:
        return 0
    now = time.time()
    out.table(
        _COLUMNS,
        (
            [
                data(r["id"], "bold"),
                data(r["project"]),
                data(r["name"] if r["name"] is not None else "-"),
                data(r["status"], _STATUS_STYLE.get(r["status"], "")),
                r["ranks"],
                r["sessions"],
                fmt_last_step(r["last_step"], r["last_step_updated"], r["status"] == "running", now),
                fmt_time(r["started"]),
                fmt_duration(r["duration_s"]),
            ]
            for r in rows
        ),
    )
    return 0


def _missing(path: str) -> str:
    """Why ``path`` (not a folder) holds no runs: it does not exist, or is a file."""
    return "is not a folder" if os.path.exists(path) else "does not exist"


def _no_such_project(project: str, root: str) -> None:
    """The message for ``nb ls PROJECT`` when PROJECT has no run under ``root``."""
    where = os.path.abspath(root)
    try:
        with os.scandir(where) as it:
            others = sorted(e.name for e in it if e.name != project and e.is_dir())
    except OSError:
        others = []
    if not others:
        hint = "there are no projects there; pass --root DIR or set NB_DIR to look elsewhere"
    elif len(others) <= _MAX_LISTED:
        hint = "projects there: " + ", ".join(others)
    else:
        import difflib

        close = difflib.get_close_matches(project, others, n=3)
        hint = f"{len(others)} projects there" + (f"; did you mean {', '.join(close)}?" if close else
                                                   "; `nb ls` lists all runs")
    error(f"no runs of project {project!r} under {where}", hint)


# -- the fast path ------------------------------------------------------------------------

_VALUED = {"--project": "project_opt", "-p": "project_opt", "--name": "name", "--status": "status",
           "-s": "status", "--root": "root"}


def fast_argv(argv: Sequence[str]) -> dict | None:
    """The :func:`run_ls` arguments for ``nb ls ARGV``, or None unless ``argv`` is made
    only of forms this parser is sure about: at most one PROJECT; ``--project``/``-p``,
    ``--name``, ``--status``/``-s`` (a known status, repeatable) and ``--root`` with a
    value as the next word or, for the long forms, after ``=``; ``--json``; ``--``.
    A value that starts with ``-``, an unknown option, ``--help``, bundled short options
    and every usage error (PROJECT and --project differ, a bad project name) give None,
    for Typer to handle. The last of a repeated option wins, as in Click."""
    opts: dict = {"project_opt": None, "name": None, "root": None}
    statuses: list[str] = []
    positional: list[str] = []
    as_json = False
    i, n = 0, len(argv)
    only_positional = False
    while i < n:
        word = argv[i]
        i += 1
        if only_positional or not word.startswith("-") or word == "-":
            if word == "-":
                return None
            positional.append(word)
            continue
        if word == "--":
            only_positional = True
            continue
        if word == "--json":
            as_json = True
            continue
        key, eq, value = word.partition("=")
        if eq and not key.startswith("--"):
            return None
        dest = _VALUED.get(key)
        if dest is None:
            return None
        if not eq:
            if i >= n:
                return None
            value = argv[i]
            i += 1
        if value.startswith("-"):
            return None
        if dest == "status":
            if value not in STATUSES:
                return None
            statuses.append(value)
        else:
            opts[dest] = value
    if len(positional) > 1:
        return None
    project = positional[0] if positional else None
    project_opt = opts["project_opt"]
    if project and project_opt and project != project_opt:
        return None
    project = project or project_opt
    if bad_project(project):
        return None
    return {"project": project, "name": opts["name"], "statuses": statuses, "root": opts["root"],
            "as_json": as_json}


__all__ = ["STATUSES", "bad_project", "fast_argv", "run_ls"]
