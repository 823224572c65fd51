"""Where a run is: its last step, and whether the process writing a session is alive.
One definition of each, used by every view (``nb ls``, ``nb show``, ``nb report``,
``nb watch``, the TUI and the library). Standard library only (psutil when a process
of this machine is looked at): ``nb ls`` imports it.

Last step (the rules are written once, in ``nblog.format._steps``, which the writer's
resume counter uses too): a logged step is that of a scalar, timer, text or media record
(system metrics never count); an event log's last step is the highest it holds; a
session's is the higher of run.json's ``last_step`` for it and its event log's; a rank's
is that of its latest session that logged one; a run's is rank 0's.

Alive: a session's writer (its host, pid and start time, from run.json or the event
log's header) runs on this machine: alive while a process of that pid exists, is not a
zombie and did not start after the session (a pid used again); on another machine:
alive while its files were written within :data:`STALE_AFTER_S` seconds (a live writer
writes at least a heartbeat every 60 s). A run that run.json calls "running" whose
latest session's writer is not alive is "stale" (:func:`run_status`: the status every
view shows).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from ...format._host import hostname
from ...format._steps import higher, latest_step, log_last_step, rank_last_step, recorded_steps

#: Seconds without a write after which the writer of a session on another machine
#: counts as gone ("stale": three heartbeats missed).
STALE_AFTER_S = 180.0
#: How much later than a session's recorded start its process may seem to have started
#: (the kernel's start time of a process is known to about a second) before the pid
#: counts as another process's.
START_SLACK_S = 2.0


def this_host(env: Mapping[str, str] | None = None) -> str:
    """The name of this machine as nblog records it (``NB_HOSTNAME`` overrides it)."""
    return hostname(os.environ if env is None else env)


def process_alive(pid: int, started: float | None = None) -> bool:
    """Whether process ``pid`` of this machine is alive: it exists, is not a zombie
    (killed, not yet waited for) and, when ``started`` (unix seconds: the session's
    start, which came after its process's) is given, did not start after it (its pid
    given to another process since). A process of another user counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, someone else's
    except (OSError, OverflowError, ValueError):
        return False
    try:
        import psutil  # only here: a process of this machine to look at
    except ImportError:  # the pid exists: without psutil, nothing more is known
        return True
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        if started is not None and proc.create_time() > started + START_SLACK_S:
            return False
    except psutil.NoSuchProcess:  # ended just now (ZombieProcess too)
        return False
    except (psutil.Error, OSError):  # AccessDenied: it exists
        return True
    return True


def writer_alive(host: object, pid: object, started: object = None, last_write: float | None = None,
                 now: float | None = None, stale_after: float = STALE_AFTER_S, here: str | None = None) -> bool:
    """Whether the process that writes a session is alive (the rule of the module
    docstring).

    Args:
        host, pid, started: the session's host name, process id and start (unix
            seconds), as run.json or the event log's header records them (anything
            else counts as unknown).
        last_write: the newest modification time of the files it writes (unix
            seconds), None/0 when unknown.
        now: unix seconds to judge the silence by (default: the clock).
        stale_after: seconds of silence after which a writer elsewhere counts as gone.
        here: this machine's name (default :func:`this_host`); pass it when judging
            many sessions.

    Returns:
        True when it runs here and its process is alive, or runs elsewhere (or its
        pid is unknown) and its files were written within ``stale_after`` seconds or
        their time is unknown.
    """
    if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and isinstance(host, str) and host:
        if host == (this_host() if here is None else here):
            start = float(started) if isinstance(started, (int, float)) and not isinstance(started, bool) else None
            return process_alive(pid, start)
    if not last_write:
        return True
    return (time.time() if now is None else now) - last_write <= stale_after


def run_status(meta: Mapping, last_write: float | None, now: float | None = None,
               stale_after: float = STALE_AFTER_S, here: str | None = None) -> str:
    """A run's status as ``nb ls``, ``nb show``, ``nb report`` and the TUI show it.

    Args:
        meta: the parsed run.json (``{}`` when missing or unreadable).
        last_write: the newest modification time of the run's files (unix seconds),
            or None/0 when unknown.
        now: the time to judge by (unix seconds; default: now).
        stale_after: seconds without a write after which the writer of a run on
            another machine counts as gone.
        here: this machine's name (default: :func:`this_host`).

    Returns:
        run.json's ``status`` ("running", "finished", "failed"; "unknown" when it has
        none), except for a run still marked "running": "preempted" when its last
        session has ended (an ``end`` recorded, as on SIGTERM: the job is expected to
        be requeued), else "stale" when the process of its latest session is not alive
        (:func:`writer_alive`: on this machine, its pid; elsewhere,
        no write for ``stale_after`` seconds): killed without a chance to say so.
    """
    if not isinstance(meta, Mapping):
        return "unknown"
    status = base_status(meta)
    if status == "running":
        host, pid, start = session_writer(meta.get("sessions"))
        if not writer_alive(host, pid, start, last_write, now, stale_after, here):
            return "stale"
    return status


def session_writer(sessions: object) -> list:
    """``[host, pid, start]`` of the latest of run.json's ``sessions`` (rank 0's
    process), each None when unknown."""
    entries = [s for s in sessions if isinstance(s, dict)] if isinstance(sessions, list) else []
    if not entries:
        return [None, None, None]
    last = max(entries, key=lambda s: s["session"] if s.get("session").__class__ is int else -1)
    host, pid, start = last.get("host"), last.get("pid"), last.get("start")
    return [host if isinstance(host, str) else None,
            pid if pid.__class__ is int else None,
            start if isinstance(start, (int, float)) and not isinstance(start, bool) else None]


def base_status(meta: Mapping) -> str:
    """:func:`run_status` as far as run.json alone tells it ("running" may still turn
    out "stale" by the files' modification times)."""
    status = meta.get("status")
    if not isinstance(status, str) or not status:
        return "unknown"
    if status != "running":
        return status
    sessions = [s for s in meta.get("sessions") or [] if isinstance(s, dict)]
    if sessions:
        last = max(sessions, key=lambda s: s["session"] if s.get("session").__class__ is int else -1)
        end = last.get("end")
        if isinstance(end, (int, float)) and not isinstance(end, bool):
            return "preempted"
    return status


def session_last_step(recorded: int | None, logged: int | None) -> int | None:
    """A session's last step: the higher of what run.json recorded for it and the
    highest step its event log holds (either may be None: unknown)."""
    return higher(recorded, logged)


def session_steps(run_dir: str, sessions: object) -> dict[int, int | None]:
    """The last step of each of run.json's ``sessions`` (its list) of the run in
    ``run_dir``: :func:`session_last_step` of its ``last_step`` and of rank 0's event
    log of that session (:func:`log_last_step`, its end read), by session number."""
    from ...format._filenames import event_file_name

    out: dict[int, int | None] = {}
    recorded = recorded_steps(sessions)
    for s in sessions if isinstance(sessions, list) else ():
        n = s.get("session") if isinstance(s, dict) else None
        if n.__class__ is not int:
            continue
        path = os.path.join(run_dir, event_file_name(0, n))
        out[n] = session_last_step(recorded.get(n), log_last_step(path) if os.path.exists(path) else None)
    return out


__all__ = ["STALE_AFTER_S", "base_status", "higher", "latest_step", "log_last_step", "process_alive", "rank_last_step",
           "recorded_steps", "run_status", "session_last_step", "session_steps", "session_writer", "this_host",
           "writer_alive"]
