"""Helpers of the nb command tests: clean environments and writer processes with the
variables torchrun sets (used by conftest.py and the tests)."""


from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WRITER = Path(__file__).with_name("_writer.py")
TEXT = "hello \x1b[31mred\x1b[0m \u202eevil"
LAUNCHER_PREFIXES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "OMPI_", "SLURM_",
                      "TORCHELASTIC_", "NB_", "PMI_", "FORCE_COLOR", "NO_COLOR")


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without launcher, NB_* and colour variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES)}
    env.update(extra)
    return env


def torchrun_env(rank: int, world: int, local_rank: int | None = None, local_world: int | None = None, **extra) -> dict:
    return clean_env(
        RANK=str(rank), LOCAL_RANK=str(rank if local_rank is None else local_rank), WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world if local_world is None else local_world), GROUP_RANK="0", **extra,
    )


def start(spec: dict, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WRITER), json.dumps(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_all(procs: list[subprocess.Popen], expect_rc: int = 0, timeout: float = 60) -> list[str]:
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == expect_rc, f"writer exited {p.returncode}: {err}"
        outs.append(out)
    return outs


def run_ranks(root: Path, spec: dict, world: int, run_id: str, hosts: list[str] | None = None,
              expect_rc: int = 0, **extra) -> list[str]:
    """Start ``world`` ranks of one run (``hosts[rank]`` simulates machines) and wait."""
    procs = []
    for rank in range(world):
        host = hosts[rank] if hosts else "node-a"
        same = [r for r in range(world) if (hosts[r] if hosts else "node-a") == host]
        procs.append(start(spec, torchrun_env(rank, world, same.index(rank), len(same), NB_DIR=str(root),
                                              NB_RUN_ID=run_id, NB_HOSTNAME=host, **extra)))
    return wait_all(procs, expect_rc)


