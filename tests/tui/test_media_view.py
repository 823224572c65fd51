"""The media view, driven with Textual's Pilot against the synthetic media run:
selecting an image draws that image's pixels; a histogram tag shows the bars of the
highlighted step and the heat strip of all steps; stepping through steps; a broken
blob, a run without media and a run whose media grows."""

from __future__ import annotations

import os

import numpy as np
import pytest
from nbtui_helpers import aio, settle
from nbtui_media import (
    CAPTION,
    HIST_STEPS,
    IMAGE_STEPS,
    LONG_TAG,
    MANY_STEPS,
    Pack,
    add_image,
    gradient,
    hist_values,
    write_media_run,
    write_odd_media_run,
)
from nbtui_synth import WALL0, EventFile
from rich.color import Color
from textual.widgets import Static

from nbcli.tui.app import NbTui
from nbcli.tui.widgets.histogram import HistogramView
from nbcli.tui.widgets.medialist import MediaList
from nbcli.tui.widgets.mediapane import MediaPane, head_text
from nbcli.tui.widgets.picture import Picture
from nblog.format import _format as F
from nblog.media._media_encode import histogram_stats

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


@pytest.fixture
def media_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_media_run("runs")


def app_for(run_dir: str) -> NbTui:
    return NbTui(runs=[run_dir], poll_s=0, image_mode="halfblock")


async def open_media(pilot) -> MediaPane:
    await settle(pilot)
    await pilot.press("5")
    await settle(pilot)
    return pilot.app.screen.query_one(MediaPane)


async def select(pilot, tag: str, step: int | None = None) -> MediaPane:
    pane = pilot.app.screen.query_one(MediaPane)
    assert pane.query_one(MediaList).select(tag, step)
    await settle(pilot)
    return pane


def rgb(color: Color) -> tuple[int, int, int]:
    t = color.get_truecolor()
    return t.red, t.green, t.blue


def text_of(widget: Static) -> str:
    return str(widget.render())


@aio
async def test_selecting_an_image_draws_its_pixels(media_run):
    app = app_for(media_run)
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await open_media(pilot)
        for step in IMAGE_STEPS:
            pane = await select(pilot, "img/pred", step)
            data = pane.data
            assert (data.record.tag, data.record.step) == ("img/pred", step)
            assert data.message is None
            assert np.array_equal(np.asarray(data.image.convert("RGB")), gradient(step))
            head = text_of(pane.query_one("#media-head", Static))
            # the caption literally, not as markup (cut at the width of the pane)
            assert f"step {step}" in head and CAPTION[:18] in head
            assert CAPTION in head_text(data).plain
            # what is on screen: half blocks whose colours follow the gradient (red grows to the right,
            # green downwards, blue is the step's)
            picture = pane.query_one(Picture)
            widget = picture.children[0]
            assert type(widget).__name__ == "HalfcellImage"
            assert widget.size.width > 30 and widget.size.height > 10
            first = widget.render_line(0)
            last = widget.render_line(widget.size.height - 1)
            cells = [s for s in first if s.text == "▀"]
            assert len(cells) == widget.size.width
            left, right = rgb(cells[0].style.color), rgb(cells[-1].style.color)
            bottom = rgb([s for s in last if s.text == "▀"][0].style.bgcolor)
            assert left[0] < 30 and right[0] > 225  # red: left to right
            assert left[1] < 30 and bottom[1] > 225  # green: top to bottom
            assert abs(left[2] - (step * 12) % 256) <= 8


@aio
async def test_histogram_bars_heat_strip_and_stepping(media_run):
    app = app_for(media_run)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_media(pilot)
        pane = await select(pilot, "hist/weights")  # the tag: its newest step
        hist = pane.query_one(HistogramView)
        assert hist.display and not pane.query_one(Picture).display
        data = hist.data
        assert list(data.steps) == list(HIST_STEPS)
        assert data.selected == len(HIST_STEPS) - 1
        for i, step in enumerate(HIST_STEPS):  # the counts are the logged ones
            edges, counts, _stats = histogram_stats(hist_values(step), 16)
            assert np.array_equal(data.counts[i], counts) and np.allclose(data.edges[i], edges)
        screen = str(hist.render())
        assert "step 35" in screen and "NaN 3 (not binned)" in screen
        assert f"{len(HIST_STEPS)} steps" in screen and "▶ 35" in screen
        assert f"{int(histogram_stats(hist_values(35), 16)[1].max())}┤" in screen  # the count axis
        # step through the steps with the cursor, from the newest: up goes to older steps
        await select(pilot, "hist/weights", HIST_STEPS[-1])
        for step in reversed(HIST_STEPS[:-1]):
            await pilot.press("up")
            await settle(pilot)
            assert (pane.data.record.tag, pane.data.record.step) == ("hist/weights", step)
            assert hist.data.steps[hist.data.selected] == step
            assert f"step {step} ·" in str(hist.render())
        await pilot.press("down")
        await settle(pilot)
        assert hist.data.steps[hist.data.selected] == HIST_STEPS[1]


@aio
async def test_broken_blob_audio_and_back_to_an_image(media_run):
    app = app_for(media_run)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_media(pilot)
        pane = await select(pilot, "broken/img", 30)
        msg = pane.query_one("#media-msg", Static)
        assert pane.data.error and msg.display
        assert "could not be read" in text_of(msg)
        assert not pane.query_one(Picture).display
        pane = await select(pilot, "audio/tone", 10)
        assert "0.50 s, 8000 Hz" in text_of(msg) and not pane.data.error
        pane = await select(pilot, "img/checker", 20)
        assert not msg.display and pane.data.image is not None and pane.query_one(Picture).display


