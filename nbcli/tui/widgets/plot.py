"""A line plot drawn in Braille dots (2×4 per cell), rasterized with numpy.

Why not textual-plotext: plotext builds a plot point by point in Python; on the
2-core machines we target one 100×28 plot of two 400-point lines took 100–260 ms to
build, every frame. The TUI redraws once per second per visible plot and must spend
at most 50 ms of CPU on a live refresh, so the raster is done here in a few numpy
passes (~2 ms). What is drawn is described by a :class:`PlotSpec` (prepared off the
UI thread, see ``nbcli.tui.plotdata``); the widget only maps it to cells.

Drawn: lines (a faint style for the raw curve under a smoothed one; each labelled
line of a plot in its own dash pattern as well as its own colour, so that lines are
told apart on a monochrome terminal or with ``NO_COLOR``), a filled band,
markers for NaN (``×``) and ±inf (``▲`` at the top, ``▼`` at the bottom) instead of
values that would break the axes, dotted vertical lines at session boundaries, y
ticks, x ticks formatted for the axis (steps, clock time, durations) and a title row
with a legend and a note (e.g. that the line was downsampled for display).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from ..text import clean, fmt_compact, fmt_span

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

# Braille dot bits by (row 0-3, column 0-1) inside a cell.
_BITS = np.array([[0x01, 0x08], [0x02, 0x10], [0x04, 0x20], [0x40, 0x80]], dtype=np.uint8)

PALETTE = ("#5fafff", "#ffaf5f", "#87d787", "#ff8787", "#d787ff", "#ffd75f", "#5fd7d7", "#d7afaf")
FAINT = "#5c6773"
AXIS = Style(color="#8a8f98")
LABEL = Style(color="#b0b6bf")
TITLE = Style(bold=True)
NOTE = Style(color="#8a8f98", italic=True)
MARK = Style(color="#ff5f5f", bold=True)
SESSION = Style(color="#d7af5f")
ALERT = Style(color="#ff5f5f")  # set_markers: a failure or alert at its step
# Empty cells: a real (empty) style, never None: Textual's filters (NO_COLOR's monochrome
# filter) read every segment's style.
BLANK = Style.null()
# Dash patterns over the dots along a line (1: dot drawn), and the legend's picture of
# each: solid, dashed, dotted, dash-dot. A line's ``dash`` picks one (modulo 4).
DASHES = ((1,), (1, 1, 1, 1, 1, 1, 0, 0, 0, 0), (1, 0, 0), (1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0))
DASH_LEGEND = ("━━", "╍╍", "┅┅", "━·")


@dataclass
class Line:
    """A polyline: x and y (finite values only), a colour, faint or not, a label, a
    dash pattern (an index into :data:`DASHES`; faint lines are drawn solid)."""

    x: np.ndarray
    y: np.ndarray
    color: str = PALETTE[0]
    faint: bool = False
    label: str = ""
    dash: int = 0


@dataclass
class Fill:
    """A band filled between ``lo`` and ``hi`` at each x."""

    x: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    color: str = FAINT


@dataclass
class PlotSpec:
    """Everything one plot shows. ``axis`` is "step", "wall", "active" or "value"
    (how x ticks are written); ``markers`` are (x, "nan" | "+inf" | "-inf");
    ``vlines`` are x positions of session starts; ``logy`` means y values are
    already log10 of the data (ticks are written as powers of ten)."""

    title: str = ""
    lines: list[Line] = field(default_factory=list)
    fills: list[Fill] = field(default_factory=list)
    markers: list[tuple[float, str]] = field(default_factory=list)
    vlines: list[float] = field(default_factory=list)
    axis: str = "step"
    logy: bool = False
    note: str = ""
    message: str = ""  # shown instead of a plot (no data yet, ...)
    yunit: str = ""


def nice_ticks(lo: float, hi: float, n: int) -> list[float]:
    """About ``n`` round tick values (1, 2, 5 × 10^k steps) within [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or n < 1:
        return []
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out: list[float] = []
    v = first
    while v <= hi + step * 1e-9 and len(out) < 50:
        out.append(0.0 if abs(v) < step * 1e-9 else v)
        v += step
    return out


def _time_ticks(lo: float, hi: float, n: int) -> list[float]:
    span = hi - lo
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
                 172800, 604800):
        if span / step <= n:
            break
    else:
        return nice_ticks(lo, hi, n)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) // step) + 1)]


