"""The media view: the list of media records on the left; on the right, the
highlighted image, or the histogram bars of the highlighted step over the heat
strip of every step of its tag, or what can be said about it (audio, a broken blob,
no media at all)."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from ..media import MediaData
from ..text import clean, lit, lit_block
from .histogram import HistogramView
from .medialist import MediaList
from .picture import Picture


def middle_cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells: its start and end kept, ``…`` between."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[:max(0, width)]
    head_w = width // 2
    tail_w = width - 1 - head_w
    head, used = [], 0
    for ch in text:
        if used + cell_len(ch) > head_w:
            break
        head.append(ch)
        used += cell_len(ch)
    tail, used = [], 0
    for ch in reversed(text):
        if used + cell_len(ch) > tail_w:
            break
        tail.append(ch)
        used += cell_len(ch)
    return "".join(head) + "…" + "".join(reversed(tail))


def head_text(data: MediaData, width: int = 0) -> Text:
    """One line about the record shown: tag, step, kind, size, session, caption.

    ``width`` (0: no limit): a tag too long for it is cut in the middle (and the session
    and the image size left out when that is not enough) so that step, kind and the
    start of the caption stay on the line; the line is cut at ``width``."""
    r = data.record
    if r is None:
        return Text(f"rank {data.rank} · media", style="dim")
    facts = Text(no_wrap=True, end="")
    facts.append(f"  step {r.step}", style="bold")
    facts.append(f"  {r.kind}", style="dim")
    size = Text(no_wrap=True, end="")
    if r.kind == "image" and r.width and r.height:
        size.append(f" {r.width}×{r.height}" + (f"×{r.channels}" if r.channels else ""), style="dim")
    session = Text(f"  session {r.session}", style="dim")
    caption = Text(no_wrap=True, end="")
    if r.caption:
        caption.append("  ")
        caption.append_text(lit(r.caption, "italic"))
    tag = clean(r.tag)
    shown = [size, session]
    if width > 0:
        # the tag has what the rest leaves, keeping up to 24 cells of the caption; when
        # it must be cut to fewer than 12 cells, the session, then the size, then the
        # caption's cells beyond its first 12 make room for it
        room = width - facts.cell_len - size.cell_len - session.cell_len - min(caption.cell_len, 24)
        if cell_len(tag) > max(room, 12):
            for extra in (session, size):
                if room < 12:
                    shown.remove(extra)
                    room += extra.cell_len
            if room < 12:
                room += min(caption.cell_len, 24) - min(caption.cell_len, 12)
            tag = middle_cut(tag, max(12, room))
    for extra in shown:
        facts.append_text(extra)
    t = Text(tag, style="bold #5fafff", no_wrap=True, end="", overflow="ellipsis")
    t.append_text(facts)
    t.append_text(caption)
    if width > 0:
        t.truncate(width, overflow="ellipsis")
    return t


class MediaHead(Static):
    """:func:`head_text` of the record shown, fitted to the widget's width."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(Text("loading…", style="dim"), **kwargs)
        self.data: MediaData | None = None

    def show(self, data: MediaData) -> None:
        self.data = data
        self.refresh()

    def render(self) -> RenderResult:
        if self.data is None:
            return super().render()
        return head_text(self.data, self.size.width)


class MediaPane(Horizontal):
    """See the module docstring. ``image_mode``: how images are drawn
    (:func:`~nbcli.tui.widgets.picture.pick_mode`)."""

    def __init__(self, image_mode: str = "auto", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.image_mode = image_mode
        self.data: MediaData | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="media-side"):
            yield MediaList(id="media-list")
        with Vertical(id="media-main"):
            yield MediaHead(id="media-head", classes="note")
            yield Static(id="media-msg")
            yield Picture(self.image_mode, id="media-picture")
            yield HistogramView(id="media-hist")

    def on_mount(self) -> None:
        self.query_one("#media-msg").display = False
        self.query_one(HistogramView).display = False

    @property
    def highlighted(self) -> tuple | None:
        """The key under the list's cursor: a record key, ``(tag,)``, or None."""
        return self.query_one(MediaList).cursor_key

    def show(self, data: MediaData) -> None:
        """Draw ``data`` (from :meth:`nbcli.tui.media.MediaSource.view`)."""
        self.data = data
        self.query_one(MediaList).set_records(data.records, data.omitted)
        self.query_one(MediaHead).show(data)
        msg = self.query_one("#media-msg", Static)
        if data.message:
            msg.update(lit_block(data.message, "bold #ff8787" if data.error else "dim"))
        msg.display = bool(data.message)
        picture = self.query_one(Picture)
        picture.display = data.image is not None
        picture.show(data.image)
        hist = self.query_one(HistogramView)
        hist.display = data.histogram is not None and bool(data.histogram.counts)
        hist.show(data.histogram)
