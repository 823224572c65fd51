"""Failures and alerts on a rank that had no event log yet (real processes with the
variables torchrun gives its workers): the rank creates its own log to record them."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from _nbproc import base_env, torchrun_env

import nblog as nb

SCRIPT = Path(__file__).resolve().parent / "_scripts" / "fail_rank.py"


def rank(root: Path, r: int, mode: str, rid: str) -> subprocess.CompletedProcess:
    env = base_env(**torchrun_env(r, 2, run_id=rid), NB_PROVENANCE="0", NB_WAIT_S="30")
    env.pop("TORCHELASTIC_ERROR_FILE")
    return subprocess.run([sys.executable, str(SCRIPT), str(root), mode], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def opened(tmp_path: Path) -> tuple[Path, str, Path]:
    """Rank 0 of a 2-rank launch opened the run (and finished)."""
    rid = f"fail-{uuid.uuid4().hex[:8]}"
    p = rank(tmp_path, 0, "finish", rid)
    assert p.returncode == 0, p.stderr
    return tmp_path, rid, Path(p.stdout.strip())


@pytest.mark.parametrize("mode", ["raise", "with"])
def test_a_rank_without_an_event_log_records_its_failure(opened, mode: str) -> None:
    root, rid, run_dir = opened
    p = rank(root, 1, mode, rid)
    assert p.returncode == 1 and "ValueError" in p.stderr
    assert (run_dir / "events.r1.s0.log").exists(), "rank 1 logged nothing but made a log for its failure"
    r = nb.RunReader(run_dir)
    (f,) = r.failures().to_dicts()
    assert (f["rank"], f["session"], f["step"], f["type"]) == (1, 0, 5, "ValueError")
    assert f["message"] == ("bad batch in the with block" if mode == "with" else "bad batch on rank 1")
    assert f["traceback"].rstrip().endswith(f"ValueError: {f['message']}")
    (lf,) = r.files(1)
    assert lf.end["status"] == "failed", "the failure is written before the END record"
    assert lf.unknown_frames == 0 and lf.end["dropped"] == {}


def test_alerts_on_a_non_logging_rank_are_recorded_and_rate_limited(opened) -> None:
    root, rid, run_dir = opened
    p = rank(root, 1, "alert", rid)
    assert p.returncode == 0, p.stderr
    assert "level must be one of" in p.stderr  # the bad level warned once
    r = nb.RunReader(run_dir)
    rows = r.alerts().select("rank", "step", "level", "title", "text", "suppressed").rows()
    assert rows == [(1, 5, "error", "grad norm", "grad norm 1e4 at step 5", 0), (1, 5, "warn", "data", "slow shard", 0)]
    (lf,) = r.files(1)
    assert lf.end["dropped"] == {"alert_rate_limited": 1}


def test_provenance_of_each_machine_and_the_diff_on_rank_0_only(tmp_path: Path) -> None:
    """Two machines (srun -N 2, one task each): rank 0 and local rank 0 of the other."""
    from _nbproc import srun_env

    procs = []
    for r in (0, 1):
        env = base_env(**srun_env(r, [1, 1], job_id="8080"), NB_PROVENANCE="1", NB_HOSTNAME=f"node{r + 1}")
        procs.append(subprocess.Popen([sys.executable, str(SCRIPT), str(tmp_path), "finish"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    run_dir = Path(outs[0][0].strip())
    import json

    recs = {r: json.loads((run_dir / f"provenance.r{r}.s0.json").read_text()) for r in (0, 1)}
    assert recs[1]["launcher"]["host"] == "node2" and recs[1]["launcher"]["local_rank"] == 0
    assert recs[0]["env"]["SLURM_JOB_ID"] == recs[1]["env"]["SLURM_JOB_ID"] == "8080"
    assert not (run_dir / "provenance.r1.s0.diff").exists()
