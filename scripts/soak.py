#!/usr/bin/env python
"""Soak test: a long run with many tags, timers and fast system metrics.

    python scripts/soak.py                      # 1,000,000 steps, 20 tags (a few minutes)
    python scripts/soak.py --steps 50000        # the short variant the test suite runs

Logs ``--steps`` steps of ``--tags`` scalars (dict form) and a timer per step, with
system metrics sampled every ``--system-interval`` seconds, and prints the writer
process's RSS and open file descriptors (``/proc/self/fd``) at regular points. Then
reads the run back and checks it exactly: every tag has every step with its value,
one timer per step, system metrics present.

Exit status 0 when RSS stays flat (it grows by at most ``--max-rss-growth-mib`` over
the second half of the run, while the points logged double), the number of open
descriptors never grows, and the reader's results are exact; 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nblog as nb  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--tags", type=int, default=20)
    ap.add_argument("--system-interval", type=float, default=0.05, help="seconds between system samples")
    ap.add_argument("--samples", type=int, default=20, help="RSS / descriptor readings printed")
    ap.add_argument("--max-rss-growth-mib", type=float, default=32.0,
                    help="most the RSS may grow over the second half of the run")
    ap.add_argument("--root", help="where to write the run (default: a temporary folder, removed)")
    args = ap.parse_args(argv)

    root = args.root or tempfile.mkdtemp(prefix="nb-soak-")
    tags = [f"soak/tag{i:02d}" for i in range(args.tags)]
    offsets = [i / 32 for i in range(args.tags)]  # value = step + i/32: exact in float64
    every = max(1, args.steps // args.samples)
    readings: list[tuple[int, float, int]] = []
    failures: list[str] = []
    try:
        # provenance off: its one-shot thread holds git's pipes and files open for a moment
        # after init, which the descriptor readings below would take for a leak
        run = nb.init("soak", run_id="soak-00000000", root=root, system=["cpu", "memory", "disk", "network"],
                      system_interval=args.system_interval, provenance=False, _environ={})
        t0 = time.perf_counter()
        print(f"{'step':>9} {'rss_mib':>8} {'fds':>4} {'steps/s':>9}", flush=True)
        last_t, last_step = t0, 0
        add, timer = run.add_scalar, run.timer
        for step in range(args.steps):
            add({tag: step + off for tag, off in zip(tags, offsets, strict=True)}, step=step)
            with timer("step"):
                pass
            if (step + 1) % every == 0:
                now = time.perf_counter()
                readings.append((step + 1, rss_mib(), open_fds()))
                rate = (step + 1 - last_step) / max(now - last_t, 1e-9)
                last_t, last_step = now, step + 1
                print(f"{step + 1:>9} {readings[-1][1]:>8.1f} {readings[-1][2]:>4} {rate:>9.0f}", flush=True)
        log_s = time.perf_counter() - t0
        # a short soak can end before the sampler thread (sharing the GIL with this loop,
        # the writer and the provenance thread) took its first sample: give it up to 10 s
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            run.flush()
            if len(nb.RunReader(run.dir).system()):
                break
            time.sleep(0.05)
        run.finish()
        points = args.steps * (args.tags + 1)
        print(f"logged {args.steps} steps x {args.tags} tags + a timer ({points} points) in {log_s:.1f} s "
              f"({points / log_s:,.0f} points/s)")

        # The heap settles at the size of the largest buffer drained (about flush_interval
        # seconds of points: glibc keeps freed memory for reuse); a leak would keep growing
        # with the points logged. Flat: the second half adds at most the limit.
        early = readings[min(len(readings) - 1, max(0, len(readings) // 10 - 1))]
        half = readings[len(readings) // 2 - 1] if len(readings) > 1 else readings[0]
        peak = max(r[1] for r in readings)
        growth = readings[-1][1] - half[1]
        print(f"rss: {early[1]:.1f} MiB after {early[0]} steps, {half[1]:.1f} MiB after {half[0]}, "
              f"{readings[-1][1]:.1f} MiB at the end (second half {growth:+.1f} MiB, peak {peak:.1f} MiB)")
        if growth > args.max_rss_growth_mib:
            failures.append(f"RSS grew by {growth:.1f} MiB in the second half (limit {args.max_rss_growth_mib})")
        fds = [r[2] for r in readings]
        # the sampler thread opens /proc files for a moment: compare the lows of the first and
        # last quarters (a tenth was two readings in a short soak, both caught mid-sample)
        early, late = min(fds[: max(1, len(fds) // 4)]), min(fds[-max(1, len(fds) // 4):])
        print(f"open descriptors: {early} after {readings[0][0]} steps, {late} at the end "
              f"(readings {min(fds)}..{max(fds)})")
        if late > early:
            failures.append(f"open descriptors grew from {early} to {late}")

        import numpy as np

        t1 = time.perf_counter()
        r = nb.RunReader(run.dir)
        want_steps = np.arange(args.steps)
        for tag, off in zip(tags, offsets, strict=True):
            df = r.scalars(tag)
            if not (np.array_equal(df["step"].to_numpy(), want_steps)
                    and np.array_equal(df["value"].to_numpy(), want_steps + off)):
                failures.append(f"{tag}: {len(df)} points read, not exactly the {args.steps} logged")
        n_timers = len(r.timers("step"))
        if n_timers != args.steps:
            failures.append(f"{n_timers} timer points read, {args.steps} logged")
        n_system = len(r.system())
        if n_system == 0:
            failures.append("no system metrics read")
        (s,) = r.sessions()
        if s["skipped_bytes"] or s["pending_bytes"] or s["end"] is None or s["dropped"]:
            failures.append(f"session not clean: {s}")
        print(f"read back exactly in {time.perf_counter() - t1:.1f} s: {args.tags} tags x {args.steps} steps, "
              f"{n_timers} timers, {n_system} system points, {s['size_bytes'] / (1 << 20):.0f} MiB on disk")
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print("OK" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
