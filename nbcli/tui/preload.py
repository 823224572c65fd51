"""Reading a run before the UI is up.

``nb tui RUN`` calls :func:`start` before it imports Textual: the run's files are read
and the tag the run screen plots first is extracted while Textual imports and starts,
so the first plot waits only for what is left. Imports only nblog's live reader
(numpy), never Textual.
"""

from __future__ import annotations

import threading

from nblog.reader import LiveRun


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
    daemon thread; returns them at once (their methods wait for the reading)."""
    lives = [LiveRun(d) for d in run_dirs]
    threading.Thread(target=_quietly, args=(lives, rank), name="nb-tui-preload", daemon=True).start()
    return lives
