"""Benchmark nb at the size its users run it (issue 18 item 2) and print a Markdown table.

    .venv/bin/python scripts/bench_scale.py [--part ranks,heatmap,fs,runs,long] [--dir DIR]
        [--jobs 1024x1000,8192x100] [--runs 20000] [--long-steps 1000000] [--wait-s 8]

Each figure is compared with its target from issue 18 item 3 ("met", or how far off).
Parts (``--part``, comma separated; all but ``long`` by default):

- ``ranks``: for each job RANKSxSTEPS of ``--jobs``, a run where every rank logs four
  ``all_ranks`` timers each step (rank 0 also a loss), then the time of ``nb timers`` (and
  of ``nb timers --all-ranks``, every rank's row),
  of ``RunReader.timers(all_ranks=True)`` and of the TUI timers view's first draw (a
  headless Textual app, from its creation to the timers table shown), each in a fresh
  process. SIMULATION: on a 2-core machine the ranks are written by ``--workers``
  processes that each impersonate many ranks in turn (``nb.init(_environ=...)`` with
  the launcher variables of each rank: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
  TORCHELASTIC_RUN_ID; 8 ranks per machine named with NB_HOSTNAME), real nblog
  writing real event logs; the timers' durations come from a model (a slow machine, a
  rank that turns slow half way) through a stand-in for the timer's clock, so no time
  is spent sleeping. ``--rank-procs B`` starts one real process per rank instead,
  ``B`` at a time, with the launcher variables in its environment (slow: ~0.1 s of
  CPU per process for the imports).
- ``heatmap``: the TUI timers view's rank heat map (ranks x steps) on the same jobs:
  time to its first draw.
- ``fs``: file-system calls on the run's files (``strace -f -y``, counted per phase
  between marker calls), for rank 0 and a non-zero rank: at ``init``, at the first
  flush, per later flush, at ``finish``; then one non-zero rank waiting ``--wait-s``
  for a rank 0 that does not come (run folder absent; and a run.json of an earlier
  launch present, as a requeued job sees): its calls per second once its back-off has
  settled, and from that the load of 1,000 and of 8,192 waiting ranks and the calls of
  a rank that waits 60 s.
- ``runs``: a root of ``--runs`` runs written with real nblog (the sweep driver of
  scripts/bench_ls_query.py), then ``nb ls``, ``nb ls --where ...`` and
  ``nb resume-id --latest``; and the peak RSS of ``nb ls --json`` (with and without the
  listing cache) and of ``nb ls --json --where ...`` (issue 22: at most 200 MiB).
- ``long``: a finished run of 10 tags x ``--long-steps`` steps written in the writer's
  frames (numpy, as scripts/bench_tui.py does; ``--long-frames``), then ``RunReader.scalars()``,
  ``nb export`` to Parquet (time, peak RSS, and the frame's size) and the TUI's first
  plot. The issue's figure is 10,000,000 steps (100M points, 2.4 GB on disk): pass
  ``--long-steps 10000000`` by hand; CI never runs it.

Every timed command runs in a fresh interpreter; wall times are medians of
``--repeat``. The load average is printed: on a shared machine wall times stretch.
The nblog/nbcli used are those Python imports (PYTHONPATH wins, e.g. a second
worktree for "before" figures); children get the same.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.dirname(HERE))  # this tree, unless PYTHONPATH names another first

RANKS_PER_HOST = 8
TIMERS = ("time/data", "time/fwd", "time/bwd", "time/step")
DEFAULT_PARTS = ("ranks", "heatmap", "fs", "runs")


def _tree() -> str:
    """The folder holding the nblog that this interpreter imports."""
    import nblog

    return os.path.dirname(os.path.dirname(os.path.abspath(nblog.__file__)))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANK", "LOCAL_", "WORLD_", "GROUP_", "NB_", "SLURM_", "TORCHELASTIC_", "OMPI_",
                                "PMI_"))}
    env["PYTHONPATH"] = _tree()
    env.update(extra)
    return env


NB = [sys.executable, "-c", "from nbcli.app import main; main()"]


@dataclass
class Child:
    wall_s: float
    cpu_s: float  # user + system, the process and its threads (wall stretches on a busy machine)
    rss_mib: float
    out: str
    rc: int


def run_child(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 900.0) -> Child:
    """Run ``cmd``; its wall time, its own peak RSS (MiB, from wait4) and stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env or _env(), cwd=_tree())
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.005)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace")
        if p.returncode != 0:
            sys.stderr.write(f"[{' '.join(cmd[-3:])}] exit {p.returncode}: {err.read().decode(errors='replace')[-2000:]}\n")
        return Child(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, text, p.returncode)


