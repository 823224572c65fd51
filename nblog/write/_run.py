"""The Run object: the public logging calls and the run's lifecycle.

:class:`Run` is one process's handle on a run. This module holds its public face:
construction (the no-op bindings of a rank that does not log, chosen once here),
``add_text``, ``timer``, ``alert``, ``update_config``, ``flush``, ``finish`` and what
follows it (a logging call after ``finish`` warns once, then costs an empty call),
the context manager, pickling (an inert copy) and fork (the child goes inert).

The rest of Run is one concern a module (``Run`` derives from ``Scalars(Tags(Checks))``
and ``MediaCalls``; ``_failures`` and ``_timer`` are called):

- ``_scalars``: the hot path of ``add_scalar`` and its dict-block cache (~1 µs a call
  on rank 0), timer points and text held until a step is known, system points;
- ``_tags``: tag ids and highest steps (interning; per-tag highs; the current step,
  at which failures and alerts are recorded);
- ``_checks``: checks, rejections and strict mode (bad input warned once per call
  site and counted; ``NB_STRICT=1`` raises);
- ``_failures``: uncaught exceptions recorded in the event log and the run folder
  (imported with the first one);
- ``_run_media``: the media calls, handed to ``nblog.media`` through its interface;
- ``_timer``: the :class:`Timer` that ``timer`` returns.

``init`` (``_init``) makes the Run and its writer (``_writer``); ``_lifecycle`` calls
``finish`` at exit, on an uncaught exception and on SIGTERM, and ``_forked`` in a
forked child.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .. import _log as log
from .._errors import StrictModeError
from ..format import _format as F
from ..media._media import MediaLog, MediaSink, figure_noop
from ._checks import STEP_END as _STEP_END
from ._run_media import MediaCalls, RunMediaHost
from ._scalars import Scalars
from ._timer import NO_TIMER as _NO_TIMER
from ._timer import NoTimer as _NoTimer
from ._timer import Timer
from ._writer import Writer

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    import threading
    from types import TracebackType
    from typing import Any

    from ..format._runfile import RunFile

__all__ = ["Run", "Timer"]

_mono_ns = time.monotonic_ns
ALERT_LEVELS = ("info", "warn", "error")
ALERT_INTERVAL_S = 60.0  # one alert per title per this many seconds; the rest are counted
_MAX_TITLE = 1024
_MAX_ALERT_TEXT = 64 << 10


def _noop(*args: object, **kwargs: object) -> None:
    """Does nothing: bound in place of logging calls on ranks that do not log."""


def _noop_scalar(tag: object = None, value: object = None, step: object = None, all_ranks: object = None) -> None:
    """Does nothing: add_scalar where nothing is logged (an inert run, a rank that
    neither logs nor times). add_scalar's own parameters, so a call with a keyword
    costs no ``**kwargs`` dict (a ``step=`` call: ~60 ns against ~130 ns)."""


class Run(Scalars, MediaCalls):
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
        self._make_writer = make_writer
        self._writer: Writer | None = None
        self._finished = False
        #: device values that could not be captured without a sync, so were converted by
        #: ``float()`` in the training thread (each waits for the device); warned once
        self.device_syncs = 0
        self._inert = False  # a forked child's or an unpickled copy: silent, never warns
        self._t0 = _mono_ns()
        self._init_checks(strict)  # _checks
        self._init_tags(step_start)  # _tags: tag ids, highest steps, the current step
        self._init_scalars()  # _scalars: the points buffer and the dict-block cache
        self._failure: dict | None = None  # the uncaught exception recorded (_failures; run.json keeps it)
        self._texts: list = []
        self._media: list = []
        media_host = RunMediaHost(self)  # all that nblog.media sees of this run
        self._media_log = MediaLog(media_host)  # the media calls (add_image...) hand their arguments to it
        # encodes media and writes the media pack, in the writer thread
        self._media_sink = MediaSink(media_host) if is_logging and run_dir is not None and make_writer is not None else None
        self._on_finish: list[Callable[[], None]] = []
        self._on_flush: list[Callable[[], None]] = []  # the console's step stamp (_console)
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

    def _log_failure(self, exc_type: type[BaseException], exc: BaseException | None,
                     tb: TracebackType | None, thread: str | None = None) -> None:
        """Record an uncaught exception in this rank's event log and the run folder
        (:func:`nblog.write._failures.log_failure`; ``thread``: the name of the thread it
        ended, None for the main one). The module is imported with the first failure;
        never raises."""
        try:
            from ._failures import log_failure
        except ImportError as err:  # an interpreter shutting down
            self._internal(err)
            return
        log_failure(self, exc_type, exc, tb, thread)

    def _ensure_writer(self) -> bool:
        """Make this rank's writer (its event log) if there is none yet; False where
        the rank has none and can make none (warned once if creating it failed)."""
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


def _inert_copy(state: dict) -> Run:
    """A Run that logs nothing and never touches files: what an unpickled Run becomes."""
    run = Run(**state, is_logging=False, timing_all_ranks=False, strict=False, make_writer=None)
    run._finished = True
    run._inert = True
    run._disable()
    return run
