"""nb under a real Slurm 22.05 (scripts/slurm_up.sh: two simulated nodes nbnode1, nbnode2,
each slurmd in its own UTS namespace so that jobs see the node name as hostname).

The run id comes from SLURM_JOB_ID: the same on every node, kept by a requeue, new for
each job and for each task of a job array. A job that continues a run as a new job gets
the id from ``nb resume-id ... --latest`` and passes it as NB_RUN_ID with NB_RESUME=auto.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from launchkit import (
    REPO,
    TINY,
    assert_agree,
    assert_clean_curve,
    free_port,
    reports,
    run,
    run_dirs,
    sbatch,
    tiny,
    wait_for,
    wait_job,
)

import nblog as nb
from nblog.write._runid import derive_run_id

pytestmark = pytest.mark.launchers


def progress(out: Path, attempt: int) -> list[int]:
    f = out / f"progress.a{attempt}.txt"
    return [int(x) for x in f.read_text().split()] if f.exists() else []


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/bash\n" + body)
    return path


@pytest.mark.parametrize("nodes", [1, 2])
@pytest.mark.parametrize("how", ["srun", "sbatch"])
def test_ranks_agree_and_each_machine_logs_its_system_metrics(env, tmp_path, slurm, request, how,
                                                             nodes):
    if nodes == 2:
        request.getfixturevalue("two_nodes")
    out = tmp_path / "out"
    layout = ["-N", str(nodes), "-n", "4", "--ntasks-per-node", str(4 // nodes)]
    train = tiny("--name", f"{how}{nodes}", "--steps", "4", "--sleep", "0.3", "--out", out)
    if how == "srun":
        run(["srun", *layout, *train], env, cwd=tmp_path)
    else:
        log = tmp_path / "job.out"
        job = script(tmp_path / "job.sh", "srun " + " ".join(map(str, train)) + "\n")
        wait_job(sbatch([*layout, "-o", log, job], env, cwd=tmp_path), env, outputs=[log])

    rs = reports(out)
    run_dir = assert_agree(rs, 4)
    assert run_dirs(tmp_path / "runs") == [Path(run_dir)]
    (job_id,) = {r["env"]["SLURM_JOB_ID"] for r in rs}
    assert Path(run_dir).name == derive_run_id("launchers", f"{how}{nodes}", job_id)
    hosts = {r["env"]["SLURMD_NODENAME"] for r in rs}
    assert len(hosts) == nodes
    assert all(r["hostname"] == r["env"]["SLURMD_NODENAME"] for r in rs)  # UTS namespaces

    reader = nb.RunReader(run_dir)
    meta = reader.meta
    assert (meta["launcher"], meta["job_id"], meta["job_id_source"]) == ("slurm", job_id, "slurm")
    assert reader.ranks() == [0, 1, 2, 3]
    assert_clean_curve(reader, 4)
    # local rank 0 of each machine records that machine, under its own hostname
    machines = reader.machines()
    assert sorted(m["hostname"] for m in machines) == sorted(hosts)
    system = reader.system()
    assert set(system["hostname"].unique().to_list()) == hosts
    assert system["tag"].str.starts_with("system/").all()


def test_requeue_continues_the_run_in_a_new_session(env, tmp_path, slurm):
    """sbatch --requeue, scontrol requeue while training: SIGTERM, then the job runs again
    with the same SLURM_JOB_ID and continues the same run from its checkpoint."""
    out, log = tmp_path / "out", tmp_path / "job.out"
    train = tiny("--name", "requeue", "--steps", "16", "--sleep", "0.25",
                 "--ckpt", tmp_path / "ckpt.json", "--ckpt-every", "3", "--out", out)
    job = script(tmp_path / "job.sh",
                 "#SBATCH -N 1 -n 2 --requeue --open-mode=append\n"
                 'echo "start restart=${SLURM_RESTART_COUNT:-0}"\n'
                 "srun " + " ".join(map(str, train)) + "\n")
    job_id = sbatch(["-o", log, job], env, cwd=tmp_path)
    wait_for(lambda: len(progress(out, 0)) >= 5, 120, "5 steps logged", [log])
    run(["scontrol", "requeue", job_id], env)
    wait_job(job_id, env, timeout=180, outputs=[log])

    before = progress(out, 0)   # steps rank 0 had logged when SIGTERM came
    first, second = reports(out, 0), reports(out, 1)
    run_dir = assert_agree(first, 2)
    assert assert_agree(second, 2) == run_dir
    assert {r["env"]["SLURM_JOB_ID"] for r in first + second} == {job_id}
    assert {r["env"].get("SLURM_RESTART_COUNT") for r in second} == {"1"}
    assert run_dirs(tmp_path / "runs") == [Path(run_dir)]

    reader = nb.RunReader(run_dir)
    sessions = reader.sessions(0)
    assert [s["session"] for s in sessions] == [0, 1]
    assert [s["restart_counts"].get("SLURM_RESTART_COUNT") for s in sessions] == [None, "1"]
    assert sessions[0]["end"] and sessions[0]["end"]["reason"] == "SIGTERM", sessions[0]
    # everything logged before SIGTERM is on disk
    s0 = reader.scalars("train/step", include_hidden=True).filter(session=0)
    assert set(before) <= set(s0["step"].to_list()), (before, s0)
    assert sessions[1]["first_step"] <= max(before) + 1
    assert_clean_curve(reader, 16)
    assert reader.meta["status"] == "finished"
    text = log.read_text()
    assert "start restart=0" in text and "start restart=1" in text  # --open-mode=append


def test_job_array_tasks_get_their_own_runs(env, tmp_path, slurm):
    out, log = tmp_path / "out", tmp_path / "job-%A_%a.out"
    train = tiny("--name", "array", "--steps", "3", "--out", f"{out}/$SLURM_ARRAY_TASK_ID")
    job = script(tmp_path / "job.sh", "srun " + " ".join(map(str, train)) + "\n")
    array_id = sbatch(["-n", "2", "--array", "0-2", "-o", log, job], env, cwd=tmp_path)
    states = wait_job(array_id, env, outputs=[tmp_path / "job-*.out"])
    assert len(states) == 3

    dirs = []
    for task in range(3):
        rs = reports(out / str(task))
        dirs.append(assert_agree(rs, 2))
        (job_id,) = {r["env"]["SLURM_JOB_ID"] for r in rs}
        assert {r["env"]["SLURM_ARRAY_TASK_ID"] for r in rs} == {str(task)}
        meta = nb.RunReader(dirs[-1]).meta
        assert (meta["job_id"], meta["job_id_source"]) == (job_id, "slurm")
    assert len(set(dirs)) == 3
    assert sorted(map(str, run_dirs(tmp_path / "runs"))) == sorted(dirs)


def test_resubmitted_job_continues_through_nb_resume_id(env, tmp_path, slurm):
    """A job does 3 steps and submits itself again as a NEW job (new SLURM_JOB_ID); each job
    continues the same run through `nb resume-id --latest` + NB_RUN_ID + NB_RESUME=auto."""
    out, log, jobs = tmp_path / "out", tmp_path / "chain.out", tmp_path / "jobs.txt"
    path = tmp_path / "chain.sh"
    train = tiny("--project", "chain", "--name", "chain", "--steps", "9", "--stop-after", "3",
                 "--ckpt", tmp_path / "ckpt.json", "--out", out)
    script(path, f"""#SBATCH -n 2 --open-mode=append -o {log}
