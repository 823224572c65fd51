"""The one straggler rule (:func:`nblog.reader.straggler_frames`, issue 22 item 6) on
points with exact durations: a statistic one spike cannot move, an absolute floor,
warm-up left out, ranks waiting on a failed or dead rank not blamed, and a rank slower
on every step named after 3 steps. Then the rule against a plain-Python reference of
its definition on random timers, in every shape the fast path and the general path
take (one or several points a step, any order, several sessions, a window, cuts)."""

from __future__ import annotations

import random
import statistics

import polars as pl
import pytest

from nblog.reader import RunReader, StragglerRule, straggler_frames
from nblog.reader._views.stragglers import timer_stats_of

SCHEMA = {"tag": pl.String, "rank": pl.Int32, "session": pl.Int32, "step": pl.Int64, "value": pl.Float64}
US = 1e-6


def frame(rows) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=SCHEMA, orient="row")


def job(per_rank: dict[int, list[float]], tag: str = "time/step", session: int = 0, first: int = 0):
    """rows: rank r's durations at steps first, first+1, ... in session ``session``."""
    return [(tag, r, session, first + i, v) for r, vs in per_rank.items() for i, v in enumerate(vs)]


def named(f) -> list[int]:
    return f.ranks.filter("straggler")["rank"].to_list()


def healthy(steps: int, ranks: int = 4) -> dict[int, list[float]]:
    """41 µs a step give or take a few µs, different on each rank and step."""
    return {r: [(41 + ((3 * r + 7 * s) % 9)) * US for s in range(steps)] for r in range(ranks)}


def test_a_warm_up_step_is_no_straggler():
    # issue 22: one 8 ms first step flagged a rank whose median is 41 µs
    per_rank = healthy(12)
    per_rank[3][0] = 8e-3
    f = straggler_frames(frame(job(per_rank)))
    assert named(f) == [] and f.timers["straggler"].to_list() == [False]
    assert f.ranks["steps"].to_list() == [11] * 4  # the first step of each rank left out
    # the same step later in the run is one spike: still no straggler (the statistic)
    per_rank = healthy(12)
    per_rank[3][6] = 8e-3
    assert named(straggler_frames(frame(job(per_rank)))) == []
    # ... nor when nothing is left out as warm-up: one slow step of 12 cannot move a median
    assert named(straggler_frames(frame(job(per_rank)), StragglerRule(warmup_steps=0))) == []


def test_one_spike_does_not_name_a_rank_beside_a_real_straggler():
    # issue 22: rank 1 sleeps 2 s a step; rank 2 was flagged too for one 4 ms spike
    per_rank = healthy(10)
    per_rank[1] = [2.0 + (s % 3) * 1e-3 for s in range(10)]
    per_rank[2][4] = 4e-3
    f = straggler_frames(frame(job(per_rank)))
    assert named(f) == [1]
    (t,) = f.timers.iter_rows(named=True)
    assert t["slowest_rank"] == 1 and t["stragglers"] == 1 and t["judged"] == 4
    assert t["slowest_s"] == pytest.approx(2.0, abs=3e-3) and t["spread"] > 1000


def test_the_floor_keeps_microsecond_jitter_from_being_a_straggler():
    per_rank = {0: [41 * US] * 8, 1: [42 * US] * 8, 2: [40 * US] * 8, 3: [70 * US] * 8}  # 1.7x, 29 µs above
    rows = frame(job(per_rank))
    assert named(straggler_frames(rows)) == []
    assert named(straggler_frames(rows, StragglerRule(floor_s=0.0))) == [3]
    assert named(straggler_frames(rows, StragglerRule(floor_s=28 * US))) == [3]  # >= floor
    assert named(straggler_frames(rows, StragglerRule(floor_s=30 * US))) == []
    # the ratio still counts: 10 ms above a 1 s median is under 1.2x
    slow = frame(job({0: [1.0] * 5, 1: [1.0] * 5, 2: [1.01] * 5}))
    assert named(straggler_frames(slow)) == []
    assert named(straggler_frames(slow, StragglerRule(threshold=1.0))) == [2]


def test_a_rank_slower_on_every_step_is_named_after_three_steps():
    per_rank = healthy(3)
    per_rank[1] = [2.0, 2.0, 2.0]
    per_rank[2][2] = 4e-3  # a spike on the third step of another rank
    f = straggler_frames(frame(job(per_rank)))
    assert named(f) == [1]
    assert f.ranks["steps"].to_list() == [2] * 4
    # after 2 steps only one step per rank is left to judge: nobody is judged yet
    two = straggler_frames(frame(job({r: v[:2] for r, v in per_rank.items()})))
    assert named(two) == [] and two.timers["judged"].to_list() == [0]
    assert two.ranks["step_s"].to_list() == [None] * 4 and two.timers["slowest_rank"].to_list() == [None]


