"""A small modal that asks for the config key to group runs by (ctrl+g in the runs screen)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class GroupPrompt(ModalScreen[str | None]):
    """Type a flattened config key ("optim.lr"), Enter to group by it (empty: no
    grouping), Escape to cancel. Dismisses with the key, "" for none, None on cancel."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, current: str | None):
        super().__init__()
        self.current = current or ""

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt"):
            yield Label("Group runs by config key (e.g. optim.lr; empty: no groups)")
            yield Input(self.current, id="group-input", placeholder="optim.lr")

    def on_mount(self) -> None:
        box = self.query_one(Input)
        box.focus()
        box.select_all()

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
