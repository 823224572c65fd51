"""Bands across ranks (or runs): points of a tag → bucketed lines and min-max bands.

One concern: turning long point frames (``RunReader.scalars`` / ``timers``, with
``all_ranks=True`` or one rank) into a few thousand numbers to draw, without losing
what matters to the eye:

- smoothing (:func:`nbcli.series.smooth`, the rule of :mod:`._smooth`) comes first,
  per rank on the full series, before any bucketing.
- :class:`Grid` cuts the x axis into at most ``max_buckets`` buckets. When there are
  no more distinct x values than that, each value is its own bucket (nothing is
  merged). Each bucket keeps the mean, the min and the max of its finite points, so a
  single-step spike at step 1.3M of 2M is still the max of its bucket.
- :func:`band` turns per-rank buckets into the line of one run: the median across
  ranks of the ranks' bucket means, with the min of the mins and the max of the maxes
  as its band, and names the rank that lies farthest from the median.
- :func:`points` reads a tag of a run as such a frame.
- :func:`step_band` is the band without buckets, exact at every step, of one value per
  step and rank (:func:`per_step_totals`: a timer's seconds per step); the TUI draws it
  with min/max downsampling (:mod:`._decimate`).

Non-finite points are left out of every bucket and band (the rule of
:mod:`nbcli.series`); :func:`nbcli.series.nonfinite` lists them for the viewers' marks.

Everything here works on frames with columns ``rank``, ``x`` (the step) and ``value``,
plus ``t`` (seconds) when a figure is drawn against wall or active time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from nblog import RunReader


@dataclass(frozen=True)
class Grid:
    """Buckets of an x axis.

    Attributes:
        exact: the distinct x values, sorted, when each is its own bucket; else None.
        lo: the first bucket's start (grid mode).
        width: the width of a bucket in x units (grid mode).
        count: the number of buckets.
    """

    exact: np.ndarray | None
    lo: float
    width: float
    count: int

    @property
    def bucketed(self) -> bool:
        """True when buckets hold several x values (the line is a summary)."""
        return self.exact is None

    def x(self) -> np.ndarray:
        """Each bucket's x: the value itself, or the bucket's start."""
        if self.exact is not None:
            return self.exact
        return self.lo + self.width * np.arange(self.count, dtype=np.float64)

    def assign(self, x: np.ndarray) -> np.ndarray:
        """The bucket index (int64) of each value of ``x``."""
        if self.exact is not None:
            return np.searchsorted(self.exact, x).astype(np.int64)
        idx = np.floor((np.asarray(x, np.float64) - self.lo) / self.width).astype(np.int64)
        return np.clip(idx, 0, self.count - 1)


def make_grid(x: np.ndarray, max_buckets: int, integer: bool = True) -> Grid:
    """A grid over the values ``x`` (any order, finite) with at most ``max_buckets``.

    Args:
        x: the x values of every point that will be bucketed.
        max_buckets: the most buckets (≥ 1).
        integer: x is a step: buckets are whole numbers of steps wide.
    """
    if max_buckets < 1:
        raise ValueError(f"max_buckets must be at least 1, not {max_buckets}")
    x = np.asarray(x)
    if len(x) == 0:
        return Grid(np.zeros(0), 0.0, 1.0, 0)
    s = pl.Series(x)  # hashing, not sorting: 128M steps in a few seconds
    if s.n_unique() <= max_buckets:
        uniq = s.unique().sort().to_numpy()
        return Grid(uniq, float(uniq[0]), 1.0, len(uniq))
    lo, hi = float(cast(float, s.min())), float(cast(float, s.max()))  # a numeric series
    if integer:
        width = float(math.ceil((hi - lo + 1) / max_buckets))
        count = int(math.ceil((hi - lo + 1) / width))
    else:
        width = (hi - lo) / max_buckets or 1.0
        count = max_buckets
    return Grid(None, lo, width, count)


def buckets(frame: pl.DataFrame, grid: Grid) -> pl.DataFrame:
    """Per rank and bucket: mean, min, max and count (n) of the finite points.

    Args:
        frame: columns rank, x, value.
        grid: from :func:`make_grid` over ``frame["x"]`` (or a wider set of x).

    Returns:
        columns rank (Int32), bucket (Int64), mean, min, max (Float64), n (UInt32),
        and t (the mean time of the bucket's points) when ``frame`` has a t column;
        buckets with no finite point are absent.
    """
    ids = grid.assign(frame["x"].to_numpy())
    timed = "t" in frame.columns
    return (
        frame.select(pl.col("rank").cast(pl.Int32), pl.Series("bucket", ids, pl.Int64), "value",
                     *(["t"] if timed else []))
        .filter(pl.col("value").is_finite())
        .group_by("rank", "bucket")
        .agg(
            pl.col("value").mean().alias("mean"),
            pl.col("value").min().alias("min"),
            pl.col("value").max().alias("max"),
            pl.len().alias("n"),
            *([pl.col("t").mean()] if timed else []),
        )
        .sort("rank", "bucket")
    )


@dataclass
class Band:
    """One run's line over a grid: arrays of ``grid.count`` floats, NaN where empty.

    Attributes:
        line: the median across ranks of each rank's bucket mean (one rank: its mean).
        lo, hi: the min and the max of every point of every rank in the bucket.
        ranks: the ranks that have points, ascending.
        outlier: the rank farthest from the median line (mean absolute distance over
            the buckets, each scaled by the band's width there), or None with one rank.
        outlier_line: that rank's bucket means (None without an outlier).
        per_bucket: mean number of points per bucket and rank (for smoothing in viewers).
        at: where each bucket lies on a time axis (the median across ranks of each
            rank's mean time there), when the points had a t column; else None.
    """

    line: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    ranks: list[int]
    outlier: int | None
    outlier_line: np.ndarray | None
    per_bucket: float
    at: np.ndarray | None = None


def band(per_rank: pl.DataFrame, grid: Grid) -> Band:
    """Combine the buckets of :func:`buckets` across ranks (see :class:`Band`)."""
    n = grid.count
    line = np.full(n, np.nan)
    lo = np.full(n, np.nan)
    hi = np.full(n, np.nan)
    if not len(per_rank):
        return Band(line, lo, hi, [], None, None, 1.0, np.full(n, np.nan) if "t" in per_rank.columns else None)
    timed = "t" in per_rank.columns
    across = per_rank.group_by("bucket").agg(
        pl.col("mean").median().alias("line"), pl.col("min").min().alias("lo"), pl.col("max").max().alias("hi"),
        *([pl.col("t").median()] if timed else []),
    )
    idx = across["bucket"].to_numpy()
    line[idx] = across["line"].to_numpy()
    lo[idx] = across["lo"].to_numpy()
    hi[idx] = across["hi"].to_numpy()
    at = None
    if timed:
        at = np.full(n, np.nan)
        at[idx] = across["t"].to_numpy()
    ranks = sorted(per_rank["rank"].unique().to_list())
    per_bucket = float(cast(float, per_rank["n"].mean()))
    outlier = outlier_line = None
    if len(ranks) > 1:
        width = hi - lo
        scale = np.where(width > 0, width, 1.0)
        b = per_rank["bucket"].to_numpy()
        dist = np.abs(per_rank["mean"].to_numpy() - line[b]) / scale[b]
        score = (
            pl.DataFrame({"rank": per_rank["rank"], "d": dist})
            .group_by("rank").agg(pl.col("d").mean())
            .sort(["d", "rank"], descending=[True, False])
        )
        outlier = int(score["rank"][0])
        mine = per_rank.filter(pl.col("rank") == outlier)
        outlier_line = np.full(n, np.nan)
        outlier_line[mine["bucket"].to_numpy()] = mine["mean"].to_numpy()
    return Band(line, lo, hi, ranks, outlier, outlier_line, per_bucket, at)


def per_step_totals(step: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``value`` per step (a timer that runs several times in one step adds up).
    ``step`` need not be sorted. Returns (unique steps ascending, totals)."""
    step = np.asarray(step)
    if not len(step):
        return np.zeros(0, np.int64), np.zeros(0)
    order = np.argsort(step, kind="stable") if np.any(np.diff(step) < 0) else None
    s = step if order is None else step[order]
    v = np.asarray(value, np.float64) if order is None else np.asarray(value, np.float64)[order]
    starts = np.flatnonzero(np.concatenate([[True], np.diff(s) != 0]))
    return s[starts].astype(np.int64), np.add.reduceat(v, starts)


@dataclass(frozen=True)
class StepBand:
    """Per step across ranks: ``lo`` (min), ``median``, ``hi`` (max), and ``ranks``
    (how many ranks had the step)."""

    step: np.ndarray
    lo: np.ndarray
    median: np.ndarray
    hi: np.ndarray
    ranks: np.ndarray


def step_band(per_rank: dict[int, tuple[np.ndarray, np.ndarray]]) -> StepBand:
    """The band across ranks of per-step values: ``per_rank`` maps a rank to (steps,
    values) with one value per step (see :func:`per_step_totals`). A non-finite value
    is left out (the rule of :mod:`nbcli.series`): ``ranks`` counts the finite ones."""
    frames = [
        pl.DataFrame({"step": np.asarray(s, np.int64), "value": np.asarray(v, np.float64)})
        .filter(pl.col("value").is_finite())
        for s, v in per_rank.values()
        if len(s)
    ]
    frames = [f for f in frames if len(f)]
    if not frames:
        e = np.zeros(0)
        return StepBand(np.zeros(0, np.int64), e, e, e, np.zeros(0, np.int64))
    df = (
        pl.concat(frames)
        .group_by("step")
        .agg(
            pl.col("value").min().alias("lo"),
            pl.col("value").median().alias("median"),
            pl.col("value").max().alias("hi"),
            pl.len().alias("ranks"),
        )
        .sort("step")
    )
    return StepBand(
        df["step"].to_numpy(),
        df["lo"].to_numpy(),
        df["median"].to_numpy(),
        df["hi"].to_numpy(),
        df["ranks"].to_numpy(),
    )


def points(reader: RunReader, tag: str, *, rank: int | None, x: str = "step") -> pl.DataFrame:
    """The points of ``tag`` as columns rank, x (the step), value, and t (seconds) for
    a time axis: scalars if the tag is a scalar anywhere in the run, else timers
    (seconds).

    Buckets are always cut along steps, so the ranks of a band are compared at the same
    steps; on a time axis each bucket is drawn at the ranks' median time (``Band.at``).

    Args:
        reader: a :class:`nblog.RunReader`.
        tag: an exact tag name.
        rank: one rank, or None for every rank.
        x: "step"; "wall" (t: seconds since the run's first point); or "active" (t:
            seconds of the sessions' own clocks, queue gaps between sessions left out).

    Returns an empty frame when no rank logged the tag.
    """
    time_col = {"step": None, "wall": "wall_time", "active": "active_time"}[x]
    for read in (reader.scalars, reader.timers):
        df = read(tag, all_ranks=True) if rank is None else read(tag, rank=rank)
        if len(df):
            cols = [pl.col("rank"), pl.col("step").alias("x"), pl.col("value")]
            if time_col == "wall_time":
                cols.append((pl.col("wall_time") - pl.col("wall_time").min()).alias("t"))
            elif time_col:
                cols.append(pl.col(time_col).alias("t"))
            return df.select(cols)
    schema = {"rank": pl.Int32, "x": pl.Int64, "value": pl.Float64} | ({"t": pl.Float64} if time_col else {})
    return pl.DataFrame(schema=schema)
