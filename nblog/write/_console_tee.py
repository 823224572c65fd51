"""The console helper process: echo a rank's stdout and stderr, and stamp them into a file.

Started by :mod:`nblog.write._console` as ``python -I -S <this file> OUT ERR FILE STEP INTERVAL``
(standard library only, nothing of nblog imported), with the read ends of two pipes
(the training process's fd 1 and fd 2 now point at their write ends), the console file
opened for appending, and a shared 16-byte memory file through which the training
process publishes its current step. Its own fd 1 and 2 are the training process's
original stdout and stderr.

Why a process and not a thread: what the training process wrote just before it died
(a CUDA or NCCL error, ``faulthandler``'s traceback of a segfault, the last lines
before ``kill -9``) is still in the pipe when it dies; the helper reads to the end of
the pipe, so the terminal and the file get it all. The helper works while the training
process holds the GIL, and it is the one that waits on a slow disk.

Two threads:

- the main thread polls both pipes, writes each chunk at once to the original stream
  (the terminal gets every byte, whatever the file does), splits it into lines and
  stamps them (``<unix time, ms>\\t<step or ->\\t<o|e>\\t<text>\\n``, see nb-format(5));
- the file thread appends the stamped lines every ``INTERVAL`` seconds, whole lines in
  one ``os.write`` each time. If the file falls more than :data:`_BACKLOG` bytes behind
  (a slow or hung disk), new lines are dropped from the file, counted, and the count is
  written as a note line (stream ``!``) once the file catches up. A failed write is cut
  back to the last whole line (``ftruncate``) and counted the same way.

SIGINT, SIGTERM and SIGHUP are ignored: the helper shares the training process's
process group (Ctrl-C, ``torchrun`` stopping a worker's group, Slurm), and ends when
every writer of both pipes has closed them (the training process and the children it
started exited), after writing the rest.
"""

from __future__ import annotations

import collections
import mmap
import os
import select
import signal
import struct
import sys
import threading
import time

_CHUNK = 1 << 18  # bytes read from a pipe at a time
_MAX_LINE = 1 << 16  # a longer line is cut into pieces of this size, each stamped
_PARTIAL_S = 1.0  # a line without its newline for this long is stamped as it is
_BACKLOG = 16 << 20  # bytes of stamped lines the file may lag behind before lines are dropped
_EARLY = 1 << 20  # bytes queued that wake the file thread before its interval is up
_STEP = struct.Struct("<qq")  # the step twice: a torn read of the shared memory shows


class FileSink:
    """Appends stamped lines to the console file from a thread of its own."""

    def __init__(self, fd: int, interval: float, backlog: int = _BACKLOG):
        self.fd = fd
        self.interval = interval
        self.backlog = backlog
        self.queue: collections.deque = collections.deque()
        self.queued = 0  # bytes put (main thread only)
        self.done = 0  # bytes taken off the queue (file thread only)
        self.dropped_lines = 0  # main thread only
        self.dropped_bytes = 0
        self.lost_lines = 0  # lost to failed writes (file thread only)
        self.lost_bytes = 0
        self.noted = (0, 0)  # drops already written as a note (file thread only)
        self.offset = os.lseek(fd, 0, os.SEEK_END)
        self.error: str | None = None
        self.closing = threading.Event()
        self.wake = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="nblog-console-file", daemon=True)
        self.thread.start()

    def put(self, data: bytes, lines: int) -> None:
        """Queue whole stamped lines; drop and count them if the file lags too far."""
        behind = self.queued - self.done
        if behind > self.backlog:
            self.dropped_lines += lines
            self.dropped_bytes += len(data)
            return
        self.queue.append((data, lines))
        self.queued += len(data)
        if behind > _EARLY:
            self.wake.set()

    def close(self) -> None:
        """Write what is queued and stop the file thread."""
        self.closing.set()
        self.wake.set()
        self.thread.join()

    def _loop(self) -> None:
        while True:
            self.wake.wait(self.interval)
            self.wake.clear()
            closing = self.closing.is_set()
            self._drain()
            if closing:
                return

    def _drain(self) -> None:
        q = self.queue
        items = []
        while q:
            items.append(q.popleft())
        data = b"".join(d for d, _ in items)
        if not self._write(data):
            self.lost_lines += sum(n for _, n in items)
            self.lost_bytes += len(data)
        self.done += len(data)
        drops = (self.dropped_lines + self.lost_lines, self.dropped_bytes + self.lost_bytes)
        if drops != self.noted:
            n, b = drops[0] - self.noted[0], drops[1] - self.noted[1]
            reason = self.error or "the file fell behind the output"
            text = f"nb: {n} lines ({b} bytes) of console output are missing here: {reason}"
            if self._write(b"%.3f\t-\t!\t%s\n" % (time.time(), text.encode("utf-8", "replace"))):
                self.noted = drops
                self.error = None

    def _write(self, data: bytes) -> bool:
        """Append whole lines; a failed or short write is cut back to the last whole
        line. False when the lines did not reach the file."""
        if not data:
            return True
        view = memoryview(data)
        start = self.offset
        try:
            while view:
                n = os.write(self.fd, view)
                if n <= 0:
                    raise OSError(0, "short write")
                view = view[n:]
        except OSError as err:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass
            self.error = f"cannot write the console file: {err.strerror or err}"
            return False
        self.offset = start + len(data)
        return True