def median_child(cmd: list[str], repeat: int, env: dict[str, str] | None = None, timeout: float = 900.0) -> Child:
    runs = [run_child(cmd, env, timeout) for _ in range(repeat)]
    runs.sort(key=lambda c: c.wall_s)
    return runs[len(runs) // 2]


def last_float(text: str) -> float:
    return float(text.strip().splitlines()[-1].split()[0])


# -- results ----------------------------------------------------------------------------


@dataclass
class Row:
    figure: str
    value: float | None
    unit: str
    target: float | None = None  # an upper bound; None: no target, reported only
    note: str = ""

    def cells(self) -> list[str]:
        if self.value is None:
            got = "not measured" + (f" ({self.note})" if self.note else "")
        else:
            got = f"{_num(self.value)} {self.unit}".strip()
            if self.note:
                got += f" ({self.note})"
        if self.target is None:
            return [self.figure, got, "—", "—"]
        tgt = f"≤ {_num(self.target)} {self.unit}".strip()
        if self.value is None:
            verdict = "?"
        elif self.value <= self.target:
            verdict = "met"
        else:
            ratio = self.value / self.target if self.target else math.inf
            verdict = f"{ratio:.2f}× over" if ratio < 10 else f"{ratio:.0f}× over"
        return [self.figure, got, tgt, verdict]


def _num(v: float) -> str:
    if v == int(v) and abs(v) >= 10:
        return f"{int(v):,}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


class Rows(list):
    """The table's rows; each is printed as it comes (a long part shows its progress)."""

    def append(self, row: Row) -> None:
        super().append(row)
        print("  " + " | ".join(row.cells()), flush=True)


def print_table(rows: list[Row]) -> None:
    print()
    print("| figure | measured | target | met or distance |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join(r.cells()) + " |")
    print()


# -- many ranks ----------------------------------------------------------------------


def rank_env(rank: int, world: int, job: str, root: str) -> dict[str, str]:
    """The variables torchrun gives ``rank`` of a job of ``world`` ranks, 8 per machine."""
    return {
        "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank % RANKS_PER_HOST),
        "LOCAL_WORLD_SIZE": str(RANKS_PER_HOST), "GROUP_RANK": str(rank // RANKS_PER_HOST),
        "TORCHELASTIC_RUN_ID": job, "TORCHELASTIC_RESTART_COUNT": "0",
        "NB_DIR": root, "NB_HOSTNAME": f"node{rank // RANKS_PER_HOST:04d}", "NB_SYSTEM": "0",
        "NB_PROVENANCE": "0", "NB_WAIT_S": "900", "NB_FLUSH_INTERVAL": "5",
    }


def durations(rank: int, world: int, steps: int):
    """Seconds of each timer of ``rank`` at each step: a model with a slow machine (its
    data loading 1.8x) and one rank whose backward turns 1.6x slower half way."""
    rnd = random.Random(rank)
    host = rank // RANKS_PER_HOST
    hosts = max(1, world // RANKS_PER_HOST)
    slow_host = host == (2 * hosts) // 3 and hosts > 1
    straggler = rank == (5 * world) // 7 and world > 1
    for s in range(steps):
        data = 0.012 * (1 + 0.2 * rnd.random()) * (1.8 if slow_host else 1.0)
        fwd = 0.035 * (1 + 0.05 * rnd.random())
        bwd = 0.070 * (1 + 0.05 * rnd.random()) * (1.6 if straggler and s >= steps // 2 else 1.0)
        yield s, (data, fwd, bwd, data + fwd + bwd + 0.003 * (1 + rnd.random()))


def rank_worker(spec: dict) -> None:
    """Log the ranks ``spec["ranks"]`` in turn (``--_worker``); see the module docstring."""
    import nblog as nb

    clock = [0.0]
    sys.modules[nb.Timer.__module__]._perf = lambda: clock[0]  # the timer's clock: the model's durations
    world, steps, job, root = spec["world"], spec["steps"], spec["job"], spec["root"]
    for rank in spec["ranks"]:
        env = rank_env(rank, world, job, root)
        if spec.get("real_env"):
            os.environ.update(env)
            run = nb.init(spec["project"])
        else:
            run = nb.init(spec["project"], _environ=env)
        timer = run.timer
        for s, ds in durations(rank, world, steps):
            for name, d in zip(TIMERS, ds, strict=True):
                with timer(name, step=s, all_ranks=True):
                    clock[0] += d
            if rank == 0:
                run.add_scalar("train/loss", 2.0 / (1 + s), step=s)
        run.finish()


def write_job(root: str, world: int, steps: int, workers: int, rank_procs: int | None) -> tuple[str, float | None]:
    """The run of a job of ``world`` ranks x ``steps`` steps (written unless already there)."""
    project = f"ranks{world}x{steps}"
    done = os.path.join(root, project + ".done")
    pdir = os.path.join(root, project)
    if os.path.exists(done):
        return os.path.join(pdir, os.listdir(pdir)[0]), None
    shutil.rmtree(pdir, ignore_errors=True)
    t0 = time.perf_counter()
    base = {"world": world, "steps": steps, "job": f"job-{project}", "root": root, "project": project}
    if rank_procs:
        pending = list(range(world))
        while pending:
            batch, pending = pending[:rank_procs], pending[rank_procs:]
            ps = [subprocess.Popen([sys.executable, __file__, "--_worker", json.dumps(
                dict(base, ranks=[r], real_env=True))], env=_env()) for r in batch]
            if any(p.wait() != 0 for p in ps):
                raise SystemExit("a rank process failed")
    else:
        ps = [subprocess.Popen([sys.executable, __file__, "--_worker", json.dumps(
            dict(base, ranks=list(range(w, world, workers))))], env=_env()) for w in range(workers)]
        if any(p.wait() != 0 for p in ps):
            raise SystemExit("a rank worker failed")
    took = time.perf_counter() - t0
    (run_id,) = os.listdir(pdir)
    with open(done, "w") as f:
        f.write(f"{took:.1f}\n")
    return os.path.join(pdir, run_id), took


_READ_TIMERS = r"""
import sys, time
import nblog
RunReader = nblog.RunReader  # imports numpy and polars: not timed
t = time.perf_counter()
df = RunReader(sys.argv[1]).timers(all_ranks=True)
print(time.perf_counter() - t, df.height)
"""

# The TUI from app creation to the timers view drawn (key 2 pressed as soon as the run
# screen is up); with "heatmap", to the heat map drawn.
_TUI_TIMERS = r"""
import asyncio, sys, time
from textual.widgets import DataTable
from nbcli.tui.app import NbTui
what = sys.argv[2]

def drawn(screen):
    if what == "heatmap":
        from nbcli.tui.widgets.heatmap import RankHeatMap
        try:
            return screen.query_one(RankHeatMap).has_data
        except Exception:
            return False
    try:
        return screen.query_one("#timer-table", DataTable).row_count > 0
    except Exception:
        return False

async def main():
    t0 = time.perf_counter()
    app = NbTui(runs=[sys.argv[1]], poll_s=0)
    async with app.run_test(size=(160, 50)) as pilot:
        pressed = False
        while True:
            try:
                app.screen.query_one("#timer-table")
            except Exception:
                await asyncio.sleep(0.01)
                continue
            if not pressed:
                await pilot.press("2")
                pressed = True
            if drawn(app.screen):
                break
            await asyncio.sleep(0.01)
        await pilot.pause()
        print(time.perf_counter() - t0)

asyncio.run(main())
"""

RANK_TARGETS = {(1024, 1000): 2.0, (8192, 100): 3.0}


def part_ranks(a, rows: list[Row], heatmap: bool, timers: bool) -> None:
    for job in a.jobs.split(","):
        world, steps = (int(x) for x in job.lower().split("x"))
        run_dir, took = write_job(a.dir, world, steps, a.workers, a.rank_procs)
        size = sum(os.path.getsize(os.path.join(run_dir, n)) for n in os.listdir(run_dir))
        how = f"{a.rank_procs} processes at a time" if a.rank_procs else f"{a.workers} processes impersonating ranks"
        print(f"{world} ranks x {steps} steps x {len(TIMERS)} timers: {run_dir} ({size / 2**20:.0f} MiB"
              + (f", written in {took:.0f} s by {how})" if took is not None else ", already written)"), flush=True)
        label = f"{world:,} ranks × {steps:,} steps"
        if timers:
            c = median_child(NB + ["timers", run_dir], a.repeat, timeout=a.timeout)
            rows.append(Row(f"`nb timers`, {label}", c.wall_s if c.rc == 0 else None, "s",
                            RANK_TARGETS.get((world, steps)), f"CPU {c.cpu_s:.2f} s, peak {c.rss_mib:,.0f} MiB" if c.rc == 0 else f"exit {c.rc}"))
            # every rank's row (the default shows each timer's slowest ranks): what nb timers printed before
            c = median_child(NB + ["timers", run_dir, "--all-ranks"], a.repeat, timeout=a.timeout)
            rows.append(Row(f"`nb timers --all-ranks`, {label}", c.wall_s if c.rc == 0 else None, "s", None,
                            f"CPU {c.cpu_s:.2f} s" if c.rc == 0 else f"exit {c.rc}"))
            c = median_child([sys.executable, "-c", _READ_TIMERS, run_dir], a.repeat, timeout=a.timeout)
            rows.append(Row(f"`RunReader.timers(all_ranks=True)`, {label}", last_float(c.out) if c.rc == 0 else None,
                            "s", None, f"peak {c.rss_mib:,.0f} MiB" if c.rc == 0 else f"exit {c.rc}"))
            c = run_child([sys.executable, "-c", _TUI_TIMERS, run_dir, "table"], timeout=a.timeout)
            rows.append(Row(f"TUI timers view first draw, {label}", last_float(c.out) if c.rc == 0 else None, "s",
                            None, "from app start" if c.rc == 0 else (f"gave up after {a.timeout:.0f} s" if c.wall_s >= a.timeout else f"exit {c.rc}")))
        if heatmap and importlib.util.find_spec("nbcli.tui.widgets.heatmap") is None:
            rows.append(Row(f"TUI rank heat map first draw, {label}", None, "s", None, "no heat map in this nbcli"))
        elif heatmap:
            c = run_child([sys.executable, "-c", _TUI_TIMERS, run_dir, "heatmap"], timeout=a.timeout)
            rows.append(Row(f"TUI rank heat map first draw, {label}", last_float(c.out) if c.rc == 0 else None, "s",
                            None, "from app start" if c.rc == 0 else f"exit {c.rc}"))


# -- shared-filesystem load ----------------------------------------------------------

MARK_DIR = "/nb-bench-mark"  # never exists: an access() of a name under it marks a phase in the trace

# Each phase starts with a marker call naming it: the calls up to the next marker are its.
_FS_CHILD = r"""
import os, sys, json
import nblog as nb
spec = json.loads(sys.argv[1])
def mark(name):
    os.access("MARK_DIR/" + name, os.F_OK)
mark("init")
run = nb.init(spec["project"], _environ=spec["env"], system=False, provenance=False, flush_interval=60)
for k in range(spec["flushes"]):
    mark(f"flush{k + 1}")
    for s in range(100):
        step = k * 100 + s
        with run.timer("time/step", step=step, all_ranks=True):
            pass
        run.add_scalar({f"train/m{i}": 0.5 for i in range(10)}, step=step)
    run.flush()
mark("finish")
run.finish()
mark("end")
""".replace("MARK_DIR", MARK_DIR)

DATA_CALLS = frozenset({"read", "write", "pread64", "pwrite64", "readv", "writev", "lseek"})
_SYSCALL = re.compile(r"^(?:\[pid\s+)?(\d+)\]?\s+(?:(\d+\.\d+)\s+)?(\w+)\(")


def strace_calls(cmd: list[str], root: str, env: dict[str, str]) -> list[tuple[float, str, str]]:
    """(time, syscall, phase) of each call of ``cmd`` that names a path under ``root``
    (or a descriptor of one); the phase is the last marker seen before it."""
    with tempfile.NamedTemporaryFile(suffix=".strace") as tr:
        subprocess.run(["strace", "-f", "-y", "-ttt", "-qq", "-s", "256", "-o", tr.name, *cmd], env=env,
                       check=True, stdout=subprocess.DEVNULL, cwd=_tree())
        calls, phase = [], "import"  # before the first marker
        with open(tr.name, errors="replace") as f:
            for line in f:
                if "resumed>" in line:
                    continue
                m = _SYSCALL.match(line)
                if not m:
                    continue
                t, name = float(m.group(2) or 0), m.group(3)
                if MARK_DIR + "/" in line:
                    phase = line.split(MARK_DIR + "/", 1)[1].split('"', 1)[0]
                    calls.append((t, "mark", phase))
                    continue
                if f'"{root}' in line or f"<{root}" in line:  # a path argument or a descriptor's path
                    calls.append((t, name, phase))
        return calls


def phase_counts(calls, phase: str) -> tuple[int, int, dict[str, int]]:
    """(metadata calls, data calls, count per syscall) in ``phase``."""
    per: dict[str, int] = {}
    for _t, name, ph in calls:
        if ph == phase and name != "mark":
            per[name] = per.get(name, 0) + 1
    meta = sum(n for k, n in per.items() if k not in DATA_CALLS)
    return meta, sum(per.values()) - meta, per


def _fmt_per(per: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))


def part_fs(a, rows: list[Row]) -> None:
    if shutil.which("strace") is None:
        rows.append(Row("file-system calls per rank", None, "", None, "strace not installed"))
        return
    root = tempfile.mkdtemp(prefix="nb-bench-fs-", dir=a.dir)
    job, flushes = "job-fs", 5
    for rank in (0, 1):  # rank 0 first: rank 1 joins its run
        spec = {"env": rank_env(rank, 16, job, root), "project": "fs", "flushes": flushes}
        calls = strace_calls([sys.executable, "-c", _FS_CHILD, json.dumps(spec)], root, _env())
        who = "rank 0" if rank == 0 else "non-zero rank"
        for fig, phases in (("`init`", ["init"]), ("the first flush", ["flush1"]),
                            ("each later flush (mean)", [f"flush{k}" for k in range(2, flushes + 1)]),
                            ("`finish`", ["finish"])):
            got = [phase_counts(calls, ph) for ph in phases]
            meta = sum(g[0] for g in got) / len(got)
            data = sum(g[1] for g in got) / len(got)
            per: dict[str, int] = {}
            for g in got:
                for k, v in g[2].items():
                    per[k] = per.get(k, 0) + v
            print(f"{who}, {fig}: {meta:g} metadata + {data:g} data calls on the run's files"
                  f" ({_fmt_per(per)}{'' if len(got) == 1 else f' over {len(got)} flushes'})", flush=True)
            rows.append(Row(f"{who}: metadata calls at {fig}", meta, "", None, f"+ {data:g} data calls"))
    # a waiting non-zero rank: rank 0 never comes (the folder absent), and a requeue whose
    # rank 0 is late (run.json of the earlier launch present, another restart count)
    for case in ("absent", "stale"):
        wroot = tempfile.mkdtemp(prefix=f"nb-bench-wait-{case}-", dir=a.dir)
        env = rank_env(1, 8192, job, wroot)
        if case == "stale":
            shutil.copytree(os.path.join(root, "fs"), os.path.join(wroot, "fs"))
            env["TORCHELASTIC_RESTART_COUNT"] = "1"
        env["NB_WAIT_S"] = str(a.wait_s)
        spec = {"env": env, "project": "fs", "flushes": 0}
        calls = strace_calls([sys.executable, "-c", _FS_CHILD, json.dumps(spec)], wroot, _env())
        marks = {ph: t for t, name, ph in calls if name == "mark"}
        start, end = marks["init"], marks["finish"]
        wait = [(t, name) for t, name, ph in calls if ph == "init" and name != "mark"]
        half = start + (end - start) / 2
        rate = sum(t >= half for t, _n in wait) / max(1e-9, end - half)  # once the back-off has settled
        in_60 = len(wait) + rate * max(0.0, 60.0 - (end - start))
        per_kind: dict[str, int] = {}
        for _t, name in wait:
            per_kind[name] = per_kind.get(name, 0) + 1
        print(f"waiting rank ({case}): {len(wait)} calls in {end - start:.1f} s ({_fmt_per(per_kind)}); "
              f"{rate:.2f}/s in the second half", flush=True)
        what = "run folder absent" if case == "absent" else "earlier launch's run.json there"
        rows.append(Row(f"a non-zero rank waiting for rank 0 ({what}): calls per second", rate, "/s", None,
                        f"~{in_60:,.0f} calls in a 60 s wait"))
        rows.append(Row(f"8,192 waiting ranks ({what}): calls per second per 1,000 ranks", rate * 1000, "/s",
                        a.poll_target, f"{rate * 8192:,.0f}/s for the job"))
        shutil.rmtree(wroot, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)


# -- many runs -----------------------------------------------------------------------


def part_runs(a, rows: list[Row]) -> None:
    sys.path.insert(0, HERE)
    from bench_ls_query import write_root

    root = os.path.join(a.dir, f"runs{a.runs}")
    done = root + ".done"
    if not os.path.exists(done):
        shutil.rmtree(root, ignore_errors=True)
        os.environ["PYTHONPATH"] = _tree()  # the sweep writers import this nblog
        took = write_root(__import__("pathlib").Path(root), a.runs, procs=2)
        with open(done, "w") as f:
            f.write(f"{took:.1f}\n")
        print(f"{a.runs} runs written with real nblog in {took:.0f} s", flush=True)
    env = _env(NB_DIR=root)
    label = f"{a.runs:,} runs"
    for fig, args in (
        (f"`nb ls`, {label}", ["ls"]),
        (f"`nb ls --where 'optim.lr < 3e-4 and model.layers >= 2'`, {label}",
         ["ls", "--where", "optim.lr < 3e-4 and model.layers >= 2"]),
        (f"`nb resume-id --latest`, {label}", ["resume-id", "sweep", "--latest"]),
    ):
        c = median_child(NB + args + ["--root", root], a.repeat, env)
        rows.append(Row(fig, c.wall_s if c.rc == 0 else None, "s", 1.0, f"exit {c.rc}" if c.rc else f"CPU {c.cpu_s:.2f} s"))
        if args == ["ls"]:  # the same without the listing cache (a first listing, or NB_CACHE_DIR=)
            c = median_child(NB + args + ["--root", root], a.repeat, dict(env, NB_CACHE_DIR=""))
            rows.append(Row(fig + ", no cache", c.wall_s if c.rc == 0 else None, "s", 1.0,
                            f"exit {c.rc}" if c.rc else f"CPU {c.cpu_s:.2f} s"))
            # on a terminal (FORCE_COLOR: Rich, as a TTY gets it): the newest 50 and a note
            c = median_child(NB + args + ["--root", root], a.repeat, dict(env, FORCE_COLOR="1", COLUMNS="200"))
            rows.append(Row(fig + ", on a terminal", c.wall_s if c.rc == 0 else None, "s", 1.0,
                            f"exit {c.rc}" if c.rc else f"CPU {c.cpu_s:.2f} s"))
    # peak memory (issue 22: 287 MiB once on 1,803 runs): the largest of --repeat runs, with
    # the listing cache and without it (a first listing reads every run.json)
    for fig, args, extra in (
        (f"`nb ls --json` peak RSS, {label}", ["ls", "--json"], {}),
        (f"`nb ls --json` peak RSS, {label}, no cache", ["ls", "--json"], {"NB_CACHE_DIR": ""}),
        (f"`nb ls --json --where 'optim.lr < 3e-4 and train/loss.min < 1'` peak RSS, {label}",
         ["ls", "--json", "--where", "optim.lr < 3e-4 and train/loss.min < 1"], {}),
    ):
        children = [run_child(NB + args + ["--root", root], dict(env, **extra)) for _ in range(a.repeat)]
        worst = max(children, key=lambda c: c.rss_mib)
        rows.append(Row(fig, worst.rss_mib if worst.rc == 0 else None, "MiB", 200.0,
                        f"exit {worst.rc}" if worst.rc else f"runs: {', '.join(f'{c.rss_mib:.0f}' for c in children)}"))


# -- long runs -----------------------------------------------------------------------


def _format_module():
    for name in ("nblog.format._format", "nblog.format", "nblog._format"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "NUMPY_POINT_DTYPE"):
            return mod
    raise SystemExit("cannot find nblog's format module")


def write_long(root: str, tags: int, steps: int, columns: bool = False) -> str:
    """A finished run of ``tags`` scalars x ``steps`` steps on rank 0, in frames of 1 MiB
    of 24-byte records; ``columns``: each stored as a COLUMNS frame, as nblog's writer
    stores them (``encode_columns``; a checkout without it writes POINTS frames)."""
    import numpy as np

    F = _format_module()
    columns = columns and hasattr(F, "encode_columns")
    run_dir = os.path.join(root, "long", f"long{tags}x{steps}" + ("-columns" if columns else ""))
    path = os.path.join(run_dir, "events.r0.s0.log")
    if os.path.exists(run_dir + ".done"):
        return run_dir
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"project": "long", "id": os.path.basename(run_dir), "status": "finished",
                   "created": 1.7e9, "sessions": [{"session": 0, "start": 1.7e9}]}, f)
    per_frame = ((1 << 20) // F.POINT_SIZE) // tags
    with open(path, "wb") as f:
        f.write(F.file_header())
        f.write(F.json_frame(F.FRAME_SESSION, {"rank": 0, "local_rank": 0, "session": 0, "host": "bench",
                                                "wall_start": 1.7e9, "world_size": 1}))
        f.write(F.frame(F.FRAME_TAGS, F.encode_tag_defs([(i, F.KIND_SCALAR, f"train/m{i}") for i in range(tags)])))
        for s0 in range(0, steps, per_frame):
            st = np.arange(s0, min(steps, s0 + per_frame), dtype=np.int64)
            rec = np.empty(len(st) * tags, F.NUMPY_POINT_DTYPE)
            rec["step"] = np.repeat(st, tags)
            rec["tag"] = np.tile(np.arange(tags, dtype=np.uint32), len(st))
            rec["value"] = np.sin(rec["step"] / 1e4) + rec["tag"]
            rec["ms"] = (rec["step"] // 10).astype(np.uint32)
            enc = F.encode_columns(rec.tobytes()) if columns else None
            f.write(F.frame(F.FRAME_COLUMNS, enc) if enc is not None else F.frame(F.FRAME_POINTS, rec.tobytes()))
        f.write(F.json_frame(F.FRAME_END, {"status": "finished", "ms": 0}))
    open(run_dir + ".done", "w").close()
    return run_dir


def write_long_envelope(run_dir: str, tags: int, steps: int) -> bool:
    """The envelope sidecar rank 0's writer thread keeps beside the log of
    :func:`write_long` (same 1 MiB frames, ``nblog/format/_envelope.py``), which the TUI
    draws its first plot from; False on a checkout without sidecars."""
    import numpy as np

    try:
        E = importlib.import_module("nblog.format._envelope")
    except ImportError:
        return False
    F = _format_module()
    per_frame = ((1 << 20) // F.POINT_SIZE) // tags
    b = E.Builder()
    for s0 in range(0, steps, per_frame):
        st = np.arange(s0, min(steps, s0 + per_frame), dtype=np.int64)
        for k in range(tags):
            v = np.sin(st / 1e4) + k
            b.add(k, st, v, float(v.min()), float(v.max()))
    log = os.path.join(run_dir, "events.r0.s0.log")
    header = {"rank": 0, "local_rank": 0, "session": 0, "host": "bench", "wall_start": 1.7e9, "world_size": 1}
    data = b.encode(header, {k: f"train/m{k}" for k in range(tags)}, os.path.getsize(log), 0)
    with open(os.path.join(run_dir, "envelope.r0.s0.bin"), "wb") as f:  # beside events.r0.s0.log
        f.write(data)
    return True


_READ_SCALARS = r"""
import sys, time
import nblog
RunReader = nblog.RunReader  # imports numpy and polars: not timed
t = time.perf_counter()
df = RunReader(sys.argv[1]).scalars()
print(time.perf_counter() - t, df.height, df.estimated_size() / 2**20)
"""

_TUI_PLOT = r"""
import asyncio, sys, time
from nbcli.tui.app import NbTui
from nbcli.tui.widgets.plot import BraillePlot

async def main():
    t0 = time.perf_counter()
    app = NbTui(runs=[sys.argv[1]], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        while True:
            plots = list(app.screen.query(BraillePlot))
            if any(len(ln.x) for p in plots for ln in p.spec.lines):
                break
            await asyncio.sleep(0.01)
        await pilot.pause()
        print(time.perf_counter() - t0)

asyncio.run(main())
"""


def part_long(a, rows: list[Row]) -> None:
    tags, steps = 10, a.long_steps
    t0 = time.perf_counter()
    run_dir = write_long(a.dir, tags, steps, columns=a.long_frames == "columns")
    points = tags * steps
    print(f"long run: {points:,} points in {run_dir} ({os.path.getsize(os.path.join(run_dir, 'events.r0.s0.log')) / 2**20:,.0f} MiB,"
          f" {time.perf_counter() - t0:.0f} s)", flush=True)
    label = f"{points / 1e6:g}M points"

    def target(t: float) -> float | None:  # the time targets are for 100M points
        return t if points >= 100_000_000 else None

    c = median_child([sys.executable, "-c", _READ_SCALARS, run_dir], a.repeat, timeout=a.timeout)
    frame_mib = float(c.out.split()[2]) if c.rc == 0 else None
    note = (f"CPU {c.cpu_s:.1f} s, peak {c.rss_mib:,.0f} MiB, frame {frame_mib:,.0f} MiB" if c.rc == 0
            else f"exit {c.rc}")
    rows.append(Row(f"`RunReader.scalars()`, {label}", last_float(c.out) if c.rc == 0 else None, "s",
                    target(4.0), note))
    out = os.path.join(a.dir, "long-export.parquet")
    c = median_child(NB + ["export", run_dir, "-o", out], a.repeat, timeout=a.timeout)
    rows.append(Row(f"`nb export` to Parquet, {label}", c.wall_s if c.rc == 0 else None, "s", target(10.0),
                    f"CPU {c.cpu_s:.1f} s, peak {c.rss_mib:,.0f} MiB" if c.rc == 0 else f"exit {c.rc}"))
    if c.rc == 0 and frame_mib:
        rows.append(Row(f"`nb export` peak memory / frame size, {label}", c.rss_mib / frame_mib, "×", 2.0,
                        f"{c.rss_mib:,.0f} / {frame_mib:,.0f} MiB"))
    if os.path.exists(out):
        os.unlink(out)
    c = run_child([sys.executable, "-c", _TUI_PLOT, run_dir], timeout=a.timeout)
    rows.append(Row(f"TUI first plot, {label}, no envelope sidecar (an older run)",
                    last_float(c.out) if c.rc == 0 else None, "s", 1.0,
                    "from app start" if c.rc == 0 else f"exit {c.rc}"))
    if write_long_envelope(run_dir, tags, steps):  # as rank 0's writer leaves it
        try:
            c = run_child([sys.executable, "-c", _TUI_PLOT, run_dir], timeout=a.timeout)
            rows.append(Row(f"TUI first plot, {label}", last_float(c.out) if c.rc == 0 else None, "s", 1.0,
                            "from app start, drawn from the envelope sidecar" if c.rc == 0 else f"exit {c.rc}"))
        finally:
            os.unlink(os.path.join(run_dir, "envelope.r0.s0.bin"))


# -- main ----------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default=",".join(DEFAULT_PARTS),
                    help="comma-separated: ranks, heatmap, fs, runs, long (default: all but long)")
    ap.add_argument("--dir", help="folder for the runs written (kept and reused); default a temp folder, removed")
    ap.add_argument("--jobs", default="1024x1000,8192x100", help="RANKSxSTEPS, comma separated")
    ap.add_argument("--workers", type=int, default=2, help="processes impersonating the ranks (ranks part)")
    ap.add_argument("--rank-procs", type=int, metavar="B",
                    help="one real process per rank instead, B at a time (slow)")
    ap.add_argument("--runs", type=int, default=20000, help="runs in the root (runs part)")
    ap.add_argument("--long-steps", type=int, default=1_000_000,
                    help="steps of the long run, 10 tags each (the issue's figure: 10000000)")
    ap.add_argument("--long-frames", choices=("columns", "points"), default="columns",
                    help="how the long run's points are stored: COLUMNS frames as nblog's writer writes "
                         "them (~12 bytes a point), or 24-byte POINTS records (older runs)")
    ap.add_argument("--wait-s", type=float, default=60.0,
                    help="how long the waiting rank waits for a rank 0 that never comes (fs part; its polls "
                         "back off for ~25 s before they settle, so a shorter wait overstates the rate)")
    ap.add_argument("--poll-target", type=float, default=1000.0,
                    help="target: calls per second per 1,000 waiting ranks (fs part): one a second per rank")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each timed command (median)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before a timed command is given up")
    ap.add_argument("--_worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._worker:
        rank_worker(json.loads(a._worker))
        return
    parts = [p.strip() for p in a.part.split(",") if p.strip()]
    unknown = set(parts) - {"ranks", "heatmap", "fs", "runs", "long"}
    if unknown:
        ap.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    tmp = None
    if a.dir is None:
        a.dir = tmp = tempfile.mkdtemp(prefix="nb-bench-scale-")
    a.dir = os.path.abspath(a.dir)
    os.makedirs(a.dir, exist_ok=True)
    print(f"nblog from {_tree()}; load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    rows: list[Row] = Rows()
    try:
        if "ranks" in parts or "heatmap" in parts:
            part_ranks(a, rows, heatmap="heatmap" in parts, timers="ranks" in parts)
        if "fs" in parts:
            part_fs(a, rows)
        if "runs" in parts:
            part_runs(a, rows)
        if "long" in parts:
            part_long(a, rows)
    finally:
        print_table(rows)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end; {os.cpu_count()} CPUs")
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
