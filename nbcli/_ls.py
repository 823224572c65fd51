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
import sys
import time
from collections.abc import Sequence

from nblog.reader.lowlevel import plural

from ._output import (
    Cell,
    Column,
    Output,
    clean,
    data,
    emit_json,
    error,
    fmt_config_value,
    fmt_duration,
    fmt_last_step,
    fmt_time,
    info,
)

TYPE_CHECKING = False  # typing is not imported: `nb ls` starts faster without it
if TYPE_CHECKING:
    from nblog.reader import RunsTable

STATUSES = ("running", "finished", "failed", "preempted", "stale")
_STATUS_STYLE = {"running": "green", "finished": "", "failed": "red bold", "preempted": "yellow", "stale": "yellow",
                 "unknown": "dim"}
_COLUMNS = [
    Column("ID", keep=True), Column("PROJECT"), Column("NAME"), Column("STATUS"), Column("RANKS", True),
    Column("SESSIONS", True), Column("LAST STEP", True), Column("STARTED"), Column("DURATION", True),
]
_MAX_LISTED = 12  # a missing project's message lists the projects there when at most this many
#: Rows of a table on a terminal unless ``--limit`` says otherwise (piped output and
#: --json carry every run): a Rich table of 20,000 runs takes seconds to lay out, and
#: scrolls the newest runs away.
TERMINAL_LIMIT = 50


def bad_project(project: str | None) -> bool:
    """Whether ``project`` cannot be a project folder name (a usage error)."""
    return project is not None and ("/" in project or project in ("", ".", ".."))


def run_ls(
    project: str | None = None,
    name: str | None = None,
    statuses: Sequence[str] = (),
    root: str | None = None,
    as_json: bool = False,
    where_expr: str | None = None,
    columns: Sequence[str] = (),
    sort: str | None = None,
    desc: bool = False,
    group: str | None = None,
    argv: Sequence[str] | None = None,
    limit: int | None = None,
) -> int:
    """List the runs under ``root`` (default ``$NB_DIR``, else ``./nb_runs``), newest
    first, keeping those of ``project``, whose name matches the glob ``name`` and whose
    status is one of ``statuses`` (all when empty); print them as a table or JSON.

    ``where_expr`` (a SQL ``WHERE`` fragment), ``columns`` (keys to show), ``sort`` (a
    key; ``desc`` for descending, or alone: oldest first) and ``group`` (a key) select
    by fields, config keys and tag statistics (see :mod:`nblog.reader._runs.query`, which
    imports Polars: only these options load it).

    Returns the exit code: 1 when ``root`` is not a folder (it does not exist or is a
    file; a message on stderr, nothing on stdout, also with ``as_json``); 1 when
    ``project`` has no run there (a message on stderr names the projects that exist),
    except with ``as_json``, which prints ``[]`` and returns 0; otherwise 0, also when
    the filters leave nothing (a note on stderr).

    ``limit``: at most this many rows in the table, 0 for all; default (None):
    :data:`TERMINAL_LIMIT` on a terminal, all otherwise. A note on stderr says how many
    were left out. ``--json`` always carries every run.

    ``argv`` is given on the fast path (:func:`fast_argv`): the words after ``ls``.
    A usage error found while running (a bad expression, an unknown key) then raises
    :class:`TyperReports`: the caller runs the Typer command on the same words, which
    reports it and exits with status 2.

    Raises:
        nblog.reader._runs.query.QueryError: a bad expression or an unknown key (a usage
            error), unless ``argv`` is given.
        TyperReports: the same, when ``argv`` is given.
    """
    from nblog.reader import default_root, list_runs
    from nblog.reader.lowlevel import list_runs_meta

    root = root or default_root()
    where = os.path.abspath(root)
    if not os.path.isdir(where):
        what = f"no runs of project {project!r}" if project is not None else "no runs"
        error(f"{what}: {where} {_missing(where)}", "pass --root DIR or set NB_DIR")
        return 1
    query = where_expr is not None or bool(columns) or sort is not None or group is not None
    if query:
        pairs = list_runs_meta(root, project)
        rows = [r for r, _m in pairs]
    else:
        rows = list_runs(root, project)
    if project is not None and not rows and not as_json:
        _no_such_project(project, root)
        return 1
    if name is not None:
        rows = [r for r in rows if fnmatch.fnmatchcase(r["name"] or "", name)]
    if statuses:
        wanted = set(statuses)
        rows = [r for r in rows if r["status"] in wanted]
    if query:
        from nblog.reader import QueryError

        kept = {id(r) for r in rows}
        read = _RERUN.pop("summaries", {})
        try:
            return _query_ls([p for p in pairs if id(p[0]) in kept], where, as_json, where_expr, columns, sort,
                             desc, group, read, limit)
        except QueryError:
            if argv is None:
                raise
            _RERUN["summaries"] = read  # the Typer run below reads no event log twice
        # Typer reports the usage error (and exits 2), as it does every other one: the
        # caller (nbcli.app._fast) runs the Typer command on the same words
        raise TyperReports from None
    if desc:
        rows.reverse()
    if as_json:
        emit_json(rows)
        return 0
    if not rows:
        info(f"no runs match under {where}")
    out = Output()
    if not rows and out.rich:
        return 0
    now = time.time()
    shown, hidden = _limited(rows, limit, out)
    if out.rich:
        out.table(_COLUMNS, (_default_cells(r, now) for r in shown))
    else:
        _plain_table(shown, now)
    _say_failures(out, shown)
    _say_hidden(len(rows), hidden, 'oldest' if desc else 'newest')
    return 0


