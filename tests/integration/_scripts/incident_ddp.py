"""A 4-rank gloo job that goes wrong in three ways, for the incident tests
(tests/integration/test_incident_watch.py under torchrun, tests/launchers/test_incident_slurm.py
under srun): nothing in it knows that ``nb watch`` is looking.

Every rank times its data loading (``time/data``, all ranks) and all-reduces a tensor
each step, so the ranks keep in step as DDP ranks do; rank 0 logs ``train/loss``.

    --nan-at S                 train/loss is NaN at step S (the value all ranks reduced)
    --slow-rank R --slow-from S --slow-sleep X
                               rank R's data loading takes X s a step from step S on
    --stop-at S                after step S every rank flushes, then stops itself with
                               SIGSTOP (a hang: the test sends SIGCONT, or scancel does)
    --pids DIR                 each rank writes its pid to DIR/rank<R>.pid
    --sleep X                  seconds of data loading a step on the other ranks

Rank and world size come from torchrun's or srun's variables (and nb must agree); under
srun the ranks meet at 127.0.0.1 on a port taken from the job id (one node).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import nblog as nb


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--name", default="incident")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--sleep", type=float, default=0.02)
    ap.add_argument("--nan-at", type=int, default=-1)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-from", type=int, default=0)
    ap.add_argument("--slow-sleep", type=float, default=0.1)
    ap.add_argument("--stop-at", type=int, default=-1)
    ap.add_argument("--pids", default=None)
    args = ap.parse_args()
    # the ranks meet first, then open the run: no rank's log waits seconds for the others
    rank = int(os.environ.get("RANK") or os.environ["SLURM_PROCID"])
    world = int(os.environ.get("WORLD_SIZE") or os.environ["SLURM_NTASKS"])
    if args.pids:
        os.makedirs(args.pids, exist_ok=True)
        with open(os.path.join(args.pids, f"rank{rank}.pid"), "w") as f:
            f.write(f"{os.getpid()}\n")
    if "TORCHELASTIC_RUN_ID" in os.environ:
        init_method = "env://"
    else:  # srun: one node, a port of the job's own
        init_method = f"tcp://127.0.0.1:{20000 + int(os.environ.get('SLURM_JOB_ID', '0')) % 20000}"
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    run = nb.init("incident", run_name=args.name, root=args.root, system=False, timing_all_ranks=True)
    assert (run.rank, run.world_size) == (rank, world), (run.rank, run.world_size, rank, world)
    dist.barrier()
    if rank == 0:
        print(f"run dir: {run.dir}", flush=True)
    x = torch.ones(4)
    for step in range(1, args.steps + 1):
        slow = run.rank == args.slow_rank and step >= args.slow_from
        with run.timer("time/data", step=step):
            time.sleep(args.slow_sleep if slow else args.sleep)
        loss = torch.tensor([1.0 + 0.01 * math.sin(step)])
        if step == args.nan_at:
            loss = torch.tensor([math.nan])
        dist.all_reduce(loss)
        dist.all_reduce(x)
        x /= run.world_size
        run.add_scalar("train/loss", float(loss.item()) / run.world_size, step=step)
        if step == args.stop_at:
            run.flush()
            os.kill(os.getpid(), signal.SIGSTOP)
    dist.barrier()
    dist.destroy_process_group()
    run.finish()


if __name__ == "__main__":
    main()
    # Leave without finalizing the interpreter (README, Pitfalls): torch's gloo can abort a rank
    # at exit after its work is done ("terminate called without an active exception", SIGABRT),
    # its worker threads destroying work objects while the interpreter is torn down. Everything
    # is written by now: nb's run finished and the process group destroyed in main().
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
