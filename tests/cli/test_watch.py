"""nb watch --once on the shared fixture runs, and the rules of nblog.reader._views.watch fed by hand."""

from __future__ import annotations

import json
import random

import pytest

from nblog.reader._views.tail import Event
from nblog.reader._views.watch import Progress, Spike, Watcher, stall_alerts

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


def alerts(cli, runs, run, *args):
    result = cli("watch", run, "--root", str(runs), "--once", "--json", *args)
    assert "Traceback" not in result.stderr
    return result.exit_code, [json.loads(line) for line in result.stdout.splitlines()]


def test_ddp_run_nonfinite_and_straggler(cli, runs):
    code, got = alerts(cli, runs, "ddp-00000001", "--straggler-ratio", "1.2")
    assert code == 1
    rules = sorted((a["rule"], a["rank"], a["tag"], a["step"]) for a in got)
    assert ("nonfinite", 0, "train/loss", 5) in rules and ("nonfinite", 0, "train/grad", 7) in rules
    assert ("straggler", 2, "step", None) in rules
    assert not [a for a in got if a["rule"] == "stall"]  # finished: nothing is stalled
    nonfinite = [a for a in got if a["rule"] == "nonfinite"]
    assert len(nonfinite) == 2 and {a["value"] for a in nonfinite} == {"nan", "inf"}


def test_failed_run_names_the_exception(cli, runs):
    code, got = alerts(cli, runs, "solo-00000002")
    assert code == 1
    (fail,) = [a for a in got if a["rule"] == "failure"]
    assert fail["type"] == "RuntimeError" and fail["rank"] == 0 and "training diverged" in fail["message"]


def test_killed_run_is_unended_not_a_stall(runs):
    """kill -9 left the run 'running', its session open; its process (on this machine)
    is gone, so the run is stale as nb ls says, and its session ended without an END
    record: unended, not a stall; reported once however often it is polled, and the
    watch is done (it waited for nothing)."""
    import time

    watcher = Watcher("stale-00000003", runs, clock=lambda: time.time() + 3600)
    (gone,) = watcher.poll()
    assert gone["rule"] == "unended" and gone["rank"] == 0 and gone["session"] == 0
    assert "ended without an END record (killed? last step" in gone["message"]
    assert watcher.status == "stale"
    assert watcher.poll() == [] and watcher.done()


def test_resumed_session_restarting_lower_is_progress():
    p = Progress()
    for step in range(20):
        p.feed(Event(0, 0, step, "scalar", "loss", 100.0 + step, 1.0))
    p.feed(Event(0, 1, 10, "scalar", "loss", 500.0, 1.0))
    assert (p.step, p.since) == (10, 500.0)


def test_stall_names_the_rank_against_the_others():
    prog = {0: Progress(), 1: Progress()}
    for step in range(101):
        prog[0].feed(Event(0, 0, step, "timer", "data", 1000.0 + 0.1 * step, 0.1))
        if step <= 40:
            prog[1].feed(Event(1, 0, step, "timer", "data", 1000.0 + 0.1 * step, 0.1))
    now = 1000.0 + 10.5
    (alert,) = stall_alerts(prog, {0, 1}, {1: "host7"}, now, "r", k=10, floor=2.0)
    assert alert["rank"] == 1 and alert["message"] == "rank 1 on host7 stopped at step 40 while others are at 100"
    assert stall_alerts(prog, {0}, {}, now, "r", k=10, floor=2.0) == []  # rank 1's session closed


def test_spike_rule_noise_is_quiet_and_a_spike_is_not():
    rng = random.Random(0)
    rule = Spike(window=50, z=10, warmup=20)
    fired = [rule.feed(Event(0, 0, s, "scalar", "loss", float(s), rng.gauss(1.0, 0.1)), "r", None)
             for s in range(2000)]
    assert not any(fired)
    (spike,) = [a for a in (rule.feed(Event(0, 0, 2000, "scalar", "loss", 2000.0, 5.0), "r", None),) if a]
    assert spike["rule"] == "spike" and spike["z"] > 10


def test_watcher_follow_stops_when_the_run_ended(runs):
    sleeps = []
    watcher = Watcher("dup-aaaa0001", runs, sleep=sleeps.append, clock=lambda: 4e9)
    batches = list(watcher.follow(interval=5.0))
    assert batches == [[]] and sleeps == [] and watcher.done()


def test_gpu_rule_counts_samples_in_a_row_only_while_running():
    from nblog.reader._views.watch import GpuState

    rule = GpuState(idle_percent=10, samples=3)
    tag = "system/gpu0/utilization_percent"

    def sample(i, value, running=True):
        return rule.feed(Event(0, 0, i, "system", tag, float(i), value), "r", "h", running)

    assert [sample(0, 1.0), sample(1, 1.0), sample(2, 50.0), sample(3, 1.0), sample(4, 1.0, running=False)] == \
        [None] * 5  # broken by a busy sample and by a run no longer running
    assert [sample(5, 1.0), sample(6, 1.0)] == [None, None]
    alert = sample(7, 2.0)
    assert alert["rule"] == "gpu_idle" and alert["samples"] == 3 and alert["host"] == "h"
    assert rule.feed(Event(0, 0, 8, "system", "system/cpu_percent", 8.0, 0.0), "r", None, True) is None


def test_event_of_a_hostile_file_gives_an_alert_without_raising():
    from nblog.reader._views.watch import event_alert

    bad = {"kind": "failure", "type": 3, "message": ["x"], "step": True, "wall": "soon"}
    alert = event_alert(bad, "r", 2, 0, None)
    assert alert["step"] is None and alert["wall_time"] is None and alert["type"] is None
    assert alert["message"] == "failed: rank 2, before the first step, ?"
    assert event_alert({"kind": "something-new"}, "r", 0, 0, None) is None


def test_following_ends_with_status_1_when_it_reported_an_alert(cli, runs):
    """Issue 22: a followed run that failed printed "failed; 1 alert" and exited 0, where
    --once exits 1 on the same alert. One rule now: 1 when any alert was reported."""
    result = cli("watch", "solo-00000002", "--root", str(runs), "--json", "--interval", "0.05", "--timeout", "120")
    rules = [json.loads(line)["rule"] for line in result.stdout.splitlines()]
    assert "failure" in rules and "Traceback" not in result.stderr
    assert f"solo-00000002 failed; {len(rules)} alert" in result.stderr  # it ended: the run is over
    assert result.exit_code == 1


def test_following_a_clean_run_ends_with_status_0(cli, runs):
    result = cli("watch", "dup-aaaa0001", "--root", str(runs), "--json", "--interval", "0.05", "--timeout", "120")
    assert (result.exit_code, result.stdout) == (0, "")
    assert "dup-aaaa0001 finished; 0 alerts" in result.stderr


def test_following_ends_with_status_1_after_an_alert(cli, runs):
    """The run killed with SIGKILL on this machine (its pid gone: writer_alive) is
    reported "unended" and following ends there, before --timeout, with status 1: an
    alert was reported (a stall would need the writer alive)."""
    result = cli("watch", "stale-00000003", "--root", str(runs), "--json", "--interval", "0.05", "--timeout", "30",
                 "--stall-k", "0", "--stall-floor", "0")
    rules = [json.loads(line)["rule"] for line in result.stdout.splitlines()]
    assert rules == ["unended"], result.stdout
    assert result.exit_code == 1
