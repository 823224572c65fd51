"""The runs of a root, as ``nb ls`` lists them, with live status.

Type to filter (or ``/``), Enter opens the highlighted run — or, when some are
selected with space, all selected runs overlaid in one run screen. A running run's
last step says how old it is (``70 4s ago``: rank 0 records its progress in
run.json every few seconds), counted on at every poll.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from ..messages import RunsLoaded
from ..navigation import navigator
from ..text import fmt_duration, fmt_span, fmt_time, lit

STATUS_STYLE = {"running": "bold green", "finished": "", "failed": "bold red", "preempted": "yellow", "stale": "yellow", "unknown": "dim"}
COLUMNS = ("", "run", "project", "name", "status", "ranks", "sess", "last step", "started", "active")
# fixed widths: the layout does not depend on when rows arrive (long names are cut)
WIDTHS = (1, 18, 8, 10, 8, 5, 4, 13, 16, 7)
LIVE = ("running", "stale")  # statuses whose last step gets its age


class RunsScreen(Screen):
    AUTO_FOCUS = "#runs-table"
    BINDINGS = [
        Binding("enter", "open", "open"),
        Binding("space", "toggle_select", "select"),
        Binding("slash", "focus_filter", "filter"),
        Binding("escape", "clear_filter", "clear", show=False),
        Binding("ctrl+g", "ask_group", "group by…", show=False),
    ]

    def __init__(self, root: str, project: str | None = None, poll_s: float = 1.0, group: str | None = None):
        """``poll_s``: seconds between listings (0: list once). The clock of the ages
        is the app's ``clock`` attribute (unix seconds) when it has one, else
        :func:`time.time`."""
        super().__init__()
        self.root = root
        self.project = project
        self.poll_s = poll_s
        self.group = group or None  # a config key: opening several runs draws each group's mean and band
        self.rows: list[dict] = []
        self.selected: set[str] = set()
        self._shown: list[str] = []
        self._loading = False
        self._listed = False  # a first listing arrived (an empty one too: no more "loading…")

    def compose(self) -> ComposeResult:
        yield Static(self._header(), id="runs-header", classes="header")
        yield Input(placeholder="filter runs: type to filter, / to focus", id="runs-filter", select_on_focus=False)
        table: DataTable[Any] = DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static(Text("loading…", style="dim"), id="runs-empty", classes="note")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for c, w in zip(COLUMNS, WIDTHS, strict=True):
            table.add_column(c, key=c or "sel", width=w)
        table.focus()
        self.load()
        if self.poll_s > 0:
            self.set_interval(self.poll_s, self.load)

    def load(self) -> None:
        if not self._loading:
            self._loading = True
            self._read()

    @work(thread=True, exclusive=True, group="runs")
    def _read(self) -> None:
        from nblog.reader import list_runs

        try:
            rows = list_runs(self.root, self.project)
        finally:
            self._loading = False
        self.post_message(RunsLoaded(rows))

    def _now(self) -> float:
        return getattr(self.app, "clock", time.time)()

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        if message.rows != self.rows or not self._listed:
            self._listed = True
            self.rows = message.rows
            self._render_rows()
        else:  # the same rows: the ages of the running runs' last steps still grow
            shown = set(self._shown)
            now = self._now()
            table = self.query_one(DataTable)
            for r in self.rows:
                if r.get("last_step_updated") is not None and r["status"] in LIVE and self._key(r) in shown:
                    table.update_cell(self._key(r), "last step", self._last_step(r, now))

    def _key(self, row: dict) -> str:
        return row["path"]

    def _matches(self, row: dict, words: list[str]) -> bool:
        hay = " ".join(str(row.get(k) or "") for k in ("id", "project", "name", "status")).lower()
        failure = row.get("failure")
        if isinstance(failure, dict):  # type "runtimeerror" to find the runs that failed with it
            hay += f" {failure.get('type') or ''} {failure.get('message') or ''}".lower()
        return all(w in hay for w in words)

    def _render_rows(self) -> None:
        table = self.query_one(DataTable)
        words = self.query_one("#runs-filter", Input).value.lower().split()
        rows = [r for r in self.rows if self._matches(r, words)]
        keys = [self._key(r) for r in rows]
        cursor_key = self._shown[table.cursor_row] if 0 <= table.cursor_row < len(self._shown) else None
        if keys != self._shown:
            table.clear()
            for r in rows:
                table.add_row(*self._cells(r), key=self._key(r))
            self._shown = keys
            if cursor_key in keys:
                table.move_cursor(row=keys.index(cursor_key))
        else:
            for r in rows:
                for col, cell in zip(COLUMNS, self._cells(r), strict=True):
                    table.update_cell(self._key(r), col or "sel", cell)
        empty = self.query_one("#runs-empty", Static)
        if not self.rows:
            gone = "" if os.path.isdir(self.root) else " — it does not exist"
            empty.update(lit(f"no runs in {self.root} yet{gone} (waiting for runs to appear)", "dim"))
        elif not rows:
            empty.update(lit("no run matches the filter", "dim"))
        else:
            n = len(self.selected)
            empty.update(lit(f"{len(rows)} of {len(self.rows)} runs" + (f" · {n} selected (Enter overlays them)"
                                                                        if n else ""), "dim"))

    def _last_step(self, r: dict, now: float) -> Text:
        # left-aligned: on a narrow terminal the step is what stays in view
        last = r.get("last_step")
        out = Text("-" if last is None else str(last), no_wrap=True)
        at = r.get("last_step_updated") if r["status"] in LIVE else None
        if last is not None and at is not None:
            out.append(f" {fmt_span(max(0.0, now - at))} ago", style="dim")
        return out

    def _cells(self, r: dict) -> list:
        status = str(r.get("status") or "unknown")
        return [
            Text("●", style="bold #5fafff") if self._key(r) in self.selected else (
                # rank 0's failure from run.json (the catalog row): no event log is read per poll
                Text("✗", style="bold #ff5f5f") if isinstance(r.get("failure"), dict) else Text(" ")),
            lit(r.get("id"), "bold"),
            lit(r.get("project")),
            lit(r.get("name") or ""),
            lit(status, STATUS_STYLE.get(status, "")),
            Text(str(r.get("ranks") or 0), justify="right"),
            Text(str(r.get("sessions") or 0), justify="right"),
            self._last_step(r, self._now()),
            Text(fmt_time(r.get("started"))[:16]),
            Text(fmt_duration(r.get("duration_s")), justify="right"),
        ]

    @on(Input.Changed, "#runs-filter")
    def _filter_changed(self) -> None:
        self._render_rows()

    @on(Input.Submitted, "#runs-filter")
    def _filter_done(self) -> None:
        self.query_one(DataTable).focus()

    def on_key(self, event: events.Key) -> None:
        # type to filter: a printable key the table does not use goes to the filter
        table = self.query_one(DataTable)
        if (self.focused is table and event.is_printable and event.character is not None
                and event.character not in (" ", "/", "?", "q")):
            box = self.query_one("#runs-filter", Input)
            box.focus()
            box.insert_text_at_cursor(event.character)
            event.stop()
            event.prevent_default()

    def _highlighted(self) -> dict | None:
        table = self.query_one(DataTable)
        if not self._shown or not 0 <= table.cursor_row < len(self._shown):
            return None
        key = self._shown[table.cursor_row]
        return next((r for r in self.rows if self._key(r) == key), None)

    @on(DataTable.RowSelected, "#runs-table")
    def _row_selected(self) -> None:
        self.action_open()

    def action_open(self) -> None:
        chosen = [r["path"] for r in self.rows if r["path"] in self.selected]
        if not chosen:
            row = self._highlighted()
            if row is None:
                return
            chosen = [row["path"]]
        navigator(self.app).open_runs(chosen, group=self.group)

    def _header(self) -> Text:
        where = self.root + (f"  project {self.project}" if self.project else "")
        head = lit(f"nb · runs in {where}")
        if self.group:
            head.append("  grouped by ", style="dim")
            head.append_text(lit(self.group, "bold #d787ff"))
        return head

    def action_ask_group(self) -> None:
        """Ask for the config key to group the selected runs by (empty: no groups)."""
        from .groupprompt import GroupPrompt

        def done(value: str | None) -> None:
            if value is not None:
                self.group = value or None
                self.query_one("#runs-header", Static).update(self._header())

        self.app.push_screen(GroupPrompt(self.group), done)

    def action_toggle_select(self) -> None:
        row = self._highlighted()
        if row is None:
            return
        key = self._key(row)
        self.selected.symmetric_difference_update({key})
        self._render_rows()

    def action_focus_filter(self) -> None:
        self.query_one("#runs-filter", Input).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#runs-filter", Input)
        box.value = ""
        self.query_one(DataTable).focus()

    def palette_commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        """The command palette's entries of this screen: (title, help, callback)."""
        return [
            ("Open run(s)", "Open the highlighted run, or the selected ones overlaid", self.action_open),
            ("Filter runs", "Focus the filter box", self.action_focus_filter),
        ]
