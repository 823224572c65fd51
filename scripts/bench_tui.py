"""Benchmark ``nb tui`` on a big run and print the numbers.

    python scripts/bench_tui.py [--steps 2000000] [--tags 10] [--dir DIR] [--keep]

Writes a run of TAGS scalars × STEPS steps on rank 0 (in 1 MiB frames, as the writer
does), then, in a headless Textual app of 100×30:

- time to first plot: from creating the app to the first plot with data on screen;
- the same from the start of a new process doing what ``nb tui RUN`` does (reading
  starts before Textual is imported), for the run being written and for a copy of it
  that is finished (ends with an END frame);
- CPU of one live refresh: 100 new steps appended, poll, until the plot shows them;
- idle CPU: the app left polling every second on the finished run for 10 s;
- peak memory (max RSS) of the process.

Targets (issue 5): first plot <= 1.5 s, refresh <= 50 ms CPU, idle <= 2% of a core.
The load average is printed too: on a shared machine wall times stretch.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from nblog.format import _format as F  # noqa: E402

FRAME_RECORDS = (1 << 20) // F.POINT_SIZE


def write_run(root: str, tags: int, steps: int) -> str:
    run_dir = os.path.join(root, "bench", "big-00000000")
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        f.write('{"project": "bench", "id": "big-00000000", "status": "finished", "created": 1700000000.0,'
                ' "sessions": [{"session": 0, "start": 1700000000.0}]}')
    path = os.path.join(run_dir, "events.r0.s0.log")
    with open(path, "wb") as f:
        f.write(F.file_header())
        f.write(F.json_frame(F.FRAME_SESSION, {"rank": 0, "local_rank": 0, "session": 0, "host": "bench",
                                                "wall_start": 1.7e9, "world_size": 1}))
        f.write(F.frame(F.FRAME_TAGS, F.encode_tag_defs([(i, F.KIND_SCALAR, f"train/m{i}") for i in range(tags)])))
        chunk_steps = FRAME_RECORDS // tags
        for s0 in range(0, steps, chunk_steps):
            st = np.arange(s0, min(steps, s0 + chunk_steps), dtype=np.int64)
            rec = np.empty(len(st) * tags, F.NUMPY_POINT_DTYPE)
            rec["step"] = np.repeat(st, tags)
            rec["tag"] = np.tile(np.arange(tags, dtype=np.uint32), len(st))
            rec["value"] = np.sin(rec["step"] / 1e4) + rec["tag"]
            rec["ms"] = (rec["step"] // 10).astype(np.uint32)
            f.write(F.frame(F.FRAME_POINTS, rec.tobytes()))
    return run_dir


def close_run(run_dir: str) -> str:
    """A copy of the run whose event log ends with an END frame, as a finished run's does
    (readers map such a file instead of reading it into memory)."""
    done = run_dir + "-done"
    os.makedirs(done, exist_ok=True)
    src, dst = os.path.join(run_dir, "events.r0.s0.log"), os.path.join(done, "events.r0.s0.log")
    if not os.path.exists(dst):
        shutil.copyfile(src, dst)
        with open(dst, "ab") as f:
            f.write(F.json_frame(F.FRAME_END, {"status": "finished", "ms": 0}))
    shutil.copyfile(os.path.join(run_dir, "run.json"), os.path.join(done, "run.json"))
    return done


# What ``nb tui RUN`` does (nbcli/commands/tui.py), in a new process: start reading, import
# Textual, start the app; prints seconds from the process's start to the first plot.
_PROCESS = r"""
import asyncio, os, sys, time
import psutil
t0 = psutil.Process().create_time()
from nbcli.tui.preload import start
lives = start([sys.argv[1]])
from nbcli.tui.app import NbTui
from nbcli.tui.screens.run import PlotGrid
from nbcli.tui.widgets.plot import BraillePlot

async def main():
    app = NbTui(runs=[sys.argv[1]], poll_s=0, lives=lives)
    async with app.run_test(size=(100, 30)) as pilot:
        while True:
            try:
                plots = list(app.screen.query_one("#plots", PlotGrid).query(BraillePlot))
            except Exception:
                plots = []
            if any(len(ln.x) for p in plots for ln in p.spec.lines):
                break
            await asyncio.sleep(0.01)  # not pilot.pause: its bookkeeping costs the app CPU
        await pilot.pause()
        print(time.time() - t0)

