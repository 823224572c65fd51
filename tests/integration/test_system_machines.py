"""Two machines x two ranks, as real processes: only each machine's local rank 0 samples.

Machines are simulated with ``NB_HOSTNAME``; GPUs with the fake ``pynvml`` in
``tests/fakes`` (first on ``PYTHONPATH``): machineA has 2 GPUs, machineB 4 GPUs of which
``CUDA_VISIBLE_DEVICES`` shows physical 3 and 0, by UUID, physical 0 refusing power.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import nblog as nb

REPO = Path(__file__).resolve().parents[2]
FAKES = REPO / "tests" / "fakes"

_spec = importlib.util.spec_from_file_location("fake_pynvml_for_expectations", FAKES / "pynvml.py")
fake = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake)

TRAIN = """
import time, nblog as nb
run = nb.init("machines", run_name="ddp")
for step in range(25):
    run.add_scalar("train/loss", 1.0 / (step + 1), step=step)
    time.sleep(0.02)
run.finish()
"""

MACHINES = {
    "machineA": {"NB_FAKE_NVML_GPUS": "2"},
    "machineB": {
        "NB_FAKE_NVML_GPUS": "4",
        "NB_FAKE_NVML_NO_POWER": "0",
        "CUDA_VISIBLE_DEVICES": f"{fake.uuid(3)},{fake.uuid(0)}",
    },
}


def launch(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("NB_", "SLURM_", "OMPI_", "TORCHELASTIC_"))}
    base.pop("CUDA_VISIBLE_DEVICES", None)
    base.update(
        PYTHONPATH=os.pathsep.join([str(FAKES), str(REPO)]),
        WORLD_SIZE="4",
        LOCAL_WORLD_SIZE="2",
        TORCHELASTIC_RUN_ID="job-4242",
        NB_DIR=str(tmp_path),
        NB_SYSTEM_INTERVAL="0.05",
        NB_WAIT_S="60",
    )
    procs = []
    for rank in range(4):
        host = "machineA" if rank < 2 else "machineB"
        env = dict(base, **MACHINES[host], RANK=str(rank), LOCAL_RANK=str(rank % 2),
                   GROUP_RANK=str(rank // 2), NB_HOSTNAME=host)
        procs.append(subprocess.Popen([sys.executable, "-c", TRAIN], env=env, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for rank, p in enumerate(procs):
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, f"rank {rank} failed:\n{out}"


def gpu_expectation(physical: list[int], no_power: set[int]) -> dict:
    fake.configure(gpus=8, no_power=no_power)
    return {f"system/gpu{i}/{k}": v for i, j in enumerate(physical) for k, v in fake.expected(j).items()}


def test_two_machines_two_ranks_each(tmp_path):
    launch(tmp_path)
    (run_dir,) = (tmp_path / "machines").iterdir()
    r = nb.RunReader(run_dir)

    machines = sorted(r.machines(), key=lambda m: m["rank"])
    assert [(m["hostname"], m["rank"]) for m in machines] == [("machineA", 0), ("machineB", 2)]
    a, b = machines
    assert [g["uuid"] for g in a["gpus"]] == [fake.uuid(0), fake.uuid(1)]
    assert [g["uuid"] for g in b["gpus"]] == [fake.uuid(3), fake.uuid(0)]
    assert a["driver_version"] == b["driver_version"] == fake.DRIVER
    assert a["cpu_count"] >= 1 and a["memory_total_bytes"] > 0

    df = r.system()
    pairs = set(zip(df["hostname"].to_list(), df["rank"].to_list(), strict=True))
    assert pairs == {("machineA", 0), ("machineB", 2)}
    for rank in r.ranks():  # ranks 1 and 3 (local rank 1) never sample
        if rank not in (0, 2):
            assert not r.tags(rank, kind="system")

    for host, physical, no_power in (("machineA", [0, 1], set()), ("machineB", [3, 0], {0})):
        frame = r.system(machine=host)
        gpu = frame.filter(frame["tag"].str.starts_with("system/gpu"))
        last = dict(zip(gpu["tag"].to_list(), gpu["value"].to_list(), strict=True))  # last value per tag
        assert last == gpu_expectation(physical, no_power), host
        assert "system/cpu_percent" in set(frame["tag"]) and "system/memory_used_bytes" in set(frame["tag"])
    b_frame = r.system(machine="machineB")
    assert "system/gpu1/power_w" not in set(b_frame["tag"])  # physical 0 refuses power
