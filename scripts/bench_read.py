"""Benchmark of the read side: ``nb export``, ``RunReader.scalars``, ``nb ls``, ``nb tail -f``.

    .venv/bin/python scripts/bench_read.py                 # 8 ranks x 10 tags x 1,000,000 steps
    .venv/bin/python scripts/bench_read.py --steps 100000  # a quicker look

Prints, for a synthetic run of RANKS ranks x TAGS tags x STEPS steps (80M points by
default, about 1.9 GB of event logs):

- ``nb export RUN --all-ranks -o out.parquet``: wall time of the command (a fresh process);
- ``RunReader.scalars(all_ranks=True)``: time, and peak memory (``ru_maxrss`` of a fresh
  process minus its value after the imports; tracemalloc does not see numpy and Polars
  buffers), beside the frame's own size (``DataFrame.estimated_size``);
- ``nb ls`` over a root of RUNS runs (run.json and one small event log each): wall time of
  the command, and of ``list_runs`` alone in-process;
- ``nb tail -f`` latency: from a record's bytes reaching the file to its line arriving on
  the pipe (the command polls every 0.25 s), and from ``run.add_scalar`` to the line
  (adds the writer's flush interval, 1 s by default).

Targets (issue 3): 80M points merged in <= 6 s; ``nb ls`` over 5,000 runs <= 0.5 s; tail
latency <= 1 s; reader peak memory <= 2x the frame's size.

The event logs are written directly in the on-disk format (``nblog.format._format``: a session
header, tag definitions and POINTS frames of at most 1 MiB, each checksummed), generated
with numpy, so making 80M points takes seconds, not the hours a logging loop would.
Data is kept in ``--dir`` (default: a temporary folder, removed at the end) and reused
when ``--dir`` already holds a run of the same shape.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nblog.format import _format as F  # noqa: E402

NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
RUN_ID = "bench-00000000"
PER_FRAME = (1 << 20) // F.POINT_SIZE  # points per POINTS frame, as the writer does


# -- synthetic data ------------------------------------------------------------------------


def _points_frames(rec: np.ndarray) -> bytes:
    raw = rec.tobytes()
    out = bytearray()
    step = PER_FRAME * F.POINT_SIZE
    for o in range(0, len(raw), step):
        payload = raw[o : o + step]
        head = F.FRAME_HEADER.pack(F.FRAME_MAGIC, F.FRAME_POINTS, len(payload), zlib.crc32(payload), 0)[:12]
        out += head + zlib.crc32(head).to_bytes(4, "little") + payload
    return bytes(out)


def write_event_log(path: str, rank: int, tags: int, steps: int, wall0: float, session: int = 0) -> None:
    """One rank's event log: ``tags`` scalars at every step 0..steps-1, 1 ms apart."""
    header = {
        "format_version": F.FORMAT_VERSION, "nblog_version": "bench", "project": "bench", "run_id": RUN_ID,
        "rank": rank, "local_rank": rank, "world_size": 8, "session": session, "host": "bench", "pid": 0,
        "wall_start": wall0, "monotonic_start_ns": 0, "launcher": "bench",
    }
    defs = [(i, F.KIND_SCALAR, f"train/metric_{i}") for i in range(tags)]
    dtype = np.dtype(F.NUMPY_POINT_DTYPE)
    block = PER_FRAME * 32 // tags * tags  # points per write, whole steps
    total = tags * steps
    with open(path, "wb") as f:
        f.write(F.file_header() + F.json_frame(F.FRAME_SESSION, header))
        f.write(F.frame(F.FRAME_TAGS, F.encode_tag_defs(defs)))
        for start in range(0, total, block):
            idx = np.arange(start, min(total, start + block), dtype=np.int64)
            rec = np.empty(len(idx), dtype)
            rec["step"] = idx // tags
            rec["tag"] = idx % tags
            rec["value"] = np.sin(idx * 1e-4) + 0.01 * rank
            rec["ms"] = (idx // tags).astype(np.uint32)
            f.write(_points_frames(rec))
        f.write(F.json_frame(F.FRAME_END, {"status": "finished", "ms": steps, "dropped": {}}))


def make_run(root: str, ranks: int, tags: int, steps: int) -> str:
    run_dir = os.path.join(root, "bench", RUN_ID)
    stamp = os.path.join(run_dir, ".bench-shape")
    shape = f"{ranks} {tags} {steps}"
    if os.path.exists(stamp) and open(stamp).read() == shape:
        return run_dir
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    now = time.time()
    for rank in range(ranks):
        write_event_log(os.path.join(run_dir, f"events.r{rank}.s0.log"), rank, tags, steps, now)
    meta = {
        "format_version": F.FORMAT_VERSION, "project": "bench", "id": RUN_ID, "name": "bench", "config": {},
        "created": now, "world_size": ranks, "status": "finished",
        "sessions": [{"session": 0, "start": now, "host": "bench", "first_step": 0, "last_step": steps - 1,
                      "end": now + steps / 1000}],
    }
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump(meta, f)
    with open(stamp, "w") as f:
        f.write(shape)
    return run_dir


def make_many(root: str, n: int) -> None:
    """``n`` small finished runs in 20 projects (run.json + one tiny event log each)."""
    stamp = os.path.join(root, ".bench-count")
    if os.path.exists(stamp) and open(stamp).read() == str(n):
        return
    shutil.rmtree(root, ignore_errors=True)
    small = os.path.join(root, ".small.log")
    os.makedirs(root)
    write_event_log(small, 0, 2, 10, time.time())
    blob = open(small, "rb").read()
    now = time.time()
    for i in range(n):
        d = os.path.join(root, f"project{i % 20}", f"run{i}-{i:08x}")
        os.makedirs(d)
        with open(os.path.join(d, "events.r0.s0.log"), "wb") as f:
            f.write(blob)
        meta = {"project": f"project{i % 20}", "id": f"run{i}-{i:08x}", "name": f"run{i}", "created": now - i,
                "world_size": 1, "status": "finished",
                "sessions": [{"session": 0, "start": now - i, "end": now - i + 60, "last_step": 9}]}
        with open(os.path.join(d, "run.json"), "w") as f:
            json.dump(meta, f)
    with open(stamp, "w") as f:
        f.write(str(n))


# -- measurements --------------------------------------------------------------------------


def _children_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    """Wall seconds of a command; its CPU seconds (user + system) in ``timed.cpu``."""
    cpu = _children_cpu()
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, **kwargs)
    dt = time.perf_counter() - t
    timed.cpu = _children_cpu() - cpu
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr.decode()[-2000:]}")
    return dt, out


