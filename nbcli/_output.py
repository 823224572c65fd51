"""All formatting of the ``nb`` command: tables, key/value blocks, JSON, messages.

Data goes to stdout, messages to stderr. On a terminal (Rich's test: a TTY, or
``FORCE_COLOR``) listings are Rich tables; otherwise plain tab-separated lines with a
header line, for ``cut``/``awk``. Rich honours ``NO_COLOR``.

Everything that came from logged data (tags, text, names, config values, paths) goes
through :func:`clean` and is rendered as :class:`rich.text.Text`, never as markup: a tag
``[bold red]x[/]`` prints those characters, and control characters (C0, DEL, C1, the
bidirectional overrides, lone surrogates) are shown as visible escapes such as ``\\x1b``
and never reach the terminal raw.
"""

from __future__ import annotations

import json
import json.encoder
import math
import os
import re
import sys
import time
from collections import namedtuple
from collections.abc import Iterable, Iterator, Sequence

from nblog.format import json_number  # loaded with nblog already: costs nothing here

# typing and dataclasses are not imported: they would add a good part of the start-up
# time of `nb ls`, which this module is on the path of
TYPE_CHECKING = False
if TYPE_CHECKING:  # Rich is imported only when a terminal gets a table (plain output is faster)
    from typing import Any, TextIO

    from rich.console import Console
    from rich.text import Text

# C0 controls, DEL, C1 controls, bidirectional marks/overrides/isolates, line and
# paragraph separators, BOM, lone surrogates.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}
_encode_str = json.encoder.encode_basestring  # how json.dumps(ensure_ascii=False) writes a str
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")


def _escape(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def clean(value: object) -> str:
    """``str(value)`` with every control character replaced by a visible escape
    (``\\x1b``, ``\\n``, ``\\t``, ``\\u202e``, ...). Backslashes stay as they are
    unless the text holds a control character, so plain names read unchanged."""
    s = value if isinstance(value, str) else str(value)
    if not _CONTROL.search(s):
        return s
    return _CONTROL.sub(_escape, s.replace("\\", "\\\\"))


class Styled(namedtuple("Styled", ["text", "style"], defaults=[""])):
    """Clean text (see :func:`clean`) with a Rich style (used on a terminal only),
    never parsed as markup. Make it with :func:`data` for logged data."""

    __slots__ = ()


def data(value: object, style: str = "") -> Styled:
    """A cell or line from logged data: cleaned, never parsed as markup."""
    return Styled(clean("" if value is None else value), style)


def styled(text: str, style: str = "") -> Styled:
    """Our own text (not logged data) with a style for terminals."""
    return Styled(text, style)


# -- value formatting -------------------------------------------------------------------


def fmt_value(value: float | int | str | None) -> str:
    """A number for people: ``%.6g``, ``nan``/``inf``/``-inf``, ``-`` for missing."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.6g}"


def fmt_seconds(value: float | None) -> str:
    """Seconds with a unit that fits: ``412ns``, ``3.2µs``, ``15.1ms``, ``2.31s``."""
    if value is None or not math.isfinite(value):
        return fmt_value(value)
    a = abs(value)
    if a == 0:
        return "0s"
    if a < 1e-6:
        return f"{value * 1e9:.0f}ns"
    if a < 1e-3:
        return f"{value * 1e6:.3g}µs"
    if a < 1:
        return f"{value * 1e3:.3g}ms"
    return f"{value:.3g}s"


def fmt_duration(seconds: float | None) -> str:
    """``45s``, ``12m03s``, ``3h07m``, ``2d04h``; ``-`` for missing."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{seconds:.0f}s" if seconds >= 1 else f"{seconds:.1f}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def fmt_time(unix: float | None) -> str:
    """Local time ``YYYY-MM-DD HH:MM:SS``; ``-`` for missing."""
    if not isinstance(unix, (int, float)) or not math.isfinite(unix):
        return "-"
    # the second datetime.fromtimestamp(unix) shows (microseconds rounded half to even,
    # carried into the second), through time.localtime: the same text, 2-3x faster
    frac, whole = math.modf(unix)
    us = round(frac * 1e6)
    if us >= 1_000_000:
        whole += 1
    elif us < 0:
        whole -= 1
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(whole)))
    except (OverflowError, OSError, ValueError):  # out of the platform's range
        return "-"


