"""A 4-rank gloo job for the straggler tests (tests/integration/test_straggler_torchrun.py):
every rank times its own work each step as ``time/work`` (all ranks) and all-reduces a
tensor, so the ranks keep in step as DDP ranks do. Nothing in it knows what is judged.

The timer's clock is the model's: the work of a step "takes" a modelled duration,
exact whatever the machine's load. On the ranks that really wait (the slow rank, the
waiters) real time counts too, in whole seconds only (``floor(perf_counter())``): the
µs-ms a busy machine adds to a step never shows (or, once in a long while, as one
spike of a second), a real wait of 2 s shows as 2-3 s. The model: 41-49 µs a step
(by rank and step);

    --warm-rank R       rank R's first step takes 8 ms (warm-up)
    --spike-rank R --spike-at S
                        rank R's step S takes 4 ms (one spike)
    --slow-rank R       rank R really sleeps --slow-s seconds (2) in its work every step
    --die-rank R --die-at S --die-how raise|kill
                        rank R sleeps 2 s at step S after its work, then raises (an
                        uncaught exception) or SIGKILLs itself; the --waiters (ranks
                        that receive rank R's output inside their timed work, every
                        step) time the wait, and fail when it dies
    --pause-after N     after N steps every rank flushes, writes FLAGS/paused.r<rank>
                        and waits for FLAGS/go (the test reads the run meanwhile)

Rank and world size come from torchrun's variables.
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
    ap.add_argument("--name", default="straggler")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warm-rank", type=int, default=-1)
    ap.add_argument("--spike-rank", type=int, default=-1)
    ap.add_argument("--spike-at", type=int, default=-1)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-s", type=float, default=2.0)
    ap.add_argument("--die-rank", type=int, default=-1)
    ap.add_argument("--die-at", type=int, default=-1)
    ap.add_argument("--die-how", choices=("raise", "kill"), default="raise")
    ap.add_argument("--waiters", default="")
    ap.add_argument("--pause-after", type=int, default=-1)
    ap.add_argument("--flags", default=None)
    args = ap.parse_args()
    waiters = {int(r) for r in args.waiters.split(",") if r}
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = [0.0]
    # the timer's clock (tests/cli/test_timers.py and scripts/bench_scale.py do the same)
    if rank == args.slow_rank or rank in waiters:
        sys.modules[nb.Timer.__module__]._perf = lambda: model[0] + math.floor(time.perf_counter())
    else:
        sys.modules[nb.Timer.__module__]._perf = lambda: model[0]
    run = nb.init("straggler", run_name=args.name, root=args.root, system=False, timing_all_ranks=True)
    assert run.rank == rank, (run.rank, rank)
    dist.barrier()
    x = torch.ones(4)
    for step in range(args.steps):
        run.add_scalar("train/loss", 1.0 / (step + 1), step=step)  # the step (a failure records it)
        with run.timer("time/work", step=step):
            if rank == args.warm_rank and step == 0:
                model[0] += 8e-3
            elif rank == args.spike_rank and step == args.spike_at:
                model[0] += 4e-3
            else:
                model[0] += (41 + (3 * rank + 7 * step) % 9) * 1e-6
            if rank == args.slow_rank:
                time.sleep(args.slow_s)
            if rank in waiters:  # its input comes from the die rank
                dist.recv(torch.empty(4), src=args.die_rank)
        if rank == args.die_rank:
            if step == args.die_at:
                run.flush()
                time.sleep(2.0)
                if args.die_how == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError(f"rank {rank} died at step {step} (on purpose)")
            for w in sorted(waiters):
                dist.send(x, dst=w)
        dist.all_reduce(x)
        x /= dist.get_world_size()
        if step + 1 == args.pause_after:
            run.flush()
            with open(os.path.join(args.flags, f"paused.r{rank}"), "w") as f:
                f.write(str(os.getpid()))
            while not os.path.exists(os.path.join(args.flags, "go")):
                time.sleep(0.05)  # waiting for the test, not timing anything
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
