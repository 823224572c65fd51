"""The Run object: the logging calls a training loop makes.

The caller's thread does O(1) work per call: check the step, look up the tag's id,
convert the value with ``float()``, and append a packed 24-byte record to a buffer
that the writer thread drains (``_writer``). A dict whose key set was seen before, with
plain numbers as values, is packed in one call (a cached ``F.block_packer``; the
writer thread splits it into records). A tensor on a device is never converted
here (that would wait for the device): its copy and an event go to the writer's
``pending`` list instead (``_device``). On ranks that do not log, the ``add_*``
methods are replaced once, at creation, by functions that do nothing (or only
remember the step, which timers and system samples use).
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Callable
from functools import wraps

from .. import _log as log
from .._errors import StrictModeError
from ..format import _format as F
from ..media._media import MediaLog, MediaSink, figure_noop
from ._device import DEVICE_TENSOR as _DEVICE_TENSOR
from ._device import capture as _capture
from ._device import kind as _tensor_kind
from ._run_media import MediaCalls, RunMediaHost
from ._writer import Writer

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping
    from types import FrameType, TracebackType
    from typing import Any

    from ..format._runfile import RunFile

_mono_ns = time.monotonic_ns
_perf = time.perf_counter
_pack = F.POINT.pack
# nblog's own code: the package folder and its wings (integrations/ is the caller's side)
_NBLOG_DIR = os.path.dirname(os.path.abspath(sys.modules[__name__.partition(".")[0]].__file__ or ""))
_NBLOG_DIRS = frozenset([_NBLOG_DIR] + [os.path.join(_NBLOG_DIR, w) for w in ("format", "write", "media", "system", "reader")])
_STEP_END = 1 << 63  # steps are stored as int64
ALERT_LEVELS = ("info", "warn", "error")
ALERT_INTERVAL_S = 60.0  # one alert per title per this many seconds; the rest are counted
_MAX_TITLE = 1024
_MAX_ALERT_TEXT = 64 << 10
_MAX_MESSAGE = 8 << 10
_MAX_TRACEBACK = 64 << 10
_MAX_FAILURES = 16  # failure events recorded per run (a thread that dies again and again)
_MAX_ERROR_FILE = 64 << 10


_PLAIN = frozenset((float, int, bool))  # values a dict block packs as they are
_MAX_BLOCKS = 64  # key sets cached for the block path; more go point by point


def _is_utf8(s: str) -> bool:
    """False if ``s`` holds a lone surrogate: no UTF-8 form, no Polars string."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _noop(*args: object, **kwargs: object) -> None:
    """Does nothing: bound in place of logging calls on ranks that do not log."""


def _noop_scalar(tag: object = None, value: object = None, step: object = None, all_ranks: object = None) -> None:
    """Does nothing: add_scalar where nothing is logged (an inert run, a rank that
    neither logs nor times). add_scalar's own parameters, so a call with a keyword
    costs no ``**kwargs`` dict (a ``step=`` call: ~60 ns against ~130 ns)."""


class _NoTimer:
    """The timer of a rank that does not time: a reusable no-op context manager."""

    __slots__ = ()

    def __enter__(self) -> _NoTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, fn: Callable) -> Callable:
        return fn


_NO_TIMER = _NoTimer()


