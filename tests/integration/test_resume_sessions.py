"""Sessions and resume across real processes: the hiding rule is per rank.

A restart from a checkpoint logs again from the checkpoint's step in a new session;
every reader hides the earlier sessions' points at steps >= that session's first step,
within that rank only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from _nbproc import base_env, mpirun_env, run_ranks, srun_env, start_rank, wait

import nblog as nb
from nblog.write._runid import derive_run_id

PROJECT = "resume"


def spec(root, steps, **init):
    return {"init": {"project": PROJECT, "root": str(root), **init}, "steps": list(steps)}


def test_resume_hides_exactly_the_rule_per_rank(tmp_path):
    root = tmp_path / "runs"
    run_id = "res-0000beef"
    env = {r: base_env(**mpirun_env(r, 4), NB_RUN_ID=run_id, NB_RESUME="auto") for r in (0, 3)}
    # session 0: both ranks log steps 0..99 (ranks 1 and 2 never start: nobody waits for them)
    run_ranks([(spec(root, (0, 100)), env[0]), (spec(root, (0, 100)), env[3])], tmp_path)
    # session 1: rank 0 restarts from step 50, rank 3 from step 70
    done = run_ranks([(spec(root, (50, 80)), env[0]), (spec(root, (70, 90)), env[3])], tmp_path)
    assert [d.result["session"] for d in done] == [1, 1]

    r = nb.RunReader(run_id, root=str(root))
    # rank 0: session 0 is hidden from step 50 on
    rows = r.scalars()[["session", "step"]].rows()
    assert rows == [(0, s) for s in range(50)] + [(1, s) for s in range(50, 80)]
    assert r.text()[["session", "step"]].rows() == [(0, s) for s in range(0, 50, 10)] + [(1, 50), (1, 60), (1, 70)]
    timers0 = r.timers("step_time")[["session", "step"]].rows()
    assert timers0 == rows
    # rank 3: hidden from step 70 on; rank 0's restart at 50 does not touch it
    rows3 = r.timers("step_time", rank=3)[["session", "step"]].rows()
    assert rows3 == [(0, s) for s in range(70)] + [(1, s) for s in range(70, 90)]
    merged = r.timers("step_time", all_ranks=True)
    assert merged.filter(merged["rank"] == 3)[["session", "step"]].rows() == rows3
    assert merged.filter(merged["rank"] == 0)[["session", "step"]].rows() == rows

    # hidden points stay on disk, flagged
    full = r.scalars(include_hidden=True)
    assert len(full) == 130
    assert sorted(full.filter(full["hidden"])["step"].to_list()) == list(range(50, 100))
    assert set(full.filter(full["hidden"])["session"].to_list()) == {0}
    full3 = r.timers("step_time", rank=3, include_hidden=True)
    assert sorted(full3.filter(full3["hidden"])["step"].to_list()) == list(range(70, 100))

    # rank 0 hides 50 scalars + 50 timers x 2 + 5 texts; rank 3 hides 30 timers
    assert [(s["session"], s["first_step"], s["hidden_points"]) for s in r.sessions(0)] == [
        (0, 0, 150 + 5), (1, 50, 0)]
    assert [(s["session"], s["first_step"], s["hidden_points"]) for s in r.sessions(3)] == [
        (0, 0, 30), (1, 70, 0)]

    meta = json.loads((root / PROJECT / run_id / "run.json").read_text())
    assert [(s["session"], s["first_step"]) for s in meta["sessions"]] == [(0, 0), (1, 50)]
    assert meta["status"] == "finished"


def test_a_restart_with_the_same_slurm_job_id_continues_the_run(tmp_path):
    root = tmp_path / "runs"
    first = run_ranks(
        [(spec(root, (0, 20), run_name="job"), base_env(**srun_env(r, [2], job_id="808"))) for r in (0, 1)],
        tmp_path,
    )
    requeued = [
        ({**spec(root, (10, 15), run_name="job"), "log_level": "INFO"},
         base_env(**srun_env(r, [2], job_id="808", restart=1)))
        for r in (0, 1)
    ]
    second = run_ranks(requeued, tmp_path)
    expected = derive_run_id(PROJECT, "job", "808")
    assert {d.result["id"] for d in first + second} == {expected}
    assert [d.result["session"] for d in second] == [1, 1]
    assert "continuing it in a new session" in second[0].err
    meta = json.loads((root / PROJECT / expected / "run.json").read_text())
    assert [s["restart_counts"] for s in meta["sessions"]] == [{}, {"SLURM_RESTART_COUNT": "1"}]
    r = nb.RunReader(expected, root=str(root))
    assert r.scalars()["step"].to_list() == list(range(15))
    assert r.timers("step_time", rank=1)[["session", "step"]].rows() == (
        [(0, s) for s in range(10)] + [(1, s) for s in range(10, 15)])


def test_an_explicit_run_id_that_exists_without_resume_fails_on_rank_0(tmp_path):
    root = tmp_path / "runs"
    env = base_env(NB_RUN_ID="taken-00000001")
    wait(start_rank(spec(root, (0, 3)), env, tmp_path))
    run_dir = root / PROJECT / "taken-00000001"
    before = sorted(os.listdir(run_dir)), (run_dir / "run.json").read_bytes()
    again = wait(start_rank(spec(root, (0, 3)), env, tmp_path), expect_rc=1)
    assert "FileExistsError" in again.err and "resume='auto'" in again.err
    assert (sorted(os.listdir(run_dir)), (run_dir / "run.json").read_bytes()) == before


def test_resume_must_on_a_missing_run_fails_and_creates_nothing(tmp_path):
    root = tmp_path / "runs"
    env = base_env(NB_RUN_ID="missing-00000002", NB_RESUME="must")
    done = wait(start_rank(spec(root, (0, 3)), env, tmp_path), expect_rc=1)
    assert "FileNotFoundError" in done.err and "missing-00000002" in done.err
    assert not (root / PROJECT / "missing-00000002").exists()


THREE = """
import nblog as nb
run = nb.init("p", run_id="garb-00000000", resume="auto", system=False, config={"lr": 0.1})
for _ in range(10):
    run.add_scalar("loss", 1.0)
