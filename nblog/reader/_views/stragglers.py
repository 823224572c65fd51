"""Timers across ranks and the one straggler rule, used by every view that names a
straggler: ``nb timers`` (its tables and ``--json``, through
:func:`~nblog.reader.timer_report`), ``nb watch``, ``nb report`` and the TUI's timers
view and heat map. None of them has a rule of its own; ``nb timers --help`` and the
man pages nb-timers(1) and nb-watch(1) say the rule in these words.

The rule, per timer, with the defaults of :class:`StragglerRule`:

1. **Warm-up left out**: the first ``warmup_steps`` (1) steps at which a rank timed the
   timer in each of its sessions (compilation, allocator and cache warm-up: one 8 ms
   first step beside a 41 µs median is no straggler).
2. **Failed sessions cut**: in a session where a rank failed (an uncaught exception at
   step S) or died (its log ended without an END record; S is its last timed step
   there), no rank's points at steps >= S count: ranks blocked in a collective on a
   dead rank time the wait, not their own work. The failures come from the caller
   (:func:`~nblog.reader.lowlevel.failed_ranks`); what was cut is returned (``cut``).
3. **Per rank, a statistic one slow step cannot move**: the rank's durations per step
   (a timer's occurrences at one step add up) and their *lower median*: the middle
   value, of an even count the lower of the two middle ones (of two steps, the faster).
   A rank needs :data:`MIN_STEPS` (2) such steps to be judged; with the warm-up step
   that is 3 steps of data, so a rank slower on every step is named after 3 steps.
4. **The reference**: the median of the judged ranks' lower medians.
5. **Straggler**: a judged rank whose lower median is at least ``threshold`` (1.2) times
   the reference **and** at least ``floor_s`` (5 ms) above it, when two or more ranks
   are judged. The floor keeps microsecond timers' jitter (41 µs beside 50 µs) from
   being called a straggler.

The **slowest** rank is the judged rank with the highest lower median (the lowest rank
of equal ones); the **spread** is its lower median over the reference.

:func:`timer_frames` applies the rule to a run: every rank's timer points read once, the
ranks that failed or died from the same files (:func:`~nblog.reader.lowlevel.failed_ranks`).

Beside the rule, :func:`straggler_frames` gives each rank's descriptive statistics of
every occurrence in the window (count, mean, p50, p95, max, total: warm-up and cut
points included, they are data) — the table ``nb timers`` and the TUI print.
Everything is Polars expressions over the frame of all ranks (8,192 ranks: no Python
loop over ranks). Standard library only at import.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from .._file.select import tag_matcher
from .._runfiles.failures import failed_ranks

if TYPE_CHECKING:
    import polars as pl

    from .reader import RunReader

#: Default ``threshold``: a straggler's lower median is at least this many times the reference.
STRAGGLER_SPREAD = 1.2
#: Default ``floor_s``: ... and at least this many seconds above it.
STRAGGLER_FLOOR_S = 0.005
#: Default ``warmup_steps``: steps of each rank's session left out at its start.
STRAGGLER_WARMUP_STEPS = 1
#: Steps (after the warm-up and the cut) a rank needs to be judged.
MIN_STEPS = 2


@dataclass(frozen=True)
class StragglerRule:
    """The parameters of the straggler rule (see the module docstring).

    Attributes:
        threshold: factor over the reference (the median of the ranks' lower medians);
            at least 1.
        floor_s: seconds a straggler is at least above the reference; >= 0.
        warmup_steps: the first N steps at which a rank timed a timer in each session
            are left out; >= 0.

    Raises:
        ValueError: a value out of range (the message names it).
    """

    threshold: float = STRAGGLER_SPREAD
    floor_s: float = STRAGGLER_FLOOR_S
    warmup_steps: int = STRAGGLER_WARMUP_STEPS

    def __post_init__(self) -> None:
        if not (isinstance(self.threshold, (int, float)) and math.isfinite(self.threshold) and self.threshold >= 1):
            raise ValueError(f"threshold must be a finite number >= 1, not {self.threshold!r}")
        if not (isinstance(self.floor_s, (int, float)) and math.isfinite(self.floor_s) and self.floor_s >= 0):
            raise ValueError(f"floor_s must be a finite number of seconds >= 0, not {self.floor_s!r}")
        if not (isinstance(self.warmup_steps, int) and not isinstance(self.warmup_steps, bool)
                and self.warmup_steps >= 0):
            raise ValueError(f"warmup_steps must be an integer >= 0, not {self.warmup_steps!r}")


class TimerFrames(NamedTuple):
    """What :func:`straggler_frames` returns.

    Attributes:
        ranks: one row per (timer, rank), by tag then rank.
        timers: one row per timer, by tag.
        cut: one row per session where points were cut because a rank failed or
            died: session, step (points at steps >= it left out of the rule), rank
            (the rank whose failure or death set it); by session.
    """

    ranks: pl.DataFrame
    timers: pl.DataFrame
    cut: pl.DataFrame


def straggler_frames(points: pl.DataFrame, rule: StragglerRule | None = None, *,
                     failed: Iterable[tuple[int, int, int | None]] = (),
                     last_steps: int | None = None) -> TimerFrames:
    """Timers across ranks with the straggler rule (the module docstring) applied to
    every timer and rank of ``points`` at once: the one implementation of the rule.

    Args:
        points: timer occurrences with at least the columns ``tag`` (String),
            ``rank``, ``session`` (integers), ``step`` (Int64) and ``value`` (Float64,
            seconds), as :meth:`~nblog.reader.RunReader.timers` gives them (any order).
        rule: the parameters (default ``StragglerRule()``).
        failed: where ranks stopped: ``(rank, session, step)`` of a failure at
            ``step``, or ``(rank, session, None)`` for a session that ended without
            an END record (its last step in ``points`` counts), earliest first (of
            equal steps, ``cut`` names the first); see :func:`~nblog.reader.lowlevel.failed_ranks`.
        last_steps: only each rank's last N steps (the highest step of any timer of
            ``points`` on that rank, minus N, exclusive), as
            :meth:`~nblog.reader.RunReader.timer_stats`; the warm-up is still taken
            from each session's first steps.

    Returns:
        :class:`TimerFrames`. ``ranks``: tag, rank, count, mean_s, p50_s, p95_s,
        max_s, total_s (every occurrence in the window, warm-up and cut points
        included: they are data; :func:`timer_stats_of`), steps (UInt32: steps the
        rule judged), step_s (the lower median per step, seconds; null with fewer
        than :data:`MIN_STEPS` steps), straggler (Boolean). ``timers``: tag, ranks
        (ranks that timed it in the window), judged (ranks with a step_s),
        slowest_rank, slowest_s, median_s (the reference), fastest_rank, fastest_s
        (null where no rank is judged), spread (slowest_s / median_s; null where the
        median is 0 or the ratio is not finite), stragglers (how many), straggler
        (any). ``cut``: see :class:`TimerFrames`.
    """
    import polars as pl

    rule = rule or StragglerRule()
    step, value = pl.col("step"), pl.col("value")
    cut = _cut(points, failed)
    # the tag as a category: windows and groups on its integer codes (a third faster)
    lf = points.lazy().select(pl.col("tag").cast(pl.Categorical), "rank", "session", "step", "value")
    ok = value.is_finite()
    if len(cut):
        at = cut.lazy().select(pl.col("session").cast(points.schema["session"]), pl.col("step").alias("_cut"))
        lf = lf.join(at, on="session", how="left")
        ok &= pl.col("_cut").is_null() | (step < pl.col("_cut"))
    # warm-up: the first steps of each session of a timer and rank (of the session, not
    # of the window). Where every point is of one session and there is no window, and a
    # group's steps rise row by row, they are its first rows: sliced off in the groups
    # below (a window expression over the whole frame costs a third more)
    w = rule.warmup_steps
    warm = step.rank("dense") > w
    inside = w > 0 and last_steps is None and points["session"].n_unique() <= 1
    if w and not inside:
        ok &= warm.over("tag", "rank", "session")
    lf = lf.with_columns(ok.alias("_judged"))
    if last_steps is not None:
        lf = lf.filter(step > step.max().over("rank") - last_steps)
    j = pl.col("_judged")
    if inside:
        j, values = j.slice(w), value.slice(w)
        rise = step.diff().min()  # of every row: the first w rows are the first w steps
    else:
        values = value
        rise = step.filter(j).diff().min()
    per_rank = lf.group_by("tag", "rank").agg(
        *_stat_exprs(),
        j.sum().cast(pl.UInt32).alias("steps"),
        # one point a step, steps rising (the usual timer): the points are the steps
        rise.alias("_rise"),
        values.filter(j).quantile(0.5, "lower").alias("step_s"),
    ).collect()
    if len(per_rank) and not per_rank.select((pl.col("_rise") > 0) | pl.col("_rise").is_null()).to_series().all():
        # a timer timed more than once a step somewhere: the durations of a step add up
        if inside:
            lf = lf.with_columns(pl.col("_judged") & warm.over("tag", "rank", "session"))
        per_step = (lf.filter(pl.col("_judged")).group_by("tag", "rank", "step").agg(value.sum())
                    .group_by("tag", "rank").agg(pl.len().cast(pl.UInt32).alias("steps"),
                                                 value.quantile(0.5, "lower").alias("step_s"))).collect()
        per_rank = (per_rank.drop("steps", "step_s").join(per_step, on=["tag", "rank"], how="left")
                    .with_columns(pl.col("steps").fill_null(0)))
    s = pl.col("step_s")
    per_rank = per_rank.with_columns(pl.col("tag").cast(pl.String),
                                     pl.when(pl.col("steps") >= MIN_STEPS).then(s).alias("step_s")).drop("_rise")
    counts = per_rank.group_by("tag").agg(pl.len().cast(pl.Int64).alias("ranks"),
                                          s.count().cast(pl.Int64).alias("judged"))
    ends = (per_rank.filter(s.is_not_null()).group_by("tag")
            .agg(pl.col("rank").sort_by("step_s", "rank", descending=[True, False]).first().alias("slowest_rank"),
                 s.max().alias("slowest_s"),
                 s.median().alias("median_s"),
                 pl.col("rank").sort_by("step_s", "rank").first().alias("fastest_rank"),
                 s.min().alias("fastest_s")))
    per_timer = counts.join(ends, on="tag", how="left")
    ref = pl.col("median_s")
    flag = ((pl.col("judged") >= 2) & s.is_not_null() & (s >= rule.threshold * ref)
            & (s - ref >= rule.floor_s)).fill_null(False)
    per_rank = (per_rank.join(per_timer.select("tag", "judged", "median_s"), on="tag", how="left")
                .with_columns(flag.alias("straggler"))
                .drop("judged", "median_s")
                .sort("tag", "rank"))
    ratio = pl.col("slowest_s") / ref
    per_timer = (per_timer.join(per_rank.group_by("tag").agg(pl.col("straggler").sum().cast(pl.Int64)
                                                              .alias("stragglers")), on="tag", how="left")
                 .with_columns(pl.when((ref > 0) & ratio.is_finite()).then(ratio).alias("spread"),
                               (pl.col("stragglers") > 0).alias("straggler"))
                 .select("tag", "ranks", "judged", "slowest_rank", "slowest_s", "median_s", "fastest_rank",
                         "fastest_s", "spread", "stragglers", "straggler")
                 .sort("tag"))
    return TimerFrames(per_rank, per_timer, cut)


def _cut(points: pl.DataFrame, failed: Iterable[tuple[int, int, int | None]]) -> pl.DataFrame:
    """Per session where a rank failed or died: the lowest step from which points do
    not count, and that rank (see :func:`straggler_frames`)."""
    import polars as pl

    schema = {"rank": pl.Int64, "session": pl.Int64, "step": pl.Int64}
    rows = list(failed)
    if not rows:
        return pl.DataFrame(schema={"session": pl.Int64, "step": pl.Int64, "rank": pl.Int64})
    f = pl.DataFrame(rows, schema=schema, orient="row").with_row_index("_order")
    known = f.filter(pl.col("step").is_not_null())
    died = f.filter(pl.col("step").is_null()).drop("step")
    if len(died):  # a session that ended without an END record: from its last timed step on
        last = (points.select(pl.col("rank").cast(pl.Int64), pl.col("session").cast(pl.Int64), "step")
                .join(died, on=["rank", "session"], how="inner")
                .group_by("rank", "session").agg(pl.col("step").max(), pl.col("_order").first()))
        known = pl.concat([known, last.select(known.columns)])
    # the lowest step of each session; of equal ones, the first given (the earliest failure)
    return (known.sort("step", "_order").group_by("session", maintain_order=True).first()
            .select("session", "step", "rank").sort("session"))


def _stat_exprs() -> list[pl.Expr]:
    """count, mean_s, p50_s, p95_s (linear), max_s, total_s of ``value``: the statistics
    of every occurrence of a timer on a rank."""
    import polars as pl

    v = pl.col("value")
    return [pl.len().alias("count"), v.mean().alias("mean_s"), v.quantile(0.5, "linear").alias("p50_s"),
            v.quantile(0.95, "linear").alias("p95_s"), v.max().alias("max_s"), v.sum().alias("total_s")]


def timer_stats_of(points: pl.DataFrame, last_steps: int | None = None) -> pl.DataFrame:
    """Per timer and rank of ``points`` (columns as :meth:`~nblog.reader.RunReader.timers`):
    count, mean_s, p50_s, p95_s, max_s, total_s (seconds), by tag then rank;
    ``last_steps`` keeps only each rank's last N steps (over every timer of the
    frame). What :meth:`~nblog.reader.RunReader.timer_stats` returns, and the first
    columns of :func:`straggler_frames`' ``ranks``."""
    import polars as pl

    df = points
    if last_steps is not None and len(df):
        df = df.filter(pl.col("step") > pl.col("step").max().over("rank") - last_steps)
    return df.group_by("tag", "rank").agg(*_stat_exprs()).sort("tag", "rank")


