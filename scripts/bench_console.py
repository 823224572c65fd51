"""How much console capture (``nb.init(console=True)``) slows a training loop that floods
its stdout: ``python scripts/bench_console.py [--seconds S] [--rate-mb-s R] [--repeat N]``.

A child process runs a loop of fixed work (about 1 ms of Python arithmetic a step) that
also prints lines of 100 bytes at ``R`` MB/s (10 by default: after each step, the lines
due by then), for ``S`` seconds, with and
without capture, alternately ``N`` times; its original stdout is a pipe that ``cat``
empties into ``/dev/null`` (a fast terminal), or ``/dev/null`` itself with ``--sink
devnull`` (writes that cost nothing, so the pipe's own cost shows), and the run folder a
temporary one. Printed:
the median seconds per step of each, the slowdown fraction (with / without - 1), the
training process's own CPU time per step (the helper runs on another core), the
bytes the console file got, and the lines it had to drop (nb's notes in the file).
Two ways of printing: ``print`` (buffered: a pipe or file is block-buffered) and
``print(..., flush=True)`` (a write per line, as a terminal's line buffering does).

Measure on a quiet machine and compare ratios: the helper process needs a core of its
own at high rates, so on a loaded 2-core machine the figures move.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, os, resource, sys, time
console, flush, seconds, rate, root, out = sys.argv[1] == "1", sys.argv[2] == "1", float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
import nblog as nb
run = nb.init("bench", root=root, console=console, system=False)
line = "x" * 99  # 100 bytes with the newline
lines_per_s = rate * 1e6 / 100
printed = 0

def work():
    s = 0
    for i in range(12000):
        s += i * i
    return s

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

steps, t0, c0 = 0, time.perf_counter(), cpu()
end = t0 + seconds
while True:
    work()
    due = int((time.perf_counter() - t0) * lines_per_s)  # keep to the rate, whatever a step takes
    for _ in range(due - printed):
        print(line, flush=flush)
    printed = max(printed, due)
    run.add_scalar("step", steps, step=steps)
    steps += 1
    now = time.perf_counter()
    if now >= end:
        break
elapsed, cpu_s = now - t0, cpu() - c0
sys.stdout.flush()
run.finish()
with open(out, "w") as f:
    json.dump({"steps": steps, "elapsed": elapsed, "cpu": cpu_s, "bytes": printed * 100, "dir": run.dir}, f)
"""


def one(console: bool, flush: bool, seconds: float, rate: float, tmp: str, i: int, sink: str) -> dict:
    out = os.path.join(tmp, f"result-{console}-{flush}-{i}.json")
    root = os.path.join(tmp, f"runs-{i}-{int(console)}-{int(flush)}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NB_")}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-c", CHILD, str(int(console)), str(int(flush)), str(seconds), str(rate), root, out]
    with open(os.devnull, "wb") as null:
        if sink == "devnull":  # writes that cost nothing: the cost of the pipe itself shows
            subprocess.run(cmd, stdout=null, env=env, check=True, timeout=seconds * 10 + 120)
        else:  # a pipe that cat reads at once, as a terminal or torchrun's pipe does
            cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=null)
            try:
                subprocess.run(cmd, stdout=cat.stdin, env=env, check=True, timeout=seconds * 10 + 120)
            finally:
                cat.stdin.close()
                cat.wait()
    with open(out) as f:
        r = json.load(f)
    r["per_step"] = r["elapsed"] / r["steps"]
    r["cpu_per_step"] = r["cpu"] / r["steps"]
    r["file_bytes"] = r["dropped"] = 0
    if console:
        for name in os.listdir(r["dir"]):
            if name.startswith("console."):
                path = os.path.join(r["dir"], name)
                r["file_bytes"] += os.path.getsize(path)
                with open(path, "rb") as f:
                    for raw in f:
                        parts = raw.split(b"\t", 3)
                        if len(parts) == 4 and parts[2] == b"!" and parts[3].startswith(b"nb: "):
                            r["dropped"] += int(parts[3].split()[1])
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="seconds per measurement")
    ap.add_argument("--rate-mb-s", type=float, default=10.0, help="printed MB per second")
    ap.add_argument("--repeat", type=int, default=3, help="measurements of each kind")
    ap.add_argument("--sink", choices=("pipe", "devnull"), default="pipe",
                    help="the original stdout: a pipe read by cat (a terminal), or /dev/null")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for flush in (False, True):
            runs: dict[bool, list[dict]] = {False: [], True: []}
            for i in range(args.repeat):
                for console in (False, True):
                    runs[console].append(one(console, flush, args.seconds, args.rate_mb_s, tmp, i, args.sink))
            off = statistics.median(r["per_step"] for r in runs[False])
            on = statistics.median(r["per_step"] for r in runs[True])
            cpu_off = statistics.median(r["cpu_per_step"] for r in runs[False])
            cpu_on = statistics.median(r["cpu_per_step"] for r in runs[True])
            printed = statistics.median(r["bytes"] / r["elapsed"] for r in runs[True]) / 1e6
            how = "print(flush=True)" if flush else "print (buffered)"
            print(f"{how}: {args.rate_mb_s:g} MB/s asked, {printed:.1f} MB/s printed with capture")
            print(f"  ms per step without capture {off * 1e3:.3f}, with {on * 1e3:.3f}: slowdown {on / off - 1:+.1%}")
            print(f"  CPU ms per step of the training process without {cpu_off * 1e3:.3f}, with {cpu_on * 1e3:.3f}: "
                  f"{cpu_on / cpu_off - 1:+.1%}")
            for r in runs[True]:
                print(f"  console file {r['file_bytes'] / 1e6:.1f} MB for {r['bytes'] / 1e6:.1f} MB printed, "
                      f"{r['dropped']} lines dropped")


if __name__ == "__main__":
    main()
