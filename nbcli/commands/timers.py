"""``nb timers RUN``: timers across ranks, the slowest rank and the stragglers by the one
rule (:func:`nblog.reader.straggler_frames`); the per-rank table shows each timer's slowest
ranks (``--all-ranks``: every rank)."""

from __future__ import annotations

from typing import Annotated

import typer

from nblog.reader.lowlevel import (
    STRAGGLER_FLOOR_S,
    STRAGGLER_SPREAD,
    STRAGGLER_WARMUP_STEPS,
    plural,
)

from .._options import MAX_COUNT, AllowDamaged, Json, Root, RunArg, Tags
from .._output import Column, Output, data, emit_json, fmt_seconds, info, styled

#: Rows per timer in the per-rank table by default: its slowest ranks (8,192 ranks made
#: 32,768 rows, too many to read and seconds to print).
SLOWEST = 10


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
                     help="Straggler: a rank's lower median per step at least X times the median of the ranks'."),
    ] = STRAGGLER_SPREAD,
    floor: Annotated[
        float,
        typer.Option("--floor", min=0.0, metavar="SECONDS",
                     help="Straggler: ... and at least SECONDS above it (microsecond timers' jitter is no straggler)."),
    ] = STRAGGLER_FLOOR_S,
    warmup: Annotated[
        int,
        typer.Option("--warmup", min=0, max=MAX_COUNT, metavar="N",
                     help="Straggler: the first N steps of each rank's session left out (warm-up)."),
    ] = STRAGGLER_WARMUP_STEPS,
    slowest: Annotated[
        int,
        typer.Option("--slowest", min=1, max=MAX_COUNT, metavar="N",
                     help="Per timer, the N slowest ranks in the per-rank table (every rank when no timer has more)."),
    ] = SLOWEST,
    all_ranks: Annotated[
        bool, typer.Option("--all-ranks", help="Every rank's row in the per-rank table, not only the slowest."),
    ] = False,
    root: Root = None,
    allow_damaged: AllowDamaged = False,
    as_json: Json = False,
) -> None:
    """Per timer: the slowest rank, the median of the ranks and the spread, stragglers
    flagged; per timer and rank: count, mean, p50, p95, max, total (every occurrence)
    and the lower median per step the rule judges, for the slowest ranks (--all-ranks:
    every rank; --json: every rank).

    A rank is a straggler in a timer when its lower median per step (the first --warmup
    steps of each session left out, and, in a session where a rank failed or died,
    the steps from there on; at least 2 steps) is at least --threshold times the median
    of the ranks' and at least --floor seconds above it. One slow step cannot make a
    straggler; a rank slower on every step is named after 3 steps.

    Ranks log their own timings with run.timer(..., all_ranks=True) or
    nb.init(timing_all_ranks=True); aggregation happens here, at read time.
    """
    from nblog.reader import RunReader, StragglerRule, timer_report
    from nblog.reader.lowlevel import timer_frames

    try:
        rule = StragglerRule(threshold, floor, warmup)
    except ValueError as err:  # not finite: typer's min/max let inf and nan through
        raise typer.BadParameter(str(err)) from None
    reader = RunReader(run, root)
    if as_json:
        emit_json(timer_report(reader, tags or None, last_steps=last_steps, rule=rule))
        return
    frames = timer_frames(reader, tags or None, last_steps=last_steps, rule=rule)
    if frames is None:
        info("no timers logged in this run" + (" match --tag" if tags else ""))
        return
    per_rank, per_timer = frames.ranks, frames.timers
    widest = int(per_timer["ranks"].max())  # type: ignore[arg-type]  # an integer column, not empty
    if all_ranks or widest <= slowest:
        shown, title = per_rank, "Timers per rank (seconds)"
    else:
        import polars as pl

        shown = (per_rank.sort(["tag", "step_s", "mean_s", "rank"], descending=[False, True, True, False],
                               nulls_last=True, maintain_order=True)
                 .group_by("tag", maintain_order=True).head(slowest))
        title = f"The {plural(slowest, 'slowest rank', sep=True)} of each timer (seconds; by lower median per step)"
        many = per_timer.filter(pl.col("stragglers") > slowest).select("tag", "stragglers")
    out = Output()
    out.table(
        [Column("TIMER"), Column("RANK", True), Column("COUNT", True), Column("MEAN", True), Column("P50", True),
         Column("P95", True), Column("MAX", True), Column("TOTAL", True), Column("MEDIAN/STEP", True),
         Column("STRAGGLER")],
        (
            [data(tag, "bold"), rank, count, fmt_seconds(mean), fmt_seconds(p50), fmt_seconds(p95),
             fmt_seconds(top), fmt_seconds(total), fmt_seconds(step_s), styled("yes", "red bold") if flag else ""]
            for tag, rank, count, mean, p50, p95, top, total, step_s, flag in shown.select(
                "tag", "rank", "count", "mean_s", "p50_s", "p95_s", "max_s", "total_s", "step_s",
                "straggler").iter_rows()
        ),
        title=title,
    )
    out.gap()
    out.table(
        [Column("TIMER"), Column("RANKS", True), Column("SLOWEST RANK", True), Column("SLOWEST", True),
         Column("MEDIAN", True), Column("SPREAD", True), Column("STRAGGLERS", True), Column("STRAGGLER")],
        (
            [data(t["tag"], "bold"), t["ranks"], t["slowest_rank"], fmt_seconds(t["slowest_s"]),
             fmt_seconds(t["median_s"]), f"{t['spread']:.2f}x" if t["spread"] is not None else None,
             t["stragglers"], styled("yes", "red bold") if t["straggler"] else "no"]
            for t in per_timer.iter_rows(named=True)
        ),
        title=(f"Across ranks (lower median per step; straggler at >= {threshold:g}x the median and "
               f">= {fmt_seconds(floor)} above it; spread = slowest / median)"),
    )
    if shown is not per_rank:
        more = "".join(f"; {tag}: {plural(n, 'straggler', sep=True)}" for tag, n in many.sort("tag").iter_rows())
        info(f"the per-rank table shows each timer's {slowest:,} slowest of up to {plural(widest, 'rank', sep=True)}{more}; "
             "--all-ranks shows every rank, --json gives every rank")
    for c in frames.cut.iter_rows(named=True):
        info(f"session {c['session']}: steps {c['step']:,} and later left out of the straggler rule "
             f"(rank {c['rank']} failed or died there; ranks waiting on it are not stragglers)")
    unjudged = per_timer.filter(per_timer["judged"] < per_timer["ranks"])["tag"].to_list()
    if unjudged:
        info(f"{', '.join(unjudged[:5])}{' ...' if len(unjudged) > 5 else ''}: ranks with fewer than 2 steps after "
             "the warm-up (and before a failure) are not judged (MEDIAN/STEP empty)")
    if (reader.meta.get("world_size") or 1) > 1 and widest == 1:
        info("only one rank logged timers: time every rank with run.timer(..., all_ranks=True) or "
             "nb.init(timing_all_ranks=True) to compare ranks")


def register(app: typer.Typer) -> None:
    app.command("timers")(timers)
