"""What a new user's first sessions hit: ``NO_COLOR`` (Textual's monochrome filter reads
every segment's style), a 10 MB text, a root with no runs or none at all, SIGTERM, and
the status the run header shows (the catalog's, as the runs list and ``nb ls``)."""

from __future__ import annotations

import os

from nbtui_helpers import aio, settle
from nbtui_synth import RUN_ID
from textual.widgets import DataTable

from nbcli.tui.app import NbTui
from nbcli.tui.screens.run import RunScreen
from nbcli.tui.widgets.plot import BraillePlot

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
