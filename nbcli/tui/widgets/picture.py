"""An image in the terminal, through textual-image: the Kitty graphics protocol or
Sixel where the terminal has them, coloured half blocks (``▀``) elsewhere.

textual-image asks the terminal what it supports when it is imported, by writing an
escape sequence and reading the answer from stdin. Once Textual runs, its input
thread would eat that answer (and the query could eat a key press), so this module
imports textual-image only when the first image is shown, with the terminal query
turned off, and picks the method itself (:func:`pick_mode`): from ``--images`` /
``$NB_TUI_IMAGE``, else from what the environment says about the terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

from rich.text import Text
from textual.containers import Container
from textual.widgets import Static

if TYPE_CHECKING:
    from PIL import Image

#: Accepted values of ``--images`` / ``$NB_TUI_IMAGE``.
IMAGE_MODES = ("auto", "kitty", "sixel", "halfblock")
DEFAULT_CELL = (10, 20)  # pixels of a terminal cell (width, height) when the terminal does not say

_SIXEL_PROGRAMS = {"wezterm"}
_SIXEL_TERMS = ("foot", "mlterm", "contour", "yaft")


def pick_mode(mode: str | None = "auto", environ: Mapping[str, str] | None = None,
              is_tty: bool | None = None) -> str:
    """The rendering method for ``mode`` ("auto", "kitty", "sixel" or "halfblock";
    anything else counts as "auto"). "auto" never queries the terminal: Kitty's
    protocol in Kitty, Sixel in terminals known to draw it (WezTerm, Konsole, foot,
    mlterm, contour), half blocks elsewhere — in tmux and screen, and when stdout is
    not a terminal too."""
    mode = (mode or "auto").strip().lower()
    if mode in IMAGE_MODES and mode != "auto":
        return mode
    env = os.environ if environ is None else environ
    if is_tty is None:
        out = sys.__stdout__
        is_tty = bool(out and out.isatty())
    term = env.get("TERM", "")
    if not is_tty or env.get("TMUX") or term.startswith(("screen", "tmux")):
        return "halfblock"
    if term == "xterm-kitty" or env.get("KITTY_WINDOW_ID"):
        return "kitty"
    if env.get("TERM_PROGRAM", "").lower() in _SIXEL_PROGRAMS or env.get("KONSOLE_VERSION") \
            or term.startswith(_SIXEL_TERMS):
        return "sixel"
    return "halfblock"


def cell_pixels() -> tuple[int, int]:
    """(width, height) in pixels of one terminal cell, from the terminal's window size
    (an ioctl: nothing is read from stdin); :data:`DEFAULT_CELL` when unknown."""
    try:
        import fcntl
        import struct
        import termios

        out = sys.__stdout__
        if out is None or not out.isatty():
            return DEFAULT_CELL
        rows, cols, xpix, ypix = struct.unpack("HHHH", fcntl.ioctl(out.fileno(), termios.TIOCGWINSZ, b"\0" * 8))
        if rows and cols and xpix and ypix:
            return max(1, xpix // cols), max(1, ypix // rows)
    except (ImportError, OSError, ValueError, AttributeError):
        pass
    return DEFAULT_CELL


class _NotATerminal:
    """Stands in for ``sys.__stdout__`` while textual-image is imported: it says it is
    no terminal, so nothing is written to or read from the real one."""

    def __init__(self, real: TextIO | None) -> None:
        self._real = real

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


_WIDGETS: dict[str, type] = {}


def image_widget_class(mode: str) -> type:
    """The textual-image widget class for a picked ``mode`` (imports textual-image).

    Raises:
        ImportError: textual-image is not installed.
    """
    if mode in _WIDGETS:
        return _WIDGETS[mode]
    if "textual_image.widget" not in sys.modules:
        cell = cell_pixels() if mode != "halfblock" else DEFAULT_CELL
        saved_env = {k: os.environ.get(k) for k in ("TEXTUAL_CELL_WIDTH", "TEXTUAL_CELL_HEIGHT")}
        real = sys.__stdout__
        # textual-image reads the cell size from these when stdout is no terminal
        os.environ["TEXTUAL_CELL_WIDTH"], os.environ["TEXTUAL_CELL_HEIGHT"] = str(cell[0]), str(cell[1])
        # typeshed declares sys.__stdout__ Final; it is swapped for this one import only
        sys.__stdout__ = _NotATerminal(real)  # type: ignore[misc, assignment]
        try:
            import textual_image.widget  # noqa: F401
        finally:
            sys.__stdout__ = real  # type: ignore[misc]
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    from textual_image import widget as tw

    cls = {"kitty": tw.TGPImage, "sixel": tw.SixelImage}.get(mode, tw.HalfcellImage)
    _WIDGETS[mode] = cls
    return cls


def fit_cells(width_px: int, height_px: int, max_cols: int, max_rows: int,
              cell: tuple[int, int] = DEFAULT_CELL) -> tuple[int, int]:
    """The largest (columns, rows) of cells of ``cell`` pixels that holds an image of
    ``width_px`` × ``height_px`` pixels at its aspect ratio within ``max_cols`` ×
    ``max_rows``; at least 1 × 1."""
    if width_px <= 0 or height_px <= 0 or max_cols <= 0 or max_rows <= 0:
        return 1, 1
    scale = min(max_cols * cell[0] / width_px, max_rows * cell[1] / height_px)
    cols = max(1, min(max_cols, round(width_px * scale / cell[0])))
    rows = max(1, min(max_rows, round(height_px * scale / cell[1])))
    return cols, rows


def halfblock_pixels(image: Image.Image, cols: int, rows: int) -> Image.Image:
    """``image`` scaled to the ``cols`` × ``2·rows`` pixels that half blocks draw:
    pixel for pixel when enlarging (a small image stays sharp), averaged when
    shrinking. Returns an RGB ``PIL.Image.Image``."""
    from PIL import Image

    rgb = image.convert("RGB")
    size = (max(1, cols), max(1, 2 * rows))
    if rgb.size == size:
        return rgb
    enlarge = size[0] >= rgb.width and size[1] >= rgb.height
    return rgb.resize(size, Image.Resampling.NEAREST if enlarge else Image.Resampling.BOX)


class Picture(Container):
    """Shows one PIL image as large as the widget allows, at its aspect ratio.

    ``mode``: "auto", "kitty", "sixel" or "halfblock" (see :func:`pick_mode`); the
    textual-image widget is created on the first :meth:`show`.
    """

    DEFAULT_CSS = "Picture { height: 1fr; width: 1fr; align: center top; }"

    def __init__(self, mode: str = "auto", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mode = mode
        self.image: Image.Image | None = None
        self._widget: Any = None  # the textual-image widget, of a class picked at run time
        self._picked = "halfblock"
        self._cell = DEFAULT_CELL
        self._shown: tuple | None = None

    def show(self, image: Image.Image | None) -> None:
        """Show ``image`` (a ``PIL.Image.Image``; None: nothing)."""
        self.image = image
        self._shown = None
        if image is None:
            if self._widget is not None:
                self._widget.display = False
            return
        if self._widget is None:
            self._picked = pick_mode(self.mode)
            try:
                cls = image_widget_class(self._picked)
            except ImportError:
                self.mount(Static(Text("images need textual-image: pip install textual-image", style="bold #ff8787")))
                return
            self._cell = DEFAULT_CELL if self._picked == "halfblock" else cell_pixels()
            self._widget = cls(None)
            self.mount(self._widget)
        self._fit()
        self._widget.display = True

    def _fit(self) -> None:
        if self._widget is None or self.image is None:
            return
        cols, rows = fit_cells(self.image.width, self.image.height, self.size.width or 40, self.size.height or 12,
                               self._cell)
        key = (id(self.image), cols, rows)
        if key == self._shown:
            return
        self._shown = key
        self._widget.styles.width = cols
        self._widget.styles.height = rows
        if self._picked == "halfblock":
            self._widget.image = halfblock_pixels(self.image, cols, rows)
        else:
            self._widget.image = self.image

    def on_resize(self) -> None:
        self._fit()
