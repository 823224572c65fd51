"""The event-log writer: buffers filled by the caller, drained by one background thread.

The caller's thread only appends: packed 24-byte point records to ``points`` (a
``bytearray`` that is never replaced, so ``+=`` from several threads is safe under the
GIL), and tuples to ``texts`` / ``tag_defs``. The writer thread wakes every
``flush_interval`` seconds, takes what is there in chunks of at most 1 MiB (so it
never holds the GIL for long), frames it and appends it to the file with ``os.write``.

Files are created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (never through a symbolic link
someone placed there) and opened for append; a failed write is cut back with
``ftruncate`` so a full disk never leaves a torn frame in the middle of a file.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable

from . import _format as F
from . import _log as log

_CHUNK = (1 << 20) // F.POINT_SIZE * F.POINT_SIZE  # points per frame: at most 1 MiB
_MAX_BACKLOG = 256 << 20  # bytes of points kept in memory while the disk lags
_MEDIA_CHUNK = 8  # media items encoded per MEDIA frame


def create_exclusive(path: str, mode: int = 0o666) -> int:
    """Create ``path`` for appending, failing if it exists or is a symbolic link.

    The mode is filtered by the umask as usual. Returns a file descriptor.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, mode)


class Writer:
    """Appends one rank's events of one session to ``path``.

    Args:
        path: the event log to create (must not exist).
        header: the session header, written as the first frame (JSON-able dict).
        flush_interval: seconds between drains of the buffers by the writer thread.
        heartbeat_interval: seconds of silence after which a small stats frame is
            written, so readers can tell a quiet live run from a dead one.
        on_first_step: called once, in the writer thread, with the first step of a
            non-system point or text drained (rank 0 records it in ``run.json``).
        buffers: ``(points, texts, media, tag_defs)`` to drain, when the caller made
            them before the writer (default: new empty ones).
        on_progress: called in the writer thread every ``progress_interval`` seconds
            (rank 0 records the last step in ``run.json``, so ``nb ls`` never reads events).
        media_sink: turns queued media items into ``(step, tag id, ms, offset, length,
            meta)`` references, in the writer thread (encoding and the media pack).

    Raises:
        OSError: the file cannot be created (exists, symbolic link, permissions).
    """

    def __init__(
        self,
        path: str,
        header: dict,
        *,
        flush_interval: float = 1.0,
        heartbeat_interval: float = 60.0,
        on_first_step: Callable[[int], None] | None = None,
        buffers: tuple[bytearray, list, list, list] | None = None,
        on_progress: Callable[[], None] | None = None,
        progress_interval: float = 30.0,
        media_sink: Callable[[list], list] | None = None,
    ):
        self.path = path
        # The caller may have filled these before the writer existed (lazy creation).
        self.points, self.texts, self.media, self.tag_defs = buffers or (bytearray(), [], [], [])
        self.dropped: Counter[str] = Counter()
        self._system_tids: set[int] = set()
        self._on_first_step = on_first_step
        self._first_step_known = on_first_step is None
        self._flush_interval = flush_interval
        self._heartbeat = heartbeat_interval
        self._on_progress = on_progress
        self._media_sink = media_sink
        self._progress_interval = progress_interval
        self._last_progress = time.monotonic()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._closed = False
        self._dead = False  # set in a forked child: never touch the file again
        self._warned: set[str] = set()
        self._t0_ns = int(header.get("monotonic_start_ns", time.monotonic_ns()))
        self._fd = create_exclusive(path)
        self._size = 0
        self._last_write = time.monotonic()
        self._write(F.file_header() + F.json_frame(F.FRAME_SESSION, header))
        self._thread = threading.Thread(target=self._loop, name="nblog-writer", daemon=True)
        self._thread.start()

    # -- caller side ---------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Write everything appended before this call; True when done in ``timeout``."""
        if self._dead or self._closed:
            return True
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            return False
        try:
            self._drain()
        finally:
            self._lock.release()
        return True

    def close(self, end: dict, timeout: float = 5.0) -> None:
        """Drain, write the END frame with ``end`` (plus counters) and close the file.

        Idempotent. Waits at most ``timeout`` seconds for the writer thread's lock.
        """
        if self._dead or self._closed:
            return
        self._stop = True
        self._wake.set()
        if not self._lock.acquire(timeout=timeout):
            return
        try:
            if self._closed:
                return
            self._drain()
            self._write(
                F.json_frame(F.FRAME_END, {**end, "ms": self._ms(), "dropped": dict(self.dropped)})
            )
            self._closed = True
            try:
                os.close(self._fd)
            except OSError:
                pass
        finally:
            self._lock.release()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=timeout)

    def forget(self) -> None:
        """In a forked child: drop everything and never write (the parent owns the file)."""
        self._dead = True
        self._closed = True
        self.points = bytearray()
        self.texts, self.media, self.tag_defs = [], [], []
        try:
            os.close(self._fd)
        except OSError:
            pass

    def stats(self, **extra) -> None:
        """Queue a STATS frame now (counters plus ``extra``) and write it at the next drain."""
        with self._lock:
            if not self._closed:
                self._drain()
                self._write_stats(extra)

    # -- writer thread -------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop:
            self._wake.wait(self._flush_interval)
            self._wake.clear()
            if self._stop or self._dead:
                return
            with self._lock:
                if self._closed:
                    return
                try:
                    wrote = self._drain()
                    now = time.monotonic()
                    if not wrote and now - self._last_write >= self._heartbeat:
                        self._write_stats({})
                    if self._on_progress is not None and now - self._last_progress >= self._progress_interval:
                        self._last_progress = now
                        self._on_progress()
                except Exception as exc:  # never let the thread die silently
                    self._warn_once("writer", f"nblog: writer error on {self.path}: {exc!r}")

    def _drain(self) -> bool:
        """Write what the buffers hold. Caller holds ``_lock``. Returns True if it wrote."""
        wrote = False
        n_text = len(self.texts)
        n_media = len(self.media)
        n_points = len(self.points)
        n_points -= n_points % F.POINT_SIZE
        backlog = n_points - _MAX_BACKLOG
        if backlog > 0:
            backlog -= backlog % F.POINT_SIZE
            del self.points[:backlog]
            n_points -= backlog
            self.dropped["backlog"] += backlog // F.POINT_SIZE
            self._warn_once("backlog", "nblog: the disk cannot keep up; dropping the oldest points")
        n_defs = len(self.tag_defs)
        if n_defs:
            defs = self.tag_defs[:n_defs]
            del self.tag_defs[:n_defs]
            for tid, kind, _ in defs:
                if kind == F.KIND_SYSTEM:
                    self._system_tids.add(tid)
            if not self._write(F.frame(F.FRAME_TAGS, F.encode_tag_defs(defs)), "tags"):
                # A record never goes before its tag's definition: keep the definitions
                # for the next drain, drop (and count) what this drain would have written.
                self.tag_defs[:0] = defs
                dropped = n_points // F.POINT_SIZE + n_text + n_media
                del self.points[:n_points], self.texts[:n_text], self.media[:n_media]
                self.dropped["write_error"] += dropped
                return wrote
            wrote = True
        while n_points > 0:
            take = min(n_points, _CHUNK)
            chunk = bytes(self.points[:take])
            del self.points[:take]
            n_points -= take
            if not self._first_step_known:
                self._find_first_step_in_points(chunk)
            if not self._write(F.frame(F.FRAME_POINTS, chunk), "points"):
                self.dropped["write_error"] += take // F.POINT_SIZE
            wrote = True
        if n_text:
            items = self.texts[:n_text]
            del self.texts[:n_text]
            if not self._first_step_known:
                self._first_step(items[0][0])
            if not self._write(F.frame(F.FRAME_TEXT, F.encode_texts(items)), "text"):
                self.dropped["write_error"] += len(items)
            wrote = True
        while n_media > 0:  # a few at a time: each blob's reference follows it soon
            take = min(n_media, _MEDIA_CHUNK)
            items = self.media[:take]
            del self.media[:take]
            n_media -= take
            if self._media_sink is not None:  # encode and store blobs, here in this thread
                items = self._media_sink(items)  # may be fewer (bad or unwritable media)
            if items:
                if not self._first_step_known:
                    self._first_step(items[0][0])
                if not self._write(F.frame(F.FRAME_MEDIA, F.encode_media(items)), "media"):
                    self.dropped["write_error"] += len(items)
                wrote = True
        return wrote

    def _find_first_step_in_points(self, chunk: bytes) -> None:
        for step, _value, tid, _ms in F.POINT.iter_unpack(chunk):
            if tid not in self._system_tids:
                self._first_step(step)
                return

    def _first_step(self, step: int) -> None:
        self._first_step_known = True
        if self._on_first_step is not None:
            try:
                self._on_first_step(step)
            except Exception as exc:
                self._warn_once("first_step", f"nblog: could not record the first step: {exc!r}")

    def _write_stats(self, extra: dict) -> None:
        self._write(
            F.json_frame(
                F.FRAME_STATS,
                {"wall": time.time(), "ms": self._ms(), "dropped": dict(self.dropped), **extra},
            ),
            "stats",
        )

    def _ms(self) -> int:
        """Milliseconds since the session's monotonic start (as in point records)."""
        return (time.monotonic_ns() - self._t0_ns) // 1_000_000

    def _write(self, data: bytes, what: str = "header") -> bool:
        """Append ``data`` whole or not at all. Returns False (and warns once) on error."""
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            self._size += len(data)
            self._last_write = time.monotonic()
            return True
        except OSError as exc:
            try:  # cut a partial frame so the file stays a clean prefix
                os.ftruncate(self._fd, self._size)
            except OSError:
                pass
            self._warn_once(
                "oserror",
                f"nblog: cannot write {what} to {self.path}: {exc.strerror or exc}; "
                "training goes on, dropped points are counted",
            )
            return False

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)
