"""Rank processes and ``nb`` processes for the incident gap tests
(tests/integration/test_incident_gaps.py, test_incident_unended.py): each rank runs
tests/integration/_scripts/gap_rank.py with the variables torchrun gives its workers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _nbproc import base_env, torchrun_env

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "integration" / "_scripts" / "gap_rank.py"
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
TIMEOUT_S = 120


def start(root: Path, rank: int, world: int, mode: str, rid: str, host: str = "node1") -> subprocess.Popen:
    env = base_env(**torchrun_env(rank, world, run_id=rid), NB_WAIT_S="30", NB_HOSTNAME=host, NB_RUN_ID=rid)
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    return subprocess.Popen([sys.executable, str(SCRIPT), str(root), mode], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def done(p: subprocess.Popen) -> tuple[int, str, str]:
    out, err = p.communicate(timeout=TIMEOUT_S)
    return p.returncode, out, err


def nb_cli(*args: str, root: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*NB, *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                          env=base_env(NB_DIR=str(root), **env))
