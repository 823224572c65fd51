"""A real terminal (tmux, 100×30): ``NO_COLOR=1 nb tui RUN`` opens the run and its
views; SIGTERM ends ``nb tui`` with the terminal restored (the shell's screen back,
no mouse reporting left on) and exit status 143 (SIGHUP: 129)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import nbtui_synth as synth
import pytest

TMUX = shutil.which("tmux")
pytestmark = [pytest.mark.skipif(TMUX is None, reason="needs tmux"), pytest.mark.timing]


def tmux(*args: str) -> str:
    return subprocess.run([TMUX, *args], check=True, capture_output=True, text=True).stdout


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def wait_for(predicate, timeout: float, what: str, session: str) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} not seen in {timeout}s; screen:\n{screen(session)}")


def start(tmp_path, session: str, *env: str) -> str:
    """``nb tui RUN`` on the demo run in a new tmux session; the TUI's pid is written to
    the returned file (the shell execs it). ``env``: NAME=VALUE for the pane."""
    root = str(tmp_path / "runs")
    synth.write_run(root)
    pidfile = str(tmp_path / "pid")
    pypath = os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])
    nb = [sys.executable, "-c", "from nbcli.app import main; main()", "tui", "--root", root, synth.RUN_ID]
    script = str(tmp_path / "tui.sh")
    with open(script, "w") as f:
        f.write(f"echo $$ > '{pidfile}'\nexec " + " ".join(f"'{a}'" for a in nb) + "\n")
    extra = [x for e in env for x in ("-e", e)]
    tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", "-e", f"PYTHONPATH={pypath}", "-e", "TZ=UTC",
         "-e", "TERM=xterm-256color", *extra, f"timeout --foreground 120 sh '{script}'; echo nb-exit=$?; sleep 60")
    return pidfile


def test_no_color_opens_the_run_and_its_views(tmp_path):
    session = f"nbnc{os.getpid()}"
    try:
        start(tmp_path, session, "NO_COLOR=1")
        wait_for(lambda: "rank 0 · ranks" in screen(session) and "eval/loss" in screen(session), 60,
                 "the run screen", session)
        for key in "23451":
            tmux("send-keys", "-t", session, key)
            time.sleep(0.5)  # a human's pace; what counts is that nothing crashes
        assert "internal error" not in screen(session)
        tmux("send-keys", "-t", session, "q")
        wait_for(lambda: "nb-exit=0" in screen(session), 20, "nb tui exiting with 0", session)
        assert "error" not in screen(session)
    finally:
        subprocess.run([TMUX, "kill-session", "-t", session], capture_output=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_restores_the_terminal_and_exits_143(tmp_path, sig):
    session = f"nbterm{os.getpid()}"
    try:
        pidfile = start(tmp_path, session)
        wait_for(lambda: "rank 0 · ranks" in screen(session), 60, "the run screen", session)
        assert tmux("display", "-p", "-t", session, "#{alternate_on}").strip() == "1"
        with open(pidfile) as f:
            os.kill(int(f.read()), sig)
        wait_for(lambda: "nb-exit=" in screen(session), 20, "nb tui exiting", session)
        assert f"nb-exit={128 + sig}" in screen(session)  # 143 for SIGTERM, 129 for SIGHUP
        assert "Terminated" not in screen(session)
        state = tmux("display", "-p", "-t", session,
                     "#{alternate_on} #{mouse_any_flag} #{mouse_button_flag} #{mouse_standard_flag} #{cursor_flag}")
        assert state.split() == ["0", "0", "0", "0", "1"], state  # the shell's screen, no mouse, a cursor
    finally:
        subprocess.run([TMUX, "kill-session", "-t", session], capture_output=True)
