"""One run (or several overlaid): plots of scalars, timers across ranks, system
metrics per machine, text, media — for the selected rank, live.

Reading happens in thread workers (``_load``) that post results as messages; a
``set_interval`` poll asks for what was appended since the previous poll only.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, RichLog, Static, TabbedContent, TabPane

from nblog.reader import hang_summary
from nblog.reader.lowlevel import plural

from ..events import RunEvents
from ..messages import LoadDone, RunStatus, StatusReady, ViewReady
from ..model import MAX_PLOTS, Request, RunModel, SystemData, TextData, TimersData
from ..navigation import navigator
from ..plotdata import AXES, AXIS_NAMES, SMOOTHING
from ..text import fmt_seconds, fmt_time, lit, lit_block
from ..widgets.gpugrid import GpuGrid
from ..widgets.heatmap import RankHeatMap
from ..widgets.medialist import MediaList
from ..widgets.mediapane import MediaPane
from ..widgets.plot import BraillePlot, PlotSpec
from ..widgets.tagtree import TagTree
from .prompt import RankPrompt

if TYPE_CHECKING:
    from nblog.reader import ConsoleLogs

VIEWS = ("scalars", "timers", "system", "text", "media", "console")
FOCUS = {"scalars": "#tags", "timers": "#timer-table", "system": "#sys-scroll", "text": "#text-log",
         "media": "#media-list", "console": "#console-log"}
CONSOLE_LINES = 2000  # the Console view keeps the last N lines of the selected rank
CONSOLE_STYLE = {"stdout": "", "stderr": "#ff8787", "nb": "italic yellow"}


@dataclasses.dataclass
class ConsoleData:
    """New console lines of one rank for the Console view; ``reset``: a fresh read
    (another rank, or the first), the log is cleared first; ``files``: how many
    console files the rank has."""

    rank: int
    reset: bool
    lines: list
    files: int
ALERT_STYLE = {"error": "bold #ff5f5f", "warn": "yellow", "warning": "yellow", "info": "#5fafff"}  # run.alert levels
ALERTS_SHOWN = 8  # the Console view lists the latest N failures and alerts
PREVIEW_WAIT_S = 2.0  # the full read waits at most this long for a first plot from sidecars


class EventsReady(Message):
    """The run's failures and alerts (every rank), earliest first: ``RunEvents.events``."""

    def __init__(self, events: list[dict]) -> None:
        super().__init__()
        self.events = events


class HangReady(Message):
    """The run's stall as its hang dumps say it (``hang_summary``'s line: "hung since ...
    at step ...; suspects rank 2"), or None when it is not stalled."""

    def __init__(self, line: str | None) -> None:
        super().__init__()
        self.line = line


class EventsDone(Message):
    pass


STATUS_STYLE = {"running": "bold green", "finished": "bold", "failed": "bold red", "preempted": "yellow", "stale": "yellow"}


class PlotGrid(Container):
    """One plot or a grid of several."""

    DEFAULT_CSS = "PlotGrid { layout: grid; grid-size: 1 1; grid-gutter: 0 1; }"

    def show(self, specs: list[PlotSpec]) -> None:
        plots = list(self.query(BraillePlot))
        n = max(1, len(specs))
        cols = 1 if n == 1 else (2 if n <= 4 else 3)
        if self.size.width and self.size.width < 70:
            cols = 1
        rows = math.ceil(n / cols)
        self.styles.grid_size_columns = cols
        self.styles.grid_size_rows = rows
        for extra in plots[len(specs):]:
            extra.remove()
        for i, spec in enumerate(specs):
            if i < len(plots):
                plots[i].spec = spec
            else:
                self.mount(BraillePlot(spec))


