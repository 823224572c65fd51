"""Literal text and number formatting for the TUI.

Everything that comes from logged data (tags, text, run names, host names) reaches
the screen through :func:`lit` (a :class:`rich.text.Text`, never markup) after
:func:`clean` turned control characters into visible escapes — the same rule as the
rest of ``nb`` (``nbcli._output``).
"""

from __future__ import annotations

import math

from rich.text import Text

from .._output import clean, fmt_bytes, fmt_duration, fmt_seconds, fmt_time, fmt_value

__all__ = ["clean", "fmt_bytes", "fmt_compact", "fmt_duration", "fmt_seconds", "fmt_span", "fmt_time",
           "fmt_value", "lit", "lit_block"]


def lit(value: object, style: str = "") -> Text:
    """Logged data as a one-line Text: escaped, never parsed as markup."""
    return Text(clean("" if value is None else value), style=style, no_wrap=True, end="")


def lit_block(value: str, style: str = "") -> Text:
    """Multi-line logged text: lines kept, tabs as spaces, other controls escaped."""
    lines = str(value).replace("\r\n", "\n").split("\n")
    return Text("\n".join(clean(line.replace("\t", "    ")) for line in lines), style=style)


def fmt_compact(v: float) -> str:
    """A short number for axes and tables: ``0``, ``0.25``, ``1.5k``, ``2M``, ``3e-05``."""
    if not math.isfinite(v):
        return fmt_value(v)
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e4:
        for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if a >= div:
                return f"{v / div:.3g}{suffix}"
    if a < 1e-3:
        return f"{v:.2g}"
    return f"{v:.4g}"


def fmt_span(seconds: float) -> str:
    """A duration for an axis: ``0s``, ``45s``, ``12m``, ``1h30m``, ``2d3h``."""
    if not math.isfinite(seconds):
        return fmt_value(seconds)
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m" if not s else f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h" if not m else f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d" if not h else f"{d}d{h}h"
