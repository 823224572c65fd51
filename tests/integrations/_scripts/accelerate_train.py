"""A tiny training loop under ``accelerate launch``, logging through NbTracker.

Usage: accelerate_train.py ROOT
"""

from __future__ import annotations

import os
import sys

import torch
from accelerate import Accelerator

from nblog.integrations.accelerate import NbTracker

tracker = NbTracker("acc", run_name="loop", root=sys.argv[1])
accelerator = Accelerator(cpu=True, log_with=tracker)
accelerator.init_trackers("acc", config={"lr": 0.1, "epochs": 2})
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 4)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
model, opt, loader = accelerator.prepare(model, opt, loader)
step = 0
for _epoch in range(2):
    for xb, yb in loader:
        with tracker.run.timer("time/step", step=step, all_ranks=True):
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
        accelerator.log({"train/loss": loss.item(), "note": f"step {step}"}, step=step)
        step += 1
print(f"rank {accelerator.process_index} of {accelerator.num_processes} run {tracker.run.id} "
      f"elastic {os.environ.get('TORCHELASTIC_RUN_ID')}", flush=True)
accelerator.end_training()  # finishes the trackers of the main process, and the process group
if not accelerator.is_main_process:
    # Accelerate keeps trackers on the main process only; nb's atexit hook would finish this
    # rank's run, but os._exit below skips it
    tracker.run.finish()
# Leave without finalizing the interpreter: gloo's worker threads outlive destroy_process_group
# here, and one still destroying a work object during finalization cannot take the GIL and
# aborts the process ("terminate called without an active exception", pytorch/pytorch#190489;
# the core dump shows only torch and CPython frames). About 1 launch in 60 under load did.
sys.stdout.flush()
os._exit(0)
