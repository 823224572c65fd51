"""A small modal that asks for a rank number."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class RankPrompt(ModalScreen[int | None]):
    """Type a rank, Enter to show it, Escape to cancel."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, current: int, ranks: list[int]):
        super().__init__()
        self.current = current
        self.ranks = ranks

    def compose(self) -> ComposeResult:
        span = f"{self.ranks[0]}–{self.ranks[-1]}" if self.ranks else "none yet"
        with Vertical(id="prompt"):
            yield Label(f"Go to rank (ranks with logs: {span})")
            yield Input(str(self.current), id="rank-input", type="integer")
            yield Label("", id="rank-error", classes="error")

    def on_mount(self) -> None:
        box = self.query_one(Input)
        box.focus()
        box.select_all()

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        try:
            rank = int(event.value)
        except ValueError:
            self.query_one("#rank-error", Label).update("a rank is a whole number")
            return
        if rank < 0:
            self.query_one("#rank-error", Label).update("a rank is 0 or more")
            return
        self.dismiss(rank)

    def action_cancel(self) -> None:
        self.dismiss(None)