@aio
async def test_run_without_media(demo_run):
    app = NbTui(runs=[demo_run], poll_s=0, image_mode="halfblock")
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await open_media(pilot)
        assert pane.data.records == []
        assert "rank 0 logged no media" in text_of(pane.query_one("#media-msg", Static))
        assert not pane.query_one(Picture).display and not pane.query_one(HistogramView).display


@aio
async def test_media_that_grows_is_listed(media_run):
    app = app_for(media_run)
    async with app.run_test(size=(100, 30)) as pilot:
        pane = await open_media(pilot)
        pane = await select(pilot, "img/pred", 20)
        before = len(pane.data.records)
        # a second session appends an image at a later step (as a live run would)
        ef = EventFile(os.path.join(media_run, "events.r0.s1.log"), {
            "format_version": F.FORMAT_VERSION, "project": "vis", "run_id": "vis-0000cafe", "rank": 0,
            "local_rank": 0, "world_size": 1, "session": 1, "host": "node-a", "pid": 1001,
            "wall_start": WALL0 + 100})
        pack = Pack(os.path.join(media_run, "media.r0.pack"), new=False)
        add_image(ef, pack, "img/pred", 50, gradient(50), CAPTION)
        await pilot.press("f5")
        await settle(pilot)
        assert len(pane.data.records) == before + 1
        assert pane.data.record.step == 20  # the cursor stayed where it was
        pane = await select(pilot, "img/pred", 50)
        assert np.array_equal(np.asarray(pane.data.image), gradient(50))
        # appended while the plots are shown (their read consumes the change): listed on coming back
        await pilot.press("1")
        await settle(pilot)
        add_image(ef, pack, "img/pred", 60, gradient(60), CAPTION)
        await pilot.press("f5")
        await settle(pilot)
        await pilot.press("5")
        await settle(pilot)
        assert [r.step for r in pane.data.records if r.tag == "img/pred"] == [*IMAGE_STEPS, 50, 60]



@pytest.fixture
def odd_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_odd_media_run("runs")


def lines_of(widget) -> list[str]:
    """The widget's lines as drawn (padding included)."""
    return [widget.render_line(y).text for y in range(widget.size.height)]


@pytest.mark.parametrize("size", [(100, 30), (80, 24)])
@aio
async def test_histogram_axis_labels_stay_on_their_line(odd_run, size):
    app = app_for(odd_run)
    async with app.run_test(size=size) as pilot:
        await open_media(pilot)
        for tag, left, right in (("hist/one", "-0.5", "2.002"), ("hist/fine", "-2.228", "2.228")):
            pane = await select(pilot, tag, 0)
            hist = pane.query_one(HistogramView)
            lines = lines_of(hist)
            assert all(len(line) <= hist.size.width for line in lines)
            axes = [i for i, line in enumerate(lines) if "└" in line]
            assert len(axes) == 1
            labels = lines[axes[0] + 1].split()
            # the three labels on the line under the axis, none wrapped to the next line
            assert labels[0] == left and labels[-1] == right and len(labels) == 3
            assert not lines[axes[0] + 2].strip()
            # the heat strip's value axis too
            strip_axis = next(line for line in reversed(lines) if line.strip())
            assert strip_axis.split()[0] == left and strip_axis.split()[-1] == right
        # every value NaN: said, no count axis from 0 to 0
        pane = await select(pilot, "hist/nan", 0)
        text = "\n".join(lines_of(pane.query_one(HistogramView)))
        assert "NaN 10 (not binned)" in text and "no finite values" in text
        assert "┤" not in text and "0.5" not in text


@aio
async def test_heat_strip_rows_hold_what_the_caption_says(odd_run):
    app = app_for(odd_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_media(pilot)
        pane = await select(pilot, "hist/many", MANY_STEPS[-1])
        lines = lines_of(pane.query_one(HistogramView))
        caption = next(line for line in lines if "20 steps" in line)
        per = int(caption.split(", ")[1].split(" per row")[0])
        assert per > 1
        rows = [line for line in lines if "│" in line and "┤" not in line and "└" not in line]
        steps = [int(line.split("│")[0].strip(" ▶")) for line in rows if line.split("│")[0].strip(" ▶")]
        assert steps == list(MANY_STEPS[::per])  # every row starts per steps after the previous


@aio
async def test_a_long_tag_leaves_step_kind_and_caption_in_the_head(odd_run):
    app = app_for(odd_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_media(pilot)
        pane = await select(pilot, LONG_TAG, 7)
        head = lines_of(pane.query_one("#media-head"))[0]
        assert "…" in head and "step 7  image" in head and "the caption" in head
        assert head.strip().startswith(LONG_TAG[:5]) and head.split("  step")[0].strip().endswith("image")


@aio
async def test_the_highlighted_row_stays_in_view_on_resize(odd_run):
    app = app_for(odd_run)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_media(pilot)
        media_list = pilot.app.screen.query_one(MediaList)
        await select(pilot, "hist/one", 0)  # the last row
        line = media_list.cursor_line
        for size in ((80, 24), (80, 14), (60, 10)):
            await pilot.resize_terminal(*size)
            await settle(pilot)
            top = media_list.scroll_offset.y
            assert top <= line < top + media_list.scrollable_content_region.height, size
            assert media_list.cursor_line == line


@aio
async def test_the_media_list_grows_with_the_terminal(media_run):
    widths = {}
    for cols in (80, 100, 200):
        app = app_for(media_run)
        async with app.run_test(size=(cols, 30)) as pilot:
            await open_media(pilot)
            widths[cols] = pilot.app.screen.query_one("#media-side").outer_size.width
    assert widths[80] == 28 and widths[100] == 32 and widths[200] == 64
