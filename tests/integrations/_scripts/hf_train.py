"""A 1-layer GPT-2 built from a tiny config (no download) trained by a Trainer with NbCallback.

Usage: hf_train.py ROOT OUTPUT_DIR MAX_STEPS [RESUME_FROM|-]
"""

from __future__ import annotations

import os
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from nblog.integrations.transformers import NbCallback

root, out, max_steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
resume = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "-" else None


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 32, (n, 8), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_positions=8, n_embd=16, n_layer=1, n_head=2))
args = TrainingArguments(
    output_dir=out, max_steps=max_steps, per_device_train_batch_size=2, per_device_eval_batch_size=4,
    logging_steps=2, eval_strategy="steps", eval_steps=4, save_strategy="steps", save_steps=4,
    report_to="none", use_cpu=True, ddp_backend="gloo", learning_rate=1e-3, seed=0,
    dataloader_num_workers=0, disable_tqdm=True,
)
callback = NbCallback("hf", run_name="gpt2-tiny", root=root)  # its step timer: every rank
trainer = Trainer(model=model, args=args, train_dataset=Tokens(64, 1), eval_dataset=Tokens(8, 2), callbacks=[callback])
trainer.train(resume_from_checkpoint=resume)
if callback.run.rank == 0:
    print("run id:", callback.run.id, flush=True)
# Leave without finalizing the interpreter: gloo's worker threads can abort a rank at exit
# ("terminate called without an active exception"; see accelerate_train.py). The run is
# finished (on_train_end) and flushed: nothing is left for the atexit hooks.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