def fmt_last_step(step: int | None, updated: float | None, live: bool, now: float) -> str:
    """A run's last step, with how old the figure is while the run is ``live``
    (running): ``70 (4s ago)``; ``-`` when unknown. ``updated`` and ``now`` are unix
    seconds; a clock ahead of ``now`` (another machine's) counts as 0 s."""
    if step is None:
        return "-"
    if not live or not isinstance(updated, (int, float)) or not math.isfinite(updated):
        return str(step)
    age = int(max(0.0, now - updated))
    return f"{step} ({fmt_duration(age) if age else '0s'} ago)"


def fmt_config_value(value: object, width: int = 40) -> str:
    """A config value as compact JSON, cut to about ``width`` characters with ``...``."""
    import json

    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


#: In a config shown to people (``nb show``): a string longer than this is cut ...
CONFIG_TEXT_CHARS = 500
#: ... and a list longer than this keeps its first items.
CONFIG_LIST_ITEMS = 50


def cut_config(value: object, chars: int = CONFIG_TEXT_CHARS, items: int = CONFIG_LIST_ITEMS) -> tuple[object, int]:
    """A copy of a config (nested dicts and lists of JSON values) to print for people,
    and how many values were cut in it: a string longer than ``chars`` characters keeps
    its first ``chars`` and ends with ``… (N more characters)``; a list longer than
    ``items`` keeps its first ``items`` and ends with the string ``… (N more items)``.
    Dict keys and numbers stay as they are."""
    cut = 0

    def walk(v: object) -> object:
        nonlocal cut
        if isinstance(v, str):
            if len(v) <= chars:
                return v
            cut += 1
            return f"{v[:chars]}… ({len(v) - chars:,} more characters)"
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            kept = [walk(x) for x in v[:items]]
            if len(v) > items:
                cut += 1
                kept.append(f"… ({len(v) - items:,} more items)")
            return kept
        return v

    return walk(value), cut


def fmt_bytes(n: int | None) -> str:
    """``512 B``, ``1.5 KiB``, ``23.4 MiB``, ...; ``-`` for missing."""
    if n is None:
        return "-"
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if x < 1024 or unit == "TiB":
            return f"{int(x)} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{n} B"


# -- output ---------------------------------------------------------------------------------


class Column(namedtuple("Column", ["header", "numeric", "style", "keep"], defaults=[False, "", False])):
    """A table column: header, right-aligned (numbers) or not, a Rich style, and
    ``keep``: on a terminal its values (run ids, which people copy) are never wrapped
    nor cut; the other columns are narrowed first."""

    __slots__ = ()


Cell = Styled | str | int | float | None
Line = Styled | str | Sequence[Styled]


def _console(file: TextIO) -> Console:
    from rich.console import Console

    return Console(file=file, highlight=False, soft_wrap=False, emoji=False, markup=False)


def stdout_console() -> Console:
    """A Rich console on the current ``sys.stdout`` (looked up at call time, for tests)."""
    return _console(sys.stdout)