def _limited(rows: list, limit: int | None, out: Output) -> tuple[list, int]:
    """The rows a table shows and how many it leaves out (see :func:`run_ls`'s ``limit``)."""
    if limit is None:
        limit = TERMINAL_LIMIT if out.rich else 0
    if limit <= 0 or len(rows) <= limit:
        return rows, 0
    return rows[:limit], len(rows) - limit


def _say_hidden(total: int, hidden: int, which: str) -> None:
    """The note under a table that left ``hidden`` of ``total`` runs out (``which``:
    newest, oldest, first: the ones shown)."""
    if hidden:
        info(f"the {which} {total - hidden:,} of {plural(total, 'run', sep=True)} shown; "
             "--limit 0 shows all, --limit N the first N (piped output and --json carry all)")


def _plain_table(rows: Sequence[dict], now: float) -> None:
    """The default columns as the plain table of :meth:`Output.table` writes them (a
    header line and tab-separated rows, one write), without a cell object per value:
    on 20,000 runs that is a fifth of ``nb ls``."""
    lines = ["\t".join(c.header for c in _COLUMNS)]
    for r in rows:
        name = r["name"]
        lines.append("\t".join([
            clean(r["id"]), clean(r["project"]), "-" if name is None else clean(name), clean(r["status"]),
            str(r["ranks"]), str(r["sessions"]),
            fmt_last_step(r["last_step"], r["last_step_updated"], r["status"] == "running", now),
            fmt_time(r["started"]), fmt_duration(r["duration_s"]),
        ]))
    lines.append("")
    sys.stdout.write("\n".join(lines))


def _say_failures(out: Output, rows: Sequence[dict]) -> None:
    """On a terminal, what went wrong in each failed run listed, below the table on
    stderr: ``ID: failed: rank 3 (host7), step 812, RuntimeError: ...`` (piped, the
    table stays alone; ``--json`` has failure_line)."""
    if not out.rich:
        return
    for r in rows:
        if r["status"] == "failed" and r.get("failure_line"):
            info(f"{r['id']}: {r['failure_line']}")


_SHOWN = ("id", "project", "name", "status", "ranks", "sessions", "last_step", "started", "duration_s", "duration")
_TIMES = ("started", "last_write", "last_step_updated")


class TyperReports(Exception):
    """Raised by :func:`run_ls` on the fast path for a usage error found while running (a
    bad expression, an unknown key): the caller runs the Typer command on the same words,
    which reports it and exits with status 2."""


# Tag summaries a fast-path query read before it met a usage error, for the Typer run
# that reports the error (a mistyped key on runs without summaries reads every event log)
_RERUN: dict = {}


