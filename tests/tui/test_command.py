"""``nb tui`` on the command line: what it opens, and errors before any screen."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from nbcli.app import app
from nbcli.commands.tui import _is_project

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


def test_project_or_run(demo_root):
    assert _is_project(demo_root, "demo")
    assert not _is_project(demo_root, "demo/demo-0000abcd")
    assert not _is_project(demo_root, "nothing")


def test_unknown_run_is_an_error_before_the_ui(demo_root):
    result = CliRunner().invoke(app, ["tui", "--root", demo_root, "nosuch"])
    assert result.exit_code == 1
    assert "no run matches 'nosuch'" in result.output


def test_the_run_is_read_before_textual_is_imported(demo_run):
    """``nb tui RUN`` starts reading with nbcli.tui.preload, which must not import
    Textual (that import is what the reading overlaps)."""
    import subprocess
    import sys

    code = (
        "import sys, time\n"
        "from nbcli.tui.preload import start\n"
        "assert 'textual' not in sys.modules, 'preload imported textual'\n"
        f"lives = start([{demo_run!r}])\n"
        "deadline = time.monotonic() + 20\n"
        "while not lives[0]._series and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
        "print(sorted(tag for _r, _k, tag in lives[0]._series))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['eval/loss']"  # the first scalar tag: what the run screen plots first


def test_first_scalar_is_what_the_run_screen_plots_first(demo_run):
    from nbcli.tui.preload import first_scalar
    from nblog.reader._views.live import LiveRun

    live = LiveRun(demo_run)
    assert first_scalar([live]) == sorted(live.tags(0, "scalar"))[0]
    assert first_scalar([live], rank=99) is None


def test_the_app_plots_from_the_runs_start_opened(demo_run):
    from nbtui_helpers import aio, settle

    from nbcli.tui.app import NbTui
    from nbcli.tui.preload import start
    from nbcli.tui.screens.run import PlotGrid
    from nbcli.tui.widgets.plot import BraillePlot

    lives = start([demo_run])

    @aio
    async def check():
        app = NbTui(runs=[demo_run], poll_s=0, lives=lives)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert app.screen.model.runs == lives  # not opened a second time
            (plot,) = app.screen.query_one("#plots", PlotGrid).query(BraillePlot)
            assert plot.spec.title.startswith("eval/loss") and len(plot.spec.lines[0].x)

    check()
