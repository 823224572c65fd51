"""A process that captures its console (nb.init(console=True)) and prints in one way.

``python console_child.py ROOT MODE``; the run id is ``$NB_RUN_ID``. Modes:

- ``mixed``: Python print to stdout and stderr, os.write to fd 1 and 2, libc printf and
  write through ctypes, each after a step (run.flush() stamps the lines after it);
- ``flood``: ``flood <i> <padding>`` lines on stdout, forever (killed by the test), or
  ``$FLOOD_LINES`` of them and then ``done``;
- ``fork``: a forked child prints (Python and fd level), the parent prints after it;
- ``sigterm``: prints, says ``ready`` and waits on stdin for the test's SIGTERM;
- ``raise``: raises an uncaught exception at step 3;
- ``segfault``: crashes in C at step 7, with faulthandler on;
- ``after``: prints a line every 10 ms for ``$SECONDS_AFTER`` seconds (the test kills
  the helper meanwhile), then ``done``;
- ``echo``: each line read on stdin is printed to stdout (``nb logs -f`` tests); ends at EOF.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

import nblog as nb

root, mode = sys.argv[1], sys.argv[2]
run = nb.init("console", root=root, console=True, system=False)
libc = ctypes.CDLL(None)



def seen(*texts: bytes) -> None:
    """Wait until the helper wrote these lines to the file: the stamp of a line is the
    step when the helper read it, so the next step waits for it (NB_FLUSH_INTERVAL is
    short in these tests)."""
    path = os.path.join(run.dir, f"console.r{run.rank}.s{run.session}.log")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(path, "rb") as f:
            data = f.read()
        if all(b"\t" + t + b"\n" in data for t in texts):
            return
        time.sleep(0.01)
    raise SystemExit(f"not in the console file: {texts}")


if mode == "mixed":
    run.add_scalar("x", 1.0, step=1)
    run.flush()
    print("python stdout at step 1", flush=True)
    print("python stderr at step 1", file=sys.stderr, flush=True)
    seen(b"python stdout at step 1", b"python stderr at step 1")
    run.add_scalar("x", 2.0, step=2)
    run.flush()
    os.write(1, b"fd 1 at step 2\n")
    os.write(2, b"fd 2 at step 2\n")
    seen(b"fd 1 at step 2", b"fd 2 at step 2")
    run.add_scalar("x", 3.0, step=3)
    run.flush()
    libc.printf(b"libc printf at step %d\n", 3)
    libc.fflush(None)
    msg = b"libc write to fd 2 at step 3\n"
    libc.write(2, msg, len(msg))
    sys.stdout.write("no newline at the end")
elif mode == "flood":
    pad = "x" * 100
    i = 0
    n = int(os.environ.get("FLOOD_LINES", "-1"))
    while i != n:
        run.add_scalar("i", float(i), step=i)
        print(f"flood {i} {pad}")
        i += 1
    print("done", flush=True)
elif mode == "fork":
    print("parent before fork", flush=True)
    pid = os.fork()
    if pid == 0:
        print("fork child python", flush=True)
        os.write(1, b"fork child fd 1\n")
        os.write(2, b"fork child fd 2\n")
        os._exit(0)
    os.waitpid(pid, 0)
    print("parent after fork", flush=True)
elif mode == "sigterm":
    for i in range(5):
        run.add_scalar("x", float(i), step=i)
        print(f"line {i}")
    run.flush()
    os.write(2, b"c-level line before SIGTERM\n")
    print("ready", flush=True)
    sys.stdin.read()
elif mode == "raise":
    for i in range(4):
        run.add_scalar("x", float(i), step=i)
    run.flush()
    raise RuntimeError("boom at step 3")
elif mode == "segfault":
    import faulthandler

    faulthandler.enable()
    run.add_scalar("x", 7.0, step=7)
    run.flush()
    print("about to crash", flush=True)
    ctypes.string_at(0)
elif mode == "after":
    deadline = time.monotonic() + float(os.environ.get("SECONDS_AFTER", "3"))
    i = 0
    while time.monotonic() < deadline:
        print(f"tick {i}", flush=True)
        i += 1
        time.sleep(0.01)
    print("done", flush=True)
elif mode == "echo":
    for i, line in enumerate(sys.stdin):
        run.add_scalar("x", float(i), step=i)
        run.flush()
        print(line.rstrip("\n"), flush=True)
