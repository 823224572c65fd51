"""NbLogger under Lightning's own DDP launcher: 2 CPU processes, then resumed from a checkpoint.

Real Lightning, real ``strategy="ddp"`` (gloo): the launcher re-runs the script for rank 1
with ``LOCAL_RANK`` set and no shared job id, so both processes must agree on the run
through the environment the main process hands down.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from fwkit import SCRIPTS, clean_env, loopback, only_run, run

import nblog as nb

SCRIPT = SCRIPTS / "lightning_train.py"
STEPS_PER_EPOCH = 8


def fit(tmp_path: Path, epochs: int, ckpt: str = "-", **env: str) -> str:
    proc = run([sys.executable, str(SCRIPT), "runs", "ckpt", str(epochs), ckpt], tmp_path, clean_env(**env))
    return proc.stdout.split("run id: ")[1].split()[0]


def assert_clean_curve(r, sessions: int, last_step: int) -> None:
    loss = r.scalars(["train/loss"])
    steps = loss["step"].to_list()
    assert steps == list(range(last_step + 1)), steps  # each step once, none hidden twice
    assert sorted(set(loss["session"].to_list())) == list(range(sessions))
    for rank in (0, 1):
        timers = r.timers(all_ranks=True).filter(rank=rank)
        assert set(timers["tag"].to_list()) == {"time/forward"}
        assert sorted(set(timers["session"].to_list())) == list(range(sessions))


def test_ddp_two_processes_one_run_then_ckpt_path_continues_it(tmp_path):
    rid = fit(tmp_path, 2)
    folder = only_run(tmp_path / "runs")
    assert folder.name == rid
    r = nb.RunReader(folder)
    assert r.ranks() == [0, 1]
    assert r.config == {"data": "random", "lr": 0.05, "hidden": 8}  # NbLogger's + save_hyperparameters
    assert_clean_curve(r, 1, 2 * STEPS_PER_EPOCH - 1)
    assert (tmp_path / "ckpt" / "nb_run_id").read_text().strip() == rid

    # a new launch (no job id to share) resumed from the first epoch's checkpoint:
    # the run id comes from beside the checkpoint, the steps after it are replaced
    assert fit(tmp_path, 3, "ckpt/epoch=0-step=8.ckpt") == rid
    assert only_run(tmp_path / "runs") == folder
    r = nb.RunReader(folder)
    assert [s["session"] for s in r.sessions(0)] == [0, 1]
    assert [s["session"] for s in r.sessions(1)] == [0, 1]
    assert_clean_curve(r, 2, 3 * STEPS_PER_EPOCH - 1)
    loss = r.scalars(["train/loss"])
    assert loss.filter(session=1)["step"].min() == STEPS_PER_EPOCH
    hidden = r.scalars(["train/loss"], include_hidden=True).filter(hidden=True)
    assert hidden["step"].to_list() == list(range(STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH))


def test_sigterm_mid_epoch_then_requeued_job_resumes_from_last_checkpoint(tmp_path):
    """Slurm's preemption: SIGTERM to every process of the job in epoch 2, then the
    requeued job (same SLURM_JOB_ID) fits again from ckpt_path="last"."""
    cmd = loopback([sys.executable, str(SCRIPT), "runs", "ckpt", "3", "-", "12"])  # both ranks wait at step 12
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=clean_env(SLURM_JOB_ID="4242"), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        waiting = 0
        for line in proc.stdout:
            waiting += line.count("SLEEPING")
            if waiting == 2:
                break
        assert waiting == 2, "the training ended before step 12"
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode != 0
    rid = fit(tmp_path, 3, "last", SLURM_JOB_ID="4242")  # last.ckpt: the end of epoch 1
    folder = only_run(tmp_path / "runs")
    assert folder.name == rid
    r = nb.RunReader(folder)
    assert r.ranks() == [0, 1]
    assert r.meta["sessions"][0]["end_reason"] == "SIGTERM"  # run.json: the first session was preempted
    assert_clean_curve(r, 2, 3 * STEPS_PER_EPOCH - 1)
    assert r.scalars(["train/loss"]).filter(session=1)["step"].min() == STEPS_PER_EPOCH
    hidden = r.scalars(["train/loss"], include_hidden=True).filter(hidden=True)
    assert hidden["step"].to_list() == list(range(STEPS_PER_EPOCH, 12))  # logged after last.ckpt