def fmt_tick(v: float, axis: str, span: float) -> str:
    """An x tick label for ``axis``."""
    if axis == "wall":
        t = time.localtime(v)
        if span > 2 * 86400:
            return time.strftime("%m-%d", t)
        if span > 600:
            return time.strftime("%H:%M", t)
        return time.strftime("%H:%M:%S", t)
    if axis == "active":
        return fmt_span(v)
    return fmt_compact(v)


def _segments_dots(px: np.ndarray, py: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dots on the straight segments between consecutive points (pixel coords)."""
    if len(px) == 1:
        return px.astype(np.int64), py.astype(np.int64)
    dx = np.diff(px)
    dy = np.diff(py)
    steps = np.maximum(np.abs(dx), np.abs(dy)).astype(np.int64) + 1
    total = int(steps.sum())
    seg = np.repeat(np.arange(len(steps)), steps)
    offs = np.arange(total) - np.repeat(np.cumsum(steps) - steps, steps)
    t = offs / np.maximum(steps[seg] - 1, 1)
    x = np.rint(px[:-1][seg] + t * dx[seg]).astype(np.int64)
    y = np.rint(py[:-1][seg] + t * dy[seg]).astype(np.int64)
    return x, y


class Raster:
    """A Braille canvas of ``cols`` × ``rows`` cells: dot bits and a style per cell."""

    def __init__(self, cols: int, rows: int):
        self.cols, self.rows = cols, rows
        self.bits = np.zeros(rows * cols, np.uint8)
        self.style = np.full(rows * cols, -1, np.int64)
        self.chars: dict[int, tuple[str, int]] = {}  # cell → (char, style id) overrides
        self.styles: list[Style] = []

    def style_id(self, style: Style) -> int:
        self.styles.append(style)
        return len(self.styles) - 1

    def dots(self, x: np.ndarray, y: np.ndarray, sid: int) -> None:
        ok = (x >= 0) & (x < 2 * self.cols) & (y >= 0) & (y < 4 * self.rows)
        x, y = x[ok], y[ok]
        if not len(x):
            return
        cell = (y // 4) * self.cols + x // 2
        np.bitwise_or.at(self.bits, cell, _BITS[y % 4, x % 2])
        self.style[cell] = sid

    def put(self, col: int, row: int, char: str, sid: int) -> None:
        if 0 <= col < self.cols and 0 <= row < self.rows:
            self.chars[row * self.cols + col] = (char, sid)

    def row(self, r: int) -> list[tuple[str, Style]]:
        out = []
        base = r * self.cols
        bits = self.bits[base : base + self.cols]
        sty = self.style[base : base + self.cols]
        for c in range(self.cols):
            over = self.chars.get(base + c)
            if over is not None:
                out.append((over[0], self.styles[over[1]]))
            elif bits[c]:
                out.append((chr(0x2800 + int(bits[c])), self.styles[int(sty[c])]))
            else:
                out.append((" ", BLANK))
        return out


def _merge(cells: list[tuple[str, Style]]) -> list[Segment]:
    segs: list[Segment] = []
    text, style = "", BLANK
    for ch, st in cells:
        if st is style:
            text += ch
        else:
            if text:
                segs.append(Segment(text, style))
            text, style = ch, st
    if text:
        segs.append(Segment(text, style))
    return segs


def render_spec(spec: PlotSpec, width: int, height: int,
                alerts: tuple[tuple[float, ...], str] = ((), "")) -> list[list[Segment]]:
    """Lay out ``spec`` in ``width`` × ``height`` cells: one list of segments per row;
    ``alerts`` (x positions, a one-character label) are drawn as vertical marks, only
    where they fall inside the data's x range (they never widen it)."""
    rows_out: list[list[Segment]] = []
    title = clean(spec.title)
    legend = [(clean(ln.label), ln.color, DASH_LEGEND[ln.dash % len(DASHES)])
              for ln in spec.lines if ln.label and not ln.faint]
    head: list[Segment] = [Segment(title[: max(0, width)], TITLE)]
    used = len(title)
    for label, color, dash in legend:
        piece = f"  {dash} {label}"
        if used + len(piece) > width:
            break
        head += [Segment(f"  {dash} ", Style(color=color)), Segment(label, LABEL)]
        used += len(piece)
    if spec.note and used + len(spec.note) + 2 <= width:
        head.append(Segment(" " * (width - used - len(spec.note)) + spec.note, NOTE))
    rows_out.append(head)
    if height < 2:
        return rows_out[:height]
    body_h = height - 1
    if spec.message or (not spec.lines and not spec.fills):
        msg = clean(spec.message or "no data")
        for i in range(body_h):
            rows_out.append([Segment(msg[:width], NOTE)] if i == body_h // 2 else [])
        return rows_out
    # data ranges
    xs = [ln.x for ln in spec.lines if len(ln.x)] + [f.x for f in spec.fills if len(f.x)]
    ys = [ln.y for ln in spec.lines if len(ln.y)] + [f.lo for f in spec.fills if len(f.lo)]
    ys += [f.hi for f in spec.fills if len(f.hi)]
    marks_x = [m[0] for m in spec.markers]
    if not xs and not marks_x:
        for i in range(body_h):
            rows_out.append([Segment("no finite values", NOTE)] if i == body_h // 2 else [])
        return rows_out
    x0 = min([float(np.min(a)) for a in xs] + marks_x)
    x1 = max([float(np.max(a)) for a in xs] + marks_x)
    if ys:
        y0 = min(float(np.min(a)) for a in ys)
        y1 = max(float(np.max(a)) for a in ys)
    else:
        y0, y1 = 0.0, 1.0
    if y1 - y0 <= max(abs(y0), abs(y1)) * 1e-9:  # flat, up to float noise (an EMA of a constant)
        mid = (y0 + y1) / 2
        pad = abs(mid) * 0.05 or 0.5
        y0, y1 = mid - pad, mid + pad
    if x1 <= x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    plot_h = max(1, body_h - 2)  # minus the x axis and its labels
    yt = nice_ticks(y0, y1, max(1, plot_h // 3))
    ylabels = [_ylabel(v, spec.logy) for v in yt]
    margin = max([len(s) for s in ylabels] + [3]) + 1
    cols = max(1, width - margin - 1)
    r = Raster(cols, plot_h)

    def mapx(v: ArrayLike) -> np.ndarray:
        return np.rint((np.asarray(v, np.float64) - x0) / (x1 - x0) * (2 * cols - 1)).astype(np.int64)

    def mapy(v: ArrayLike) -> np.ndarray:
        return np.rint((y1 - np.asarray(v, np.float64)) / (y1 - y0) * (4 * plot_h - 1)).astype(np.int64)

    for f in spec.fills:
        if not len(f.x):
            continue
        sid = r.style_id(Style(color=f.color))
        px = mapx(f.x)
        top = mapy(f.hi)
        bot = mapy(f.lo)
        # per pixel column: the widest span
        order = np.argsort(px, kind="stable")
        px, top, bot = px[order], top[order], bot[order]
        starts = np.flatnonzero(np.concatenate([[True], np.diff(px) != 0]))
        ucol = px[starts]
        t = np.minimum.reduceat(top, starts)
        b = np.maximum.reduceat(bot, starts)
        n = np.maximum(b - t + 1, 1)
        cx = np.repeat(ucol, n)
        cy = np.repeat(t, n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
        r.dots(cx, cy, sid)
    for ln in spec.lines:
        if not len(ln.x):
            continue
        st = Style(color=FAINT) if ln.faint and ln.color == PALETTE[0] else Style(color=ln.color, dim=ln.faint)
        sid = r.style_id(st)
        dx, dy = _segments_dots(mapx(ln.x).astype(np.float64), mapy(ln.y).astype(np.float64))
        pattern = DASHES[ln.dash % len(DASHES)]
        if len(pattern) > 1 and not ln.faint:
            on = np.asarray(pattern, bool)[np.arange(len(dx)) % len(pattern)]
            dx, dy = dx[on], dy[on]
        r.dots(dx, dy, sid)
    sess_id = r.style_id(SESSION)
    for v in spec.vlines:
        c = int(mapx(v)) // 2
        for row in range(plot_h):
            cell = row * cols + c
            if 0 <= c < cols and not r.bits[cell]:
                r.put(c, row, "┆", sess_id)
    alert_id = r.style_id(ALERT)
    for v in alerts[0]:
        if not x0 <= v <= x1:
            continue
        c = int(mapx(v)) // 2
        for row in range(plot_h):
            if 0 <= c < cols and not r.bits[row * cols + c]:
                r.put(c, row, "│", alert_id)
        if alerts[1]:
            r.put(c, 0, alerts[1][:1], alert_id)
    mark_id = r.style_id(MARK)
    glyph = {"nan": ("×", 0), "+inf": ("▲", 0), "-inf": ("▼", plot_h - 1)}
    for v, kind in spec.markers:
        ch, row = glyph.get(kind, ("?", 0))
        r.put(int(mapx(v)) // 2, row, ch, mark_id)
    # y axis rows
    tick_rows: dict[int, str] = {}
    for v, label in zip(yt, ylabels, strict=True):
        row = int(mapy(v)) // 4
        if 0 <= row < plot_h:
            tick_rows[row] = label
    for row in range(plot_h):
        tick = tick_rows.get(row)
        left = (tick.rjust(margin - 1) + "┤") if tick is not None else (" " * (margin - 1) + "│")
        rows_out.append([Segment(left[:-1], LABEL), Segment(left[-1], AXIS), *_merge(r.row(row))])
    # x axis and labels
    span = x1 - x0
    xt = _time_ticks(x0, x1, max(1, cols // 12)) if spec.axis in ("wall", "active") else nice_ticks(
        x0, x1, max(1, cols // 12)
    )
    axis_chars = ["─"] * cols
    label_chars = [" "] * (cols + margin)
    next_free = 0
    for v in xt:
        c = int(mapx(v)) // 2
        if not 0 <= c < cols:
            continue
        axis_chars[c] = "┬"
        text = fmt_tick(v, spec.axis, span)
        start = margin + c - len(text) // 2
        start = max(start, next_free)
        if start + len(text) > cols + margin:
            continue
        label_chars[start : start + len(text)] = list(text)
        next_free = start + len(text) + 1
    rows_out.append([Segment(" " * (margin - 1) + "└" + "".join(axis_chars), AXIS)])
    xname = {"step": "step", "wall": "wall time", "active": "active time", "value": ""}.get(spec.axis, "")
    lab = "".join(label_chars).rstrip()
    if xname and len(lab) + len(xname) + 2 <= width:
        lab = lab.ljust(width - len(xname)) + xname
    rows_out.append([Segment(lab[:width], LABEL)])
    return rows_out[:height]


def _ylabel(v: float, logy: bool) -> str:
    if logy:
        return f"1e{v:g}" if float(v).is_integer() else fmt_compact(10**v)
    return fmt_compact(v)


class BraillePlot(Widget):
    """Shows one :class:`PlotSpec`; set :attr:`spec` to redraw."""

    DEFAULT_CSS = """
    BraillePlot { height: 1fr; width: 1fr; min-height: 5; }
    """

    def __init__(self, spec: PlotSpec | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._spec = spec or PlotSpec(message="loading…")
        self._rows: list[list[Segment]] | None = None
        self._rows_size = (0, 0)
        self._alerts: tuple[tuple[float, ...], str] = ((), "")

    def set_markers(self, xs: Iterable[float], label: str = "!") -> None:
        """Vertical marks at the x positions ``xs`` (floats: the steps of failures
        and alerts), with ``label`` (one character) on the top row; kept when
        :attr:`spec` changes, until set again (an empty ``xs`` clears them)."""
        new = (tuple(float(x) for x in xs), label)
        if new != self._alerts:
            self._alerts = new
            self._rows = None
            self.refresh()

    @property
    def spec(self) -> PlotSpec:
        return self._spec

    @spec.setter
    def spec(self, value: PlotSpec) -> None:
        self._spec = value
        self._rows = None
        self.refresh()

    def render_line(self, y: int) -> Strip:
        w, h = self.size.width, self.size.height
        if self._rows is None or self._rows_size != (w, h):
            self._rows = render_spec(self._spec, w, h, self._alerts)
            self._rows_size = (w, h)
        if y >= len(self._rows):
            return Strip.blank(w, BLANK)
        return Strip(self._rows[y]).crop_extend(0, w, BLANK)