def test_ranks_waiting_on_a_failed_rank_are_not_blamed():
    # rank 3 fails at step 6; ranks 0 and 1 time their wait for its data from there on
    per_rank = healthy(12)
    for r in (0, 1):
        for s in range(6, 12):
            per_rank[r][s] = 30.0
    rows = frame(job(per_rank))
    assert named(straggler_frames(rows)) == [0, 1]  # what the rule would say without the failure
    f = straggler_frames(rows, failed=[(3, 0, 6)])
    assert named(f) == []
    assert f.cut.rows() == [(0, 6, 3)]
    assert f.ranks["steps"].to_list() == [5] * 4  # steps 1-5: warm-up before, the failure after
    assert f.ranks["count"].to_list() == [12] * 4  # the statistics keep every occurrence
    # a rank that died without an END record: from its last timed step on
    dead = frame([row for row in job(per_rank) if not (row[1] == 3 and row[3] > 6)])
    f = straggler_frames(dead, failed=[(3, 0, None)])
    assert named(f) == [] and f.cut.rows() == [(0, 6, 3)]
    # the earliest failure of a session counts; another session is not cut
    f = straggler_frames(rows, failed=[(3, 0, 9), (2, 0, 6), (1, 1, 2)])
    assert f.cut.rows() == [(0, 6, 2), (1, 2, 1)] and named(f) == []


def test_warm_up_per_session_and_window():
    # a resumed session (steps 10-19 on every rank) warms up again: its first step is out
    per_rank = healthy(10)
    rows = job(per_rank) + job({r: [8e-3] + v[1:] for r, v in healthy(10).items()}, session=1, first=10)
    f = straggler_frames(frame(rows))
    assert f.ranks["steps"].to_list() == [18] * 4 and named(f) == []
    # a window starting after a session's first step keeps its first step (it is no warm-up)
    f = straggler_frames(frame(rows), last_steps=5)
    assert f.ranks["steps"].to_list() == [5] * 4 and f.ranks["count"].to_list() == [5] * 4
    f = straggler_frames(frame(rows), last_steps=10)
    assert f.ranks["steps"].to_list() == [9] * 4


def test_durations_of_a_step_add_up():
    # timed twice a step (micro-batches): the step's duration is the sum
    rows = job({r: [10e-3] * 6 for r in range(3)}) + job({0: [10e-3] * 6, 1: [10e-3] * 6, 2: [30e-3] * 6})
    f = straggler_frames(frame(rows))
    assert f.ranks["step_s"].to_list() == pytest.approx([20e-3, 20e-3, 40e-3])
    assert f.ranks["steps"].to_list() == [5, 5, 5] and f.ranks["count"].to_list() == [12, 12, 12]
    assert named(f) == [2]