asyncio.run(main())
"""


def first_plot_in_a_new_process(run_dir: str) -> float:
    import subprocess

    out = subprocess.run([sys.executable, "-c", _PROCESS, run_dir], capture_output=True, text=True, check=True,
                         cwd=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    return float(out.stdout.strip().splitlines()[-1])


def append_steps(run_dir: str, tags: int, first: int, n: int) -> None:
    st = np.arange(first, first + n, dtype=np.int64)
    rec = np.empty(n * tags, F.NUMPY_POINT_DTYPE)
    rec["step"] = np.repeat(st, tags)
    rec["tag"] = np.tile(np.arange(tags, dtype=np.uint32), n)
    rec["value"] = 0.5
    rec["ms"] = (rec["step"] // 10).astype(np.uint32)
    with open(os.path.join(run_dir, "events.r0.s0.log"), "ab") as f:
        f.write(F.frame(F.FRAME_POINTS, rec.tobytes()))


async def measure(run_dir: str, tags: int, steps: int) -> dict:
    from nbcli.tui.app import NbTui
    from nbcli.tui.screens.run import PlotGrid
    from nbcli.tui.widgets.plot import BraillePlot

    out = {}
    w0, c0 = time.perf_counter(), time.process_time()
    app = NbTui(runs=[run_dir], poll_s=0)  # polls are triggered by hand below

    def plotted_max() -> float:
        try:
            plots = list(app.screen.query_one("#plots", PlotGrid).query(BraillePlot))
        except Exception:
            return -1.0
        lines = [ln for p in plots for ln in p.spec.lines]
        return max((float(ln.x.max()) for ln in lines if len(ln.x)), default=-1.0)

    async with app.run_test(size=(100, 30)) as pilot:
        while plotted_max() < 0:
            await asyncio.sleep(0.01)  # not pilot.pause: its bookkeeping costs the app CPU
        await pilot.pause()  # the frame with the plot
        out["first_plot_s"] = time.perf_counter() - w0
        out["first_plot_cpu_s"] = time.process_time() - c0
        screen = app.screen
        await pilot.pause(0.5)
        await app.workers.wait_for_complete()
        # one live refresh with new points
        append_steps(run_dir, tags, steps, 100)
        c1, w1 = time.process_time(), time.perf_counter()
        screen.poll()
        while plotted_max() < steps + 99:
            await asyncio.sleep(0.01)  # not pilot.pause: its own bookkeeping would be counted
        await asyncio.sleep(0.1)  # the frame with the new points
        out["refresh_cpu_ms"] = (time.process_time() - c1) * 1000
        out["refresh_wall_ms"] = (time.perf_counter() - w1) * 1000
        # idle: poll every second on a run that does not change
        screen.set_interval(1.0, screen.poll)
        await pilot.pause(1.0)
        c2, w2 = time.process_time(), time.perf_counter()
        await asyncio.sleep(10.0)
        out["idle_cpu_percent"] = (time.process_time() - c2) / (time.perf_counter() - w2) * 100
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2_000_000)
    ap.add_argument("--tags", type=int, default=10)
    ap.add_argument("--dir", default=None, help="where to write the run (default: a temp folder)")
    ap.add_argument("--keep", action="store_true", help="keep the run afterwards")
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="nb-bench-tui-")
    try:
        t = time.perf_counter()
        run_dir = write_run(root, args.tags, args.steps)
        size = os.path.getsize(os.path.join(run_dir, "events.r0.s0.log"))
        print(f"run: {args.tags} tags x {args.steps:,} steps on rank 0, {size / 2**20:.0f} MiB "
              f"(written in {time.perf_counter() - t:.1f}s)")
        done = close_run(run_dir)
        proc_open = first_plot_in_a_new_process(run_dir)
        proc_done = first_plot_in_a_new_process(done)
        r = asyncio.run(measure(run_dir, args.tags, args.steps))
        print(f"first plot:      {r['first_plot_s']:.2f} s wall, {r['first_plot_cpu_s']:.2f} s CPU   (target <= 1.5 s)")
        print(f"first plot, as `nb tui RUN` (new process, imports included): {proc_open:.2f} s for this run "
              f"being written, {proc_done:.2f} s once finished")
        print(f"live refresh:    {r['refresh_cpu_ms']:.0f} ms CPU, {r['refresh_wall_ms']:.0f} ms wall   "
              "(100 new steps x all tags; target <= 50 ms CPU)")
        print(f"idle:            {r['idle_cpu_percent']:.2f} % of one core   (target <= 2 %)")
        print(f"peak memory:     {r['peak_rss_mib']:.0f} MiB max RSS")
        print(f"load average:    {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
