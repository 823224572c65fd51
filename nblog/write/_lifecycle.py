"""Flushing at exit, on uncaught exceptions and on SIGTERM; going inert after fork.

Every live Run is registered here. Hooks are installed once, on the first ``init``:
- ``atexit``: finish every run (status "finished").
- ``sys.excepthook``: an uncaught exception is recorded in each live run's own event
  log (type, message, traceback, step, time: :meth:`Run._log_failure`, on every rank
  that has or can create an event log), then the runs finish with status "failed"
  (the failure written before the END record), then the previous hook runs.
- ``threading.excepthook``: an uncaught exception that ends another thread is recorded
  the same way (with the thread's name; the runs go on), then the previous hook runs.
- SIGTERM (Slurm preemption, torchrun stopping workers), main thread only: flush every
  run within 1 s, then the previous handler runs. Points, text and counters are
  written first (milliseconds); queued media is encoded for the rest of that second.
  If the previous handler was the default action, the runs are closed (session end
  reason "SIGTERM"), media still queued is dropped and counted as ``media_timeout``,
  and the signal is raised again, so the process still dies of SIGTERM. With a
  handler of the user's (checkpoint and go on), media not encoded within the second
  stays queued and the media thread encodes it afterwards.
- ``os.register_at_fork``: in a child (DataLoader workers) every run becomes a no-op
  and never writes into the parent's files.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref

from .. import _log as log

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from types import FrameType, TracebackType
    from typing import Any

    from ._run import Run

_runs: weakref.WeakSet[Run] = weakref.WeakSet()
_installed = False
_previous_sigterm: Any = None  # signal.getsignal's answer: a handler, SIG_DFL, SIG_IGN or None
_previous_excepthook: Any = None
_previous_thread_hook: Any = None
_failed = False


def register(run: Run) -> None:
    """Track ``run`` for the exit, exception, signal and fork hooks."""
    global _installed
    _runs.add(run)
    if not _installed:
        _installed = True
        _install()


def _live() -> list[Run]:
    return [r for r in list(_runs) if not r._finished]


def active(rank: int) -> list[Run]:
    """The runs of ``rank`` that this process started and has not finished."""
    return [r for r in _live() if r.rank == rank]


def _install() -> None:
    global _previous_excepthook, _previous_sigterm, _previous_thread_hook
    atexit.register(_at_exit)
    _previous_excepthook = sys.excepthook
    sys.excepthook = _excepthook
    _previous_thread_hook = threading.excepthook
    threading.excepthook = _thread_excepthook
    os.register_at_fork(after_in_child=_after_fork_in_child)
    if threading.current_thread() is threading.main_thread():
        import signal

        try:
            _previous_sigterm = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError) as err:
            log.info("nblog: cannot install a SIGTERM handler: %s", err)


def _at_exit() -> None:
    for run in _live():
        run.finish("failed" if _failed else "finished")


def _excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    global _failed
    if not issubclass(exc_type, KeyboardInterrupt):
        _failed = True
    for run in _live():
        try:
            run._log_failure(exc_type, exc, tb)
        except Exception as err:
            log.warning("nblog: could not record the failure in %r: %r", run, err)
        try:
            run.finish("failed", reason=exc_type.__name__)
        except Exception as err:
            log.warning("nblog: could not finish %r: %r", run, err)
    hook = _previous_excepthook or sys.__excepthook__
    hook(exc_type, exc, tb)


def _thread_excepthook(args: Any) -> None:
    """An uncaught exception that ended a thread other than the main one: recorded as a
    failure of each live run (with the thread's name), which goes on; then the hook
    that was there before (Python's prints it). A thread's SystemExit is no failure."""
    if not issubclass(args.exc_type, SystemExit):
        name = getattr(args.thread, "name", None)
        for run in _live():
            try:
                run._log_failure(args.exc_type, args.exc_value, args.exc_traceback,
                                 thread=name if isinstance(name, str) else "?")
            except Exception as err:
                log.warning("nblog: could not record the failure in %r: %r", run, err)
    hook = _previous_thread_hook or threading.__excepthook__
    hook(args)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    import signal

    previous = _previous_sigterm
    if previous in (signal.SIG_DFL, None):
        for run in list(_runs):
            _close_for_signal(run, "SIGTERM")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    for run in list(_runs):  # finishing runs too: the signal may land inside finish()
        run.flush(timeout=1.0)
    if callable(previous):
        previous(signum, frame)


def _close_for_signal(run: Run, reason: str) -> None:
    """Write everything ``run`` holds and close its files before the process dies.

    Also for a run whose ``finish()`` the signal interrupted (it is marked finished
    but its writer is still open): the buffered points must not die with it.
    """
    if not run._finished:
        run.finish("running", reason=reason, timeout=1.0)
    elif run._writer is not None:
        run._writer.close({"status": "running", "reason": reason, "wall": time.time()}, timeout=1.0)


def _after_fork_in_child() -> None:
    for run in list(_runs):
        run._forked()
