"""Messages the reading workers post to the screens (results, never widgets)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message


class RunsLoaded(Message):
    """The runs of the root (rows of ``nblog.reader._runs.catalog.list_runs``)."""

    def __init__(self, rows: list[dict]) -> None:
        super().__init__()
        self.rows = rows


@dataclass
class RunStatus:
    """What the header and the rank selector show."""

    title: str = ""
    status: str = ""
    gone: bool = False
    ranks: list[int] = field(default_factory=list)
    sessions: int = 0
    last_step: int | None = None
    tags: list[str] = field(default_factory=list)
    runs: int = 1
    waiting: bool = False


class StatusReady(Message):
    def __init__(self, status: RunStatus) -> None:
        super().__init__()
        self.status = status


class ViewReady(Message):
    """Data for one view, for the request ``seq``; ``data`` depends on ``view``."""

    def __init__(self, seq: int, view: str, data: Any) -> None:
        super().__init__()
        self.seq = seq
        self.view = view
        self.data = data


class LoadDone(Message):
    """A reading worker finished (whether or not it posted anything)."""

    def __init__(self, refresh: bool) -> None:
        super().__init__()
        self.refresh = refresh
