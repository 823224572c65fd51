"""Alerts computed from outside the job, from the files a run writes: the engine of ``nb watch``.

The rules are small objects fed the new events of each poll (:class:`~nblog.reader._views.tail.Event`
from one :class:`~nblog.reader._views.tail.Follower` per rank, plus the failure and alert events of
each session's log); each returns alerts as JSON-able dicts with stable keys (see
:func:`make_alert`):

=============  =============================================================================
nonfinite      the first NaN or infinity of a scalar tag on a rank
spike          a point whose robust z-score (against the median and MAD of the tag's last
               ``spike_window`` points) is at least ``spike_z``, after ``spike_warmup`` points
stall          a rank with no new step for ``stall_k`` × its median step time (at least
               ``stall_floor_s``) while its session is open, named against the others' step;
               a rank that logs no steps, by its last frame of any kind (heartbeats)
straggler      a straggler by the one rule of ``nb timers`` (:func:`nblog.reader.straggler_frames`)
               over each rank's last ``straggler_steps`` steps: its lower median per step
               (the first ``straggler_warmup`` steps of each session left out, and the
               steps from where a rank failed or died) at least ``straggler_ratio`` ×
               the median of the ranks' and ``straggler_floor_s`` above it
gpu_idle       ``system/gpu{i}/utilization_percent`` below ``gpu_idle_percent`` for
               ``gpu_samples`` samples in a row while the run is running
gpu_throttled  a ``system/gpu{i}/throttle_*`` flag set for ``gpu_samples`` samples in a row
failure        an uncaught exception recorded by any rank
unended        a rank's session that ended without an END record (``kill -9``, the OOM
               killer, a lost node) while the run is over or other ranks closed theirs:
               its process is gone (checked on this machine; elsewhere: no frame for
               :data:`~nblog.reader._runfiles.progress.STALE_AFTER_S` seconds)
alert          an alert the training code raised with ``run.alert``
hang           ranks' hang dumps say the run is stalled (``nb hang``; ``nblog.reader._runfiles.hang``):
               once per stall, naming the suspects
=============  =============================================================================

:class:`Watcher` dedupes: each alert is reported once per (rule, tag, rank[, session]).
Wall-clock times are unix seconds; the clock is injected (``clock=``), as is ``sleep``.
Imports numpy (``import nblog`` does not import this module); the straggler rule reads
the timers with :class:`~nblog.RunReader` (polars), only when new timer points came.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from ...format._runfile import read_run_json
from .._file.words import plural
from .._runfiles.failures import unended_line
from .._runfiles.hang import HangRule
from .._runfiles.progress import run_status
from .._runfiles.rankfiles import follow, ranks_with_logs
from .stragglers import STRAGGLER_FLOOR_S, STRAGGLER_SPREAD, STRAGGLER_WARMUP_STEPS, StragglerRule
from .tail import KINDS, Event, Follower, json_number

TYPE_CHECKING = False  # RankFiles is imported where the folder is first listed, typing never
if TYPE_CHECKING:
    from .._runfiles.rankfiles import RankFiles

#: The keys every alert has, in this order (rule-specific values follow).
ALERT_KEYS = ("rule", "level", "run", "rank", "host", "tag", "step", "wall_time", "message")

_ALL = 1 << 62  # Follower.stream(last=_ALL): every event, built one at a time
_GPU_UTIL = re.compile(r"system/gpu(\d+)/utilization_percent\Z")
_GPU_THROTTLE = re.compile(r"system/gpu(\d+)/throttle_(thermal|power_cap|hw_slowdown)\Z")


@dataclass(frozen=True)
class WatchOptions:
    """Thresholds of the rules (see the module docstring); seconds are wall-clock seconds."""

    spike_window: int = 50
    spike_z: float = 10.0
    spike_warmup: int = 20
    stall_k: float = 10.0
    stall_floor_s: float = 60.0
    straggler_ratio: float = STRAGGLER_SPREAD  # the rule's parameters: nb timers' defaults
    straggler_floor_s: float = STRAGGLER_FLOOR_S
    straggler_warmup: int = STRAGGLER_WARMUP_STEPS
    straggler_steps: int = 50
    gpu_idle_percent: float = 5.0
    gpu_samples: int = 12

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if self.spike_window < 3:
            raise ValueError(f"spike_window must be at least 3, not {self.spike_window}")
        if self.gpu_samples < 1 or self.straggler_steps < 1:
            raise ValueError("gpu_samples and straggler_steps must be at least 1")
        self.straggler_rule()  # ValueError: a parameter of the rule out of its range

    def straggler_rule(self) -> StragglerRule:
        """The straggler rule with these options' parameters."""
        return StragglerRule(self.straggler_ratio, self.straggler_floor_s, self.straggler_warmup)


