"""The failures and alerts of a run, for the run screen: every rank's event logs read
incrementally and a window at a time (the reader's rank files, :class:`nblog.reader.lowlevel.RankFiles`
with :data:`nblog.reader.lowlevel.WINDOW`, keeping no points: only what was appended since the last
poll is parsed, and a large log costs a window of memory, not its size), the events in
time order.

Used by one worker thread at a time (not thread-safe).
"""

from __future__ import annotations

import logging

from nblog.reader.lowlevel import WINDOW, LogFile, RankFiles, read_on


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _str(v: object) -> str:
    return v if isinstance(v, str) else ""


class RunEvents:
    """Failures and alerts of the run in ``run_dir``.

    :attr:`events`: dicts with ``kind`` ("failure" or "alert"), ``rank``, ``session``,
    ``host``, ``step`` (int or None), ``wall`` (unix s or None), ``level`` ("error"
    for a failure), ``title`` (the exception type of a failure) and ``text`` (its
    message), earliest first. Fields of the wrong type in a hostile file are blanks.
    """

    def __init__(self, run_dir: str):
        self.dir = run_dir
        self._files = RankFiles(run_dir, keep=False, window=WINDOW)
        self.events: list[dict] = []

    def poll(self) -> bool:
        """Read what was appended to the event logs (new ones found); True if an
        event was added. Unreadable files are left out (never raises for them)."""
        rf = self._files
        rf.scan()
        if rf.gone:
            return False
        for rank in rf.ranks():
            rf.open_new(rank)
        new = []
        for rank, session, lf in ((r, s, lf) for r in rf.opened() for s, lf in rf.sessions(r)):
            for ev in _new_events(lf):
                host = _str(lf.header.get("host"))
                failure = ev.get("kind") == "failure"
                step = ev.get("step")
                new.append({
                    "kind": ev.get("kind"), "rank": rank, "session": session, "host": host,
                    "step": step if isinstance(step, int) and not isinstance(step, bool) else None,
                    "wall": _num(ev.get("wall")),
                    "level": "error" if failure else _str(ev.get("level")),
                    "title": _str(ev.get("type") if failure else ev.get("title")),
                    "text": _str(ev.get("message") if failure else ev.get("text")),
                })
        if not new:
            return False
        self.events = sorted(self.events + new, key=lambda e: (e["wall"] is None, e["wall"] or 0.0, e["rank"]))
        return True


def _new_events(lf: LogFile) -> list[dict]:
    """The events appended to ``lf`` since the last call, read a window at a time; none
    from a file that cannot be read (a newer format, a hostile file)."""
    events: list[dict] = []
    try:
        for delta in read_on(lf):
            events.extend(delta.events)
    except Exception as err:  # said once per file; its events are left out
        if not getattr(lf, "_nb_events_warned", False):
            lf._nb_events_warned = True  # type: ignore[attr-defined]  # our mark on the reader's object
            logging.getLogger("nblog").warning("nb tui: cannot read the events of %s: %s", lf.path, err)
    return events
