"""The straggler rule's two forms agree (issue 18: ``nb timers`` over 8,192 ranks applies it
in Polars expressions, with no Python loop over ranks): :func:`straggler_frames` over a
frame of many timers gives, timer by timer and rank by rank, what :func:`straggler_rule`
gives on that timer's ``{rank: mean}``, also at the edges (ties, a zero or an infinite
median, one rank, an even number of ranks, means near the float maximum)."""

from __future__ import annotations

import random

import polars as pl
import pytest

from nblog.reader import straggler_frames, straggler_rule

SCHEMA = {"tag": pl.String, "rank": pl.Int32, "mean_s": pl.Float64}
KEYS = ("slowest_rank", "slowest_mean_s", "median_mean_s", "fastest_rank", "fastest_mean_s", "spread", "straggler")


def check(timers: dict[str, dict[int, float]], threshold: float) -> None:
    rows = [(tag, r, m) for tag, means in timers.items() for r, m in means.items()]
    random.Random(len(rows)).shuffle(rows)  # the frame's order is no help to the rule
    stats = pl.DataFrame(rows, schema=SCHEMA, orient="row")
    per_rank, per_timer = straggler_frames(stats, threshold)
    assert per_rank.select("tag", "rank", "mean_s").rows() == stats.rows()  # the input's order kept
    assert per_timer["tag"].to_list() == sorted(timers)
    for got in per_timer.iter_rows(named=True):
        want = straggler_rule(timers[got["tag"]], threshold)
        assert {k: got[k] for k in KEYS} == {k: want[k] for k in KEYS}, (got, timers[got["tag"]])
        assert got["ranks"] == len(timers[got["tag"]])
        flagged = per_rank.filter(pl.col("tag") == got["tag"], pl.col("straggler"))["rank"].sort().to_list()
        assert flagged == want["stragglers"]


@pytest.mark.parametrize("threshold", [1.0, 1.2, 1.5, 2.0])
def test_both_forms_agree_on_random_timers(threshold):
    rnd = random.Random(int(threshold * 10))
    for _ in range(60):
        timers = {}
        for t in range(rnd.randint(1, 5)):
            scale = rnd.choice([1.0, 1e-9, 1e300])
            ranks = rnd.sample(range(10_000), rnd.choice([1, 2, 3, 4, 7, 8, 33]))
            timers[f"time/t{t}"] = {r: rnd.random() * scale for r in ranks}
        check(timers, threshold)


@pytest.mark.parametrize("means", [
    {0: 0.1, 1: 0.1, 2: 0.1, 3: 0.3},          # even count: the median halfway between the middle two
    {5: 0.2, 3: 0.2, 9: 0.1},                  # ties: the lowest rank of equal means is slowest / fastest
    {0: 0.0, 1: 0.0, 2: 0.5},                  # a zero median: no spread, no straggler
    {0: 0.0, 1: 0.0, 2: 0.0},
    {7: 0.4},                                  # one rank: never a straggler
    {0: 1e-300, 1: 1e-300, 2: 1e308},          # an infinite ratio is a straggler, with no spread shown
    {0: 1e308, 1: 1.7e308},                    # the middle two overflow: an infinite median
    {0: 0.1, 1: 0.12, 2: 0.1},                 # exactly 1.2x the median
    {0: 1.0, 1: 1.0, 2: float("inf")},
])
def test_both_forms_agree_at_the_edges(means):
    for threshold in (1.0, 1.2, 3.0):
        check({"time/step": means, "time/data": {r: m / 2 for r, m in means.items()}}, threshold)
