"""``nb timers`` at scale (issue 18): the report over every rank reads the run folder's
listing a fixed number of times, not once or twice per rank (1,024 ranks took 3.6 s,
8,192 ranks minutes, almost all of it listing the folder again for each rank)."""

from __future__ import annotations

import json
import subprocess
import sys

import nblog as nb

_REPORT = r"""
import json, os, sys
run_dir = os.path.abspath(sys.argv[1])
listed = []

def hook(event, args):
    if event in ("os.listdir", "os.scandir") and args and isinstance(args[0], str):
        if os.path.abspath(args[0]) == run_dir:
            listed.append(event)

import nblog
from nblog.reader._answers.overview import timer_report
reader = nblog.RunReader(run_dir)
sys.addaudithook(hook)
report = timer_report(reader)
print(json.dumps({"listed": len(listed), "ranks": sorted({r["rank"] for r in report["ranks"]}),
                  "timers": [t["tag"] for t in report["timers"]], "counts": sorted({r["count"] for r in report["ranks"]})}))
"""


def test_timer_report_lists_the_run_folder_a_fixed_number_of_times(tmp_path):
    world = 40
    run_dir = None
    for rank in range(world):
        env = {"RANK": str(rank), "LOCAL_RANK": str(rank % 8), "WORLD_SIZE": str(world),
               "TORCHELASTIC_RUN_ID": "job-t", "NB_DIR": str(tmp_path), "NB_HOSTNAME": f"node{rank // 8}"}
        run = nb.init("p", _environ=env, system=False, provenance=False)
        for step in range(5):
            for name in ("time/data", "time/step"):
                with run.timer(name, step=step, all_ranks=True):
                    pass
        run.finish()
        run_dir = run.dir
    out = subprocess.run([sys.executable, "-c", _REPORT, run_dir], capture_output=True, text=True, timeout=120,
                         check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ranks"] == list(range(world))
    assert got["timers"] == ["time/data", "time/step"] and got["counts"] == [5]
    assert got["listed"] <= 2, got  # was 2 per rank and one more (81 here)
