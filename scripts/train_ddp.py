"""Train a small MLP on scikit-learn's digits with DistributedDataParallel, logged with nblog.

The main example job of this project: a real model on real data (the 8x8 handwritten digits
that scikit-learn ships, no download), trained on the CPU with the gloo backend.

    torchrun --nproc-per-node 4 scripts/train_ddp.py            # fresh run
    torchrun --nproc-per-node 4 scripts/train_ddp.py --resume   # continue from the checkpoint

Every rank calls ``nb.init`` with the same arguments. Under torchrun the run id is derived
from ``TORCHELASTIC_RUN_ID`` by nblog itself, so the ranks agree on the run folder without
any communication. Rank 0 logs the scalars (train loss, accuracy, learning rate each step;
eval loss and accuracy each epoch) and a text sample each epoch; every rank logs its own
timers for data, forward, backward and optimizer (``all_ranks=True``).

Rank 0 saves a checkpoint every epoch, atomically, with ``run.id`` in it. ``--resume`` loads
it on every rank and calls ``nb.init(run_id=..., resume="auto")``: the run continues in a new
session, and the points the interrupted session logged after the checkpoint are hidden by
every reader, so the curve stays clean.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import nblog as nb

CHECKPOINT = "last.pt"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=5, help="epochs in all (default 5)")
    p.add_argument("--lr", type=float, default=0.1, help="peak learning rate (default 0.1)")
    p.add_argument("--batch-size", type=int, default=16, help="batch size per rank (default 16)")
    p.add_argument("--hidden", type=int, default=128, help="hidden units (default 128)")
    p.add_argument("--warmup-steps", type=int, default=10, help="linear warmup (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--root", default="nb_runs", help="nblog root folder (default nb_runs)")
    p.add_argument("--project", default="digits", help="nblog project (default digits)")
    p.add_argument("--run-name", default="ddp", help="run name, the run id's prefix")
    p.add_argument("--ckpt-dir", default="checkpoints", help="checkpoint folder")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="stop after this global step (for tests; that epoch counts as done)",
    )
    p.add_argument(
        "--crash-at-step",
        type=int,
        default=None,
        help="raise on every rank right after logging this step (to test resuming)",
    )
    return p.parse_args(argv)


def load_data(seed: int) -> tuple[TensorDataset, TensorDataset]:
    """Digits (1797 images of 8x8, 16 grey levels), 80/20 stratified split, scaled to [0, 1].

    Rank 0 loads the data with scikit-learn and broadcasts it: the other ranks never import
    scikit-learn (2-3 s each on a small machine), as jobs that download on rank 0 do.
    """
    if dist.get_rank() == 0:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        x, y = load_digits(return_X_y=True)
        x_train, x_test, y_train, y_test = train_test_split(
            x, y, test_size=0.2, random_state=seed, stratify=y
        )
        arrays = [
            torch.tensor(x_train, dtype=torch.float32) / 16.0,
            torch.tensor(y_train, dtype=torch.long),
            torch.tensor(x_test, dtype=torch.float32) / 16.0,
            torch.tensor(y_test, dtype=torch.long),
        ]
    else:
        arrays = [None] * 4
    dist.broadcast_object_list(arrays, src=0)
    return TensorDataset(arrays[0], arrays[1]), TensorDataset(arrays[2], arrays[3])


def make_model(hidden: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(64, hidden),
        nn.ReLU(),
        nn.Dropout(0.1),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 10),
    )


def lr_lambda(total_steps: int, warmup: int):
    """Linear warmup, then cosine decay to 0 over ``total_steps`` optimizer steps."""

    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        t = (step - warmup) / max(1, total_steps - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, t)))

    return f


@torch.no_grad()
def evaluate(model: nn.Module, test: TensorDataset, rank: int, world: int) -> tuple[float, float]:
    """Loss and accuracy on the whole held-out split; each rank takes every world-th sample."""
    model.eval()
    x, y = test.tensors
    x, y = x[rank::world], y[rank::world]
    logits = model(x)
    sums = torch.tensor(
        [
            nn.functional.cross_entropy(logits, y, reduction="sum").item(),
            (logits.argmax(1) == y).sum().item(),
            len(y),
        ],
        dtype=torch.float64,
    )
    dist.all_reduce(sums)
    model.train()
    return sums[0].item() / sums[2].item(), sums[1].item() / sums[2].item()


@torch.no_grad()
def sample_text(model: nn.Module, test: TensorDataset, n: int = 6) -> str:
    """The first ``n`` held-out digits drawn in ASCII, each with its prediction and label."""
    model.eval()
    x, y = test.tensors[0][:n], test.tensors[1][:n]
    probs = model(x).softmax(1)
    model.train()
    shades = " .:-=+*#%@"
    columns = []
    for i in range(n):
        image = x[i].view(8, 8).tolist()
        pred, true = int(probs[i].argmax()), int(y[i])
        columns.append(
            ["".join(shades[min(9, int(v * 10))] * 2 for v in row) for row in image]
            + [
                f"pred {pred} (p={float(probs[i, pred]):.2f})",
                f"true {true}  {'ok' if pred == true else 'WRONG'}",
            ]
        )
    return "\n".join(
        "   ".join(col[line].ljust(16) for col in columns).rstrip()
        for line in range(len(columns[0]))
    )


def save_checkpoint(path: str, state: dict) -> None:
    """Write ``state`` to ``path`` atomically: a temp file in the same folder, then rename."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    torch.save(state, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    t_start = time.perf_counter()

    ckpt_path = os.path.join(args.ckpt_dir, CHECKPOINT)
    ckpt = None
    if args.resume:
        if not os.path.exists(ckpt_path):
            raise SystemExit(f"--resume: no checkpoint at {ckpt_path}")
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)

    # Every rank calls init with the same arguments. Fresh start: the run id is derived from
    # torchrun's TORCHELASTIC_RUN_ID by nblog; resume: every rank read it from the checkpoint.
    if ckpt is not None:
        run = nb.init(
            args.project,
            run_name=args.run_name,
            run_id=ckpt["run_id"],
            resume="auto",
            config=vars(args),
            root=args.root,
        )
    else:
        run = nb.init(args.project, run_name=args.run_name, config=vars(args), root=args.root)
    if rank == 0:  # at the start, so that a run that crashes has named itself
        print(f"logging to run {run.id} (session {run.session}) in {run.dir}", flush=True)

    torch.manual_seed(args.seed)
    train, test = load_data(args.seed)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    model = DDP(make_model(args.hidden))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    total_steps = args.epochs * len(loader)
    if args.max_steps is not None:
        total_steps = min(total_steps, args.max_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda(total_steps, min(args.warmup_steps, total_steps // 2))
    )
    loss_fn = nn.CrossEntropyLoss()

    start_epoch, global_step = 0, 0
    if ckpt is not None:
        model.module.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        start_epoch, global_step = ckpt["epoch"], ckpt["global_step"]
        if rank == 0:
            print(
                f"resuming run {run.id} at epoch {start_epoch}, step {global_step} "
                f"(session {run.session})",
                flush=True,
            )

    done = args.max_steps is not None and global_step >= args.max_steps
    for epoch in range(start_epoch, args.epochs):
        if done:
            break
        sampler.set_epoch(epoch)
        it = iter(loader)
        for i in range(len(loader)):
            global_step += 1  # steps are 1-based: step k is the k-th optimizer step
            with run.timer("time/data", step=global_step, all_ranks=True):
                x, y = next(it)
            with run.timer("time/forward", step=global_step, all_ranks=True):
                logits = model(x)
                loss = loss_fn(logits, y)
            with run.timer("time/backward", step=global_step, all_ranks=True):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()  # DDP all-reduces the gradients here
            with run.timer("time/optimizer", step=global_step, all_ranks=True):
                optimizer.step()
                lr = scheduler.get_last_lr()[0]
                scheduler.step()
            run.add_scalar(
                {
                    "train/loss": loss.item(),
                    "train/accuracy": (logits.argmax(1) == y).float().mean().item(),
                    "train/lr": lr,
                    "train/epoch": epoch + (i + 1) / len(loader),  # fractional
                },
                step=global_step,
            )
            if args.crash_at_step is not None and global_step == args.crash_at_step:
                raise RuntimeError(f"--crash-at-step: simulated crash at step {global_step}")
            if args.max_steps is not None and global_step >= args.max_steps:
                done = True
                break

        # End of epoch: evaluate (every rank takes part), log, checkpoint on rank 0.
        eval_loss, eval_acc = evaluate(model.module, test, rank, world)
        run.add_scalar({"eval/loss": eval_loss, "eval/accuracy": eval_acc}, step=global_step)
        if rank == 0:
            run.add_text("eval/sample", sample_text(model.module, test), step=global_step)
            save_checkpoint(
                ckpt_path,
                {
                    "model": model.module.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "epoch": epoch + 1,
                    "global_step": global_step,
                    "run_id": run.id,
                    "args": vars(args),
                },
            )
            print(
                f"epoch {epoch + 1}/{args.epochs}  step {global_step}  "
                f"train/loss {loss.item():.4f}  eval/loss {eval_loss:.4f}  "
                f"eval/accuracy {eval_acc:.4f}",
                flush=True,
            )

    if rank == 0:
        print(
            f"run id: {run.id}\nrun folder: {run.dir}\n"
            f"wall time: {time.perf_counter() - t_start:.1f} s",
            flush=True,
        )
    run.finish()
    dist.destroy_process_group()
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