run.finish()
print("SESSION", run.session, flush=True)
"""


def test_a_garbage_run_json_keeps_each_sessions_end_and_steps_from_its_log(tmp_path):
    """Sessions 0, 1, 2 of one id, run.json overwritten with garbage before the third:
    run.json.bak (written by the second) lacks session 1, which is rebuilt from its
    event log, with its end, reason, duration and steps 10-19, not only its header;
    its config is marked unknown (headers hold none)."""
    from _nbproc import start_code

    root = tmp_path / "runs"
    env = base_env(NB_DIR=str(root))
    run_dir = root / "p" / "garb-00000000"
    outs = []
    for i in range(3):
        if i == 2:
            (run_dir / "run.json").write_text('{"garbage')
        done = wait(start_code(THREE, env, tmp_path))
        assert f"SESSION {i}" in done.out, done.err
        outs.append(done)
    assert "unreadable" in outs[2].err  # the warning that history came from copies and logs
    sessions = json.loads((run_dir / "run.json").read_text())["sessions"]
    assert [s["session"] for s in sessions] == [0, 1, 2]
    s1 = sessions[1]
    assert s1["rebuilt"] is True and s1["config_unknown"] is True
    assert (s1["first_step"], s1["last_step"]) == (10, 19)
    assert isinstance(s1["end"], float) and s1["end"] >= s1["start"]
    assert s1["end_reason"] is None and s1["end_status"] == "finished" and s1["duration_s"] >= 0
    assert (sessions[2]["first_step"], sessions[2]["last_step"]) == (20, 29)
    from nblog.reader._answers.overview import overview

    shown = overview(nb.RunReader(str(run_dir)))["sessions"]
    assert [s["config_unknown"] for s in shown] == [False, True, False]
    assert shown[1]["end"] == s1["end"] and shown[1]["last_step"] == 19
    # and nb show says so, rather than showing the run's config as if it were session 1's
    show = subprocess.run([sys.executable, "-c", "from nbcli.app import main; main()", "show", str(run_dir)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert show.returncode == 0, show.stderr
    assert "session 1: config unknown (rebuilt from its event log" in show.stdout
