"""``nb hang`` at scale: the dumps of N ranks (default 8,192), made by the real writer
code (``nblog.write._hang.Watchdog``), read by ``nblog.reader.hang_report`` and by the
``nb hang --json`` command. Usage::

    python scripts/bench_hang.py [--ranks 8192] [--repeat 3]

Each rank's dump is written by a Watchdog with an injected clock and an injected Flight
Recorder record (64 entries, the shape ``fr_record`` makes; no torch process group of
8,192 ranks here): rank 5 is one all_reduce behind the others. Prints the dump size, the
time to write them, and the seconds of ``hang_report`` (warm and after dropping nothing:
the page cache is whatever it is) and of the whole ``nb hang --json`` process.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from nblog.reader import hang_report  # noqa: E402
from nblog.write import _hang as H  # noqa: E402


def record(last_seq: int):
    def make():
        entries = [{"pg_id": 0, "pg": "default_pg", "seq": s, "op": "gloo:all_reduce",
                    "state": "completed" if s < last_seq else "scheduled", "raw_state": "scheduled",
                    "p2p": False, "sizes": [[4096]]} for s in range(last_seq - 63, last_seq + 1)]
        status = {"0": {"last_enqueued_collective": last_seq, "last_started_collective": -1,
                        "last_completed_collective": last_seq - 1}}
        return {"version": "2.10", "pg_status": status, "pg_config": {}, "entries": entries}, None
    return make


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="nb-bench-hang-")
    run_dir = os.path.join(tmp, "proj", "run")
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        f.write(f'{{"world_size": {a.ranks}, "sessions": [{{"session": 0, "world_size": {a.ranks}}}]}}')
    try:
        t0 = time.perf_counter()
        for rank in range(a.ranks):
            now = [100.0]
            dog = H.Watchdog(run_dir, rank, 0, f"node{rank // 8:04d}", lambda: 41, hang_s=60, signum=None,
                             faulthandler=False, clock=lambda now=now: now[0], wall=lambda now=now: 1.7e9 + now[0],
                             record=record(1000 if rank == 5 else 1001))
            dog.poll()
            now[0] += 60
            dog.poll()
        write_s = time.perf_counter() - t0
        sizes = [e.stat().st_size for e in os.scandir(run_dir) if e.name.startswith("stacks.")]
        times = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            rep = hang_report(run_dir)
            times.append(time.perf_counter() - t)
        assert rep["suspects"] == [5], rep["reason"]
        cli = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            p = subprocess.run([sys.executable, "-c", "from nbcli.app import main; main()", "hang", "--json", run_dir],
                               capture_output=True, env={**os.environ, "PYTHONPATH": REPO})
            cli.append(time.perf_counter() - t)
            assert p.returncode == 1, p.stderr
        print(f"ranks                       {a.ranks:,}")
        print(f"dump size                   {statistics.median(sizes) / 1024:.1f} KiB median, "
              f"{sum(sizes) / 2**20:.0f} MiB in all")
        print(f"write all dumps             {write_s:.2f} s ({write_s / a.ranks * 1e3:.2f} ms a dump)")
        print(f"hang_report                 {min(times):.3f} s best, {statistics.median(times):.3f} s median")
        print(f"nb hang --json (process)    {min(cli):.3f} s best, {statistics.median(cli):.3f} s median")
        print(f"suspects                    {rep['suspects']}  reason: {rep['reason']}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
