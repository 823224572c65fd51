"""What the run screen reads, prepared in a worker thread.

:class:`RunModel` holds one :class:`~nblog.reader._views.live.LiveRun` per run shown (several when
runs are overlaid) and turns a :class:`Request` (view, rank, tags, axis, smoothing,
...) into small results: plot specs, table rows, text entries. One lock serializes
workers; nothing here touches widgets.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nblog.reader import LiveRun, Series, read_envelopes, run_row, straggler_frames
from nblog.reader.lowlevel import event_files, failed_ranks

from .bands import ranks_band_spec
from .groups import config_value, groups_spec
from .messages import RunStatus
from .plotdata import AXIS_NAMES, Smoother, band_spec, envelope_spec, scalar_spec, system_spec
from .preload import PREVIEW_MIN_BYTES, preload, previewable
from .widgets.heatmap import HeatData, heat_data
from .widgets.plot import PALETTE, PlotSpec

if TYPE_CHECKING:
    from nblog.reader import TimerFrames

    from .events import RunEvents
    from .media import MediaData, MediaSource

MAX_PLOTS = 6
HEAT_MIN_RANKS = 8  # the timers view shows a rank heat map instead of the band above this
TABLE_MAX_ROWS = 512  # above this the timers table keeps each timer's TABLE_RANKS slowest ranks
TABLE_RANKS = 16
KEEP_SERIES = 128
# The first plot of a run whose rank has PREVIEW_MIN_BYTES of event logs is drawn from the
# writer's envelope sidecars (nblog.reader.read_envelopes) while the full series loads,
# when that reads at most PREVIEW_MAX_READ bytes of the logs, and a quarter at most
# (the tails the sidecars miss, the logs without one)
PREVIEW_MAX_READ = 16 << 20
TEXT_LIMIT = 500
# What the text view shows of one text, and of all the texts shown: wrapping and drawing
# happen on the UI thread, and a 10 MB text took minutes there (the limit is 16 MiB)
TEXT_SHOWN_CHARS = 64 * 1024
TEXT_SHOWN_LINES = 2000
TEXT_SHOWN_TOTAL = 1 << 20
_GPU = re.compile(r"^system/gpu(\d+)/(.+)$")


@dataclass(frozen=True)
class Request:
    seq: int
    view: str = "scalars"
    refresh: bool = False
    rank: int = 0
    tags: tuple[str, ...] = ()
    axis: str = "step"
    smoothing: float = 0.6
    logy: bool = False
    buckets: int = 200
    machine: int = -1  # -1: every machine (small multiples)
    timer: str | None = None
    media: tuple | None = None  # the media record (or (tag,)) under the cursor
    all_ranks: bool = False  # plots: the band across the ranks of the first run (a)


@dataclass
class TimersData:
    rows: list[dict]
    tags: list[str]
    band: PlotSpec
    timer: str | None
    heat: HeatData | None = None  # the rank heat map, for more than HEAT_MIN_RANKS ranks


@dataclass
class SystemData:
    grid: list[tuple[str, list[float | None]]]
    machines: list[str]
    machine: int
    plots: list  # PlotSpec


@dataclass
class TextData:
    rank: int
    entries: list[tuple[int, int, str, str, float]]
    total: int


def shown_text(text: str) -> str:
    """``text``, or its first :data:`TEXT_SHOWN_CHARS` characters (at most
    :data:`TEXT_SHOWN_LINES` lines) and a line saying how much more there is and where
    to read all of it."""
    if len(text) <= TEXT_SHOWN_CHARS and text.count("\n") < TEXT_SHOWN_LINES:
        return text
    head = text[:TEXT_SHOWN_CHARS]
    lines = head.split("\n", TEXT_SHOWN_LINES)
    if len(lines) > TEXT_SHOWN_LINES:
        head = "\n".join(lines[:TEXT_SHOWN_LINES])
    return (f"{head}\n… {len(text) - len(head):,} more characters not shown ({len(text):,} in all): "
            "nb tail --json RUN or RunReader.text() has all of it")


def _slowest_first(row: dict) -> tuple:
    """Order of the timers table's rows when it keeps each timer's slowest ranks: by the
    straggler rule's statistic (lower median per step, highest first; ranks it does
    not judge last), then by mean, then rank (as ``nb timers``)."""
    return (row["step_s"] is None, -(row["step_s"] or 0.0), -row["mean_s"], row["rank"])


class RunModel:
    """The data behind the run screen. ``lives``: the runs already opened (and being
    read) by :func:`nbcli.tui.preload.start`; else each of ``run_dirs`` is opened here."""

    def __init__(self, run_dirs: list[str], lives: list[LiveRun] | None = None,
                 preview_min_bytes: int | None = None):
        self.runs = lives or [LiveRun(d) for d in run_dirs]
        # see preview(); None: PREVIEW_MIN_BYTES
        self.preview_min_bytes = PREVIEW_MIN_BYTES if preview_min_bytes is None else preview_min_bytes
        self.lock = threading.Lock()
        self.smoother = Smoother()
        self._used: OrderedDict[tuple, None] = OrderedDict()
        self._media: MediaSource | None = None  # once the media view asks
        self._events: RunEvents | None = None  # failures for the straggler rule, once the timers view asks
        self.group_key: str | None = None  # plots: runs grouped by this config key (mean, band)

    def preload(self, rank: int = 0) -> None:
        """Read ``rank``'s files and extract the tag the run screen plots first, now
        (:func:`nbcli.tui.preload.preload`)."""
        with self.lock:
            preload(self.runs, rank)

    def preload_in_background(self, rank: int = 0) -> threading.Thread | None:
        """:meth:`preload` in a daemon thread, unless the screen will draw the first plot
        from envelope sidecars (:func:`~nbcli.tui.preload.previewable`; it reads the run
        right after): None then."""
        if previewable([live.dir for live in self.runs], rank, self.preview_min_bytes):
            return None
        thread = threading.Thread(target=self.preload, args=(rank,), name="nb-tui-preload", daemon=True)
        thread.start()
        return thread

    @property
    def primary(self) -> LiveRun:
        return self.runs[0]

    def label(self, live: LiveRun) -> str:
        """The name of ``live`` in an overlay's legend: its run id (the folder name, what
        ``nb tui RUN`` takes), never the run name, which several runs may share; with
        the project in front when runs of two projects have the same id."""
        run_id = os.path.basename(os.path.normpath(live.dir))
        same = sum(os.path.basename(os.path.normpath(o.dir)) == run_id for o in self.runs)
        if same > 1:
            return f"{os.path.basename(os.path.dirname(os.path.normpath(live.dir)))}/{run_id}"
        return run_id

    def refresh(self) -> bool:
        changed = False
        for live in self.runs:
            changed |= live.refresh()
        return changed

    def _use(self, live_index: int, key: tuple) -> None:
        k = (live_index, *key)
        self._used[k] = None
        self._used.move_to_end(k)
        while len(self._used) > KEEP_SERIES:
            self._used.popitem(last=False)

    def _trim(self) -> None:
        for i, live in enumerate(self.runs):
            live.forget(k[1:] for k in self._used if k[0] == i)

    # -- status ---------------------------------------------------------------------------

    def run_status(self, now: float | None = None) -> str:
        """The first run's status by the catalog's rule (``nb ls`` and the runs list say
        the same): running, finished, failed, stale (running but silent for minutes), or
        whatever other word run.json or the catalog holds. "waiting" while the run has
        neither a status nor an event log yet; the last status read once its folder is
        gone. ``now``: unix seconds (default: the clock)."""
        live = self.primary
        if live.gone:
            return str(live.meta.get("status") or "unknown")
        try:
            status = str(run_row(live.dir, now=now)["status"] or "unknown")
        except OSError:
            status = str(live.meta.get("status") or "unknown")
        return "waiting" if status == "unknown" and not live.ranks() else status

    def _title(self) -> str:
        live = self.primary
        meta = live.meta
        title = f"{meta.get('project') or os.path.basename(os.path.dirname(live.dir))}/" \
                f"{meta.get('id') or os.path.basename(live.dir)}"
        if meta.get("name"):
            title += f"  {meta['name']}"
        return title

    def status(self, rank: int, now: float | None = None) -> RunStatus:
        """What the run header shows for ``rank``; ``now``: unix seconds, for the status."""
        live = self.primary
        tags: set[str] = set()
        for other in self.runs:
            tags.update(other.tags(rank, "scalar"))
        sessions = live.sessions(rank)
        return RunStatus(
            title=self._title(),
            status=self.run_status(now),
            gone=live.gone,
            ranks=live.ranks(),
            sessions=len(sessions),
            last_step=live.last_step(rank),
            tags=sorted(tags),
            runs=len(self.runs),
            waiting=not live.ranks(),
        )

    def preview(self, req: Request) -> tuple[RunStatus, list[PlotSpec]] | None:
        """The header and first plots of a long run drawn from its envelope sidecars
        (:func:`nblog.reader.read_envelopes`), without the full read; for one run, the
        step axis, one rank's lines, when that rank's event logs hold at least
        :attr:`preview_min_bytes` and the sidecars leave at most ``PREVIEW_MAX_READ``
        bytes of them, and a quarter at most, to read. None otherwise (the full series is drawn first). Takes
        neither the model's lock nor a LiveRun's: it runs while those read."""
        if len(self.runs) != 1 or req.view != "scalars" or req.all_ranks or req.axis != "step":
            return None
        live = self.primary
        files = [p for (r, _s), p in event_files(live.dir).items() if r == req.rank]
        size = 0
        for path in files:
            try:
                size += os.stat(path).st_size
            except OSError:
                pass
        if not files or size < self.preview_min_bytes:
            return None
        # worth it only when the sidecars spare most of the reading
        envs = read_envelopes(live.dir, None, req.rank, max_log_bytes=min(PREVIEW_MAX_READ, size // 4))
        if not envs:
            return None
        tags = [t for t in req.tags if t in envs] or sorted(envs)[:1]
        specs = [envelope_spec(tag, envs[tag], logy=req.logy) for tag in tags[:MAX_PLOTS]]
        status = RunStatus(
            title=self._title(), status=str(live.meta.get("status") or "unknown"), gone=False,
            ranks=sorted({r for r, _s in event_files(live.dir)}), sessions=len(files),
            last_step=max(int(e.last_step.max()) for e in envs.values()), tags=sorted(envs), runs=1,
        )
        return status, specs

    # -- views ------------------------------------------------------------------------------

    def view(self, req: Request, default_tag: str | None) -> object:
        fn = {"scalars": self._scalars, "timers": self._timers, "system": self._system, "text": self._text,
              "media": self._media_view}[req.view]
        out = fn(req, default_tag)
        self._trim()
        return out

    def _scalars(self, req: Request, default_tag: str | None) -> list:
        if req.all_ranks:
            return self._bands(req, default_tag)
        if self.group_key and len(self.runs) > 1:
            return self._grouped(req, default_tag)
        # only tags this rank has (in some run shown): the tag highlighted on another
        # rank is no "no points yet" plot here
        have = {t for live in self.runs for t in live.tags(req.rank, "scalar")}
        tags = [t for t in req.tags if t in have] or \
            ([default_tag] if default_tag in have else sorted(have)[:1])
        specs, used = [], []
        for tag in tags[:MAX_PLOTS]:
            entries = []
            for i, live in enumerate(self.runs):
                s = live.series(req.rank, [tag])[tag]
                self._use(i, (req.rank, "scalar", tag))
                used.append(s)
                entries.append((self.label(live) if len(self.runs) > 1 else "", s))
            specs.append(
                scalar_spec(tag, entries, axis=req.axis, smoothing=req.smoothing, logy=req.logy,
                            buckets=req.buckets, smoother=self.smoother)
            )
        if not tags:
            specs.append(self._no_scalars(req, used))
        self.smoother.keep(used)
        for spec in specs:
            spec.title = spec.title + ("" if req.axis == "step" else f"  vs {AXIS_NAMES[req.axis]}")
        return specs

    def _bands(self, req: Request, default_tag: str | None) -> list:
        """Plots view with ``all_ranks``: per tag, the band across every rank of the
        first run that logged it (a scalar, or else a timer of that name)."""
        live = self.primary
        ranks = live.ranks()
        have = {(r, kind): set(live.tags(r, kind)) for r in ranks for kind in ("scalar", "timer")}
        known = set().union(*have.values()) if have else set()
        tags = [t for t in req.tags if t in known] or \
            ([default_tag] if default_tag in known else sorted(known)[:1])
        specs: list[PlotSpec] = []
        used: list[Series] = []
        for tag in tags[:MAX_PLOTS]:
            kind = "scalar" if any(tag in have[(r, "scalar")] for r in ranks) else "timer"
            per_rank: dict[int, Series] = {}
            for r in ranks:
                if tag in have[(r, kind)]:
                    per_rank[r] = live.series(r, [tag], kind)[tag]
                    self._use(0, (r, kind, tag))
            used.extend(per_rank.values())
            spec, _outlier = ranks_band_spec(tag, per_rank, req.buckets, logy=req.logy,
                                             unit="s" if kind == "timer" else "")
            if req.axis != "step":
                spec.note = " · ".join(x for x in ("all ranks: against the step", spec.note) if x)
            specs.append(spec)
        if not tags:
            specs.append(PlotSpec(message="no rank logged scalars (yet)"))
        self.smoother.keep(used)
        return specs

    def _grouped(self, req: Request, default_tag: str | None) -> list:
        """Plots view of runs grouped by :attr:`group_key`: per tag, each group's mean
        over its runs and their min–max band (the selected rank of every run)."""
        key = self.group_key
        assert key is not None  # called only with a group key
        have = {t for live in self.runs for t in live.tags(req.rank, "scalar")}
        tags = [t for t in req.tags if t in have] or \
            ([default_tag] if default_tag in have else sorted(have)[:1])
        specs, used = [], []
        for tag in tags[:MAX_PLOTS]:
            groups: dict[str, list] = {}
            for i, live in enumerate(self.runs):
                s = live.series(req.rank, [tag])[tag]
                self._use(i, (req.rank, "scalar", tag))
                used.append(s)
                groups.setdefault(config_value(live.meta, key), []).append(s)
            specs.append(groups_spec(tag, key, groups, req.buckets))
        if not tags:
            specs.append(PlotSpec(message=f"rank {req.rank} logged no scalars (yet)"))
        self.smoother.keep(used)
        return specs

    def _no_scalars(self, req: Request, used: list) -> PlotSpec:
        """The plot of a rank without scalars: what the rank logs instead and the key of
        its view; a rank with timers only (a worker rank timing its steps) gets its
        timers plotted here, seconds per record against the step."""
        live, r = self.primary, req.rank
        timers = live.tags(r, "timer")
        others = [(what, key) for what, kind, key in (("system metrics", "system", "3"), ("text", "text", "4"))
                  if live.tags(r, kind)]
        if not timers:
            if not others:
                return PlotSpec(message=f"rank {r} logged no scalars (yet)")
            what = " and ".join(w for w, _k in others)
            keys = ", ".join(f"{k} for {w}" for w, k in others)
            return PlotSpec(message=f"rank {r} logs {what} only: press {keys}")
        if others:
            title = f"rank {r}: no scalars; timers (2), " + ", ".join(f"{w} ({k})" for w, k in others)
        else:
            title = f"rank {r} logs timers only (2: timers view)"
        ss = live.series(r, timers[:len(PALETTE)], "timer")
        for t in ss:
            self._use(0, (r, "timer", t))
        used.extend(ss.values())
        spec = scalar_spec(title, list(ss.items()), axis=req.axis, smoothing=req.smoothing, logy=req.logy,
                           buckets=req.buckets, smoother=self.smoother)
        spec.yunit = "s"
        return spec

    def _timers(self, req: Request, _default: str | None) -> TimersData:
        import polars as pl

        live = self.primary
        ranks = live.ranks()
        tags = sorted({t for r in ranks for t in live.tags(r, "timer")})
        per_tag: dict[str, dict[int, Series]] = {t: {} for t in tags}
        code = {t: i for i, t in enumerate(tags)}
        parts: dict[str, list[np.ndarray]] = {k: [] for k in ("tag", "rank", "session", "step", "value")}
        for r in ranks:
            mine = [t for t in tags if t in set(live.tags(r, "timer"))]
            if not mine:
                continue
            for tag, s in live.series(r, mine, "timer").items():
                self._use(0, (r, "timer", tag))
                n = len(s)
                if not n:
                    continue
                per_tag[tag][r] = s
                parts["tag"].append(np.full(n, code[tag], np.uint32))
                parts["rank"].append(np.full(n, r, np.int32))
                parts["session"].append(s.session)
                parts["step"].append(s.step)
                parts["value"].append(s.value)
        # nb timers' rule, the one implementation (nblog.reader.straggler_frames): the rows of
        # stragglers are marked and the band's line is the slowest rank's, so both name
        # the same ranks as nb timers, nb watch and nb report
        rows: list[dict[str, Any]] = []
        timers: dict[str, dict[str, Any]] = {}
        frames: TimerFrames | None = None
        if parts["tag"]:
            cols = {k: np.concatenate(v) for k, v in parts.items()}
            points = pl.DataFrame({"tag": pl.Series(tags).gather(cols.pop("tag")), **cols})
            frames = straggler_frames(points, failed=self._failed(live, ranks))
            rows = frames.ranks.to_dicts()
            timers = {t["tag"]: t for t in frames.timers.iter_rows(named=True)}
        timer = req.timer if req.timer in per_tag else (tags[0] if tags else None)
        if timer is not None:
            slowest = timers[timer]["slowest_rank"] if timer in timers else None
            spec, _slow = band_spec(f"{timer}: band across ranks", per_tag[timer], req.buckets, slowest)
        else:
            from .widgets.plot import PlotSpec

            spec = PlotSpec(message="no timers logged (run.timer(...); all_ranks=True for every rank)")
        if len(rows) > TABLE_MAX_ROWS:  # 32,768 rows took the UI thread 16 s to lay out; the heat map shows all
            by_tag: dict[str, list[dict]] = {}
            for row in rows:
                by_tag.setdefault(row["tag"], []).append(row)
            keep = {id(row) for rs in by_tag.values() for row in sorted(rs, key=_slowest_first)[:TABLE_RANKS]}
            rows = [row for row in rows if id(row) in keep]
        heat = None
        if timer is not None and frames is not None and len(per_tag[timer]) > HEAT_MIN_RANKS:
            ss = per_tag[timer]
            verdict = frames.ranks.filter(pl.col("tag") == timer)
            judged = dict(verdict.filter(pl.col("step_s").is_not_null()).select("rank", "step_s").iter_rows())
            flagged = verdict.filter("straggler")["rank"].to_list()
            heat = heat_data(timer, {r: (s.step, s.value) for r, s in ss.items()},
                             {r: (live.sessions(r) or [{}])[-1].get("host") or "?" for r in ss},
                             judged=judged, median_s=timers[timer]["median_s"], stragglers=flagged)
        return TimersData(rows, tags, spec, timer, heat)

    def _failed(self, live: LiveRun, ranks: list[int]) -> list[tuple[int, int, int | None]]:
        """Where ranks of ``live`` failed or died, for the straggler rule
        (:func:`nblog.reader.lowlevel.failed_ranks`): the failure events of every rank's logs (read
        incrementally, kept between calls) and the sessions that ended without END."""
        if self._events is None or self._events.dir != live.dir:
            from .events import RunEvents

            self._events = RunEvents(live.dir)
        self._events.poll()
        failures = [e for e in self._events.events if e["kind"] == "failure"]
        sessions = []
        for r in ranks:
            for s in live.sessions(r):
                closed = s["end"] is not None
                pid = None if closed else live.header(r, s["session"]).get("pid")  # asked where it matters
                start = s["wall_start"]
                last = start + s["duration_s"] if isinstance(start, (int, float)) and not isinstance(start, bool) else None
                sessions.append({"rank": r, "session": s["session"], "closed": closed, "host": s["host"], "pid": pid,
                                 "last_wall": last})
        return failed_ranks(failures, sessions, live.meta.get("status"))

    def _system(self, req: Request, _default: str | None) -> SystemData:
        live = self.primary
        machines = live.machines()
        grid, names, per_machine = [], [], []
        for m in machines:
            tags = live.tags(m["rank"], "system")
            ss = live.series(m["rank"], tags, "system")
            for t in tags:
                self._use(0, (m["rank"], "system", t))
            gpus: dict[int, dict[str, Series]] = {}
            for t, s in ss.items():
                g = _GPU.match(t)
                if g:
                    gpus.setdefault(int(g.group(1)), {})[g.group(2)] = s
            util: list[float | None] = [None] * (max(gpus) + 1 if gpus else 0)
            for i, metrics in gpus.items():
                u = metrics.get("utilization_percent")
                if u is not None and len(u):
                    util[i] = float(u.value[-1])
            name = str(m["hostname"])
            grid.append((name, util))
            names.append(name)
            per_machine.append((name, ss, gpus))
        plots = []
        b = req.buckets
        if req.machine < 0 or req.machine >= len(per_machine):
            for name, ss, gpus in per_machine:
                entries = [(f"gpu{i}", gpus[i]["utilization_percent"]) for i in sorted(gpus)
                           if "utilization_percent" in gpus[i]]
                if "system/cpu_percent" in ss:
                    entries.append(("cpu", ss["system/cpu_percent"]))
                plots.append(system_spec(f"{name}  util %", entries, b))
        else:
            name, ss, gpus = per_machine[req.machine]
            cm = [(lab, ss[t]) for lab, t in (("cpu", "system/cpu_percent"), ("mem", "system/memory_percent"))
                  if t in ss]
            plots.append(system_spec(f"{name}  cpu / memory %", cm, b))

            def per_gpu(metric: str) -> list:
                return [(f"gpu{i}", gpus[i][metric]) for i in sorted(gpus) if metric in gpus[i]]

            if gpus:  # else the grid says this machine recorded no GPUs
                plots.append(system_spec("GPU utilization %", per_gpu("utilization_percent"), b))
                plots.append(system_spec("GPU memory used GiB", per_gpu("memory_used_bytes"), b, scale=1 / 2**30))
                plots.append(system_spec("GPU temperature °C", per_gpu("temperature_c"), b))
                plots.append(system_spec("GPU power W", per_gpu("power_w"), b))
        return SystemData(grid, names, req.machine if 0 <= req.machine < len(names) else -1, plots)

    def _media_view(self, req: Request, _default: str | None) -> MediaData:
        from .media import MediaSource

        if self._media is None:
            self._media = MediaSource(self.primary.dir)
        else:  # every time: what was appended while another view was shown is read too
            self._media.refresh()
        return self._media.view(req.rank, req.media)

    def _text(self, req: Request, _default: str | None) -> TextData:
        entries = self.primary.text(req.rank)
        shown = [(se, st, tag, shown_text(text), wall) for se, st, tag, text, wall in entries[-TEXT_LIMIT:]]
        budget = TEXT_SHOWN_TOTAL
        for i in range(len(shown) - 1, -1, -1):  # the newest texts, as many as the budget holds
            budget -= len(shown[i][3])
            if budget < 0:
                shown = shown[i + 1:] or shown[-1:]
                break
        return TextData(req.rank, shown, len(entries))
