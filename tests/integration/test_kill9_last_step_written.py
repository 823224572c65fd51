"""After kill -9, run.json's last_step never claims a step the event log lacks.

The training thread logs far ahead of the writer thread in a tight loop; run.json's
progress updates must take the step the writer has written, not the one logged."""

from __future__ import annotations

import json
import signal
import textwrap
import time

from _nbproc import base_env, read_line, start_code, wait

import nblog as nb


def test_kill_9_leaves_run_json_last_step_within_the_event_log(tmp_path):
    root = tmp_path / "runs"
    body = textwrap.dedent("""
        import time
        import nblog as nb
        run = nb.init("crash", run_id="k9-written", system=False)
        tags = [f"loss/{i}" for i in range(10)]
        step, until, told = 0, time.monotonic() + 3.0, False
        while True:  # as fast as the training thread can: the writer thread lags behind
            run.add_scalar(dict.fromkeys(tags, float(step)), step=step)
            step += 1
            if not told and time.monotonic() > until:
                print("LOGGING", flush=True)
                told = True
    """)
    proc = start_code(body, base_env(NB_DIR=str(root), NB_PROGRESS_S="0.2"), tmp_path)
    assert read_line(proc) == "LOGGING", wait(proc, expect_rc=None)
    meta_path = root / "crash" / "k9-written" / "run.json"
    claimed = None
    for _ in range(2000):  # run.json is rewritten every 0.2 s while the loop runs
        claimed = json.loads(meta_path.read_text())["sessions"][0].get("last_step")
        if claimed is not None and claimed > 1000:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert wait(proc, expect_rc=None).rc == -signal.SIGKILL
    assert claimed is not None and claimed > 1000
    last = json.loads(meta_path.read_text())["sessions"][0]["last_step"]
    df = nb.RunReader("k9-written", root=str(root)).scalars()
    on_disk = int(df["step"].max())
    assert last <= on_disk, (last, on_disk)
