"""The real thing: ``nb tui RUN`` in a tmux terminal (100×30) while another process
trains and logs; the newest step appears within a few seconds; escape shows the runs
list, where the run's last step moves and says how old it is; ``q`` quits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(__file__)
TMUX = shutil.which("tmux")
pytestmark = [pytest.mark.skipif(TMUX is None, reason="needs tmux"), pytest.mark.timing]


def tmux(*args: str) -> str:
    return subprocess.run([TMUX, *args], check=True, capture_output=True, text=True).stdout


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def wait_for(predicate, timeout: float, what: str, session: str) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate():
            return time.monotonic() - t0
        time.sleep(0.1)
    raise AssertionError(f"{what} not seen in {timeout}s; screen:\n{screen(session)}")


def last_step_shown(session: str) -> int:
    for line in screen(session).splitlines():
        if " step " in line and "rank 0" in line:
            return int(line.split(" step ")[1].split()[0])
    return -1


def runs_row_step(session: str) -> int | None:
    """The last step the runs list shows for the running run, when it shows its age."""
    for line in screen(session).splitlines():
        if "live-0000cafe" in line and "running" in line and " ago" in line:
            return int(line.split("running")[1].split()[2])
    return None


def test_nb_tui_follows_a_run_being_written(tmp_path):
    root = str(tmp_path / "runs")
    state = str(tmp_path / "state")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]),
           "TZ": "UTC", "TERM": "xterm-256color"}
    writer = subprocess.Popen([sys.executable, os.path.join(HERE, "writer.py"), root, "live-0000cafe", state, "60"],
                              env=env)
    session = f"nbtui{os.getpid()}"
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(state):
            assert time.monotonic() < deadline and writer.poll() is None, "the writer did not start"
            time.sleep(0.1)
        nb = [sys.executable, "-c", "from nbcli.app import main; main()"]
        cmd = " ".join(f"'{a}'" for a in [*nb, "tui", "--root", root, "--interval", "0.5", "live-0000cafe"])
        tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", "-e", f"PYTHONPATH={env['PYTHONPATH']}",
             "-e", "TZ=UTC", f"{cmd}; echo nb-exit=$?; sleep 30")
        wait_for(lambda: last_step_shown(session) >= 0, 60, "the run screen", session)
        assert "train/loss" in screen(session) or "lr" in screen(session)
        # the newest flushed step appears within a few seconds
        for _ in range(2):
            with open(state) as f:
                flushed = int(f.read())
            took = wait_for(lambda n=flushed: last_step_shown(session) >= n, 10, f"step {flushed}", session)
            assert took < 5.0, f"step {flushed} took {took:.1f}s to appear"
        # escape: the runs of the root; the running run's last step moves and says how old it is
        tmux("send-keys", "-t", session, "Escape")
        wait_for(lambda: runs_row_step(session) is not None, 30, "the runs list with the step's age", session)
        first = runs_row_step(session)
        wait_for(lambda: (runs_row_step(session) or -1) > first, 20, "the runs list's step moving", session)
        tmux("send-keys", "-t", session, "q")
        wait_for(lambda: "nb-exit=0" in screen(session), 15, "nb tui exiting with 0", session)
    finally:
        writer.kill()
        writer.wait()
        subprocess.run([TMUX, "kill-session", "-t", session], capture_output=True)