def make_alert(rule: str, level: str, run: str, rank: int | None, host: str | None, tag: str | None,
               step: int | None, wall_time: float | None, message: str, **extra: object) -> dict:
    """One alert: the keys of :data:`ALERT_KEYS`, then ``extra`` (non-finite floats as
    the strings "nan", "inf", "-inf")."""
    out: dict[str, object] = {"rule": rule, "level": level, "run": run, "rank": rank, "host": host, "tag": tag, "step": step,
           "wall_time": wall_time, "message": message}
    for k, v in extra.items():
        out[k] = json_number(v) if isinstance(v, float) else v
    return out


class NonFinite:
    """The first NaN or infinity of each scalar tag of each rank."""

    def __init__(self) -> None:
        self._seen: set[tuple[int, str]] = set()

    def feed(self, ev: Event, run: str, host: str | None) -> dict | None:
        """An alert for ``ev`` if it is the first non-finite point of its (rank, tag)."""
        if ev.kind != "scalar" or ev.value is None or math.isfinite(ev.value):
            return None
        key = (ev.rank, ev.tag)
        if key in self._seen:
            return None
        self._seen.add(key)
        return make_alert("nonfinite", "error", run, ev.rank, host, ev.tag, ev.step, ev.wall_time,
                          f"{ev.tag} is {json_number(ev.value)} at step {ev.step:,} on rank {ev.rank}",
                          value=ev.value)


class Spike:
    """Robust z-score of each scalar point against the rolling median and MAD of the
    tag's previous ``window`` finite points (scaled by 1.4826, the normal consistency
    constant); a tag whose window has no spread at all is not judged."""

    #: The median and MAD are recomputed every this many points (they move slowly; a
    #: long history read at once costs ~1 µs a point instead of ~10).
    REFRESH = 8

    def __init__(self, window: int = 50, z: float = 10.0, warmup: int = 20):
        self.window, self.z, self.warmup = window, z, max(warmup, 3)
        self._points: dict[tuple[int, str], list] = {}  # [deque of points, median, mad, points since]

    def feed(self, ev: Event, run: str, host: str | None) -> dict | None:
        """An alert if ``ev`` (a scalar) is a spike against the points before it."""
        if ev.kind != "scalar" or ev.value is None or not math.isfinite(ev.value):
            return None
        state = self._points.get((ev.rank, ev.tag))
        if state is None:
            state = self._points[(ev.rank, ev.tag)] = [deque(maxlen=self.window), 0.0, 0.0, self.REFRESH]
        pts = state[0]
        alert = None
        if len(pts) >= self.warmup:
            if state[3] >= self.REFRESH:
                med = statistics.median(pts)
                state[1], state[2], state[3] = med, statistics.median(abs(p - med) for p in pts) * 1.4826, 0
            med, mad = state[1], state[2]
            state[3] += 1
            if mad > 0:
                score = (ev.value - med) / mad
                if abs(score) >= self.z:
                    alert = make_alert("spike", "warn", run, ev.rank, host, ev.tag, ev.step, ev.wall_time,
                                       f"{ev.tag} spiked to {ev.value:.6g} at step {ev.step:,} on rank {ev.rank} "
                                       f"(median {med:.6g}, robust z {score:+.1f})",
                                       value=ev.value, median=med, z=score)
        pts.append(ev.value)
        return alert


