"""A rank of a run for the ``nb serve`` tests: ``python _band_writer.py '<json>'``.

Run with torchrun's variables, NB_DIR and NB_RUN_ID. Every rank logs ``train/loss`` =
1 + rank / 100 at each of ``steps`` steps (``offset_rank`` adds ``offset``: the outlying
rank), flushing every ``flush`` steps. With ``go`` (a file path) it then waits until that
file exists (a condition the test makes) and logs ``more`` steps after, flushed at once.
"""

from __future__ import annotations

import json
import os
import sys
import time

import nblog as nb


def main() -> None:
    spec = json.loads(sys.argv[1])
    run = nb.init("serve", run_name="band", config={"lr": spec.get("lr", 0.01)}, scalars_all_ranks=True,
                  system=False, flush_interval=0.1)
    steps = spec.get("steps", 100)
    base = 1.0 + run.rank / 100 + (spec.get("offset", 5.0) if run.rank == spec.get("offset_rank") else 0.0)
    for step in range(steps):
        run.add_scalar("train/loss", base, step=step)
        if (step + 1) % spec.get("flush", 50) == 0:
            run.flush()
    run.flush()
    go = spec.get("go")
    if go:
        deadline = time.monotonic() + 120
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.02)
        for step in range(steps, steps + spec.get("more", 3)):
            run.add_scalar("train/loss", base + 0.5, step=step)
        run.flush()
    run.finish()


if __name__ == "__main__":
    main()
