"""A timer across ranks and steps as a heat map: one row per rank (or per machine),
one column per bucket of steps, each cell coloured by its mean time against the
median rank (the straggler rule's median of the ranks' lower medians per step), so
that a slow rank, a slow machine or a slow stretch of steps stands out at 8,192 ranks.

:func:`heat_data` builds a :class:`HeatData` from each rank's series (in the reading
worker); :class:`RankHeatMap` draws it: a header naming the stragglers (by the one
rule, :func:`nblog.reader.straggler_frames`), the slowest ranks and machines and the
colour scale, then the rows, grouped by machine and drawn only where
they are visible (a scrolling view: key ``g`` groups by machine, arrows and page keys
scroll).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from nblog.reader.lowlevel import plural

from ..text import clean

#: Colour of a cell by its ratio to the median rank's mean: upper bounds and colours.
SCALE = ((0.9, "#005f87"), (1.05, "#303030"), (1.15, "#5f5f00"), (1.3, "#af8700"), (1.6, "#d75f00"),
         (math.inf, "#d70000"))
NO_DATA = "#121212"
LABEL_W = 22
SLOWEST = 5


@dataclass
class HeatRows:
    """Rows of one grouping: a label per row and the cells (ratio to the median;
    NaN where the row has no point in that bucket)."""

    labels: list[str]
    cells: np.ndarray  # float32, rows × columns
    means: np.ndarray  # float64 seconds per row


@dataclass
class HeatData:
    """What the heat map shows for one timer. ``ranks``: rows per rank, grouped by
    machine (machines in name order, ranks ascending in each); ``machines``: one row
    per machine, the mean of its ranks. ``slowest``: (rank, host, seconds, ratio) of
    the slowest ranks, slowest first: by the straggler rule's lower median per step
    where ``judged`` (``median_s`` then is the rule's median), else by mean;
    ``slow_machines``: (host, ranks, mean_s, ratio); ``stragglers``: the rule's."""

    timer: str | None
    ranks: HeatRows | None = None
    machines: HeatRows | None = None
    first_step: int = 0
    last_step: int = 0
    median_s: float = 0.0
    slowest: list[tuple[int, str, float, float]] = field(default_factory=list)
    slow_machines: list[tuple[str, int, float, float]] = field(default_factory=list)
    message: str = ""
    judged: bool = False  # slowest and median_s are the straggler rule's
    stragglers: list[int] = field(default_factory=list)  # by the straggler rule


def heat_data(timer: str | None, series: Mapping[int, tuple[np.ndarray, np.ndarray]], hosts: Mapping[int, str],
              columns: int = 120, *, judged: Mapping[int, float] | None = None, median_s: float | None = None,
              stragglers: Iterable[int] = ()) -> HeatData:
    """The heat map of ``timer`` from each rank's (steps, seconds) arrays.

    Args:
        timer: the timer's tag (None: no timer; a message says so).
        series: rank → (steps int64, values float64 seconds); empty ranks are left out.
        hosts: rank → machine name ("?" where unknown).
        columns: at most this many buckets of steps (each the mean of its points).
        judged, median_s, stragglers: the straggler rule's verdict on this timer
            (:func:`nblog.reader.straggler_frames`): rank → its lower median per step
            (the ranks it judged), the median of those, the stragglers. Given, the
            slowest ranks are the rule's (highest lower median, ratio to
            ``median_s``) and the cells are coloured against ``median_s``; without
            them, by each rank's mean against the median of the means (display only:
            no rank is called a straggler).

    Returns:
        A :class:`HeatData`; its ``message`` is set when there is nothing to draw.
    """
    data = {r: sv for r, sv in series.items() if len(sv[0])}
    if timer is None or not data:
        return HeatData(timer, message="no timers logged (run.timer(...); all_ranks=True for every rank)"
                        if timer is None else f"no rank logged {timer} yet")
    order = sorted(data, key=lambda r: (hosts.get(r) or "?", r))
    counts = np.array([len(data[r][0]) for r in order])
    steps = np.concatenate([data[r][0] for r in order]).astype(np.int64, copy=False)
    values = np.concatenate([data[r][1] for r in order]).astype(np.float64, copy=False)
    row = np.repeat(np.arange(len(order)), counts)
    ok = np.isfinite(values)
    steps, values, row = steps[ok], values[ok], row[ok]
    if not len(values):
        return HeatData(timer, message=f"no finite value of {timer}")
    lo, hi = int(steps.min()), int(steps.max())
    ncol = max(1, min(columns, hi - lo + 1))
    col = ((steps - lo) * ncol // (hi - lo + 1)).astype(np.int64)
    nrow = len(order)
    flat = row * ncol + col
    sums = np.bincount(flat, weights=values, minlength=nrow * ncol).reshape(nrow, ncol)
    cnts = np.bincount(flat, minlength=nrow * ncol).reshape(nrow, ncol)
    row_sum = np.bincount(row, weights=values, minlength=nrow)
    row_n = np.bincount(row, minlength=nrow)
    with np.errstate(invalid="ignore", divide="ignore"):
        cell = sums / cnts
        means = row_sum / row_n
    have = row_n > 0
    median = float(np.median(means[have])) if median_s is None else float(median_s)
    ref = median if median > 0 else 1.0
    labels = [f"{r:>5} {clean(hosts.get(r) or '?')}" for r in order]
    ranks = HeatRows(labels, (cell / ref).astype(np.float32), means)
    # machines: the mean of each machine's points, bucket by bucket
    names = [hosts.get(r) or "?" for r in order]
    uniq = sorted(set(names))
    index = {h: i for i, h in enumerate(uniq)}
    mrow = np.array([index[h] for h in names])[row]
    mflat = mrow * ncol + col
    nm = len(uniq)
    msums = np.bincount(mflat, weights=values, minlength=nm * ncol).reshape(nm, ncol)
    mcnts = np.bincount(mflat, minlength=nm * ncol).reshape(nm, ncol)
    with np.errstate(invalid="ignore", divide="ignore"):
        mcell = msums / mcnts
        mmeans = np.bincount(mrow, weights=values, minlength=nm) / np.bincount(mrow, minlength=nm)
    per_host = np.bincount(np.array([index[h] for h in names]), minlength=nm)
    machines = HeatRows([f"{clean(h)} ({plural(n, 'rank')})" for h, n in zip(uniq, per_host, strict=True)],
                        (mcell / ref).astype(np.float32), mmeans)
    if judged is None:
        slow = sorted(range(nrow), key=lambda i: (-means[i] if have[i] else math.inf, order[i]))[:SLOWEST]
        slowest = [(order[i], names[i], float(means[i]), float(means[i] / ref)) for i in slow if have[i]]
    else:
        at = {r: i for i, r in enumerate(order)}
        slow_ranks = sorted((r for r in judged if r in at), key=lambda r: (-judged[r], r))[:SLOWEST]
        slowest = [(r, names[at[r]], float(judged[r]), float(judged[r] / ref)) for r in slow_ranks]
    mslow = sorted(range(nm), key=lambda i: (-mmeans[i], uniq[i]))[:3] if nm > 1 else []
    slow_machines = [(uniq[i], int(per_host[i]), float(mmeans[i]), float(mmeans[i] / ref)) for i in mslow]
    return HeatData(timer, ranks, machines, lo, hi, median, slowest, slow_machines, judged=judged is not None,
                    stragglers=sorted(stragglers))


def _level(ratio: float) -> int:
    if not ratio == ratio:  # NaN: no point in this bucket
        return -1
    for i, (upper, _c) in enumerate(SCALE):
        if ratio < upper:
            return i
    return len(SCALE) - 1


_STYLES = [Style(bgcolor=c) for _u, c in SCALE] + [Style(bgcolor=NO_DATA)]


def _fmt_s(v: float) -> str:
    if v >= 1:
        return f"{v:.2f}s"
    if v >= 1e-3:
        return f"{v * 1e3:.1f}ms"
    return f"{v * 1e6:.0f}µs"


def header_text(data: HeatData | None, by_machine: bool) -> Text:
    """The lines above the rows: the timer, the slowest ranks and machines, the scale."""
    if data is None:
        return Text("loading…", style="dim")
    if data.message:
        return Text(data.message, style="dim")
    rows = data.machines if by_machine else data.ranks
    assert rows is not None
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{clean(data.timer or '')}", style="bold")
    t.append(f" by {'machine' if by_machine else 'rank'} × step {data.first_step}–{data.last_step}, "
             f"{plural(len(rows.labels), 'row')}; median rank {_fmt_s(data.median_s)}"
             f"{' a step' if data.judged else ''}  (g: {'ranks' if by_machine else 'group by machine'})", style="dim")
    if data.judged:
        t.append("\nstragglers: ", style="dim")
        t.append(", ".join(str(r) for r in data.stragglers[:SLOWEST]) + (" …" if len(data.stragglers) > SLOWEST else "")
                 if data.stragglers else "none", style="bold #ff8787" if data.stragglers else "")
    t.append("\nslowest ranks: ", style="dim")
    flagged = set(data.stragglers)
    for i, (r, h, _m, ratio) in enumerate(data.slowest):
        t.append(", " if i else "", style="dim")
        t.append(f"{r} ({clean(h)}) {ratio:.2f}×", style="bold #ff8787" if r in flagged or not data.judged else "")
    if not data.slowest:
        t.append("—")
    if data.slow_machines:
        t.append("\nslowest machines: ", style="dim")
        t.append(", ".join(f"{clean(h)} {ratio:.2f}×" for h, _n, _m, ratio in data.slow_machines),
                 style="bold #ffaf5f")
    t.append("\n" + " " * LABEL_W)
    bounds = ["<0.9", "<1.05", "<1.15", "<1.3", "<1.6", "≥1.6"]
    for (_u, c), b in zip(SCALE, bounds, strict=True):
        t.append(f" {b}× ", style=f"on {c}")
    t.append("  of the median", style="dim")
    return t


class HeatRowsView(ScrollView, can_focus=True):
    """The rows, drawn line by line where visible (thousands of ranks scroll freely)."""

    BINDINGS = [Binding("g", "toggle_group", "by machine")]

    DEFAULT_CSS = "HeatRowsView { height: 1fr; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: HeatRows | None = None
        self._strips: dict[int, Strip] = {}

    def show(self, rows: HeatRows | None) -> None:
        self.rows = rows
        self._strips.clear()
        n = 0 if rows is None else len(rows.labels)
        width = LABEL_W + (0 if rows is None else rows.cells.shape[1])
        self.virtual_size = Size(width, n)
        self.refresh()

    def action_toggle_group(self) -> None:
        parent = self.parent
        if isinstance(parent, RankHeatMap):
            parent.toggle_group()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        i = scroll_y + y
        width = self.size.width
        rows = self.rows
        if rows is None or not 0 <= i < len(rows.labels):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(i)
        if strip is None:
            strip = self._strips[i] = self._strip(i)
        return strip.crop(scroll_x, scroll_x + width).extend_cell_length(width)

    def _strip(self, i: int) -> Strip:
        rows = self.rows
        assert rows is not None
        label = rows.labels[i][: LABEL_W - 1].ljust(LABEL_W)
        segs = [Segment(label, Style(dim=True))]
        levels = [_level(float(v)) for v in rows.cells[i]]
        start = 0
        for j in range(1, len(levels) + 1):
            if j == len(levels) or levels[j] != levels[start]:
                segs.append(Segment(" " * (j - start), _STYLES[levels[start]]))
                start = j
        return Strip(segs)


class RankHeatMap(Vertical):
    """The heat map: :meth:`show` a :class:`HeatData`; ``g`` (rows focused) groups
    the rows by machine and back."""

    DEFAULT_CSS = """
    RankHeatMap { height: 1fr; min-height: 8; }
    RankHeatMap > Static { height: auto; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data: HeatData | None = None
        self.by_machine = False

    @property
    def has_data(self) -> bool:
        """Whether rows are shown (a timer with points)."""
        return self.data is not None and self.data.ranks is not None

    def compose(self) -> ComposeResult:
        yield Static(header_text(None, False), classes="heat-head")
        yield HeatRowsView()

    def show(self, data: HeatData) -> None:
        self.data = data
        self._draw()

    def toggle_group(self) -> None:
        self.by_machine = not self.by_machine
        self._draw()

    def _draw(self) -> None:
        data = self.data
        self.query_one(Static).update(header_text(data, self.by_machine))
        rows = None if data is None else (data.machines if self.by_machine else data.ranks)
        view = self.query_one(HeatRowsView)
        view.show(rows)