class Progress:
    """Per rank: the highest step seen, when (data time) it was reached, and the recent
    seconds per step. A rank with only system metrics advances with each sample."""

    def __init__(self) -> None:
        self.session = -1  # the latest session seen: a resume starts counting again
        self.step: int | None = None  # highest non-system step
        self.count = 0  # records (the progress of a rank with system metrics only)
        self.since: float | None = None  # wall time of the record that last advanced it
        self.per_step: deque = deque(maxlen=100)  # seconds per step between advances

    def feed(self, ev: Event) -> None:
        """Take one event of this rank into account."""
        if ev.session > self.session:  # a resumed session may restart below the old highest step
            self.session, self.step = ev.session, None
        if ev.kind == "system":
            if self.step is None:
                self.count += 1
                self.since = max(self.since or ev.wall_time, ev.wall_time)
            return
        if self.step is None or ev.step > self.step:
            if self.step is not None and self.since is not None and ev.wall_time > self.since:
                self.per_step.append((ev.wall_time - self.since) / (ev.step - self.step))
            self.step, self.since = ev.step, ev.wall_time

    def heard(self, wall: float) -> None:
        """A frame of any kind (a heartbeat) was written at unix time ``wall``: progress
        for a rank that logs no steps."""
        if self.step is None:
            self.since = max(self.since if self.since is not None else wall, wall)

    def limit(self, k: float, floor: float) -> float:
        """Seconds without progress that make a stall: k × the median step time, at least ``floor``."""
        med = statistics.median(self.per_step) if self.per_step else 0.0
        return max(k * med, floor)


def stall_alerts(progress: dict[int, Progress], open_ranks: set[int], hosts: dict[int, str | None], now: float,
                 run: str, k: float, floor: float) -> list[dict]:
    """Alerts for the ranks in ``open_ranks`` (session open, run running) whose progress
    is older than their limit at unix time ``now``."""
    out = []
    for rank, p in sorted(progress.items()):
        if rank not in open_ranks or p.since is None:
            continue
        idle = now - p.since
        limit = p.limit(k, floor)
        if idle < limit:
            continue
        others = [q.step for r, q in progress.items() if r != rank and q.step is not None]
        ahead = max(others) if others else None
        where = f"rank {rank}" + (f" on {hosts[rank]}" if hosts.get(rank) else "")
        if p.step is not None and ahead is not None and ahead > p.step:
            msg = f"{where} stopped at step {p.step:,} while others are at {ahead:,}"
        elif p.step is not None:
            msg = f"{where}: no new step after step {p.step:,} for {idle:.0f} s (limit {limit:.0f} s)"
        elif ahead is not None:
            msg = f"{where} went silent {idle:.0f} s ago while others are at step {ahead:,}"
        else:
            msg = f"{where}: no new data for {idle:.0f} s (limit {limit:.0f} s)"
        out.append(make_alert("stall", "error", run, rank, hosts.get(rank), None, p.step, p.since, msg,
                              idle_s=idle, limit_s=limit, others_step=ahead))
    return out


class GpuState:
    """Consecutive samples of a GPU below the idle threshold, or with a throttle flag set."""

    def __init__(self, idle_percent: float = 5.0, samples: int = 12):
        self.idle_percent, self.samples = idle_percent, samples
        self._runs: dict[tuple[int, str], int] = {}

    def feed(self, ev: Event, run: str, host: str | None, running: bool) -> dict | None:
        """An alert once a GPU tag of ``ev`` has been bad for ``samples`` samples in a row
        while ``running``."""
        if ev.kind != "system" or ev.value is None:
            return None
        util = _GPU_UTIL.match(ev.tag)
        throttle = None if util else _GPU_THROTTLE.match(ev.tag)
        m = util or throttle
        if m is None:
            return None
        bad = running and (ev.value < self.idle_percent if util else ev.value >= 1)
        key = (ev.rank, ev.tag)
        n = self._runs[key] = self._runs.get(key, 0) + 1 if bad else 0
        if n != self.samples:
            return None
        gpu = m.group(1)
        if util:
            return make_alert("gpu_idle", "warn", run, ev.rank, host, ev.tag, ev.step, ev.wall_time,
                              f"GPU {gpu} of rank {ev.rank}{_on(host)} below {self.idle_percent:g}% utilization "
                              f"for {plural(n, 'sample')} (now {ev.value:g}%)", value=ev.value, samples=n)
        return make_alert("gpu_throttled", "warn", run, ev.rank, host, ev.tag, ev.step, ev.wall_time,
                          f"GPU {gpu} of rank {ev.rank}{_on(host)} throttled ({m.group(2)}) for {plural(n, 'sample')}",
                          value=ev.value, samples=n)


def _on(host: str | None) -> str:
    return f" on {host}" if host else ""


