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


def fit(tmp_path: Path, epochs: int, ckpt: str = "-", *args: str, ckpt_dir: str = "ckpt", **env: str) -> str:
    proc = run([sys.executable, str(SCRIPT), "runs", ckpt_dir, str(epochs), ckpt, *args], tmp_path, clean_env(**env))
    return proc.stdout.split("run id: ")[1].split()[0]


def touched(tmp_path: Path, epochs: int, ckpt: str = "-") -> tuple[str, list[str]]:
    """fit with a callback reading ``trainer.logger.run`` in ``setup`` and ``on_fit_start``:
    the run id printed at the end, and the ids each rank's callback saw."""
    cmd = [sys.executable, str(SCRIPT), "runs", "ckpt", str(epochs), ckpt, "--touch", "setup,on_fit_start"]
    out = run(cmd, tmp_path, clean_env()).stdout
    seen = [line.rsplit(": ", 1)[1] for line in out.splitlines() if line.startswith("touched in ")]
    assert len(seen) == 4, out  # two hooks on two ranks
    return out.split("run id: ")[1].split()[0], seen


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


READ_ONLY = """
import os, sys
from nblog.integrations.lightning import NbLogger
logger = NbLogger("lit", run_name="tiny")
names = (logger.version, logger.log_dir, logger.save_dir)
print(*names, os.path.exists(os.environ["NB_DIR"]), sep="\\n")
if sys.argv[1] == "open":
    run = logger.run
    print(run.id, run.dir, logger.version, logger.log_dir, sep="\\n")
"""


def test_version_log_dir_and_save_dir_are_known_without_opening_the_run(tmp_path):
    """Reading logger.log_dir opened the run, an empty run that nb ls listed."""
    env = clean_env(NB_DIR="runs")
    for job in ({}, {"SLURM_JOB_ID": "77"}):
        out = run([sys.executable, "-c", READ_ONLY, "read"], tmp_path, {**env, **job}).stdout.split("\n")
        rid, log_dir, save_dir, root_made = out[:4]
        assert root_made == "False"
        assert not (tmp_path / "runs").exists()  # no run folder, nothing for nb ls to list
        assert rid.startswith("tiny-") and log_dir == f"runs/lit/{rid}" and save_dir == "runs"
    derived = rid
    assert run([sys.executable, "-c", READ_ONLY, "read"], tmp_path, {**env, **job}).stdout.split()[0] == derived

    # the run opened afterwards is the one they named
    out = run([sys.executable, "-c", READ_ONLY, "open"], tmp_path, env).stdout.split("\n")
    rid, log_dir = out[0], out[1]
    assert out[4:8] == [rid, log_dir, rid, log_dir]
    assert only_run(tmp_path / "runs") == tmp_path / log_dir


def test_new_job_fit_ckpt_path_last_continues_the_run_however_early_a_callback_opens_it(tmp_path):
    """A callback reading ``logger.run`` in ``setup`` opened the run before Lightning
    restored ``last.ckpt``: a new job (a new random id, no job id) made a second run."""
    rid, seen = touched(tmp_path, 1)
    assert seen == [rid] * 4
    again, seen = touched(tmp_path, 2, "last")
    assert again == rid and seen == [rid] * 4
    folder = only_run(tmp_path / "runs")
    r = nb.RunReader(folder)
    for rank in (0, 1):
        assert [s["session"] for s in r.sessions(rank)] == [0, 1]
    assert_clean_curve(r, 2, 2 * STEPS_PER_EPOCH - 1)
    assert r.scalars(["train/loss"]).filter(session=1)["step"].min() == STEPS_PER_EPOCH


def test_run_opened_before_fit_stays_and_warns_that_the_checkpoint_is_another_runs(tmp_path):
    """Before fit no one knows the checkpoint: the run opened then is this session's run,
    and nb says so once Lightning has restored another run's checkpoint."""
    one = ["--devices", "1"]
    first = fit(tmp_path, 1, "-", *one)
    cmd = [sys.executable, str(SCRIPT), "runs", "ckpt", "2", "last", *one, "--touch", "before"]
    proc = run(cmd, tmp_path, clean_env())
    second = proc.stdout.split("touched before fit: ")[1].split()[0]
    assert second != first and proc.stdout.split("run id: ")[1].split()[0] == second
    assert f"nblog: run {second!r} was opened before fit restored" in proc.stderr
    assert f"written by run {first!r}" in proc.stderr
    assert sorted(p.name for p in (tmp_path / "runs" / "lit").iterdir()) == sorted([first, second])


def test_sigterm_mid_epoch_then_requeued_job_resumes_from_last_checkpoint(tmp_path):
    """Slurm's preemption: SIGTERM to every process of the job in epoch 2, then the
    requeued job (same SLURM_JOB_ID) fits again from ckpt_path="last". Lightning's default
    ModelCheckpoint (no dirpath) keeps the checkpoints in the run folder, where the
    requeued job's "last" finds them (the run id, derived from the job id, names it)."""
    cmd = loopback([sys.executable, str(SCRIPT), "runs", "-", "3", "-", "12"])  # both ranks wait at step 12
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
    rid = fit(tmp_path, 3, "last", ckpt_dir="-", SLURM_JOB_ID="4242")  # last.ckpt: the end of epoch 1
    folder = only_run(tmp_path / "runs")
    assert folder.name == rid
    # beside the run as in a TensorBoardLogger's version folder, not ./lit/<run id>/checkpoints
    assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == [
        "epoch=0-step=8.ckpt", "epoch=1-step=16.ckpt", "epoch=2-step=24.ckpt", "last.ckpt", "nb_run_id"]
    assert (folder / "checkpoints" / "nb_run_id").read_text().strip() == rid
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    r = nb.RunReader(folder)
    assert r.ranks() == [0, 1]
    assert r.meta["sessions"][0]["end_reason"] == "SIGTERM"  # run.json: the first session was preempted
    assert_clean_curve(r, 2, 3 * STEPS_PER_EPOCH - 1)
    assert r.scalars(["train/loss"]).filter(session=1)["step"].min() == STEPS_PER_EPOCH
    hidden = r.scalars(["train/loss"], include_hidden=True).filter(hidden=True)
    assert hidden["step"].to_list() == list(range(STEPS_PER_EPOCH, 12))  # logged after last.ckpt
