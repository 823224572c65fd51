"""The real main job: ``torchrun --nproc-per-node 4 scripts/train_ddp.py``, read back.

Four real processes train the digits MLP with DistributedDataParallel (gloo, CPU) and log
through nblog; the run is then read back with ``nblog.RunReader``. The second test crashes
a run after its first checkpoint and resumes it, and checks the hiding rule on the result.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nblog as nb

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "train_ddp.py"
LOOPBACK = ["env", "NB_LOOPBACK=require", "bash", str(REPO / "scripts" / "loopback.sh")]
TIMERS = {"time/data", "time/forward", "time/backward", "time/optimizer"}
TIMEOUT_S = 300


def torchrun(tmp_path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the training under the real torchrun (4 ranks) of this interpreter's venv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NB_", "SLURM_", "OMPI_", "PMI", "TORCHELASTIC_"))
        and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    cmd = [
        # in a network namespace of loopback only: torchrun's stores listen on every interface
        *LOOPBACK,
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "4",
        str(SCRIPT),
        "--root",
        str(tmp_path / "runs"),
        "--ckpt-dir",
        str(tmp_path / "ckpt"),
        *args,
    ]
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def run_id_of(proc: subprocess.CompletedProcess) -> str:
    m = re.search(r"^run id: (\S+)$", proc.stdout, re.M)
    assert m, f"no run id printed:\n{proc.stdout}\n{proc.stderr}"
    return m.group(1)


@pytest.mark.slow
def test_four_rank_training_is_logged_and_read_back(tmp_path: Path) -> None:
    proc = torchrun(tmp_path, "--max-steps", "6", "--epochs", "1")
    run_id = run_id_of(proc)
    run_dir = tmp_path / "runs" / "digits" / run_id
    assert f"run folder: {run_dir}" in proc.stdout

    r = nb.RunReader(run_dir)
    assert r.id == run_id
    assert r.ranks() == [0, 1, 2, 3]

    s = r.scalars()
    loss = s.filter(s["tag"] == "train/loss")
    assert loss["step"].to_list() == [1, 2, 3, 4, 5, 6]
    assert all(math.isfinite(v) and v > 0 for v in loss["value"])
    for tag in ("train/accuracy", "train/lr", "train/epoch"):
        assert s.filter(s["tag"] == tag)["step"].to_list() == [1, 2, 3, 4, 5, 6], tag
    acc = s.filter(s["tag"] == "train/accuracy")["value"]
    assert all(0.0 <= v <= 1.0 for v in acc)
    lr = s.filter(s["tag"] == "train/lr")["value"].to_list()
    assert all(v > 0 for v in lr) and len(set(lr)) > 1, lr  # a schedule, not a constant
    for tag in ("eval/loss", "eval/accuracy"):
        ev = s.filter(s["tag"] == tag)
        assert ev["step"].to_list() == [6], tag
        assert math.isfinite(ev["value"][0])

    # Only rank 0 logs scalars; every rank logs its own timers (all_ranks=True).
    assert r.scalars(all_ranks=True)["rank"].unique().to_list() == [0]
    t = r.timers(all_ranks=True)
    assert sorted(t["rank"].unique().to_list()) == [0, 1, 2, 3]
    for rank in range(4):
        mine = t.filter(t["rank"] == rank)
        assert set(mine["tag"].unique().to_list()) == TIMERS, rank
        for tag in TIMERS:
            timed = mine.filter(mine["tag"] == tag)
            assert timed["step"].to_list() == [1, 2, 3, 4, 5, 6], (rank, tag)
            assert all(0 <= v < 60 for v in timed["value"]), (rank, tag)
    assert r.timers(rank=3)["rank"].unique().to_list() == [3]

    text = r.text()
    sample = text.filter(text["tag"] == "eval/sample")
    assert sample["step"].to_list() == [6]
    assert "pred" in sample["text"][0] and "true" in sample["text"][0]

    assert r.config["epochs"] == 1 and r.config["max_steps"] == 6
    assert (tmp_path / "ckpt" / "last.pt").is_file()
    assert not list((tmp_path / "ckpt").glob("*.tmp*"))  # atomic: no temp file left


@pytest.mark.slow
def test_resume_from_checkpoint_continues_the_run_with_a_clean_curve(tmp_path: Path) -> None:
    common = ("--epochs", "2", "--batch-size", "64")
    crashed = torchrun(tmp_path, *common, "--crash-at-step", "8", check=False)
    assert crashed.returncode != 0, crashed.stdout
    assert "simulated crash at step 8" in crashed.stdout + crashed.stderr
    # the README tells the user to copy the id the crashed run printed
    named = re.search(r"^logging to run (\S+) \(session 0\)", crashed.stdout, re.M)
    assert named, crashed.stdout
    m = re.search(r"^epoch 1/2\s+step (\d+)", crashed.stdout, re.M)
    assert m, crashed.stdout
    per_epoch = int(m.group(1))  # the checkpoint's global step
    assert per_epoch < 8, "the crash must come after the first checkpoint"

    resumed = torchrun(tmp_path, *common, "--resume")
    run_id = run_id_of(resumed)
    assert f"resuming run {run_id} at epoch 1, step {per_epoch}" in resumed.stdout
    run_dirs = list((tmp_path / "runs" / "digits").iterdir())
    assert [p.name for p in run_dirs] == [run_id] == [named.group(1)]  # the same run, not a new one

    r = nb.RunReader(run_dirs[0])
    assert len(r.sessions(0)) == 2
    assert r.meta["status"] == "finished"

    # Steps per-epoch+1 .. 8 were logged twice (crashed session, then resumed session):
    # readers show the resumed session's points only.
    last = 2 * per_epoch
    overlap = 8 - per_epoch
    loss = r.scalars(["train/loss"])
    steps = loss["step"].to_list()
    assert steps == list(range(1, last + 1))
    assert all(b > a for a, b in zip(steps, steps[1:], strict=False))
    assert all(math.isfinite(v) for v in loss["value"])
    by_session = dict(zip(loss["step"].to_list(), loss["session"].to_list(), strict=True))
    assert {by_session[k] for k in range(1, per_epoch + 1)} == {0}
    assert {by_session[k] for k in range(per_epoch + 1, last + 1)} == {1}

    everything = r.scalars(["train/loss"], include_hidden=True)
    assert len(everything) == len(loss) + overlap
    hidden = everything.filter(everything["hidden"])
    assert hidden["session"].to_list() == [0] * overlap
    assert hidden["step"].to_list() == list(range(per_epoch + 1, 9))

    # The first epoch's evaluation (at the checkpoint's step) is kept; so is its text.
    ev = r.scalars(["eval/accuracy"])
    assert ev["step"].to_list() == [per_epoch, last]
    assert r.text()["step"].to_list() == [per_epoch, last]

    # The rule holds per rank for the timers too (rank 2 crashed and resumed as well).
    t = r.timers(["time/forward"], rank=2)
    assert t["step"].to_list() == list(range(1, last + 1))
    t_all = r.timers(["time/forward"], rank=2, include_hidden=True)
    assert len(t_all) == len(t) + overlap
