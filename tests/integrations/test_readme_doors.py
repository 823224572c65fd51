"""Each example of the README's "Use it from your framework" runs as pasted.

The block is taken verbatim from README.md; in front of it goes only what the example
assumes the user already has (a model, a loader, a loss...).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from fwkit import VENV_BIN, clean_env, only_run, readme_block, run

import nblog as nb

LIGHTNING_PRELUDE = '''
import torch, lightning.pytorch as pl

class Model(pl.LightningModule):
    def __init__(self, lr=0.1):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Linear(4, 1)
    def training_step(self, batch, batch_idx):
        x, y = batch
        with self.logger.run.timer("time/forward", step=self.global_step, all_ranks=True):
            loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train/loss", loss)
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

x = torch.randn(512, 4)  # 64 steps per epoch and process
train_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
model = Model()
'''

TRANSFORMERS_PRELUDE = '''
import torch
from transformers import GPT2Config, GPT2LMHeadModel

model = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_positions=8, n_embd=16, n_layer=1, n_head=2))
ids = torch.randint(0, 32, (16, 8))
train_ds = [{"input_ids": i, "labels": i} for i in ids]
eval_ds = train_ds[:4]
'''

ACCELERATE_PRELUDE = '''
lr = 0.01
loader = [[float(i)] for i in range(5)]
def train_step(batch):
    return 1.0 / (1.0 + batch[0])
'''

# after the example: what Accelerate itself saw, then out without the gloo abort at
# interpreter exit (see _scripts/accelerate_train.py); the main process's tracker is
# finished by end_training, the other rank's run here
ACCELERATE_EPILOGUE = '''
import os
print(f"accelerate rank {accelerator.process_index} of {accelerator.num_processes}", flush=True)
tracker.run.finish()
os._exit(0)
'''

TENSORBOARD_PRELUDE = '''
import numpy as np
exp, rank, step, loss, lr_enc, lr_dec = "exp1", 0, 3, 0.5, 0.1, 0.2
img_chw = np.zeros((3, 4, 4), np.uint8)
'''


def run_example(tmp_path: Path, heading: str, prelude: str) -> nb.RunReader:
    script = tmp_path / "example.py"
    script.write_text(prelude + "\n" + readme_block(heading), encoding="utf-8")
    run([sys.executable, str(script)], tmp_path, clean_env(NB_DIR=str(tmp_path / "runs")))
    return nb.RunReader(only_run(tmp_path / "runs"))


def test_lightning_example(tmp_path):
    r = run_example(tmp_path, "### Lightning", LIGHTNING_PRELUDE)
    assert r.ranks() == [0, 1]  # devices=2 under Lightning's own launcher
    assert r.config == {"data": "digits", "lr": 0.1}
    assert r.scalars(["train/loss"])["step"].to_list() == [49, 99]  # Lightning logs every 50 steps
    assert set(r.timers(all_ranks=True)["rank"].to_list()) == {0, 1}
    # Lightning's default ModelCheckpoint: into the run folder, not ./digits/<run id>/checkpoints
    ckpts = Path(r.dir) / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["epoch=1-step=128.ckpt", "nb_run_id"]
    assert (ckpts / "nb_run_id").read_text().strip() == r.id
    assert sorted(p.name for p in tmp_path.iterdir()) == ["example.py", "runs"]


def test_transformers_example(tmp_path):
    r = run_example(tmp_path, "### Hugging Face Transformers", TRANSFORMERS_PRELUDE)
    assert {"train/loss", "eval/loss"} <= set(r.scalars()["tag"].to_list())
    assert r.config["model"]["n_layer"] == 1


def test_accelerate_example(tmp_path):
    r = run_example(tmp_path, "### Accelerate", ACCELERATE_PRELUDE)
    assert r.config == {"lr": 0.01}
    assert r.scalars(["train/loss"])["value"].to_list() == [1.0 / (1 + i) for i in range(5)]
    assert r.timers()["step"].to_list() == list(range(5))


def test_accelerate_cpu_recipe_gives_two_ranks(tmp_path):
    """The README's CPU command, as pasted, on the README's example: two ranks that
    Accelerate joins (``accelerate launch --cpu --num_processes 2`` starts one)."""
    script = tmp_path / "train.py"
    script.write_text(ACCELERATE_PRELUDE + "\n" + readme_block("### Accelerate") + ACCELERATE_EPILOGUE, encoding="utf-8")
    words = shlex.split(readme_block("### Accelerate", "bash").strip())
    assigned = {}
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        assigned[name] = value
    assert words[0] == "accelerate" and words[-1] == "train.py", words
    cmd = [str(VENV_BIN / "accelerate"), *words[1:]]
    env = clean_env(NB_DIR=str(tmp_path / "runs"), HF_HOME=str(tmp_path / "hf"), **assigned)  # no user config
    out = run(cmd, tmp_path, env).stdout
    assert sorted(line for line in out.splitlines() if line.startswith("accelerate rank")) == [
        "accelerate rank 0 of 2", "accelerate rank 1 of 2"]
    r = nb.RunReader(only_run(tmp_path / "runs"))
    assert r.meta["world_size"] == 2 and r.ranks() == [0, 1]
    assert r.scalars(["train/loss"])["step"].to_list() == list(range(5))
    for rank in (0, 1):
        assert r.timers(all_ranks=True).filter(rank=rank)["step"].to_list() == list(range(5))


def test_summary_writer_example(tmp_path):
    r = run_example(tmp_path, "### TensorBoard's `SummaryWriter`", TENSORBOARD_PRELUDE)
    assert r.meta["name"] == "exp1"
    assert set(r.scalars()["tag"].to_list()) == {"train/loss", "lr/enc", "lr/dec", "hp/loss"}
    assert r.media("val/pred").height == 1
    assert r.config == {"hparams": {"lr": 0.1}}
