"""A tiny LightningModule trained with DDP on 2 CPU processes, logging through NbLogger.

Usage: lightning_train.py ROOT CKPT_DIR MAX_EPOCHS [CKPT_PATH|-] [SLEEP_AT_STEP]
                          [--touch HOOK,...] [--devices N]

CKPT_DIR ``-``: Lightning's default ``ModelCheckpoint`` (no dirpath, ``save_last=True``).
``--touch setup,on_fit_start``: a callback reads ``trainer.logger.run`` in those hooks,
as users do, and prints ``touched in HOOK by rank R: RUN_ID``; ``before``: the script
reads it before ``fit``. ``--devices 1``: one process, no DDP.
"""

from __future__ import annotations

import argparse
import sys
import time

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from nblog.integrations.lightning import NbLogger

parser = argparse.ArgumentParser()
parser.add_argument("root")
parser.add_argument("ckpt_dir")
parser.add_argument("max_epochs", type=int)
parser.add_argument("ckpt_path", nargs="?", default="-")
parser.add_argument("sleep_at", nargs="?", type=int, default=-1)
parser.add_argument("--touch", default="")
parser.add_argument("--devices", type=int, default=2)
opts = parser.parse_args()
ckpt_dir = None if opts.ckpt_dir == "-" else opts.ckpt_dir
ckpt_path = None if opts.ckpt_path == "-" else opts.ckpt_path
sleep_at = opts.sleep_at


class Tiny(pl.LightningModule):
    def __init__(self, lr: float = 0.05, hidden: int = 8):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        with self.logger.run.timer("time/forward", step=self.global_step):
            loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train/loss", loss)
        if self.global_step == sleep_at:  # every rank waits in Python, where handlers run
            sys.stdout.write(f"SLEEPING {self.global_rank}\n")  # one write: ranks share the pipe
            sys.stdout.flush()
            deadline = time.monotonic() + 60  # the test sends SIGTERM here
            while time.monotonic() < deadline and not self.trainer.received_sigterm:
                time.sleep(0.05)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class Touch(pl.Callback):
    """Reads the logger's run as early as a user's callback can."""

    def __init__(self, hooks: set[str]):
        self.hooks = hooks

    def _touch(self, trainer: pl.Trainer, hook: str) -> None:
        if hook in self.hooks:
            run = trainer.logger.run  # opens it
            sys.stdout.write(f"touched in {hook} by rank {trainer.global_rank}: {run.id}\n")
            sys.stdout.flush()

    def setup(self, trainer, pl_module, stage):
        self._touch(trainer, "setup")

    def on_fit_start(self, trainer, pl_module):
        self._touch(trainer, "on_fit_start")


torch.manual_seed(0)
x = torch.randn(64, 4)
data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
loader = torch.utils.data.DataLoader(data, batch_size=4)  # 8 steps per epoch and rank
logger = NbLogger("lit", run_name="tiny", root=opts.root, config={"data": "random"}, timing_all_ranks=True)
callbacks: list[pl.Callback] = [ModelCheckpoint(dirpath=ckpt_dir, save_last=True, every_n_epochs=1, save_top_k=-1)]
touch = set(opts.touch.split(",")) if opts.touch else set()
if touch:
    callbacks.insert(0, Touch(touch))
if "before" in touch:
    print("touched before fit:", logger.run.id, flush=True)
trainer = pl.Trainer(
    strategy="ddp" if opts.devices > 1 else "auto", accelerator="cpu", devices=opts.devices, max_epochs=opts.max_epochs, logger=logger,
    log_every_n_steps=1, enable_progress_bar=False, enable_model_summary=False,
    default_root_dir=opts.ckpt_dir if ckpt_dir else ".", callbacks=callbacks,
)
trainer.fit(Tiny(), loader, ckpt_path=ckpt_path)
if trainer.global_rank == 0:
    print("run id:", logger.version, flush=True)
    print("checkpoints:", trainer.checkpoint_callback.dirpath, flush=True)
