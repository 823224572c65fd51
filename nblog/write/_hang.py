"""The stall watchdog: each rank writes its own stacks and collective record when it stops moving.

One :class:`Watchdog` per rank that knows its run folder. It runs in a daemon thread of
its own (``nblog-hang``), never in the training thread, and talks to no other rank: no
collective, no lock and no file shared between ranks.

- **Stall**: the rank's highest step (any call: scalars, timers, text, media;
  ``Run._current_step``) did not move for the *period*: ``hang_s`` (``init(hang_s=)``,
  ``$NB_HANG_S``; 0 or "off": no watchdog), else 5x the longest gap between steps seen
  over the last 64 steps, never below 120 s (:data:`FLOOR_S`). The floor keeps a job
  whose step takes a second from calling a checkpoint save or an evaluation a hang; the
  factor 5 keeps a job whose steps slow down twofold (a busy file system, a straggling
  node) quiet. With the automatic period the watchdog is armed by the first step: a
  long start (data loading, compilation) is not a stall. An explicit ``hang_s`` arms it at
  once.
- **Dump** (:func:`dump`): ``stacks.r<R>.s<S>.<n>.json`` (``_filenames``; ``man 5
  nb-format``, HANG DUMPS), written atomically: every thread's Python stack (taken here,
  with ``sys._current_frames``) first, then, where ``torch.distributed`` is initialised,
  the Flight Recorder record without its stack traces (the last 64 entries, each with
  its real state derived from ``pg_status``: gloo says "scheduled" for all). Again every
  further period while the stall lasts, at most 5 a stall and 100 a session; when the
  rank moves again, ``stacks.r<R>.s<S>.moved.json`` records that the stall ended (a false
  alarm is recorded as such).
- **GIL held in C**: where the main thread holds the interpreter in C code, this thread
  cannot run; the standard library's ``faulthandler`` watchdog, re-armed each tick to
  fire a little after the period, writes every thread's stack into
  ``stacks.r<R>.s<S>.faulthandler.txt`` instead (created when the watchdog is first
  armed, removed at the end when empty).
- **On demand**: a signal (``SIGUSR1`` by default; ``$NB_HANG_SIGNAL``, "off") writes a
  dump at once and the job goes on. The handler is installed only from the main thread;
  the C-level wakeup fd (``signal.set_wakeup_fd``, when no one else holds it, e.g.
  asyncio) wakes this thread even while the main thread waits inside a collective; the
  Python handler only calls the handler it replaced, if any (else it wakes this thread
  itself, when the main thread next runs Python).
- The faulthandler fallback re-arms ``faulthandler.dump_traceback_later`` (one per
  process): a program's own later-dump (pytest's ``faulthandler_timeout``) is replaced
  while the watchdog runs; ``NB_HANG_S=0`` leaves it alone.
- **Flight Recorder on**: :func:`enable_flight_recorder` sets ``TORCH_FR_BUFFER_SIZE``
  before any process group exists when the user has not (``$NB_HANG_FR=0``: not).

Every failure (a full disk, a read-only folder, no torch) warns once and never raises.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections import deque

from .. import _log as log
from ..format._filenames import (
    hang_dump_file_name,
    hang_faulthandler_file_name,
    hang_moved_file_name,
)
from ..format._filesafety import create_exclusive, write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "FLOOR_S", "FR_BUFFER", "Watchdog", "enable_flight_recorder", "fr_record", "parse_hang_s",
    "python_stacks",
]

FLOOR_S = 120.0  # the shortest automatic period
FACTOR = 5.0  # the automatic period: this times the longest recent gap between steps
GAPS = 64  # steps whose gaps count
PER_STALL = 5  # dumps a stall at most
PER_SESSION = 100  # dumps a session at most
FR_ENTRIES = 64  # Flight Recorder entries kept in a dump
FR_BUFFER = "2000"  # TORCH_FR_BUFFER_SIZE set by nb (torch 2.13's own default for its C++ recorder)
MAX_FRAMES = 64  # innermost frames kept per thread
DUMP_VERSION = 1


def parse_hang_s(value: object, where: str = "hang_s") -> float | None:
    """``hang_s`` / ``$NB_HANG_S`` as seconds: None for automatic ("" / None / "auto"),
    0.0 for off ("0", "off", 0, False). Raises ValueError for anything else."""
    if value is None or value is True:
        return None
    if value is False:
        return 0.0
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("", "auto"):
            return None
        if text in ("off", "no", "false", "none"):
            return 0.0
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{where}={value!r}: seconds, 'auto' or 'off'") from None
    if not isinstance(value, (int, float)) or value != value or value < 0:
        raise ValueError(f"{where}={value!r}: seconds >= 0, 'auto' or 'off'")
    return float(value)


def parse_signal(value: str | None) -> int | None:
    """``$NB_HANG_SIGNAL``: a signal name ("USR1", "SIGUSR2") or number; None for "off".
    Raises ValueError for an unknown name."""
    text = (value or "USR1").strip().upper()
    if text in ("OFF", "0", "NONE", "NO", "FALSE"):
        return None
    if text.isdigit():
        return int(text)
    name = text if text.startswith("SIG") else "SIG" + text
    num = getattr(signal, name, None)
    if not isinstance(num, int):
        raise ValueError(f"NB_HANG_SIGNAL={value!r}: not a signal name")
    return int(num)


def enable_flight_recorder(env: Mapping[str, str] | None = None) -> str:
    """Turn torch's Flight Recorder on for the process groups made after this call.

    Sets ``TORCH_FR_BUFFER_SIZE`` in ``os.environ`` when neither it nor
    ``TORCH_NCCL_TRACE_BUFFER_SIZE`` is set and no default process group exists yet.
    Returns what happened: "set", "user" (the user chose), "late" (a process group
    exists; its recorder is as it was made), "off" (``$NB_HANG_FR=0``)."""
    env = os.environ if env is None else env
    if env.get("NB_HANG_FR", "").strip().lower() in ("0", "off", "false", "no"):
        return "off"
    if "TORCH_FR_BUFFER_SIZE" in env or "TORCH_NCCL_TRACE_BUFFER_SIZE" in env:
        return "user"
    if _dist_initialized():
        return "late"
    os.environ["TORCH_FR_BUFFER_SIZE"] = FR_BUFFER
    return "set"


def _dist_initialized() -> bool:
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return False
    try:
        return bool(dist.is_available() and dist.is_initialized())
    except Exception as exc:  # a torch that cannot say: no collective record, said once
        global _DIST_UNKNOWN
        _DIST_UNKNOWN += 1
        if _DIST_UNKNOWN == 1:
            log.warning("nblog: cannot tell whether torch.distributed is initialised (%r): "
                        "hang dumps hold no Flight Recorder record", exc)
        return False


#: How often torch.distributed could not say whether it is initialised (warned once).
_DIST_UNKNOWN = 0


def python_stacks(skip: int | None = None) -> list[dict]:
    """Every thread's Python stack now: ``[{"name", "id", "main", "daemon", "stack":
    [{"file", "line", "func"}, ...]}]``, the stack outermost first (at most
    :data:`MAX_FRAMES` innermost frames), the main thread first. ``skip``: a thread id
    left out (the caller's)."""
    frames = sys._current_frames()
    threads = {t.ident: t for t in threading.enumerate()}
    main = threading.main_thread().ident
    out = []
    for tid, frame in frames.items():
        if tid == skip:
            continue
        t = threads.get(tid)
        stack = [{"file": fs.filename, "line": fs.lineno, "func": fs.name}
                 for fs in traceback.extract_stack(frame, limit=MAX_FRAMES)]
        out.append({"name": t.name if t is not None else f"thread-{tid}", "id": tid,
                    "main": tid == main, "daemon": bool(t.daemon) if t is not None else None,
                    "stack": stack})
    out.sort(key=lambda th: (not th["main"], th["name"]))
    return out


def fr_record(entries: int = FR_ENTRIES) -> tuple[dict | None, str | None]:
    """This process's Flight Recorder record: ``(record, note)``. The record: ``{"pg_status",
    "pg_config", "entries": [{"pg_id", "seq", "op", "state", "raw_state", "p2p",
    "sizes"}]}`` (the last ``entries``), or None with a note saying why (no
    ``torch.distributed``, the recorder off, an error)."""
    if not _dist_initialized():
        return None, "torch.distributed is not initialised"
    try:
        import json

        import torch

        # the JSON form: no stack traces (they took seconds while a rank spun in Python),
        # and nothing unpickled (no module of nb loads a pickle: test_shared_fs_safety)
        raw = torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True,  # type: ignore[attr-defined]
                                                             onlyActive=False)
        data = json.loads(raw)
    except Exception as exc:
        return None, f"Flight Recorder record not taken: {exc!r}"
    status = {str(k): v for k, v in (data.get("pg_status") or {}).items()}
    kept = []
    for e in list(data.get("entries") or [])[-entries:]:
        pg = str(e.get("pg_id"))
        p2p = bool(e.get("is_p2p"))
        seq = int(e.get("p2p_seq_id") if p2p else e.get("collective_seq_id") or 0)
        kept.append({
            "pg_id": e.get("pg_id"), "pg": (e.get("process_group") or ("", ""))[1],
            "seq": seq, "op": str(e.get("profiling_name") or ""),
            "state": _state(e, status.get(pg), p2p, seq), "raw_state": e.get("state"),
            "p2p": p2p, "sizes": e.get("input_sizes"),
        })
    if not kept and os.environ.get("TORCH_FR_BUFFER_SIZE", os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE")) == "0":
        return None, ("the Flight Recorder is off (TORCH_FR_BUFFER_SIZE=0): set TORCH_FR_BUFFER_SIZE=2000 "
                      "before init_process_group to record collectives")
    return {"version": data.get("version"), "pg_status": status, "pg_config": data.get("pg_config"),
            "entries": kept}, None


def _last_collectives(fr: dict | None) -> dict | None:
    """The last collective (not point-to-point) of each process group in a record:
    ``{pg: [seq, op, state]}``, None without a record."""
    if fr is None:
        return None
    out: dict[str, list] = {}
    for e in fr["entries"]:
        if not e["p2p"]:
            out[str(e["pg"] or e["pg_id"])] = [e["seq"], e["op"], e["state"]]
    return out


_ORDER = {"scheduled": 0, "started": 1, "completed": 2}


def _state(entry: dict, status: dict | None, p2p: bool, seq: int) -> str:
    """The real state of a recorded collective: the raw state, raised by ``pg_status``
    (gloo records every entry as "scheduled", completed ones too)."""
    raw = str(entry.get("state") or "scheduled")
    derived = raw
    if entry.get("retired"):
        derived = "completed"
    elif status and not p2p:
        if seq <= int(status.get("last_completed_collective", -1)):
            derived = "completed"
        elif seq <= int(status.get("last_started_collective", -1)):
            derived = "started"
    return derived if _ORDER.get(derived, 0) >= _ORDER.get(raw, 0) else raw


class Watchdog:
    """One rank's stall watchdog (see the module docstring).

    Args:
        run_dir: the run folder.
        rank, session: this rank's numbers (the file names).
        host: this machine's name (written in each dump).
        step: returns the rank's highest step so far (None: none yet); called in the
            watchdog thread, about once per ``tick``.
        hang_s: the period in seconds; None: automatic; 0: no stall detection (the
            signal still dumps).
        signum: the on-demand signal, or None.
        fr: take the Flight Recorder record.
        clock, wall: monotonic and wall clocks (seconds), injected by tests.
        tick: seconds between checks.
        faulthandler: arm the faulthandler fallback (``start``).
        record: returns ``(Flight Recorder record, note)`` (default :func:`fr_record`;
            tools that make dumps of many ranks hand in their own).
    """

    def __init__(self, run_dir: str, rank: int, session: int, host: str, step: Callable[[], int | None], *,
                 hang_s: float | None = None, signum: int | None = signal.SIGUSR1, fr: bool = True,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 tick: float = 1.0, faulthandler: bool = True,
                 record: Callable[[], tuple[dict | None, str | None]] | None = None):
        self.run_dir = run_dir
        self.rank = rank
        self.session = session
        self.host = host
        self._step_fn = step
        self.hang_s = hang_s
        self.signum = signum
        self.fr = fr
        self._clock = clock
        self._wall = wall
        self.tick = tick
        self._use_faulthandler = faulthandler
        self._record = record or fr_record
        now = clock()
        self._last_step: int | None = None
        self._moved_at = now  # monotonic time the step last moved (or the start)
        self._moved_wall = wall()
        self._gaps: deque[float] = deque(maxlen=GAPS)
        self._armed = hang_s is not None and hang_s > 0
        self.stall = 0  # stalls seen this session
        self._stall_dumps: list[int] = []  # dump numbers of the current stall
        self._next_at: float | None = None  # when the next dump of this stall is due
        self.dumps = 0  # dumps written this session
        self._warned: set[str] = set()
        self.problems: dict[str, int] = {}  # what went wrong, how often (each warned once)
        self._requested = False
        self._stop = False
        self._thread: threading.Thread | None = None
        self._rfd = self._wfd = -1
        self._old_wakeup = -1
        self._old_handler: object = None
        self._fh_file: object = None
        self._fh_path = ""
        self._fh_timeout = 0.0

    # -- the period ------------------------------------------------------------------

    def period(self) -> float | None:
        """The seconds of no step that make a stall now: ``hang_s``, else 5x the longest
        gap of the last 64 steps, at least 120 s; None when off or not armed yet."""
        if self.hang_s is not None:
            return self.hang_s if self.hang_s > 0 else None
        if not self._armed:
            return None
        return max(FLOOR_S, FACTOR * max(self._gaps, default=0.0))

    # -- one check -----------------------------------------------------------------------

    def poll(self) -> str | None:
        """One check, in the watchdog thread (tests call it with their clock). Returns
        what it wrote: "stall", "signal", "moved" or None."""
        now = self._clock()
        try:
            step = self._step_fn()
        except Exception as exc:  # the step as last read: counted, said once
            self._warn_once("step", f"nblog: hang watchdog cannot read the step: {exc!r}")
            step = self._last_step
        wrote = None
        if step is not None and step != self._last_step:
            if self._last_step is not None:
                self._gaps.append(now - self._moved_at)
            self._last_step = step
            self._moved_at = now
            self._moved_wall = self._wall()
            self._armed = True
            if self._stall_dumps:
                self._write_moved(step)
                wrote = "moved"
            self._stall_dumps = []
            self._next_at = None
        if self._requested:
            self._requested = False
            self._dump("signal")
            wrote = wrote or "signal"
        p = self.period()
        if p is not None and now - self._moved_at >= p:
            if not self._stall_dumps and self._next_at is None:
                self.stall += 1
                self._next_at = now
            if (self._next_at is not None and now >= self._next_at and len(self._stall_dumps) < PER_STALL):
                n = self._dump("stall")
                if n is not None:
                    self._stall_dumps.append(n)
                    wrote = "stall"
                self._next_at = now + p
        self._rearm_faulthandler(p)
        return wrote

    def request(self) -> None:
        """Ask for a dump at the next check (what the signal does)."""
        self._requested = True
        self._wake()

    # -- the dump ------------------------------------------------------------------------

    def _dump(self, kind: str) -> int | None:
        if self.dumps >= PER_SESSION:
            self._warn_once("limit", f"nblog: {PER_SESSION} hang dumps written this session; no more")
            return None
        n = self.dumps + 1
        now = self._clock()
        threads = python_stacks(skip=threading.get_ident())  # stacks first: they move
        fr, note = (self._record() if self.fr else (None, "the Flight Recorder record is off (NB_HANG_FR=0)"))
        summary = {
            "version": DUMP_VERSION, "kind": kind, "rank": self.rank, "session": self.session,
            "host": self.host, "pid": os.getpid(), "n": n, "stall": self.stall if kind == "stall" else None,
            "step": self._last_step, "wall": self._wall(), "since_wall": self._moved_wall,
            "stalled_s": round(now - self._moved_at, 3), "period_s": self.period(),
            "main": next(([[f["file"], f["line"], f["func"]] for f in t["stack"]] for t in threads if t["main"]), None),
            "last": _last_collectives(fr), "fr": fr is not None, "fr_note": note,
        }
        path = os.path.join(self.run_dir, hang_dump_file_name(self.rank, self.session, n))
        try:
            import json

            data = (json.dumps(summary, default=str) + "\n"
                    + json.dumps({"threads": threads, "fr": fr}, default=str) + "\n").encode()
            write_atomic(path, data)
        except Exception as exc:
            self._warn_once("write", f"nblog: hang dump not written to {path}: {exc!r}")
            return None
        self.dumps = n
        if kind == "stall" and n == 1 or kind == "stall" and len(self._stall_dumps) == 0:
            log.warning("nblog: rank %d made no step for %.0f s (at step %s): stacks in %s",
                        self.rank, now - self._moved_at, self._last_step, path)
        return n

    def _write_moved(self, step: int) -> None:
        import json

        path = os.path.join(self.run_dir, hang_moved_file_name(self.rank, self.session))
        doc = {"version": DUMP_VERSION, "rank": self.rank, "session": self.session, "stall": self.stall,
               "dumps": list(self._stall_dumps), "step": step, "wall": self._wall()}
        try:
            write_atomic(path, json.dumps(doc).encode())
        except Exception as exc:
            self._warn_once("write", f"nblog: hang note not written to {path}: {exc!r}")

    # -- faulthandler ------------------------------------------------------------------

    def _rearm_faulthandler(self, p: float | None) -> None:
        """Re-arm faulthandler to fire ``p`` plus a few ticks from now: it fires only when
        this thread could not run (the GIL held in C code) for that long."""
        if not self._use_faulthandler or (p is None and self._fh_file is None):
            return
        if self._fh_file is None:  # opened when first armed: a run that never arms has no such file
            self._open_faulthandler()
            if self._fh_file is None:
                self._use_faulthandler = False  # warned
                return
        import faulthandler

        try:
            if p is None:
                if self._fh_timeout:
                    faulthandler.cancel_dump_traceback_later()
                    self._fh_timeout = 0.0
                return
            # from the last move: fires at the same time as the first Python dump would have
            timeout = max(1.0, p - (self._clock() - self._moved_at)) + 3 * self.tick
            faulthandler.dump_traceback_later(timeout, repeat=False, file=self._fh_file)  # type: ignore[arg-type]
            self._fh_timeout = timeout
        except Exception as exc:
            self._warn_once("faulthandler", f"nblog: faulthandler watchdog not armed: {exc!r}")

    def _open_faulthandler(self) -> None:
        self._fh_path = os.path.join(self.run_dir, hang_faulthandler_file_name(self.rank, self.session))
        try:
            fd = create_exclusive(self._fh_path)
            self._fh_file = os.fdopen(fd, "w")
        except Exception as exc:
            self._warn_once("faulthandler", f"nblog: no faulthandler file {self._fh_path}: {exc!r}")

    def _close_faulthandler(self) -> None:
        f = self._fh_file
        if f is None:
            return
        self._fh_file = None
        import faulthandler

        with contextlib.suppress(Exception):
            faulthandler.cancel_dump_traceback_later()
        with contextlib.suppress(Exception):
            f.close()  # type: ignore[attr-defined]
        with contextlib.suppress(OSError):
            if os.path.getsize(self._fh_path) == 0:
                os.unlink(self._fh_path)

    # -- the thread and the signal -----------------------------------------------------

    def start(self) -> None:
        """Start the watchdog thread, the faulthandler fallback and the signal handler."""
        try:
            r, w = socket.socketpair()
            r.setblocking(False)
            w.setblocking(False)
            self._sockets = (r, w)
            self._rfd, self._wfd = r.fileno(), w.fileno()
        except OSError as exc:
            self._warn_once("start", f"nblog: hang watchdog not started: {exc!r}")
            return
        self._use_faulthandler = self._use_faulthandler and (self.hang_s is None or self.hang_s > 0)
        self._rearm_faulthandler(self.period())  # armed now (explicit hang_s): the GIL may never come back
        if self.signum is not None:
            self._install_signal()
        self._thread = threading.Thread(target=self._loop, name="nblog-hang", daemon=True)
        self._thread.start()

    def _install_signal(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            log.info("nblog: hang signal not installed: init ran outside the main thread")
            return
        signum = self.signum
        assert signum is not None
        try:
            old = signal.getsignal(signum)
            self._old_handler = old

            def handler(num: int, frame: object) -> None:
                if not self._own_wakeup:
                    self.request()
                if callable(old):
                    old(num, frame)  # type: ignore[arg-type]

            signal.signal(signum, handler)
            self._own_wakeup = False
            try:
                prev = signal.set_wakeup_fd(self._wfd, warn_on_full_buffer=False)
                if prev != -1:  # someone (asyncio) uses it: give it back, the handler wakes us
                    signal.set_wakeup_fd(prev)
                else:
                    self._own_wakeup = True
            except (ValueError, OSError):
                pass
        except (ValueError, OSError) as exc:
            self._warn_once("signal", f"nblog: hang signal not installed: {exc!r}")

    _own_wakeup = False

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wfd, b"\0")

    def _loop(self) -> None:
        while not self._stop:
            try:
                ready, _, _ = select.select([self._rfd], [], [], self.tick)
            except (OSError, ValueError):
                return
            if self._stop:
                return
            if ready:
                try:
                    data = os.read(self._rfd, 4096)
                except OSError:
                    data = b""
                if self.signum is not None and self._own_wakeup and bytes([self.signum]) in data:
                    self._requested = True
            try:
                self.poll()
            except Exception as exc:  # never let the thread die silently
                self._warn_once("poll", f"nblog: hang watchdog error: {exc!r}")

    def stop(self) -> None:
        """Stop the thread, disarm faulthandler, restore the signal handler (main thread)."""
        self._stop = True
        if self._rfd < 0:
            return
        self._wake()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(2.0)
        self._close_faulthandler()
        if self.signum is not None and threading.current_thread() is threading.main_thread():
            with contextlib.suppress(Exception):
                if self._own_wakeup:
                    prev = signal.set_wakeup_fd(-1)
                    if prev != self._wfd:  # someone set theirs after ours: leave it
                        signal.set_wakeup_fd(prev)
            with contextlib.suppress(Exception):
                if self._old_handler is not None:
                    signal.signal(self.signum, self._old_handler)  # type: ignore[arg-type]
        for s in getattr(self, "_sockets", ()):
            with contextlib.suppress(OSError):
                s.close()

    def _warn_once(self, key: str, message: str) -> None:
        """Warn of ``key`` the first time; count every time (:attr:`problems`)."""
        self.problems[key] = self.problems.get(key, 0) + 1
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)
