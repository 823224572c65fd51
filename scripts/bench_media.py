"""Media benchmark: µs per call in the caller's thread, and what the writer thread pays.

    python scripts/bench_media.py [--images 100] [--histograms 30] [--repeat 3]

For a 224×224×3 uint8 image (``add_image``) and a histogram of 1,000,000 float32 values
(``add_histogram``) it prints the median, p99 and worst µs per call in the caller's
thread in two modes: "steady", one call per simulated 20 ms training step while the
writer thread encodes in between (what a training loop sees, GIL contention included),
and "burst", calls back to back while the writer sleeps (every copy lands in fresh
memory: the caller's worst case). The caller only validates and copies: no call
encodes or touches the disk. "flush ms/item" is what ``flush()`` still had to do per
call; in burst mode that is all of the writer thread's work for one item (PNG
compression or histogram statistics, and the media pack). One numpy copy of the same
data into warm memory is printed as the floor. Counts stay below the media backlog
limit, so nothing is dropped (checked).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import nblog as nb  # noqa: E402

NS = time.perf_counter_ns


def bench(run, name: str, call, n: int, pause_s: float) -> dict:
    times = []
    for i in range(n):
        t0 = NS()
        call(i)
        times.append(NS() - t0)
        if pause_s:
            time.sleep(pause_s)  # a training step: the writer thread encodes meanwhile
    t0 = NS()
    run.flush()
    flush_s = (NS() - t0) / 1e9
    return {
        "name": name,
        "median_us": statistics.median(times) / 1e3,
        "p99_us": sorted(times)[int(0.99 * (n - 1))] / 1e3,
        "max_us": max(times) / 1e3,
        "flush_ms_per_item": flush_s * 1e3 / n,
        "n": n,
    }


def copy_only_us(values: np.ndarray, n: int) -> float:
    """The floor: µs to copy the array once (what the caller must do at least)."""
    t0 = NS()
    for _ in range(n):
        values.copy()
    return (NS() - t0) / n / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--histograms", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="nb-bench-media-")
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(224, 224, 3), dtype=np.uint8)
    values = rng.standard_normal(1_000_000).astype(np.float32)
    results = []
    try:
        # steady: one call per 20 ms "training step", the writer thread (waking every
        #   50 ms) encodes in between and its buffers are reused by the next copies;
        # burst: calls back to back while the writer sleeps: every copy lands in fresh
        #   memory (page faults), the caller's worst case. flush() then encodes them all.
        for mode, interval, pause in (("steady", 0.05, 0.02), ("burst", 60.0, 0.0)):
            run = nb.init("bench", run_name=mode, root=root, system=False, flush_interval=interval, _environ={})
            run.add_image("warmup", image, step=0)  # first use imports numpy / Pillow
            run.add_histogram("warmup", values[:10], step=0)
            run.flush()
            calls = (
                ("add_image 224x224x3 uint8", lambda i, run=run: run.add_image("img", image, step=i), args.images),
                ("add_histogram 1e6 float32", lambda i, run=run: run.add_histogram("h", values, step=i), args.histograms),
            )
            for _ in range(args.repeat):
                for name, call, n in calls:
                    results.append(dict(bench(run, name, call, n, pause), mode=mode))
            run.finish()
            dropped = nb.RunReader(run.dir).sessions()[0]["dropped"]
            if dropped:
                print(f"warning: {mode}: dropped {dropped}", file=sys.stderr)
        floor_image, floor_values = copy_only_us(image, 2000), copy_only_us(values, 50)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"{'call (caller thread)':<27} {'mode':<7} {'median µs':>10} {'p99 µs':>9} {'max µs':>9} "
          f"{'flush ms/item':>14}")
    for key in dict.fromkeys((r["name"], r["mode"]) for r in results):
        rs = [r for r in results if (r["name"], r["mode"]) == key]
        print(
            f"{key[0]:<27} {key[1]:<7} {statistics.median(r['median_us'] for r in rs):>10.1f} "
            f"{statistics.median(r['p99_us'] for r in rs):>9.1f} {max(r['max_us'] for r in rs):>9.1f} "
            f"{statistics.median(r['flush_ms_per_item'] for r in rs):>14.2f}"
        )
    print(f"floor (one numpy copy into warm memory): image {floor_image:.1f} µs, "
          f"histogram values {floor_values:.1f} µs; {os.cpu_count()} CPUs")
    print("flush ms/item: what flush() still had to encode and write per call (burst: "
          "all of the work the writer thread does for one item)")

if __name__ == "__main__":
    main()
