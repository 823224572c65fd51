"""Turn full-resolution series into small :class:`PlotSpec` objects (off the UI thread).

The data logic (EMA, min/max downsampling, bands) is ``nblog._series``; this module
only decides what to draw: the faint raw curve under the smoothed one, markers for
non-finite values, session boundaries, the note that says a line was downsampled.
:class:`Smoother` caches each series' smoothed values and extends them as points are
appended, so a live refresh smooths only the new points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nblog._live import Series
from nblog._series import (
    EmaState,
    band,
    ema,
    minmax_indices,
    nonfinite,
    per_step_totals,
    session_starts,
)

from .text import fmt_compact
from .widgets.plot import FAINT, PALETTE, Fill, Line, PlotSpec

AXES = ("step", "wall", "active")
AXIS_NAMES = {"step": "step", "wall": "wall time", "active": "active time"}
SMOOTHING = (0.0, 0.3, 0.6, 0.8, 0.9, 0.95, 0.99)
MAX_MARKERS = 64


@dataclass
class _Smooth:
    rebuilt: int
    weight: float
    n: int
    values: np.ndarray
    state: EmaState


class Smoother:
    """Smoothed values per series, extended incrementally. Not thread-safe: use it
    from the one worker that prepares plots."""

    def __init__(self) -> None:
        self._cache: dict[int, _Smooth] = {}

    def get(self, s: Series, weight: float) -> np.ndarray:
        c = self._cache.get(id(s))
        if c is None or c.rebuilt != s.rebuilt or c.weight != weight or c.n > s.n:
            vals, st = ema(s.value, weight)
            self._cache[id(s)] = _Smooth(s.rebuilt, weight, s.n, vals, st)
            return vals
        if c.n < s.n:
            new, st = ema(s.value[c.n :], weight, c.state)
            c.values = np.concatenate([c.values, new])
            c.n, c.state = s.n, st
        return c.values

    def keep(self, series: list[Series]) -> None:
        ids = {id(s) for s in series}
        for k in [k for k in self._cache if k not in ids]:
            del self._cache[k]


def _thin(idx: np.ndarray, limit: int) -> np.ndarray:
    if len(idx) <= limit:
        return idx
    return idx[np.linspace(0, len(idx) - 1, limit).astype(np.int64)]


def scalar_spec(
    title: str,
    entries: list[tuple[str, Series]],
    *,
    axis: str,
    smoothing: float,
    logy: bool,
    buckets: int,
    smoother: Smoother,
) -> PlotSpec:
    """One plot of one tag: a line per (label, series) — several runs overlaid, or one."""
    spec = PlotSpec(title=title, axis=axis, logy=logy)
    total = shown = 0
    dropped_nonpos = 0
    for i, (label, s) in enumerate(entries):
        if not len(s):
            continue
        color = PALETTE[i % len(PALETTE)]
        x = s.x(axis)
        raw = s.value
        curves = [(raw, smoothing > 0)]
        if smoothing > 0:
            curves.append((smoother.get(s, smoothing), False))
        for y, faint in curves:
            yy = y
            if logy:
                with np.errstate(divide="ignore", invalid="ignore"):
                    pos = yy > 0
                    if not faint:
                        dropped_nonpos += int((np.isfinite(yy) & ~pos).sum()) if y is raw else 0
                    yy = np.where(pos, np.log10(np.where(pos, yy, 1.0)), np.nan)
            idx = minmax_indices(yy, buckets)
            spec.lines.append(Line(x[idx], yy[idx], color=color, faint=faint, label="" if faint else label))
            if y is raw:
                total += len(y)
                shown += len(idx)
        bad = nonfinite(raw)
        for kind, where in bad.items():
            for j in _thin(where, MAX_MARKERS):
                spec.markers.append((float(x[j]), kind))
        spec.vlines.extend(v for _s, v in session_starts(s.session, x))
    if total == 0:
        spec.message = "no points yet" if entries else "no series"
        return spec
    notes = []
    if shown < total:
        notes.append(f"min/max of {fmt_compact(total)} pts, display only")
    if dropped_nonpos:
        notes.append(f"{dropped_nonpos} ≤0 not on log axis")
    counts = {k: sum(1 for m in spec.markers if m[1] == k) for k in ("nan", "+inf", "-inf")}
    marks = " ".join(f"{g}{k}" for k, g in (("nan", "×"), ("+inf", "▲"), ("-inf", "▼")) if counts[k])
    if marks:
        notes.append(marks)
    if smoothing > 0:
        notes.append(f"ema {smoothing:g}")
    spec.note = " · ".join(notes)
    return spec


def band_spec(title: str, per_rank: dict[int, Series], buckets: int) -> tuple[PlotSpec, int | None]:
    """The band across ranks (min–max filled, median line) of per-step totals of a timer,
    with the slowest rank's line. Returns the spec and the slowest rank."""
    totals = {r: per_step_totals(s.step, s.value) for r, s in per_rank.items() if len(s)}
    spec = PlotSpec(title=title, axis="step", yunit="s")
    if not totals:
        spec.message = "no timings"
        return spec, None
    slowest = max(totals, key=lambda r: float(np.sum(totals[r][1])))
    b = band(totals)
    idx = minmax_indices(b.hi, buckets)
    idx_lo = minmax_indices(b.lo, buckets)
    both = np.union1d(idx, idx_lo)
    x = b.step.astype(np.float64)
    if len(totals) > 1:
        spec.fills.append(Fill(x[both], b.lo[both], b.hi[both], color=FAINT))
        mi = minmax_indices(b.median, buckets)
        spec.lines.append(Line(x[mi], b.median[mi], color=PALETTE[0], label="median"))
    st, sv = totals[slowest]
    si = minmax_indices(sv, buckets)
    spec.lines.append(Line(st[si].astype(np.float64), sv[si], color=PALETTE[3], label=f"slowest rank {slowest}"))
    spec.note = f"{len(totals)} ranks, seconds per step" + (" · min/max display" if len(b.step) > 2 * buckets else "")
    return spec, slowest


def system_spec(title: str, entries: list[tuple[str, Series]], buckets: int, scale: float = 1.0,
                unit: str = "") -> PlotSpec:
    """Lines of system metrics against wall time (never hidden, never smoothed)."""
    spec = PlotSpec(title=title, axis="wall", yunit=unit)
    for i, (label, s) in enumerate(entries):
        if not len(s):
            continue
        y = s.value * scale
        idx = minmax_indices(y, buckets)
        spec.lines.append(Line(s.wall[idx], y[idx], color=PALETTE[i % len(PALETTE)], label=label))
    if not spec.lines:
        spec.message = "no samples"
    return spec
