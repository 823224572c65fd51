"""nb timers: per timer and rank stats, slowest rank, spread, stragglers, --last-steps, --json."""

from __future__ import annotations

import json


def report(cli, runs, *args):
    result = cli("timers", "ddp-00000001", "--root", str(runs), "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_per_rank_rows(cli, runs):
    rep = report(cli, runs)
    rows = {(r["tag"], r["rank"]): r for r in rep["ranks"]}
    assert set(rows) == {("step", 0), ("step", 1), ("step", 2)}
    for r in rows.values():
        assert r["count"] == 25  # visible occurrences: steps 0-24, the hidden ones left out
        assert 0 <= r["p50_s"] <= r["p95_s"] <= r["max_s"]
        assert r["mean_s"] > 0 and r["total_s"] > 0
    assert rows["step", 2]["mean_s"] >= 0.004  # it slept 4 ms per step


def test_slowest_rank_spread_and_straggler(cli, runs):
    rep = report(cli, runs)
    (t,) = rep["timers"]
    assert t["tag"] == "step" and t["ranks"] == 3 and t["slowest_rank"] == 2
    assert t["spread"] == t["slowest_mean_s"] / t["median_mean_s"]
    assert t["spread"] > 1.2 and t["straggler"] is True
    flagged = [r["rank"] for r in rep["ranks"] if r["straggler"]]
    assert flagged == [2]


def test_threshold(cli, runs):
    rep = report(cli, runs, "--threshold", "1e9")
    assert rep["threshold"] == 1e9 and rep["timers"][0]["straggler"] is False


def test_last_steps(cli, runs):
    rep = report(cli, runs, "--last-steps", "5")
    assert {r["count"] for r in rep["ranks"]} == {5}


def test_tag_glob(cli, runs):
    assert report(cli, runs, "--tag", "st*")["timers"][0]["tag"] == "step"
    assert report(cli, runs, "--tag", "data*") == {"ranks": [], "timers": [], "threshold": 1.2, "world_size": 3}


def test_plain_tables(cli, runs):
    result = cli("timers", "ddp-00000001", "--root", str(runs))
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert "TIMER\tRANK\tCOUNT\tMEAN\tP50\tP95\tMAX\tTOTAL\tSTRAGGLER" in lines
    across = lines[lines.index("TIMER\tRANKS\tSLOWEST RANK\tSLOWEST MEAN\tMEDIAN MEAN\tSPREAD\tSTRAGGLER") + 1]
    cells = across.split("\t")
    assert cells[0] == "step" and cells[2] == "2" and cells[-1] == "yes"


def test_no_timers(cli, runs):
    result = cli("timers", "nlp/dup-aaaa0001", "--root", str(runs), "--tag", "nothing")
    assert result.exit_code == 0 and result.stdout == "" and "no timers" in result.stderr


def test_bad_options(cli, runs):
    assert cli("timers", "ddp-00000001", "--root", str(runs), "--last-steps", "0").exit_code == 2
    assert cli("timers", "ddp-00000001", "--root", str(runs), "--threshold", "0.5").exit_code == 2


def test_hint_when_only_rank0_timed(cli, tmp_path):
    from cli_helpers import run_ranks

    root = tmp_path / "runs"
    run_ranks(root, {"stop": 3, "rank0_timers": True}, 2, "one-00000001")
    result = cli("timers", "one-00000001", "--root", str(root))
    assert result.exit_code == 0 and "only one rank logged timers" in result.stderr
    assert cli("timers", "one-00000001", "--root", str(root), "--json").stderr == ""
