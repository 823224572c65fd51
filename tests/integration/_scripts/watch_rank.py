"""One rank of a small training-like job for the ``nb watch`` tests.

``python watch_rank.py '<json spec>'`` with RANK/LOCAL_RANK/WORLD_SIZE, NB_DIR and
NB_RUN_ID set. Spec keys (all optional): steps, sleep (seconds per step, inside the
all-ranks "data" timer), seed, nan_at (rank 0: train/loss NaN), spike_at (rank 0:
train/grad_norm 10x), slow_rank with slow_from/slow_to/slow_sleep (that rank's data
timer is slower), stop_rank/stop_at/hold (that rank stops logging for ``hold`` seconds),
alert_rank/alert_at/alert_title (run.alert), fail_rank (raises after its last step),
quiet_rank/quiet_s (that rank raises one alert, then logs nothing for quiet_s),
gpu (sample GPU metrics every 0.05 s: put tests/fakes first on PYTHONPATH).
"""

from __future__ import annotations

import json
import random
import sys
import time

import nblog as nb


def main() -> None:
    spec = json.loads(sys.argv[1])
    run = nb.init("watch", system=["gpu"] if spec.get("gpu") else False, system_interval=0.05, flush_interval=0.05)
    rng = random.Random(spec.get("seed", 0) * 1000 + run.rank)
    if run.rank == spec.get("quiet_rank"):  # an event log, then only the writer's heartbeats
        run.alert("quiet rank here")
        time.sleep(spec.get("quiet_s", 5.0))
        run.finish()
        return
    for step in range(spec.get("steps", 100)):
        if run.rank == spec.get("stop_rank") and step == spec.get("stop_at"):
            run.flush()
            time.sleep(spec.get("hold", 3.0))
        slow = run.rank == spec.get("slow_rank") and spec.get("slow_from", 0) <= step < spec.get("slow_to", 1 << 62)
        with run.timer("data", step=step, all_ranks=True):
            time.sleep(spec.get("slow_sleep", 0.05) if slow else spec.get("sleep", 0.01))
        loss = 1.0 + rng.gauss(0.0, 0.05)
        grad = 1.0 + rng.gauss(0.0, 0.05)
        if step == spec.get("nan_at"):
            loss = float("nan")
        if step == spec.get("spike_at"):
            grad *= 10.0
        run.add_scalar({"train/loss": loss, "train/grad_norm": grad}, step=step)
        if run.rank == spec.get("alert_rank") and step == spec.get("alert_at"):
            run.alert(spec.get("alert_title", "custom"), "raised by the training code", "warn")
    if run.rank == spec.get("fail_rank"):
        raise RuntimeError("diverged on purpose (watch test)")
    run.finish()


if __name__ == "__main__":
    main()
