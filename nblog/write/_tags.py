"""Tag ids and highest steps: the part of :class:`nblog.Run` that names and places points.

A tag gets a small int id the first time this session logs it (:meth:`Tags._intern`:
the tag checked, a definition queued for the writer, which writes it before any point
that uses it). Scalars, timers, text, system metrics and media each have their own
table (``_tids``, ``_timer_tids``, ``_text_tids``, ``_system_tids``, ``_media_tids``),
so one name can be a scalar and a timer; ids are shared (one counter, at most
``F.MAX_TAG_ID`` a session). Per id, ``_hi`` keeps the highest step this session
logged (-1: none), which finds a step going back (``_checks``) and tells the step
this rank is in (:meth:`Tags._current_step`), at which failures, alerts and run.json's
last step are recorded. ``_top`` is the highest step ``add_scalar`` was given: at or
past it no tag steps back, so the dict-block path (``_scalars``) leaves ``_hi`` behind
until it settles. ``_step`` is the session's current step (the last one given to or
counted by ``add_scalar``; None before the first), ``_counter`` the next step of an
``add_scalar`` without one (a resumed session's starts after the run's last step).

State, set by :meth:`Tags._init_tags`; the hot path (``_scalars``) reads and writes
it through local aliases.
"""

from __future__ import annotations

import itertools

from ..format import _format as F
from ._checks import Checks


def _is_utf8(s: str) -> bool:
    """False if ``s`` holds a lone surrogate: no UTF-8 form, no Polars string."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Tags(Checks):
    """Tag ids, per-tag highest steps and the current step of :class:`nblog.Run`."""

    def _init_tags(self, step_start: int) -> None:
        # the current step: the last one given to or counted by add_scalar; None until
        # then, so a timer or text before a resumed session's first step waits for it
        # instead of landing at step 0 (which would hide the whole earlier curve)
        self._step: int | None = None
        # the next step used when add_scalar gets no step: a resumed session's starts
        # after the run's last step (_resume_step), so nothing earlier is hidden
        self._counter = step_start
        self._step_start = step_start
        self._tag_defs: list = []  # (tag id, kind, tag) for the writer, which drains it
        self._next_tid = itertools.count().__next__
        self._tids: dict[str, int] = {}
        self._timer_tids: dict[str, int] = {}
        self._text_tids: dict[str, int] = {}
        self._system_tids: dict[str, int] = {}
        self._media_tids: dict[str, int] = {}
        # per tag id (scalar, timer, text, media): the highest step this session logged
        # (-1: none); the block path of add_scalar keeps its own until _settle
        self._hi: list[int] = []
        self._logged = False  # a point was logged in this session: device values may wait (_first_logged)
        # the highest step add_scalar was given (-1: none): at or past it, no tag steps
        # back, so the block path skips the per-tag highs (exact again after _settle)
        self._top = -1

    def _intern(self, table: dict, tag: object, kind: int) -> int | None:
        """The id of ``tag`` in ``table`` (one kind's tags), a new one made and its
        definition queued; None for a bad tag (refused through :meth:`_reject`) or past
        ``F.MAX_TAG_ID`` ids. Safe against another thread interning at once."""
        if tag.__class__ is not str and not isinstance(tag, str):
            self._reject("bad_tag", tag, f"tag must be a non-empty str, got {type(tag).__name__}")
            return None
        if not tag:
            self._reject("bad_tag", tag, "tag must not be empty")
            return None
        if "\0" in tag:
            self._reject("bad_tag", tag, "tag must not contain NUL")
            return None
        if len(tag) > F.MAX_TAG_CHARS:
            self._reject("bad_tag", tag, f"tag longer than {F.MAX_TAG_CHARS} characters")
            return None
        if not tag.isascii() and not _is_utf8(tag):  # could not be stored or read back
            self._reject("bad_tag", tag, "tag has a lone surrogate (no UTF-8 form)")
            return None
        tag = str(tag)
        tid = table.get(tag)
        if tid is None:
            tid = self._next_tid()
            if tid >= F.MAX_TAG_ID:  # readers size tables by tag ids: a bound keeps them small
                self._reject("bad_tag", "<new tags>",  # one warning per call site, not per tag
                             f"more than {F.MAX_TAG_ID} distinct tags in one session; new tags are refused")
                return None
            hi = self._hi
            while len(hi) <= tid:  # safe against another thread interning at once
                hi.append(-1)
            self._tag_defs.append((tid, kind, tag))
            table[tag] = tid
        return tid

    def _current_step(self) -> int | None:
        """The step this rank is in: the highest step it logged in this session by any
        call (``add_scalar``, a timer, ``add_text``, a media call; a step given to
        ``add_scalar`` on a rank that does not log scalars counts too), None before the
        first. Failures and alerts are recorded at it, and rank 0 records it in
        ``run.json`` at the end of the session. Not the step of the last call: steps 10
        then 3 leave 10, and timers of step 31 after ``add_scalar`` at step 30 leave 31.
        Costs a pass over the tags: not for the training loop."""
        high = max(self._top, max(self._hi, default=-1))
        step = self._step
        if step.__class__ is int and step > high:
            return step
        return high if high >= 0 else None

    def _first_logged(self) -> bool:
        """Whether this session logged a point before (a tag with a highest step).

        The session's first point is never left pending: the first record of an event
        log sets the session's first step, which the hiding rule reads, and a pending
        value reaches the file after the points logged while it waits. So a device value
        that is the session's first point is converted at once (one wait per session).
        """
        if any(h >= 0 for h in self._hi):
            self._logged = True
        return self._logged
