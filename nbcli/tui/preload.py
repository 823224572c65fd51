"""Reading a run before the UI is up.

``nb tui RUN`` calls :func:`start` before it imports Textual: the run's files are read
and the tag the run screen plots first is extracted while Textual imports and starts,
so the first plot waits only for what is left. Imports only nblog's live reader
(numpy), never Textual.

A long run whose first plot the screen draws from the writer's envelope sidecars
(:func:`previewable`) is not read here: that read would only compete with Textual's
start for the interpreter; the screen reads it right after drawing the first plot.
"""

from __future__ import annotations

import os
import threading

from nblog.reader import LiveRun
from nblog.reader.lowlevel import envelope_file_name, event_files

# The run screen draws the first plot of a rank with this many bytes of event logs from
# their envelope sidecars (nbcli.tui.model.RunModel.preview)
PREVIEW_MIN_BYTES = 32 << 20


def previewable(run_dirs: list[str], rank: int = 0, min_bytes: int | None = None) -> bool:
    """Whether the run screen will likely draw its first plot from envelope sidecars: one
    run, whose ``rank`` has at least ``min_bytes`` (None: :data:`PREVIEW_MIN_BYTES`) of
    event logs, each with its sidecar (a quick look at the folder; the screen checks the
    sidecars themselves)."""
    if min_bytes is None:
        min_bytes = PREVIEW_MIN_BYTES
    if len(run_dirs) != 1:
        return False
    files = [(s, p) for (r, s), p in event_files(run_dirs[0]).items() if r == rank]
    size = 0
    for s, path in files:
        try:
            size += os.stat(path).st_size
        except OSError:
            return False
        if not os.path.exists(os.path.join(run_dirs[0], envelope_file_name(rank, s))):
            return False
    return bool(files) and size >= min_bytes


def first_scalar(lives: list[LiveRun], rank: int = 0) -> str | None:
    """The tag the run screen plots when none is selected: the first scalar tag of
    ``rank``, in sorted order, over every run shown; None when there is none."""
    tags = sorted({t for live in lives for t in live.tags(rank, "scalar")})
    return tags[0] if tags else None


def preload(lives: list[LiveRun], rank: int = 0) -> None:
    """Read ``rank``'s files of every run and extract :func:`first_scalar`'s series."""
    tag = first_scalar(lives, rank)
    if tag is not None:
        for live in lives:
            live.series(rank, [tag])


def _quietly(lives: list[LiveRun], rank: int) -> None:
    try:
        preload(lives, rank)
    except Exception:  # the screen reads again and reports what went wrong
        pass


def start(run_dirs: list[str], rank: int = 0) -> list[LiveRun]:
    """Open a :class:`LiveRun` per folder in ``run_dirs`` and :func:`preload` them in a
    daemon thread (not a :func:`previewable` run); returns them at once (their methods
    wait for the reading)."""
    lives = [LiveRun(d) for d in run_dirs]
    if previewable(run_dirs, rank):
        return lives
    threading.Thread(target=_quietly, args=(lives, rank), name="nb-tui-preload", daemon=True).start()
    return lives