class Tee:
    """Echo two pipes to the original streams and stamp their lines into ``sink``."""

    def __init__(self, out_fd: int, err_fd: int, sink: FileSink, step_fd: int | None):
        self.sink = sink
        self.streams = {out_fd: (b"o", 1), err_fd: (b"e", 2)}
        self.partial: dict[int, bytes] = {out_fd: b"", err_fd: b""}
        self.since: dict[int, float] = {}
        self.echo_ok = {1: True, 2: True}
        self.step_mem = None
        if step_fd is not None:
            try:
                self.step_mem = mmap.mmap(step_fd, _STEP.size, prot=mmap.PROT_READ)
            except (OSError, ValueError):
                self.step_mem = None
        self.last_step = b"-"

    def step(self) -> bytes:
        mem = self.step_mem
        if mem is None:
            return b"-"
        for _ in range(3):
            a, b = _STEP.unpack_from(mem, 0)
            if a == b:
                return b"-" if a < 0 else b"%d" % a
        return self.last_step

    def run(self) -> None:
        poller = select.poll()
        for fd in self.streams:
            os.set_blocking(fd, False)
            poller.register(fd, select.POLLIN)
        live = set(self.streams)
        while live:
            timeout = _PARTIAL_S * 1000 if self.since else None
            try:
                events = poller.poll(timeout)
            except InterruptedError:  # pragma: no cover - retried by Python
                continue
            for fd, _ev in events:
                try:
                    data = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    self.chunk(fd, data)
                else:  # every writer closed this pipe
                    poller.unregister(fd)
                    live.discard(fd)
                    self.end_partial(fd)
            if self.since:
                now = time.monotonic()
                for fd, t in list(self.since.items()):
                    if now - t >= _PARTIAL_S:
                        self.end_partial(fd)

    def chunk(self, fd: int, data: bytes) -> None:
        letter, target = self.streams[fd]
        self.echo(target, data)
        pieces = (self.partial[fd] + data).split(b"\n")
        rest = pieces.pop()
        if len(rest) > _MAX_LINE:
            pieces += [rest[i:i + _MAX_LINE] for i in range(0, len(rest), _MAX_LINE)]
            rest = b""
        if pieces and max(map(len, pieces)) > _MAX_LINE:
            pieces = [p[i:i + _MAX_LINE] for p in pieces for i in range(0, max(len(p), 1), _MAX_LINE)]
        self.partial[fd] = rest
        if rest:
            self.since.setdefault(fd, time.monotonic())
        else:
            self.since.pop(fd, None)
        if pieces:
            self.stamp(letter, pieces)

    def end_partial(self, fd: int) -> None:
        rest = self.partial[fd]
        self.partial[fd] = b""
        self.since.pop(fd, None)
        if rest:
            self.stamp(self.streams[fd][0], [rest])

    def stamp(self, letter: bytes, lines: list[bytes]) -> None:
        self.last_step = step = self.step()
        prefix = b"%.3f\t%s\t%s\t" % (time.time(), step, letter)
        self.sink.put(prefix + (b"\n" + prefix).join(lines) + b"\n", len(lines))

    def echo(self, target: int, data: bytes) -> None:
        if not self.echo_ok[target]:
            return
        view = memoryview(data)
        while view:
            try:
                n = os.write(target, view)
            except BlockingIOError:  # the original stream is non-blocking: wait for room
                select.select([], [target], [], 1.0)
                continue
            except OSError:  # the terminal went away: the file still gets the lines
                self.echo_ok[target] = False
                return
            view = view[n:]


def main(argv: list[str]) -> int:
    """``OUT ERR FILE STEP INTERVAL``: pipe read ends, the console file, the step memory
    file (``-1``: none) and the file thread's interval in seconds."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    out_fd, err_fd, file_fd, step_fd = (int(a) for a in argv[:4])
    interval = float(argv[4])
    sink = FileSink(file_fd, interval)
    tee = Tee(out_fd, err_fd, sink, None if step_fd < 0 else step_fd)
    try:
        tee.run()
    finally:
        sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
