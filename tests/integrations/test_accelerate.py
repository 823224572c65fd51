"""NbTracker under a real ``accelerate launch --multi_gpu --num_processes 2`` on CPU.

Accelerate's single-machine launch uses a static rendezvous (``TORCHELASTIC_RUN_ID=none``,
no job id): the two workers must still agree on one run, without talking to each other.
"""

from __future__ import annotations

from pathlib import Path

from fwkit import SCRIPTS, VENV_BIN, clean_env, free_port, only_run, run

import nblog as nb

SCRIPT = SCRIPTS / "accelerate_train.py"


def launch(tmp_path: Path):
    cmd = [
        str(VENV_BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_ip", "127.0.0.1", "--main_process_port", str(free_port()),
        str(SCRIPT), "runs",
    ]
    return run(cmd, tmp_path, clean_env())


def test_accelerate_launch_two_processes_log_into_one_run(tmp_path):
    out = launch(tmp_path).stdout
    assert "rank 0 of 2" in out and "rank 1 of 2" in out
    r = nb.RunReader(only_run(tmp_path / "runs"))
    assert r.ranks() == [0, 1]
    assert r.config == {"lr": 0.1, "epochs": 2}  # init_trackers(config=...)
    assert r.scalars(["train/loss"])["step"].to_list() == list(range(8))  # 2 epochs x 4 batches
    assert r.text()["text"].to_list()[:2] == ["step 0", "step 1"]
    timers = r.timers(all_ranks=True)
    for rank in (0, 1):
        assert timers.filter(rank=rank)["step"].to_list() == list(range(8))
    # a second launch is a new launcher process: a new run, not a new session of this one
    launch(tmp_path)
    assert len([p for p in (tmp_path / "runs" / "acc").iterdir()]) == 2
