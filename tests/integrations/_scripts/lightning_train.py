"""A tiny LightningModule trained with DDP on 2 CPU processes, logging through NbLogger.

Usage: lightning_train.py ROOT CKPT_DIR MAX_EPOCHS [CKPT_PATH|-] [SLEEP_AT_STEP]
"""

from __future__ import annotations

import sys
import time

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from nblog.integrations.lightning import NbLogger

root, ckpt_dir, max_epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
ckpt_path = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "-" else None
sleep_at = int(sys.argv[5]) if len(sys.argv) > 5 else -1


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


torch.manual_seed(0)
x = torch.randn(64, 4)
data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
loader = torch.utils.data.DataLoader(data, batch_size=4)  # 8 steps per epoch and rank
logger = NbLogger("lit", run_name="tiny", root=root, config={"data": "random"}, timing_all_ranks=True)
trainer = pl.Trainer(
    strategy="ddp", accelerator="cpu", devices=2, max_epochs=max_epochs, logger=logger,
    log_every_n_steps=1, enable_progress_bar=False, enable_model_summary=False,
    default_root_dir=ckpt_dir,
    callbacks=[ModelCheckpoint(dirpath=ckpt_dir, save_last=True, every_n_epochs=1, save_top_k=-1)],
)
trainer.fit(Tiny(), loader, ckpt_path=ckpt_path)
if trainer.global_rank == 0:
    print("run id:", logger.version, flush=True)
