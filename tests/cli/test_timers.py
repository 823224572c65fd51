"""nb timers: per timer and rank stats, slowest rank, spread, stragglers, --last-steps, --json."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


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
    assert rows["step", 2]["mean_s"] >= 0.05  # it slept 50 ms per step


def test_slowest_rank_spread_and_straggler(cli, runs):
    rep = report(cli, runs)
    (t,) = rep["timers"]
    assert t["tag"] == "step" and t["ranks"] == 3 and t["slowest_rank"] == 2
    assert t["spread"] == t["slowest_s"] / t["median_s"]
    assert t["spread"] > 1.2 and t["straggler"] is True and t["stragglers"] == 1 and t["judged"] == 3
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
    assert report(cli, runs, "--tag", "data*") == {"ranks": [], "timers": [], "cut": [], "threshold": 1.2,
                                                    "floor_s": 0.005, "warmup_steps": 1, "min_steps": 2,
                                                    "world_size": 3}


def test_plain_tables(cli, runs):
    result = cli("timers", "ddp-00000001", "--root", str(runs))
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert "TIMER\tRANK\tCOUNT\tMEAN\tP50\tP95\tMAX\tTOTAL\tMEDIAN/STEP\tSTRAGGLER" in lines
    across = lines[lines.index("TIMER\tRANKS\tSLOWEST RANK\tSLOWEST\tMEDIAN\tSPREAD\tSTRAGGLERS\tSTRAGGLER") + 1]
    cells = across.split("\t")
    assert cells[0] == "step" and cells[2] == "2" and cells[-1] == "yes"


def test_no_timers(cli, runs):
    result = cli("timers", "nlp/dup-aaaa0001", "--root", str(runs), "--tag", "nothing")
    assert result.exit_code == 0 and result.stdout == "" and "no timers" in result.stderr


def test_bad_options(cli, runs):
    assert cli("timers", "ddp-00000001", "--root", str(runs), "--last-steps", "0").exit_code == 2
    assert cli("timers", "ddp-00000001", "--root", str(runs), "--threshold", "0.5").exit_code == 2
    assert cli("timers", "ddp-00000001", "--root", str(runs), "--floor", "-1").exit_code == 2
    assert cli("timers", "ddp-00000001", "--root", str(runs), "--warmup", "-1").exit_code == 2
    bad = cli("timers", "ddp-00000001", "--root", str(runs), "--floor", "inf")
    assert bad.exit_code == 2 and "floor_s must be a finite number" in bad.stderr


def test_hint_when_only_rank0_timed(cli, tmp_path):
    from cli_helpers import run_ranks

    root = tmp_path / "runs"
    run_ranks(root, {"stop": 3, "rank0_timers": True}, 2, "one-00000001")
    result = cli("timers", "one-00000001", "--root", str(root))
    assert result.exit_code == 0 and "only one rank logged timers" in result.stderr
    assert cli("timers", "one-00000001", "--root", str(root), "--json").stderr == ""


def plain_tables(stdout: str) -> dict[str, list[list[str]]]:
    """The tables of plain output: title -> rows of cells (the header line first)."""
    tables: dict[str, list[list[str]]] = {}
    title = None
    for line in stdout.splitlines():
        if line.startswith("# "):
            title = line[2:]
            tables[title] = []
        elif line and title is not None:
            tables[title].append(line.split("\t"))
    return tables


def test_the_per_rank_table_shows_each_timers_slowest_ranks(cli, runs):
    # issue 18: at 8,192 ranks the per-rank table was 32,768 rows; by default it keeps
    # each timer's slowest ranks (here 2 of 3), slowest first, and says how to see all
    result = cli("timers", "ddp-00000001", "--root", str(runs), "--slowest", "2")
    assert result.exit_code == 0, result.stderr
    tables = plain_tables(result.stdout)
    (rows,) = [rows for title, rows in tables.items() if "slowest ranks" in title]
    assert rows[0][:2] == ["TIMER", "RANK"]
    assert [r[1] for r in rows[1:]] == ["2", rows[2][1]] and len(rows) == 3
    assert rows[1][-1] == "yes" and rows[2][-1] == ""
    assert "--all-ranks shows every rank" in result.stderr
    every = cli("timers", "ddp-00000001", "--root", str(runs), "--slowest", "2", "--all-ranks")
    assert every.exit_code == 0 and "--all-ranks" not in every.stderr
    rows = plain_tables(every.stdout)["Timers per rank (seconds)"]
    assert [r[1] for r in rows[1:]] == ["0", "1", "2"]
    # as many ranks as --slowest or fewer: the whole table, in rank order, as before
    few = cli("timers", "ddp-00000001", "--root", str(runs), "--slowest", "3")
    assert plain_tables(few.stdout)["Timers per rank (seconds)"] == rows and few.stderr == ""


def test_plain_tables_agree_with_json(cli, tmp_path, monkeypatch):
    # 12 ranks, ranks 7 and 8 slow: the default tables are computed from frames (no row per
    # rank made in Python); they give the numbers, flags and slowest ranks --json gives.
    # The timers' clock is the model's (durations exact, whatever the machine's load).
    import sys

    import nblog as nb

    clock = [0.0]
    monkeypatch.setattr(sys.modules[nb.Timer.__module__], "_perf", lambda: clock[0])
    world = 12
    for rank in range(world):
        env = {"RANK": str(rank), "LOCAL_RANK": str(rank % 4), "WORLD_SIZE": str(world),
               "TORCHELASTIC_RUN_ID": "job-agree", "NB_DIR": str(tmp_path), "NB_HOSTNAME": f"node{rank // 4}"}
        run = nb.init("p", _environ=env, system=False, provenance=False, run_id="agree-00000001")
        for step in range(4):
            with run.timer("time/step", step=step, all_ranks=True):
                clock[0] += {7: 0.020, 8: 0.012}.get(rank, 0.001 + 1e-5 * ((rank * 7 + step) % 5))
            with run.timer("time/data", step=step, all_ranks=True):
                clock[0] += 0.002 + 1e-4 * ((rank * 3 + step) % 4)
        run.finish()
    args = ("timers", "agree-00000001", "--root", str(tmp_path))
    rep = report_of(cli, *args)
    text = cli(*args)
    assert text.exit_code == 0, text.stderr
    tables = plain_tables(text.stdout)
    across = {r[0]: r for r in next(rows for title, rows in tables.items() if title.startswith("Across"))[1:]}
    from nbcli._output import fmt_seconds

    for t in rep["timers"]:
        row = across[t["tag"]]
        assert row[1:5] == [str(t["ranks"]), str(t["slowest_rank"]), fmt_seconds(t["slowest_s"]),
                            fmt_seconds(t["median_s"])]
        assert row[6:] == [str(t["stragglers"]), "yes" if t["straggler"] else "no"]
    assert across["time/step"][2] == "7" and across["time/step"][6:] == ["2", "yes"]
    assert across["time/data"][7] == "no"
    (shown,) = [rows[1:] for title, rows in tables.items() if title.startswith("The 10 slowest")]
    for tag in ("time/step", "time/data"):
        mine = sorted((r for r in rep["ranks"] if r["tag"] == tag),
                      key=lambda r: (-r["step_s"], -r["mean_s"], r["rank"]))[:10]
        assert [row[1:] for row in shown if row[0] == tag] == [
            [str(r["rank"]), str(r["count"]), fmt_seconds(r["mean_s"]), fmt_seconds(r["p50_s"]),
             fmt_seconds(r["p95_s"]), fmt_seconds(r["max_s"]), fmt_seconds(r["total_s"]), fmt_seconds(r["step_s"]),
             "yes" if r["straggler"] else ""] for r in mine]
    # a timer with more stragglers than the table shows: the note says how many
    one = cli(*args, "--slowest", "1")
    assert "time/step: 2 stragglers" in one.stderr and "--all-ranks shows every rank" in one.stderr
    # --tag with --last-steps: the window counts the timers selected, as --json does
    assert plain_tables(cli(*args, "--tag", "*step", "--last-steps", "3", "--all-ranks").stdout)[
        "Timers per rank (seconds)"][1:] == [
        ["time/step", str(r["rank"]), "3", fmt_seconds(r["mean_s"]), fmt_seconds(r["p50_s"]), fmt_seconds(r["p95_s"]),
         fmt_seconds(r["max_s"]), fmt_seconds(r["total_s"]), fmt_seconds(r["step_s"]), "yes" if r["straggler"] else ""]
        for r in report_of(cli, *args, "--tag", "*step", "--last-steps", "3")["ranks"]]


def report_of(cli, *args):
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)

