"""Hang dumps on demand under a real two-node Slurm cluster (issue 25): the recipe of the
README's "When a job hangs", ``scancel --signal=USR1 JOB``, reaches every rank of every
node (Slurm signals the job step's tasks, not the batch shell), each rank writes its own
dump into the run folder, and training goes on to its last step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launchkit import assert_agree, reports, run, sbatch, tiny, wait_for, wait_job

import nblog as nb
from nblog.format._filenames import parse_hang_file_name

pytestmark = pytest.mark.launchers


def steps_logged(out: Path) -> int:
    f = out / "progress.a0.txt"
    return len(f.read_text().split()) if f.exists() else 0


def test_scancel_signal_usr1_dumps_every_rank_and_the_job_goes_on(env, tmp_path, slurm, two_nodes):
    out, log = tmp_path / "out", tmp_path / "job.out"
    train = tiny("--name", "usr1", "--steps", "30", "--sleep", "0.25", "--out", out)
    job = tmp_path / "job.sh"
    job.write_text("#!/bin/bash\nsrun " + " ".join(map(str, train)) + "\n")
    job_id = sbatch(["-N", "2", "-n", "4", "--ntasks-per-node", "2", "-o", log, job], env, cwd=tmp_path)
    wait_for(lambda: steps_logged(out) >= 5, 120, "5 steps logged", [log])
    # every rank has called nb.init (its report is written right after it)
    wait_for(lambda: len(list(out.glob("rank*.a0.json"))) == 4, 60, "4 ranks started", [log])
    run(["scancel", "--signal=USR1", job_id], env)
    wait_job(job_id, env, timeout=180, outputs=[log])  # COMPLETED: USR1 killed no one

    run_dir = Path(assert_agree(reports(out), 4))
    dumps: dict[int, dict] = {}
    for p in run_dir.iterdir():
        parsed = parse_hang_file_name(p.name)
        if parsed is not None and parsed[2] is not None:
            dumps[parsed[0]] = json.loads(p.read_text().splitlines()[0])
    assert sorted(dumps) == [0, 1, 2, 3], sorted(p.name for p in run_dir.iterdir())
    assert {d["kind"] for d in dumps.values()} == {"signal"}
    assert len({d["host"] for d in dumps.values()}) == 2  # both machines
    assert all(d["main"] for d in dumps.values())  # each with its main thread's stack
    reader = nb.RunReader(run_dir)
    assert reader.meta["status"] == "finished"
    assert reader.scalars("train/step")["step"].to_list() == list(range(30))
