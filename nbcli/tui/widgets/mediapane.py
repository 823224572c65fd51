"""The media view: the list of media records on the left; on the right, the
highlighted image, or the histogram bars of the highlighted step over the heat
strip of every step of its tag, or what can be said about it (audio, a broken blob,
no media at all)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from ..media import MediaData
from ..text import lit, lit_block
from .histogram import HistogramView
from .medialist import MediaList
from .picture import Picture


def head_text(data: MediaData) -> Text:
    """One line about the record shown: tag, step, kind, size, session, caption."""
    r = data.record
    if r is None:
        return Text(f"rank {data.rank} · media", style="dim")
    t = lit(r.tag, "bold #5fafff")
    t.append(f"  step {r.step}", style="bold")
    t.append(f"  {r.kind}", style="dim")
    if r.kind == "image" and r.width and r.height:
        t.append(f" {r.width}×{r.height}", style="dim")
        if r.channels:
            t.append(f"×{r.channels}", style="dim")
    t.append(f"  session {r.session}", style="dim")
    if r.caption:
        t.append("  ")
        t.append_text(lit(r.caption, "italic"))
    return t


class MediaPane(Horizontal):
    """See the module docstring. ``image_mode``: how images are drawn
    (:func:`~nbcli.tui.widgets.picture.pick_mode`)."""

    def __init__(self, image_mode: str = "auto", **kwargs) -> None:
        super().__init__(**kwargs)
        self.image_mode = image_mode
        self.data: MediaData | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="media-side"):
            yield MediaList(id="media-list")
        with Vertical(id="media-main"):
            yield Static(Text("loading…", style="dim"), id="media-head", classes="note")
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
        self.query_one("#media-head", Static).update(head_text(data))
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
