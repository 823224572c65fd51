"""A resumed session's step counter continues after the run's last step (issue 12, item 1).

``add_scalar`` without a step counts steps. Session 0 logs 100 points (steps 0-99);
a new session of the same run logs 50 more: they must land at 100-149, so the hiding
rule (points of earlier sessions at steps >= a later session's first step are hidden)
hides nothing. Before the fix the counter restarted at 0 and all 100 earlier points
were hidden. Real processes: resume="auto"/"must", a kill -9 before finish (run.json's
last step stale), a Slurm requeue and a torchrun restart of a derived id, and the
all-ranks timers of a non-zero rank, whose current step follows the same counter.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _nbproc import HANG_GUARD_S, Done, base_env, srun_env, torchrun_env, wait

import nblog as nb
from nblog.write._runid import derive_run_id

SCRIPT = Path(__file__).resolve().parent / "_scripts" / "counter_rank.py"
PROJECT = "count"


def start(root, n, env, cwd, *, die=False, **init):
    spec = {"init": {"project": PROJECT, "root": str(root), **init}, "n": n, "die": die}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), json.dumps(spec)], env=env, cwd=cwd, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def run_all(procs) -> list[Done]:
    return [wait(p) for p in procs]


def rows(frame):
    return frame[["session", "step"]].rows()


@pytest.mark.parametrize("resume", ["auto", "must"])
def test_a_resumed_session_counts_on_after_the_last_step_and_hides_nothing(tmp_path, resume):
    root = tmp_path / "runs"
    env = base_env()
    wait(start(root, 100, env, tmp_path, run_id="cnt-00000001", resume="auto"))
    (done,) = run_all([start(root, 50, env, tmp_path, run_id="cnt-00000001", resume=resume)])
    assert done.result["session"] == 1

    r = nb.RunReader("cnt-00000001", root=str(root))
    assert rows(r.scalars()) == [(0, s) for s in range(100)] + [(1, s) for s in range(100, 150)]
    assert not r.scalars(include_hidden=True)["hidden"].any()
    assert rows(r.timers("step_time")) == rows(r.scalars())
    meta = json.loads((root / PROJECT / "cnt-00000001" / "run.json").read_text())
    assert [(s["step_start"], s["first_step"], s["last_step"]) for s in meta["sessions"]] == [
        (0, 0, 99), (100, 100, 149)]


def test_after_a_kill_9_the_counter_continues_from_the_event_log_not_a_stale_run_json(tmp_path):
    root = tmp_path / "runs"
    # writer thread asleep for the whole session: only run.flush() writes, so run.json
    # keeps the last step it had at the first flush (0) when the process is killed
    env = base_env(NB_FLUSH_INTERVAL="60", NB_PROGRESS_S="3600")
    victim = start(root, 100, env, tmp_path, die=True, run_id="kill-00000002", resume="auto")
    try:
        assert victim.stdout.readline().strip() == "READY"
        meta = json.loads((root / PROJECT / "kill-00000002" / "run.json").read_text())
        assert meta["sessions"][0]["last_step"] == 0  # stale: 99 steps were logged since
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=HANG_GUARD_S)
    finally:
        victim.kill()
    assert victim.returncode == -signal.SIGKILL
    meta = json.loads((root / PROJECT / "kill-00000002" / "run.json").read_text())
    assert meta["status"] == "running" and meta["sessions"][0]["end"] is None

    wait(start(root, 50, base_env(), tmp_path, run_id="kill-00000002", resume="auto"))
    r = nb.RunReader("kill-00000002", root=str(root))
    assert rows(r.scalars()) == [(0, s) for s in range(100)] + [(1, s) for s in range(100, 150)]


def test_a_slurm_requeue_continues_the_counter_on_every_rank(tmp_path):
    root = tmp_path / "runs"
    first = run_all([start(root, 100, base_env(**srun_env(r, [2], job_id="4242")), tmp_path,
                           run_name="job") for r in (0, 1)])
    second = run_all([start(root, 50, base_env(**srun_env(r, [2], job_id="4242", restart=1)),
                            tmp_path, run_name="job") for r in (0, 1)])
    assert [d.result["session"] for d in first + second] == [0, 0, 1, 1]
    rid = derive_run_id(PROJECT, "job", "4242")
    r = nb.RunReader(rid, root=str(root))
    expected = [(0, s) for s in range(100)] + [(1, s) for s in range(100, 150)]
    assert rows(r.scalars()) == expected
    # rank 1 logs no scalars: its all-ranks timers are at the counter's steps, rank 0's
    assert rows(r.timers("step_time", rank=1)) == expected
    assert not r.timers("step_time", rank=1, include_hidden=True)["hidden"].any()


def test_a_torchrun_restart_continues_the_counter_on_every_rank(tmp_path):
    root = tmp_path / "runs"
    for restart, n in ((0, 100), (1, 50)):
        run_all([start(root, n, base_env(**torchrun_env(r, 2, run_id="rdzv-77", restart=restart)),
                       tmp_path, run_name="tr") for r in (0, 1)])
    rid = derive_run_id(PROJECT, "tr", "rdzv-77")
    r = nb.RunReader(rid, root=str(root))
    expected = [(0, s) for s in range(100)] + [(1, s) for s in range(100, 150)]
    assert rows(r.scalars()) == expected
    assert rows(r.timers("step_time", rank=1)) == expected
    meta = json.loads((root / PROJECT / rid / "run.json").read_text())
    assert [s["restart_counts"] for s in meta["sessions"]] == [
        {"TORCHELASTIC_RESTART_COUNT": "0"}, {"TORCHELASTIC_RESTART_COUNT": "1"}]


def test_explicit_steps_stay_as_given_after_a_resume(tmp_path):
    """A restart from a checkpoint that passes its steps still hides what it replaces."""
    root = tmp_path / "runs"
    code = (
        "import sys, nblog as nb\n"
        "run = nb.init('count', run_id='exp-00000003', resume='auto', root=sys.argv[1], system=False)\n"
        "for s in range(int(sys.argv[2]), int(sys.argv[3])):\n"
        "    run.add_scalar('loss', 1.0, step=s)\n"
    )
    for a, b in ((0, 100), (60, 80)):
        p = subprocess.run([sys.executable, "-c", code, str(root), str(a), str(b)],
                           env=base_env(), cwd=tmp_path, capture_output=True, text=True,
                           timeout=HANG_GUARD_S)
        assert p.returncode == 0, p.stderr
    r = nb.RunReader("exp-00000003", root=str(root))
    assert rows(r.scalars()) == [(0, s) for s in range(60)] + [(1, s) for s in range(60, 80)]
    assert os.path.exists(root / PROJECT / "exp-00000003" / "events.r0.s1.log")
