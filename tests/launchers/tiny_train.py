"""A tiny, fast training script for the launcher tests (tests/launchers).

Runs under any launcher (torchrun, mpirun, srun, plain python): ``nb.init`` on every
rank, then ``--steps`` steps of a tiny linear model, data-parallel over gloo when
``--dist gloo`` (rank and world size come from nb, which read the launcher's
variables), or a torch-free stand-in with ``--dist none`` (same logging, no import
cost). Rank 0 logs scalars; every rank logs an ``all_ranks`` timer.

Logged per step on rank 0: ``train/loss``, ``train/step`` (= step) and
``train/attempt`` (which launch logged it: 0 first, 1 after one restart...), so the
tests can check that the curve read back is clean after a restart.

Files written under ``--out`` (for the tests to assert on):
- ``rank<R>.a<attempt>.json``: what this rank saw (rank, run id, run dir, session,
  hostname, the launcher variables).
- ``progress.a<attempt>.txt`` (rank 0): one line per step, written after
  ``add_scalar`` returned — everything in it must be on disk even after SIGTERM.
Checkpoint (``--ckpt``): ``{"step": s}`` written atomically every ``--ckpt-every`` steps; a
restart continues after the checkpointed step. With gloo rank 0 writes it and broadcasts
where to start (as DDP jobs do); without, ranks do not wait for each other, so each rank
keeps its own file (``<ckpt>.r<rank>``) and never reads one being written by this launch.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

import nblog as nb

LAUNCHER_VARS = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",
    "SLURM_NODEID", "SLURM_JOB_ID", "SLURM_RESTART_COUNT", "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID", "SLURMD_NODENAME", "NB_RUN_ID", "NB_RESUME",
)


def attempt() -> int:
    """Which launch of this job we are: torchrun's restarts plus Slurm's requeues."""
    return sum(int(os.environ.get(k) or 0) for k in ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"))


def write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def master_addr_port() -> tuple[str, int]:
    """torchrun sets MASTER_ADDR/PORT; under srun or mpirun we pick them: the first node
    of the Slurm allocation (or this host), a port from the job id."""
    addr = os.environ.get("MASTER_ADDR")
    if not addr:
        nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
        if nodelist:
            import subprocess

            out = subprocess.run(["scontrol", "show", "hostnames", nodelist],
                                 capture_output=True, text=True, check=True).stdout
            addr = out.split()[0]
        else:
            addr = "127.0.0.1"
    port = os.environ.get("MASTER_PORT")
    if not port:
        port = 20000 + int(os.environ.get("SLURM_JOB_ID", "0")) % 20000
    return addr, int(port)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--project", default="launchers")
    p.add_argument("--name", default="tiny")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--dist", choices=("gloo", "none"), default="none")
    p.add_argument("--out", required=True)
    p.add_argument("--ckpt", default=None, help="checkpoint file (JSON)")
    p.add_argument("--ckpt-every", type=int, default=1)
    p.add_argument("--crash-at", type=int, default=None,
                   help="in the first attempt, rank --crash-rank raises at this step")
    p.add_argument("--crash-rank", type=int, default=0, help="-1: every rank")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds per step")
    p.add_argument("--stop-after", type=int, default=None,
                   help="do at most this many steps in this launch (a time limit)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    a = attempt()

    run = nb.init(args.project, run_name=args.name, config=vars(args), timing_all_ranks=True)
    report = {
        "rank": run.rank, "local_rank": run.local_rank, "world_size": run.world_size,
        "run_id": run.id, "run_dir": run.dir, "session": run.session,
        "is_logging": run.is_logging, "hostname": socket.gethostname(), "pid": os.getpid(),
        "attempt": a, "env": {k: os.environ[k] for k in LAUNCHER_VARS if k in os.environ},
    }
    write_json(os.path.join(args.out, f"rank{run.rank}.a{a}.json"), report)

    ckpt = None
    if args.ckpt:
        ckpt = args.ckpt if args.dist == "gloo" else f"{args.ckpt}.r{run.rank}"
    start = 0
    if ckpt and os.path.exists(ckpt) and (args.dist == "none" or run.rank == 0):
        with open(ckpt) as f:
            start = json.load(f)["step"] + 1

    if args.dist == "gloo":
        import torch
        import torch.distributed as dist

        if "TORCHELASTIC_RUN_ID" in os.environ:
            # torchrun: its agent's store, keyed by restart (a tcp:// store would keep the
            # crashed attempt's addresses and the restart would connect to dead ranks).
            init_method = "env://"
        else:  # srun, mpirun: rank and world size as nb read them from the launcher
            addr, port = master_addr_port()
            init_method = f"tcp://{addr}:{port}"
        dist.init_process_group("gloo", init_method=init_method,
                                rank=run.rank, world_size=run.world_size)
        start_t = torch.tensor([start])
        dist.broadcast(start_t, src=0)  # rank 0 read the checkpoint
        start = int(start_t.item())
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(1000 + run.rank)

        def train_step(step: int) -> float:
            x = torch.randn(16, 8, generator=gen)
            loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return float(loss.detach())
    else:
        def train_step(step: int) -> float:
            return 1.0 / (1 + step) + 0.01 * run.rank

    progress = open(os.path.join(args.out, f"progress.a{a}.txt"), "a") if run.rank == 0 else None
    end = args.steps if args.stop_after is None else min(args.steps, start + args.stop_after)
    for step in range(start, end):
        if args.crash_at is not None and a == 0 and step == args.crash_at and args.crash_rank in (-1, run.rank):
            raise RuntimeError(f"planned crash at step {step} (attempt {a})")
        with run.timer("step", step=step):
            loss = train_step(step)
        run.add_scalar({"train/loss": loss, "train/step": step, "train/attempt": a,
                        "train/session": run.session}, step=step)
        if progress is not None:
            progress.write(f"{step}\n")
            progress.flush()
        if ckpt and (args.dist == "none" or run.rank == 0) and (step + 1) % args.ckpt_every == 0:
            write_json(ckpt, {"step": step})
        if args.sleep:
            time.sleep(args.sleep)
    if args.dist == "gloo":
        dist.barrier()
        dist.destroy_process_group()
    run.finish()
    write_json(os.path.join(args.out, f"done.rank{run.rank}.a{a}.s{run.session}.json"),
               {"end": end, "finished": end >= args.steps})
    if run.rank == 0 and end >= args.steps:
        open(os.path.join(args.out, "finished"), "w").close()
    return 0


if __name__ == "__main__":
    code = main()
    # Leave without finalizing the interpreter (README, Pitfalls): torch's gloo can abort a rank
    # at exit after its work is done ("terminate called without an active exception", SIGABRT),
    # its worker threads destroying work objects while the interpreter is torn down. Everything
    # is written by now: nb's run finished and the process group destroyed in main().
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
