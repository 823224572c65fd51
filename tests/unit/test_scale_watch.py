"""`nb watch` at scale (issue 17/18): a poll lists the run folder a fixed number of
times, not once per rank for its Follower and again for its host name (O(n^2) names
on thousands of ranks). Counted with an audit hook in a fresh interpreter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import nblog as nb

RANKS = 64

_COUNT_LISTINGS = r"""
import json, os, sys
from nblog.reader._views.watch import Watcher
run_dir = sys.argv[1]
counts = {"listings": 0}
def hook(event, args):
    if event in ("os.listdir", "os.scandir") and args and os.fspath(args[0] or ".") == run_dir:
        counts["listings"] += 1
w = Watcher(run_dir)
sys.addaudithook(hook)
w.poll()
w.poll()  # a second poll too: the Followers read on from the shared listing
counts["hosts"] = sorted({h for h in w._hosts.values() if h is not None})
counts["ranks"] = len(w._hosts)
print(json.dumps(counts))
"""


def test_a_poll_lists_the_run_folder_a_fixed_number_of_times_not_once_per_rank(tmp_path):
    run = nb.init("p", root=tmp_path / "runs", _environ={}, system=False, provenance=False)
    run.add_scalar("loss", 1.0, step=0)
    run.finish()
    first = os.path.join(run.dir, "events.r0.s0.log")
    for k in range(1, RANKS):  # the other ranks' logs (each says it ran on this host)
        shutil.copyfile(first, os.path.join(run.dir, f"events.r{k}.s0.log"))
    out = subprocess.run([sys.executable, "-c", _COUNT_LISTINGS, run.dir], capture_output=True, text=True,
                         timeout=120, check=True)
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["ranks"] == RANKS and len(counts["hosts"]) == 1, counts
    # two polls, each listing the ranks and scanning once for every rank's Follower and
    # the host names: not one listing per rank (129 in the first poll for 64 ranks before)
    assert counts["listings"] <= 2 * 2, counts
