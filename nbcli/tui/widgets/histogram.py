"""Histograms in the terminal: the bins of one step as a bar chart, and every step of a
tag as a heat strip (rows: steps, columns: value ranges, shade: share of the step's
values).

The drawing functions are pure (arrays in, :class:`rich.text.Text` out) so they can be
tested without an app; :class:`HistogramView` lays them out in the space it has.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rich.text import Text
from textual.widget import Widget

from nblog.reader.lowlevel import plural

from ..text import fmt_compact, lit

EIGHTHS = "▁▂▃▄▅▆▇█"
SHADES = " ░▒▓█"  # index 0: no value in that range
SHADE_STYLES = ("", "#005f87", "#0087af", "#00afd7", "#87d7ff")
BAR_STYLE = "#5fafff"
AXIS_STYLE = "dim"


@dataclass
class HistogramData:
    """Every histogram of one tag of one rank, in logged order.

    Attributes:
        tag: the tag (logged data: shown through :func:`~nbcli.tui.text.lit`).
        steps: int64 [n], the step of each histogram.
        edges: n float64 arrays of ``bins + 1`` bin edges (values in the logged unit).
        counts: n int64 arrays of ``bins`` counts.
        stats: n dicts of the record's statistics (num, min, max, sum, sum_squares,
            nan, pos_inf, neg_inf; missing keys are unknown).
        selected: index of the histogram drawn as bars (-1: none).
        keys: the caller's identifier of each histogram (drawing ignores them).
        unreadable: histograms left out because their blob could not be read.
    """

    tag: str
    steps: np.ndarray
    edges: list[np.ndarray]
    counts: list[np.ndarray]
    stats: list[dict] = field(default_factory=list)
    selected: int = -1
    keys: list = field(default_factory=list)
    unreadable: int = 0


def axis_labels(width: int, value_at: Callable[[float], float]) -> str:
    """A line of exactly ``width`` cells labelling a value axis ``width`` cells wide:
    the value at the left edge starts the line, the value at the right edge ends it
    (right-aligned), and the value at the middle (``value_at(width / 2)``) is centred
    on the middle when it fits with a space on either side. ``value_at(x)``: the value
    at ``x`` cells from the left edge (0 .. ``width``). A label never spills past
    ``width``; the right one is left out when both ends do not fit."""
    if width <= 0:
        return ""
    line = [" "] * width
    left = fmt_compact(float(value_at(0.0)))[:width]
    line[:len(left)] = left
    right = fmt_compact(float(value_at(float(width))))
    stop = width  # the middle label must end before this cell
    if len(left) + 1 + len(right) <= width:
        line[width - len(right):] = right
        stop = width - len(right) - 1
    middle = float(value_at(width / 2))
    cell = abs(float(value_at(width / 2 + 0.5)) - float(value_at(width / 2 - 0.5)))
    mid = fmt_compact(0.0 if abs(middle) < cell / 20 else middle)  # 0, not rounding noise as 0.00013
    start = int(math.floor(width / 2 - len(mid) / 2 + 0.5))  # centred on the middle
    if start > len(left) and start + len(mid) <= stop:
        line[start:start + len(mid)] = mid
    return "".join(line)


def _bars(counts: np.ndarray, width: int) -> tuple[int, np.ndarray, int]:
    """(bins summed per bar, the bars' counts, width of the count labels) for a chart
    ``width`` cells wide: the labels' width depends on the largest bar, and the
    columns left for the bars on the labels."""
    counts = np.asarray(counts, np.float64)
    ylab = max(len(fmt_compact(float(counts.max()))), 1) if len(counts) else 1
    for _ in range(4):
        per = max(1, math.ceil(len(counts) / max(1, width - ylab - 1)))
        sums = np.add.reduceat(counts, np.arange(0, len(counts), per)) if len(counts) else counts
        need = max(len(fmt_compact(float(sums.max()))), 1) if len(sums) else 1
        if need <= ylab:
            break
        ylab = need
    return per, sums, ylab


def bins_per_bar(counts: np.ndarray, width: int) -> int:
    """How many adjacent bins :func:`bar_chart` sums into one bar at ``width`` cells."""
    return _bars(counts, width)[0]


def bar_chart(edges: np.ndarray, counts: np.ndarray, width: int, height: int) -> Text:
    """The bins of one histogram as vertical bars, ``height`` lines of at most
    ``width`` cells: count axis on the left (0 and the largest bar), bin edges below.

    When there are more bins than columns, adjacent bins are summed (the caption of
    :func:`bar_caption` says how many per bar); bars are never sampled.
    """
    counts = np.asarray(counts, np.float64)
    edges = np.asarray(edges, np.float64)
    bins = len(counts)
    if bins == 0 or width < 8 or height < 3:
        return Text("(no room for the bars)" if bins else "(no bins)", style=AXIS_STYLE)
    if not counts.sum() > 0:
        return Text("(no finite values in the bins: nothing to draw)", style=AXIS_STYLE)
    per, sums, ylab = _bars(counts, width)
    top = float(sums.max())
    plot_w = width - ylab - 1
    plot_h = height - 2  # an axis line and a line of edge values below the bars
    if plot_w < 2 or plot_h < 1:
        return Text("(no room for the bars)", style=AXIS_STYLE)
    groups = len(sums)
    bar_w = max(1, plot_w // groups)
    used = groups * bar_w
    # bar heights in eighths of a line; a non-empty bin shows at least one eighth
    eighths = np.zeros(groups, np.int64) if top <= 0 else np.ceil(sums / top * plot_h * 8).astype(np.int64)
    eighths = np.where((sums > 0) & (eighths == 0), 1, eighths)
    out = Text(no_wrap=True, end="")
    for row in range(plot_h):
        level = (plot_h - 1 - row) * 8  # eighths below this line
        label = fmt_compact(top) if row == 0 else ("0" if row == plot_h - 1 else "")
        out.append(label.rjust(ylab) + ("┤" if label else "│"), style=AXIS_STYLE)
        cells = []
        for e in eighths:
            fill = int(e) - level
            ch = " " if fill <= 0 else (EIGHTHS[-1] if fill >= 8 else EIGHTHS[fill - 1])
            cells.append(ch * bar_w)
        out.append("".join(cells), style=BAR_STYLE)
        out.append("\n")
    out.append(" " * ylab + "└" + "─" * used, style=AXIS_STYLE)
    out.append("\n")
    # the value at each bar boundary: bar k starts at column k * bar_w
    group_edges = edges[np.minimum(np.arange(groups + 1) * per, bins)]
    cols = np.arange(groups + 1, dtype=np.float64) * bar_w
    out.append(" " * (ylab + 1) + axis_labels(used, lambda x: np.interp(x, cols, group_edges)), style=AXIS_STYLE)
    return out


def bar_caption(data: HistogramData, width: int) -> Text:
    """One line about the selected histogram: step, NaN/inf (never binned), values,
    min/max/mean, bins (the most important first: the line is cut at ``width``)."""
    i = data.selected
    stats = data.stats[i] if 0 <= i < len(data.stats) else {}
    t = Text(no_wrap=True, end="", overflow="ellipsis")
    t.append(f"step {int(data.steps[i])}", style="bold")
    names = {"nan": "NaN", "pos_inf": "+inf", "neg_inf": "-inf"}
    odd = [(k, stats.get(k)) for k in names]
    odd = [(k, v) for k, v in odd if isinstance(v, int) and v > 0]
    if odd:
        t.append(" · " + " ".join(f"{names[k]} {v:,}" for k, v in odd) + " (not binned)", style="bold #ff8787")
    num = stats.get("num")
    if isinstance(num, int):
        t.append(f" · {plural(num, 'value', sep=True)}")
    lo, hi, total = stats.get("min"), stats.get("max"), stats.get("sum")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        t.append(f" · min {fmt_compact(lo)} max {fmt_compact(hi)}")
    if isinstance(total, (int, float)) and isinstance(num, int) and num > 0:
        t.append(f" mean {fmt_compact(total / num)}")
    bins = len(data.counts[i])
    per = bins_per_bar(data.counts[i], width)
    t.append(f" · {plural(bins, 'bin')}" + (f", {per} per bar" if per > 1 else ""), style=AXIS_STYLE)
    t.truncate(max(1, width), overflow="ellipsis")
    return t


def resample(edges: np.ndarray, counts: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Counts of one histogram over the bins of ``grid`` (edges, ascending), the values
    of a bin taken as spread evenly over it. Returns float64 [len(grid) - 1]."""
    edges = np.asarray(edges, np.float64)
    cdf = np.concatenate([[0.0], np.cumsum(np.asarray(counts, np.float64))])
    if len(edges) != len(cdf) or len(edges) < 2 or not np.all(np.isfinite(edges)):
        return np.zeros(len(grid) - 1)
    if edges[-1] <= edges[0]:  # a single value: all of it at that point
        at = np.searchsorted(grid, edges[0], side="right") - 1
        out = np.zeros(len(grid) - 1)
        out[min(max(at, 0), len(out) - 1)] = cdf[-1]
        return out
    return np.diff(np.interp(grid, edges, cdf))


def steps_per_row(n: int, rows: int) -> tuple[int, int]:
    """``(steps per row, rows used)`` for ``n`` steps in at most ``rows`` rows: every row
    holds the same number of consecutive steps (the last one what is left)."""
    per = max(1, math.ceil(n / max(1, rows)))
    return per, max(1, math.ceil(n / per)) if n else 1


def heat_rows(data: HistogramData, columns: int, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The heat strip's cells: ``(share [r, columns] in 0..1, first record index of
    each row [r], value grid [columns + 1])``. Histograms are spread over one common
    value grid (from the smallest to the largest edge of any step holding values); when
    there are more steps than ``rows``, every row holds :func:`steps_per_row`
    consecutive steps (their shares averaged) and is labelled with its first step."""
    n = len(data.counts)
    finite = [e for e in data.edges if len(e) >= 2 and np.all(np.isfinite(e))]
    # the range of the histograms that hold values (an empty one's edges are made up)
    holding = [e for e, c in zip(data.edges, data.counts, strict=True)
               if len(e) >= 2 and np.all(np.isfinite(e)) and np.sum(c) > 0]
    finite = holding or finite
    lo = min((float(e[0]) for e in finite), default=0.0)
    hi = max((float(e[-1]) for e in finite), default=1.0)
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    grid = np.linspace(lo, hi, columns + 1)
    per, r = steps_per_row(n, rows)
    starts = np.arange(r) * per
    share = np.zeros((r, columns))
    for k in range(r):
        end = starts[k + 1] if k + 1 < r else n
        for i in range(int(starts[k]), int(end)):
            mass = resample(data.edges[i], data.counts[i], grid)
            total = mass.sum()
            if total > 0:
                share[k] += mass / total
        share[k] /= max(1, end - starts[k])
    return share, starts, grid


def heat_strip(data: HistogramData, width: int, height: int) -> Text:
    """Every histogram of the tag as rows of shaded cells (``height`` lines including
    the value axis, at most ``width`` cells); the selected step's row is marked ▶."""
    n = len(data.counts)
    if n == 0:
        return Text("(no histograms)", style=AXIS_STYLE)
    lab = max(len(str(int(data.steps[0]))), len(str(int(data.steps[-1])))) + 2
    columns = width - lab - 1
    if columns < 4 or height < 2:
        return Text("(no room for the steps)", style=AXIS_STYLE)
    share, starts, grid = heat_rows(data, columns, height - 1)
    top = float(share.max()) if share.size else 0.0
    levels = np.zeros(share.shape, np.int64) if top <= 0 else \
        np.ceil(share / top * (len(SHADES) - 1)).astype(np.int64)
    sel_row = -1
    if 0 <= data.selected < n:
        sel_row = int(np.searchsorted(starts, data.selected, side="right")) - 1
    out = Text(no_wrap=True, end="")
    for k, first in enumerate(starts):
        mark = "▶" if k == sel_row else " "
        out.append(mark + str(int(data.steps[int(first)])).rjust(lab - 1),
                   style="bold #ffd75f" if k == sel_row else AXIS_STYLE)
        out.append("│", style=AXIS_STYLE)
        for v in levels[k]:
            out.append(SHADES[v], style=SHADE_STYLES[v])
        out.append("\n")
    if top <= 0:
        axis = "(no finite values in any step)"[:columns]
    else:
        axis = axis_labels(columns, lambda x: grid[0] + (grid[-1] - grid[0]) * x / columns)
    out.append(" " * (lab + 1) + axis, style=AXIS_STYLE)
    return out


def heat_caption(data: HistogramData, rows: int, width: int = 200) -> Text:
    """One line over the heat strip: how many steps, how many per row, the shading.
    ``rows``: rows of steps of the strip (the height given to :func:`heat_strip` less
    its value axis)."""
    n = len(data.counts)
    per, _r = steps_per_row(n, rows)
    t = Text(no_wrap=True, end="", overflow="ellipsis")
    t.append(plural(n, "step"), style="bold")
    if per > 1:
        t.append(f", {per} per row", style=AXIS_STYLE)
    t.append(" · shade: share of the step's values in each range", style=AXIS_STYLE)
    if data.unreadable:
        t.append(f" · {data.unreadable} unreadable (left out)", style="bold #ff8787")
    t.truncate(max(1, width), overflow="ellipsis")
    return t


class HistogramView(Widget):
    """The selected step's bars above the heat strip of all steps, sized to the
    widget. ``data``: :class:`HistogramData` or None (nothing drawn)."""

    DEFAULT_CSS = "HistogramView { height: 1fr; width: 1fr; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data: HistogramData | None = None

    def show(self, data: HistogramData | None) -> None:
        """Draw ``data`` (None: clear)."""
        self.data = data
        self.refresh()

    def render(self) -> Text:
        data = self.data
        if data is None or not len(data.counts):
            return Text("")
        w, h = self.size.width, self.size.height
        out = Text(no_wrap=True, end="")
        if 0 <= data.selected < len(data.counts):
            bar_h = max(4, (h - 2) // 2) if h >= 12 else max(3, h - 1)
            out.append_text(bar_caption(data, w))
            out.append("\n")
            out.append_text(bar_chart(data.edges[data.selected], data.counts[data.selected], w, bar_h))
            heat_h = h - 2 - bar_h
        else:
            heat_h = h - 1
        if heat_h >= 3:
            if out.plain:
                out.append("\n\n")
            # the strip is heat_h - 1 lines: its rows of steps and the value axis
            out.append_text(heat_caption(data, heat_h - 2, w))
            out.append("\n")
            out.append_text(heat_strip(data, w, heat_h - 1))
        elif not out.plain:
            out.append_text(lit(data.tag))
        return out