class RunScreen(Screen):
    AUTO_FOCUS = "#tags"
    VIEW_KEYS = Binding.Group("views", compact=True)
    # What the footer shows, most important first; the rest is listed by ? (help). Help
    # and quit come first: the app's own bindings are last in the footer and were cut
    # off at 80-120 columns.
    BINDINGS = [
        Binding("question_mark", "app.help", "help"),
        Binding("q", "app.quit", "quit"),
        Binding("1", "view('scalars')", "plots", group=VIEW_KEYS),
        Binding("2", "view('timers')", "timers", group=VIEW_KEYS),
        Binding("3", "view('system')", "system", group=VIEW_KEYS),
        Binding("4", "view('text')", "text", group=VIEW_KEYS),
        Binding("5", "view('media')", "media", group=VIEW_KEYS),
        Binding("6", "view('console')", "console", group=VIEW_KEYS),
        Binding("r", "ask_rank", "rank…"),
        Binding("slash", "focus_filter", "filter"),
        Binding("x", "cycle_axis", "x axis", show=False),
        Binding("s", "smooth(1)", "smooth+", show=False),
        Binding("S", "smooth(-1)", "smooth-", show=False),
        Binding("l", "toggle_log", "log y", show=False),
        Binding("a", "toggle_all_ranks", "all ranks", show=False),
        Binding("left_square_bracket", "rank(-1)", "rank-", show=False),
        Binding("right_square_bracket", "rank(1)", "rank+", show=False),
        Binding("m", "next_machine", "machine", show=False),
        Binding("c", "clear_selection", "clear", show=False),
        Binding("escape", "back", "back", show=False),
        Binding("f5", "reload", "reload", show=False),
    ]

    def __init__(self, run_dirs: list[str], poll_s: float = 1.0, model: RunModel | None = None,
                 group: str | None = None):
        super().__init__()
        self.model = model or RunModel(run_dirs)
        if group:  # a config key: the plots draw each group's mean and min–max band
            self.model.group_key = group
        self.poll_s = poll_s
        self.view = "scalars"
        self.rank = 0
        self.axis = "step"
        self.smoothing = 0.6
        self.logy = False
        self.all_ranks = False  # Plots: the band across ranks instead of one rank's line
        self.machine = -1
        self.timer: str | None = None
        self.status = RunStatus()
        self.highlighted_tag: str | None = None
        self._seq = 0
        self._polling = False
        self._shown_seq: dict[str, int] = {}
        self._text_rank: int | None = None
        self._text_count = 0
        self._machines = 0
        self._timer_rows: list[dict] = []
        self._media_key: tuple | None = None
        self._con_logs: ConsoleLogs | None = None  # ConsoleLogs of _con_rank, used only by the load worker (under model.lock)
        self._con_rank: int | None = None
        self.events: list[dict] = []  # failures and alerts of the run (all ranks), read by _read_events
        self._run_events: RunEvents | None = None  # used only by the events worker
        self.hang: str | None = None  # the stall line of the hang dumps (nb hang), or None
        self._hang_read: str | None = None  # the last one the events worker posted
        self._events_busy = False
        self.previewed = 0  # first plots drawn from envelope sidecars (RunModel.preview)
        self._preview_drawn: dict[int, threading.Event] = {}  # id of a preview's specs -> set once drawn

    # -- layout -----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(Text("loading…", style="dim"), id="run-header", classes="header")
        with TabbedContent(initial="scalars", id="views"):
            with TabPane("Plots", id="scalars"):
                with Horizontal():
                    with Vertical(id="side"):
                        yield Input(placeholder="/ filter tags", id="tag-filter", select_on_focus=False)
                        yield TagTree(id="tags")
                    yield PlotGrid(id="plots")
            with TabPane("Timers", id="timers"):
                yield Static(id="timer-msg", classes="note")
                yield DataTable(id="timer-table", cursor_type="row", zebra_stripes=True)
                yield BraillePlot(PlotSpec(message="loading…"), id="band")
                heat = RankHeatMap(id="heatmap")
                heat.display = False  # in place of the band when many ranks time themselves
                yield heat
            with TabPane("System", id="system"):
                yield Static(id="sys-header", classes="note")
                yield GpuGrid(id="gpus")
                yield VerticalScroll(PlotGrid(id="sys-plots"), id="sys-scroll")
            with TabPane("Text", id="text"):
                yield RichLog(id="text-log", markup=False, highlight=False, wrap=True, max_lines=5000)
            with TabPane("Media", id="media"):
                yield MediaPane(getattr(self.app, "image_mode", "auto"), id="media-pane")
            with TabPane("Console", id="console"):
                yield Static(id="alerts", classes="note")
                yield RichLog(id="console-log", markup=False, highlight=False, wrap=True, max_lines=CONSOLE_LINES)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#timer-table", DataTable)
        # fixed widths: the layout does not depend on when rows arrive (long names are cut)
        for c, w in (("timer", 16), ("rank", 6), ("count", 6), ("mean", 7), ("p50", 7), ("p95", 7), ("max", 7),
                     ("total", 7)):
            table.add_column(c, key=c, width=w)
        self.query_one("#timer-msg").display = False
        self.query_one("#alerts").display = False
        self.query_one(TagTree).focus()
        self.request(refresh=True)  # the events are read once the first view is shown (on_view_ready)
        if self.poll_s > 0:
            self.set_interval(self.poll_s, self.poll)

    # -- reading ------------------------------------------------------------------------

    def poll(self) -> None:
        if not self._polling:
            self.request(refresh=True)
        self.poll_events()

    def poll_events(self) -> None:
        """Read new failures and alerts of every rank in a worker (one at a time)."""
        if not self._events_busy:
            self._events_busy = True
            self._read_events()

    @work(thread=True, group="events")
    def _read_events(self) -> None:
        try:
            if self._run_events is None:
                self._run_events = RunEvents(self.model.primary.dir)
            if self._run_events.poll():
                self.post_message(EventsReady(list(self._run_events.events)))
            hang = (hang_summary(self.model.primary.dir) or {}).get("line")  # one listing when no dump
            if hang != self._hang_read:
                self._hang_read = hang
                self.post_message(HangReady(hang))
        finally:
            self.post_message(EventsDone())

    def on_events_done(self, message: EventsDone) -> None:
        self._events_busy = False

    def on_hang_ready(self, message: HangReady) -> None:
        self.hang = message.line
        self._render_header()

    def on_events_ready(self, message: EventsReady) -> None:
        self.events = message.events
        self._render_header()
        self._mark_plots()
        self._show_alerts()

    def _mark_plots(self) -> None:
        """Failures and alerts as vertical marks at their step (step axis only)."""
        steps = [e["step"] for e in self.events if e["step"] is not None] if self.axis == "step" else []
        for plot in self.query_one("#plots", PlotGrid).query(BraillePlot):
            plot.set_markers(steps, "!")

    def request(self, refresh: bool = False) -> None:
        """Ask a worker for the current view's data (after reading new bytes if
        ``refresh``)."""
        self._seq += 1
        if self.view == "media":
            self._media_key = self.query_one(MediaPane).highlighted
        tree = self.query_one(TagTree)
        tags = tuple(tree.selected) or ((self.highlighted_tag,) if self.highlighted_tag else ())
        # min/max buckets: two per Braille column of the widest plot the terminal allows
        # (from the terminal size, not a widget's: the same on every run of a test)
        cols = {"scalars": 1 if len(tags) <= 1 else (2 if len(tags) <= 4 else 3), "system": 2}.get(self.view, 1)
        buckets = max(64, self.app.size.width * 2 // cols)
        req = Request(
            seq=self._seq, view=self.view, refresh=refresh, rank=self.rank, tags=tags[:MAX_PLOTS],
            axis=self.axis, smoothing=self.smoothing, logy=self.logy, buckets=buckets, machine=self.machine,
            timer=self.timer, media=self._media_key, all_ranks=self.all_ranks,
        )
        if refresh:
            self._polling = True
        self._load(req)

    def _preview(self, req: Request) -> bool:
        """Before the first plot: draw it from the run's envelope sidecars
        (:meth:`RunModel.preview`), in the load worker, before it waits for the model's
        lock; then wait (at most PREVIEW_WAIT_S) until that frame is on screen before the
        full read starts, which would hold the interpreter while the frame is drawn.
        True if a preview was posted."""
        if self.status.title or self._shown_seq.get("scalars"):
            return False
        try:
            got = self.model.preview(req)
        except Exception:  # the full read that follows reports what went wrong
            return False
        if got is None:
            return False
        self.previewed += 1
        drawn = self._preview_drawn[id(got[1])] = threading.Event()
        self.post_message(StatusReady(got[0]))
        self.post_message(ViewReady(req.seq, req.view, got[1]))
        drawn.wait(PREVIEW_WAIT_S)
        return True

    @work(thread=True, group="load")
    def _load(self, req: Request) -> None:
        model = self.model
        try:
            previewed = self._preview(req)
            with model.lock:
                if req.seq < self._seq and not req.refresh and not previewed:
                    return  # a newer request is queued
                changed = model.refresh() if req.refresh else False
                first = not self.status.title or previewed
                now = getattr(self.app, "clock", time.time)()
                if changed or first or not req.refresh:
                    status = model.status(req.rank, now)
                    self.post_message(StatusReady(status))
                    default = status.tags[0] if status.tags else None
                else:
                    default = self.status.tags[0] if self.status.tags else None
                    # nothing new, yet a silent run turns stale (the catalog's rule, as nb ls);
                    # an ended run's status changes only with new data: an idle viewer stays idle
                    word = model.run_status(now) if self.status.status in ("running", "waiting", "unknown") \
                        else self.status.status
                    if word != self.status.status:
                        self.post_message(StatusReady(dataclasses.replace(self.status, status=word)))
                if req.view == "console":  # its own files: new lines whether or not the event logs grew
                    console = self._console_data(req.rank)
                    if console is not None:
                        self.post_message(ViewReady(req.seq, req.view, console))
                    return
                if req.refresh and not changed and self._shown_seq.get(req.view) and not previewed:
                    return  # nothing new: nothing to redraw (an idle TUI stays idle)
                data = model.view(req, default)
                self.post_message(ViewReady(req.seq, req.view, data))
        finally:
            self.post_message(LoadDone(req.refresh))

    def _console_data(self, rank: int) -> ConsoleData | None:
        """The last CONSOLE_LINES lines of ``rank`` (another rank than before, or the
        first time), else the lines appended since; None when nothing is new. Runs in
        the load worker."""
        from nblog.reader import ConsoleLogs

        if self._con_logs is None or self._con_rank != rank:
            self._con_logs = ConsoleLogs(self.model.primary.dir, ranks=[rank])
            self._con_rank = rank
            lines = list(self._con_logs.read(last=CONSOLE_LINES))
            return ConsoleData(rank, True, lines, len(self._con_logs.files()))
        lines = self._con_logs.poll()
        if not lines:
            return None
        return ConsoleData(rank, False, lines[-CONSOLE_LINES:], len(self._con_logs.files()))

    def on_load_done(self, message: LoadDone) -> None:
        if message.refresh:
            self._polling = False

    def on_status_ready(self, message: StatusReady) -> None:
        self.status = message.status
        self.query_one(TagTree).set_tags(message.status.tags)
        self._render_header()

    def on_view_ready(self, message: ViewReady) -> None:
        drawn = self._preview_drawn.pop(id(message.data), None)
        if message.seq < self._shown_seq.get(message.view, 0):
            if drawn is not None:
                drawn.set()
            return  # an older answer arriving late
        self._shown_seq[message.view] = message.seq
        if drawn is not None:  # a first plot from sidecars: the full read waits for its frame
            self.call_after_refresh(drawn.set)
        elif self._run_events is None:
            # the first scan reads every rank's whole event logs: after the first plot,
            # not before it (scripts/bench_tui.py: the scan of a 458 MiB log costs ~0.5 s CPU)
            self.poll_events()
        if message.view == "scalars":
            self.query_one("#plots", PlotGrid).show(message.data)
            self._mark_plots()
        elif message.view == "timers":
            self._show_timers(message.data)
        elif message.view == "system":
            self._show_system(message.data)
        elif message.view == "text":
            self._show_text(message.data)
        elif message.view == "media":
            self.query_one(MediaPane).show(message.data)
        elif message.view == "console":
            self._show_console(message.data)

    # -- rendering ------------------------------------------------------------------------

    def _render_header(self) -> None:
        st = self.status
        t = lit(st.title, "bold")
        if st.runs > 1:
            grouped = self.model.group_key
            t.append(f"  +{st.runs - 1} grouped by {grouped}" if grouped else f"  +{st.runs - 1} overlaid",
                     style="#d787ff")
        t.append("  ")
        t.append_text(lit(st.status, STATUS_STYLE.get(st.status, "")))
        if st.gone:
            t.append("  run folder deleted — showing what was read", style="bold white on #af0000")
        elif st.waiting:
            t.append("  waiting for the run to write…", style="yellow")
        ranks = st.ranks
        span = f"{ranks[0]}–{ranks[-1]}" if len(ranks) > 1 else (str(ranks[0]) if ranks else "-")
        t.append(f"  all ranks ({span})" if self.all_ranks else f"  rank {self.rank} · ranks {span}",
                 style="bold #5fafff")
        t.append(f"  sessions {st.sessions}")
        fails = sum(e["kind"] == "failure" for e in self.events)
        alerts = len(self.events) - fails
        if fails:
            t.append(f"  {plural(fails, 'failure')}", style="bold #ff5f5f")
        if alerts:
            t.append(f"  {plural(alerts, 'alert')}", style="yellow")
        if self.hang:
            t.append(f"  {self.hang}", style="bold white on #af5f00")
        if st.last_step is not None:
            t.append(f"  step {st.last_step}")
        t.append(f"  x={AXIS_NAMES[self.axis]}", style="dim")
        t.append(f" ema={self.smoothing:g}" + (" log-y" if self.logy else ""), style="dim")
        self.query_one("#run-header", Static).update(t)

    def _show_timers(self, data: TimersData) -> None:
        table = self.query_one("#timer-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for row in data.rows:
            style = "bold #ff8787" if row["straggler"] else ""
            table.add_row(
                lit(row["tag"], style),
                Text(str(row["rank"]) + (" ◀" if row["straggler"] else "  "), style=style, justify="right"),
                Text(str(row["count"]), justify="right"),
                *(Text(fmt_seconds(row[k]), style=style, justify="right")
                  for k in ("mean_s", "p50_s", "p95_s", "max_s", "total_s")),
            )
        if data.rows and 0 <= cursor < len(data.rows):
            table.move_cursor(row=cursor, animate=False)
        self._timer_rows = data.rows
        self.timer = data.timer
        self.query_one("#band", BraillePlot).spec = data.band
        # no timers: a message instead of an empty table (as the text and system views)
        msg = self.query_one("#timer-msg", Static)
        msg.display = not data.rows
        table.display = self.query_one("#band").display = bool(data.rows)
        heat = self.query_one(RankHeatMap)
        heat.display = data.heat is not None
        if data.heat is not None:
            self.query_one("#band").display = False
            heat.show(data.heat)
        if not data.rows:
            ranks = self.status.ranks
            what = f"rank {ranks[0]} logged no timers" if len(ranks) == 1 else (
                f"no rank ({ranks[0]}–{ranks[-1]}) logged timers" if ranks else "no timers logged")
            msg.update(Text(f"{what} (yet) — run.timer(...); all_ranks=True for every rank", style="dim"))

    @on(DataTable.RowHighlighted, "#timer-table")
    def _timer_row(self, event: DataTable.RowHighlighted) -> None:
        rows = self._timer_rows
        if 0 <= event.cursor_row < len(rows) and rows[event.cursor_row]["tag"] != self.timer:
            self.timer = rows[event.cursor_row]["tag"]
            self.request()

    def _show_system(self, data: SystemData) -> None:
        self._machines = len(data.machines)
        self.query_one(GpuGrid).show(data.grid)
        which = "all machines (m: one machine)" if data.machine < 0 else \
            f"machine {data.machine + 1}/{len(data.machines)} (m: next, all after the last)"
        head = Text(f"{plural(len(data.machines), 'machine')} · ", style="dim")
        head.append(which, style="dim")
        self.query_one("#sys-header", Static).update(head)
        grid = self.query_one("#sys-plots", PlotGrid)
        grid.styles.height = max(10, 10 * math.ceil(max(1, len(data.plots)) / 2))
        grid.show(data.plots or [PlotSpec(message="no system metrics in this run")])

    def _show_text(self, data: TextData) -> None:
        log = self.query_one("#text-log", RichLog)
        if self._text_rank != data.rank or data.total < self._text_count:
            log.clear()
            self._text_rank = data.rank
            self._text_count = 0
            if not data.entries:
                log.write(Text(f"rank {data.rank} logged no text", style="dim"))
        new = data.total - self._text_count
        for session, step, tag, text, _wall in data.entries[-new:] if new > 0 else []:
            head = Text(f"step {step}", style="bold")
            head.append("  ")
            head.append_text(lit(tag, "#5fafff"))
            if session:
                head.append(f"  session {session}", style="dim")
            log.write(head)
            log.write(lit_block(text))
        self._text_count = data.total

    def _show_alerts(self) -> None:
        """The latest failures and alerts above the console: time, rank, step, level, title, text."""
        box = self.query_one("#alerts", Static)
        box.display = bool(self.events)
        shown = self.events[-ALERTS_SHOWN:]
        box.styles.height = len(shown) + 1  # the .note class is one line high
        t = Text(f"{len(self.events)} failures and alerts (all ranks; nb watch, nb show)"
                 + (f", the last {len(shown)}:" if len(shown) < len(self.events) else ":"), style="dim")
        for e in shown:
            t.append("\n")
            t.append(fmt_time(e["wall"])[11:] if e["wall"] is not None else "-", style="dim")
            t.append(f"  rank {e['rank']}  step {'-' if e['step'] is None else e['step']}  ")
            t.append_text(lit(e["level"] or e["kind"], ALERT_STYLE.get(e["level"], "")))
            t.append("  ")
            t.append_text(lit(e["title"], "bold"))
            if e["text"]:
                t.append(": ")
                t.append_text(lit(e["text"].split("\n", 1)[0][:200]))
        box.update(t)

    def _show_console(self, data: ConsoleData) -> None:
        log = self.query_one("#console-log", RichLog)
        if data.reset:
            log.clear()
            if not data.files:
                log.write(Text(f"rank {data.rank} captured no console (init(console=True) or NB_CONSOLE=1)",
                               style="dim"))
        for line in data.lines:
            head = Text(fmt_time(line.wall_time)[11:], style="dim")
            head.append(f" {'-' if line.step is None else line.step:>6} ", style="dim")
            head.append_text(lit(line.text.replace("\t", "    "), CONSOLE_STYLE.get(line.stream, "")))
            log.write(head)

    # -- events -----------------------------------------------------------------------------

    @on(TabbedContent.TabActivated)
    def _tab(self, event: TabbedContent.TabActivated) -> None:
        pane = event.pane.id if event.pane is not None else None
        if pane in VIEWS and pane != self.view:
            self.view = pane
            self.request()

    @on(TagTree.SelectionChanged)
    def _selection(self) -> None:
        self.request()

    @on(TagTree.TagHighlighted)
    def _highlight(self, event: TagTree.TagHighlighted) -> None:
        if event.tag is not None and event.tag != self.highlighted_tag:
            self.highlighted_tag = event.tag
            if not self.query_one(TagTree).selected:
                self.request()

    @on(MediaList.Highlighted)
    def _media_highlight(self, event: MediaList.Highlighted) -> None:
        if self.view == "media" and event.key != self._media_key:
            self.request()

    @on(Input.Changed, "#tag-filter")
    def _filter(self, event: Input.Changed) -> None:
        tree = self.query_one(TagTree)
        tree.set_tags(tree.tags, event.value)

    @on(Input.Submitted, "#tag-filter")
    def _filter_done(self) -> None:
        self.query_one(TagTree).focus()

    def on_resize(self) -> None:
        self.request()

    # -- actions ------------------------------------------------------------------------------

    def action_view(self, view: str) -> None:
        # focus a widget of the new pane: TabbedContent shows the pane holding the focus
        self.query_one(FOCUS[view]).focus()
        self.query_one(TabbedContent).active = view

    def action_reload(self) -> None:
        """Read what was appended now (without waiting for the next poll)."""
        self.request(refresh=True)

    def action_cycle_axis(self) -> None:
        self.axis = AXES[(AXES.index(self.axis) + 1) % len(AXES)]
        self._render_header()
        self._mark_plots()
        self.request()

    def action_smooth(self, delta: int) -> None:
        i = min(range(len(SMOOTHING)), key=lambda k: abs(SMOOTHING[k] - self.smoothing))
        self.smoothing = SMOOTHING[max(0, min(len(SMOOTHING) - 1, i + delta))]
        self._render_header()
        self.request()

    def action_toggle_log(self) -> None:
        self.logy = not self.logy
        self._render_header()
        self.request()

    def action_toggle_all_ranks(self) -> None:
        """Plots: the median, min–max band and outlying rank across every rank, or back
        to the selected rank's line."""
        self.all_ranks = not self.all_ranks
        if self.view != "scalars":
            self.action_view("scalars")
        self._render_header()
        self.request()

    def action_rank(self, delta: int) -> None:
        ranks = self.status.ranks or [0]
        if self.rank in ranks:
            i = ranks.index(self.rank) + delta
        else:
            i = next((k for k, r in enumerate(ranks) if r > self.rank), len(ranks)) - (1 if delta < 0 else 0)
        self.set_rank(ranks[max(0, min(len(ranks) - 1, i))])

    def set_rank(self, rank: int) -> None:
        if rank != self.rank:
            self.rank = rank
            self._render_header()
            self._shown_seq.clear()
            self.request(refresh=False)

    def action_ask_rank(self) -> None:
        def done(value: int | None) -> None:
            if value is not None:
                self.set_rank(value)

        self.app.push_screen(RankPrompt(self.rank, self.status.ranks), done)

    def action_next_machine(self) -> None:
        self.machine += 1
        if self.machine >= max(self._machines, 1):
            self.machine = -1  # after the last machine: all of them
        if self.view != "system":
            self.action_view("system")
        self.request()

    def action_focus_filter(self) -> None:
        if self.view != "scalars":
            self.action_view("scalars")
        self.query_one("#tag-filter", Input).focus()

    def action_clear_selection(self) -> None:
        self.query_one(TagTree).clear_selection()

    def action_back(self) -> None:
        box = self.query_one("#tag-filter", Input)
        if self.focused is box:
            box.value = ""
            self.query_one(TagTree).focus()
            return
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:  # opened directly (nb tui RUN): the runs of its root
            root = os.path.dirname(os.path.dirname(self.model.primary.dir)) or "."
            navigator(self.app).show_runs_of(root)

    def palette_commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        """The command palette's entries of this screen: (title, help, callback)."""
        cmds: list[tuple[str, str, Callable[[], object]]] = [
            (f"View: {v}", f"Switch to the {v} view", functools.partial(self.action_view, v)) for v in VIEWS]
        cmds += [
            ("X axis: next", "Step → wall time → active time", self.action_cycle_axis),
            ("Smoothing: more", "Raise the EMA weight", lambda: self.action_smooth(1)),
            ("Smoothing: less", "Lower the EMA weight (0 = raw)", lambda: self.action_smooth(-1)),
            ("Log scale", "Toggle a logarithmic y axis", self.action_toggle_log),
            ("All ranks", "Median, min–max band and outlying rank across ranks", self.action_toggle_all_ranks),
            ("Go to rank…", "Type a rank number", self.action_ask_rank),
            ("Next rank", "Show the next rank", lambda: self.action_rank(1)),
            ("Previous rank", "Show the previous rank", lambda: self.action_rank(-1)),
            ("Next machine", "System view: one machine after another, then all", self.action_next_machine),
            ("Clear selected tags", "Unselect every tag", self.action_clear_selection),
        ]
        return cmds
