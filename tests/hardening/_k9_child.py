"""One rank of the kill -9 harness: ``python _k9_child.py '<json spec>'``.

Run with torchrun's rank variables, ``NB_RUN_ID``, ``NB_DIR`` and ``HK_FD`` (the write
end of a report pipe). It reports, one line each, through that pipe:

    B             nblog imported, init not called yet
    I <session>   init returned
    F <n>         flush() returned after n steps were logged (steps start .. start+n-1)
    D             finished (only with "steps")
    K <call> <arg> about to die at this filesystem call (kill_at)

Every step, on every rank: ``add_scalar({"train/loss", "lr"})`` and
``add_scalar("acc", ...)`` (kept on rank 0 only), a timer "step" (all ranks); on
rank 0 a text every 5 steps and an image every 10 steps. Values are a function of
(trial, step) (``k9values``), so the harness can tell what a file must hold.

Spec keys: trial, start (first step), steps (None: until killed), flush_every,
sleep (seconds per step), kill_at (SIGKILL itself at the n-th filesystem call:
mkdir, open, write, ftruncate, replace, rename, unlink; 0 = never), tear (at a
``write`` that is the n-th call, write only part of the bytes first), finish.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

spec = json.loads(sys.argv[1])
_report_fd = int(os.environ["HK_FD"])
_real_write = os.write


def report(line: str) -> None:
    _real_write(_report_fd, (line + "\n").encode())


def _install_fault(kill_at: int, tear: bool) -> None:
    """Kill this process with SIGKILL at the kill_at-th filesystem call (any thread)."""
    count = [0]

    def wrap(name: str) -> None:
        real = getattr(os, name)

        def call(*args, **kwargs):
            count[0] += 1
            if count[0] == kill_at:
                report(f"K {name} {os.path.basename(str(args[0])) if name != 'write' else args[0]}")
                if name == "write" and tear and args[0] != _report_fd:
                    data = bytes(args[1])
                    if len(data) > 1:
                        cut = 1 + (spec["trial"] * 7919 + kill_at) % (len(data) - 1)
                        real(args[0], data[:cut])  # a torn write, then death
                os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(10)  # the signal is on its way
            return real(*args, **kwargs)

        setattr(os, name, call)

    for name in ("mkdir", "open", "write", "ftruncate", "replace", "rename", "unlink"):
        wrap(name)


def main() -> None:
    if spec.get("kill_at"):
        _install_fault(int(spec["kill_at"]), bool(spec.get("tear")))
    from k9values import expected_image, expected_scalars, expected_text

    import nblog as nb

    rank0 = os.environ.get("RANK", "0") == "0"
    if rank0:
        import numpy  # noqa: F401  (images: imported before the clock starts)
    report("B")
    run = nb.init("k9", resume="auto", timing_all_ranks=True, system=["cpu", "memory"],
                  system_interval=0.05, flush_interval=0.05)
    report(f"I {run.session}")
    trial, start = spec["trial"], spec["start"]
    stop = None if spec.get("steps") is None else start + spec["steps"]
    every, pause = spec.get("flush_every", 10), spec.get("sleep", 0.002)
    step = start
    while stop is None or step < stop:
        (loss, a), (lr, b), (acc, c) = expected_scalars(trial, step)
        with run.timer("step"):
            run.add_scalar({loss: a, lr: b}, step=step)
            run.add_scalar(acc, c, step=step)
            if rank0 and step % 5 == 0:
                run.add_text("samples", expected_text(trial, step), step=step)
            if rank0 and step % 10 == 0:
                run.add_image("pred", expected_image(trial, step), step=step)
        step += 1
        if (step - start) % every == 0:
            run.flush()
            report(f"F {step - start}")
        time.sleep(pause)
    run.flush()
    report(f"F {step - start}")
    if spec.get("finish", True):
        run.finish()
    report("D")


if __name__ == "__main__":
    main()
