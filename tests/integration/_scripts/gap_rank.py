"""One rank of a job that goes wrong, for tests/integration/test_incident_gaps.py.

    gap_rank.py ROOT MODE      (project "gap", run id from NB_RUN_ID)
    finish: steps 0..5, then finish
    raise:  steps 0..5, then raise ValueError("bad batch on rank <R>") (uncaught)
    hold:   steps 0..5, flush, print "ready", then wait on stdin (the test kills it)
    hold_raise: as hold, then raise ValueError("late on rank <R>") once stdin closes
    thread: a threading.excepthook of the user's is installed before init; at step 3 a
            thread named "loader" raises ValueError("worker died"); the main thread
            goes on to step 5 and finishes
"""

from __future__ import annotations

import sys
import threading

import nblog as nb

root, mode = sys.argv[1], sys.argv[2]
if mode == "thread":
    previous = threading.excepthook

    def user_hook(args: threading.ExceptHookArgs) -> None:
        print(f"user hook saw {args.exc_type.__name__} in {args.thread.name}", file=sys.stderr, flush=True)
        previous(args)

    threading.excepthook = user_hook
run = nb.init("gap", root=root, system=False, timing_all_ranks=True)
for step in range(6):
    with run.timer("time/step", step=step):
        run.add_scalar("x", float(step), step=step)
    if mode == "thread" and step == 3:
        def work() -> None:
            raise ValueError("worker died")

        t = threading.Thread(target=work, name="loader")
        t.start()
        t.join()
if mode == "raise":
    raise ValueError(f"bad batch on rank {run.rank}")
if mode in ("hold", "hold_raise"):
    run.flush()
    print("ready", flush=True)
    sys.stdin.read()
if mode == "hold_raise":
    raise ValueError(f"late on rank {run.rank}")
run.finish()