def straggler_alerts(run_dir: str, run: str, hosts: dict[int, str | None], rule: StragglerRule,
                     last_steps: int) -> list[dict]:
    """Each straggler of each timer by the one straggler rule
    (:func:`nblog.reader.lowlevel.timer_frames`, as ``nb timers --last-steps N``) over each
    rank's last ``last_steps`` steps."""
    from .reader import RunReader
    from .stragglers import timer_frames

    frames = timer_frames(RunReader(run_dir), last_steps=last_steps, rule=rule)
    if frames is None:
        return []
    medians = dict(frames.timers.select("tag", "median_s").iter_rows())
    out = []
    for row in frames.ranks.filter("straggler").iter_rows(named=True):
        med = medians.get(row["tag"]) or 0.0
        x = row["step_s"] / med if med > 0 else math.inf
        out.append(make_alert("straggler", "warn", run, row["rank"], hosts.get(row["rank"]), row["tag"], None, None,
                              f"rank {row['rank']}{_on(hosts.get(row['rank']))} is slow in {row['tag']}: "
                              f"{row['step_s']:.4g} s a step (lower median of its last {row['steps']} steps), "
                              f"{x:.2f}× the median of the ranks ({med:.4g} s)",
                              step_s=row["step_s"], median_s=med, ratio=x, steps=row["steps"]))
    return out


def _load_timer_report() -> None:
    """Import what :func:`straggler_alerts` needs, so that the watch times the rule only:
    counting the first import in (0.2 s here, seconds on a loaded machine) made the next
    check wait 20 times that, and a straggler was reported many polls late."""
    from . import reader, stragglers  # noqa: F401


def event_alert(ev: dict, run: str, rank: int, session: int, host: str | None) -> dict | None:
    """The alert for a failure or ``run.alert`` event object of one session's log."""
    kind = ev.get("kind")
    step = ev.get("step") if isinstance(ev.get("step"), int) and not isinstance(ev.get("step"), bool) else None
    wall = ev.get("wall") if isinstance(ev.get("wall"), (int, float)) and not isinstance(ev.get("wall"), bool) else None
    text = {k: ev.get(k) if isinstance(ev.get(k), str) else None
            for k in ("type", "message", "traceback", "title", "text", "level")}
    at = f"step {step:,}" if step is not None else "before the first step"
    if kind == "failure":
        first = (text["message"] or "").strip().splitlines()
        what = (text["type"] or "?") + (f": {first[0][:300]}" if first else "")
        return make_alert("failure", "error", run, rank, host, None, step, wall,
                          f"failed: rank {rank}{_on(host)}, {at}, {what}", session=session, type=text["type"],
                          error=text["message"], traceback=text["traceback"])
    if kind == "alert":
        level = text["level"] or "warn"
        msg = f"rank {rank}{_on(host)}, {at}: {text['title'] or ''}" + (f": {text['text']}" if text["text"] else "")
        return make_alert("alert", level, run, rank, host, text["title"], step, wall, msg, session=session,
                          title=text["title"], text=text["text"])
    return None


