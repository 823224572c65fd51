"""Running the real frameworks' launchers in a clean environment, and reading README blocks."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "_scripts"
VENV_BIN = Path(sys.executable).parent
TIMEOUT_S = 240

_DROP_PREFIXES = ("NB_", "SLURM_", "OMPI_", "PMI", "TORCHELASTIC_", "ACCELERATE_", "PL_", "HF_")
_DROP = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK"}


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without launcher, nb or framework variables; offline, one thread."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith(_DROP_PREFIXES) or k in _DROP)}
    env.update(
        PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false", NB_SYSTEM="0", PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# torchrun's and Lightning's stores (and accelerate launch's, which is torchrun) listen on
# every interface whatever address they are given: every command runs in a network
# namespace of loopback only, as tests/integration/test_train_ddp.py runs torchrun
LOOPBACK = ["env", "NB_LOOPBACK=require", "bash", str(REPO / "scripts" / "loopback.sh")]


def loopback(cmd: list) -> list[str]:
    """``cmd`` under scripts/loopback.sh (exit 125 where no namespace can be made).

    The chain execs (no fork): the process started is ``cmd`` itself, pid and process
    group included, so signals sent to it reach ``cmd``."""
    return [*LOOPBACK, *map(str, cmd)]


def run(cmd: list[str], cwd: Path, env: dict[str, str], *, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``cmd`` to the end under :func:`loopback` (a hang fails the test after TIMEOUT_S)."""
    cmd = loopback(cmd)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def torchrun(script: Path | str, *args: str, nproc: int = 2) -> list[str]:
    """torchrun with its rendezvous on loopback (no hostname lookups, a free port)."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
        str(script), *args,
    ]


def readme_block(heading: str, lang: str = "python") -> str:
    """The first ```LANG block after the README heading ``heading`` (as a user copies it)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    at = text.index(heading)
    m = re.compile(rf"```{re.escape(lang)}\n(.*?)```", re.S).search(text, at)
    assert m, f"no {lang} block after {heading!r}"
    return m.group(1)


def only_run(root: Path) -> Path:
    """The one run folder under ``root`` (fails if there are zero or several)."""
    runs = [p for p in root.glob("*/*") if (p / "run.json").exists()]
    assert len(runs) == 1, f"expected one run under {root}, found {runs}"
    return runs[0]
