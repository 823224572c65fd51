"""Display downsampling: a long series drawn with a few hundred points that keeps
every spike (display only, never a way to read data).

- :func:`minmax_indices` — indices of the min and max finite value of each of
  ``buckets`` equal runs of points, plus the first and the last finite point.
- :class:`Decimator` — the same for a series that only grows (a live plot), updated in
  O(new points).

Imports numpy only.
"""

from __future__ import annotations

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


def step_buckets(step: np.ndarray, value: np.ndarray, buckets: int, start: float | None = None,
                 end: float | None = None) -> tuple[bool, dict[str, np.ndarray]]:
    """One series as at most ``buckets`` buckets of equal step width, each its min, max
    and last value (``nb serve``'s ``/scalars``; display only).

    Args:
        step: int64 steps, one per point (any order: sorted stably here).
        value: float64 values.
        buckets: the most buckets (≥ 1).
        start, end: only the points with ``start <= step <= end`` (None: no bound).

    Returns:
        ``(exact, columns)``: exact is True when every point in range is given as its own
        bucket (then min = max = last = the value). columns: step (int64, the step of the
        bucket's last point), min and max (float64, of its finite values; NaN when it has
        none: non-finite values never enter them), last (float64, the value of its last
        point, as it was), n (int64, its points). Empty buckets are left out.
    """
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, not {buckets}")
    step = np.asarray(step, np.int64)
    value = np.asarray(value, np.float64)
    if len(step) > 1 and (np.diff(step) < 0).any():
        order = np.argsort(step, kind="stable")
        step, value = step[order], value[order]
    lo_i = 0 if start is None else int(np.searchsorted(step, start, "left"))
    hi_i = len(step) if end is None else int(np.searchsorted(step, end, "right"))
    step, value = step[lo_i:hi_i], value[lo_i:hi_i]
    n = len(step)
    if n <= buckets:
        return True, {"step": step, "min": value, "max": value, "last": value, "n": np.ones(n, np.int64)}
    first, span = int(step[0]), int(step[-1]) - int(step[0]) + 1
    width = -(-span // buckets)  # whole steps, ceil
    which = (step - first) // width
    starts = np.concatenate(([0], np.flatnonzero(np.diff(which)) + 1))
    ends = np.concatenate((starts[1:], [n]))
    finite = np.isfinite(value)
    mn = np.minimum.reduceat(np.where(finite, value, np.inf), starts)
    mx = np.maximum.reduceat(np.where(finite, value, -np.inf), starts)
    none = np.add.reduceat(finite.astype(np.int64), starts) == 0
    mn[none] = np.nan
    mx[none] = np.nan
    return False, {"step": step[ends - 1], "min": mn, "max": mx, "last": value[ends - 1], "n": ends - starts}
