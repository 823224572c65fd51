"""NbCallback in a real Hugging Face Trainer under torchrun (2 CPU processes), then resumed.

The model is a 1-layer GPT-2 built from a config in the script (no download). The
resumed launch uses another rendezvous id, so nothing but the ``nb_run_id`` file in
the checkpoint folder can lead it back to the first run. The script asks for no timer:
every rank's ``time/step`` comes from the callback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fwkit import SCRIPTS, VENV_BIN, clean_env, only_run, run, torchrun

import nblog as nb

SCRIPT = SCRIPTS / "hf_train.py"


def train(tmp_path: Path, rdzv_id: str, max_steps: int, resume: str = "-") -> str:
    cmd = torchrun(SCRIPT, "runs", "out", str(max_steps), resume)
    cmd.insert(cmd.index(str(SCRIPT)), f"--rdzv-id={rdzv_id}")
    proc = run(cmd, tmp_path, clean_env())
    return proc.stdout.split("run id: ")[1].split()[0]


def test_trainer_under_torchrun_with_eval_then_resumed_from_its_checkpoint(tmp_path):
    rid = train(tmp_path, "first", 8)
    folder = only_run(tmp_path / "runs")
    assert folder.name == rid
    r = nb.RunReader(folder)
    assert json.loads((folder / "run.json").read_text())["world_size"] == 2
    assert r.config["learning_rate"] == 1e-3 and r.config["max_steps"] == 8  # TrainingArguments
    assert r.config["model"]["n_embd"] == 16  # the model's config
    s = r.scalars()
    tags = set(s["tag"].to_list())
    assert {"train/loss", "train/learning_rate", "train/grad_norm", "eval/loss", "eval/runtime"} <= tags
    assert s.filter(tag="train/loss")["step"].to_list() == [2, 4, 6, 8]  # state.global_step
    assert s.filter(tag="eval/loss")["step"].to_list() == [4, 8]
    assert (tmp_path / "out" / "checkpoint-4" / "nb_run_id").read_text().strip() == rid
    step_times = r.timers(all_ranks=True)
    for rank in (0, 1):  # each rank timed its own optimizer steps, at state.global_step
        mine = step_times.filter(rank=rank)
        assert set(mine["tag"].to_list()) == {"time/step"}
        assert mine["step"].to_list() == list(range(1, 9))
        assert mine["value"].min() > 0
    cli = run([sys.executable, str(VENV_BIN / "nb"), "timers", str(folder), "--json"], tmp_path, clean_env())
    report = json.loads(cli.stdout)
    assert [(t["tag"], t["ranks"]) for t in report["timers"]] == [("time/step", 2)]
    assert [(x["rank"], x["count"]) for x in report["ranks"]] == [(0, 8), (1, 8)]

    assert train(tmp_path, "second", 12, "out/checkpoint-4") == rid
    assert only_run(tmp_path / "runs") == folder
    r = nb.RunReader(folder)
    assert [x["session"] for x in r.sessions(0)] == [0, 1]
    loss = r.scalars(["train/loss"])
    assert loss["step"].to_list() == [2, 4, 6, 8, 10, 12]  # a clean curve: 6 and 8 replaced
    assert loss["session"].to_list() == [0, 0, 1, 1, 1, 1]
    hidden = r.scalars(["train/loss"], include_hidden=True).filter(hidden=True)
    assert hidden["step"].to_list() == [6, 8]
    assert r.scalars(["eval/loss"])["step"].to_list() == [4, 8, 12]
    for rank in (0, 1):  # the resumed steps 5..12 timed again, the first session's 5..8 hidden
        mine = r.timers(all_ranks=True).filter(rank=rank)
        assert mine["step"].to_list() == list(range(1, 13))
        assert mine["session"].to_list() == [0] * 4 + [1] * 8
