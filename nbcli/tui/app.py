"""The Textual application: picks the first screen, global keys, command palette."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from .model import RunModel
from .screens.help import HelpScreen
from .screens.run import RunScreen
from .screens.runs import RunsScreen


class NbTui(App):
    """``runs``: run folders to open (several are overlaid); else the runs screen of
    ``root`` (only ``project``'s runs when given). ``poll_s``: seconds between reads of
    new data (0: read once, for tests). ``lives``: the runs already opened by
    :func:`nbcli.tui.preload.start`. ``image_mode``: how the media view draws
    images: "auto", "kitty", "sixel" or "halfblock" (``nbcli.tui.widgets.picture``).
    ``clock``: unix seconds now, for the ages the runs list shows (a fixed one in
    tests; default :func:`time.time`)."""

    CSS_PATH = "nb.tcss"
    TITLE = "nb"
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
    ]

    def __init__(self, *, root: str = "nb_runs", runs: list[str] | None = None, project: str | None = None,
                 poll_s: float = 1.0, image_mode: str = "auto", lives: list | None = None,
                 clock: Callable[[], float] | None = None, group: str | None = None):
        super().__init__()
        self.group = group or None  # a config key: several runs opened are drawn as groups (mean, band)
        self.clock = clock or time.time
        self.image_mode = image_mode
        self.root = root
        self.runs = list(runs or [])
        self.project = project
        self.poll_s = poll_s
        self._model = None
        if self.runs:
            self._model = RunModel(self.runs, lives)
            self._model.group_key = self.group
            if lives is None:  # else nbcli.tui.preload.start is reading them already
                self._model.preload_in_background()  # read while Textual starts

    def on_mount(self) -> None:
        self._trap_signals()
        if self.runs:
            self.push_screen(RunScreen(self.runs, poll_s=self.poll_s, model=self._model))
        else:
            self.push_screen(RunsScreen(self.root, self.project, poll_s=self.poll_s, group=self.group))

    # Navigation between screens is the App's: a screen asks for the next one through these
    # methods and never imports another screen.

    def open_runs(self, paths: list[str], group: str | None = None) -> None:
        """Push the run screen of the run folders ``paths`` (several are overlaid, drawn
        as groups of the config key ``group`` when given)."""
        self.push_screen(RunScreen(paths, poll_s=self.poll_s, group=group))

    def show_runs_of(self, root: str) -> None:
        """Replace the current screen by the runs screen of the runs folder ``root``."""
        self.switch_screen(RunsScreen(root, poll_s=self.poll_s))

    def _trap_signals(self) -> None:
        """SIGTERM and SIGHUP end the app as q does (the terminal restored: no alternate
        screen, no mouse reporting left on), with the exit status 128 + the signal's
        number (143 for SIGTERM) in :attr:`return_code`. Only where the event loop can
        take signal handlers (the main thread of a Unix process)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                loop.add_signal_handler(sig, self.exit, None, 128 + sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "Keys and what the screens show", self.action_help)
        for title, help_text, callback in getattr(screen, "palette_commands", lambda: [])():
            yield SystemCommand(title, help_text, callback)
