"""One straggler rule: the TUI timers view and ``nb timers`` name the same straggler (and
the same slowest rank) for the same run, by the rule ``nb timers`` documents: a rank whose
mean is at least 1.2 times the median of the ranks' means."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from nbtui_synth import WALL0, EventFile

from nbcli.tui.model import Request, RunModel
from nblog.format._format import FORMAT_VERSION, KIND_TIMER
from nblog.reader import RunReader, timer_report

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

RUN_ID = "timers-0000aaaa"


def write_run(root: str, per_rank: dict[int, tuple[int, float]]) -> str:
    """A run whose rank r times ``step`` n times with ``seconds`` each, one per step:
    ``per_rank[r] = (n, seconds)``."""
    run_dir = os.path.join(root, "t", RUN_ID)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"format_version": FORMAT_VERSION, "project": "t", "id": RUN_ID, "status": "finished",
                   "world_size": len(per_rank), "created": WALL0}, f)
    for r, (n, seconds) in per_rank.items():
        head = {"format_version": FORMAT_VERSION, "project": "t", "run_id": RUN_ID, "rank": r, "local_rank": r,
                "world_size": len(per_rank), "session": 0, "host": "node-a", "pid": 100 + r, "wall_start": WALL0}
        ef = EventFile(os.path.join(run_dir, f"events.r{r}.s0.log"), head)
        st = np.arange(n)
        ef.points(KIND_TIMER, "step", st, np.full(n, seconds), st * 1000)
        ef.end(n * 1000)
    return run_dir


def tui_view(run_dir: str):
    data = RunModel([run_dir]).view(Request(seq=1, view="timers"), None)
    flagged = sorted(row["rank"] for row in data.rows if row["straggler"])
    (slowest,) = [ln.label for ln in data.band.lines if ln.label.startswith("slowest rank ")]
    return flagged, int(slowest.rsplit(" ", 1)[1])


def cli_view(run_dir: str):
    report = timer_report(RunReader(run_dir))
    (timer,) = report["timers"]
    return sorted(r["rank"] for r in report["ranks"] if r["straggler"]), timer["slowest_rank"]


@pytest.mark.parametrize("per_rank", [
    # rank 2 is the straggler (3x the median) but times fewer steps: the largest total
    # of seconds is rank 0's, which the band used to call "slowest"
    {0: (100, 0.10), 1: (100, 0.10), 2: (20, 0.30)},
    # no straggler (1.1x the median): the highest mean is no straggler, and is not marked
    {0: (50, 0.10), 1: (50, 0.11), 2: (50, 0.10)},
], ids=["fewer-slow-steps", "no-straggler"])
def test_tui_and_nb_timers_name_the_same_straggler(tmp_path, per_rank):
    run_dir = write_run(str(tmp_path), per_rank)
    assert tui_view(run_dir) == cli_view(run_dir)
