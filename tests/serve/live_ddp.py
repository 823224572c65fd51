"""A 2-rank gloo job for the live test of ``nb serve`` (test_serve_browser.py), run by
``torchrun --standalone --nproc-per-node 2 live_ddp.py --root R --flags F``.

Every rank logs ``train/loss`` (``scalars_all_ranks``: each rank its own values, rank 1
offset by 1) at steps ``0 .. --first - 1``, all-reducing a tensor each step as DDP ranks
do, flushes, writes ``F/ready.r<rank>`` and waits for ``F/go`` (the test writes it once
the page shows the run); then it logs steps ``--first .. --first + --more - 1``, flushes,
writes ``F/more.r<rank>`` and waits for ``F/stop``, so the run is still running while the
test looks for the new points on the page. A wait longer than ``--wait-s`` ends the rank
with exit 3 (a test that failed before writing the file must not leave a job behind).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

import nblog as nb


def wait_for(path: str, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            print(f"no {path} within {limit_s} s", file=sys.stderr)
            sys.stderr.flush()
            os._exit(3)
        time.sleep(0.05)  # waiting for the test, not timing anything


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--flags", required=True)
    ap.add_argument("--first", type=int, default=30)
    ap.add_argument("--more", type=int, default=20)
    ap.add_argument("--wait-s", type=float, default=240.0)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    run = nb.init("live", run_name="live", root=args.root, system=False, scalars_all_ranks=True,
                  flush_interval=0.2)
    x = torch.ones(4)

    def steps(lo: int, hi: int) -> None:
        for step in range(lo, hi):
            run.add_scalar("train/loss", 2.0 / (1 + step) + rank, step=step)
            dist.all_reduce(x)
        run.flush()

    steps(0, args.first)
    with open(os.path.join(args.flags, f"ready.r{rank}"), "w") as f:
        f.write(str(os.getpid()))
    wait_for(os.path.join(args.flags, "go"), args.wait_s)
    steps(args.first, args.first + args.more)
    with open(os.path.join(args.flags, f"more.r{rank}"), "w") as f:
        f.write(str(os.getpid()))
    wait_for(os.path.join(args.flags, "stop"), args.wait_s)
    dist.barrier()
    dist.destroy_process_group()
    run.finish()


if __name__ == "__main__":
    main()
    # Leave without finalizing the interpreter (README, Pitfalls): torch's gloo can abort a rank
    # at exit after its work is done; everything is written by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
