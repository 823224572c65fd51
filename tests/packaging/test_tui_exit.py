"""``nb tui`` that cannot start: exit 1 and nb's one-line error, not Textual's traceback
and exit 0; ``--debug`` shows the traceback, as for every other command.

The failure is the one a wheel without its stylesheet gave: the packages are copied
without ``nbcli/tui/nb.tcss`` (or with a broken one) and imported from the copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TCSS = "nbcli/tui/nb.tcss"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A finished run of 5 points, written by a real process."""
    root = tmp_path_factory.mktemp("tuiexit") / "runs"
    code = ("import nblog as nb\n"
            f"run = nb.init('p', run_name='x', run_id='x-00000001', root={str(root)!r}, system=False)\n"
            "for i in range(5):\n    run.add_scalar('loss', 1.0 / (i + 1))\n"
            "run.finish()\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=clean_env(REPO))
    return root / "p" / "x-00000001"


def clean_env(pythonpath: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NB_", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                                      "SLURM_", "OMPI_", "TORCHELASTIC_"))}
    return {**env, "PYTHONPATH": str(pythonpath), "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}


def packages_copy(dest: Path, stylesheet: str | None) -> Path:
    """nblog and nbcli copied to ``dest``, the stylesheet left out (None) or replaced."""
    for package in ("nblog", "nbcli"):
        shutil.copytree(REPO / package, dest / package, ignore=shutil.ignore_patterns("__pycache__"))
    if stylesheet is None:
        (dest / TCSS).unlink()
    else:
        (dest / TCSS).write_text(stylesheet)
    return dest


def nb_tui(packages: Path, run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from nbcli.app import main; main()", *extra, "tui",
                           "--root", str(run_dir.parent.parent), run_dir.name],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                          env=clean_env(packages), cwd=packages)


def test_a_tui_without_its_stylesheet_exits_1_with_one_error_line(tmp_path, run_dir):
    result = nb_tui(packages_copy(tmp_path, None), run_dir)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: ") and "unable to read CSS file" in lines[0] and "nb.tcss" in lines[0]
    assert lines[1].startswith("hint: ") and "--debug" in lines[1]
    assert len(lines) == 2 and "Traceback" not in result.stderr


def test_debug_shows_the_traceback_of_a_tui_that_cannot_start(tmp_path, run_dir):
    result = nb_tui(packages_copy(tmp_path, None), run_dir, "--debug")
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "StylesheetError" in result.stderr


def test_a_tui_that_fails_once_running_exits_1_with_one_error_line(tmp_path, run_dir):
    """A stylesheet that reads but does not parse fails after the terminal was taken over."""
    result = nb_tui(packages_copy(tmp_path, "Screen { color: red; "), run_dir)
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error: " in line]
    assert len(errors) == 1 and "Unexpected end of file" in errors[0]
    assert "Traceback" not in result.stderr and "╭" not in result.stderr
