"""nb under the real Open MPI 4.1 mpirun, alone and inside an sbatch allocation.

mpirun sets OMPI_COMM_WORLD_* and no shared job id: the ranks can only agree on a run
folder through NB_RUN_ID (or Slurm's SLURM_JOB_ID when mpirun runs inside a job). Inside
sbatch every rank also sees SLURM_PROCID=0: nb must read the OMPI variables first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from launchkit import (
    MPIRUN_FLAGS,
    assert_agree,
    assert_clean_curve,
    reports,
    run,
    run_dirs,
    sbatch,
    tiny,
    wait_job,
)

import nblog as nb

pytestmark = pytest.mark.launchers


def mpirun(np: int, *args) -> list[str]:
    return ["mpirun", *MPIRUN_FLAGS, "-np", str(np), *args]


def test_mpirun_with_nb_run_id(env, tmp_path, openmpi):
    out = tmp_path / "out"
    env = dict(env, NB_RUN_ID="mpi-run-1")
    run(mpirun(4, "-x", "NB_RUN_ID", "-x", "NB_DIR", *tiny("--name", "mpi", "--steps", "4",
                                                             "--out", out)), env)
    rs = reports(out)
    run_dir = assert_agree(rs, 4)
    assert Path(run_dir).name == "mpi-run-1"
    assert {r["env"]["OMPI_COMM_WORLD_RANK"] for r in rs} == {"0", "1", "2", "3"}
    reader = nb.RunReader(run_dir)
    assert (reader.meta["launcher"], reader.meta["run_id_source"]) == ("mpirun", "explicit")
    assert reader.meta["job_id"] is None
    assert reader.ranks() == [0, 1, 2, 3]
    timers = reader.timers("step", all_ranks=True)
    assert sorted(timers["rank"].unique().to_list()) == [0, 1, 2, 3]
    assert_clean_curve(reader, 4)


def test_mpirun_without_run_id_only_rank0_logs(env, tmp_path, openmpi):
    """The documented pitfall: no NB_RUN_ID and no shared job id. Rank 0 picks a random
    id and logs; the other ranks cannot know it and write nothing (never hang)."""
    out = tmp_path / "out"
    run(mpirun(4, *tiny("--name", "mpi", "--steps", "3", "--out", out)), env)
    rs = reports(out)
    assert [r["rank"] for r in rs] == [0, 1, 2, 3]
    assert rs[0]["run_dir"] and all(r["run_dir"] is None and r["run_id"] == "" for r in rs[1:])
    (run_dir,) = run_dirs(tmp_path / "runs")
    reader = nb.RunReader(run_dir)
    assert reader.meta["run_id_source"] == "random"
    assert reader.ranks() == [0]
    assert_clean_curve(reader, 3)


def test_sbatch_mpirun_reads_ompi_not_the_lying_slurm_procid(env, tmp_path, slurm, openmpi):
    out = tmp_path / "out"
    job = tmp_path / "job.sh"
    job.write_text(
        "#!/bin/bash\n"
        "#SBATCH -N 1 -n 4\n"
        f"mpirun {' '.join(MPIRUN_FLAGS)} -np 4 "
        + " ".join(tiny("--name", "sbatch-mpi", "--steps", "4", "--out", out))
        + "\n"
    )
    log = tmp_path / "job.out"
    job_id = sbatch(["-o", log, job], env, cwd=tmp_path)
    wait_job(job_id, env, outputs=[log])

    rs = reports(out)
    run_dir = assert_agree(rs, 4)
    assert {r["env"]["SLURM_PROCID"] for r in rs} == {"0"}  # what Slurm tells every rank
    assert {r["env"]["SLURM_JOB_ID"] for r in rs} == {job_id}
    reader = nb.RunReader(run_dir)
    meta = reader.meta
    assert (meta["launcher"], meta["world_size"]) == ("mpirun", 4)
    assert (meta["job_id"], meta["job_id_source"], meta["run_id_source"]) == (job_id, "slurm", "derived")
    assert reader.ranks() == [0, 1, 2, 3]
    assert_clean_curve(reader, 4)
