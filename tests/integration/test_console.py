"""Console capture (nb.init(console=True)) in real processes: what reaches the file and
what still reaches the real stdout and stderr (pipes this test reads), on a normal
exit, kill -9 in a print flood, a fork, SIGTERM, an uncaught exception and a helper
process that dies."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from _nbproc import HANG_GUARD_S, base_env

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

CHILD = Path(__file__).resolve().parent / "_scripts" / "console_child.py"
LINE = re.compile(rb"^(\d+\.\d{3})\t(-|\d+)\t([oe!])\t([^\n]*)$")
RUN_ID = "console-00000001"


def start(tmp_path: Path, mode: str, **env: str) -> subprocess.Popen:
    """The child in a process group of its own (as torchrun starts each worker)."""
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(tmp_path / "runs"), mode],
        env=base_env(NB_RUN_ID=RUN_ID, **env), cwd=tmp_path, start_new_session=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen, stdin: bytes = b"") -> tuple[bytes, bytes]:
    """Wait for the child and for its helper (which holds the pipes until it is done)."""
    try:
        return proc.communicate(stdin, timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"hung:\n{out[-2000:]!r}\n{err[-2000:]!r}") from None


def console_file(tmp_path: Path) -> Path:
    files = sorted((tmp_path / "runs" / "console" / RUN_ID).glob("console.r*.s*.log"))
    assert [f.name for f in files] == ["console.r0.s0.log"]
    return files[0]


def parse(path: Path, *, whole: bool = True) -> list[tuple[float, int | None, str, bytes]]:
    """Every line of the file; each must be well-formed. ``whole``: the file ends with a
    newline (else a last fragment without one is allowed, and left out)."""
    data = path.read_bytes()
    if whole:
        assert data.endswith(b"\n"), data[-200:]
    body = data[: data.rfind(b"\n") + 1]
    out = []
    for raw in body.split(b"\n")[:-1]:
        m = LINE.match(raw)
        assert m, raw
        t, step, stream, text = m.groups()
        out.append((float(t), None if step == b"-" else int(step), stream.decode(), text))
    return out


def test_python_and_c_level_writes_reach_file_and_both_streams(tmp_path):
    proc = start(tmp_path, "mixed", NB_FLUSH_INTERVAL="0.05")
    out, err = finish(proc)
    assert proc.returncode == 0, err
    # the real streams got everything, stdout and stderr kept apart
    assert out == (b"python stdout at step 1\nfd 1 at step 2\nlibc printf at step 3\n"
                   b"no newline at the end")
    assert err == b"python stderr at step 1\nfd 2 at step 2\nlibc write to fd 2 at step 3\n"
    lines = parse(console_file(tmp_path))
    got = {(text, stream, step) for _t, step, stream, text in lines}
    assert got == {
        (b"python stdout at step 1", "o", 1), (b"python stderr at step 1", "e", 1),
        (b"fd 1 at step 2", "o", 2), (b"fd 2 at step 2", "e", 2),
        (b"libc printf at step 3", "o", 3), (b"libc write to fd 2 at step 3", "e", 3),
        (b"no newline at the end", "o", 3),  # stamped when its writer closed the pipe
    }
    times = [t for t, *_ in lines]
    assert times == sorted(times) and abs(times[0] - time.time()) < 600


def _wait_for_size(path: Path, size: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not (path.exists() and path.stat().st_size >= size):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the console file did not grow"
        time.sleep(0.02)  # waiting for another process's output, not for a flush of ours


def test_kill9_in_a_print_flood_leaves_whole_lines_and_the_terminal_gets_them_too(tmp_path):
    proc = start(tmp_path, "flood")
    got: list[bytes] = []  # the terminal reads as it comes, or the echo (and the flood) waits
    reader = threading.Thread(target=lambda: got.extend(iter(lambda: proc.stdout.read1(1 << 16), b"")))
    reader.start()
    path = tmp_path / "runs" / "console" / RUN_ID / "console.r0.s0.log"
    _wait_for_size(path, 2 << 20, proc)
    # and until a line carries a step: the step reaches the helper every 50 ms, and on a
    # fast machine 2 MiB of flood is printed before the first one
    deadline = time.monotonic() + HANG_GUARD_S
    while not re.search(rb"\n[0-9.]+\t[0-9]+\to\t", path.read_bytes()[-(1 << 20):]):
        assert proc.poll() is None and time.monotonic() < deadline, "no line got a step"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    reader.join(HANG_GUARD_S)  # EOF once the helper read the pipe to its end
    assert not reader.is_alive()
    finish(proc)
    out = b"".join(got)
    assert proc.returncode == -signal.SIGKILL
    pad = b"x" * 100
    terminal = out.split(b"\n")
    for i, text in enumerate(terminal[:-1]):  # the terminal got every line, in order
        assert text == b"flood %d %s" % (i, pad)
    assert (b"flood %d %s" % (len(terminal) - 1, pad)).startswith(terminal[-1])
    lines = parse(path)
    assert len(lines) > 10_000
    # the file: the same lines, but for any it had to drop, each gap counted in a note
    expected, missing, noted = 0, 0, 0
    for _t, _s, stream, text in lines:
        if stream == "!":
            noted += int(re.match(rb"nb: (\d+) lines", text).group(1))
            continue
        i = int(text.split()[1])
        missing += i - expected
        assert text == terminal[i], (i, text)  # the last one may be cut where the kill landed
        expected = i + 1
    assert missing == noted
    steps = [s for _t, s, stream, _x in lines if stream == "o"]
    known = [s for s in steps if s is not None]  # None: read before the first step was published
    assert steps == [None] * (len(steps) - len(known)) + known and known == sorted(known) and known


def test_fork_child_writes_to_the_original_streams_never_the_file(tmp_path):
    proc = start(tmp_path, "fork")
    out, err = finish(proc)
    assert proc.returncode == 0, err
    assert b"fork child python\n" in out and b"fork child fd 1\n" in out
    assert b"fork child fd 2\n" in err
    assert out.index(b"fork child fd 1") < out.index(b"parent after fork")
    texts = [text for *_x, text in parse(console_file(tmp_path))]
    assert texts == [b"parent before fork", b"parent after fork"]


def test_sigterm_keeps_every_line_written_before_it(tmp_path):
    """SIGTERM to the whole process group, as torchrun (killpg) and Slurm stop a worker:
    the helper is in it too, and must outlive the rank to write its last lines."""
    proc = start(tmp_path, "sigterm")
    assert proc.stdout.readline() == b"line 0\n"  # stdout is a pipe here: block-buffered,
    while proc.stdout.readline() != b"ready\n":     # flushed by the print of "ready"
        assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = finish(proc)
    assert proc.returncode == -signal.SIGTERM
    assert b"c-level line before SIGTERM\n" in err
    lines = parse(console_file(tmp_path))
    # two pipes: the order between stdout and stderr is the helper's; each stream's is kept
    assert [(t, st) for _t, st, s, t in lines if s == "o"] == [
        (b"line 0", 4), (b"line 1", 4), (b"line 2", 4), (b"line 3", 4), (b"line 4", 4), (b"ready", 4)]
    assert [(t, st) for _t, st, s, t in lines if s == "e"] == [(b"c-level line before SIGTERM", 4)]


def test_uncaught_exception_traceback_is_in_the_file(tmp_path):
    proc = start(tmp_path, "raise")
    out, err = finish(proc)
    assert proc.returncode == 1
    assert b"RuntimeError: boom at step 3" in err
    lines = parse(console_file(tmp_path))
    errs = [(step, text) for _t, step, stream, text in lines if stream == "e"]
    assert (3, b"RuntimeError: boom at step 3") in errs
    assert any(text.startswith(b"Traceback") for _s, text in errs)


def test_a_segfault_leaves_its_last_words_in_the_file(tmp_path):
    """What faulthandler writes to fd 2 as the process dies is in the pipe, not yet read:
    the helper outlives the process and keeps it."""
    proc = start(tmp_path, "segfault")
    out, err = finish(proc)
    assert proc.returncode == -signal.SIGSEGV
    assert out == b"about to crash\n" and b"Fatal Python error: Segmentation fault" in err
    lines = parse(console_file(tmp_path))
    errs = [(step, text) for _t, step, stream, text in lines if stream == "e"]
    assert (7, b"Fatal Python error: Segmentation fault") in errs
    assert any(b"console_child.py" in text for _s, text in errs)  # the Python stack of the crash


def test_a_dead_helper_leaves_training_and_the_terminal_going(tmp_path):
    proc = start(tmp_path, "after", SECONDS_AFTER="4")
    assert proc.stdout.readline() == b"tick 0\n"
    helpers = [c for c in psutil.Process(proc.pid).children() if "_console_tee.py" in " ".join(c.cmdline())]
    assert len(helpers) == 1
    helpers[0].send_signal(signal.SIGKILL)
    out, err = finish(proc)
    assert proc.returncode == 0, err
    assert out.endswith(b"done\n")  # printed after the helper died: to the real stdout
    assert b"console capture of rank 0 stopped" in err
    lines = parse(console_file(tmp_path), whole=False)  # a write the kill cut: no newline
    ticks = [text for *_x, text in lines]
    assert ticks == [b"tick %d" % i for i in range(len(ticks))]


def test_a_helper_dying_in_a_flood_never_hangs_the_rank(tmp_path):
    """The rank is blocked writing into a full pipe when its helper dies: the watchdog
    puts the streams back and drains the pipe into them (it must not wait for Python's
    stdout lock, which the blocked print holds)."""
    proc = start(tmp_path, "flood", FLOOD_LINES="400000")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(iter(lambda: proc.stdout.read1(1 << 16), b"")))
    reader.start()
    path = tmp_path / "runs" / "console" / RUN_ID / "console.r0.s0.log"
    _wait_for_size(path, 1 << 20, proc)
    helpers = [c for c in psutil.Process(proc.pid).children() if "_console_tee.py" in " ".join(c.cmdline())]
    helpers[0].send_signal(signal.SIGSTOP)  # the pipe fills, and the rank blocks writing into it
    deadline = time.monotonic() + HANG_GUARD_S
    while "pipe_write" not in Path(f"/proc/{proc.pid}/wchan").read_text():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.01)
    helpers[0].send_signal(signal.SIGKILL)
    reader.join(HANG_GUARD_S)
    assert not reader.is_alive(), "the rank hung"
    _out, err = finish(proc)
    assert proc.returncode == 0, err
    assert b"".join(got).endswith(b"flood 399999 " + b"x" * 100 + b"\ndone\n")
    assert b"console capture of rank 0 stopped" in err
    parse(path, whole=False)  # what the file got is still whole lines


PLANTED = """
import os, sys
import nblog as nb
root = sys.argv[1]
first = nb.init("console", run_id="planted-00000001", root=root, system=False)
first.finish()
os.symlink(os.path.join(root, "elsewhere.log"), os.path.join(first.dir, "console.r0.s1.log"))
run = nb.init("console", run_id="planted-00000001", root=root, resume="auto", system=False, console=True)
print("still training at session", run.session, flush=True)
"""


def test_a_link_where_the_console_file_goes_warns_and_training_goes_on(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", PLANTED, str(tmp_path / "runs")], env=base_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = finish(proc)
    assert proc.returncode == 0, err
    assert out == b"still training at session 1\n"
    assert b"rank 0 cannot capture its console" in err and b"console.r0.s1.log" in err
    assert not (tmp_path / "runs" / "elsewhere.log").exists()


NO_HELPER = """
import os, sys
import nblog as nb
sys.executable = "/nonexistent/python"  # an embedded interpreter: no python to start
run = nb.init("console", run_id="nohelper-00000001", root=sys.argv[1], system=False, console=True)
print("still training", flush=True)
os.write(2, b"fd 2 still works\\n")
print(sorted(os.listdir(run.dir)))
"""


def test_a_helper_that_cannot_start_leaves_the_streams_and_no_file(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", NO_HELPER, str(tmp_path / "runs")], env=base_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = finish(proc)
    assert proc.returncode == 0, err
    assert out.startswith(b"still training\n") and b"console.r0.s0.log" not in out
    assert b"rank 0 cannot capture its console" in err and b"fd 2 still works\n" in err
