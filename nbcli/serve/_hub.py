"""The runs ``nb serve`` serves, and each one's points kept up to date in memory.

One concern: from run ids in requests to what the reader library knows of them.

:class:`Catalog` holds the runs in scope (every run under the root, or the runs and
projects named on the command line) as the rows of ``nb ls --json``; a request names a
run by its id, which is looked up there, never joined to a path: ``..``, an absolute
path or a link out of the root names no run. :class:`ServedRun` keeps one run's
:class:`nblog.reader.LiveRun`, refreshed at most every :data:`REFRESH_S` seconds however
many requests and streams ask, so the bytes a job appends are read once, and only those
(never the whole run again); a run with :data:`BIG_RUN_BYTES` of event logs or more is
drawn from the writer's envelope sidecars instead, so memory is bounded by what is shown,
not by the run's length. Requests run in worker threads; each run has its own lock.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from nblog.reader import Envelope, LiveRun

#: The most often a run's files are looked at for new bytes (seconds).
REFRESH_S = 0.5
#: How long a listing of the runs is reused (seconds): a new run shows within this.
LISTING_S = 2.0
#: A run of more ranks than this has its scalars read from rank 0 and from the ranks whose
#: logs have an envelope sidecar (every rank that logs scalars, once its log holds 4 MiB):
#: listing the tags of 8,192 small logs alone takes a minute, and following them all twice a
#: second a core. Timers, system metrics and the heat map still cover every rank.
MAX_SCALAR_RANKS = 256
#: A run whose event logs hold at least this many bytes (about 5M points), all ranks
#: together, is drawn from the writer's envelope sidecars (:func:`nblog.reader.read_envelopes`)
#: where its ranks have them, instead of their points: memory and first paint then do not
#: grow with the run's length or its ranks.
BIG_RUN_BYTES = 64 << 20


class NoSuchRun(LookupError):
    """A request named a run that is not served (unknown, out of scope, or vanished)."""


@dataclass(frozen=True)
class Scope:
    """What is served: ``projects`` (names of folders under the root) and ``runs`` (run
    folders); both empty: every run under the root."""

    root: str
    projects: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        return not self.projects and not self.runs


def resolve_scope(root: str, names: Sequence[str]) -> Scope:
    """The scope of ``nb serve NAME...``: each name is a project (a folder under ``root``
    holding runs) or a run (as every command resolves one: id, prefix, PROJECT/ID, folder).

    Raises:
        nblog.reader.lowlevel.RunNotFoundError: a name is neither.
        nblog.reader.lowlevel.AmbiguousRunError: a prefix matches several runs.
    """
    from nblog import RunNotFoundError
    from nblog.format import RUN_JSON
    from nblog.reader import resolve_run

    projects: list[str] = []
    runs: list[str] = []
    for name in names:
        folder = os.path.join(root, name)
        if "/" not in name and name not in ("", ".", "..") and os.path.isdir(folder) \
                and not os.path.isfile(os.path.join(folder, RUN_JSON)):
            if not os.path.realpath(folder).startswith(os.path.realpath(root) + os.sep):
                raise RunNotFoundError(name, root)  # a project folder linked from outside the root
            projects.append(name)
        else:
            runs.append(resolve_run(name, root))
    return Scope(os.path.abspath(root), tuple(dict.fromkeys(projects)), tuple(dict.fromkeys(runs)))


class Catalog:
    """The runs in a :class:`Scope`, listed again at most every :data:`LISTING_S` seconds.

    Args:
        scope: what is served.
        clock: monotonic seconds (injected by tests).
    """

    def __init__(self, scope: Scope, clock: Callable[[], float] = time.monotonic):
        self.scope = scope
        self._clock = clock
        self._lock = threading.Lock()
        self._pairs: list[tuple[dict, dict]] = []
        self._listed = -1e18
        self._took = 0.0  # seconds the last listing took
        self._served: dict[str, ServedRun] = {}

    def pairs(self, fresh: bool = False) -> list[tuple[dict, dict]]:
        """``(nb ls --json row, run.json's config and summary)`` of every served run, newest
        first (:func:`nblog.reader.lowlevel.list_runs_meta`), listed again when the last
        listing is older than :data:`LISTING_S` or four times what it took (20,000 runs:
        about half a second a listing, so at most an eighth of a core)."""
        with self._lock:
            if fresh or self._clock() - self._listed >= max(LISTING_S, 4 * self._took):
                t0 = self._clock()
                self._pairs = self._list()
                self._listed = self._clock()
                self._took = self._listed - t0
            return self._pairs

    def warm(self) -> None:
        """List the runs now (in a thread of its own at start: the first page finds them
        listed); a root that cannot be listed is the first request's answer, not this one's."""
        try:
            self.pairs()
        except OSError:
            pass

    def _list(self) -> list[tuple[dict, dict]]:
        from nblog.reader.lowlevel import list_runs_meta

        s = self.scope
        if s.everything:
            return self._inside(list_runs_meta(s.root)) if os.path.isdir(s.root) else []
        out: list[tuple[dict, dict]] = []
        for project in s.projects:
            out += self._inside(list_runs_meta(s.root, project))
        seen = {r["path"] for r, _m in out}
        for run_dir in s.runs:  # a run's listing is its project's (a run folder is ROOT/PROJECT/RUN)
            if run_dir in seen:
                continue
            project_dir = os.path.dirname(run_dir)
            out += [p for p in list_runs_meta(os.path.dirname(project_dir), os.path.basename(project_dir))
                    if p[0]["path"] == run_dir]
        out.sort(key=lambda p: (p[0]["started"] or 0.0, p[0]["id"]), reverse=True)
        return out

    def _inside(self, pairs: list[tuple[dict, dict]]) -> list[tuple[dict, dict]]:
        """The runs whose folder really lies under the root: a project or run folder that
        is a link to elsewhere is not served (a run named on the command line is)."""
        real = os.path.realpath(self.scope.root) + os.sep
        return [p for p in pairs if os.path.realpath(p[0]["path"]).startswith(real)]

    def folder(self, run_id: str) -> str:
        """The folder of the served run ``run_id`` (an id exactly as ``/api/runs`` gives it).

        Raises:
            NoSuchRun: no served run has that id.
        """
        for fresh in (False, True):  # a run started since the last listing: list again once
            for row, _meta in self.pairs(fresh):
                if row["id"] == run_id:
                    return row["path"]
        raise NoSuchRun(run_id)

    def run(self, run_id: str) -> ServedRun:
        """The :class:`ServedRun` of ``run_id`` (made on first use).

        Raises:
            NoSuchRun: no served run has that id.
        """
        path = self.folder(run_id)
        with self._lock:
            got = self._served.get(run_id)
            if got is None or got.dir != path:
                got = self._served[run_id] = ServedRun(run_id, path, self._clock)
            return got


class ServedRun:
    """One run's points in memory (a :class:`nblog.reader.LiveRun`), refreshed on demand
    at most every :data:`REFRESH_S` seconds.

    Args:
        run_id: the run's id.
        run_dir: its folder.
        clock: monotonic seconds.
    """

    def __init__(self, run_id: str, run_dir: str, clock: Callable[[], float] = time.monotonic):
        self.id, self.dir = run_id, run_dir
        self._clock = clock
        self._lock = threading.Lock()
        self._live: LiveRun | None = None
        self._checked = -1e18
        self.version = 0  # grows whenever a refresh found something new
        self._feed: Feed | None = None
        self._env_lock = threading.Lock()
        self._envs: dict[int, tuple[float, dict[str, Envelope] | None]] = {}
        self._sized: tuple[float, dict[int, int]] = (-1e18, {})

    def live(self) -> LiveRun:
        """The run's :class:`nblog.reader.LiveRun`, no older than :data:`REFRESH_S`."""
        from nblog.reader import LiveRun

        with self._lock:
            if self._live is None:
                self._live = LiveRun(self.dir)
                self._checked = self._clock()
                self.version += 1
            elif self._clock() - self._checked >= REFRESH_S:
                self._checked = self._clock()
                if self._live.refresh():
                    self.version += 1
            return self._live

    def feed(self) -> Feed:
        """The run's :class:`Feed` of new points (made on first use), of its
        :meth:`scalar_ranks` when it has more than :data:`MAX_SCALAR_RANKS`."""
        many = len(self.ranks()) > MAX_SCALAR_RANKS  # outside the lock: live() takes it
        with self._lock:
            if self._feed is None:
                self._feed = Feed(self.dir, self._clock, on_new=self._expire,
                                  ranks=self.scalar_ranks if many else None)
            return self._feed

    def _expire(self) -> None:
        """The feed read new points: the next :meth:`live` reads the files again, however
        recent its last look (a chart asked for after the event must hold its points)."""
        with self._lock:
            self._checked = -1e18

    def ranks(self) -> list[int]:
        """The ranks with an event log."""
        return self.live().ranks()

    def scalar_ranks(self) -> list[int]:
        """The ranks whose scalars are read: every rank, or for more than
        :data:`MAX_SCALAR_RANKS`, rank 0 and the ranks with an envelope sidecar."""
        from nblog.reader.lowlevel import envelope_file_name, event_files

        ranks = self.ranks()
        if len(ranks) <= MAX_SCALAR_RANKS:
            return ranks
        keep = {r for (r, s) in event_files(self.dir)
                if r == 0 or os.path.exists(os.path.join(self.dir, envelope_file_name(r, s)))}
        return sorted(keep)

    def log_bytes(self) -> dict[int, int]:
        """Bytes of each rank's event logs, all sessions, no older than :data:`REFRESH_S`."""
        from nblog.reader.lowlevel import event_files

        with self._env_lock:
            if self._clock() - self._sized[0] < REFRESH_S:
                return self._sized[1]
            sizes: dict[int, int] = {}
            for (r, _s), path in event_files(self.dir).items():
                try:
                    sizes[r] = sizes.get(r, 0) + os.stat(path).st_size
                except OSError:
                    pass
            self._sized = (self._clock(), sizes)
            return sizes

    def envelopes(self, rank: int) -> dict[str, Envelope] | None:
        """The envelopes of ``rank`` of a big run (:data:`BIG_RUN_BYTES` of event logs or
        more) whose sidecars cover all but a quarter of its logs, no older than
        :data:`REFRESH_S`; None for a rank drawn from its points."""
        from nblog.reader import read_envelopes

        sizes = self.log_bytes()
        with self._env_lock:
            got = self._envs.get(rank)
            if got is not None and self._clock() - got[0] < REFRESH_S:
                return got[1]
            size = sizes.get(rank, 0)
            big = sum(sizes.values()) >= BIG_RUN_BYTES
            envs = read_envelopes(self.dir, None, rank, max_log_bytes=size // 4) if big and size else None
            self._envs[rank] = (self._clock(), envs)
            return envs

    def scalar_tags(self) -> list[str]:
        """Every scalar tag with a point on any rank, sorted."""
        tags: set[str] = set()
        for r in self.scalar_ranks():
            envs = self.envelopes(r)
            tags.update(envs if envs is not None else self.live().tags(r, "scalar"))
        return sorted(tags)

    def last_step(self, rank: int) -> int | None:
        """``rank``'s last step (:meth:`nblog.reader.LiveRun.last_step`; a big rank's: its
        envelopes' highest step)."""
        envs = self.envelopes(rank)
        if envs is not None:
            return max((int(e.last_step.max()) for e in envs.values() if len(e)), default=None)
        live = self.live()
        live.series(rank, [], "scalar")  # the rank loaded
        return live.last_step(rank)

    def points(self, tag: str, rank: int, kind: str = "scalar", axis: str = "step") -> tuple[np.ndarray, np.ndarray]:
        """(x, values float64) of ``tag`` on ``rank``, hidden points left out, in file order
        (copies: safe to keep while the run grows); x by ``axis``: steps (int64), "wall"
        (unix seconds) or "active" (seconds of the rank's sessions, float64)."""
        s = self.live().series(rank, [tag], kind)[tag]
        return (s.step if axis == "step" else getattr(s, axis)).copy(), s.value.copy()

    def frame(self, tag: str, ranks: Sequence[int] | None = None, start: float | None = None,
              end: float | None = None, axis: str = "step") -> tuple[Any, bool]:
        """``(frame, summarised)``: a Polars frame with columns rank, x (by ``axis``: step,
        "wall" or "active" seconds), value of ``tag`` on ``ranks`` (None: every rank), the
        x in [start, end] only when given (the frame :mod:`nbcli.series` buckets). A big
        rank (:meth:`envelopes`) gives two rows a segment of its envelope, (first step,
        min) and (last step, max), and ``summarised`` is True: a display summary, not its
        points (steps only: an envelope has no times, and its rows are left out of a
        chart against time)."""
        import numpy as np
        import polars as pl

        parts = []
        summarised = False
        for r in self.scalar_ranks() if ranks is None else ranks:
            envs = self.envelopes(r)
            if envs is not None:
                summarised = True
                e = envs.get(tag)
                if e is None or axis != "step":
                    continue
                step = np.concatenate([e.first_step, e.last_step])
                value = np.concatenate([e.lo, e.hi])
            else:
                step, value = self.points(tag, r, axis=axis)
            keep = np.ones(len(step), bool)
            if start is not None:
                keep &= step >= start
            if end is not None:
                keep &= step <= end
            if keep.any():
                parts.append(pl.DataFrame({"rank": np.full(int(keep.sum()), r, np.int32), "x": step[keep],
                                           "value": value[keep]}))
        if not parts:
            x_type = pl.Int64 if axis == "step" else pl.Float64
            return pl.DataFrame(schema={"rank": pl.Int32, "x": x_type, "value": pl.Float64}), summarised
        return pl.concat(parts), summarised


class Feed:
    """The points a run's ranks append, as batches for live pages (``/stream``).

    The first :meth:`since` reads to the end of every rank's logs (what is there already
    is the charts', not the feed's); each later one, at most every :data:`REFRESH_S`
    seconds whoever asks, reads only the bytes appended since (one
    :class:`nblog.reader.Follower` per rank over one shared listing, as ``nb watch``
    does), and keeps the last :data:`KEEP_BATCHES` batches for streams that lag.
    ``on_new`` is called when a poll found new points, before any stream is given them.
    """

    KEEP_BATCHES = 64

    def __init__(self, run_dir: str, clock: Callable[[], float] = time.monotonic,
                 on_new: Callable[[], None] | None = None, ranks: Callable[[], list[int]] | None = None):
        from collections import deque

        self.dir = run_dir
        self._ranks = ranks  # the ranks followed (None: every rank)
        self._clock = clock
        self._on_new = on_new
        self._lock = threading.Lock()
        self._files: Any = None
        self._followers: dict[int, Any] = {}
        self._batches: deque[tuple[int, list[dict]]] = deque(maxlen=self.KEEP_BATCHES)
        self._seq = 0
        self._polled = -1e18

    def since(self, seq: int | None) -> tuple[int, list[dict]]:
        """``(latest sequence number, events)``: the events of the batches after ``seq``
        (None: none; a new stream starts at the latest). Each event is one tag of one
        rank: ``{"tag", "rank", "step": [...], "value": [...]}``, in file order."""
        with self._lock:
            if self._clock() - self._polled >= REFRESH_S:
                self._polled = self._clock()
                first = self._files is None
                got = self._poll(first)
                if got and not first:
                    self._seq += 1
                    self._batches.append((self._seq, got))
                    if self._on_new is not None:
                        self._on_new()
            if seq is None:
                return self._seq, []
            out = [e for n, batch in self._batches if n > seq for e in batch]
            return self._seq, out

    def _poll(self, first: bool) -> list[dict]:
        from nblog.reader import Follower
        from nblog.reader.lowlevel import WINDOW, RankFiles

        if self._files is None:
            self._files = RankFiles(self.dir, keep=False, window=WINDOW)
        self._files.scan()
        for rank in self._files.ranks() if self._ranks is None else self._ranks():
            if rank not in self._followers:
                self._followers[rank] = Follower(self.dir, rank=rank, kinds=("scalar",), files=self._files)
        grouped: dict[tuple[int, str], dict] = {}
        for rank, follower in sorted(self._followers.items()):
            if first:  # to the end of what is there, decoding none of it (a 100M-point log: a walk of its frames)
                follower.poll(last=0)
                continue
            for ev in follower.stream(last=1 << 62):  # one by one: memory bounded by a read window
                e = grouped.get((rank, ev.tag))
                if e is None:
                    e = grouped[(rank, ev.tag)] = {"tag": ev.tag, "rank": rank, "step": [], "value": []}
                e["step"].append(ev.step)
                e["value"].append(ev.value)
        return list(grouped.values())


__all__ = ["BIG_RUN_BYTES", "LISTING_S", "MAX_SCALAR_RANKS", "REFRESH_S", "Catalog", "Feed", "NoSuchRun", "Scope", "ServedRun", "resolve_scope"]
