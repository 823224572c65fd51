"""The one straggler rule, shared by ``nb timers``, the TUI timers view and ``nb watch``.

Of one timer's per-rank mean durations: a rank is a **straggler** when its mean is at
least ``threshold`` (default :data:`STRAGGLER_SPREAD`, 1.2) times the median of the ranks'
means, and more than one rank timed it; the **slowest** rank has the highest mean (the
lowest rank of equal ones); the **spread** is the slowest mean over the median mean.
This is what ``nb timers --help`` and ``man nb`` say.

The rule has two forms, kept side by side and tested to agree: :func:`straggler_rule` on
one timer's ``{rank: mean}`` (standard library only), and :func:`straggler_frames` on a
Polars frame of every timer and rank at once, in vector expressions (``nb timers`` over
8,192 ranks: no Python loop over ranks). Standard library only at import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

#: A rank whose mean is this many times the median of the ranks' means is a straggler.
STRAGGLER_SPREAD = 1.2


def straggler_rule(means: Mapping[int, float], threshold: float = STRAGGLER_SPREAD) -> dict:
    """Apply the straggler rule to one timer.

    Args:
        means: rank -> the rank's mean duration of the timer, in seconds (one rank or more).
        threshold: the factor over the median mean that makes a straggler (>= 1).

    Returns:
        ``{"slowest_rank", "slowest_mean_s", "median_mean_s", "fastest_rank",
        "fastest_mean_s", "spread", "straggler", "stragglers"}``: ``spread`` is None when
        the median is 0 or the ratio is not finite; ``straggler`` is whether the slowest
        rank straggles; ``stragglers`` lists the ranks that do, ascending.

    Raises:
        ValueError: ``means`` is empty.
    """
    if not means:
        raise ValueError("the straggler rule needs the mean of at least one rank")
    values = sorted(means.values())
    k = len(values)
    median = values[k // 2] if k % 2 else (values[k // 2 - 1] + values[k // 2]) / 2
    slow = max(means, key=lambda r: (means[r], -r))
    fast = min(means, key=lambda r: (means[r], r))
    spread = means[slow] / median if median > 0 else None
    return {
        "slowest_rank": slow,
        "slowest_mean_s": means[slow],
        "median_mean_s": median,
        "fastest_rank": fast,
        "fastest_mean_s": means[fast],
        "spread": spread if spread is None or math.isfinite(spread) else None,
        "straggler": bool(spread is not None and spread >= threshold and k > 1),
        "stragglers": sorted(r for r, m in means.items() if median > 0 and m >= threshold * median and k > 1),
    }


def straggler_frames(stats: pl.DataFrame, threshold: float = STRAGGLER_SPREAD) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`straggler_rule` applied to every timer of a frame at once, in Polars
    expressions (the same results, value for value; no Python loop over ranks).

    Args:
        stats: one row per (timer, rank), with at least the columns ``tag`` (String),
            ``rank`` (integer) and ``mean_s`` (Float64, seconds), as
            :meth:`~nblog.reader.RunReader.timer_stats` gives; means are not NaN.
        threshold: the factor over the median mean that makes a straggler (>= 1).

    Returns:
        ``(per_rank, per_timer)``: ``per_rank`` is ``stats`` in its order with a Boolean
        ``straggler`` column (this rank's mean >= threshold x the median mean, more than
        one rank); ``per_timer`` has one row per timer, sorted by tag: tag, ranks (Int64),
        slowest_rank, slowest_mean_s, median_mean_s, fastest_rank, fastest_mean_s, spread
        (null where :func:`straggler_rule` gives None), straggler.
    """
    import polars as pl

    k = pl.len().cast(pl.Int64)
    ordered = pl.col("mean_s").sort()
    # the median as straggler_rule takes it: the middle mean, or the halfway point of the two
    median = pl.when(k % 2 == 1).then(ordered.get(k // 2)).otherwise(
        (ordered.get((k // 2 - 1).clip(0)) + ordered.get(k // 2)) / 2)
    per_timer = (
        stats.group_by("tag")
        .agg(
            k.alias("ranks"),
            pl.col("rank").sort_by("mean_s", "rank", descending=[True, False]).first().alias("slowest_rank"),
            pl.col("mean_s").max().alias("slowest_mean_s"),
            median.alias("median_mean_s"),
            pl.col("rank").sort_by("mean_s", "rank").first().alias("fastest_rank"),
            pl.col("mean_s").min().alias("fastest_mean_s"),
        )
        .sort("tag")
    )
    positive = pl.col("median_mean_s") > 0
    several = pl.col("ranks") > 1
    ratio = pl.col("slowest_mean_s") / pl.col("median_mean_s")  # inf counts as a straggler, as in the rule
    per_timer = per_timer.with_columns(
        pl.when(positive & ratio.is_finite()).then(ratio).alias("spread"),
        (positive & ratio.is_not_nan() & (ratio >= threshold) & several).alias("straggler"),
    )
    m = pl.col("mean_s")
    per_rank = (
        stats.join(per_timer.select("tag", "ranks", "median_mean_s"), on="tag", how="left", maintain_order="left")
        .with_columns(
            (positive & m.is_not_nan() & (m >= threshold * pl.col("median_mean_s")) & several).alias("straggler"))
        .drop("ranks", "median_mean_s")
    )
    return per_rank, per_timer


__all__ = ["STRAGGLER_SPREAD", "straggler_frames", "straggler_rule"]