class Timer:
    """Times a block or a function in seconds (``time.perf_counter``) at a step.

    Made by :meth:`Run.timer`. Each ``with`` block or decorated call logs one point
    (tag = the timer's name, value = seconds) at ``step``, or at the run's current
    step (the last step passed to or counted by ``add_scalar``). Re-entrant use of the
    same object from several threads is not supported; create one per use.
    """

    __slots__ = ("_run", "_tid", "_step", "_t0")

    def __init__(self, run: Run, tid: int, step: int | None):
        self._run = run
        self._tid = tid
        self._step = step
        self._t0 = 0.0

    def __enter__(self) -> Timer:
        self._t0 = _perf()
        return self

    def __exit__(self, *exc: object) -> None:
        seconds = _perf() - self._t0
        run = self._run
        if run._finished:  # a timer made before finish (a decorated function) used after it
            if not run._inert:
                run._after_finish("timer")
            return None
        step = self._step  # checked by Run.timer
        if step is None:
            step = run._step
            if step is None:  # no step yet in this session: the next one known
                run._defer(("point", self._tid, seconds, (_mono_ns() - run._t0) // 1_000_000 & 0xFFFFFFFF))
                return None
            if step.__class__ is not int or not 0 <= step < _STEP_END:
                # a rank that only times remembers add_scalar's step unchecked (its
                # add_scalar stays a few ns); check it here, where it is used
                name = next((n for n, t in run._timer_tids.items() if t == self._tid), None)
                step = run._check_step(step, name)
                if step is None:
                    return None
        try:
            run._points += _pack(
                step, seconds, self._tid, (_mono_ns() - run._t0) // 1_000_000 & 0xFFFFFFFF
            )
            hi = run._hi
            if step > hi[self._tid]:  # the step this rank is in counts its timers (_current_step)
                hi[self._tid] = step
        except Exception as err:  # a step out of range, never an error into training
            run._internal(err)

    def __call__(self, fn: Callable) -> Callable:
        run, tid, step = self._run, self._tid, self._step

        @wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with Timer(run, tid, step):
                return fn(*args, **kwargs)

        return timed


class Run(MediaCalls):
    """One process's handle on a run; returned by :func:`nblog.init`.

    Attributes:
        id: the run id (``""`` on a non-zero rank that could not learn it).
        dir: the run folder, or None where this rank knows none.
        project, name: as given to ``init``.
        rank, local_rank, world_size: from the launcher (local_rank may be None).
        session: this process's session number (0 for a new run, then 1, 2, ...).
        config: the config as stored in ``run.json`` (a dict).
        is_logging: True if this rank writes scalars, text and media (rank 0).

    Thread-safe: ``add_*`` and timers may be called from several threads.

    Pickling (a spawn or forkserver worker, a ``DataLoader`` worker, ``copy.copy``)
    gives an inert copy, as a forked child has: the same ``id``, ``dir``, ranks,
    ``session`` and ``config``, ``is_logging`` False, and every call a no-op that
    never touches the run's files. No writer, thread or lock is pickled.

    After :meth:`finish`, logging calls do nothing: the first one warns once (naming
    the call), and raises ``StrictModeError`` with ``NB_STRICT=1``.

    The media calls (:meth:`add_image`, :meth:`add_images`, :meth:`add_histogram`,
    :meth:`add_audio`, :meth:`add_figure`) are ``nblog.media``'s (``MediaLog``): a
    step of None is the current step, without advancing the counter; only rank 0
    logs them; encoding happens in the writer thread, into ``media.r0.pack``.
    """

    def __init__(
        self,
        *,
        project: str,
        name: str | None,
        run_id: str,
        run_dir: str | None,
        rank: int,
        local_rank: int | None,
        world_size: int,
        session: int,
        config: dict,
        is_logging: bool,
        timing_all_ranks: bool,
        strict: bool,
        make_writer: Callable[[Run], Writer | None] | None,
        step_start: int = 0,
        scalars_all_ranks: bool = False,
    ):
        self.project = project
        self.name = name
        self.id = run_id
        self.dir = run_dir
        self.rank = rank
        self.local_rank = local_rank
        self.world_size = world_size
        self.session = session
        self.config = config
        self.is_logging = is_logging
        self._timing_all_ranks = timing_all_ranks
        self._strict = strict
        self._make_writer = make_writer
        self._writer: Writer | None = None
        self._finished = False
        #: device values that could not be captured without a sync, so were converted by
        #: ``float()`` in the training thread (each waits for the device); warned once
        self.device_syncs = 0
        self._inert = False  # a forked child's or an unpickled copy: silent, never warns
        self._t0 = _mono_ns()
        # the current step: the last one given to or counted by add_scalar; None until
        # then, so a timer or text before a resumed session's first step waits for it
        # instead of landing at step 0 (which would hide the whole earlier curve)
        self._step: int | None = None
        self._deferred: list = []
        # the next step used when add_scalar gets no step: a resumed session's starts
        # after the run's last step (_resume_step), so nothing earlier is hidden
        self._counter = step_start
        self._step_start = step_start
        self._points = bytearray()
        self._texts: list = []
        self._media: list = []
        self._media_tids: dict[str, int] = {}
        media_host = RunMediaHost(self)  # all that nblog.media sees of this run
        self._media_log = MediaLog(media_host)  # the media calls (add_image...) hand their arguments to it
        # encodes media and writes the media pack, in the writer thread
        self._media_sink = MediaSink(media_host) if is_logging and run_dir is not None and make_writer is not None else None
        self._tag_defs: list = []
        self._next_tid = itertools.count().__next__
        self._tids: dict[str, int] = {}
        # per tag id (scalar, timer, text, media): the highest step this session logged
        # (-1: none); the block path of add_scalar keeps its own until _settle
        self._hi: list[int] = []
        self._logged = False  # a point was logged in this session: device values may wait (_first_logged)
        # the highest step add_scalar was given (-1: none): at or past it, no tag steps
        # back, so the block path skips the per-tag highs (exact again after _settle)
        self._top = -1
        # dict key tuple -> [packer, last step, tag ids]: add_scalar's block path (one
        # pack per dict, split by the writer thread); None: this key set goes point by point
        self._blocks: dict[tuple, list | None] = {}
        self._timer_tids: dict[str, int] = {}
        self._text_tids: dict[str, int] = {}
        self._system_tids: dict[str, int] = {}
        self._warned: set = set()
        self._dropped_before_writer: dict[str, int] = {}
        self._on_finish: list[Callable[[], None]] = []
        self._on_flush: list[Callable[[], None]] = []  # the console's step stamp (_console)
        self._failure: dict | None = None  # the uncaught exception recorded (run.json keeps it)
        self._provenance: threading.Thread | None = None  # the thread recording provenance (_provenance.start)
        self._alerted: dict[str, list] = {}  # title -> [monotonic time of the last, suppressed]
        self._runfile: RunFile | None = None  # rank 0's RunFile (run.json), set by init; update_config writes through it
        can_time = run_dir is not None and make_writer is not None
        if not is_logging:
            if can_time and scalars_all_ranks:  # this rank logs its own scalars
                self.add_scalar = self._add_scalar_unless_opted_out
            elif can_time:
                self.add_scalar = self._remember_step  # timers need the current step
            else:
                self.add_scalar = _noop_scalar
            self.add_text = _noop
            self._bind_media_noops(_noop)
        if make_writer is None:
            self.timer = lambda *a, **k: _NO_TIMER

    # -- logging calls -------------------------------------------------------------

    def add_scalar(self, tag: str | Mapping[str, object], value: object = None, step: int | None = None,
                   all_ranks: bool | None = None) -> None:
        """Log one scalar, or a dict of them, at ``step``. Rank 0 only by default; never raises.

        Two forms: ``add_scalar("train/loss", 0.5, step=10)`` (as
        torch.utils.tensorboard's ``SummaryWriter.add_scalar``) and
        ``add_scalar({"train/loss": 0.5, "lr": 1e-3}, step=10)``.

        Args:
            tag: a non-empty ``str`` without NUL, at most 1024 characters, kept byte
                for byte (``/`` groups tags in viewers); or a dict of tag → value.
            value: int, float, bool, numpy scalar, 0-d array or tensor, or anything with
                ``__float__``. NaN and ±inf are kept exactly. A one-element tensor on a
                device (CUDA or any non-CPU device) is not waited for: a copy is queued
                in stream order and the writer thread converts it once the device has
                run it (the value is the one at the call; ``nblog.write._device``).
            step: a non-negative int; None uses the run's own counter, which each call
                without a step advances by one. It starts at 0 in a new run and after
                the run's last step in a resumed session (on every rank).
            all_ranks: True logs on every rank, each into its own event log, with no
                communication between ranks (read back with ``RunReader.scalars(rank=K)``
                or ``all_ranks=True``, ``nb tail --rank K``), so viewers can draw the
                band across ranks; ``init(scalars_all_ranks=True)`` makes it the default.
                None follows ``init(scalars_all_ranks=...)`` (default: only rank 0
                logs), False is rank 0 only in any case. The run summary in
                ``run.json`` is always rank 0's.

        A bad tag, value or step is skipped with one warning per (call site, tag) and
        counted in the session; with ``NB_STRICT=1`` it raises ``StrictModeError``.
        A step below the tag's highest step in this session is stored and warned
        once per tag (strict: raises); restarting from a checkpoint belongs in a new
        session (``init(resume="auto")``). On other ranks, without ``all_ranks``, this
        returns at once.
        """
        try:
            if step is None:
                step = self._counter
                self._counter = step + 1
            elif step.__class__ is not int or not 0 <= step < _STEP_END:
                # refused here, before anything keeps it: a step past int64 must not
                # become the current step, a tag's highest step or run.json's last step
                step = self._check_step(step, tag)
                if step is None:
                    return
            if tag.__class__ is str:
                if step < self._top:  # behind a step logged before: make the tags' highs exact
                    self._settle()
                else:
                    self._top = step
                tid = self._tids.get(tag)
                if tid is None:
                    tid = self._intern(self._tids, tag, F.KIND_SCALAR)
                    if tid is None:
                        self._step = step
                        return
                if value.__class__ is not float:
                    value = self._to_float(value, tag)
                    if value.__class__ is not float:  # refused (None), or a device value captured
                        if value is not None:
                            # not float, not None: the (copy, event) of a device value
                            self._add_captured(tag, tid, step, value,  # type: ignore[arg-type]
                                               (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF)
                        self._step = step
                        return
                hi = self._hi
                if step < hi[tid]:
                    self._step_back(tag, step, hi[tid])
                else:
                    hi[tid] = step
                self._points += _pack(
                    step, value, tid, (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF
                )
                self._step = step
            elif tag.__class__ is dict or isinstance(tag, dict):
                block = self._blocks.get(tuple(tag))
                if block is not None and step >= self._top:
                    # a key set seen before, at or past every step logged: one pack;
                    # sum() in C tells that every value is a float, int or bool
                    values = tag.values()
                    try:
                        if sum(values, 0.0).__class__ is float:
                            self._points += block[0](
                                step, (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF, *values
                            )
                            block[1] = self._top = self._step = step
                            return
                        # numbers of another kind now (a tensor, a numpy float): this
                        # key set goes point by point from now on
                        self._blocks[tuple(tag)] = None
                    except Exception:  # a bad value (None, a str, an int too large): this call only
                        pass
                self._add_dict(tag, step)
                self._step = step
            else:
                if step < self._top:
                    self._settle()
                self._step = step
                self._reject("bad_tag", tag, f"tag must be a str or a dict, got {type(tag).__name__}")
        except StrictModeError:
            raise
        except Exception as err:
            self._internal(err)

    def _add_dict(self, values: dict, step: int) -> None:
        """The dict form point by point: each tag and value checked, each tag's step
        compared with its highest. A key set whose tags and values were all good
        (plain numbers) is cached as a block packer for the calls that follow."""
        if step < self._top:
            self._settle()
        else:
            self._top = step
        ms = (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF
        out = bytearray()
        tids = self._tids
        hi = self._hi
        good: list[int] | None = [] if len(self._blocks) < _MAX_BLOCKS else None
        for tag, value in values.items():
            tid = tids.get(tag) if tag.__class__ is str else None
            if tid is None:
                tid = self._intern(tids, tag, F.KIND_SCALAR)
                if tid is None:
                    good = None
                    continue
            if good is not None:
                if value.__class__ in _PLAIN:
                    good.append(tid)
                else:
                    good = None
            if value.__class__ is not float:
                value = self._to_float(value, tag)
                if value.__class__ is not float:  # refused (None), or a device value captured
                    if value is not None:
                        self._add_captured(tag, tid, step, value, ms)  # type: ignore[arg-type]  # (copy, event)
                    continue
            if step < hi[tid]:
                self._step_back(tag, step, hi[tid])
            else:
                hi[tid] = step
            out += _pack(step, value, tid, ms)
        self._points += out
        keys = tuple(values)
        if good and len(good) == len(values) and keys not in self._blocks:
            try:
                packer = F.block_packer(tuple(good))
            except Exception as err:
                packer = None
                self._internal(err)
            if packer is not None:
                self._blocks[keys] = [packer, step, tuple(good)]

    def _settle(self) -> None:
        """Make each tag's highest step (``_hi``) exact: the block path of add_scalar
        keeps only its key set's last step. Called when a step is below one logged
        before (``_top``), so that the per-tag comparison that follows is exact."""
        hi = self._hi
        for block in list(self._blocks.values()):
            if block is not None:
                step = block[1]
                for tid in block[2]:
                    if hi[tid] < step:
                        hi[tid] = step

    def _remember_step(self, tag: Any = None, value: object = None,
                       step: int | None = None, all_ranks: bool | None = None) -> None:
        """add_scalar on a rank that does not log scalars but times: keep the step;
        with ``all_ranks=True``, log on this rank as rank 0 does (creating its writer)."""
        if all_ranks:
            if self._writer is not None or self._ensure_writer():
                return Run.add_scalar(self, tag, value, step)
        if step is None:
            step = self._counter
            self._counter = step + 1
        self._step = step

    def _add_scalar_unless_opted_out(self, tag: str | Mapping[str, object], value: object = None,
                                     step: int | None = None, all_ranks: bool | None = None) -> None:
        """add_scalar on a non-zero rank of an ``init(scalars_all_ranks=True)`` run: logs,
        unless the call says ``all_ranks=False`` (then only the step is kept)."""
        if all_ranks is False:
            return self._remember_step(tag, value, step)
        return Run.add_scalar(self, tag, value, step)

    def add_text(self, tag: str, text: str, step: int | None = None) -> None:
        """Log a text (any ``str``, up to 16 MiB of UTF-8) at ``step``. Rank 0 only.

        ``step=None`` uses the current step (the last one of ``add_scalar``), without
        advancing the counter. Bad input follows the same rule as ``add_scalar``.
        """
        try:
            if step is None:
                step = self._step
            elif step.__class__ is not int or not 0 <= step < _STEP_END:
                step = self._check_step(step, tag)
                if step is None:
                    return
            tid = self._text_tids.get(tag) if tag.__class__ is str else None
            if tid is None:
                tid = self._intern(self._text_tids, tag, F.KIND_TEXT)
                if tid is None:
                    return
            if text.__class__ is not str:
                self._reject("bad_value", tag, f"text must be a str, got {type(text).__name__}")
                return
            if len(text) > (16 << 20):
                self._reject("bad_value", tag, "text longer than 16 MiB")
                return
            if not text.isascii():
                try:
                    size = len(text.encode("utf-8"))
                except UnicodeEncodeError:
                    self._reject("bad_value", tag, "text has a lone surrogate (no UTF-8 form)")
                    return
                if size > (16 << 20):  # the limit is on the bytes stored
                    self._reject("bad_value", tag, "text longer than 16 MiB of UTF-8")
                    return
            ms = (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF
            if step is None:  # no step yet in this session: the next one known
                self._defer(("text", tid, ms, text))
                return
            hi = self._hi
            if step < hi[tid]:
                self._step_back(tag, step, hi[tid])
            else:
                hi[tid] = step
            self._texts.append((step, tid, ms, text))
        except StrictModeError:
            raise
        except Exception as err:
            self._internal(err)

    def timer(self, name: str, step: int | None = None, all_ranks: bool | None = None) -> Timer | _NoTimer:
        """A context manager and decorator that logs seconds spent under tag ``name``.

        Args:
            name: the timer's tag (same rules as a scalar tag; its own namespace).
            step: the step to log at; None means the run's current step at exit.
            all_ranks: log on every rank into its own event log, with no communication
                between ranks. None follows ``init(timing_all_ranks=...)``; by default
                only rank 0 times.

        Returns:
            A :class:`Timer`, or a no-op context manager where this rank does not time.
        """
        try:
            if not (self.is_logging or all_ranks or (all_ranks is None and self._timing_all_ranks)):
                return _NO_TIMER
            if self._writer is None and not self._ensure_writer():
                return _NO_TIMER
            tid = self._timer_tids.get(name) if name.__class__ is str else None
            if tid is None:
                tid = self._intern(self._timer_tids, name, F.KIND_TIMER)
                if tid is None:
                    return _NO_TIMER
            if step is not None and (step.__class__ is not int or not 0 <= step < _STEP_END):
                step = self._check_step(step, name)
                if step is None:
                    return _NO_TIMER
            return Timer(self, tid, step)
        except StrictModeError:
            raise
        except Exception as err:
            self._internal(err)
            return _NO_TIMER

    def alert(self, title: str, text: str = "", level: str = "warn") -> None:
        """Record an alert of the training code ("loss spiked", "rank 371 saw X") as an
        event in this rank's own event log; ``nb show`` and readers report it
        (:meth:`nblog.RunReader.alerts`). Works on every rank, logging or not: a rank
        without an event log yet creates one. Never raises (bad input warns once).

        Args:
            title: a short name (a non-empty str, cut at 1024 characters). Alerts are
                rate-limited per title: at most one every 60 s; those in between are
                counted in the next one recorded (``suppressed``).
            text: details (cut at 64 KiB).
            level: "info", "warn" (default) or "error"; anything else warns once and
                is recorded as "warn".

        Written by the writer thread within the flush interval (the caller only
        queues it), and at ``finish``.
        """
        try:
            if self._finished:
                if not self._inert:
                    self._after_finish("alert")
                return
            title = title if title.__class__ is str else str(title)
            if not title:
                self._warn_once(("alert", "title"), "nblog: run.alert() needs a non-empty title; ignored")
                return
            title = title[:_MAX_TITLE]
            if level not in ALERT_LEVELS:
                self._warn_once(("alert", "level"), f"nblog: run.alert() level must be one of {ALERT_LEVELS}, "
                                f"got {level!r}; recorded as 'warn'")
                level = "warn"
            now = time.monotonic()
            seen = self._alerted.get(title)
            if seen is not None and now - seen[0] < ALERT_INTERVAL_S:
                seen[1] += 1
                if self._writer is not None:  # the session's END record counts them too
                    self._writer.dropped["alert_rate_limited"] += 1
                return
            suppressed = seen[1] if seen is not None else 0
            self._alerted[title] = [now, 0]
            text = text if text.__class__ is str else str(text)
            event = {"kind": "alert", "title": title, "text": text[:_MAX_ALERT_TEXT], "level": level,
                     "step": self._current_step(), "wall": time.time(),
                     "ms": (_mono_ns() - self._t0) // 1_000_000, "suppressed": suppressed}
            if self._writer is None and not self._ensure_writer():
                log.info("nblog alert (%s) on rank %d, not recorded: %s: %s", level, self.rank, title, text[:200])
                return
            assert self._writer is not None  # made by _ensure_writer
            self._writer.events.append(event)
        except StrictModeError:
            raise
        except Exception as err:
            self._internal(err)

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

    def _log_failure(self, exc_type: type[BaseException], exc: BaseException | None,
                     tb: TracebackType | None, thread: str | None = None) -> None:
        """Record an uncaught exception (type, message, traceback, step, time; ``thread``:
        the name of the thread it ended, None for the main one) in this rank's own event
        log, creating it if this rank has none yet; written at the finish that follows
        (before its END record), or at the next flush for a thread's. The first one of
        the run also goes to run.json (rank 0) and to the failure mark
        ``failure.r<rank>.s<session>.json`` in the run folder, which listings read. Each
        exception once (a ``with`` block, then the hook, see the same one), at most
        :data:`_MAX_FAILURES` per run; never raises."""
        seen: list[int] = self.__dict__.setdefault("_failures_seen", [])
        if self._finished or id(exc) in seen or len(seen) >= _MAX_FAILURES:
            return
        seen.append(id(exc))
        try:
            import traceback

            name = getattr(exc_type, "__qualname__", None) or getattr(exc_type, "__name__", "?")
            module = getattr(exc_type, "__module__", "")
            try:
                message = str(exc)
            except Exception:
                message = object.__repr__(exc)
            try:
                lines = "".join(traceback.format_exception(exc_type, exc, tb))
            except Exception as err:
                lines = f"<traceback could not be formatted: {err!r}>"
            if len(lines) > _MAX_TRACEBACK:  # the innermost frames matter most: keep the end
                cut = len(lines) - _MAX_TRACEBACK
                lines = lines[:4096] + f"\n... <{cut} characters cut> ...\n" + lines[4096 + cut:]
            wall = time.time()
            step = self._current_step()
            event = {"kind": "failure", "type": name, "module": module if module != "builtins" else None,
                     "message": message[:_MAX_MESSAGE], "traceback": lines, "step": step,
                     "wall": wall, "ms": (_mono_ns() - self._t0) // 1_000_000, "pid": os.getpid()}
            if thread is not None:
                event["thread"] = thread
            error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
            if error_file:
                event["error_file"] = error_file
                event["error_file_content"] = _read_error_file(error_file)
            first = self._failure is None
            if first:
                self._failure = {"rank": self.rank, "type": name, "message": message[:500], "step": step,
                                 "wall": wall, **({"thread": thread} if thread is not None else {})}
            if self._writer is None and not self._ensure_writer():
                return
            assert self._writer is not None  # made by _ensure_writer
            self._writer.events.append(event)
            if first and self.dir is not None and self._failure is not None:  # set just above
                self._mark_failure(self._failure)
        except Exception as err:
            self._internal(err)

    def _mark_failure(self, failure: dict) -> None:
        """Write the failure mark of this rank's session (see nblog/reader/_failures.py)."""
        from ..format._host import hostname
        from ..format._runfile import failure_file_name, write_json_atomic

        mark = {**failure, "session": self.session, "host": hostname(os.environ), "pid": os.getpid()}
        run_dir = self.dir
        assert run_dir is not None  # the caller checks: a run without a folder writes no mark
        write_json_atomic(os.path.join(run_dir, failure_file_name(self.rank, self.session)), mark)

    def _log_system(self, values: dict[str, float], wall: float | None = None) -> None:
        """Log system metrics (tag → value) at the current step. Used by the sampler."""
        if self._writer is None and not self._ensure_writer():
            return
        ms = (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF
        out = bytearray()
        step = self._step if self._step is not None else self._counter
        for tag, value in values.items():
            tid = self._system_tids.get(tag)
            if tid is None:
                tid = self._intern(self._system_tids, tag, F.KIND_SYSTEM)
                if tid is None:
                    continue
            out += _pack(step, float(value), tid, ms)
        self._points += out

    def _defer(self, item: tuple) -> None:
        """Hold a timer point or text logged before this session knows a step.

        They are written at the first step that add_scalar (or, on a rank that only
        times, the remembered step) makes known, or at finish. add_scalar is wrapped
        only while something waits, so the hot path pays nothing otherwise.
        """
        self._deferred.append(item)
        if len(self._deferred) > 1:  # the wrapper is already in place
            return
        inner = self.add_scalar
        own = "add_scalar" in self.__dict__  # a no-op or step-remembering binding

        def add_scalar(tag: str | Mapping[str, object], value: object = None, step: int | None = None,
                       all_ranks: bool | None = None) -> None:
            inner(tag, value, step, all_ranks)
            if self._step is not None:
                self._emit_deferred(self._step)
                if self.__dict__.get("add_scalar") is add_scalar:
                    if own:
                        self.add_scalar = inner
                    else:
                        del self.add_scalar

        add_scalar.__doc__ = Run.add_scalar.__doc__
        self.add_scalar = add_scalar

    def _emit_deferred(self, step: int) -> None:
        items, self._deferred = self._deferred, []
        points = bytearray()
        for item in items:
            if item[0] == "point":
                _kind, tid, value, ms = item
                points += _pack(step, value, tid, ms)
            else:
                _kind, tid, ms, text = item
                self._texts.append((step, tid, ms, text))
        self._points += points

    def update_config(self, values: object) -> None:
        """Merge ``values`` into :attr:`config` (top-level keys replaced), as wandb's
        ``run.config.update`` does; rank 0 also rewrites ``run.json``'s config.

        For hyper-parameters known only after the run started (a framework's
        ``log_hyperparams``, an optimizer built later). ``values`` is normalised as
        ``init``'s ``config`` (a mapping, dataclass, ``argparse.Namespace``, object with
        ``to_dict()`` or OmegaConf container; values that are not JSON-able kept as their
        ``repr``). Ranks that do not log only update their in-memory :attr:`config`.
        ``run.json`` is rewritten atomically, under the same lock as the writer thread's
        updates, so neither loses the other's change. Also works after :meth:`finish`.

        Args:
            values: the keys to add or replace.

        Never raises: ``values`` of another kind, or a ``run.json`` that cannot be
        written, warns once and changes nothing on disk (``StrictModeError`` with
        ``NB_STRICT=1`` for a bad kind).
        """
        from ..format._runfile import to_json_config, write_json_atomic

        try:
            extra = to_json_config(values)
        except TypeError as err:
            if self._strict:
                raise StrictModeError(f"nblog: update_config: {err}") from None
            self._warn_once(("update_config", "type"), f"nblog: update_config ignored: {err}")
            return
        try:
            if not isinstance(self.config, dict):
                self.config = {}
            self.config.update(extra)
            runfile = self._runfile
            if runfile is None or self._inert or not self.is_logging:
                return
            with runfile._lock:
                config = runfile.data.get("config")
                if not isinstance(config, dict):
                    config = runfile.data["config"] = {}
                config.update(extra)
                write_json_atomic(runfile.path, runfile.data)
        except Exception as err:  # a full disk, a removed folder: never into training
            self._warn_once(("update_config", "write"), f"nblog: could not write the config to run.json: {err!r}")

    # -- lifecycle -----------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Hand everything logged so far to the operating system before returning (a real
        barrier for readers: ``RunReader``, ``nb tail`` and the TUI see it once this returns).

        The bytes are written to the files, that is to the OS page cache; there is no
        ``fsync``: they survive a crash or ``kill -9`` of the process, not a power loss or
        a crash of the machine before the OS writes them out. Waits at most ``timeout``
        seconds (None: as long as it takes). With console capture, lines printed after it
        are stamped with the current step.
        """
        if self._writer is not None:
            self._writer.flush(timeout)
        for fn in self._on_flush:
            fn()

    def finish(
        self, status: str = "finished", *, reason: str | None = None, timeout: float = 60.0
    ) -> None:
        """Flush, close this session's files and (rank 0) record ``status`` in run.json.

        Idempotent: later calls do nothing. Also run at interpreter exit, on an uncaught
        exception (status "failed") and when leaving a ``with`` block. Takes at most
        ``timeout`` seconds for the writer (on SIGTERM nblog passes 1 s): points, text
        and counters are written first, then queued media is encoded for what is left
        of ``timeout``; media still queued then is dropped and counted as
        ``media_timeout`` in the session's END record. A hung filesystem: the files are
        left as they are after ``timeout``.
        """
        if self._finished:
            return
        self._finished = True
        if self._deferred:  # no step ever became known: the run's counter (0 at start)
            try:
                self._emit_deferred(self._counter)
            except Exception as err:
                self._internal(err)
        for fn in self._on_finish:
            try:
                fn()
            except Exception as err:
                self._internal(err)
        self._bind_after_finish()
        if self._writer is not None:
            self._writer.close(
                {"status": status, "reason": reason, "wall": time.time()}, timeout=timeout
            )
        self._finalize(status, reason)
        thread = self._provenance
        if thread is not None and thread.is_alive():  # its file is there when finish returns
            thread.join(min(2.0, timeout / 4))

    def _finalize(self, status: str, reason: str | None) -> None:
        """Hook for init: record the end in run.json (rank 0). Replaced per instance."""

    def _disable(self) -> None:
        self.add_scalar = _noop_scalar
        self.add_text = _noop
        self._bind_media_noops(_noop)
        self.timer = lambda *a, **k: _NO_TIMER

    def _bind_after_finish(self) -> None:
        """Bind every logging call to one that says it comes after finish().

        The first such call warns (naming it) and binds the plain no-ops, so later
        calls cost an empty call; in strict mode every call raises instead.
        """

        def bind(name: str, result: Callable) -> None:
            def after_finish(*args: Any, **kwargs: Any) -> Any:
                self._after_finish(name)
                return result(*args, **kwargs)

            setattr(self, name, after_finish)

        for name in ("add_scalar", "add_text", "add_image", "add_images", "add_histogram", "add_audio"):
            bind(name, _noop)
        bind("add_figure", figure_noop)  # still closes the figure
        bind("timer", lambda *a, **k: _NO_TIMER)

    def _after_finish(self, name: str) -> None:
        message = f"nblog: run.{name}() called after run.finish() on run {self.id!r}"
        if self._strict:
            raise StrictModeError(f"{message}; raised (strict mode, NB_STRICT=1): nothing is logged after finish")
        message += "; this and every later logging call of this run is ignored"
        self._disable()  # warned once: later calls are plain no-ops
        self._warn_once(("after_finish",), message)

    def _step_back(self, tag: object, step: int, high: int) -> None:
        """A tag logged at a step below its highest in this session: stored, warned once
        per tag (raises in strict mode). A resumed session starts its own record."""
        message = f"nblog: tag {tag!r} logged at step {step}, lower than its step {high} earlier in this session"
        hint = "a restart from a checkpoint belongs in a new session: init(resume='auto')"
        if self._strict:
            raise StrictModeError(f"{message}; raised (strict mode, NB_STRICT=1), the point is not stored "
                                  f"({hint})", tag=tag)
        message += f"; stored, and readers show both ({hint})"
        self._warn_once(("step_back", tag), message)

    def __reduce__(self) -> tuple[Callable[[dict], Run], tuple[dict]]:
        """Pickle as an inert copy (see the class docstring): no writer, thread or lock."""
        return (_inert_copy, ({
            "project": self.project, "name": self.name, "run_id": self.id, "run_dir": self.dir,
            "rank": self.rank, "local_rank": self.local_rank, "world_size": self.world_size,
            "session": self.session, "config": self.config,
        },))

    def _forked(self) -> None:
        """In a child forked from this process: become a no-op, never touch the files."""
        self._finished = True
        self._inert = True
        self._disable()
        if self._writer is not None:
            self._writer.forget()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        clean_exit = exc_type is not None and issubclass(exc_type, SystemExit) and getattr(exc, "code", None) in (0, None)
        if exc_type is not None and not clean_exit:
            self._log_failure(exc_type, exc, tb)
        failed = exc_type is not None and not clean_exit and not issubclass(exc_type, KeyboardInterrupt)
        self.finish("failed" if failed else "finished")  # sys.exit(0) inside the block: finished

    def __repr__(self) -> str:
        return f"<nblog.Run id={self.id!r} rank={self.rank} session={self.session} dir={self.dir!r}>"

    # -- slow paths ----------------------------------------------------------------

    def _ensure_writer(self) -> bool:
        if self._writer is not None:
            return True
        if self._make_writer is None or self._finished:
            return False
        try:
            self._writer = self._make_writer(self)
        except OSError as err:
            self._make_writer = None
            self._warn_once(("writer",), f"nblog: cannot create the event log: {err}; nothing more is logged on this rank")
            return False
        if self._writer is None:
            self._make_writer = None
            return False
        for k, v in self._dropped_before_writer.items():
            self._writer.dropped[k] += v
        return True

    def _intern(self, table: dict, tag: object, kind: int) -> int | None:
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

    def _to_float(self, value: Any, tag: object) -> float | tuple | None:
        cls = value.__class__
        if cls is int or cls is bool:
            try:
                return float(value)
            except OverflowError:
                self._reject("bad_value", tag, f"value {value!r} is too large for a float")
                return None
        if value is None or isinstance(value, (str, bytes, bytearray)):
            self._reject("bad_value", tag, f"value must be a number, got {type(value).__name__}")
            return None
        where = _tensor_kind(value)
        synced = False  # a device value converted here, waiting for the device
        if where:
            if where == _DEVICE_TENSOR and self._writer is not None and (self._logged or self._first_logged()):
                captured = _capture(value)  # (copy, event): no wait for the device here
                if captured is not None:
                    return captured
                synced = True
            try:
                if getattr(value, "requires_grad", False) is True:  # float() of it warns (torch 2.13)
                    value = value.detach()  # the same value
            except Exception:
                pass  # no detach: float() below converts it, or refuses it with a warning
        try:
            out = float(value)
        except Exception as err:
            self._reject("bad_value", tag, f"value of type {type(value).__name__} is not a number: {err}")
            return None
        if synced:
            self.device_syncs += 1
            self._warn_once(("device_sync",), f"nblog: a {type(value).__name__} on a device could not be copied "
                            "without waiting for it, so it was converted in the training thread (a device "
                            "sync); run.device_syncs counts such values")
        return out

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

    def _add_captured(self, tag: object, tid: int, step: int, captured: tuple, ms: int) -> None:
        """A device value captured by ``_device.capture``: queued for the writer thread,
        which converts it once its event has completed (``Writer.pending``), keeping its
        step and time."""
        hi = self._hi
        if step < hi[tid]:
            self._step_back(tag, step, hi[tid])
        else:
            hi[tid] = step
        writer = self._writer
        assert writer is not None  # _to_float captures only for a run with a writer
        writer.pending.append((step, tid, ms, captured[0], captured[1]))

    def _check_step(self, step: Any, tag: object) -> int | None:
        if isinstance(step, bool):
            self._reject("bad_step", tag, "step must be an int, got bool")
            return None
        if not isinstance(step, int):
            try:
                index = step.__index__  # numpy and torch integers
            except AttributeError:
                self._reject("bad_step", tag, f"step must be a non-negative int, got {type(step).__name__}")
                return None
            try:
                step = int(index())
            except Exception:
                self._reject("bad_step", tag, f"step {step!r} is not an integer")
                return None
        if not 0 <= step < _STEP_END:
            self._reject("bad_step", tag, f"step must be in [0, 2**63), got {step}")
            return None
        return step

    def _reject(self, counter: str, tag: object, message: str) -> None:
        """Bad data: count it, warn once per (call site, tag); raise if strict."""
        if self._strict:
            raise StrictModeError(f"nblog: {message} (tag {tag!r}); raised (strict mode, NB_STRICT=1), "
                                  "the point is not stored", tag=tag)
        self._count(counter)
        try:
            key = (_call_site(), repr(tag)[:200])
        except Exception:
            key = ("?", "?")
        if key not in self._warned:
            self._warned.add(key)
            log.warning("nblog: %s (tag %.200r at %s); the point is skipped", message, tag, key[0])

    def _count(self, counter: str, n: int = 1) -> None:
        """Count ``n`` dropped items in the session's ``counter`` (written in its END
        record); held until this rank's writer exists."""
        writer = self._writer
        if writer is not None:
            writer.dropped[counter] += n
        else:
            held = self._dropped_before_writer
            held[counter] = held.get(counter, 0) + n

    def _internal(self, err: Exception) -> None:
        self._warn_once(("internal", type(err)), f"nblog: internal error, point skipped: {err!r}")
        if self._writer is not None:
            self._writer.dropped["internal"] += 1

    def _warn_once(self, key: tuple, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)


def _inert_copy(state: dict) -> Run:
    """A Run that logs nothing and never touches files: what an unpickled Run becomes."""
    run = Run(**state, is_logging=False, timing_all_ranks=False, strict=False, make_writer=None)
    run._finished = True
    run._inert = True
    run._disable()
    return run


def _read_error_file(path: str) -> object:
    """torchrun's error file (``TORCHELASTIC_ERROR_FILE``, JSON written by
    ``torch.distributed.elastic.multiprocessing.errors.record``) as parsed JSON, its
    text when it is not JSON, None when it cannot be read; at most 64 KiB read."""
    from ..format._format import loads_json
    from ..format._runfile import open_regular

    try:
        with open_regular(path) as f:
            raw = f.read(_MAX_ERROR_FILE + 1)
    except OSError:
        return None
    if len(raw) <= _MAX_ERROR_FILE:
        try:
            return loads_json(raw)
        except ValueError:
            pass
    return raw[:_MAX_ERROR_FILE].decode("utf-8", "replace")


def _call_site() -> str:
    """``file:line`` of the first frame outside nblog (the user's logging call)."""
    f: FrameType | None = sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) in _NBLOG_DIRS:
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "?"
