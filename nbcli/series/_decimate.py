"""Numeric helpers for viewers: display downsampling, bands across ranks.

None of these change data on disk or in a reader's frames; they prepare what a
viewer draws. Imports numpy (``import nblog`` does not import this module); polars
only in :func:`step_band`.

- :func:`minmax_indices` — indices of the min and max of each bucket: a long series
  drawn with a few hundred points that keeps every spike. Display only.
- :func:`nonfinite_indices` — where NaN and ±inf are (viewers draw them as markers).
- :func:`session_starts` — where a new session begins along an x axis.
- :func:`step_band` — per step, the min / median / max across ranks of per-rank totals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def minmax_indices(y: np.ndarray, buckets: int) -> np.ndarray:
    """Sorted indices of the finite points to draw so that ``y`` looks right at
    ``buckets`` columns: every finite point when there are few, else the minimum and
    maximum of each of ``buckets`` equal runs of points (min/max per bucket: a spike
    is never averaged away), plus the first and the last finite point (a live curve
    reaches the newest step). Display only — never a way to read data."""
    y = np.asarray(y, dtype=np.float64)
    n = len(y)
    finite = np.isfinite(y)
    if n <= 2 * max(buckets, 1):
        return np.flatnonzero(finite)
    k = -(-n // buckets)
    m = -(-n // k)
    pad = m * k - n
    lo = np.where(finite, y, np.inf)
    hi = np.where(finite, y, -np.inf)
    if pad:
        lo = np.concatenate([lo, np.full(pad, np.inf)])
        hi = np.concatenate([hi, np.full(pad, -np.inf)])
    lo = lo.reshape(m, k)
    hi = hi.reshape(m, k)
    amin = lo.argmin(axis=1)
    amax = hi.argmax(axis=1)
    base = np.arange(m) * k
    ok = np.isfinite(lo[np.arange(m), amin])
    fin = np.flatnonzero(finite[:k]), np.flatnonzero(finite[-k:])
    ends = [fin[0][:1], n - k + fin[1][-1:]]  # the first and the newest point stay drawn
    idx = np.concatenate([(base + amin)[ok], (base + amax)[ok], *ends])
    return np.unique(idx)


def nonfinite_indices(y: np.ndarray) -> dict[str, np.ndarray]:
    """Indices of NaN, +inf and -inf values: ``{"nan": ..., "+inf": ..., "-inf": ...}``."""
    y = np.asarray(y, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(y))
    vals = y[bad]
    return {
        "nan": bad[np.isnan(vals)],
        "+inf": bad[vals == np.inf],
        "-inf": bad[vals == -np.inf],
    }


def session_starts(session: np.ndarray, x: np.ndarray) -> list[tuple[int, float]]:
    """``(session, x)`` of the first point of every session after the first one."""
    session = np.asarray(session)
    if len(session) < 2:
        return []
    idx = np.flatnonzero(np.diff(session) != 0) + 1
    return [(int(session[i]), float(x[i])) for i in idx]


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
    import polars as pl

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


class Decimator:
    """:func:`minmax_indices` for a series that only grows, updated in O(new points).

    Buckets are aligned runs of ``k`` points (``k`` a power of two, doubled by merging
    neighbours whenever there would be more than ``2 * buckets``), so after any
    sequence of :meth:`update` calls the result equals a fresh decimator's on the same
    array. Each bucket keeps the index of its minimum and maximum finite value.
    """

    def __init__(self, buckets: int = 400):
        self.buckets = max(1, buckets)
        self.k = 1
        self.n = 0
        self.imin = np.zeros(0, np.int64)
        self.imax = np.zeros(0, np.int64)

    def update(self, y: np.ndarray) -> np.ndarray:
        """Take ``y`` (the same array as before, maybe longer); return the sorted
        indices to draw: min and max of each bucket, first and last finite point."""
        y = np.asarray(y, dtype=np.float64)
        n = len(y)
        if n < self.n:
            self.__init__(self.buckets)  # type: ignore[misc]  # start again, as a new one
        while -(-n // self.k) > 2 * self.buckets:
            self._merge(y)
        b0 = self.n // self.k
        nb = -(-n // self.k)
        if nb > len(self.imin):
            self.imin = np.concatenate([self.imin, np.full(nb - len(self.imin), -1, np.int64)])
            self.imax = np.concatenate([self.imax, np.full(nb - len(self.imax), -1, np.int64)])
        if n > b0 * self.k:
            lo, hi = _bucket_extrema(y[b0 * self.k : n], self.k)
            self.imin[b0:nb] = np.where(lo >= 0, lo + b0 * self.k, -1)
            self.imax[b0:nb] = np.where(hi >= 0, hi + b0 * self.k, -1)
        self.n = n
        if not n:
            return np.zeros(0, np.int64)
        ok = self.imin >= 0
        parts = [self.imin[ok], self.imax[ok]]
        head = np.flatnonzero(np.isfinite(y[: self.k]))[:1]
        tail = np.flatnonzero(np.isfinite(y[max(0, n - self.k) :]))[-1:] + max(0, n - self.k)
        return np.unique(np.concatenate([*parts, head, tail]))

    def _merge(self, y: np.ndarray) -> None:
        nb = len(self.imin)
        if nb % 2:
            self.imin = np.append(self.imin, -1)
            self.imax = np.append(self.imax, -1)
        a_min, b_min = self.imin[0::2], self.imin[1::2]
        a_max, b_max = self.imax[0::2], self.imax[1::2]
        ya, yb = _at(y, a_min, np.inf), _at(y, b_min, np.inf)
        self.imin = np.where((b_min >= 0) & ((a_min < 0) | (yb < ya)), b_min, a_min)
        ya, yb = _at(y, a_max, -np.inf), _at(y, b_max, -np.inf)
        self.imax = np.where((b_max >= 0) & ((a_max < 0) | (yb > ya)), b_max, a_max)
        self.k *= 2
        self.n = min(self.n, (len(self.imin) - 1) * self.k) if len(self.imin) else 0


def _at(y: np.ndarray, idx: np.ndarray, missing: float) -> np.ndarray:
    return np.where(idx >= 0, y[np.maximum(idx, 0)] if len(y) else missing, missing)


def _bucket_extrema(y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per run of ``k`` points: index of the min and of the max finite value (-1: none)."""
    n = len(y)
    m = -(-n // k)
    finite = np.isfinite(y)
    lo: np.ndarray = np.full(m * k, np.inf)
    hi: np.ndarray = np.full(m * k, -np.inf)
    lo[:n] = np.where(finite, y, np.inf)
    hi[:n] = np.where(finite, y, -np.inf)
    lo, hi = lo.reshape(m, k), hi.reshape(m, k)
    amin, amax = lo.argmin(axis=1), hi.argmax(axis=1)
    has = np.isfinite(lo[np.arange(m), amin])
    base = np.arange(m) * k
    return np.where(has, base + amin, -1), np.where(has, base + amax, -1)
