"""A media backlog never delays points and text: what ``kill -9`` and SIGTERM keep.

The child queues a burst of noisy images (incompressible: PNG encoding takes ~0.2 s
each here, so the burst keeps the encoder busy far longer than the test runs), then
logs a scalar every 50 ms and reports ``step monotonic_time`` on stdout. The clock is
CLOCK_MONOTONIC, shared by the processes of the machine, so the test knows which
scalars were logged well before it sent the signal.

Before the fix, the writer thread encoded every queued item before it wrote points
again: a kill -9 lost everything since the drain that started the encoding (seconds),
and SIGTERM either waited for the whole backlog or gave up without writing the points.
"""

from __future__ import annotations

import signal
import textwrap
import time

import pytest
from hardkit import clean_env, communicate, start_child

import nblog as nb

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

N_IMAGES = 80  # 1000x1000 RGB noise: 240 MB queued, under the 512 MiB backlog limit
RUN_ID = "burst-00000000"
MARGIN_S = 2.5  # the promise is 1 s (flush interval); generous for a loaded 2-core box

CHILD = textwrap.dedent(f"""
    import sys, time
    import numpy as np
    import nblog as nb
    run = nb.init("media", run_id="{RUN_ID}", system=False)
    noise = np.random.default_rng(0).integers(0, 256, (1000, 1000, 3), dtype=np.uint8)
    for i in range({N_IMAGES}):
        run.add_image("noise", noise, step=i)
    run.add_text("note", "burst queued", step=0)
    step = 0
    while True:
        run.add_scalar("x", float(step), step=step)
        print(step, time.monotonic(), flush=True)
        step += 1
        time.sleep(0.05)
""")


def _run_until(root, sig: int, after_s: float):
    proc = start_child(CHILD, [], clean_env(NB_DIR=str(root)))
    first = proc.stdout.readline()
    assert first, proc.stderr.read()
    time.sleep(after_s)
    t_signal = time.monotonic()
    proc.send_signal(sig)
    rc, out, err = communicate(proc, timeout=120)
    t_exit = time.monotonic()
    logged = [(int(a), float(b)) for a, b in (ln.split() for ln in (first + out).splitlines() if ln.strip())]
    return rc, err, logged, t_signal, t_exit


def _on_disk(root):
    r = nb.RunReader(RUN_ID, root=str(root))
    return r, set(r.scalars("x")["step"].to_list()), r.media("noise").height


def test_kill9_with_a_media_backlog_loses_at_most_the_flush_interval(tmp_path):
    root = tmp_path / "runs"
    rc, err, logged, t_kill, _ = _run_until(root, signal.SIGKILL, 6.0)
    assert rc == -signal.SIGKILL, err
    r, steps, images = _on_disk(root)
    assert images < N_IMAGES, "the backlog was encoded before the kill: the test proves nothing"
    due = [s for s, t in logged if t <= t_kill - MARGIN_S]
    assert len(due) > 40
    missing = [s for s in due if s not in steps]
    assert not missing, (f"{len(missing)} scalars logged {MARGIN_S}+ s before kill -9 are not on disk "
                         f"(first {missing[:3]}, {images} images encoded)")
    assert r.text("note").height == 1


def test_sigterm_with_a_media_backlog_writes_points_first_and_exits_within_the_second(tmp_path):
    root = tmp_path / "runs"
    rc, err, logged, t_term, t_exit = _run_until(root, signal.SIGTERM, 3.0)
    assert rc == -signal.SIGTERM, err
    r, steps, images = _on_disk(root)
    before = [s for s, t in logged if t < t_term]
    missing = [s for s in before if s not in steps]
    assert not missing, f"{len(missing)} scalars logged before SIGTERM are not on disk (first {missing[:3]})"
    assert r.text("note").height == 1
    # 1 s for nb's handler (points first, then media while the second lasts), plus the
    # interpreter's exit; generous for a loaded machine. Encoding the backlog took ~16 s.
    assert t_exit - t_term < 4.0, f"exit {t_exit - t_term:.2f} s after SIGTERM"
    (session,) = r.sessions()
    assert session["end"]["status"] == "running" and session["end"]["reason"] == "SIGTERM", session["end"]
    # every image is accounted for: on disk, or dropped as not encoded in time
    assert images + session["dropped"].get("media_timeout", 0) == N_IMAGES, session["dropped"]
    assert session["dropped"].get("media_timeout", 0) > 0
