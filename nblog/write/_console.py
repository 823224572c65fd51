"""Each rank's console: fd 1 and 2 captured into ``console.r<rank>.s<session>.log``.

``init(console=True)`` (or ``NB_CONSOLE=1``) on a rank that knows its run folder:

1. the console file is created (``O_EXCL | O_NOFOLLOW``, never through a link);
2. two pipes are made (as large as ``/proc/sys/fs/pipe-max-size`` allows, up to 4 MiB),
   and a helper process (:mod:`nblog.write._console_tee`, ``python -I -S``, standard library
   only) is started with their read ends, the file, and a 16-byte shared memory file
   holding the current step; its fd 1 and 2 are this process's original ones;
3. ``sys.stdout`` and ``sys.stderr`` are flushed and the pipes' write ends are put on
   fd 1 and fd 2 (``dup2``): whatever writes there (Python, C/C++, CUDA, NCCL, child
   processes started from now on) goes through the helper, which writes it at once to
   the original stream and stamps its lines into the file;
4. a daemon thread publishes ``run._step`` (read without a lock) to the helper every
   :data:`_PUBLISH_S` seconds and notices if the helper dies: then fd 1 and 2 are put
   back at once and training goes on with its output on the original streams.

The training process never waits for the helper: its writes land in the pipe, and
only a full pipe (megabytes behind, or a terminal that does not take output, which
would block it without nb too) can hold it up. The helper reads the pipes to the end
after this process died (``kill -9``, a segfault, SIGTERM), so the last lines of a
failing rank reach the terminal and the file.

Capture lasts until this process exits (an uncaught exception's traceback, printed
after nb finished the run, is kept) or until the next ``init`` of this process, which
starts its own. At exit, fd 1 and 2 are put back and the helper gets at most
:data:`_EXIT_WAIT_S` seconds to write the rest. A child forked from this process
(``os.fork``, a ``fork`` DataLoader worker) puts its fd 1 and 2 back at once, so its
output reaches the original streams and never this rank's file.

The file records what the program prints, secrets included: print no tokens.
"""

from __future__ import annotations

import atexit
import fcntl
import mmap
import os
import struct
import subprocess
import sys
import threading

from .. import _log as log
from ..format._filenames import console_file_name
from ..format._filesafety import create_exclusive

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from typing import TextIO

    from ._run import Run

_TEE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_console_tee.py")
_PIPE_MAX = 4 << 20  # bytes of pipe buffer asked for, at most
_PUBLISH_S = 0.05  # seconds between step publications (the stamp's step lags by at most this)
_EXIT_WAIT_S = 1.0  # seconds the helper may take at exit to write the rest
_STEP = struct.Struct("<qq")
_STEP_MAX = (1 << 63) - 1

_lock = threading.Lock()
_active: Capture | None = None
_hooked = False


def capture(run: Run | None, interval: float) -> Capture | None:
    """Capture this process's fd 1 and 2 for ``run`` (None: end any capture).

    The helper appends to the file every ``interval`` seconds (the run's flush
    interval), at most every second. Ends the capture of an earlier run of this
    process first. Never raises: a failure
    (the file exists, no pipes, the helper cannot start) warns once and captures
    nothing. Returns the capture, or None.
    """
    global _active, _hooked
    with _lock:
        old, _active = _active, None
    if old is not None:
        old.stop()
    if run is None or run.dir is None:
        return None
    if not _hooked:
        _hooked = True
        atexit.register(_at_exit)
        os.register_at_fork(after_in_child=_after_fork_in_child)
    path = os.path.join(run.dir, console_file_name(run.rank, run.session))
    try:
        cap = Capture(run, path, min(float(interval), 1.0))
    except Exception as err:  # OSError mostly; never an exception out of init for this
        log.warning("nblog: rank %d cannot capture its console into %s: %s; the console is not recorded",
                    run.rank, path, err)
        return None
    with _lock:
        _active = cap
    run._on_flush.append(cap.publish)
    return cap


def _at_exit() -> None:
    cap = _active
    if cap is not None:
        cap.stop()


def _after_fork_in_child() -> None:
    global _active
    cap, _active = _active, None
    if cap is not None:
        cap.forget()


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            size = min(int(f.read()), _PIPE_MAX)
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, size)
    except (OSError, ValueError, AttributeError):
        pass  # the default size (64 KiB) still works, with less slack
    return r, w


