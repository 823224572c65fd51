"""What a new user's first sessions hit: ``NO_COLOR`` (Textual's monochrome filter reads
every segment's style), a 10 MB text, a root with no runs or none at all, SIGTERM, and
the status the run header shows (the catalog's, as the runs list and ``nb ls``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from nbtui_helpers import aio, settle, wait_for
from nbtui_synth import RUN_ID, WALL0
from textual.widgets import DataTable, Static

from nbcli.tui.app import NbTui
from nbcli.tui.screens.run import RunScreen
from nbcli.tui.widgets.plot import BraillePlot

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

NB = [sys.executable, "-c", "from nbcli.app import main; main()"]

# -- 1. NO_COLOR ----------------------------------------------------------------------------


@aio
async def test_no_color_every_view_and_from_the_runs_list(demo_root, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")  # Textual reads it when the app is created
    app = NbTui(root=demo_root, poll_s=0)
    assert app.no_color
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        table.move_cursor(row=[str(table.get_row_at(i)[1]) for i in range(table.row_count)].index(RUN_ID))
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        assert app.screen.query(BraillePlot)
        for key in "23451":
            await pilot.press(key)
            await settle(pilot)
        await pilot.press("q")
    assert app.return_code == 0


@aio
async def test_no_color_run_without_points(tmp_path, monkeypatch):
    import nblog as nb

    run = nb.init("p", run_id="empty-00000001", root=str(tmp_path), system=False, _environ={})
    run.finish()
    monkeypatch.setenv("NO_COLOR", "1")
    app = NbTui(runs=[os.path.join(tmp_path, "p", "empty-00000001")], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        for key in "23451":
            await pilot.press(key)
            await settle(pilot)
        await pilot.press("q")
    assert app.return_code == 0


# -- 5. the header's status is the catalog's ---------------------------------------------


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def silent_run(root, status: str = "running", run_id: str = "kill-00000009") -> str:
    """A run whose run.json says ``status`` and whose files were last written at WALL0 + 100."""
    from test_papercuts import write

    run_dir = write(root, "p", run_id, "killed", meta={"status": status})
    for name in os.listdir(run_dir):
        os.utime(os.path.join(run_dir, name), (WALL0 + 100, WALL0 + 100))
    return run_dir


def run_header(app) -> str:
    return str(app.screen.query_one("#run-header", Static).render())


@aio
async def test_header_says_stale_as_the_runs_list_does(tmp_path):
    from nblog.reader._runs.catalog import STALE_AFTER_S

    silent_run(tmp_path)
    clock = Clock(WALL0 + 100 + STALE_AFTER_S + 60)  # killed with kill -9 four minutes ago
    app = NbTui(root=str(tmp_path), poll_s=0, clock=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert str(table.get_row_at(0)[4]) == "stale"
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        assert "  stale  " in run_header(app) and "running" not in run_header(app)


@aio
async def test_header_turns_stale_while_it_is_open(tmp_path):
    from nblog.reader._runs.catalog import STALE_AFTER_S

    run_dir = silent_run(tmp_path)
    clock = Clock(WALL0 + 110)
    app = NbTui(runs=[run_dir], poll_s=0.05, clock=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: "  running  " in run_header(app))
        clock.now = WALL0 + 100 + STALE_AFTER_S + 1  # nothing written since: the next poll says so
        await wait_for(pilot, lambda: "  stale  " in run_header(app))


@aio
async def test_a_status_word_the_tui_does_not_know_is_shown_as_is(tmp_path):
    run_dir = silent_run(tmp_path, status="preempted")
    app = NbTui(root=str(tmp_path), poll_s=0, clock=Clock(WALL0 + 110))
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        assert str(app.screen.query_one(DataTable).get_row_at(0)[4]) == "preempted"
        await pilot.press("enter")
        await settle(pilot)
        assert "  preempted  " in run_header(app)
    assert run_dir


# -- 3. a root with no runs, or no root at all ------------------------------------------


def test_a_root_that_does_not_exist_is_an_error_before_the_ui(tmp_path):
    missing = str(tmp_path / "nosuch")
    try:  # without the check, the UI starts and waits for a root that never comes
        result = subprocess.run([*NB, "tui", "--root", missing], capture_output=True, text=True, timeout=60,
                                stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail("nb tui --root MISSING started the UI instead of exiting")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: no runs: {missing} does not exist\n")
    assert "Traceback" not in result.stderr


@aio
async def test_an_empty_root_says_so_and_shows_a_run_made_later(tmp_path):
    from test_papercuts import write

    root = tmp_path / "runs"
    root.mkdir()
    app = NbTui(root=str(root), poll_s=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        note = app.screen.query_one("#runs-empty", Static)
        await wait_for(pilot, lambda: "no runs in" in str(note.render()))
        assert str(note.render()) == f"no runs in {root} yet (waiting for runs to appear)"
        write(str(root), "p", "late-00000001", "late")
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 1)
        assert "1 of 1 runs" in str(note.render())


# -- 2. a 10 MB text -------------------------------------------------------------------------


@aio
async def test_a_10_mb_text_shows_its_start_and_says_how_much_more(tmp_path):
    from textual.widgets import RichLog

    import nblog as nb
    from nbcli.tui.model import TEXT_SHOWN_CHARS

    big = "".join(f"{i:09d} " for i in range(1_000_000))  # 10,000,000 characters, one line
    run = nb.init("p", run_id="big-00000001", root=str(tmp_path), system=False, _environ={})
    run.add_text("notes", "small one", step=0)
    run.add_text("dump", big, step=1)
    run.finish()
    app = NbTui(runs=[os.path.join(tmp_path, "p", "big-00000001")], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        log = app.screen.query_one("#text-log", RichLog)
        shown = "\n".join(line.text for line in log.lines)
        assert "small one" in shown and "000000000 000000001" in shown
        assert f"… {len(big) - TEXT_SHOWN_CHARS:,} more characters not shown (10,000,000 in all)" in shown
        assert "nb tail --json RUN or RunReader.text() has all of it" in " ".join(shown.split())  # wrapped
        assert len(shown) < 2 * TEXT_SHOWN_CHARS
        await pilot.press("q")
    assert app.return_code == 0


def test_a_text_of_many_short_lines_is_cut_by_lines():
    from nbcli.tui.model import TEXT_SHOWN_LINES, shown_text

    text = "line\n" * (3 * TEXT_SHOWN_LINES)
    out = shown_text(text).split("\n")
    assert out[:TEXT_SHOWN_LINES] == ["line"] * TEXT_SHOWN_LINES
    assert out[TEXT_SHOWN_LINES].startswith("… ") and len(out) == TEXT_SHOWN_LINES + 1
    assert shown_text("short\ntext") == "short\ntext"
