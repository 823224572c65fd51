#!/usr/bin/env python
"""Steps per second of a small model on a GPU that logs its loss every step: nb vs SummaryWriter.

    .venv/bin/python scripts/bench_gpu.py [--steps 2000] [--repeats 3] [--width 512]
        [--layers 4] [--batch 512] [--device cuda]

The same training loop (an MLP, AdamW, loss every step) runs with, in turn:

- ``none``: no logging (the ceiling);
- ``nb``: ``run.add_scalar("train/loss", loss, step=i)`` with the loss tensor as it is
  (nb queues a copy and an event; the writer thread converts: no sync);
- ``nb .item()``: ``run.add_scalar("train/loss", loss.item(), step=i)``, what a loop
  does to log a float (a sync every step);
- ``SummaryWriter``: ``torch.utils.tensorboard.SummaryWriter.add_scalar`` with the
  loss tensor (it converts it in the training thread: a sync every step).

Variants are interleaved (none, nb, nb .item(), SummaryWriter, none, ...), each timed
over ``--steps`` steps after a warm-up, ending with a device synchronisation so that
queued work counts. Prints the median steps/s with min-max over ``--repeats`` and the
ratio to ``none``, and the load average. Every variant's logged values are checked
against the losses the loop computed (nb's read back with RunReader).

Without a CUDA device (or without torch) it says so and exits 0: GPU figures are never
estimated. ``--device cpu`` runs the same loop on the CPU to check the script itself;
those figures say nothing about a GPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VARIANTS = ("none", "nb", "nb .item()", "SummaryWriter")


def build(torch, device: str, width: int, layers: int, batch: int):
    """The model, its optimizer and one fixed batch, on ``device``."""
    gen = torch.Generator().manual_seed(0)
    mods = []
    for _ in range(layers - 1):
        mods += [torch.nn.Linear(width, width), torch.nn.GELU()]
    mods.append(torch.nn.Linear(width, 1))
    model = torch.nn.Sequential(*mods).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width, generator=gen).to(device)
    y = torch.randn(batch, 1, generator=gen).to(device)
    return model, opt, x, y


def sync(torch, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_loop(torch, device: str, parts, steps: int, log) -> tuple[float, list]:
    """Steps per second over ``steps`` steps, and the losses (tensors, kept for the check)."""
    model, opt, x, y = parts
    losses = []
    sync(torch, device)
    t0 = time.perf_counter()
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        log(loss, i)
        losses.append(loss.detach())
    sync(torch, device)
    return steps / (time.perf_counter() - t0), losses


def one(torch, nb, variant: str, device: str, parts, steps: int, root: str, tb_cls) -> float:
    """One timed pass of ``variant``; checks what it logged. Returns steps/s."""
    folder = tempfile.mkdtemp(dir=root)
    run = writer = None
    if variant == "none":
        def log(loss, i):
            pass
    elif variant == "nb":
        run = nb.init("bench_gpu", root=folder, system=False, provenance=False, console=False)

        def log(loss, i):
            run.add_scalar("train/loss", loss, step=i)
    elif variant == "nb .item()":
        run = nb.init("bench_gpu", root=folder, system=False, provenance=False, console=False)

        def log(loss, i):
            run.add_scalar("train/loss", loss.item(), step=i)
    else:
        writer = tb_cls(log_dir=folder)

        def log(loss, i):
            writer.add_scalar("train/loss", loss, i)

    rate, losses = timed_loop(torch, device, parts, steps, log)
    if run is not None:
        run.finish()
        got = nb.RunReader(run.dir).scalars("train/loss").sort("step")["value"].to_list()
        want = [float(v) for v in losses]
        if got != want:
            raise SystemExit(f"{variant}: logged values differ from the losses computed "
                             f"({len(got)} read, {len(want)} computed)")
    if writer is not None:
        writer.close()
    return rate


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000, help="timed steps per pass (default 2000)")
    p.add_argument("--repeats", type=int, default=3, help="passes per variant (default 3, at least 1)")
    p.add_argument("--width", type=int, default=512, help="hidden width (default 512)")
    p.add_argument("--layers", type=int, default=4, help="linear layers (default 4)")
    p.add_argument("--batch", type=int, default=512, help="batch size (default 512)")
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu to check the script")
    args = p.parse_args()
    if args.steps < 1 or args.repeats < 1:
        p.error("--steps and --repeats must be at least 1")

    try:
        import torch
    except ImportError:
        print("bench_gpu: torch is not installed: nothing measured (GPU figures left empty)")
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_gpu: no CUDA device here (torch.cuda.is_available() is False): nothing measured, "
              "GPU figures left empty (never estimated)")
        return 0

    import nblog as nb

    try:
        from torch.utils.tensorboard import SummaryWriter as tb_cls
    except ImportError:
        tb_cls = None
    variants = [v for v in VARIANTS if v != "SummaryWriter" or tb_cls is not None]
    if tb_cls is None:
        print("bench_gpu: torch.utils.tensorboard is not importable (tensorboard missing): SummaryWriter skipped")

    device = args.device
    name = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "CPU"
    parts = build(torch, device, args.width, args.layers, args.batch)
    with tempfile.TemporaryDirectory(prefix="nb-bench-gpu-") as root:
        timed_loop(torch, device, parts, min(200, args.steps), lambda loss, i: None)  # warm-up
        rates: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(args.repeats):
            for v in variants:  # interleaved
                rates[v].append(one(torch, nb, v, device, parts, args.steps, root, tb_cls))

    print(f"bench_gpu: {name}, torch {torch.__version__}, MLP {args.layers}x{args.width}, batch {args.batch}, "
          f"{args.steps} steps per pass, {args.repeats} passes per variant (interleaved)")
    if not device.startswith("cuda"):
        print("bench_gpu: CPU run: a check of the script; these are not GPU figures")
    base = statistics.median(rates["none"])
    print(f"{'variant':<15}{'steps/s (median)':>18}{'min-max':>22}{'vs none':>10}")
    for v in variants:
        r = rates[v]
        med = statistics.median(r)
        print(f"{v:<15}{med:>18.1f}{f'{min(r):.1f}-{max(r):.1f}':>22}{med / base:>10.3f}")
    print("load average: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