def is_terminal(environ: dict[str, str] | None = None) -> bool:
    """Whether stdout gets terminal output, as Rich decides it: a TTY, or ``FORCE_COLOR``
    set (``TTY_COMPATIBLE=0`` says no), without importing Rich for plain output."""
    env = os.environ if environ is None else environ
    tty = env.get("TTY_COMPATIBLE", "")
    if tty == "0":
        return False
    if tty == "1" or env.get("FORCE_COLOR"):
        return True
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class Output:
    """Writes one command's results. ``rich`` is True on a terminal (see module doc)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console: Console | None
        if console is None and not is_terminal():
            self.console = None
            self.rich = False
        else:
            self.console = console or stdout_console()
            self.rich = self.console.is_terminal

    @property
    def _term(self) -> Console:
        """The console, in the ``self.rich`` branches (``rich`` is True only with one)."""
        assert self.console is not None
        return self.console

    # data

    def table(self, columns: Sequence[Column], rows: Iterable[Sequence[Cell]], title: str | None = None) -> None:
        """A Rich table on a terminal; else a header line and tab-separated rows."""
        if self.rich:
            from rich.table import Table

            t = Table(title=title, title_justify="left", title_style="bold", header_style="bold",
                      box=None, pad_edge=False, show_edge=False)
            rows = [list(row) for row in rows]
            for j, c in enumerate(columns):
                if c.keep:  # as wide as its widest value: never wrapped, never cut
                    wide = max([len(_plain(row[j])) for row in rows if j < len(row)] + [len(c.header)])
                    t.add_column(c.header, justify="right" if c.numeric else "left", style=c.style or None,
                                 no_wrap=True, width=wide)
                else:
                    t.add_column(c.header, justify="right" if c.numeric else "left", style=c.style or None,
                                 overflow="fold")
            for row in rows:
                t.add_row(*(_cell(v) for v in row))
            self._term.print(t)
            return
        # one write for the whole table: stdout may be unbuffered (PYTHONUNBUFFERED), and a
        # write per line is then a system call per line
        lines = [] if title is None else [f"# {title}"]
        lines.append("\t".join(c.header for c in columns))
        lines += ["\t".join([_plain(v) for v in row]) for row in rows]
        lines.append("")
        sys.stdout.write("\n".join(lines))

    def fields(self, pairs: Sequence[tuple[str, Cell]], title: str | None = None) -> None:
        """Key/value lines: aligned on a terminal, ``key<TAB>value`` otherwise."""
        if self.rich:
            from rich.table import Table
            from rich.text import Text

            if title:
                self._term.print(Text(title, style="bold"))
            t = Table.grid(padding=(0, 2))
            t.add_column(style="dim")
            t.add_column(overflow="fold")
            for k, v in pairs:
                t.add_row(k, _cell(v))
            self._term.print(t)
            return
        out = sys.stdout
        if title is not None:
            out.write(f"# {title}\n")
        for k, v in pairs:
            out.write(f"{k}\t{_plain(v)}\n")

    def block(self, text: str, title: str | None = None) -> None:
        """A block of (cleaned) multi-line text, such as a pretty-printed config."""
        lines = [clean(line) for line in text.splitlines()]
        if self.rich:
            from rich.text import Text

            if title:
                self._term.print(Text(title, style="bold"))
            self._term.print(Text("\n".join(lines)))
            return
        out = sys.stdout
        if title is not None:
            out.write(f"# {title}\n")
        for line in lines:
            out.write(line + "\n")

    def gap(self) -> None:
        """A blank line between sections."""
        sys.stdout.write("\n") if not self.rich else self._term.print()

    def line(self, parts: Line, sep: str = "\t") -> None:
        """One line (an event of ``nb tail``), flushed at once: a string, a styled
        string, or styled fields joined by ``sep`` (two spaces on a terminal)."""
        if isinstance(parts, (str, Styled)):
            parts = [parts if isinstance(parts, Styled) else Styled(clean(parts))]
        if self.rich:
            from rich.text import Text

            text = Text()
            for i, p in enumerate(parts):
                if i:
                    text.append("  ")
                text.append(p.text, style=p.style or None)
            self._term.print(text, crop=False, soft_wrap=True)
        else:
            sys.stdout.write(sep.join(p.text for p in parts) + "\n")
        sys.stdout.flush()


def _cell(v: Cell) -> Text | str:
    from rich.text import Text

    if isinstance(v, Styled):
        return Text(v.text, style=v.style or "")
    if v is None:
        return Text("-", style="dim")
    if isinstance(v, float):
        return fmt_value(v)
    if isinstance(v, int):
        return str(v)
    return Text(clean(v))


def _plain(v: Cell) -> str:
    t = type(v)
    if t is Styled:
        # the text, cleaned already (tabs escaped); mypy does not narrow on a saved type(v)
        return v[0]  # type: ignore[index]
    if t is str:
        return clean(v)
    if t is int:
        return str(v)  # digits and a sign: nothing to clean
    if isinstance(v, Styled):
        return v.text
    if v is None:
        return "-"
    if isinstance(v, float):
        return fmt_value(v)
    return clean(v)


def json_text(obj: Any, indent: int | None = 2) -> str:
    """JSON of ``obj``: non-finite floats as "nan"/"inf"/"-inf", and the characters a
    terminal might act on (DEL, C1, bidirectional controls, lone surrogates) as
    ``\\uXXXX`` escapes, so the output is valid JSON and safe to print."""
    return "".join(_json_pieces(obj, indent))


#: Items of a list per piece of :func:`_json_pieces` (a few hundred KiB of text).
_BATCH = 500


def _json_pieces(obj: Any, indent: int | None) -> Iterator[str]:
    """The text of :func:`json_text` in pieces: a list (indented) a batch of
    :data:`_BATCH` items at a time, so that writing 20,000 runs never holds the whole
    document (nor the copies escaping and encoding it would make); anything else whole.
    Character for character what ``json.dumps(..., indent=indent)`` writes."""
    if type(indent) is not int or not isinstance(obj, list) or not obj:
        yield _JSON_UNSAFE.sub(_json_escape, _dumps(obj, indent))
        return
    outer = " " * indent
    yield "[\n"
    for at in range(0, len(obj), _BATCH):
        items = []
        for item in obj[at:at + _BATCH]:
            text = _record_json(item, indent)
            if text is None:  # not a flat record: json.dumps, one level deeper (a JSON string holds no newline)
                text = json.dumps(_finite(item), indent=indent, ensure_ascii=False, allow_nan=False, default=str)
                text = text.replace("\n", "\n" + outer)
            items.append(outer + text)
        if at:
            yield ",\n"
        yield _JSON_UNSAFE.sub(_json_escape, ",\n".join(items))
    yield "\n]"


def _dumps(obj: Any, indent: int | None) -> str:
    """``json.dumps`` of ``obj`` with non-finite floats as :func:`_finite` writes them; the
    walk that replaces them only when there is one (json.dumps refuses it: a 20,000-run
    listing is 8 MB of JSON in a tenth of the time the walk alone takes)."""
    try:
        return json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False, default=str)
    except ValueError:
        return json.dumps(_finite(obj), indent=indent, ensure_ascii=False, allow_nan=False, default=str)


def _json_escape(m: re.Match) -> str:
    return f"\\u{ord(m.group()):04x}"


def _json_scalar(v: Any) -> str | None:
    """``v`` as :func:`json.dumps` (``ensure_ascii=False``) writes it after
    :func:`_finite`, or None for anything but a string, number, bool or None."""
    if isinstance(v, str):
        return _encode_str(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        if math.isfinite(v):
            return float.__repr__(v)
        return f'"{json_number(v)}"'  # the one rule for non-finite numbers in JSON
    return None


def _record_json(row: Any, indent: int) -> str | None:
    """The JSON of a flat record (a dict with string keys and scalar values, as ``nb ls
    --json`` prints) as an item of an indented list, character for character what
    ``json.dumps`` writes for it there, without its pure-Python indenting encoder
    (several times slower); None for anything else."""
    if not isinstance(row, dict):
        return None
    if not row:
        return "{}"
    inner = " " * (2 * indent)
    fields = []
    for k, v in row.items():
        value = _json_scalar(v)
        if value is None or not isinstance(k, str):
            return None
        fields.append(f"{inner}{_encode_str(k)}: {value}")
    return "{\n" + ",\n".join(fields) + "\n" + " " * indent + "}"


def _records_json(rows: list, indent: int) -> str | None:
    """The indented JSON of a list of flat records (:func:`_record_json`), or None when
    one of them is not."""
    if not rows:
        return None
    items = [_record_json(row, indent) for row in rows]
    if any(item is None for item in items):
        return None
    outer = " " * indent
    return "[\n" + ",\n".join(outer + item for item in items if item is not None) + "\n]"


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return json_number(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def emit_json(obj: Any) -> None:
    """One JSON document on stdout, written piece by piece (:func:`_json_pieces`)."""
    write = sys.stdout.write
    for piece in _json_pieces(obj, 2):
        write(piece)
    write("\n")


def emit_json_line(obj: Any) -> None:
    """One JSON Lines record on stdout, flushed at once."""
    sys.stdout.write(json_text(obj, indent=None) + "\n")
    sys.stdout.flush()


# -- messages (stderr) ------------------------------------------------------------------------


def _stderr(prefix: str, style: str, message: str) -> None:
    """One cleaned line on stderr; styled only when stderr is a terminal."""
    line = clean(message)
    try:
        tty = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
    except (AttributeError, ValueError):
        tty = False
    if tty:
        sys.stderr.write(f"\x1b[{style}m{prefix}\x1b[0m{line}\n" if prefix else f"\x1b[{style}m{line}\x1b[0m\n")
    else:
        sys.stderr.write(prefix + line + "\n")
    sys.stderr.flush()


def info(message: str) -> None:
    """A message for people on stderr (progress, where a file went); cleaned."""
    _stderr("", "2", message)


def warn(message: str) -> None:
    _stderr("warning: ", "1;33", message)


def error(message: str, hint: str | None = None, details: Sequence[str] = ()) -> None:
    """``error: …`` (plus indented details and a ``hint: …``) on stderr."""
    _stderr("error: ", "1;31", message)
    for d in details:
        _stderr("  ", "0", d)
    if hint:
        _stderr("hint: ", "1;36", hint)
