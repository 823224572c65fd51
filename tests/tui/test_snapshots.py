"""Screenshots of every screen at 100×30 and 80×24 against the synthetic run.

Update after an intended change with ``pytest tests/tui --snapshot-update`` and look
at the SVGs (``tests/tui/__snapshots__``) before committing them.
"""

from __future__ import annotations

import pytest
from nbtui_helpers import settle
from nbtui_synth import RUN_ID

from nbcli.tui.app import NbTui
from nbcli.tui.widgets.tagtree import TagTree

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

SIZES = [pytest.param((100, 30), id="100x30"), pytest.param((80, 24), id="80x24")]


def still(app: NbTui) -> NbTui:
    app.animation_level = "none"  # no tab underline caught mid-slide
    return app


def run_app(demo_root: str) -> NbTui:
    return still(NbTui(root=demo_root, runs=[f"{demo_root}/demo/{RUN_ID}"], poll_s=0))


@pytest.mark.parametrize("size", SIZES)
def test_runs_screen(snap_compare, demo_root, size):
    assert snap_compare(still(NbTui(root=demo_root, poll_s=0)), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES)
def test_run_screen_grid(snap_compare, demo_root, size):
    async def select(pilot):
        await settle(pilot)
        tree = pilot.app.screen.query_one(TagTree)
        for tag in ("train/loss", "grad/norm", "lr", "train/acc"):
            tree.toggle(tag)
        await settle(pilot)

    assert snap_compare(run_app(demo_root), terminal_size=size, run_before=select)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("view", ["2", "3", "4"], ids=["timers", "system", "text"])
def test_run_screen_views(snap_compare, demo_root, size, view):
    async def go(pilot):
        await settle(pilot)
        await pilot.press(view)
        await settle(pilot)

    assert snap_compare(run_app(demo_root), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare, demo_root, size):
    async def go(pilot):
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(run_app(demo_root), terminal_size=size, run_before=go)
