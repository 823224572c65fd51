"""A synthetic run with fixed values and fixed times, written with nblog's format
encoder (no clock, no hostname, no pid of the test machine), so screenshots are the
same on every machine.

Layout: project ``demo``, run ``demo-0000abcd`` (name "demo"), 4 ranks on 2 machines
(node-a: ranks 0, 1; node-b: ranks 2, 3). Rank 0 has two sessions: session 1 resumes
from step 80 after an hour in the queue, so session 0's points at steps >= 80 are
hidden. Scalars on rank 0 (with a NaN and a +inf in grad/norm, and a tag that looks
like markup and holds an escape character), timers on every rank (rank 2 slowest),
system metrics on ranks 0 and 2 (node-b's GPU 1 idle), text on rank 0.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from nblog.format import _format as F

WALL0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
RUN_ID = "demo-0000abcd"
ODD_TAG = "odd/[bold]x[/bold]\x1b[31m"
SCALARS = ["train/loss", "train/acc", "lr", "eval/loss", "grad/norm", ODD_TAG]
TIMERS = ["data", "fwd"]


class EventFile:
    """An ``events.r<rank>.s<session>.log`` written frame by frame."""

    def __init__(self, path: str, header: dict):
        self.path = path
        self.tags: dict[tuple[int, str], int] = {}
        with open(path, "wb") as f:
            f.write(F.file_header())
            f.write(F.json_frame(F.FRAME_SESSION, header))

    def _append(self, data: bytes) -> None:
        with open(self.path, "ab") as f:
            f.write(data)

    def tag(self, kind: int, name: str) -> int:
        key = (kind, name)
        if key not in self.tags:
            tid = self.tags[key] = len(self.tags)
            self._append(F.frame(F.FRAME_TAGS, F.encode_tag_defs([(tid, kind, name)])))
        return self.tags[key]

    def points(self, kind: int, name: str, steps, values, ms) -> None:
        tid = self.tag(kind, name)
        rec = np.empty(len(steps), F.NUMPY_POINT_DTYPE)
        rec["step"] = steps
        rec["value"] = values
        rec["tag"] = tid
        rec["ms"] = np.asarray(ms, np.int64).astype(np.uint32)
        self._append(F.frame(F.FRAME_POINTS, rec.tobytes()))

    def text(self, name: str, step: int, text: str, ms: int) -> None:
        tid = self.tag(F.KIND_TEXT, name)
        self._append(F.frame(F.FRAME_TEXT, F.encode_texts([(step, tid, ms, text)])))

    def stats(self, **obj) -> None:
        self._append(F.json_frame(F.FRAME_STATS, obj))

    def end(self, ms: int, status: str = "finished") -> None:
        self._append(F.json_frame(F.FRAME_END, {"status": status, "ms": ms}))


def header(rank: int, local_rank: int, session: int, host: str, wall_start: float) -> dict:
    return {
        "format_version": F.FORMAT_VERSION, "project": "demo", "run_id": RUN_ID, "rank": rank,
        "local_rank": local_rank, "world_size": 4, "session": session, "host": host, "pid": 1000 + rank,
        "wall_start": wall_start,
    }


def run_json(run_dir: str, status: str = "finished") -> None:
    data = {
        "format_version": F.FORMAT_VERSION, "project": "demo", "id": RUN_ID, "name": "demo",
        "config": {"lr": 0.001}, "created": WALL0, "world_size": 4, "launcher": "torchrun",
        "hosts": ["node-a", "node-b"], "status": status,
        "sessions": [
            {"session": 0, "start": WALL0, "host": "node-a", "first_step": 0, "last_step": 119,
             "end": WALL0 + 120.0},
            {"session": 1, "start": WALL0 + 3720.0, "host": "node-a", "first_step": 80, "last_step": 199,
             "end": WALL0 + 3840.0},
        ],
    }
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump(data, f)


def loss(step):
    step = np.asarray(step, np.float64)
    return 2.5 * np.exp(-step / 60.0) + 0.1 + 0.05 * np.sin(step * 0.7)


def write_run(root: str, steps: int = 200) -> str:
    """Write the run under ``root``; returns its folder."""
    run_dir = os.path.join(root, "demo", RUN_ID)
    os.makedirs(run_dir, exist_ok=True)
    run_json(run_dir)
    hosts = {0: ("node-a", 0), 1: ("node-a", 1), 2: ("node-b", 0), 3: ("node-b", 1)}
    resume = 80
    for rank, (host, local) in hosts.items():
        sessions = [(0, 0, 120, WALL0), (1, resume, steps, WALL0 + 3720.0)] if rank == 0 else [
            (0, 0, 120, WALL0), (1, resume, steps, WALL0 + 3720.0)]
        for session, first, last, wall in sessions:
            ef = EventFile(os.path.join(run_dir, f"events.r{rank}.s{session}.log"),
                           header(rank, local, session, host, wall))
            st = np.arange(first, last)
            ms = (st - first) * 1000  # one step per second
            if local == 0:
                ef.stats(machine={"hostname": host, "cpu_count": 32, "memory_total_bytes": 256 << 30,
                                  "gpus": [{"index": 0, "name": "H100"}, {"index": 1, "name": "H100"}]})
            if rank == 0:
                lv = loss(st)
                # session 0 diverged a little before the restart: hidden points differ
                if session == 0:
                    lv = lv + np.where(st >= 100, 0.5, 0.0)
                ef.points(F.KIND_SCALAR, "train/loss", st, lv, ms)
                ef.points(F.KIND_SCALAR, "train/acc", st, 1.0 - lv / 3.0, ms)
                ef.points(F.KIND_SCALAR, "lr", st, 1e-3 * np.minimum(1.0, (st + 1) / 50.0), ms)
                ev = st[st % 20 == 0]
                ef.points(F.KIND_SCALAR, "eval/loss", ev, loss(ev) + 0.2, (ev - first) * 1000)
                gn = 1.0 + 0.3 * np.cos(st * 0.3)
                gn = np.where(st == 50, np.nan, gn)
                gn = np.where(st == 150, np.inf, gn)
                ef.points(F.KIND_SCALAR, "grad/norm", st, gn, ms)
                ef.points(F.KIND_SCALAR, ODD_TAG, st, st * 0.01, ms)
                for s in (0, 50, 100, 150):
                    if first <= s < last and not (session == 0 and s >= resume):
                        ef.text("samples", s, f"step {s}: [red]not markup[/red]\n\tsecond line \x07 bell",
                                (s - first) * 1000)
            slow = 1.6 if rank == 2 else 1.0
            ef.points(F.KIND_TIMER, "data", st, slow * (0.010 + 0.002 * np.sin(st + rank)), ms)
            ef.points(F.KIND_TIMER, "fwd", st, 0.050 + 0.001 * rank + 0.005 * np.cos(st * 0.5), ms)
            if local == 0:
                ss = st[st % 10 == 0]
                sm = (ss - first) * 1000
                ef.points(F.KIND_SYSTEM, "system/cpu_percent", ss, 40 + 10 * np.sin(ss * 0.1), sm)
                ef.points(F.KIND_SYSTEM, "system/memory_percent", ss, 30 + ss * 0.05, sm)
                for g in range(2):
                    idle = host == "node-b" and g == 1
                    util = np.full(len(ss), 3.0) if idle else 90 + 5 * np.sin(ss * 0.2 + g)
                    p = f"system/gpu{g}/"
                    ef.points(F.KIND_SYSTEM, p + "utilization_percent", ss, util, sm)
                    ef.points(F.KIND_SYSTEM, p + "memory_used_bytes", ss, (40 + g) * 2.0**30 + 0 * ss, sm)
                    ef.points(F.KIND_SYSTEM, p + "temperature_c", ss, 60 + 10 * (not idle) + 0 * ss, sm)
                    ef.points(F.KIND_SYSTEM, p + "power_w", ss, (80 if idle else 600) + 0 * ss, sm)
            ef.end(int(ms[-1]) if len(ms) else 0)
    return run_dir


def write_other(root: str) -> str:
    """A second, smaller run of the same project (to overlay): loss a bit higher."""
    rid = "demo-1111beef"
    run_dir = os.path.join(root, "demo", rid)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"project": "demo", "id": rid, "name": "baseline", "created": WALL0 - 86400, "world_size": 1,
                   "status": "failed", "sessions": [{"session": 0, "start": WALL0 - 86400, "last_step": 149,
                                                     "end": WALL0 - 86400 + 150}]}, f)
    ef = EventFile(os.path.join(run_dir, "events.r0.s0.log"), header(0, 0, 0, "node-c", WALL0 - 86400))
    st = np.arange(0, 150)
    ef.points(F.KIND_SCALAR, "train/loss", st, loss(st) * 1.2 + 0.1, st * 1000)
    ef.points(F.KIND_SCALAR, "lr", st, np.full(len(st), 1e-3), st * 1000)
    ef.end(149_000, "failed")
    return run_dir


def many_tags(n: int) -> list[str]:
    """``n`` tag names in a few levels of groups (for the 5,000-tag filter test)."""
    return [f"layer{i // 100:02d}/block{(i // 10) % 10}/w{i % 10}_{'norm' if i % 3 else 'grad'}" for i in range(n)]


assert math.isfinite(WALL0)
