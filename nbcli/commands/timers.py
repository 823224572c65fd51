"""``nb timers RUN``: timers across ranks, the slowest rank and the straggler spread."""

from __future__ import annotations

from typing import Annotated

import typer

from .._options import MAX_COUNT, Json, Root, RunArg, Tags
from .._output import Column, Output, data, emit_json, fmt_seconds, info, styled


def timers(
    run: RunArg,
    tags: Tags = None,
    last_steps: Annotated[
        int | None,
        typer.Option("--last-steps", min=1, max=MAX_COUNT, metavar="N", help="Only each rank's last N steps.", show_default=False),
    ] = None,
    threshold: Annotated[
        float,
        typer.Option("--threshold", min=1.0, metavar="X",
                     help="Flag a straggler when a rank's mean is at least X times the median of the ranks' means."),
    ] = 1.2,
    root: Root = None,
    as_json: Json = False,
) -> None:
    """Per timer and rank: count, mean, p50, p95, max (seconds); per timer: the slowest
    rank and the spread (slowest mean / median mean), stragglers flagged.

    Ranks log their own timings with run.timer(..., all_ranks=True) or
    nb.init(timing_all_ranks=True); aggregation happens here, at read time.
    """
    from nblog.reader import RunReader, timer_report

    report = timer_report(RunReader(run, root), tags or None, last_steps=last_steps, threshold=threshold)
    if as_json:
        emit_json(report)
        return
    if not report["timers"]:
        info("no timers logged in this run" + (" match --tag" if tags else ""))
        return
    out = Output()
    out.table(
        [Column("TIMER"), Column("RANK", True), Column("COUNT", True), Column("MEAN", True), Column("P50", True),
         Column("P95", True), Column("MAX", True), Column("TOTAL", True), Column("STRAGGLER")],
        (
            [data(r["tag"], "bold"), r["rank"], r["count"], fmt_seconds(r["mean_s"]), fmt_seconds(r["p50_s"]),
             fmt_seconds(r["p95_s"]), fmt_seconds(r["max_s"]), fmt_seconds(r["total_s"]),
             styled("yes", "red bold") if r["straggler"] else ""]
            for r in report["ranks"]
        ),
        title="Timers per rank (seconds)",
    )
    out.gap()
    out.table(
        [Column("TIMER"), Column("RANKS", True), Column("SLOWEST RANK", True), Column("SLOWEST MEAN", True),
         Column("MEDIAN MEAN", True), Column("SPREAD", True), Column("STRAGGLER")],
        (
            [data(t["tag"], "bold"), t["ranks"], t["slowest_rank"], fmt_seconds(t["slowest_mean_s"]),
             fmt_seconds(t["median_mean_s"]), f"{t['spread']:.2f}x" if t["spread"] is not None else None,
             styled("yes", "red bold") if t["straggler"] else "no"]
            for t in report["timers"]
        ),
        title=f"Across ranks (spread = slowest mean / median mean; straggler at >= {threshold:g}x)",
    )
    if (report["world_size"] or 1) > 1 and all(t["ranks"] == 1 for t in report["timers"]):
        info("only one rank logged timers: time every rank with run.timer(..., all_ranks=True) or "
             "nb.init(timing_all_ranks=True) to compare ranks")


def register(app: typer.Typer) -> None:
    app.command("timers")(timers)
