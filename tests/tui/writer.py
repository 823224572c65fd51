"""A training loop that logs a step every 0.1 s with nblog (for the real-terminal test).

Usage: writer.py ROOT RUN_ID STATE_FILE SECONDS. After each flushed step it writes
that step to STATE_FILE, so the test knows what is on disk.
"""

import os
import sys
import time

import nblog as nb

root, run_id, state, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
run = nb.init("live", run_id=run_id, root=root, system=False, flush_interval=0.2, _environ={})
deadline = time.monotonic() + seconds
step = 0
while time.monotonic() < deadline:
    run.add_scalar({"train/loss": 1.0 / (step + 1), "lr": 0.001}, step=step)
    if step % 5 == 0:
        run.flush()
        tmp = state + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(step))
        os.replace(tmp, state)
    step += 1
    time.sleep(0.1)
run.finish()
