"""Failures: an uncaught exception recorded in this rank's event log and the run folder.

:func:`log_failure` is called (through ``Run._log_failure``) by a ``with`` block of
the run and by the hooks of ``_lifecycle`` (``sys.excepthook``,
``threading.excepthook``). It records a ``failure`` event (type, message, traceback cut to 64 KiB, the step this rank is in
(``Tags._current_step``), time, pid, torchrun's error file) in this rank's own event
log, creating the log where the rank had none; the first failure of the run also goes
to run.json (rank 0, through ``_failure`` at finish) and to the failure mark
``failure.r<rank>.s<session>.json``, which listings read without opening logs.

``Run._log_failure`` imports this module at the first failure: a cold path, kept out
of ``import nblog``.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from types import TracebackType

    from ._run import Run

_mono_ns = time.monotonic_ns
_MAX_MESSAGE = 8 << 10
_MAX_TRACEBACK = 64 << 10
_MAX_FAILURES = 16  # failure events recorded per run (a thread that dies again and again)
_MAX_ERROR_FILE = 64 << 10


def log_failure(run: Run, exc_type: type[BaseException], exc: BaseException | None,
                tb: TracebackType | None, thread: str | None = None) -> None:
    """Record an uncaught exception of ``run`` (type, message, traceback, step, time;
    ``thread``: the name of the thread it ended, None for the main one) in this rank's own event
    log, creating it if this rank has none yet; written at the finish that follows
    (before its END record), or at the next flush for a thread's. The first one of
    the run also goes to run.json (rank 0) and to the failure mark
    ``failure.r<rank>.s<session>.json`` in the run folder, which listings read. Each
    exception once (a ``with`` block, then the hook, see the same one), at most
    :data:`_MAX_FAILURES` per run; never raises."""
    seen: list[int] = run.__dict__.setdefault("_failures_seen", [])
    if run._finished or id(exc) in seen or len(seen) >= _MAX_FAILURES:
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
        step = run._current_step()
        event = {"kind": "failure", "type": name, "module": module if module != "builtins" else None,
                 "message": message[:_MAX_MESSAGE], "traceback": lines, "step": step,
                 "wall": wall, "ms": (_mono_ns() - run._t0) // 1_000_000, "pid": os.getpid()}
        if thread is not None:
            event["thread"] = thread
        error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
        if error_file:
            event["error_file"] = error_file
            event["error_file_content"] = _read_error_file(error_file)
        first = run._failure is None
        if first:
            run._failure = {"rank": run.rank, "type": name, "message": message[:500], "step": step,
                             "wall": wall, **({"thread": thread} if thread is not None else {})}
        if run._writer is None and not run._ensure_writer():
            return
        assert run._writer is not None  # made by _ensure_writer
        run._writer.events.append(event)
        if first and run.dir is not None and run._failure is not None:  # set just above
            _mark_failure(run, run._failure)
    except Exception as err:
        run._internal(err)

def _mark_failure(run: Run, failure: dict) -> None:
    """Write the failure mark of this rank's session (see nblog/reader/_runfiles/failures.py)."""
    from ..format._filenames import failure_file_name
    from ..format._host import hostname
    from ..format._runfile import write_json_atomic

    mark = {**failure, "session": run.session, "host": hostname(os.environ), "pid": os.getpid()}
    run_dir = run.dir
    assert run_dir is not None  # the caller checks: a run without a folder writes no mark
    write_json_atomic(os.path.join(run_dir, failure_file_name(run.rank, run.session)), mark)


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

