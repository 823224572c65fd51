"""``nb hang RUN``: the roll call of a stalled run, from the ranks' hang dumps.

Reads ``stacks.r<R>.s<S>.<n>.jsonl`` (``nblog.reader.hang_report``): ranks grouped by
identical stack, each rank's step and last collective, and the suspects, the ranks the
others wait for. Exit 0 when the run is not stalled, 1 when it is.
"""

from __future__ import annotations

import typer

from nblog.reader.lowlevel import plural

from .._options import Json, Root, RunArg
from .._output import Column, Output, data, emit_json, fmt_seconds


def _collective(c: dict | None) -> str:
    return "-" if c is None else f"#{c['seq']} {c['op']} ({c['state']})"


def hang(run: RunArg, root: Root = None, as_json: Json = False) -> None:
    """Say whether RUN is stalled, where each rank stands and which rank the others
    wait for, from the stacks and collective records each rank wrote into the run
    folder when its step stopped moving (NB_HANG_S) or on SIGUSR1.

    Exit status: 0 not stalled (no dumps, dumps on request, or stalls that ended),
    1 stalled."""
    from nblog.reader import hang_report, resolve_run

    folder = resolve_run(run, root)  # raises RunNotFoundError, saying where it looked
    report = hang_report(folder)
    if as_json:
        emit_json(report)
    else:
        _print(report)
    if report["stalled"]:
        raise typer.Exit(1)


def _print(report: dict) -> None:
    out = Output()
    ranks = report["ranks"]
    if report["stalled"]:
        head = f"stalled for {fmt_seconds(report['since_s'])}"
    else:
        head = "not stalled"
    suspects = report["suspects"]
    out.fields([
        ("state", data(head, "bold red" if report["stalled"] else "green")),
        ("suspects", data(", ".join(str(r) for r in suspects) if suspects else "-", "bold" if suspects else "")),
        ("reason", data(report["reason"])),
        ("dumps", plural(len(ranks), "rank")),
    ], title="Hang")
    if not ranks:
        return
    out.gap()
    out.table(
        [Column("RANKS", True), Column("WHERE")],
        ([len(g["ranks"]), data(f"{_span(g['ranks'])}: {g['where']}")] for g in report["groups"]),
        title="Stacks (ranks grouped by identical main-thread stack)",
    )
    out.gap()
    shown = sorted(ranks, key=int)
    if len(shown) > 64:  # the suspects, then the first ranks
        keep = {str(r) for r in suspects} | set(shown[:32])
        shown = [r for r in shown if r in keep]
    out.table(
        [Column("RANK", True), Column("HOST"), Column("STEP", True), Column("LAST COLLECTIVE"), Column("DUMP")],
        ([int(r), data(ranks[r]["host"] or "-"), ranks[r]["step"], data(_collective(ranks[r]["last_collective"])),
          data(ranks[r]["kind"] or "-")] for r in shown),
        title="Ranks" + (f" (suspects and the first 32 of {len(ranks):,})" if len(shown) < len(ranks) else ""),
    )
    for r in suspects:
        rec = ranks.get(str(r))
        if rec and rec["stack"]:
            out.gap()
            out.block("\n".join(rec["stack"]), title=f"Rank {r}: main thread, innermost first")


def _span(ranks: list[int]) -> str:
    """``0-3,5,7-9``: ranks as ranges."""
    parts: list[str] = []
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    text = ",".join(parts)
    return text if len(text) <= 60 else text[:57] + "..."


def register(app: typer.Typer) -> None:
    app.command("hang")(hang)