def test_ties_and_edges():
    f = straggler_frames(frame(job({5: [0.2] * 4, 3: [0.2] * 4, 9: [0.1] * 4})))
    (t,) = f.timers.iter_rows(named=True)
    assert (t["slowest_rank"], t["fastest_rank"]) == (3, 9)  # the lowest rank of equal ones
    one = straggler_frames(frame(job({7: [0.4] * 5})))  # one rank: never a straggler
    assert named(one) == [] and one.timers["spread"].to_list() == [1.0]
    zero = straggler_frames(frame(job({0: [0.0] * 4, 1: [0.0] * 4, 2: [0.5] * 4})))
    assert named(zero) == [2] and zero.timers["spread"].to_list() == [None]
    nan = frame(job({0: [float("nan")] * 4, 1: [0.1] * 4, 2: [0.1] * 4}))
    assert straggler_frames(nan).ranks["steps"].to_list() == [0, 3, 3]  # non-finite values left out
    empty = straggler_frames(frame([]))
    assert empty.ranks.is_empty() and empty.timers.is_empty()
    for bad in ({"threshold": 0.9}, {"threshold": float("inf")}, {"floor_s": -1.0}, {"warmup_steps": -1},
                {"warmup_steps": 1.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            StragglerRule(**bad)


def reference(rows, rule: StragglerRule, failed=(), last_steps=None) -> dict:
    """The rule as its docstring says it, in plain Python, one timer and rank at a time:
    {(tag, rank): (steps, step_s, straggler)}."""
    top: dict[int, int] = {}
    for _t, r, _s, st, _v in rows:
        top[r] = max(top.get(r, st), st)
    cut: dict[int, int] = {}
    for r, s, st in failed:
        if st is None:
            st = max(row[3] for row in rows if row[1] == r and row[2] == s)
        cut[s] = min(cut.get(s, st), st)
    firsts: dict[tuple, set] = {}
    for t, r, s, st, _v in rows:
        firsts.setdefault((t, r, s), set()).add(st)
    warm = {k: set(sorted(v)[: rule.warmup_steps]) for k, v in firsts.items()}
    per: dict[tuple, dict[int, float]] = {}
    present = set()
    for t, r, s, st, v in rows:
        if last_steps is not None and st <= top[r] - last_steps:
            continue
        present.add((t, r))
        if v != v or v in (float("inf"), float("-inf")) or st in warm[(t, r, s)] or (s in cut and st >= cut[s]):
            continue
        steps = per.setdefault((t, r), {})
        steps[st] = steps.get(st, 0.0) + v
    stat = {}
    for k in present:
        d = sorted(per.get(k, {}).values())
        stat[k] = (len(d), d[(len(d) - 1) // 2] if len(d) >= 2 else None)
    out = {}
    for (t, r), (n, x) in stat.items():
        judged = [y for (t2, _r), (_n, y) in stat.items() if t2 == t and y is not None]
        ref = statistics.median(judged) if judged else None
        out[(t, r)] = (n, x, bool(x is not None and len(judged) >= 2 and x >= rule.threshold * ref
                                  and x - ref >= rule.floor_s))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_rule_against_its_definition(seed):
    rnd = random.Random(seed)
    rows = []
    for t in range(rnd.randint(1, 3)):
        for r in rnd.sample(range(64), rnd.randint(1, 9)):
            slow = rnd.random() < 0.2
            sessions = rnd.choice([1, 1, 2])
            step = 0
            for s in range(sessions):
                for _ in range(rnd.randint(0, 12)):
                    for _k in range(rnd.choice([1, 1, 1, 2])):  # sometimes timed twice a step
                        v = rnd.choice([1e-3, 20e-3]) * (1 + 0.1 * rnd.random()) * (3 if slow else 1)
                        if rnd.random() < 0.05:
                            v = rnd.choice([0.5, float("nan")])
                        rows.append((f"t{t}", r, s, step, v))
                    step += rnd.choice([1, 1, 2])
    if rnd.random() < 0.5:
        rnd.shuffle(rows)  # any order: the general path
    rule = StragglerRule(rnd.choice([1.0, 1.2, 2.0]), rnd.choice([0.0, 0.005]), rnd.choice([0, 1, 1, 2]))
    ranks = sorted({row[1] for row in rows})
    failed = [(r, rnd.choice([0, 1]), rnd.choice([None, rnd.randint(0, 20)])) for r in ranks[:rnd.choice([0, 0, 1, 2])]]
    failed = [f for f in failed if f[2] is not None or any(row[1] == f[0] and row[2] == f[1] for row in rows)]
    last_steps = rnd.choice([None, None, 3, 8])
    f = straggler_frames(frame(rows), rule, failed=failed, last_steps=last_steps)
    want = reference(rows, rule, failed, last_steps)
    got = {(t, r): (n, x, flag) for t, r, n, x, flag in f.ranks.select("tag", "rank", "steps", "step_s",
                                                                        "straggler").iter_rows()}
    assert got.keys() == want.keys()
    for k in want:
        assert got[k][0] == want[k][0] and got[k][2] == want[k][2], (k, got[k], want[k])
        assert got[k][1] == pytest.approx(want[k][1]), (k, got[k], want[k])
    for t in f.timers.iter_rows(named=True):
        mine = {r: x for (tag, r), (_n, x, _f) in want.items() if tag == t["tag"] and x is not None}
        assert t["judged"] == len(mine) and t["stragglers"] == sum(
            flag for (tag, _r), (_n, _x, flag) in want.items() if tag == t["tag"])
        if mine:
            slow = max(mine, key=lambda r: (mine[r], -r))
            assert t["slowest_rank"] == slow and t["median_s"] == pytest.approx(statistics.median(mine.values()))


def test_timer_stats_are_the_statistics_of_the_frames(tmp_path):
    import nblog as nb

    for rank in range(3):
        env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "3", "TORCHELASTIC_RUN_ID": "j",
               "NB_DIR": str(tmp_path)}
        run = nb.init("p", _environ=env, system=False, provenance=False, run_id="stats-00000001")
        for step in range(6):
            with run.timer("time/step", step=step, all_ranks=True):
                pass
        run.finish()
    reader = RunReader(tmp_path / "p" / "stats-00000001")
    points = reader.timers(all_ranks=True)
    f = straggler_frames(points, last_steps=4)
    assert f.ranks.select(timer_stats_of(points).columns).equals(reader.timer_stats(last_steps=4))
