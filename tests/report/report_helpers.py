"""Runs for the plot and report tests, written by real rank processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WRITER = Path(__file__).with_name("spike_writer.py")
SPIKE_STEP, SPIKE_VALUE = 1950, 50.0  # the planted spike of the report runs (conftest.py)
_DROP = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "OMPI_", "SLURM_", "TORCHELASTIC_",
         "NB_", "PMI_", "FORCE_COLOR", "NO_COLOR")


FAKES = Path(__file__).resolve().parents[1] / "fakes"  # the fake pynvml (GPUs without a driver)


def write_run(root: Path, run_id: str, world: int = 1, hosts: list[str] | None = None, gpus: int = 0,
              **spec) -> Path:
    """Start ``world`` rank processes of one run under ``root`` and wait for them.

    ``hosts[rank]`` simulates machines (each machine's first rank is its local rank 0);
    ``gpus`` > 0 gives each machine that many fake GPUs (tests/fakes/pynvml.py).
    """
    hosts = hosts or ["node-a"] * world
    procs = []
    for rank in range(world):
        env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP)}
        same = [r for r in range(world) if hosts[r] == hosts[rank]]
        env.update(RANK=str(rank), LOCAL_RANK=str(same.index(rank)), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(len(same)), GROUP_RANK="0", NB_DIR=str(root), NB_RUN_ID=run_id,
                   NB_HOSTNAME=hosts[rank])
        if gpus:
            env.update(PYTHONPATH=os.pathsep.join([str(FAKES), env.get("PYTHONPATH", "")]),
                       NB_FAKE_NVML_GPUS=str(gpus))
        procs.append(subprocess.Popen([sys.executable, str(WRITER), json.dumps(spec)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    return root / "plots" / run_id
