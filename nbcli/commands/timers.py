"""``nb timers RUN``: timers across ranks, the slowest rank and the straggler spread; the
per-rank table shows each timer's slowest ranks (``--all-ranks``: every rank)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from nblog.reader import plural

from .._options import MAX_COUNT, Json, Root, RunArg, Tags
from .._output import Column, Output, data, emit_json, fmt_seconds, info, styled

if TYPE_CHECKING:
    import polars as pl

    from nblog.reader import RunReader

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
                     help="Flag a straggler when a rank's mean is at least X times the median of the ranks' means."),
    ] = 1.2,
    slowest: Annotated[
        int,
        typer.Option("--slowest", min=1, max=MAX_COUNT, metavar="N",
                     help="Per timer, the N slowest ranks in the per-rank table (every rank when no timer has more)."),
    ] = SLOWEST,
    all_ranks: Annotated[
        bool, typer.Option("--all-ranks", help="Every rank's row in the per-rank table, not only the slowest."),
    ] = False,
    root: Root = None,
    as_json: Json = False,
) -> None:
    """Per timer: the slowest rank and the spread (slowest mean / median mean),
    stragglers flagged; per timer and rank: count, mean, p50, p95, max (seconds), for
    the slowest ranks (--all-ranks: every rank; --json: every rank).

    Ranks log their own timings with run.timer(..., all_ranks=True) or
    nb.init(timing_all_ranks=True); aggregation happens here, at read time.
    """
    from nblog.reader import RunReader, timer_report

    reader = RunReader(run, root)
    if as_json:
        emit_json(timer_report(reader, tags or None, last_steps=last_steps, threshold=threshold))
        return
    per_rank, per_timer = _frames(reader, tags or None, last_steps, threshold)
    if per_timer is None or not len(per_timer):
        info("no timers logged in this run" + (" match --tag" if tags else ""))
        return
    widest = int(per_timer["ranks"].max())  # type: ignore[arg-type]  # an integer column, not empty
    if all_ranks or widest <= slowest:
        shown, title = per_rank, "Timers per rank (seconds)"
    else:
        import polars as pl

        shown = (per_rank.sort("tag", "mean_s", "rank", descending=[False, True, False], maintain_order=True)
                 .group_by("tag", maintain_order=True).head(slowest))
        title = f"The {plural(slowest, 'slowest rank', sep=True)} of each timer (seconds)"
        many = per_rank.group_by("tag").agg(pl.col("straggler").sum()).filter(pl.col("straggler") > slowest)
    out = Output()
    out.table(
        [Column("TIMER"), Column("RANK", True), Column("COUNT", True), Column("MEAN", True), Column("P50", True),
         Column("P95", True), Column("MAX", True), Column("TOTAL", True), Column("STRAGGLER")],
        (
            [data(tag, "bold"), rank, count, fmt_seconds(mean), fmt_seconds(p50), fmt_seconds(p95),
             fmt_seconds(top), fmt_seconds(total), styled("yes", "red bold") if flag else ""]
            for tag, rank, count, mean, p50, p95, top, total, flag in shown.select(
                "tag", "rank", "count", "mean_s", "p50_s", "p95_s", "max_s", "total_s", "straggler").iter_rows()
        ),
        title=title,
    )
    out.gap()
    out.table(
        [Column("TIMER"), Column("RANKS", True), Column("SLOWEST RANK", True), Column("SLOWEST MEAN", True),
         Column("MEDIAN MEAN", True), Column("SPREAD", True), Column("STRAGGLER")],
        (
            [data(t["tag"], "bold"), t["ranks"], t["slowest_rank"], fmt_seconds(t["slowest_mean_s"]),
             fmt_seconds(t["median_mean_s"]), f"{t['spread']:.2f}x" if t["spread"] is not None else None,
             styled("yes", "red bold") if t["straggler"] else "no"]
            for t in per_timer.iter_rows(named=True)
        ),
        title=f"Across ranks (spread = slowest mean / median mean; straggler at >= {threshold:g}x)",
    )
    if shown is not per_rank:
        more = "".join(f"; {tag}: {plural(n, 'straggler', sep=True)}" for tag, n in many.sort("tag").iter_rows())
        info(f"the per-rank table shows each timer's {slowest:,} slowest of up to {plural(widest, 'rank', sep=True)}{more}; "
             "--all-ranks shows every rank, --json gives every rank")
    if (reader.meta.get("world_size") or 1) > 1 and widest == 1:
        info("only one rank logged timers: time every rank with run.timer(..., all_ranks=True) or "
             "nb.init(timing_all_ranks=True) to compare ranks")


def _frames(reader: RunReader, tags: list[str] | None, last_steps: int | None,
            threshold: float) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """``(per_rank, per_timer)`` of :func:`nblog.reader.straggler_frames` over every rank's
    :meth:`~nblog.reader.RunReader.timer_stats` (the numbers ``--json`` gives, as frames:
    no row per rank is made in Python); ``per_timer`` is None when no timer matches."""
    import polars as pl

    from nblog.reader import straggler_frames, tag_matcher

    stats = reader.timer_stats(None, all_ranks=True, last_steps=None if tags else last_steps)
    if tags:  # matched against the timers read, in one pass over every rank's files
        match = tag_matcher(tags)
        names = sorted(t for t in stats["tag"].unique().to_list() if match(t))
        if not names:
            return stats, None
        # --last-steps counts each rank's steps over the timers selected, as timer_report does
        stats = (stats.filter(pl.col("tag").is_in(names)) if last_steps is None
                 else reader.timer_stats(names, all_ranks=True, last_steps=last_steps))
    if not len(stats):
        return stats, None
    return straggler_frames(stats, threshold)


def register(app: typer.Typer) -> None:
    app.command("timers")(timers)
