"""Every rank agrees on the run folder with no communication; only rank 0 logs.

Each test starts real processes with the environment a launcher gives its workers
(see _nbproc.py and shared/launchers/README.md).
"""

from __future__ import annotations

import json
import os
import uuid

import pytest
from _nbproc import (
    base_env,
    mpirun_env,
    read_line,
    run_ranks,
    sbatch_script_env,
    srun_env,
    start_rank,
    torchrun_env,
    wait,
)

import nblog as nb
from nblog.write._runid import derive_run_id

PROJECT, NAME = "agree", "ddp"
STEPS = 5
UUID = str(uuid.uuid4())

# name → (environment of rank r of 4, expected job id source or None for explicit, launcher)
LAUNCHES = {
    "torchrun --rdzv-id exp-7": (
        lambda r: torchrun_env(r, 4, run_id="exp-7"), ("exp-7", "torchelastic"), "torchrun"),
    "torchrun --standalone (uuid)": (
        lambda r: torchrun_env(r, 4, run_id=UUID), (UUID, "torchelastic_uuid"), "torchrun"),
    "srun -N 2 -n 4": (
        lambda r: srun_env(r, [3, 1], job_id="4242"), ("4242", "slurm"), "slurm"),
    "srun -N 2 + torchrun static": (
        lambda r: {**srun_env(r // 2, [1, 1], job_id="77"),
                   **torchrun_env(r, 4, nproc_per_node=2, run_id="none")},
        ("77", "slurm"), "torchrun"),
    "sbatch + mpirun": (
        lambda r: {**sbatch_script_env(4, job_id="31"), **mpirun_env(r, 4)}, ("31", "slurm"), "mpirun"),
    "mpirun + NB_RUN_ID": (
        lambda r: {**mpirun_env(r, 4), "NB_RUN_ID": "given-0000abcd"}, None, "mpirun"),
}


def spec(root, **extra):
    return {"init": {"project": PROJECT, "run_name": NAME, "root": str(root)}, "steps": [0, STEPS], **extra}


@pytest.mark.parametrize("launch", LAUNCHES)
def test_every_rank_agrees_and_only_rank_0_logs(tmp_path, launch):
    env_of, job, launcher = LAUNCHES[launch]
    root = tmp_path / "runs"
    done = run_ranks([(spec(root), base_env(**env_of(r))) for r in range(4)], tmp_path)
    res = [d.result for d in done]

    assert [r["rank"] for r in res] == [0, 1, 2, 3]
    assert [r["is_logging"] for r in res] == [True, False, False, False]
    expected_id = "given-0000abcd" if job is None else derive_run_id(PROJECT, NAME, job[0])
    assert {r["id"] for r in res} == {expected_id}
    assert {r["dir"] for r in res} == {str(root / PROJECT / expected_id)}
    assert os.listdir(root / PROJECT) == [expected_id]

    run_dir = root / PROJECT / expected_id
    meta = json.loads((run_dir / "run.json").read_text())
    assert (meta["id"], meta["world_size"], meta["launcher"]) == (expected_id, 4, launcher)
    if job is None:
        assert meta["run_id_source"] == "explicit"
    else:
        assert (meta["job_id"], meta["job_id_source"], meta["run_id_source"]) == (*job, "derived")
    # run.json is rank 0's alone: one session, rank 0's pid
    assert [s["pid"] for s in meta["sessions"]] == [res[0]["pid"]]
    assert meta["status"] == "finished"

    assert sorted(os.listdir(run_dir)) == [f"events.r{r}.s0.log" for r in range(4)] + ["run.json"]
    r = nb.RunReader(str(run_dir))
    steps = list(range(STEPS))
    assert r.scalars()[["step", "value"]].rows() == [(s, s + 0.5) for s in steps]
    assert r.text()["step"].to_list() == [0]
    assert r.tags(kind="timer") == ["rank0_only", "step_time"]
    for rank in (1, 2, 3):
        assert r.tags(rank=rank, kind=None) == ["step_time"]  # all_ranks timers only
        assert len(r.scalars(rank=rank)) == 0 and len(r.text(rank=rank)) == 0
        assert r.timers(rank=rank)["step"].to_list() == steps
    assert r.scalars(all_ranks=True)["rank"].unique().to_list() == [0]
    assert sorted(r.timers("step_time", all_ranks=True)["rank"].unique().to_list()) == [0, 1, 2, 3]


def test_a_rank_that_logs_no_timers_creates_no_file(tmp_path):
    root = tmp_path / "runs"
    quiet = {"init": {"project": PROJECT, "root": str(root)}, "steps": [0, 0]}
    done = run_ranks([(quiet, base_env(**srun_env(r, [2], job_id="5"))) for r in range(2)], tmp_path)
    assert done[1].result["dir"] == done[0].result["dir"]
    assert sorted(os.listdir(done[0].result["dir"])) == ["events.r0.s0.log", "run.json"]


def test_a_nonzero_rank_started_first_waits_then_proceeds(tmp_path):
    root = tmp_path / "runs"
    early = start_rank(spec(root, announce=True), base_env(**srun_env(1, [2], job_id="9")), tmp_path)
    assert read_line(early) == "READY"  # rank 1 is calling init; rank 0 has not started
    assert not root.exists()
    rank0 = wait(start_rank(spec(root), base_env(**srun_env(0, [2], job_id="9")), tmp_path))
    rank1 = wait(early)
    assert rank1.result["dir"] == rank0.result["dir"]
    meta = json.loads((root / PROJECT / rank0.result["id"] / "run.json").read_text())
    # rank 1's init returned only after rank 0 had created the run
    assert rank1.result["before_init"] <= meta["created"] <= rank1.result["after_init"]
    r = nb.RunReader(rank0.result["dir"])
    assert r.timers(rank=1)["step"].to_list() == list(range(STEPS))


def test_a_rank_whose_rank_0_never_comes_gives_up_and_logs_nothing(tmp_path):
    root = tmp_path / "runs"
    env = base_env(**srun_env(2, [2, 2], job_id="11"), NB_WAIT_S="1")
    done = wait(start_rank(spec(root), env, tmp_path))  # exits 0, well before the hang guard
    assert done.result["dir"] is None
    assert done.result["is_logging"] is False
    assert "NB_WAIT_S" in done.err and "waited 1 s" in done.err
    assert [files for _, _, files in os.walk(tmp_path / "runs")] in ([], [[]], [[], []])


@pytest.mark.parametrize("launch", ["torchrun static, 2 nodes", "mpirun without NB_RUN_ID"])
def test_without_a_shared_job_id_only_rank_0_logs(tmp_path, launch):
    root = tmp_path / "runs"
    if launch.startswith("torchrun"):
        env_of = lambda r: torchrun_env(r, 4, nproc_per_node=2, run_id="none")  # noqa: E731
    else:
        env_of = lambda r: mpirun_env(r, 4, per_node=2)  # noqa: E731
    done = run_ranks([(spec(root), base_env(**env_of(r))) for r in range(4)], tmp_path)
    res = [d.result for d in done]
    assert res[0]["id"] and res[0]["dir"] == str(root / PROJECT / res[0]["id"])
    assert [(r["id"], r["dir"]) for r in res[1:]] == [("", None)] * 3
    assert os.listdir(root / PROJECT) == [res[0]["id"]]
    assert sorted(os.listdir(res[0]["dir"])) == ["events.r0.s0.log", "run.json"]
    meta = json.loads((root / PROJECT / res[0]["id"] / "run.json").read_text())
    assert (meta["run_id_source"], meta["job_id"]) == ("random", None)
    assert nb.RunReader(res[0]["dir"]).scalars()["step"].to_list() == list(range(STEPS))


def test_without_a_shared_job_id_local_rank_0_of_other_machines_warns_once(tmp_path):
    root = tmp_path / "runs"
    specs = []
    for r in range(4):  # system metrics on (the default): only rank 2 (node 2's local rank 0) warns
        s = spec(root)
        s["init"]["system"] = ["cpu"]
        specs.append((s, base_env(**torchrun_env(r, 4, nproc_per_node=2, run_id="none"))))
    done = run_ranks(specs, tmp_path)
    warned = ["cannot learn the run id" in d.err for d in done]
    assert warned == [False, False, True, False]
    assert done[2].err.count("cannot learn the run id") == 1
    for hint in ("Slurm", "--rdzv-id", "NB_RUN_ID"):
        assert hint in done[2].err
