"""``nb report RUN [RUN...] -o report.html``: one self-contained HTML file to send around."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from .._options import AllowDamaged, Root
from .._output import fmt_bytes, info

Runs = Annotated[
    list[str],
    typer.Argument(metavar="RUN", help="Runs: ids, unique prefixes, PROJECT/RUN_ID or run folders.", show_default=False),
]


def report(
    runs: Runs,
    output: Annotated[
        str,
        typer.Option("--output", "-o", metavar="FILE", help="The HTML file to write (.html or .htm).", show_default=False),
    ],
    title: Annotated[
        str | None, typer.Option("--title", metavar="TEXT", help="The page's title [default: the run ids].", show_default=False)
    ] = None,
    root: Root = None,
    allow_damaged: AllowDamaged = False,
) -> None:
    """Write one HTML file that opens offline in any browser: config and sessions, every
    scalar as an interactive chart (zoom, values under the cursor, smoothing, log y) with
    the band across ranks, timers as a rank x step heat map with the stragglers named,
    system metrics per machine, text and image thumbnails.

    Long series are kept as min/max buckets (at most 2,000 per chart), so a one-step
    spike stays visible and the file stays small. Nothing is fetched when it opens.
    """
    from nblog import RunReader

    from ..report import write_report

    if not output.lower().endswith((".html", ".htm")):
        raise typer.BadParameter(f"{output!r} does not end in .html or .htm", param_hint="--output")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise typer.BadParameter(f"the folder {parent!r} does not exist", param_hint="--output")
    readers = [RunReader(r, root) for r in runs]
    seen: set[str] = set()
    for r in readers:
        if r.dir in seen:
            raise typer.BadParameter(f"the run {r.id!r} is given twice", param_hint="RUN")
        seen.add(r.dir)
    size = write_report(readers, output, title)
    info(f"wrote {output} ({fmt_bytes(size)})")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
