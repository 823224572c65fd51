"""nb tail -n N of a large event log holds memory bounded by N and a read window, not by
the log: measured as the peak RSS of a real ``nb tail`` process (issue 12, item 3: it
was about 4x the log, 508 MiB for a 114 MiB log)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cli_helpers import clean_env

import nblog.format._format as F

POINTS = 9_000_000  # 13.3 bytes each in COLUMNS frames (format 2): a 114 MiB event log

_WRITE = """
import sys, nblog as nb
run = nb.init("big", run_id=sys.argv[2], root=sys.argv[1], system=False)
add = run.add_scalar
for i in range(int(sys.argv[3])):
    add("loss", 1.0, step=i)
run.finish()
"""

# Runs the command given as arguments as a child and prints its peak RSS (KiB): the
# measuring process itself is not counted.
_PEAK = """
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": p.returncode, "out": p.stdout, "err": p.stderr,
                  "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
""".replace("import resource", "import json, resource")

_NB = "import sys; from nbcli.app import main; sys.argv[0] = 'nb'; main()"


def _write(root, run_id: str, n: int) -> None:
    subprocess.run([sys.executable, "-c", _WRITE, str(root), run_id, str(n)], env=clean_env(), check=True,
                   timeout=120)


def _tail_peak(root, run_id: str, *args: str) -> tuple[int, list[str]]:
    """Peak RSS in bytes of ``nb tail RUN --json ARGS`` and the steps it printed."""
    cmd = [sys.executable, "-c", _NB, "tail", run_id, "--root", str(root), "--json", *args]
    p = subprocess.run([sys.executable, "-c", _PEAK, *cmd], env=clean_env(), capture_output=True, text=True,
                       check=True, timeout=120)
    res = json.loads(p.stdout)
    assert res["rc"] == 0, res["err"]
    return res["peak_kib"] * 1024, [json.loads(line)["step"] for line in res["out"].splitlines()]


def test_tail_of_a_large_log_holds_a_window_not_the_log(tmp_path):
    root = tmp_path / "runs"
    _write(root, "small-00000001", 10)
    _write(root, "big-00000001", POINTS)
    log = root / "big" / "big-00000001" / "events.r0.s0.log"
    size = log.stat().st_size
    assert size > 100 << 20
    base, steps = _tail_peak(root, "small-00000001", "-n", "5")
    assert steps == [5, 6, 7, 8, 9]
    want = list(range(POINTS - 5, POINTS))

    peak, steps = _tail_peak(root, "big-00000001", "-n", "5")  # a closed log (it has its END frame)
    assert steps == want
    assert peak - base < size / 4, f"nb tail -n 5 of a {size >> 20} MiB log: peak RSS {peak >> 20} MiB"

    # a log still being written (no END frame yet), and the start of nb tail -f
    with open(log, "rb") as f:
        f.seek(size - 4096)
        os.truncate(log, size - 4096 + f.read().rfind(F.FRAME_MAGIC))
    for args in (("-n", "5"), ("-n", "5", "-f", "--timeout", "0")):
        peak, steps = _tail_peak(root, "big-00000001", *args)
        assert steps == want
        assert peak - base < size / 4, f"nb tail {' '.join(args)} of a {size >> 20} MiB log: {peak >> 20} MiB"


_WRITE_MIXED = """
import sys, nblog as nb
run = nb.init("mixed", run_id="mixed-00000001", root=sys.argv[1], system=False)
for i in range(800_000):  # ~13 bytes a point: a log of 4 read windows with the text
    run.add_scalar("loss", float(i), step=i)
    if i == 400_000:
        run.add_text("big", "x" * (5 << 20), step=i)  # one frame larger than a read window
run.add_text("note", "done", step=800_000)
run.finish()
"""


def test_windows_lose_nothing_and_keep_the_order(tmp_path):
    """A log of several read windows, with a frame larger than a window: the last N
    events are the tail of all events, every point is there once, in order."""
    from nblog.reader._views.tail import _WINDOW, Follower

    root = tmp_path / "runs"
    subprocess.run([sys.executable, "-c", _WRITE_MIXED, str(root)], env=clean_env(), check=True, timeout=120)
    assert (root / "mixed" / "mixed-00000001" / "events.r0.s0.log").stat().st_size > 3 * _WINDOW
    every = Follower("mixed-00000001", root).poll()
    points = [e for e in every if e.kind == "scalar"]
    assert [e.step for e in points] == list(range(800_000)) and [e.value for e in points[:3]] == [0.0, 1.0, 2.0]
    texts = [(e.tag, e.step, len(e.text or "")) for e in every if e.kind == "text"]
    assert texts == [("big", 400_000, 5 << 20), ("note", 800_000, 4)]
    for n in (1, 2, 7, 250_000, 10**9):
        assert Follower("mixed-00000001", root).poll(last=n) == every[-n:], n
