"""The event-log writer: buffers filled by the caller, drained by one background thread.

The caller's thread only appends: packed 24-byte point records to ``points`` (a
``bytearray`` that is never replaced, so ``+=`` from several threads is safe under the
GIL), and there too, in one ``+=`` each, the dict blocks of ``add_scalar({...})``
(``F.BLOCK_MARK``), which :func:`split_blocks` turns into records at the drain, tuples to ``texts`` / ``tag_defs`` / ``media``, and failure and alert dicts to
``events`` (each written as a STATS frame with an ``event`` key, after the points and
text of the same drain). The writer thread wakes every
``flush_interval`` seconds, takes what is there in chunks of at most 1 MiB (so it
never holds the GIL for long), frames it and appends it to the file with ``os.write``;
points go out as COLUMNS frames (``F.encode_columns``: 12-16 bytes a point) of at most
``F.FRAME_POINTS_MAX`` points (``F.point_frames``), and the session header and tag
definitions twice in a row (``F.doubled``): one damaged byte costs at most one frame of
points (see ``nblog/format/_format.py``).

Media is encoded by a second thread (``nblog-media``, started when the first media item
is seen), one item after another, each reference written as soon as its blob is in the
media pack. Points and text therefore reach the file every ``flush_interval`` however
long a media backlog takes to encode (PNG compression of a large image takes seconds).
Locks: ``_media_lock`` (one encoder at a time) is taken before ``_lock`` (the event
log), never after it.

Rank 0's writer also keeps the run summary (``summary=``; see ``man 5 nb-format``, RUN.JSON):
each drained batch of points is folded, per scalar tag, into its last value and step,
its min and max, without a loop per point where the batch has a regular shape (one tag,
or the same tags in the same order at every step): strided views of the records
(``memoryview.cast``) go through ``min``/``max`` in C. The summary reaches ``run.json``
with the progress update (``on_progress`` reads :meth:`Writer.summary`), never per point.
The same fold feeds the envelope sidecar (``nblog/format/_envelope.py``): per tag and
chunk one min/max segment, written beside the log (temp file + rename) at most every 30 s
and at session end, once the log holds 4 MiB; viewers draw a first plot from it. The other
ranks that log scalars (``scalars_all_ranks``) fold a summary of their own (``summary={}``,
read by no one) so that their logs have sidecars too: ``nb serve`` draws a band of many
long ranks from them.

Files are created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (``nblog/format/_filesafety.py``:
never through a symbolic link someone placed there) and opened for append; a failed write is cut back with
``ftruncate`` so a full disk never leaves a torn frame in the middle of a file.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

from .. import _log as log
from ..format import _envelope as E
from ..format import _format as F
from ..format._filenames import envelope_path_for
from ..format._filesafety import create_exclusive, write_atomic
from ._device import resolve as _resolve_device

_CHUNK = (1 << 20) // F.POINT_SIZE * F.POINT_SIZE  # bytes of records taken at a time: at most 1 MiB
_MAX_BACKLOG = 256 << 20  # bytes of points kept in memory while the disk lags
_MEDIA_CHUNK = 8  # media references per MEDIA frame, at most
_MEDIA_BATCH_S = 0.05  # a MEDIA frame gathers the references encoded within this many seconds


def split_blocks(raw: bytes, limit: int | None = None) -> tuple[bytes, int, int]:
    """The POINT records of ``raw`` (point records and dict blocks, see
    ``F.BLOCK_MARK``, starting at a record), each block split into its records.

    Args:
        raw: whole records and blocks.
        limit: stop at the first record or block boundary at or past this many bytes
            of ``raw`` (None: all of ``raw``).

    Returns:
        ``(records, bytes of raw used, points)``; a block cut by the end of ``raw``
        is left out (``used`` stops before it).
    """
    size = F.POINT_SIZE
    whole = len(raw) - len(raw) % size
    end = whole if limit is None else min(-(-limit // size) * size, whole)
    col = memoryview(raw)[:whole].cast("I")[4::6].tobytes()  # each slot's tag id, 4 bytes
    mark = F.BLOCK_MARK_BYTES
    if mark not in col:  # no block (a value's bytes may look like one: then look closer)
        return raw[:end], end, end // size
    out: list[bytes] = []
    pos = n_points = 0
    while pos < end:
        j = col.find(mark, pos // size * 4)
        while j > 0 and j % 4:  # not a slot's own (records' ids are < 2**20: never, in fact)
            j = col.find(mark, j + 1)
        i = len(raw) if j < 0 else j // 4 * size
        if i > pos:  # plain records up to the next block
            at = min(i, end)
            out.append(raw[pos:at])
            n_points += (at - pos) // size
            pos = at
            continue
        tids = F.block_tids(raw, pos)
        length, step_at, values_at = F.block_layout(len(tids))
        if pos + length > len(raw):
            break
        # the blocks of this dict that follow it with no record between them
        head = raw[pos : pos + step_at]
        stop = pos + length
        while stop < end and stop + length <= len(raw) and raw.startswith(head, stop):
            stop += length
        out.append(_records(raw, pos, stop, tids, length, step_at, values_at))
        n_points += (stop - pos) // length * len(tids)
        pos = stop
    return b"".join(out), pos, n_points


def _records(raw: bytes, start: int, stop: int, tids: tuple[int, ...], length: int,
             step_at: int, values_at: int) -> bytes:
    """The POINT records of the blocks of one dict in ``raw[start:stop]`` (``length``
    bytes each), through strided views: a few C calls per tag, none per point."""
    from array import array  # a shared library: loaded when the first dict is split
    n = len(tids)
    k = (stop - start) // length
    src = memoryview(raw)[start:stop]
    out = bytearray(k * n * F.POINT_SIZE)
    q, d, u = memoryview(out).cast("q"), memoryview(out).cast("d"), memoryview(out).cast("I")
    sq, sd, su = src.cast("q"), src.cast("d"), src.cast("I")
    words = length // 8
    steps = sq[step_at // 8 :: words]
    ms = su[step_at // 4 + 2 :: words * 2]
    for j, tid in enumerate(tids):
        q[3 * j :: 3 * n] = steps
        d[3 * j + 1 :: 3 * n] = sd[values_at // 8 + j :: words]
        u[6 * j + 4 :: 6 * n] = memoryview(array("I", (tid,)) * k)
        u[6 * j + 5 :: 6 * n] = ms
    return bytes(out)


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
        on_progress: called in the writer thread after a drain, at most every
            ``progress_interval`` seconds: rank 0 records the last step in ``run.json``,
            so ``nb ls`` never reads events. It returns False when it wrote nothing
            (the step did not move): it is then asked again at the next drain, so a
            step that moves is recorded within ``flush_interval`` of the interval's
            end, and the first one within ``flush_interval`` of the first drain.
        progress_interval: seconds (default 5).
        summary: track the run summary, starting from this one (``run.json``'s
            ``summary`` of the earlier sessions, JSON form; ``{}`` for a new run). None
            (the default): no summary is kept (ranks other than 0).
        media_sink: turns queued media items into ``(step, tag id, ms, offset, length,
            meta)`` references, in the media thread (encoding and the media pack).
            Without one, queued items are written as references as they are.

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
        on_progress: Callable[[], bool | None] | None = None,
        progress_interval: float = 5.0,
        media_sink: Callable[[list], list] | None = None,
        summary: dict | None = None,
    ):
        self.path = path
        # The caller may have filled these before the writer existed (lazy creation).
        self.points, self.texts, self.media, self.tag_defs = buffers or (bytearray(), [], [], [])
        self.dropped: Counter[str] = Counter()
        # failures and alerts (dicts), each written as a STATS frame with an "event" key
        self.events: list[dict] = []
        # device values (``_device.capture``) waiting for their event: (step, tag id, ms,
        # copy, event), appended by the caller; turned into points by _resolve_pending
        self.pending: list[tuple] = []
        self._system_tids: set[int] = set()
        # the run summary: scalar tag id -> name, per tag id [last, step, min, max],
        # the earlier sessions' entries, and a change counter
        self._summary_on = summary is not None
        self._scalar_names: dict[int, str] = {}
        self._fold: dict[int, list] = {}
        self._summary_start: dict = dict(summary or {})
        self.summary_changes = 0
        # the highest step of the points and texts this writer has written (None: none yet):
        # for run.json's last_step, which must never claim a step the event log lacks
        self.written_step: int | None = None
        # the envelope sidecar (``_envelope``), kept with the summary (rank 0), a cache
        envelope_path = envelope_path_for(path) if self._summary_on else None
        self._envelope = E.Builder() if envelope_path else None
        self._envelope_path = envelope_path or ""
        self._envelope_saved = (0, 0)  # (changes, log bytes) the sidecar on disk covers
        self._envelope_at = float("-inf")  # monotonic time of its last write
        self._header = header
        self._first_step_value: int | None = None
        self._on_first_step = on_first_step
        self._first_step_known = on_first_step is None
        self._flush_interval = flush_interval
        self._heartbeat = heartbeat_interval
        self._on_progress = on_progress
        self._media_sink = media_sink
        self._progress_interval = progress_interval
        self._last_progress = float("-inf")  # the first drain may already record progress
        self._lock = threading.Lock()  # the event log (fd, frames, counters in frames)
        self._media_lock = threading.Lock()  # one media encoder at a time; taken before _lock
        self._media_thread: threading.Thread | None = None
        self._media_popped = 0  # media items taken off the queue so far (flush's barrier)
        self._media_inflight = 0  # taken off the queue, reference not yet written
        self._media_rate = 0.0  # bytes of queued media encoded per second, measured
        self._defs_failed = False  # the last tag definitions could not be written
        self._wake = threading.Event()
        self._stop = False
        self._closed = False
        self._dead = False  # set in a forked child: never touch the file again
        self._warned: set[str] = set()
        self._t0_ns = int(header.get("monotonic_start_ns", time.monotonic_ns()))
        self._fd = create_exclusive(path)
        self._size = 0
        self._last_write = time.monotonic()
        self._write(F.file_header() + F.doubled(F.json_frame(F.FRAME_SESSION, header)))
        self._thread = threading.Thread(target=self._loop, name="nblog-writer", daemon=True)
        self._thread.start()

    # -- caller side ---------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Write everything appended before this call: points, text and tag definitions
        first, then the media queued (encoded here, in the calling thread).

        Device values logged before the call (``pending``) are waited for first, by
        polling their events in the calling thread.

        Args:
            timeout: seconds to wait at most (None: as long as it takes). Media not
                encoded by then stays queued for the media thread (nothing is dropped),
                and so do device values the device has not run yet.

        Returns:
            True when everything was written within ``timeout``.
        """
        if self._dead or self._closed:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        ready = not self.pending or self._wait_pending(deadline)  # device values logged before
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            return False
        try:
            self._drain()
            target = self._media_popped + len(self.media)  # the media logged before this call
        finally:
            self._lock.release()
        if target == self._media_popped and not self._media_inflight:
            return ready
        if not self._media_lock.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic())):
            return False
        try:
            while self._media_popped < target and self.media and not self._closed:
                if deadline is not None and not self._fits(deadline):
                    return False
                self._encode_media(deadline, target)
        finally:
            self._media_lock.release()
        return ready

    def close(self, end: dict, timeout: float = 5.0) -> None:
        """Drain, write the END frame with ``end`` (plus counters) and close the file.

        Everything is bounded by ``timeout`` seconds: points, text and a STATS frame
        are written first (within milliseconds, unless the writer thread holds the log
        that long); the media still queued is then encoded while time is left (an item
        is not started when the encoding speed measured so far says it would end past
        the deadline). Media left over is dropped and counted as ``media_timeout`` in
        the END frame. Device values (``pending``) are waited for first, at most half of
        ``timeout``; those the device has not run by then are dropped and counted as
        ``device_timeout`` (warned once). Idempotent.
        """
        if self._dead or self._closed:
            return
        deadline = time.monotonic() + timeout
        self._stop = True
        self._wake.set()
        if self.pending:  # device values: the device gets half the time to run them
            self._wait_pending(time.monotonic() + timeout / 2)
        if not self._lock.acquire(timeout=timeout):
            return
        try:
            if self._closed:
                return
            self._drain()
            self._drop_pending()
            if self.media or self._media_inflight:  # counters on disk before the long part
                self._write_stats({})
        finally:
            self._lock.release()
        media_locked = self._media_lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
        try:
            if media_locked:
                while self.media and self._fits(deadline):
                    self._encode_media(deadline)
            if not self._lock.acquire(timeout=max(0.2, deadline - time.monotonic())):
                return
            try:
                if self._closed:
                    return
                self._drain()
                left = len(self.media) + self._media_inflight  # not encoded in time
                if left:
                    del self.media[:]
                    self.dropped["media_timeout"] += left
                self._write(
                    F.json_frame(F.FRAME_END, {**end, "ms": self._ms(), "dropped": dict(self.dropped)})
                )
                self._save_envelope(time.monotonic(), final=True)
                self._closed = True
                try:
                    os.close(self._fd)
                except OSError:
                    pass
            finally:
                self._lock.release()
        finally:
            if media_locked:
                self._media_lock.release()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def forget(self) -> None:
        """In a forked child: drop everything and never write (the parent owns the file)."""
        self._dead = True
        self._closed = True
        self.points = bytearray()
        self.texts, self.media, self.tag_defs, self.events = [], [], [], []
        self.pending = []  # the parent's device values: never touched here
        try:
            os.close(self._fd)
        except OSError:
            pass

    def stats(self, **extra: object) -> None:
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
                    wrote: bool | None = self._drain()
                    now = time.monotonic()
                    if not wrote and now - self._last_write >= self._heartbeat:
                        self._write_stats({})
                    if self._on_progress is not None and now - self._last_progress >= self._progress_interval:
                        wrote = True  # also when it raises: a failing run.json waits an interval
                        try:
                            wrote = self._on_progress()
                        finally:
                            if wrote is not False:  # False: nothing new, ask at the next drain
                                self._last_progress = now
                    if self._envelope is not None:
                        self._save_envelope(now)
                except Exception as exc:  # never let the thread die silently
                    self._warn_once("writer", f"nblog: writer error on {self.path}: {exc!r}")
            if self.media and self._media_thread is None:
                self._media_thread = threading.Thread(target=self._media_loop, name="nblog-media", daemon=True)
                self._media_thread.start()

    def _media_loop(self) -> None:
        """Encode queued media one item after another; sleep a flush interval when none."""
        while not self._stop and not self._dead:
            if not self.media:
                time.sleep(self._flush_interval)
                continue
            if not self._media_lock.acquire(timeout=self._flush_interval):
                continue  # flush() is encoding
            try:
                if self._stop or self._dead or self._closed:
                    return
                self._encode_media(None)
            except Exception as exc:  # never let the thread die silently
                self._warn_once("media", f"nblog: media writer error on {self.path}: {exc!r}")
            finally:
                self._media_lock.release()

    def _fits(self, deadline: float) -> bool:
        """Whether the next queued item can be encoded before ``deadline`` (monotonic s),
        at the speed measured so far (unknown speed: whether time is left at all)."""
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        media = self.media
        if not media or self._media_rate <= 0:
            return True
        return getattr(media[0][3], "nbytes", 0) / self._media_rate <= left

    def _encode_media(self, deadline: float | None, target: int | None = None) -> None:
        """Encode queued items (at most ``_MEDIA_CHUNK``, for about ``_MEDIA_BATCH_S``,
        none past ``deadline``, none past item number ``target``), then write their
        references in one MEDIA frame. Caller holds ``_media_lock``, not ``_lock``."""
        media = self.media
        refs: list = []
        start = time.monotonic()
        try:
            for _ in range(_MEDIA_CHUNK):
                if not media or (target is not None and self._media_popped >= target):
                    break
                if self._stop and deadline is None and target is None:
                    break  # the media thread gives way to close()
                if refs and (time.monotonic() - start > _MEDIA_BATCH_S
                             or (deadline is not None and not self._fits(deadline))):
                    break
                self._media_inflight += 1
                item = media.pop(0)
                self._media_popped += 1
                t = time.monotonic()
                if self._media_sink is None:
                    refs.append(item)
                else:
                    refs += self._media_sink([item])  # none for bad or unwritable media
                    nbytes = getattr(item[3], "nbytes", 0)
                    elapsed = time.monotonic() - t
                    if nbytes > 0 and elapsed > 0:
                        rate = nbytes / elapsed
                        self._media_rate = rate if self._media_rate <= 0 else 0.7 * self._media_rate + 0.3 * rate
        finally:
            with self._lock:
                self._media_inflight = 0
                if refs and not self._closed:  # once closed, counted as media_timeout by close()
                    self._write_refs(refs)

    def _write_refs(self, refs: list) -> None:
        """One MEDIA frame of references, after any pending tag definitions. Caller holds ``_lock``."""
        self._drain()  # tag definitions before the references that use them
        if self._defs_failed:
            self.dropped["write_error"] += len(refs)
            return
        if not self._first_step_known:
            self._first_step(refs[0][0])
        if not self._write(F.frame(F.FRAME_MEDIA, F.encode_media(refs)), "media"):
            self.dropped["write_error"] += len(refs)

    def _drain(self) -> bool:
        """Write the tag definitions, points and text the buffers hold (media is the media
        thread's). Caller holds ``_lock``. Returns True if it wrote."""
        self._resolve_pending()
        wrote = False
        self._defs_failed = False
        n_text = len(self.texts)
        n_points = len(self.points)
        n_points -= n_points % F.POINT_SIZE
        backlog = n_points - _MAX_BACKLOG
        if backlog > 0:  # cut at a record or block boundary, count points (not slots)
            _records_left, backlog, lost = split_blocks(bytes(self.points[:n_points]), backlog)
            del self.points[:backlog]
            n_points -= backlog
            self.dropped["backlog"] += lost
            self._warn_once("backlog", "nblog: the disk cannot keep up; dropping the oldest points")
        n_defs = len(self.tag_defs)
        if n_defs:
            defs = self.tag_defs[:n_defs]
            del self.tag_defs[:n_defs]
            for tid, kind, name in defs:
                if kind == F.KIND_SYSTEM:
                    self._system_tids.add(tid)
                elif kind == F.KIND_SCALAR and self._summary_on:
                    self._scalar_names[tid] = name
            if not self._write(F.doubled(F.frame(F.FRAME_TAGS, F.encode_tag_defs(defs))), "tags"):
                # A record never goes before its tag's definition: keep the definitions
                # for the next drain, drop (and count) what this drain would have written.
                self.tag_defs[:0] = defs
                self._defs_failed = True
                dropped = split_blocks(bytes(self.points[:n_points]))[2] + n_text
                del self.points[:n_points], self.texts[:n_text]
                self.dropped["write_error"] += dropped
                return wrote
            wrote = True
        while n_points > 0:
            # at most 1 MiB at a time, dict blocks split into records (a block cut by
            # the chunk's end waits for the next chunk)
            chunk, take, count = split_blocks(bytes(self.points[: min(n_points, _CHUNK)]))
            if not take:
                break
            del self.points[:take]
            n_points -= take
            # COLUMNS frames (12-16 bytes a point instead of 24) of at most
            # F.FRAME_POINTS_MAX points: what one damaged byte can cost
            if not self._write(F.point_frames(chunk), "points"):
                self.dropped["write_error"] += count
            else:
                self._wrote_step(max(memoryview(chunk).cast("q")[::3]))  # record i's step: item 3i
                if self._scalar_names:  # the summary covers the points on disk
                    try:
                        self._fold_points(chunk)
                    except Exception as exc:  # a bug here must not stop the event log
                        self._warn_once("summary", f"nblog: run summary not updated: {exc!r}")
            if not self._first_step_known:  # after the fold: run.json's first write has the summary
                self._find_first_step_in_points(chunk)
            wrote = True
        if n_text:
            items = self.texts[:n_text]
            del self.texts[:n_text]
            if not self._first_step_known:
                self._first_step(items[0][0])
            if not self._write(F.frame(F.FRAME_TEXT, F.encode_texts(items)), "text"):
                self.dropped["write_error"] += len(items)
            else:
                self._wrote_step(max(item[0] for item in items))
            wrote = True
        n_events = len(self.events)
        if n_events:
            events = self.events[:n_events]
            del self.events[:n_events]
            for event in events:
                self._write_stats({"event": event})
            wrote = True
        return wrote

    # -- device values (``_device``) -----------------------------------------------

    def _resolve_pending(self) -> None:
        """Turn the device values whose events have completed into point records, in the
        order logged (the first one not ready stops there: the later ones keep their
        place), put before the points buffered since. Caller holds ``_lock``.

        A device value may so reach the file after CPU points logged after it: readers
        take no order within a tag for granted, and the session's first point, which
        sets its first step (the hiding rule), is never a pending one (``Run._to_float``).
        """
        pending = self.pending
        if not pending:
            return
        out = bytearray()
        pack = F.POINT.pack
        done = 0
        try:
            for step, tid, ms, copy, event in pending:
                try:
                    value = _resolve_device(copy, event)
                except Exception as exc:  # a device error, a complex tensor: skipped, counted
                    self.dropped["device_error"] += 1
                    self._warn_once("device_error", f"nblog: a device value could not be read; skipped: {exc!r}")
                else:
                    if value is None:
                        break
                    out += pack(step, value, tid, ms)
                done += 1
        finally:
            del pending[:done]
            if out:
                self.points[:0] = out

    def _wait_pending(self, deadline: float | None) -> bool:
        """Wait until the device values pending now are ready, polling their events
        (never blocking inside the device's API), at most until ``deadline`` (monotonic
        seconds; None: as long as it takes). Returns True if they all are."""
        nap = 5e-5
        for item in self.pending[:]:
            event = item[4]
            while True:
                try:
                    if event.query():
                        break
                except Exception:
                    break  # counted when it is resolved
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    time.sleep(min(nap, left))
                else:
                    time.sleep(nap)
                nap = min(2 * nap, 0.005)
        return True

    def _drop_pending(self) -> None:
        """At close: the device values still not ready are dropped, counted as
        ``device_timeout`` and warned once. Caller holds ``_lock``."""
        n = len(self.pending)
        if n:
            del self.pending[:n]
            self.dropped["device_timeout"] += n
            self._warn_once("device_timeout", f"nblog: {n} device value(s) not run by the device before "
                            "finish's time ran out; dropped (counted as device_timeout)")

    # -- run summary -----------------------------------------------------------------

    def summary(self) -> dict:
        """The run summary as ``run.json`` holds it: per scalar tag ``{"last", "step",
        "min", "max"}``, non-finite values as "nan"/"inf"/"-inf" (``F.json_number``),
        the earlier sessions' tags included. ``summary_changes`` counts the changes, so a
        caller can tell whether there is anything new. Called from the progress
        callback (the writer thread, holding ``_lock``) and after :meth:`close`."""
        out = dict(self._summary_start)
        num = F.json_number
        names = self._scalar_names
        for tid, (last, step, lo, hi) in list(self._fold.items()):
            out[names[tid]] = {"last": num(last), "step": step, "min": num(lo), "max": num(hi)}
        return out

    def _fold_points(self, chunk: bytes) -> None:
        """Fold a batch of point records into the summary, per scalar tag. Records are
        (step i64, value f64, tag u32, ms u32): as 8-byte items, record i is items
        3i..3i+2, its tag the 4-byte item 6i+4. Caller holds ``_lock``."""
        view = memoryview(chunk)
        steps, values = view.cast("q"), view.cast("d")
        tids = view.cast("I")[4::6].tolist()
        n = len(tids)
        first = tids[0]
        try:
            period = tids.index(first, 1)
        except ValueError:
            period = n
        names = self._scalar_names
        if period == n or (tids[period:] == tids[:-period] and len(set(tids[:period])) == period):
            # one tag, or the same tags in the same order at every step: strided views
            stride = 3 * period
            for k in range(period):
                if tids[k] in names:
                    self._fold_tag(tids[k], steps[3 * k::stride], values[3 * k + 1::stride])
            return
        groups: dict[int, list[int]] = {}
        for i, tid in enumerate(tids):
            if tid in names:
                groups.setdefault(tid, []).append(i)
        for tid, rows in groups.items():
            self._fold_tag(tid, [steps[3 * i] for i in rows], [values[3 * i + 1] for i in rows])

    def _fold_tag(self, tid: int, steps: Sequence[int], values: Sequence[float]) -> None:
        """Fold one tag's points (``steps``, ``values``: sequences in log order) into
        its entry: last = the value at the largest step (latest among equal ones; the
        session's first point replaces the earlier sessions' last, as the hiding rule
        does), min and max ignoring NaN (``min`` of Python skips a NaN anywhere but
        first, so a NaN first means a filtered pass), ±inf counted."""
        top = max(steps)
        j = len(steps) - 1
        if steps[j] != top:
            j -= list(steps)[::-1].index(top)
        lo: float | None = min(values)
        hi: float | None = max(values)
        if lo != lo:  # the first value is NaN
            finite = [v for v in values if v == v]
            lo, hi = (min(finite), max(finite)) if finite else (None, None)
        if self._envelope is not None:
            self._envelope.add(tid, steps, values, lo, hi)
        entry = self._fold.get(tid)
        if entry is None:
            entry = self._fold[tid] = self._start_entry(self._scalar_names[tid])
        old = entry[:]
        if top >= entry[1]:  # a new entry's step is -1: the session's first point replaces
            entry[0], entry[1] = values[j], top
        if lo is not None:
            entry[2] = lo if entry[2] is None or lo < entry[2] else entry[2]
            entry[3] = hi if entry[3] is None or hi > entry[3] else entry[3]
        if entry != old:
            self.summary_changes += 1

    def _start_entry(self, name: str) -> list:
        """A tag's fold state from the earlier sessions' summary: min and max carry on;
        last and step start over (step -1), since the session's first point replaces
        them (it hides what the earlier sessions logged from its step on)."""
        prev = self._summary_start.get(name)
        lo = hi = None
        if isinstance(prev, dict):
            lo, hi = F.number_from_json(prev.get("min")), F.number_from_json(prev.get("max"))
        return [None, -1, lo, hi]

    def _find_first_step_in_points(self, chunk: bytes) -> None:
        for step, _value, tid, _ms in F.POINT.iter_unpack(chunk):
            if tid not in self._system_tids:
                self._first_step(step)
                return

    def _save_envelope(self, now: float, final: bool = False) -> None:
        """Write the envelope sidecar when it changed and the log is big enough
        (``E.MIN_LOG_BYTES``): at most every ``E.WRITE_INTERVAL_S`` seconds, or now when
        ``final`` (session end, after the END frame). Caller holds ``_lock``; a failure
        warns once (the sidecar is a cache: readers read the log)."""
        env = self._envelope
        if env is None or self._size < E.MIN_LOG_BYTES or not env.segments:
            return
        if (env.changes, self._size if final else self._envelope_saved[1]) == self._envelope_saved:
            return
        if not final and now - self._envelope_at < E.WRITE_INTERVAL_S:
            return
        self._envelope_at = now
        try:
            data = env.encode(self._header, self._scalar_names, self._size, self._first_step_value)
            write_atomic(self._envelope_path, data)
            self._envelope_saved = (env.changes, self._size)
        except Exception as exc:  # a full disk, a read-only folder: the event log goes on
            self._warn_once("envelope", f"nblog: envelope sidecar not written: {exc!r}")

    def _wrote_step(self, step: int) -> None:
        """Raise :attr:`written_step` to ``step`` (written to the event log). Caller holds ``_lock``."""
        if self.written_step is None or step > self.written_step:
            self.written_step = step

    def _first_step(self, step: int) -> None:
        self._first_step_known = True
        self._first_step_value = step
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
