"""``nb diff RUN_A RUN_B [RUN_C...]``: config, environment, sessions and tag values side by side."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from nblog.reader.lowlevel import plural

from .._options import AllowDamaged, Json, Root
from .._output import (
    Cell,
    Column,
    Output,
    data,
    emit_json,
    fmt_config_value,
    fmt_duration,
    fmt_time,
    fmt_value,
    styled,
)

_MARK = "*"


def _value(v: object, present: bool = True) -> Cell:
    """A cell of logged data: text cleaned, numbers formatted, lists/dicts as compact JSON."""
    if not present:
        return data("(absent)", "dim")
    if v is None:
        return data("null" if present else "-", "dim")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return data(v)
    if isinstance(v, (int, float)):
        return v
    return data(fmt_config_value(v, 60))


def _session_value(field: str, v: Any) -> Cell:
    """A session field's cell; ``v`` is a JSON value of diff_runs (start: unix time, duration_s: seconds)."""
    if v is None:
        return None
    if field == "start":
        return fmt_time(v)
    if field == "duration_s":
        return fmt_duration(v)
    return _value(v)


def _mark(differs: bool) -> Cell:
    return styled(_MARK, "yellow bold") if differs else ""


def diff(
    runs: Annotated[
        list[str],
        typer.Argument(metavar="RUN", show_default=False,
                       help="Two or more runs (ids, unique prefixes, PROJECT/RUN_ID or paths); the first is the base."),
    ],
    exit_code: Annotated[
        bool, typer.Option("--exit-code", help="Exit 1 when the runs differ (as git diff --exit-code), 0 when not."),
    ] = False,
    root: Root = None,
    allow_damaged: AllowDamaged = False,
    as_json: Json = False,
) -> None:
    """Show how runs differ: config keys added, removed or changed (nested keys dotted,
    the first run is the base), launcher and environment (world size, ranks, machines,
    hosts, job ids, versions), sessions, and the last value, min and max of every
    scalar tag of rank 0 the runs have in common.

    Exit 0 whether or not they differ; with --exit-code, 1 when they differ in config,
    environment, sessions or the set of tags (job ids, hosts, times and tag values are
    shown but not counted). * marks what differs.
    """
    if len(runs) < 2:
        raise typer.BadParameter("give at least two runs", param_hint="RUN")
    from nblog.reader import diff_runs

    info = diff_runs(runs, root)
    if as_json:
        emit_json(info)
    else:
        _print(info)
    if exit_code and info["differ"]:
        raise typer.Exit(1)


def _print(info: dict) -> None:
    out = Output()
    labels = [r["label"] for r in info["runs"]]
    out.table([Column("RUN"), Column("ID"), Column("PROJECT"), Column("NAME"), Column("STATUS")],
              ([r["label"], data(r["id"], "bold"), data(r["project"]), data(r["name"] if r["name"] is not None else "-"),
                data(r["status"])] for r in info["runs"]),
              title="Runs (A is the base)")
    out.gap()
    changes, equal = info["config"]["changes"], info["config"]["equal"]
    title = f"Config: {plural(len(changes), 'key')} {'differs' if len(changes) == 1 else 'differ'}, {equal} equal"
    if changes:
        out.table([Column("KEY"), Column("CHANGE"), *(Column(lb) for lb in labels)],
                  ([data(c["key"], "bold"), c["change"], *(_value(v, p) for v, p in zip(c["values"], c["present"], strict=True))]
                   for c in changes),
                  title=title)
    else:
        out.fields([], title=title)
    out.gap()
    out.table([Column("FIELD"), Column("DIFF"), *(Column(lb) for lb in labels)],
              ([e["label"], _mark(e["differs"]), *(_value(v) if v is not None else None for v in e["values"])]
               for e in info["environment"]),
              title="Environment")
    out.gap()
    counts = info["sessions"]["count"]
    lines: list[list[Cell]] = [["-", "sessions", _mark(len(set(counts)) > 1), *counts]]
    lines += [[f["session"], f["label"], _mark(f["differs"]), *(_session_value(f["field"], v) for v in f["values"])]
              for f in info["sessions"]["fields"]]
    out.table([Column("SESSION", True), Column("FIELD"), Column("DIFF"), *(Column(lb, True) for lb in labels)], lines,
              title="Sessions")
    out.gap()
    tags = info["tags"]
    tag_lines = []
    for t in tags["common"]:
        for stat in ("last", "min", "max"):
            vals = t[stat]
            if stat == "last":
                cells = [data(f"{fmt_value(v)} (step {s})" if s is not None else fmt_value(v))
                         for v, s in zip(vals, t["step"], strict=True)]
            else:
                cells = vals
            same = len({fmt_value(v) for v in vals}) == 1 and (stat != "last" or len(set(t["step"])) == 1)
            tag_lines.append([data(t["tag"], "bold"), stat, _mark(not same), *cells])
    out.table([Column("TAG"), Column("STAT"), Column("DIFF"), *(Column(lb, True) for lb in labels)], tag_lines,
              title=f"Tags of every run (rank 0 scalars): {len(tags['common'])}")
    if tags["only_some"]:
        out.gap()
        out.table([Column("TAG"), Column("ONLY IN")],
                  ([data(t["tag"], "bold"), ", ".join(t["runs"])] for t in tags["only_some"]),
                  title="Tags only some runs have")
    out.gap()
    _print_code(out, info["code"], labels)
    out.gap()
    out.fields([("differ", "yes" if info["differ"] else "no")])


def _code_value(field: str, v: object) -> Cell | None:
    if v is None:
        return None
    if field == "commit" and isinstance(v, str):
        return data(v[:12])
    if field == "dirty":
        return "yes" if v else "no"
    return _value(v)


def _print_code(out: Output, code: dict, labels: list[str]) -> None:
    """What code ran (rank 0's provenance of each run's latest session), and the
    installed distributions whose versions differ."""
    if not any(code["records"]):
        out.fields([], title="Code: no run recorded its provenance")
        return
    out.table([Column("FIELD"), Column("DIFF"), *(Column(lb) for lb in labels)],
              ([f["label"], _mark(f["differs"]), *(_code_value(f["field"], v) for v in f["values"])]
               for f in code["fields"]),
              title="Code (rank 0's provenance, latest session)")
    if code["packages"]:
        out.gap()
        out.table([Column("PACKAGE"), *(Column(lb) for lb in labels)],
                  ([data(p["name"], "bold"), *(data(v) if v is not None else None for v in p["versions"])]
                   for p in code["packages"]),
                  title=f"Packages that differ: {len(code['packages'])}")


def register(app: typer.Typer) -> None:
    app.command("diff")(diff)


__all__ = ["diff", "register"]
