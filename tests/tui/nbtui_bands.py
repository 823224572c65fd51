"""Synthetic runs for the band tests: fixed values and times, written with nblog's
format encoder (as nbtui_synth), so screenshots are the same everywhere.

``write_ranks``: run ``bands-00008888`` with 8 ranks, each logging train/loss (as
``add_scalar(..., all_ranks=True)`` does); rank 5's loss diverges from step 120.
"""

from __future__ import annotations

import json
import os

import numpy as np
from nbtui_synth import WALL0, EventFile, loss

from nblog.format import _format as F

RANKS_ID = "bands-00008888"
DIVERGES = 5


def _header(run_id: str, rank: int, world: int) -> dict:
    return {"format_version": F.FORMAT_VERSION, "project": "bands", "run_id": run_id, "rank": rank,
            "local_rank": rank, "world_size": world, "session": 0, "host": "node-a", "pid": 2000 + rank,
            "wall_start": WALL0}


def write_ranks(root: str, ranks: int = 8, steps: int = 200) -> str:
    """Write the 8-rank run under ``root``; returns its folder."""
    run_dir = os.path.join(root, "bands", RANKS_ID)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"format_version": F.FORMAT_VERSION, "project": "bands", "id": RANKS_ID, "name": "ranks",
                   "config": {"lr": 0.001}, "created": WALL0, "world_size": ranks, "status": "finished",
                   "sessions": [{"session": 0, "start": WALL0, "host": "node-a", "first_step": 0,
                                 "last_step": steps - 1, "end": WALL0 + steps}]}, f)
    st = np.arange(steps)
    for r in range(ranks):
        ef = EventFile(os.path.join(run_dir, f"events.r{r}.s0.log"), _header(RANKS_ID, r, ranks))
        v = loss(st) + 0.02 * r
        if r == DIVERGES:
            v = v + np.where(st >= 120, (st - 120) * 0.03, 0.0)
        ef.points(F.KIND_SCALAR, "train/loss", st, v, st * 1000)
        ef.end(int(st[-1]) * 1000)
    return run_dir


SWEEP_LRS = (0.001, 0.001, 0.003, 0.003, 0.01, 0.01)  # 6 runs, 3 groups of optim.lr


def write_sweep(root: str, steps: int = 150) -> list[str]:
    """Six one-rank runs of project ``sweep`` with ``config.optim.lr`` in three groups;
    the higher the lr, the lower the loss, two seeds apart in each group. Returns
    their folders."""
    dirs = []
    st = np.arange(steps)
    for i, lr in enumerate(SWEEP_LRS):
        rid = f"sweep-{i:04d}aaaa"
        run_dir = os.path.join(root, "sweep", rid)
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "run.json"), "w") as f:
            json.dump({"format_version": F.FORMAT_VERSION, "project": "sweep", "id": rid, "name": f"lr{lr:g}",
                       "config": {"optim": {"lr": lr}, "seed": i % 2}, "created": WALL0 + 100 * i,
                       "world_size": 1, "status": "finished",
                       "sessions": [{"session": 0, "start": WALL0 + 100 * i, "host": "node-a", "first_step": 0,
                                     "last_step": steps - 1, "end": WALL0 + 100 * i + steps}]}, f)
        ef = EventFile(os.path.join(run_dir, "events.r0.s0.log"), _header(rid, 0, 1))
        scale = {0.001: 1.6, 0.003: 1.0, 0.01: 0.5}[lr]
        v = scale * loss(st) + 0.15 * (i % 2)
        ef.points(F.KIND_SCALAR, "train/loss", st, v, st * 1000)
        ef.end(int(st[-1]) * 1000)
        dirs.append(run_dir)
    return dirs
