"""One rule for a closed standard output, for every command (nbcli._errors): its reader
went away (``nb ... | head -0``), so nb exits 1 and says nothing, whether the write that
finds the pipe closed happens while the command runs or when stdout is flushed at its
end (block-buffered output, as without PYTHONUNBUFFERED), never Python's "Exception
ignored ... BrokenPipeError" with status 120, never 0.

Each command is a real ``nb`` process whose stdout is the write end of a real pipe
whose read end is closed before it starts, so every write to it fails with EPIPE.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from cli_helpers import clean_env

CODE = "from nbcli.app import main; main()"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Two small runs written by nblog in a real process: scalars, a timer, text, an
    image and a console log in the first."""
    root = tmp_path_factory.mktemp("pipe")
    script = textwrap.dedent(f"""
        import numpy as np
        import nblog
        run = nblog.init("p", root={str(root)!r}, run_id="a-00000001", system=False, console=True,
                         config={{"lr": 0.1}})
        for step in range(50):
            with run.timer("step", step=step):
                pass
            run.add_scalar({{"loss": 1.0 / (step + 1), "acc": step * 0.01}}, step=step)
            print("step", step, flush=True)
        run.add_text("note", "hello", step=1)
        run.add_image("img", np.zeros((4, 4, 3), dtype=np.uint8), step=1)
        run.finish()
        run = nblog.init("p", root={str(root)!r}, run_id="b-00000002", system=False, console=False,
                         config={{"lr": 0.2}})
        run.add_scalar("loss", 0.5, step=0)
        run.finish()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env=clean_env(), timeout=300, capture_output=True)
    return root


COMMANDS = [
    ["ls"], ["ls", "--json"], ["ls", "--where", "lr > 0"], ["show", "a-00000001"], ["show", "a-00000001", "--json"],
    ["tail", "a-00000001"], ["tail", "a-00000001", "--json"], ["media", "a-00000001"], ["diff", "a-00000001", "b-00000002"],
    ["timers", "a-00000001"], ["logs", "a-00000001"], ["export", "a-00000001", "-o", "-", "-F", "csv"],
    ["export", "a-00000001", "-o", "-", "-F", "parquet"], ["resume-id", "p", "--latest"],
    ["--version"], ["show", "--help"],
]


def nb_into_closed_pipe(args: list[str], root, buffered: bool) -> subprocess.CompletedProcess:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before nb writes anything
    env = clean_env(NB_DIR=str(root))
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    try:
        return subprocess.run([sys.executable, "-c", CODE, *args], stdout=write, stderr=subprocess.PIPE, text=True,
                              env=env, timeout=120)
    finally:
        os.close(write)


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_stdout_exits_1_quietly(root, args, buffered):
    res = nb_into_closed_pipe(args, root, buffered)
    assert (res.returncode, res.stderr) == (1, ""), res.stderr


def test_the_same_commands_exit_0_into_an_open_pipe(root):
    """The control: each command above succeeds when its output is read."""
    for args in COMMANDS:
        res = subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True,
                             env=clean_env(NB_DIR=str(root)), timeout=120)
        assert res.returncode == 0 and res.stdout, (args, res.stderr)


def test_a_failure_keeps_its_own_status_with_a_closed_pipe(root):
    """A runtime error (1) or a usage error (2) says so on stderr as ever; the closed
    pipe changes neither."""
    res = nb_into_closed_pipe(["show", "nosuch"], root, buffered=True)
    assert res.returncode == 1 and "no run matches 'nosuch'" in res.stderr
    res = nb_into_closed_pipe(["ls", "--where", "lr <"], root, buffered=True)
    assert res.returncode == 2 and "--where" in res.stderr


def nb_with_stdout_closed(args: list[str], root, cwd=None) -> subprocess.CompletedProcess:
    """nb started with file descriptor 1 closed (``nb ls >&-``): Python has no sys.stdout."""
    return subprocess.run([sys.executable, "-c", CODE, *args], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, env=clean_env(NB_DIR=str(root)), timeout=120, cwd=cwd,
                          preexec_fn=lambda: os.close(1))


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_stdout_closed_before_the_start_exits_1_quietly(root, args):
    """``nb CMD >&-``: the output has nowhere to go, as with a closed pipe; before, every
    command printed 'internal error: AttributeError' and a traceback."""
    res = nb_with_stdout_closed(args, root)
    assert (res.returncode, res.stderr) == (1, ""), res.stderr


def test_an_output_file_is_written_with_stdout_closed_and_lands_in_no_stray_descriptor(root, tmp_path):
    """``nb export RUN -o FILE >&-`` writes nothing to stdout, so it succeeds; its file
    is whole (the file must not take descriptor 1, where a print would land)."""
    out = tmp_path / "x.csv"
    res = nb_with_stdout_closed(["export", "a-00000001", "-o", str(out), "-F", "csv"], root)
    assert res.returncode == 0, res.stderr
    ref = subprocess.run([sys.executable, "-c", CODE, "export", "a-00000001", "-o", "-", "-F", "csv"],
                         capture_output=True, text=True, env=clean_env(NB_DIR=str(root)), timeout=120)
    assert out.read_text() == ref.stdout