timed.cpu = 0.0


_READER = r"""
import json, resource, sys, time
import numpy, polars
from nblog.reader._views.reader import RunReader
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t, c = time.perf_counter(), time.process_time()
df = RunReader(sys.argv[1], root=sys.argv[2]).scalars(all_ranks=True)
dt, dc = time.perf_counter() - t, time.process_time() - c
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": dt, "cpu_seconds": dc, "rows": len(df), "frame_bytes": df.estimated_size(),
                  "peak_bytes": (peak - base) * 1024}))
"""

_LIST = r"""
import sys, time
from nblog.reader._runs.catalog import list_runs
t = time.perf_counter(); rows = list_runs(sys.argv[1]); dt = time.perf_counter() - t
print(dt, len(rows))
"""


def bench_reader(root: str) -> dict:
    _dt, out = timed([sys.executable, "-c", _READER, RUN_ID, root])
    return json.loads(out.stdout)


def bench_tail(root: str, samples: int) -> tuple[list[float], list[float]]:
    """Latencies (s) from bytes on disk to a printed line, and from add_scalar to it."""
    import nblog

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_",
                                                                      "TORCHELASTIC_", "OMPI_"))}
    env["NB_DIR"] = root
    tail = subprocess.Popen(NB + ["tail", "live-00000000", "-f", "--json", "-n", "0", "--root", root],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in tail.stdout:
            lines.put((time.time(), line))

    threading.Thread(target=pump, daemon=True).start()
    run = nblog.init("bench", run_id="live-00000000", root=root, system=False, resume="auto",
                     _environ={"NB_DIR": root})
    time.sleep(3)  # the command is up and polling
    disk, api = [], []
    try:
        for i in range(samples):
            time.sleep(0.1 + (i % 7) * 0.037)  # not in phase with the polls
            t_api = time.time()
            run.add_scalar("latency", float(i), step=i)
            run.flush()  # the bytes are in the file now
            t_disk = time.time()
            got, _line = lines.get(timeout=30)
            disk.append(got - t_disk)
            api.append(got - t_api)
        # without an explicit flush: the writer thread's own interval
        for i in range(samples, samples + 3):
            t_api = time.time()
            run.add_scalar("latency", float(i), step=i)
            got, _line = lines.get(timeout=30)
            api.append(got - t_api)
    finally:
        run.finish()
        tail.terminate()
        tail.communicate(timeout=30)
    return disk, api


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1_000_000, help="steps per tag (default 1,000,000)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--tags", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5000, help="runs in the nb ls root (default 5,000)")
    ap.add_argument("--tail-samples", type=int, default=15)
    ap.add_argument("--dir", help="keep the data here and reuse it (default: a temporary folder)")
    ap.add_argument("--skip", action="append", default=[], choices=["export", "reader", "ls", "tail"])
    args = ap.parse_args()
    base = args.dir or tempfile.mkdtemp(prefix="nb-bench-read-")
    big, many, live = (os.path.join(base, x) for x in ("big", "many", "live"))
    points = args.ranks * args.tags * args.steps
    rows = []
    try:
        t = time.perf_counter()
        run_dir = make_run(big, args.ranks, args.tags, args.steps)
        size = sum(os.path.getsize(os.path.join(run_dir, f)) for f in os.listdir(run_dir))
        print(f"run: {args.ranks} ranks x {args.tags} tags x {args.steps:,} steps = {points / 1e6:.1f}M points, "
              f"{size / 1e9:.2f} GB ({time.perf_counter() - t:.1f} s to make or find)", file=sys.stderr)
        if "export" not in args.skip:
            out = os.path.join(base, "export.parquet")
            dt, _ = timed(NB + ["export", RUN_ID, "--root", big, "--all-ranks", "-o", out])
            rows.append(("nb export --all-ranks -> Parquet", f"{dt:.2f} s",
                         f"CPU {timed.cpu:.2f} s; {points / dt / 1e6:.1f}M points/s; {os.path.getsize(out) >> 20} MiB",
                         "<= 6 s (80M)"))
            os.unlink(out)
        if "reader" not in args.skip:
            r = bench_reader(big)
            ratio = r["peak_bytes"] / r["frame_bytes"]
            rows.append(("RunReader.scalars(all_ranks=True)", f"{r['seconds']:.2f} s",
                         f"CPU {r['cpu_seconds']:.2f} s; {r['rows'] / r['seconds'] / 1e6:.1f}M points/s",
                         "<= 6 s (80M)"))
            rows.append(("  peak memory above imports", f"{r['peak_bytes'] / 2**30:.2f} GiB",
                         f"{ratio:.2f}x the frame ({r['frame_bytes'] / 2**30:.2f} GiB)", "<= 2x"))
        if "ls" not in args.skip:
            t = time.perf_counter()
            make_many(many, args.runs)
            print(f"root of {args.runs} runs ready ({time.perf_counter() - t:.1f} s)", file=sys.stderr)
            _, out = timed([sys.executable, "-c", _LIST, many])
            inproc = float(out.stdout.split()[0])
            times = []
            for _ in range(3):
                times.append((timed(NB + ["ls", "--root", many])[0], timed.cpu))
            json_t = min(timed(NB + ["ls", "--root", many, "--json"])[0] for _ in range(3))
            # nb ls imports only the entry point (nbcli.app); the Typer tree (Typer, Pydantic)
            # is what every other command pays on top of that
            start = min(timed([sys.executable, "-c", "import nbcli.app"])[0] for _ in range(3))
            tree = min(timed([sys.executable, "-c", "import nbcli._tree"])[0] for _ in range(3))
            best = min(times)
            rows.append((f"nb ls, {args.runs} runs (piped)", f"{best[0]:.2f} s",
                         f"CPU {best[1]:.2f} s; list_runs {inproc:.2f} s, --json {json_t:.2f} s, "
                         f"start {start:.2f} s (Typer tree {tree:.2f} s)", "<= 0.5 s"))
        if "tail" not in args.skip:
            disk, api = bench_tail(live, args.tail_samples)
            rows.append(("nb tail -f: bytes on disk -> line", f"{statistics.median(disk) * 1e3:.0f} ms median",
                         f"max {max(disk) * 1e3:.0f} ms (polls every 250 ms)", "<= 1 s"))
            rows.append(("nb tail -f: add_scalar -> line", f"{statistics.median(api[-3:]) * 1e3:.0f} ms median",
                         f"max {max(api) * 1e3:.0f} ms (writer flushes every 1 s)", ""))
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    width = max(len(r[0]) for r in rows) if rows else 0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{'measure'.ljust(width)}  {'result':>16}  {'detail':<66}  target")
    for name, result, detail, target in rows:
        print(f"{name.ljust(width)}  {result:>16}  {detail:<66}  {target}")
    print(f"\n({os.cpu_count()} CPUs, load average {load:.1f} at the end: wall times grow with the load, "
          "CPU times much less)")


if __name__ == "__main__":
    main()