def _query_ls(pairs: list, where: str, as_json: bool, where_expr: str | None, columns: Sequence[str],
              sort: str | None, desc: bool, group: str | None, read: dict, limit: int | None = None) -> int:
    """``nb ls`` with --where/--columns/--sort/--group: select with Polars, then print
    the selected columns (``id`` first), or one row per group. ``read``: tag summaries
    already read, by run folder (filled as more are read)."""
    from nblog.reader import RunsTable, group_runs, select_runs

    table = RunsTable(pairs, read)
    rows = select_runs(table, where_expr, None if group is not None else sort, desc and group is None, columns)
    if group is not None:
        values = list(columns) + ([sort] if sort is not None and sort not in columns else [])
        found = group_runs(table, rows, group, values, sort, desc)
        if as_json:
            emit_json(found)
            return 0
        if not found:
            info(f"no runs match under {where}")
        _print_groups(group, found)
        return 0
    extra = named_keys(where_expr, sort)
    if as_json:
        emit_json(json_rows(table, rows, columns, extra))
        return 0
    if not rows:
        info(f"no runs match under {where}")
    output = Output()
    if not rows and output.rich:
        return 0
    now = time.time()
    total = len(rows)
    rows, hidden = _limited(rows, limit, output)
    if columns:
        keys = ["id", *(k for k in columns if k != "id")]
        head = [Column("ID", keep=True), *(Column(k, _numeric(table, rows, k)) for k in keys[1:])]
        output.table(head, ([_cell(table, i, k, now) for k in keys] for i in rows))
        _say_hidden(total, hidden, 'first')
        return 0
    head = _COLUMNS + [Column(k, _numeric(table, rows, k)) for k in extra]
    output.table(head, ([*_default_cells(table.pairs[i][0], now), *(_cell(table, i, k, now) for k in extra)]
                        for i in rows))
    _say_failures(output, [table.pairs[i][0] for i in rows])
    _say_hidden(total, hidden, 'first')
    return 0


def named_keys(where_expr: str | None, sort: str | None) -> list[str]:
    """The keys ``where_expr`` and ``sort`` name that are not among ``nb ls``'s own
    fields: the rows of ``nb ls --json`` (and of ``nb serve``'s ``/api/runs``) carry them."""
    from nblog.reader import parse_where

    named = list(parse_where(where_expr).meta.root_names()) if where_expr is not None else []
    if sort is not None:
        named.append(sort)
    return [k for k in dict.fromkeys(named) if k not in _SHOWN]


def json_rows(table: RunsTable, rows: Sequence[int], columns: Sequence[str], extra: Sequence[str]) -> list[dict]:
    """The rows of ``nb ls --json`` with a query: the id and ``columns`` when given, else
    every field of the row and the ``extra`` keys (:func:`named_keys`)."""
    if columns:
        return [{"id": table.pairs[i][0]["id"], **{k: table.value(i, k) for k in columns}} for i in rows]
    return [{**table.pairs[i][0], **{k: table.value(i, k) for k in extra}} for i in rows]


def _numeric(table: RunsTable, rows: Sequence[int], key: str) -> bool:
    """Whether a column of ``key`` holds numbers (right-aligned)."""
    return key not in _TIMES and all(
        v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in (table.value(i, key) for i in rows))


def _cell(table: RunsTable, i: int, key: str, now: float) -> Cell:
    """The cell of run ``i`` for ``key``, formatted as the default table formats it."""
    row = table.pairs[i][0]
    if key == "id":
        return data(row["id"], "bold")
    if key == "status":
        return data(row["status"], _STATUS_STYLE.get(row["status"], ""))
    if key == "last_step":
        return fmt_last_step(row["last_step"], row["last_step_updated"], row["status"] == "running", now)
    v = table.value(i, key)
    # value() gives an object: a _TIMES key holds a unix time or None, a duration seconds
    if key in _TIMES:
        return fmt_time(v)  # type: ignore[arg-type]
    if key in ("duration", "duration_s"):
        return fmt_duration(v)  # type: ignore[arg-type]
    return _value_cell(v)


def _value_cell(v: object) -> Cell:
    if v is None or isinstance(v, str):
        return data(v if v is not None else "-")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return v
    return data(fmt_config_value(v))