set -euo pipefail
RUN_ID=$(nb resume-id chain --name chain --latest) || RUN_ID=$(nb resume-id chain --name chain)
export NB_RUN_ID=$RUN_ID NB_RESUME=auto
echo "job $SLURM_JOB_ID continues run $RUN_ID"
srun {" ".join(map(str, train))}
if [ ! -e {out}/finished ]; then sbatch --parsable {path} >>{jobs}; fi
""")
    jobs.write_text(sbatch([path], env, cwd=tmp_path) + "\n")
    wait_for(lambda: (out / "finished").exists(), 240, "the chain of jobs to finish", [log])
    job_ids = jobs.read_text().split()
    for j in job_ids:
        wait_job(j, env, outputs=[log])

    assert len(job_ids) == 3
    (run_dir,) = run_dirs(tmp_path / "runs")
    reader = nb.RunReader(run_dir)
    assert reader.meta["run_id_source"] == "explicit"
    assert [s["session"] for s in reader.sessions(0)] == [0, 1, 2]
    assert [f.header["job_id"] for f in reader.files(0)] == job_ids
    assert [s["first_step"] for s in reader.sessions(0)] == [0, 3, 6]
    assert_clean_curve(reader, 9)
    assert reader.ranks() == [0, 1]


def test_slurm_example_srun_torchrun_two_nodes_requeue(env, tmp_path, two_nodes):
    """scripts/slurm_example.sbatch: srun + torchrun --nnodes 2 --rdzv-id $SLURM_JOB_ID on
    both nodes (gloo DDP); USR1 (as Slurm sends it before the time limit) makes the job
    requeue itself; the restarted job continues the run from its checkpoint."""
    out, log = tmp_path / "out", tmp_path / "example.out"
    env = dict(env, NPROC="2", RDZV_PORT=str(free_port()))
    job_id = sbatch(["-o", log, REPO / "scripts" / "slurm_example.sbatch", TINY, "--dist", "gloo",
                     "--name", "example", "--steps", "20", "--sleep", "0.2",
                     "--ckpt", tmp_path / "ckpt.json", "--ckpt-every", "4", "--out", out],
                    env, cwd=tmp_path)
    wait_for(lambda: len(progress(out, 0)) >= 6, 180, "6 steps logged", [log])

    first = reports(out, 0)
    run_dir = assert_agree(first, 4)
    assert {r["env"]["TORCHELASTIC_RUN_ID"] for r in first} == {job_id}
    assert {r["hostname"] for r in first} == set(two_nodes)
    assert {r["env"]["SLURM_PROCID"] for r in first} == {"0", "1"}  # the agents' index

    run(["scancel", "--batch", "--signal=USR1", job_id], env)
    wait_job(job_id, env, timeout=240, outputs=[log])

    before = progress(out, 0)
    second = reports(out, 1)
    assert assert_agree(second, 4) == run_dir
    assert {r["env"].get("SLURM_RESTART_COUNT") for r in second} == {"1"}
    reader = nb.RunReader(run_dir)
    meta = reader.meta
    assert (meta["job_id"], meta["job_id_source"]) == (job_id, "torchelastic")
    assert Path(run_dir).name == derive_run_id("launchers", "example", job_id)
    sessions = reader.sessions(0)
    assert [s["restart_counts"] for s in sessions] == [
        {"TORCHELASTIC_RESTART_COUNT": "0"},
        {"TORCHELASTIC_RESTART_COUNT": "0", "SLURM_RESTART_COUNT": "1"},
    ]
    s0 = reader.scalars("train/step", include_hidden=True).filter(session=0)
    assert set(before) <= set(s0["step"].to_list())
    assert_clean_curve(reader, 20)
    assert reader.ranks() == [0, 1, 2, 3]
    assert sorted({m["hostname"] for m in reader.machines()}) == sorted(two_nodes)
    assert set(reader.system()["hostname"].unique().to_list()) == set(two_nodes)
    text = log.read_text()
    assert "USR1, time limit near: requeueing" in text
    assert "restart 0" in text and "restart 1" in text

