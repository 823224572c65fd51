"""nb tail: last N events of a rank, filters, JSON Lines, and -f following live writers."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time

import pytest
from cli_helpers import clean_env, run_ranks, start, torchrun_env

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


def events(cli, runs, *args):
    result = cli("tail", "ddp-00000001", "--root", str(runs), "--json", *args)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_last_n_json_lines(cli, runs):
    evs = events(cli, runs, "-n", "4")
    assert len(evs) == 4
    assert {e["session"] for e in evs} == {1} and {e["rank"] for e in evs} == {0}
    assert [e["step"] for e in evs][-1] == 24
    assert set(evs[0]) == {"rank", "session", "step", "kind", "tag", "wall_time", "value", "text", "meta"}
    assert {e["kind"] for e in evs} <= {"scalar", "timer"}


def test_default_is_ten_and_zero_is_none(cli, runs):
    assert len(events(cli, runs)) == 10
    assert events(cli, runs, "-n", "0") == []
    everything = events(cli, runs, "-n", "100000")
    assert everything[0]["session"] == 0 and everything[-1]["session"] == 1
    assert [e["session"] for e in everything] == sorted(e["session"] for e in everything)


def test_rank_and_tag_glob(cli, runs):
    evs = events(cli, runs, "--rank", "2", "-n", "5")
    assert {(e["rank"], e["kind"], e["tag"]) for e in evs} == {(2, "timer", "step")}
    evs = events(cli, runs, "-r", "0", "--tag", "train/*", "-n", "1000")
    assert {e["tag"] for e in evs} == {"train/loss", "train/grad"}
    evs = events(cli, runs, "--tag", "samples", "--tag", "train/grad", "-n", "1000")
    assert {e["tag"] for e in evs} == {"samples", "train/grad"}


def test_nonfinite_and_text_in_json(cli, runs):
    evs = events(cli, runs, "--tag", "train/*", "-n", "1000")
    assert {"step": 5, "value": "nan"} in [{"step": e["step"], "value": e["value"]} for e in evs]
    assert any(e["value"] == "inf" and e["tag"] == "train/grad" for e in evs)
    texts = [e for e in events(cli, runs, "--tag", "samples", "-n", "10")]
    assert [t["text"] for t in texts] == ["hello \x1b[31mred\x1b[0m \u202eevil", "resumed"]


def test_system_only_when_asked(cli, runs):
    assert not any(e["kind"] == "system" for e in events(cli, runs, "-n", "100000"))
    sys_evs = events(cli, runs, "--system", "--tag", "system/*", "-n", "3")
    assert len(sys_evs) == 3 and {e["kind"] for e in sys_evs} == {"system"}
    assert events(cli, runs, "--system", "--rank", "2", "--tag", "system/*", "-n", "1")[0]["rank"] == 2


def test_plain_lines(cli, runs):
    result = cli("tail", "ddp-00000001", "--root", str(runs), "--tag", "train/loss", "-n", "2")
    assert result.exit_code == 0
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [r[1:] for r in rows] == [["s1", "23", "scalar", "train/loss", "0.0416667"],
                                     ["s1", "24", "scalar", "train/loss", "0.04"]]


def test_follow_stops_after_timeout(cli, runs):
    t0 = time.monotonic()
    result = cli("tail", "ddp-00000001", "--root", str(runs), "-f", "--timeout", "0.3", "--interval", "0.05",
                 "-n", "1")
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == 1
    assert time.monotonic() - t0 < 5


def test_follow_waits_for_a_run_that_does_not_exist_yet(cli, tmp_path):
    result = cli("tail", "later-00000001", "--root", str(tmp_path), "-f", "--timeout", "0.2")
    assert result.exit_code == 0 and result.stdout == ""
    assert "waiting for run later-00000001" in result.stderr
    # without -f it is an error
    result = cli("tail", "later-00000001", "--root", str(tmp_path))
    assert result.exit_code == 1 and "no run matches" in result.stderr


def test_follow_in_process_sees_a_live_writer(cli, tmp_path):
    root = tmp_path / "runs"
    writer = start({"stop": 6, "sleep": 0.05}, torchrun_env(0, 1, NB_DIR=str(root), NB_RUN_ID="live-00000001"))
    try:
        # the writer's log exists first (a condition: its interpreter may take seconds to start on
        # a loaded machine, longer than the follow below lasts); -n 100: what it wrote before too
        deadline = time.monotonic() + 120
        while not list(root.glob("*/live-00000001/events.r0.s0.log")) and time.monotonic() < deadline:
            time.sleep(0.02)
        result = cli("tail", "live-00000001", "--root", str(root), "-f", "--json", "--timeout", "5",
                     "--interval", "0.05", "--tag", "train/loss", "-n", "100")
    finally:
        writer.communicate(timeout=60)
    steps = [json.loads(line)["step"] for line in result.stdout.splitlines()]
    assert steps == list(range(6))


def _reader(proc: subprocess.Popen, q: queue.Queue) -> None:
    for line in proc.stdout:
        q.put(line)
    q.put(None)


def test_follow_across_a_resume_in_a_real_process(tmp_path):
    """`nb tail -f` started before the run exists follows session 0, then the session a
    resume adds, reading only appended bytes; nothing is printed twice."""
    root = tmp_path / "runs"
    tail = subprocess.Popen(
        [sys.executable, "-c", "from nbcli.app import main; main()", "tail", "fol-00000001", "-f", "--json",
         "-n", "0", "--interval", "0.05", "--tag", "train/loss", "--root", str(root)],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    q: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(tail, q), daemon=True).start()
    seen: list[tuple[int, int]] = []
    try:
        waiting = tail.stderr.readline()  # printed once it polls for the missing run
        assert waiting.startswith("waiting for run fol-00000001"), waiting
        env = torchrun_env(0, 1, NB_DIR=str(root), NB_RUN_ID="fol-00000001", NB_RESUME="auto")
        first = start({"stop": 5, "sleep": 0.02}, env)
        first.communicate(timeout=60)
        second = start({"start": 3, "stop": 8, "sleep": 0.02}, env)
        second.communicate(timeout=60)
        assert first.returncode == 0 and second.returncode == 0
        deadline = time.monotonic() + 30
        while (1, 7) not in seen and time.monotonic() < deadline:
            try:
                line = q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            ev = json.loads(line)
            seen.append((ev["session"], ev["step"]))
    finally:
        tail.terminate()
        _out, err = tail.communicate(timeout=30)
    assert seen == [(0, s) for s in range(5)] + [(1, s) for s in range(3, 8)], err


def test_rank_without_a_log_is_an_error_naming_the_ranks_there(cli, runs):
    for extra in ([], ["--json"], ["-n", "0"]):
        result = cli("tail", "ddp-00000001", "--root", str(runs), "--rank", "7", *extra)
        assert result.exit_code == 1, extra
        assert result.stdout == ""
        assert "rank 7 has no event log in run ddp-00000001" in result.stderr
        assert "ranks with event logs: 0-2" in result.stderr  # ranks 0, 1 and 2 wrote


def test_follow_waits_for_a_rank_that_has_not_written_yet(cli, runs):
    result = cli("tail", "ddp-00000001", "--root", str(runs), "--rank", "7", "-f", "--timeout", "0.2",
                 "--interval", "0.05")
    assert result.exit_code == 0 and result.stdout == ""
    assert "waiting for rank 7" in result.stderr
    assert "ranks with event logs: 0-2" in result.stderr
    assert "error" not in result.stderr


def test_rank_ranges():
    from nbcli._ranks import rank_ranges

    assert rank_ranges([]) == ""
    assert rank_ranges([3]) == "3"
    assert rank_ranges([0, 1]) == "0-1"
    assert rank_ranges([0, 1, 2, 5, 7, 8, 255]) == "0-2, 5, 7-8, 255"


def test_a_rank_without_events_says_so(cli, tmp_path):
    root = tmp_path / "runs"
    run_ranks(root, {"stop": 0}, 1, "empty-00000001")  # opened and finished, nothing logged
    for extra in ([], ["--json"]):
        result = cli("tail", "empty-00000001", "--root", str(root), *extra)
        assert result.exit_code == 0 and result.stdout == ""
        assert "no events in rank 0 of run empty-00000001 yet (add -f to wait for them)" in result.stderr
    result = cli("tail", "empty-00000001", "--root", str(root), "-f", "--timeout", "0.1", "--interval", "0.05")
    assert result.exit_code == 0 and result.stdout == ""
    assert "no events in rank 0 of run empty-00000001 yet; waiting for new ones" in result.stderr
    assert cli("tail", "empty-00000001", "--root", str(root), "-n", "0").stderr == ""  # none asked for


def test_tags_that_match_nothing_say_so(cli, runs):
    result = cli("tail", "ddp-00000001", "--root", str(runs), "--tag", "nope/*", "--tag", "x")
    assert result.exit_code == 0 and result.stdout == ""
    assert "no events of rank 0 of run ddp-00000001 match --tag nope/* x" in result.stderr
