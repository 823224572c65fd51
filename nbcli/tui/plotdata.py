"""Turn full-resolution series into small :class:`PlotSpec` objects (off the UI thread).

The data logic (EMA, min/max downsampling, bands) is :mod:`nbcli.series`; this module
only decides what to draw: the faint raw curve under the smoothed one, markers for
non-finite values, session boundaries, the note that says a line was downsampled; and
the first plot of a long run from its envelope sidecars (:func:`envelope_spec`).
:class:`Smoother` caches each series' smoothed values and extends them as points are
appended, so a live refresh smooths only the new points.
"""

from __future__ import annotations

import numpy as np

from nblog.reader import Envelope, Series
from nblog.reader.lowlevel import plural

from ..series import (
    Decimator,
    EmaState,
    ema,
    minmax_indices,
    nonfinite_indices,
    per_step_totals,
    step_band,
)
from .text import fmt_compact
from .widgets.plot import FAINT, PALETTE, Fill, Line, PlotSpec

AXES = ("step", "wall", "active")
AXIS_NAMES = {"step": "step", "wall": "wall time", "active": "active time"}
SMOOTHING = (0.0, 0.3, 0.6, 0.8, 0.9, 0.95, 0.99)
MAX_MARKERS = 64


class _Grow:
    """A float64 array that grows at the end (amortized O(1) appends)."""

    def __init__(self) -> None:
        self.buf = np.empty(0)
        self.n = 0

    def extend(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.buf):
            nb = np.empty(max(need + need // 4, 2 * len(self.buf), 1024))
            nb[: self.n] = self.buf[: self.n]
            self.buf = nb
        self.buf[self.n : need] = values
        self.n = need

    @property
    def values(self) -> np.ndarray:
        return self.buf[: self.n]


class _Curves:
    """Display state of one series, extended as points are appended: smoothed
    values, log10 values, one :class:`~nbcli.series.Decimator` per curve, where the
    non-finite values and the session starts are."""

    def __init__(self, rebuilt: int, weight: float, buckets: int):
        self.rebuilt, self.weight, self.buckets = rebuilt, weight, buckets
        self.n = 0
        self.smooth = _Grow()
        self.state = EmaState()
        self.logs: dict[str, _Grow] = {}
        self.dec: dict[tuple[str, bool], Decimator] = {}
        self.bad: dict[str, list[np.ndarray]] = {"nan": [], "+inf": [], "-inf": []}
        self.starts: list[int] = []
        self.nonpos = 0  # finite values <= 0 (not on a log axis)

    def update(self, s: Series) -> None:
        n0, n = self.n, s.n
        if n == n0:
            return
        new = s.value[n0:n]
        if self.weight > 0:
            sm, self.state = ema(new, self.weight, self.state)
            self.smooth.extend(sm)
        for curve, g in self.logs.items():
            g.extend(_log10(self.y(s, curve, False)[n0:n]))
        self.nonpos += int(np.count_nonzero(np.isfinite(new) & (new <= 0)))
        for kind, where in nonfinite_indices(new).items():
            if len(where):
                self.bad[kind].append(where + n0)
        sess = s.session
        lo = max(n0 - 1, 0)
        self.starts += [lo + 1 + i for i in np.flatnonzero(np.diff(sess[lo:n]) != 0).tolist()]
        self.n = n

    def y(self, s: Series, curve: str, logy: bool) -> np.ndarray:
        if logy:
            g = self.logs.get(curve)
            if g is None:
                g = self.logs[curve] = _Grow()
                g.extend(_log10(self.y(s, curve, False)[: self.n]))
            return g.values
        return s.value[: self.n] if curve == "raw" else self.smooth.values

    def indices(self, s: Series, curve: str, logy: bool) -> np.ndarray:
        d = self.dec.get((curve, logy))
        if d is None:
            d = self.dec[(curve, logy)] = Decimator(self.buckets)
        return d.update(self.y(s, curve, logy))

    def nonfinite(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in self.bad.items()}


def _log10(y: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y > 0, np.log10(np.where(y > 0, y, 1.0)), np.nan)


class Smoother:
    """Per series display state (:class:`_Curves`), extended incrementally; rebuilt
    when the series was rebuilt or the smoothing or the width changed. Not
    thread-safe: used by the one worker that prepares plots at a time."""

    def __init__(self) -> None:
        self._cache: dict[int, _Curves] = {}

    def curves(self, s: Series, weight: float, buckets: int) -> _Curves:
        c = self._cache.get(id(s))
        if c is None or c.rebuilt != s.rebuilt or c.weight != weight or c.buckets != buckets or c.n > s.n:
            c = self._cache[id(s)] = _Curves(s.rebuilt, weight, buckets)
        c.update(s)
        return c

    def keep(self, series: list[Series]) -> None:
        ids = {id(s) for s in series}
        for k in [k for k in self._cache if k not in ids]:
            del self._cache[k]


def _thin(idx: np.ndarray, limit: int) -> np.ndarray:
    if len(idx) <= limit:
        return idx
    return idx[np.linspace(0, len(idx) - 1, limit).astype(np.int64)]


def _x(s: Series, axis: str, idx: np.ndarray | int) -> np.ndarray:
    if axis == "step":
        return s.step[idx].astype(np.float64)
    return (s.wall if axis == "wall" else s.active)[idx]


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
    """One plot of one tag: a line per (label, series) — several runs overlaid, or one.
    Work per call is proportional to the points appended since the previous call."""
    spec = PlotSpec(title=title, axis=axis, logy=logy)
    total = shown = 0
    dropped_nonpos = 0
    for i, (label, s) in enumerate(entries):
        if not len(s):
            continue
        c = smoother.curves(s, smoothing, buckets)
        color = PALETTE[i % len(PALETTE)]
        curves = [("raw", smoothing > 0)] + ([("smooth", False)] if smoothing > 0 else [])
        for curve, faint in curves:
            idx = c.indices(s, curve, logy)
            y = c.y(s, curve, logy)
            spec.lines.append(Line(_x(s, axis, idx), y[idx], color=color, faint=faint,
                                   label="" if faint else label, dash=i))
            if curve == "raw":
                total += c.n
                shown += len(idx)
        if logy:
            dropped_nonpos += c.nonpos
        for kind, where in c.nonfinite().items():
            for j in _thin(where, MAX_MARKERS):
                spec.markers.append((float(_x(s, axis, j)), kind))
        spec.vlines.extend(float(_x(s, axis, j)) for j in c.starts)
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


#: The note of a plot drawn from the envelope sidecars while the full series loads.
PREVIEW_NOTE = "summary of {points} pts · loading the full series"


def envelope_spec(title: str, env: Envelope, *, logy: bool = False, color: str = PALETTE[0]) -> PlotSpec:
    """The first plot of a long run, from its :class:`~nblog.reader.Envelope` (step axis):
    the faint min/max of each segment (as the raw curve's min/max decimation shows it)
    under the line of each segment's last value, session starts as vertical lines. Drawn
    until the full series is read; display only."""
    spec = PlotSpec(title=title, axis="step", logy=logy)
    mid = (env.first_step + (env.last_step - env.first_step) / 2).astype(np.float64)
    lo, hi, last = env.lo, env.hi, env.last
    if logy:
        lo, hi, last = _log10(lo), _log10(hi), _log10(last)
    ok = np.isfinite(lo) & np.isfinite(hi)
    x = np.repeat(mid[ok], 2)
    y = np.column_stack([lo[ok], hi[ok]]).ravel()
    if len(x):
        spec.lines.append(Line(x, y, color=color, faint=True))
    fin = np.isfinite(last)
    if fin.any():
        spec.lines.append(Line(env.last_step[fin].astype(np.float64), last[fin], color=color))
    starts = np.flatnonzero(np.diff(env.session) != 0) + 1
    spec.vlines.extend(float(env.first_step[i]) for i in starts)
    if not spec.lines:
        spec.message = "no finite values"
    spec.note = PREVIEW_NOTE.format(points=fmt_compact(env.points))
    return spec


def band_spec(title: str, per_rank: dict[int, Series], buckets: int,
              slowest: int | None = None) -> tuple[PlotSpec, int | None]:
    """The band across ranks (min–max filled, median line) of per-step totals of a timer,
    with the line of the rank ``slowest`` (the slowest rank by the straggler rule,
    :func:`nblog.reader.straggler_rule`; None or a rank without timings: no such line).
    Returns the spec and the rank drawn as the slowest."""
    totals = {r: per_step_totals(s.step, s.value) for r, s in per_rank.items() if len(s)}
    spec = PlotSpec(title=title, axis="step", yunit="s")
    if not totals:
        spec.message = "no timings"
        return spec, None
    b = step_band(totals)
    idx = minmax_indices(b.hi, buckets)
    idx_lo = minmax_indices(b.lo, buckets)
    both = np.union1d(idx, idx_lo)
    x = b.step.astype(np.float64)
    if len(totals) > 1:
        spec.fills.append(Fill(x[both], b.lo[both], b.hi[both], color=FAINT))
        mi = minmax_indices(b.median, buckets)
        spec.lines.append(Line(x[mi], b.median[mi], color=PALETTE[0], label="median"))
    if slowest not in totals:
        slowest = None
    else:
        st, sv = totals[slowest]
        si = minmax_indices(sv, buckets)
        spec.lines.append(Line(st[si].astype(np.float64), sv[si], color=PALETTE[3], label=f"slowest rank {slowest}",
                               dash=len(spec.lines)))
    spec.note = f"{plural(len(totals), 'rank')}, seconds per step" + (" · min/max display" if len(b.step) > 2 * buckets else "")
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
        spec.lines.append(Line(s.wall[idx], y[idx], color=PALETTE[i % len(PALETTE)], label=label, dash=i))
    if not spec.lines:
        spec.message = "no samples"
    return spec
