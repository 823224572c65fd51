"""Issue 17's incident job under the real torchrun, watched from outside by a real ``nb watch``.

``torchrun --nproc-per-node 4`` runs tests/integration/_scripts/incident_ddp.py (gloo, CPU,
in a loopback-only network namespace: scripts/loopback.sh): train/loss is NaN at step
50, rank 2 is slow in data loading from step 80, every rank stops itself with SIGSTOP at
step 120 (the test sends SIGCONT once the stalls are reported, and the job finishes).
Beside it, the same job without faults is the control. ``nb watch --json`` follows each
run from before its start: each alert exactly once, within two polls of its data
reaching the disk (judged from the data: tests/integration/_incident.py), none on the
control.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from _incident import FAULTS, FLUSH_S, HANG_S, REPO, SCRIPT, Watch, check_alerts

import nblog as nb

LOOPBACK = ["env", "NB_LOOPBACK=require", "bash", str(REPO / "scripts" / "loopback.sh")]

pytestmark = [pytest.mark.slow, pytest.mark.timing]


def _env(root: Path, run_id: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NB_", "SLURM_", "OMPI_", "PMI", "TORCHELASTIC_"))
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), NB_PROVENANCE="0", NB_DIR=str(root),
               NB_RUN_ID=run_id, NB_FLUSH_INTERVAL=FLUSH_S)
    return env


def start(tmp_path: Path, run_id: str, *args: str) -> tuple[subprocess.Popen, Watch]:
    """``nb watch`` on the run id, then the torchrun job that makes the run."""
    root = tmp_path / "runs"
    watch = Watch(run_id, root / "incident" / run_id, _env(root, run_id))
    cmd = [*LOOPBACK, sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
           str(SCRIPT), "--root", str(root), "--pids", str(tmp_path / "pids"), *args]
    job = subprocess.Popen(cmd, cwd=tmp_path, env=_env(root, run_id), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    return job, watch


def rank_pids(tmp_path: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted((tmp_path / "pids").glob("rank*.pid"))]


def wait_until(pred, what: str, job: subprocess.Popen, timeout: float = HANG_S) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if job.poll() is not None:
            out, err = job.communicate()
            raise AssertionError(f"the job ended (exit {job.returncode}) before {what}:\n{out[-3000:]}\n{err[-3000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)  # waiting for other processes, not for a flush of ours


def stopped(pids: list[int]) -> bool:
    try:
        return len(pids) == 4 and all(psutil.Process(p).status() == psutil.STATUS_STOPPED for p in pids)
    except psutil.NoSuchProcess:
        return False


def end(job: subprocess.Popen, watch: Watch, pids: list[int] = ()) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGCONT)
        except ProcessLookupError:
            pass
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    watch.kill()


def test_nan_straggler_and_hang_each_alerted_once_within_two_polls(tmp_path: Path) -> None:
    job, watch = start(tmp_path, f"bad-{uuid.uuid4().hex[:8]}", *FAULTS)
    pids: list[int] = []
    try:
        wait_until(lambda: stopped(rank_pids(tmp_path)), "every rank stopped at step 120", job)
        pids = rank_pids(tmp_path)
        wait_until(lambda: len(watch.alerts("stall")) >= 4 or watch.proc.poll() is not None,
                   "the stalls of the 4 ranks", job, timeout=60)
        for p in pids:
            os.kill(p, signal.SIGCONT)
        out, err = job.communicate(timeout=HANG_S)
        assert job.returncode == 0, f"{out[-3000:]}\n{err[-3000:]}"
        werr = watch.finish()
    finally:
        end(job, watch, pids)
    assert watch.proc.returncode == 1 and "Traceback" not in werr, werr  # it reported alerts
    assert "finished; 6 alerts" in werr, werr  # it stopped following once the job ended
    check_alerts(watch)
    assert nb.RunReader(watch.run_dir).meta["status"] == "finished"


def test_the_clean_control_job_raises_nothing(tmp_path: Path) -> None:
    job, watch = start(tmp_path, f"clean-{uuid.uuid4().hex[:8]}")
    try:
        out, err = job.communicate(timeout=HANG_S)
        assert job.returncode == 0, f"{out[-3000:]}\n{err[-3000:]}"
        werr = watch.finish()
    finally:
        end(job, watch)
    assert watch.proc.returncode == 0, werr
    assert watch.alerts() == []
    assert "finished; 0 alerts" in werr, werr
    assert nb.RunReader(watch.run_dir).scalars("train/loss")["step"].to_list() == list(range(1, 151))
