"""The same SummaryWriter calls, for torch.utils.tensorboard's writer and nb's drop-in.

Usage (one writer per rank, torchtitan's pattern, under torchrun):
    tb_calls.py {tb|nb} LOG_BASE [ROOT]
writes into LOG_BASE/rank_<RANK>.
"""

from __future__ import annotations

import os
import sys

import numpy as np


def calls(w) -> None:
    """Scalars, grouped scalars, text, images (CHW, HWC, a float batch), a histogram, hparams."""
    for step in range(5):
        w.add_scalar("train/loss", 1.0 / (step + 1), step)
        w.add_scalars("lr", {"a": 0.1 * step, "b": 0.25}, step)
    w.add_text("notes", "hello tb", 2)
    img = (np.arange(3 * 4 * 5) * 7 % 256).astype(np.uint8).reshape(3, 4, 5)
    w.add_image("img/chw", img, 1)
    w.add_image("img/hwc", img.transpose(1, 2, 0), 1, dataformats="HWC")
    w.add_images("img/batch", np.random.default_rng(0).random((3, 3, 4, 5)), 1)
    w.add_histogram("weights", np.random.default_rng(1).standard_normal(1000), 3)
    w.add_hparams({"lr": 0.1, "bs": 4}, {"hp/acc": 0.9})


if __name__ == "__main__":
    kind, base = sys.argv[1], sys.argv[2]
    log_dir = os.path.join(base, f"rank_{os.environ.get('RANK', '0')}")
    if kind == "tb":
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter(log_dir)
    else:
        from nblog.tensorboard import SummaryWriter
        writer = SummaryWriter(log_dir, root=sys.argv[3])
    with writer:
        calls(writer)
