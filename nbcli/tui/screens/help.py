"""``?``: every key of the current screen, and what the screen shows."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = [
    ("everywhere", [
        ("q", "quit"), ("?", "this help"), ("ctrl+p", "command palette"), ("escape", "back / close / clear filter"),
        ("tab / shift+tab", "move focus"), ("mouse", "click tabs, rows, tree nodes; scroll"),
    ]),
    ("runs", [
        ("type, or /", "filter runs (id, project, name, status)"), ("↑ ↓", "move"),
        ("enter", "open the run, or the selected runs overlaid"), ("space", "select a run to overlay"),
        ("ctrl+g", "group the runs opened by a config key: each group's mean, min–max band"),
    ]),
    ("run", [
        ("1 2 3 4 5 6", "plots · timers · system · text · media · console"), ("/", "filter tags (type; enter to return to the tree)"),
        ("enter / space", "select a tag (several make a grid); c clears"),
        ("x", "x axis: step → wall time → active time (queue gaps left out)"),
        ("s / S", "more / less EMA smoothing (the raw curve stays, faint)"), ("l", "log y axis"),
        ("a", "plots: all ranks — median, min–max band, the outlying rank named"),
        ("[ / ]", "previous / next rank"), ("r", "type a rank"),
        ("m", "system: one machine after another, then all"), ("f5", "read new data now"),
    ]),
    ("media", [
        ("↑ ↓", "move through tags and steps (the image, or the histogram of that step)"),
        ("enter / space", "open or close a tag"),
    ]),
]

LEGEND = (
    "Plots: × NaN, ▲ +inf, ▼ -inf (markers, not values); a red │ under ! a failure or alert at its step (the "
    "header counts them, the Console view lists them); ┆ a new session starts (points of an earlier "
    "session at later steps are hidden, as every reader hides them). Long series are drawn from the min and "
    "max of each bucket — display only; the note above a plot says so. Timers: stragglers in red, by nb timers' "
    "rule (a lower median per step, warm-up and steps after a failure left out, 1.2× the median of the ranks' "
    "and 5 ms above it); the band is min–max across ranks of seconds per step, with the median and the line of "
    "the slowest rank; more than 8 ranks: a heat map naming the stragglers. "
    "System: GPU grid coloured by utilization (red idle, yellow low, green busy). Media: images in Kitty's "
    "or Sixel graphics where the terminal has them, else half blocks (nb tui --images); histograms as the bars "
    "of one step over a heat strip of all steps (rows: steps, shade: share of a step's values in each range). "
    "Console: the selected rank's captured stdout and stderr (its last 2,000 lines, followed live; stderr in "
    "red, nb's own notes in yellow), with the time and step of each line."
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold #5fafff", no_wrap=True)
        table.add_column()
        for section, keys in KEYS:
            table.add_row(Text(section, style="bold underline"), "")
            for key, what in keys:
                table.add_row(key, what)
        with VerticalScroll(id="help"):
            yield Static(table)
            yield Static(Text(LEGEND, style="dim"))

    # the binding's action, called without a result (Screen's own is async, takes one)
    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
