"""``nb report``'s page: data from runs (:mod:`._data`, with :mod:`nbcli.series` for long
series: buckets, bands across ranks) and one self-contained HTML file (:mod:`._html`).
``nb plot`` and the TUI draw from the same :mod:`nbcli.series`."""

from __future__ import annotations

from typing import IO


def write_report(readers: list, path: str, title: str | None = None) -> int:
    """Write the report of ``readers`` (:class:`nblog.RunReader` objects) to ``path``.

    Returns:
        The size of the file written, in bytes.

    Raises:
        OSError: ``path`` cannot be written: ``cannot write PATH: REASON``, the temp
            file removed (:func:`nblog.reader.lowlevel.write_output`).
    """
    from nblog.reader.lowlevel import write_output

    from ._data import build
    from ._html import render

    text = render(build(readers), title or "nb report: " + ", ".join(r.id for r in readers))
    raw = text.encode("utf-8")

    def put(f: IO[bytes]) -> None:
        f.write(raw)

    write_output(path, put)  # a temp file and a rename: a reader of the old file never sees half of the new one
    return len(raw)


__all__ = ["write_report"]