class Capture:
    """One process's console capture (see the module docstring). Made by :func:`capture`.

    Raises:
        OSError: the console file exists or cannot be created, or no pipe, memory
            file or helper process could be made (everything made is closed again).
    """

    def __init__(self, run: Run, path: str, interval: float) -> None:
        self.path = path
        self.rank = run.rank
        self._run = run
        self._stopped = False
        self._restore_lock = threading.Lock()
        self._halt = threading.Event()
        opened: list[int] = []
        created = False
        saved: tuple[int, int] | None = None
        try:
            fd = create_exclusive(path)
            created = True
            opened.append(fd)
            r_out, w_out = _pipe()
            r_err, w_err = _pipe()
            opened += [r_out, w_out, r_err, w_err]
            step_fd = os.memfd_create("nblog-step", os.MFD_CLOEXEC)
            opened.append(step_fd)
            os.ftruncate(step_fd, _STEP.size)
            self._mem = mmap.mmap(step_fd, _STEP.size)
            self._last = object()
            self._publish()
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", _TEE, str(r_out), str(r_err), str(fd), str(step_fd),
                 repr(float(interval))],
                stdin=subprocess.DEVNULL, pass_fds=(r_out, r_err, fd, step_fd), close_fds=True,
            )
            for f in (sys.stdout, sys.stderr):
                _flush(f)
            self._saved = saved = (os.dup(1), os.dup(2))
            opened += list(saved)
            os.dup2(w_out, 1)
            os.dup2(w_err, 2)
        except BaseException:
            if saved is not None:  # fd 1 may already be the pipe: put the streams back first
                for original, target in zip(saved, (1, 2), strict=True):
                    try:
                        os.dup2(original, target)
                    except OSError:
                        pass
            for f in opened:
                try:
                    os.close(f)
                except OSError:
                    pass
            proc = getattr(self, "_proc", None)
            if proc is not None:
                proc.kill()
                proc.wait()
            if created:  # an empty file would make a later try fail (O_EXCL)
                try:
                    os.unlink(path)
                except OSError:
                    pass
            raise
        for f in (fd, w_out, w_err, step_fd):
            os.close(f)
        # The read ends stay open here too: should the helper die, a write to fd 1/2
        # then fills the pipe for a moment (until the watchdog puts the streams back)
        # instead of failing with EPIPE in the training code.
        self._reads = (r_out, r_err)
        self._thread = threading.Thread(target=self._watch, name="nblog-console", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        """The helper process's pid."""
        return self._proc.pid

    def publish(self) -> None:
        """Hand the run's current step to the helper now (also done every
        :data:`_PUBLISH_S` seconds), for the stamps of the lines printed next.
        Does nothing once the capture ended (and in a forked child, whose memory
        file is still the parent's)."""
        if self._stopped:
            return
        try:
            self._publish()
        except Exception:  # the mapping closed at exit: nothing left to stamp
            pass

    def _publish(self) -> None:
        step = self._run._step
        if step is self._last:
            return
        self._last = step
        if step.__class__ is not int:
            try:
                step = -1 if step is None else int(step.__index__())
            except Exception:
                step = -1
        if not 0 <= step <= _STEP_MAX:
            step = -1
        _STEP.pack_into(self._mem, 0, step, step)

    def _watch(self) -> None:
        while not self._halt.wait(_PUBLISH_S):
            try:
                self._publish()
            except Exception:  # a closed mapping at exit: nothing to publish to
                return
            if self._proc.poll() is not None:
                if self._restore(helper_died=True):
                    log.warning(
                        "nblog: the console capture of rank %d stopped (its helper process exited "
                        "with status %s); output goes only to the original streams from now on",
                        self.rank, self._proc.returncode,
                    )
                return

    def _restore(self, helper_died: bool = False) -> bool:
        """Put the original fd 1 and 2 back; False if already done.

        When the helper died (the watchdog thread), Python's streams are not flushed:
        the main thread may hold their lock, blocked writing into a pipe nobody reads.
        Instead the pipes are drained into the original streams, which frees it.
        """
        with self._restore_lock:
            if self._stopped:
                return False
            self._stopped = True
            if not helper_died:
                for f in (sys.stdout, sys.stderr):
                    _flush(f)
            out, err = self._saved
            for saved, target in ((out, 1), (err, 2)):
                try:
                    os.dup2(saved, target)
                except OSError:
                    pass
            if helper_died:
                for r, saved in zip(self._reads, self._saved, strict=True):
                    _forward(r, saved)
            for f in (out, err, *self._reads):
                try:
                    os.close(f)
                except OSError:
                    pass
            return True

    def stop(self, wait: float = _EXIT_WAIT_S) -> None:
        """End the capture: streams back on fd 1 and 2, then wait at most ``wait``
        seconds for the helper to write the rest (children still holding the pipes
        keep it going after that). Idempotent."""
        self._halt.set()
        try:
            self._publish()
        except Exception:
            pass
        if not self._restore():
            return
        try:
            self._proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass

    def forget(self) -> None:
        """In a forked child: fd 1 and 2 back to the original streams, nothing else
        (no lock: another thread of the parent may have held it at the fork)."""
        self._stopped = True
        out, err = self._saved
        for saved, target in ((out, 1), (err, 2)):
            try:
                os.dup2(saved, target)
            except OSError:
                pass
        for f in (out, err, *self._reads):
            try:
                os.close(f)
            except OSError:
                pass


def _forward(src: int, dst: int, seconds: float = 0.2) -> None:
    """Copy what is in pipe ``src`` to ``dst`` until it stays empty (or ``seconds``)."""
    import select
    import time

    deadline = time.monotonic() + seconds
    try:
        os.set_blocking(src, False)
        while time.monotonic() < deadline:
            try:
                data = os.read(src, 1 << 16)
            except BlockingIOError:
                if not select.select([src], [], [], 0.02)[0]:
                    return
                continue
            if not data:
                return
            os.write(dst, data)
    except OSError:
        pass


def _flush(stream: TextIO | None) -> None:
    try:
        if stream is not None:
            stream.flush()
    except (OSError, ValueError):
        pass
