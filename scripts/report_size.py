"""The size of ``nb report``'s HTML for a big run, built from synthetic frames.

    .venv/bin/python scripts/report_size.py [--steps 2000000] [--ranks 64] [--tags 10] [--timers 2]

Writing 2M steps x 64 ranks x 10 tags (1.28 billion points) through nblog and reading
them back needs far more memory than the data the page keeps, so this feeds frames of
that size straight into the report's data code (nbcli.report._data: the same buckets,
bands and heat maps ``nb report`` builds from RunReader frames), one tag at a time, and
renders the page. Each scalar tag has every rank (as per-rank scalars will), a planted
one-step spike, and a NaN; each timer is a rank x step frame with one slow rank.
Prints the file size and the time per tag.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from nbcli.report import _data, _html


def tag_frame(steps: int, ranks: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.tile(np.arange(steps, dtype=np.int64), ranks)
    rank = np.repeat(np.arange(ranks, dtype=np.int32), steps)
    base = 2.0 / np.sqrt(1.0 + np.arange(steps) / 1000.0)
    value = np.tile(base, ranks) + rng.normal(0, 0.02, steps * ranks) + rank * 1e-3
    value[int(steps * 0.65)] = 50.0  # rank 0, one step: the spike at 1.3M of 2M
    value[steps // 3] = np.nan
    return pl.DataFrame({"rank": rank, "x": x, "value": value})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2_000_000)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--tags", type=int, default=10)
    ap.add_argument("--timers", type=int, default=2)
    ap.add_argument("-o", "--output", default="/tmp/nb-report-size.html")
    a = ap.parse_args()
    charts = []
    for i in range(a.tags):
        t0 = time.perf_counter()
        f = tag_frame(a.steps, a.ranks, i)
        t1 = time.perf_counter()
        charts.append(_data.scalar_chart(f"train/metric_{i}", [("big-00000001", f)]))
        del f
        print(f"tag {i}: {a.steps * a.ranks:,} points, made in {t1 - t0:.1f} s, "
              f"bucketed in {time.perf_counter() - t1:.1f} s", flush=True)
    heat = []
    for i in range(a.timers):
        f = tag_frame(a.steps, a.ranks, 100 + i).with_columns(
            (pl.col("value").abs() * 0.1 * pl.when(pl.col("rank") == 7).then(1.5).otherwise(1.0)).alias("value"))
        heat.append(_data.heat_map(f"time/t{i}", f, None))
        del f
    run = {"id": "big-00000001", "project": "size", "name": "big", "status": "finished", "world_size": a.ranks,
           "launcher": "torchrun", "job_id": None, "hosts": [f"node-{k}" for k in range(a.ranks // 8 or 1)],
           "created": time.time(), "version": "sim", "config": [["lr", 3e-4]], "sessions": [],
           "ranks": list(range(a.ranks)), "timers": heat, "system": [], "text": {"rows": [], "total": 0},
           "images": {"rows": [], "total": 0, "failed": 0}}
    data = {"generated": time.time(), "nb_version": "sim", "max_buckets": _data.MAX_BUCKETS, "runs": [run],
            "charts": charts}
    page = _html.render(data, "nb report: size check")
    with open(a.output, "w", encoding="utf-8") as fh:
        fh.write(page)
    size = len(page.encode("utf-8"))
    print(f"{a.tags} tags x {a.steps:,} steps x {a.ranks} ranks (+{a.timers} timer heat maps): "
          f"{size:,} bytes ({size / 2**20:.2f} MiB) -> {a.output}")


if __name__ == "__main__":
    main()
