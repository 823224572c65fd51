"""One straggler rule: the TUI timers view (table, band and heat map) and ``nb timers`` name
the same stragglers (and the same slowest rank) for the same run, by the rule ``nb timers``
documents (nblog.reader.straggler_frames): a rank whose lower median per step, warm-up
left out, is at least 1.2 times the median of the ranks' and 5 ms above it."""

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


def write_run(root: str, per_rank: dict[int, tuple[int, float] | list[float]]) -> str:
    """A run whose rank r times ``step`` n times with ``seconds`` each, one per step:
    ``per_rank[r] = (n, seconds)``, or the seconds of each step."""
    run_dir = os.path.join(root, "t", RUN_ID)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"format_version": FORMAT_VERSION, "project": "t", "id": RUN_ID, "status": "finished",
                   "world_size": len(per_rank), "created": WALL0}, f)
    for r, spec in per_rank.items():
        values = np.asarray(spec, np.float64) if isinstance(spec, list) else np.full(spec[0], spec[1])
        n = len(values)
        head = {"format_version": FORMAT_VERSION, "project": "t", "run_id": RUN_ID, "rank": r, "local_rank": r,
                "world_size": len(per_rank), "session": 0, "host": "node-a", "pid": 100 + r, "wall_start": WALL0}
        ef = EventFile(os.path.join(run_dir, f"events.r{r}.s0.log"), head)
        st = np.arange(n)
        ef.points(KIND_TIMER, "step", st, values, st * 1000)
        ef.end(n * 1000)
    return run_dir


def tui_view(run_dir: str):
    data = RunModel([run_dir]).view(Request(seq=1, view="timers"), None)
    flagged = sorted(row["rank"] for row in data.rows if row["straggler"])
    if data.heat is not None:  # more than 8 ranks: the heat map's header names them
        assert data.heat.stragglers == flagged and data.heat.judged
        return flagged, data.heat.slowest[0][0]
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
    # issue 22: an 8 ms warm-up step and a 4 ms spike beside 41 µs medians name no one
    {0: [8e-3] + [41e-6] * 11, 1: [43e-6] * 12, 2: [42e-6] * 6 + [4e-3] + [42e-6] * 5, 3: [44e-6] * 12},
    # 12 ranks (the heat map), ranks 3 and 10 slower on every step: both, and only them
    {r: [0.010 + 1e-4 * (r % 3)] * 20 if r not in (3, 10) else [0.030] * 20 for r in range(12)},
], ids=["fewer-slow-steps", "no-straggler", "warm-up-and-spike", "heat-map"])
def test_tui_and_nb_timers_name_the_same_straggler(tmp_path, per_rank):
    run_dir = write_run(str(tmp_path), per_rank)
    assert tui_view(run_dir) == cli_view(run_dir)


def test_the_warm_up_and_spike_run_names_no_one(tmp_path):
    run_dir = write_run(str(tmp_path), {0: [8e-3] + [41e-6] * 11, 1: [43e-6] * 12,
                                        2: [42e-6] * 6 + [4e-3] + [42e-6] * 5, 3: [44e-6] * 12})
    assert tui_view(run_dir)[0] == [] and cli_view(run_dir)[0] == []
