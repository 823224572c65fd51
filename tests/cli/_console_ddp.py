"""One rank of a torchrun job that captures its console (tests/cli/test_logs.py).

``python _console_ddp.py ROOT``: every rank prints on stdout at steps 0-4, rank 1 also
on stderr (from C level, os.write), rank 0 a line with an escape sequence; the ranks
take turns (rank r prints at 0.1 s * (2 * step + r) after its start), so merged by time
they interleave.
"""

from __future__ import annotations

import os
import sys
import time

import nblog as nb

run = nb.init("logs", run_name="ddp", root=sys.argv[1], console=True, system=False)
t0 = time.monotonic()
for step in range(5):
    time.sleep(max(0.0, t0 + 0.1 * (2 * step + run.rank) - time.monotonic()))
    run.add_scalar("x", float(step), step=step)
    run.flush()  # the lines below are stamped with this step
    print(f"rank {run.rank} step {step}", flush=True)
    if run.rank == 1:
        os.write(2, f"rank 1 warning at step {step}\n".encode())
if run.rank == 0:
    print("colour \x1b[31mred\x1b[0m end [bold red]x[/] \u202eevil", flush=True)
    print(f"run folder: {run.dir}", flush=True)