def timer_frames(
    reader: RunReader,
    tags: str | Iterable[str] | None = None,
    *,
    last_steps: int | None = None,
    rule: StragglerRule | None = None,
) -> TimerFrames | None:
    """Timers across ranks as frames, the straggler rule applied: every rank's timer
    points read once, the ranks that failed or died (:func:`failed_ranks` of the run's
    files), :func:`~nblog.reader.straggler_frames`. What ``nb timers``, ``nb watch``,
    ``nb report`` and :func:`timer_report` show.

    Args:
        tags: shell-style globs selecting timers (None: all).
        last_steps: only each rank's last N steps of the timers selected.
        rule: the straggler rule's parameters (default ``StragglerRule()``).

    Returns:
        :class:`~nblog.reader.TimerFrames`, or None when no timer (matching ``tags``)
        was logged.
    """
    import polars as pl

    points = reader.timers(None, all_ranks=True)  # one pass over every rank's files
    if tags:
        match = tag_matcher(tags)
        names = sorted(t for t in points["tag"].unique().to_list() if match(t))
        points = points.filter(pl.col("tag").is_in(names))
    if not len(points):
        return None
    return straggler_frames(points, rule, failed=_failed_in(reader), last_steps=last_steps)


def _failed_in(reader: RunReader) -> list[tuple[int, int, int | None]]:
    """:func:`failed_ranks` of the rank files ``reader`` has read (after
    ``timers(all_ranks=True)``: every rank, without listing the folder again)."""
    failures, sessions = [], []
    for r in reader._files.ranks():
        for s, lf in reader._rank_files(r):
            start = lf.header.get("wall_start")
            last = start + lf.max_ms / 1000.0 if isinstance(start, (int, float)) and not isinstance(start, bool) else None
            sessions.append({"rank": r, "session": s, "closed": lf.end is not None, "host": lf.header.get("host"),
                             "pid": lf.header.get("pid"), "last_wall": last})
            failures += [{"rank": r, "session": s, "step": ev.get("step"), "wall": ev.get("wall")}
                         for ev in lf.events if ev.get("kind") == "failure"]
    return failed_ranks(failures, sessions, reader.meta.get("status"))



__all__ = ["MIN_STEPS", "STRAGGLER_FLOOR_S", "STRAGGLER_SPREAD", "STRAGGLER_WARMUP_STEPS", "StragglerRule",
           "TimerFrames", "straggler_frames", "timer_frames", "timer_stats_of"]
