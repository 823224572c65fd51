"""One rank of a job that goes wrong, for tests/integration/test_failure_ranks.py.

    fail_rank.py ROOT MODE     MODE: raise | with | alert | finish
    raise: init, add_scalar steps 0..5, then raise ValueError (uncaught: sys.excepthook)
    with:  the same inside ``with nb.init(...) as run:`` (the with block sees it first)
    alert: run.alert twice with one title, once with another and a bad level, finish
    finish: init and finish (rank 0 opening the run for the others)
"""

from __future__ import annotations

import sys

import nblog as nb

root, mode = sys.argv[1], sys.argv[2]
if mode == "with":
    with nb.init("p", run_name="f", root=root, system=False) as run:
        for step in range(6):
            run.add_scalar("x", float(step), step=step)
        raise ValueError("bad batch in the with block")
run = nb.init("p", run_name="f", root=root, system=False)
if mode == "finish":
    run.finish()
    print(run.dir)
    sys.exit(0)
for step in range(6):
    run.add_scalar("x", float(step), step=step)
if mode == "alert":
    run.alert("grad norm", "grad norm 1e4 at step 5", level="error")
    run.alert("grad norm", "again, within the rate limit")
    run.alert("data", "slow shard", level="loud")
    run.finish()
    sys.exit(0)
raise ValueError(f"bad batch on rank {run.rank}")