def _print_groups(key: str, found: list[dict]) -> None:
    """One row per group: the value, how many runs, and each value key's mean, min and
    max (numbers) or distinct values."""
    values = [k for k in (found[0] if found else {}) if k not in (key, "runs", "ids")]
    head = [Column(key), Column("RUNS", True)]
    for v in values:
        if "values" in found[0][v]:
            head.append(Column(v))
        else:
            head += [Column(f"{v} mean", True), Column(f"{v} min", True), Column(f"{v} max", True)]
    lines = []
    for g in found:
        line = [_value_cell(g[key]), g["runs"]]
        for v in values:
            st = g[v]
            if "values" in st:
                line.append(data(", ".join(fmt_config_value(x) if not isinstance(x, str) else x for x in st["values"])))
            else:
                line += [st["mean"], st["min"], st["max"]]
        lines.append(line)
    Output().table(head, lines)


def _default_cells(r: dict, now: float) -> list:
    return [
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
        hint = f"{plural(len(others), 'project')} there" + (f"; did you mean {', '.join(close)}?" if close else
                                                   "; `nb ls` lists all runs")
    error(f"no runs of project {project!r} under {where}", hint)


# -- the fast path ------------------------------------------------------------------------

_VALUED = {"--project": "project_opt", "-p": "project_opt", "--name": "name", "--status": "status",
           "-s": "status", "--root": "root", "--where": "where_expr", "-w": "where_expr", "--columns": "columns",
           "-c": "columns", "--sort": "sort", "--group": "group", "-g": "group", "--limit": "limit", "-n": "limit"}
_QUERY = ("where_expr", "sort", "group")


def fast_argv(argv: Sequence[str]) -> dict | None:
    """The :func:`run_ls` arguments for ``nb ls ARGV``, or None unless ``argv`` is made
    only of forms this parser is sure about: at most one PROJECT; ``--project``/``-p``,
    ``--name``, ``--status``/``-s`` (a known status, repeatable) and ``--root`` with a
    value as the next word or, for the long forms, after ``=``; ``--limit``/``-n`` with
    digits; ``--json``; ``--``.
    The query options ``--where``/``-w``, ``--columns``/``-c`` (comma-separated,
    repeatable), ``--sort``, ``--desc`` and ``--group``/``-g`` are understood too; their
    keys are in the result only when given (a bad expression is found later: see
    :func:`nbcli.app._fast`).
    A value that starts with ``-``, an unknown option, ``--help``, bundled short options
    and every usage error (PROJECT and --project differ, a bad project name, an empty
    key) give None, for Typer to handle. The last of a repeated option wins, as in Click."""
    from ._argv import scan_argv

    scanned = scan_argv(argv, _VALUED, {"--json": "json", "--desc": "desc"})
    if scanned is None:
        return None
    positional, pairs, seen = scanned
    opts: dict = {"project_opt": None, "name": None, "root": None, "where_expr": None, "sort": None, "group": None}
    columns: list[str] | None = None
    statuses: list[str] = []
    as_json, desc = "json" in seen, "desc" in seen
    limit: int | None = None
    for dest, value in pairs:
        if dest == "status":
            if value not in STATUSES:
                return None
            statuses.append(value)
        elif dest == "columns":
            keys = [k.strip() for k in value.split(",") if k.strip()]
            if not keys:
                return None
            columns = (columns or []) + keys
        elif dest in ("sort", "group") and not value.strip():
            return None
        elif dest == "limit":
            if not value.isdigit() or not value.isascii():
                return None  # Typer reports it
            limit = int(value)
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
    args = {"project": project, "name": opts["name"], "statuses": statuses, "root": opts["root"],
            "as_json": as_json}
    args.update({k: opts[k] for k in _QUERY if opts[k] is not None})
    if columns:
        args["columns"] = columns
    if desc:
        args["desc"] = True
    if limit is not None:
        args["limit"] = limit
    if len(args) - (limit is not None) > 5:  # a query: an error in it is reported by Typer, from the same words
        args["argv"] = list(argv)
    return args


__all__ = ["STATUSES", "bad_project", "fast_argv", "run_ls"]
