"""A training-like rank for the plot and report tests: ``python spike_writer.py '<json>'``.

Run with torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE), NB_DIR
and NB_RUN_ID. Rank 0 logs ``train/loss`` = 1 + 0.5 * cos(step / 300) at every step of
``range(steps)`` with a planted ``spike`` (value ``spike_value`` at ``spike_step``), NaN at
``nan`` steps, +inf at ``inf`` steps and -inf at ``neginf`` steps, ``train/lr``, a text and (``image``) an 8x8 image.
Every rank times ``time/step`` with all_ranks=True on the timer's own clock, replaced by
a model so that the durations are exact whatever the machine's load: 10 ms a step plus
0-0.2 ms (by rank and step), and ``slow_s`` (30 ms) on ``slow_rank``. (Timed sleeps made
the test of the report's straggler flaky: a busy machine stretched a healthy rank's
timings.) ``slow_rank`` also really sleeps 2 ms a timed step, so that its wall clock
runs ahead of the others' (the plot tests of time axes need that).
With ``system`` local rank 0 samples cpu and memory (and with ``"gpu"`` the GPUs) every
0.05 s for half a second; with ``"once"`` exactly one sample (the first comes after 1 s,
the next would after an hour: the rank waits until the first is in its event log).
``final`` ({tag: value}) is logged once, at the last step (a final metric).
"""

from __future__ import annotations

import json
import math
import sys
import time

import nblog as nb


def _wait_for_one_sample(run: nb.Run) -> None:
    """Until this rank's first system sample can be read back (a condition, not a time)."""
    from nblog import RunReader

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run.flush()
        if len(RunReader(run.dir).system()):
            return
        time.sleep(0.05)
    raise SystemExit("no system sample within 120 s")


def main() -> None:
    spec = json.loads(sys.argv[1])
    run = nb.init("plots", run_name=spec.get("name", "spike"), config=spec.get("config", {"lr": 0.001}),
                  system=(["cpu", "memory", "gpu"] if spec.get("system") == "gpu" else ["cpu", "memory"])
                  if spec.get("system") else False,
                  system_interval=3600.0 if spec.get("system") == "once" else 0.05,
                  flush_interval=0.2)
    steps = spec.get("steps", 3000)
    timed = spec.get("timed_steps", 200)
    clock = [0.0]
    sys.modules[nb.Timer.__module__]._perf = lambda: clock[0]  # the timer's clock: the model's durations
    for step in range(steps):
        if step < timed:
            with run.timer("time/step", step=step, all_ranks=True):
                if run.rank == spec.get("slow_rank"):
                    time.sleep(0.002)  # its wall clock ahead; the timer counts the model's time
                    clock[0] += spec.get("slow_s", 0.030)
                else:
                    clock[0] += 0.010 + 1e-4 * ((run.rank + step) % 3)
        value = 1.0 + 0.5 * math.cos(step / 300.0)
        if step == spec.get("spike_step"):
            value = spec.get("spike_value", 50.0)
        if step in spec.get("nan", []):
            value = float("nan")
        if step in spec.get("inf", []):
            value = float("inf")
        if step in spec.get("neginf", []):
            value = float("-inf")
        run.add_scalar({"train/loss": value, "train/lr": 1e-3 * (1 + step) ** -0.5}, step=step)
    if spec.get("final"):
        run.add_scalar(spec["final"], step=steps - 1)
    run.add_text("notes", spec.get("text", "<script>alert(1)</script> & done"), step=steps - 1)
    if spec.get("image"):
        import numpy as np

        img = np.zeros((8, 8, 3), np.uint8)
        img[:, :4, 0] = 255
        run.add_image("val/sample", img, step=steps - 1, caption="left half red")
    if spec.get("system") == "once":
        _wait_for_one_sample(run)
    elif spec.get("system"):
        time.sleep(0.5)  # a few samples of the machine (local rank 0 samples it)
    run.finish()


if __name__ == "__main__":
    main()
