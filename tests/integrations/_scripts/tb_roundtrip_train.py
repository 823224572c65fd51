"""A torchrun job for the TensorBoard round trip: rank 0 logs scalars and text, every rank
times its steps (``timing_all_ranks``), with a scalar and a timer of the same tag.

Usage (under torchrun; NB_DIR, and for a resume NB_RUN_ID and NB_RESUME=auto, from the
environment): ``tb_roundtrip_train.py START STOP``.
"""

from __future__ import annotations

import sys

import nblog as nb


def main() -> None:
    start, stop = int(sys.argv[1]), int(sys.argv[2])
    run = nb.init("rt-proj", run_name="ddp-rt", config={"lr": 0.1, "layers": [2, 3]}, system=False,
                  timing_all_ranks=True, flush_interval=0.05)
    for step in range(start, stop):
        with run.timer("time/step", step=step):
            sum(i * i for i in range(500 * (run.rank + 1)))  # a little work, more on rank 1
        with run.timer("clash", step=step):
            pass
        # float64 values that float32 cannot hold, and NaN: they must come back exactly
        run.add_scalar({"train/loss": 1.0 / (step + 3), "lr": 0.1 * 0.97**step, "clash": step / 7}, step=step)
        if step == start + 1:
            run.add_scalar("train/grad", float("nan"), step=step)
            run.add_text("notes", f"session from step {start}", step=step)
    run.finish()


if __name__ == "__main__":
    main()
