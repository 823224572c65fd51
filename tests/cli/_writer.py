"""A training-like process for the CLI tests: ``python _writer.py '<json spec>'``.

Run with the launcher's variables (RANK/LOCAL_RANK/WORLD_SIZE/LOCAL_WORLD_SIZE, or
SLURM_*), NB_DIR and, usually, NB_RUN_ID. The spec (all keys optional):
project, name, config, resume, start, stop (steps), nan (steps where train/loss is
NaN), inf (steps where it is +inf), slow_rank (this rank's "step" timer sleeps 50 ms: a
straggler by a margin no load crosses, the others time an empty block),
text (logged at the first step), rank0_timers (only rank 0 times), system (log cpu/memory every 0.05 s), sleep (seconds
between steps), fail (raise at the end: status "failed"), print_id (print run.id).
"""

from __future__ import annotations

import json
import sys
import time

import nblog as nb


def main() -> None:
    spec = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    run = nb.init(
        spec.get("project", "proj"),
        run_name=spec.get("name"),
        config=spec.get("config"),
        resume=spec.get("resume"),
        system=["cpu", "memory"] if spec.get("system") else False,
        system_interval=0.05,
        flush_interval=0.05,
    )
    if spec.get("print_id"):
        print(json.dumps({"id": run.id, "rank": run.rank}), flush=True)
    start, stop = spec.get("start", 0), spec.get("stop", 20)
    for step in range(start, stop):
        with run.timer("step", step=step, all_ranks=not spec.get("rank0_timers")):
            if run.rank == spec.get("slow_rank"):
                time.sleep(0.05)
        run.add_scalar({"train/loss": 1.0 / (step + 1), "[bold red]x[/]": float(step)}, step=step)
        if step in spec.get("nan", []):
            run.add_scalar("train/loss", float("nan"), step=step)
        if step in spec.get("inf", []):
            run.add_scalar("train/grad", float("inf"), step=step)
        if step == start and spec.get("text"):
            run.add_text("samples", spec["text"], step=step)
        if spec.get("sleep"):
            run.flush()
            time.sleep(spec["sleep"])
    if spec.get("system"):
        time.sleep(0.3)
    if spec.get("fail"):
        run.flush()
        raise RuntimeError("training diverged (on purpose, for the tests)")
    run.finish()


if __name__ == "__main__":
    main()