class Watcher:
    """Poll a run incrementally and report each alert once.

    Args:
        run: a run id, a unique prefix, ``project/run id`` or a path to a run folder
            (it may not exist yet: polls find nothing until it does).
        root: where ids are looked up (default ``$NB_DIR``, else ``./nb_runs``).
        options: the thresholds.
        clock: unix time now (stalls compare it with the data's wall times).
        sleep: how :meth:`follow` waits.

    Not thread-safe. Files are read, never written.

    Raises:
        AmbiguousRunError: (from :meth:`poll`) ``run`` matches several runs.
        FormatVersionError: (from :meth:`poll`) a file of a newer format version.
    """

    def __init__(self, run: str | os.PathLike, root: str | os.PathLike | None = None,
                 options: WatchOptions | None = None, *, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep):
        self.query, self.root = run, root
        self.options = options or WatchOptions()
        self.clock, self.sleep = clock, sleep
        self.dir: str | None = None
        self._probe = Follower(run, root)
        self._followers: dict[int, Follower] = {}
        self._events_seen: dict[tuple[int, int], int] = {}
        self._reported: set[tuple] = set()
        self._progress: dict[int, Progress] = {}
        self._hosts: dict[int, str | None] = {}
        self._nonfinite = NonFinite()
        o = self.options
        self._spike = Spike(o.spike_window, o.spike_z, o.spike_warmup)
        self._gpu = GpuState(o.gpu_idle_percent, o.gpu_samples)
        self._timers_new = False
        self._straggler_next = -math.inf  # unix time before which the straggler rule waits
        self.status: str | None = None
        self.alerts: list[dict] = []  # every alert reported so far
        self._unended: set[tuple[int, int]] = set()  # (rank, session) reported as ended without END
        self._here: str | None = None  # this machine's host name, as ranks record it
        self._files: RankFiles | None = None  # the run folder's logs, listed once a poll for every Follower
        self._hang = HangRule()

    @property
    def name(self) -> str:
        return os.path.basename(self.dir) if self.dir else str(self.query)

    def resolve(self) -> str | None:
        """The run folder, or None while no run matches."""
        if self.dir is None:
            self.dir = self._probe.resolve()
        return self.dir

    def poll(self) -> list[dict]:
        """Read what was appended since the last poll; return the alerts new since then."""
        run_dir = self.resolve()
        if run_dir is None:
            return []
        meta = read_run_json(run_dir) or {}
        self.status = meta.get("status")
        running = self.status == "running"
        if self._files is None:
            from .._runfiles.rankfiles import WINDOW, RankFiles

            self._files = RankFiles(run_dir, keep=False, window=WINDOW)
        self._files.scan()  # once for the Followers of all ranks (each would list the folder)
        for rank in self._ranks():
            if rank not in self._followers:
                self._followers[rank] = Follower(run_dir, rank=rank, kinds=KINDS, files=self._files)
        found: list[dict] = []
        run = self.name
        newest: float | None = None  # unix time of the newest frame of any rank (silence: run_status)
        for rank, follower in sorted(self._followers.items()):
            events = follower.stream(last=_ALL)  # one by one: memory bounded by a read window
            host = self._host(rank, follower)
            prog = self._progress.setdefault(rank, Progress())
            for ev in events:
                prog.feed(ev)
                if ev.kind == "timer":
                    self._timers_new = True
                for rule in (self._nonfinite, self._spike):
                    alert = rule.feed(ev, run, host)
                    if alert:
                        found.append(alert)
                alert = self._gpu.feed(ev, run, host, running and not self._ended(follower))
                if alert:
                    found.append(alert)
            for session, log in _logs(follower):
                start = log.header.get("wall_start")
                if isinstance(start, (int, float)) and not isinstance(start, bool) and math.isfinite(start):
                    last = start + log.max_ms / 1000.0  # its last frame (heartbeats: NB_HEARTBEAT_S)
                    prog.heard(last)
                    newest = last if newest is None or last > newest else newest
                seen = self._events_seen.get((rank, session), 0)
                for ev in log.events[seen:]:
                    alert = event_alert(ev, run, rank, session, host)
                    if alert:
                        found.append(alert)
                self._events_seen[(rank, session)] = len(log.events)
        if running:  # as nb ls says it: a run whose writer is gone is stale (nblog.reader._runfiles.progress)
            self.status = run_status(meta, newest, self.clock(), here=self._this_host())
            running = self.status == "running"
        o = self.options
        if self._timers_new and len(self._followers) > 1 and self.clock() >= self._straggler_next:
            # timer_report reads every rank's timers: on a run so large that it takes long,
            # it runs at most once per 20 times its own duration (<= 5 % of the watch)
            self._timers_new = False
            _load_timer_report()  # a first import (polars: seconds on a busy machine) is not the rule's cost
            began = time.perf_counter()
            found += straggler_alerts(run_dir, run, self._hosts, o.straggler_rule(), o.straggler_steps)
            self._straggler_next = self.clock() + 20 * (time.perf_counter() - began)
        if running:
            open_ranks = {r for r, f in self._followers.items() if not self._ended(f)}
            found += stall_alerts(self._progress, open_ranks, self._hosts, self.clock(), run, o.stall_k,
                                  o.stall_floor_s)
        found += self._unended_alerts(run, running)
        hang = self._hang.poll(run_dir, run, self.clock(), getattr(self._files, "names", None))
        if hang is not None:
            found.append(hang)
        new = []
        for alert in found:
            key = (alert["rule"], alert["tag"], alert["rank"], alert.get("session"))
            if key not in self._reported:
                self._reported.add(key)
                new.append(alert)
        # in the order their data happened, not rank by rank: the first failure first
        new.sort(key=lambda a: (not isinstance(a["wall_time"], (int, float)), a["wall_time"] or 0.0))
        self.alerts += new
        return new

    def done(self) -> bool:
        """True once every rank's last session ended, or ended without an END record
        (reported as unended), and the run is finished or failed, or a rank died."""
        over = bool(self._followers) and all(self._ended(f) or self._died(r, f) for r, f in self._followers.items())
        return over and (self.status in ("finished", "failed") or bool(self._unended))

    def follow(self, interval: float = 5.0, *, timeout: float | None = None,
               monotonic: Callable[[], float] = time.monotonic) -> Iterator[list[dict]]:
        """Yield each poll's new alerts (possibly none) every ``interval`` seconds until
        :meth:`done` or ``timeout`` seconds (None: never)."""
        _load_timer_report()  # now, not in the middle of the first poll that meets timers
        yield from follow(self.poll, interval, timeout=timeout, sleep=self.sleep, clock=monotonic, every=True,
                          done=self.done)

    # -- internals -----------------------------------------------------------------

    def _ranks(self) -> set[int]:
        run_dir = self.dir
        assert run_dir is not None  # poll() resolved it first
        return set(ranks_with_logs(run_dir))

    def _host(self, rank: int, follower: Follower) -> str | None:
        for _s, log in reversed(_logs(follower)):
            host = log.header.get("host")
            if isinstance(host, str):
                self._hosts[rank] = host
                return host
        if rank not in self._hosts:  # logs not read yet (the first poll reads them as it streams)
            self._hosts[rank] = None
            files = self._files
            assert files is not None  # poll() listed the folder before asking for hosts
            for s in reversed(files.listed(rank)):  # the latest session first, from poll()'s listing
                host = files.header(rank, s).get("host")
                if isinstance(host, str):
                    self._hosts[rank] = host
                    break
        return self._hosts.get(rank)

    def _died(self, rank: int, follower: Follower) -> bool:
        logs = _logs(follower)
        return bool(logs) and (rank, logs[-1][0]) in self._unended

    def _unended_alerts(self, run: str, running: bool) -> list[dict]:
        """Each rank whose last session has no END record although the run is over
        (finished, failed) or another rank closed the same session, and whose process
        is gone: the rule ``unended``."""
        closed = {s for f in self._followers.values() for s, log in _logs(f) if log.end is not None}
        out = []
        for rank, follower in sorted(self._followers.items()):
            logs = _logs(follower)
            if not logs:
                continue
            session, log = logs[-1]
            if log.end is not None or (rank, session) in self._unended or (running and session not in closed):
                continue
            start = log.header.get("wall_start")
            last = (start + log.max_ms / 1000.0 if isinstance(start, (int, float)) and not isinstance(start, bool)
                    else None)
            if not self._gone(log.header, last) or _ends_now(log.path):
                continue
            self._unended.add((rank, session))
            prog = self._progress.get(rank)
            step = prog.step if prog is not None and prog.session == session else None
            host = self._hosts.get(rank)
            out.append(make_alert("unended", "error", run, rank, host, None, step, last,
                                  unended_line({"rank": rank, "host": host, "session": session, "last_step": step}),
                                  session=session))
        return out

    def _gone(self, header: dict, last: float | None) -> bool:
        """Whether the process that wrote a session (its log's ``header``; ``last``: the
        unix time of its last frame) is gone: the one rule of
        :func:`nblog.reader._runfiles.progress.writer_alive` (on this machine, its process; on
        another, silent for STALE_AFTER_S seconds: heartbeats come every 60 s)."""
        from .._runfiles.progress import writer_alive

        return not writer_alive(header.get("host"), header.get("pid"), header.get("wall_start"), last,
                                self.clock(), here=self._this_host())

    def _this_host(self) -> str:
        """This machine's name, as ranks record it (looked up once)."""
        if self._here is None:
            from .._runfiles.progress import this_host

            self._here = this_host()
        return self._here

    @staticmethod
    def _ended(follower: Follower) -> bool:
        logs = _logs(follower)
        return bool(logs) and logs[-1][1].end is not None


def _logs(follower: Follower) -> list:
    """``(session, LogFile)`` of the session files ``follower`` reads, in order (their
    failure and alert events and END records are kept on the LogFile as it polls)."""
    return follower.logs()


def _ends_now(path: str) -> bool:
    """Whether the log at ``path`` holds an END record now, read by a reader of its own
    (the rank's follower stays where it was). A process that writes its END record and
    exits between this poll's read of its log and the look at its pid is gone, not
    unended: a busy machine made that a false alarm. Read only for a rank whose process
    is gone without an END record seen: once per session."""
    from .._file.logfile import LogFile
    from .._runfiles.rankfiles import read_on

    lf = LogFile(path, keep=False)
    for _delta in read_on(lf):
        pass
    return lf.end is not None
