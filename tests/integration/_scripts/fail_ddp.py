"""A 4-rank gloo job that goes wrong on purpose, for tests/integration/test_failures.py.

Every rank logs through nblog (timers on every rank) and all-reduces a tensor each
step, so when one rank stops the others block until torchrun stops them (SIGTERM), as
in a real DDP job.

    --raise-rank R --at S    rank R raises RuntimeError at step S (under torch's @record),
                             after its add_scalar of step S; with --raise-before-scalar
                             after its timer of step S and before that add_scalar
    --kill-rank R --at S     rank R flushes, then kills itself with SIGKILL at step S
    --alert-rank R           rank R raises run.alert("slow data", ...) at step 10
    --flush-first            every rank flushes after step 1 (rank 0's run.json records
                             the first step then; later progress every NB_PROGRESS_S)
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

import nblog as nb


@record
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--at", type=int, default=30)
    ap.add_argument("--raise-rank", type=int, default=-1)
    ap.add_argument("--kill-rank", type=int, default=-1)
    ap.add_argument("--alert-rank", type=int, default=-1)
    ap.add_argument("--raise-before-scalar", action="store_true")
    ap.add_argument("--flush-first", action="store_true")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    run = nb.init("fail", run_name="ddp", root=args.root, system=False, timing_all_ranks=True)
    if rank == 0:
        print(f"run id: {run.id}", flush=True)
    x = torch.ones(4)
    for step in range(1, args.steps + 1):
        with run.timer("time/step", step=step):
            dist.all_reduce(x)
            x /= dist.get_world_size()
        if step == args.at and rank == args.raise_rank and args.raise_before_scalar:
            raise RuntimeError(f"CUDA out of memory (injected at step {step}, before its scalar)")
        run.add_scalar("train/loss", 1.0 / step, step=step)
        if step == 1 and args.flush_first:
            run.flush()
        if rank == args.alert_rank and step == 10:
            run.alert("slow data", f"rank {rank} waited 3 s for a batch", level="warn")
        if step == args.at and rank == args.raise_rank:
            raise RuntimeError(f"CUDA out of memory (injected at step {step})")
        if step == args.at and rank == args.kill_rank:
            run.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    run.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Leave without finalizing the interpreter (README, Pitfalls): torch's gloo can abort a rank
    # at exit after its work is done ("terminate called without an active exception", SIGABRT),
    # its worker threads destroying work objects while the interpreter is torn down. Everything
    # is written by now: nb's run finished and the process group destroyed in main().
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
