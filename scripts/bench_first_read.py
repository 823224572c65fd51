#!/usr/bin/env python3
"""The first read of a run in a fresh process, as bench_peers.py measures it, for one or
more nblog trees side by side (issue 18: read 1,000,000 points >= 300x tbparse, >= 10x
trackio).

Each measurement is a new interpreter that imports nblog and polars before the clock
(as ``bench_peers.py --worker read`` does), then times ``nblog.RunReader(dir).scalars()``:
what a user waits for on a first read, the reader's own imports (numpy, where it is
needed) included. The read set (10 tags x N steps, one rank, written through
``add_scalar`` with a dict of 10) is written once with the first tree. Trees are
interleaved (A, B, A, B, ...); medians with min-max of wall and CPU seconds (the
process's user + system time: every thread), whether the read imported numpy, and the
load average are printed.

    python scripts/bench_first_read.py --tree HEAD=/tmp/head --tree new=. --repeat 9

A tree is a folder holding the ``nblog`` package (a checkout, or ``git archive`` of a
commit). ``--compile`` first writes each tree's bytecode (what ``pip install`` does), so
that no tree pays for compiling its modules (PYTHONDONTWRITEBYTECODE would make every
process compile them again).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, resource, sys, time
import nblog, polars  # before the clock, as bench_peers.py's read worker
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
t0, c0 = time.perf_counter(), cpu()
df = nblog.RunReader(sys.argv[1]).scalars()
t1, c1 = time.perf_counter(), cpu()
assert len(df) == int(sys.argv[2]), len(df)
print(json.dumps({"wall": t1 - t0, "cpu": c1 - c0, "numpy": "numpy" in sys.modules, "nblog": nblog.__file__}))
"""

WRITE = r"""
import sys, nblog
root, steps = sys.argv[1], int(sys.argv[2])
tags = [f"train/metric{k}" for k in range(10)]
run = nblog.init("bench", run_name="readset", root=root, system=False)
for i in range(steps):
    run.add_scalar({t: i * 0.001 + k for k, t in enumerate(tags)}, step=i)
run.finish()
print(run.dir)
"""


def child_env(tree: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = tree + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                    help="an nblog tree to measure (repeatable; default: this checkout)")
    ap.add_argument("--points", type=int, default=1_000_000, help="points in the read set (default 1,000,000)")
    ap.add_argument("--repeat", type=int, default=7, help="fresh processes per tree (default 7)")
    ap.add_argument("--compile", action="store_true", help="write each tree's bytecode first (as pip install does)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter (default: this one)")
    ap.add_argument("--keep", action="store_true", help="keep the read set")
    args = ap.parse_args()
    trees = [t.split("=", 1) if "=" in t else (t, t) for t in args.tree] or [("checkout", REPO)]
    for _name, path in trees:
        if not os.path.isdir(os.path.join(path, "nblog")):
            ap.error(f"{path} holds no nblog package")
        if args.compile:
            subprocess.run([args.python, "-m", "compileall", "-q", os.path.join(path, "nblog")], check=True,
                           env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
    tmp = tempfile.mkdtemp(prefix="nb-bench-first-read-")
    try:
        steps = args.points // 10
        out = subprocess.run([args.python, "-c", WRITE, tmp, str(steps)], env=child_env(trees[0][1]),
                             capture_output=True, text=True, check=True, cwd=tmp)
        run_dir = out.stdout.strip().splitlines()[-1]
        load0 = os.getloadavg()
        res: dict[str, list[dict]] = {name: [] for name, _p in trees}
        for _ in range(args.repeat):
            for name, path in trees:
                # cwd: the temporary folder, so that "-c" finds nblog on PYTHONPATH, not in a checkout
                r = subprocess.run([args.python, "-c", CHILD, run_dir, str(steps * 10)], env=child_env(path),
                                   capture_output=True, text=True, timeout=300, cwd=tmp)
                if r.returncode:
                    raise SystemExit(f"{name}: {r.stderr.strip().splitlines()[-1:]}")
                res[name].append(json.loads(r.stdout.strip().splitlines()[-1]))
                if not res[name][-1]["nblog"].startswith(os.path.abspath(path)):
                    raise SystemExit(f"{name}: nblog came from {res[name][-1]['nblog']}, not {path}")
        load1 = os.getloadavg()
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    def fig(vals: list[float]) -> str:
        return f"{statistics.median(vals) * 1e3:.0f} ms ({min(vals) * 1e3:.0f}–{max(vals) * 1e3:.0f})"

    print(f"| first read of {args.points:,} points, fresh process | wall, median (min–max) | CPU | imports numpy |")
    print("| --- | --- | --- | --- |")
    for name, rows in res.items():
        print(f"| {name} | {fig([r['wall'] for r in rows])} | {fig([r['cpu'] for r in rows])} | "
              f"{'yes' if any(r['numpy'] for r in rows) else 'no'} |")
    print(f"\n{args.repeat} fresh processes per tree, interleaved; load average {load0[0]:.2f} at the start, "
          f"{load1[0]:.2f} at the end; {os.cpu_count()} CPUs; bytecode {'compiled first' if args.compile else 'as found'}.")


if __name__ == "__main__":
    main()
