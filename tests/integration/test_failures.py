"""When a job goes wrong: the first failure named, a rank killed without an END record,
alerts from the training code (real processes: torchrun with 4 gloo ranks).

The job is tests/integration/_scripts/fail_ddp.py under the real torchrun of this venv,
in a loopback-only network namespace (scripts/loopback.sh), read back with ``nb show``
and ``nblog.RunReader``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import nblog as nb

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "integration" / "_scripts" / "fail_ddp.py"
LOOPBACK = ["env", "NB_LOOPBACK=require", "bash", str(REPO / "scripts" / "loopback.sh")]
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
TIMEOUT_S = 300


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NB_", "SLURM_", "OMPI_", "PMI", "TORCHELASTIC_"))
        and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), NB_PROVENANCE="0")
    return env


def torchrun(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    """Run fail_ddp.py on 4 ranks (c10d rendezvous with an id, so every rank derives
    the run id); returns the finished process and the run folder."""
    cmd = [*LOOPBACK, sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
           "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29517",
           "--rdzv-id", f"fail-{uuid.uuid4().hex[:8]}", str(SCRIPT), "--root", str(tmp_path / "runs"), *args]
    proc = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    m = re.search(r"^run id: (\S+)$", proc.stdout, re.M)
    assert m, f"no run id printed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc, tmp_path / "runs" / "fail" / m.group(1)


def nb_cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NB_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([*NB, *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.slow
def test_rank_3_raising_at_step_30_is_named_with_its_traceback(tmp_path: Path) -> None:
    proc, run_dir = torchrun(tmp_path, "--raise-rank", "3", "--at", "30", "--alert-rank", "2")
    assert proc.returncode != 0, "torchrun reports the failed rank"

    r = nb.RunReader(run_dir)
    failures = r.failures()
    # rank 3 raised first; ranks blocked in all_reduce may raise gloo's "Connection closed
    # by peer" after it, or be stopped by torchrun's SIGTERM: either way they come later
    ranks = failures["rank"].to_list()
    assert ranks[0] == 3 and 3 not in ranks[1:], ranks
    assert all("in all_reduce" in tb for tb in failures["traceback"].to_list()[1:]), failures["message"].to_list()
    f = failures.row(0, named=True)
    assert (f["session"], f["step"], f["type"]) == (0, 30, "RuntimeError")
    assert f["message"] == "CUDA out of memory (injected at step 30)"
    assert "fail_ddp.py" in f["traceback"] and 'raise RuntimeError(f"CUDA out of memory' in f["traceback"]
    assert f["traceback"].rstrip().endswith("RuntimeError: CUDA out of memory (injected at step 30)")
    # rank 3 timed every step, so its event log existed; the failure precedes its END record
    (rank3,) = r.files(3)
    assert rank3.end is not None and rank3.end["status"] == "failed"

    alerts = r.alerts()
    assert alerts.select("rank", "step", "level", "title").rows() == [(2, 10, "warn", "slow data")]
    assert alerts["text"][0] == "rank 2 waited 3 s for a batch"

    show = nb_cli("show", str(run_dir))
    assert show.returncode == 0, show.stderr
    host = f["host"]
    line = f"failed: rank 3 ({host}), step 30, RuntimeError: CUDA out of memory (injected at step 30)"
    assert line in show.stdout
    assert "# Traceback of rank 3" in show.stdout
    assert 'raise RuntimeError(f"CUDA out of memory' in show.stdout
    assert re.search(r"warn\t2\t10\tslow data\trank 2 waited 3 s for a batch", show.stdout), show.stdout

    info = json.loads(nb_cli("show", str(run_dir), "--json").stdout)
    first = info["first_failure"]
    assert (first["rank"], first["step"], first["type"]) == (3, 30, "RuntimeError")
    after = len(ranks) - 1
    assert info["failed_after"] == after
    assert info["failure_line"] == line + (f" ({after} other rank{'s' if after != 1 else ''} failed after it)"
                                           if after else "")
    # torch's @record wrote torchrun's error file before the exception reached nb's hook
    assert first["error_file"] and isinstance(first["error_file_content"], dict)
    assert "CUDA out of memory" in json.dumps(first["error_file_content"])
    assert "torchrun error file: " not in show.stdout  # it says what the traceback's last line says
    # the other ranks failed or were stopped by torchrun's SIGTERM, and closed their logs
    assert info["unended"] == []
    assert all(lf.end is not None for k in range(4) for lf in r.files(k))


@pytest.mark.slow
def test_rank_killed_with_sigkill_shows_a_session_without_end(tmp_path: Path) -> None:
    proc, run_dir = torchrun(tmp_path, "--kill-rank", "2", "--at", "20")
    assert proc.returncode != 0

    r = nb.RunReader(run_dir)
    # a signal leaves no failure record, only a missing END; ranks blocked in all_reduce
    # may fail after it ("Connection closed by peer") or be stopped by torchrun
    failures = r.failures()
    assert 2 not in failures["rank"].to_list()
    # gloo says "Connection closed by peer", "Connection reset by peer", ...: in all_reduce
    assert all("in all_reduce" in tb for tb in failures["traceback"].to_list()), failures["message"].to_list()
    (rank2,) = r.files(2)
    assert rank2.end is None
    assert all(lf.end is not None for k in (0, 1, 3) for lf in r.files(k))

    info = json.loads(nb_cli("show", str(run_dir), "--json").stdout)
    assert [(u["rank"], u["session"], u["last_step"]) for u in info["unended"]] == [(2, 0, 20)]
    # rank 2 stopped writing before any other rank raised: it is named first
    assert info["first_incident"] == "unended"
    show = nb_cli("show", str(run_dir))
    killed = re.search(r"rank 2 \(.+\) session 0 ended without an END record \(killed\? last step 20\)", show.stdout)
    assert killed, show.stdout
    failed = show.stdout.find("failed: rank")
    assert failed == -1 or failed > killed.start(), "the killed rank comes before the ranks failing after it"
    assert failed == -1 or show.stdout[failed - 5:failed] == "then "
