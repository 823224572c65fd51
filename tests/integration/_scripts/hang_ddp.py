"""A torchrun gloo job that hangs on purpose (tests/integration/test_hang_torchrun.py).

Every step: ``add_scalar`` then one ``all_reduce``. At step ``--at`` rank ``--rank``
misbehaves as ``--mode`` says:

- skip: skips the all_reduce and waits on an Event (elsewhere, not in a collective);
- sleep: sleeps inside ``load_batch`` (a stuck data loader) before the all_reduce;
- mismatch: calls ``broadcast`` instead of the all_reduce;
- spin: spins in a pure-Python loop inside ``spin_forever``;
- slow: nobody hangs; from step ``--at`` every step takes twice as long;
- none: nobody hangs (the test signals a rank).

Writes ``<flags>/pid.<rank>`` at start, ``<flags>/ready.<rank>`` after ``nblog.init`` and
``init_process_group``, and ``<flags>/done.<rank>`` at the end.
"""

import argparse
import os
import threading
import time

import torch
import torch.distributed as dist

import nblog


def load_batch(seconds: float) -> None:
    time.sleep(seconds)


def spin_forever() -> None:
    x = 0
    while True:
        x += 1


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="none")
    p.add_argument("--rank", type=int, default=2)
    p.add_argument("--at", type=int, default=5)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--step-s", type=float, default=0.1)
    p.add_argument("--flags", required=True)
    a = p.parse_args()
    rank = int(os.environ["RANK"])
    with open(os.path.join(a.flags, f"pid.{rank}"), "w") as f:  # for the test to end the job
        f.write(str(os.getpid()))
    run = nblog.init("hang")
    dist.init_process_group("gloo")
    with open(os.path.join(a.flags, f"ready.{rank}"), "w") as f:  # nb's signal handler is in place
        f.write("1")
    t = torch.ones(4)
    for step in range(a.steps):
        run.add_scalar("loss", 1.0 / (step + 1), step=step)
        bad = rank == a.rank and step == a.at
        slow = a.mode == "slow" and step >= a.at
        time.sleep(a.step_s * (2 if slow else 1))
        if bad and a.mode == "skip":
            threading.Event().wait()
        if bad and a.mode == "sleep":
            load_batch(3600)
        if bad and a.mode == "spin":
            spin_forever()
        if bad and a.mode == "mismatch":
            dist.broadcast(t, 0)
        else:
            dist.all_reduce(t)
    with open(os.path.join(a.flags, f"done.{rank}"), "w") as f:
        f.write(str(a.steps))
    run.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
