"""Screenshots of the media view at 100×30 and 80×24 against the synthetic media run,
images drawn in half blocks (``image_mode="halfblock"``: the same in every terminal).

Update after an intended change with ``pytest tests/tui/test_media_snapshots.py
--snapshot-update`` and look at the SVGs before committing them.
"""

from __future__ import annotations

import pytest
from nbtui_helpers import settle
from nbtui_media import write_media_run

from nbcli.tui.app import NbTui
from nbcli.tui.widgets.medialist import MediaList

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

SIZES = [pytest.param((100, 30), id="100x30"), pytest.param((80, 24), id="80x24")]


@pytest.fixture
def media_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_media_run("runs")


def media_app(run_dir: str) -> NbTui:
    app = NbTui(runs=[run_dir], poll_s=0, image_mode="halfblock")
    app.animation_level = "none"  # no tab underline caught mid-slide
    return app


def showing(tag: str, step: int):
    async def go(pilot):
        await settle(pilot)
        await pilot.press("5")
        await settle(pilot)
        assert pilot.app.screen.query_one(MediaList).select(tag, step)
        await settle(pilot)

    return go


@pytest.mark.parametrize("size", SIZES)
def test_media_image(snap_compare, media_run, size):
    assert snap_compare(media_app(media_run), terminal_size=size, run_before=showing("img/pred", 10))


@pytest.mark.parametrize("size", SIZES)
def test_media_histogram(snap_compare, media_run, size):
    assert snap_compare(media_app(media_run), terminal_size=size, run_before=showing("hist/weights", 15))
