"""Behaviour of the TUI driven with Textual's Pilot: filtering, overlay, ranks, axes,
smoothing, views, the command palette, live polling (new points, a new session, a run
still being created, a run folder deleted), literal text and quitting."""

from __future__ import annotations

import os
import shutil
import time

import numpy as np
import pytest
from nbtui_helpers import aio, settle, wait_for
from nbtui_synth import ODD_TAG, RUN_ID, WALL0, EventFile, header, many_tags
from textual.widgets import DataTable, Footer, Input, RichLog, Static, TabbedContent
from textual.widgets._footer import FooterKey

from nbcli.tui.app import NbTui
from nbcli.tui.screens.help import HelpScreen
from nbcli.tui.screens.run import PlotGrid, RunScreen
from nbcli.tui.screens.runs import RunsScreen
from nbcli.tui.widgets.plot import BraillePlot
from nbcli.tui.widgets.tagtree import TagTree
from nblog.format import _format as F

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


def header_text(app) -> str:
    return str(app.screen.query_one("#run-header", Static).render())


def plot_specs(app) -> list:
    return [p.spec for p in app.screen.query_one("#plots", PlotGrid).query(BraillePlot)]


@aio
async def test_runs_filter_open_back_and_quit(demo_root):
    app = NbTui(root=demo_root, poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert table.row_count == 2
        await pilot.press("b", "a", "s", "e")  # type to filter
        assert app.screen.query_one("#runs-filter", Input).value == "base"
        assert table.row_count == 1
        await pilot.press("escape")  # clears the filter; the cursor stays on the run
        assert table.row_count == 2 and app.focused is table
        await pilot.press("up", "enter")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        assert RUN_ID in header_text(app)
        await pilot.press("escape")
        assert isinstance(app.screen, RunsScreen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


@aio
async def test_overlay_two_runs(demo_root):
    app = NbTui(root=demo_root, poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("space", "down", "space", "enter")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        assert "+1 overlaid" in header_text(app)
        tree = app.screen.query_one(TagTree)
        tree.toggle("train/loss")
        await settle(pilot)
        (spec,) = plot_specs(app)
        labels = {ln.label for ln in spec.lines if not ln.faint}
        assert labels == {RUN_ID, "demo-1111beef"}  # run ids: names can be shared


@aio
async def test_run_keys(demo_run):
    app = NbTui(runs=[demo_run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        screen.query_one(TagTree).toggle("train/loss")
        await settle(pilot)
        (spec,) = plot_specs(app)
        assert spec.axis == "step" and "ema 0.6" in spec.note
        assert spec.vlines == [80.0]  # session 1 starts at step 80
        smooth = [ln for ln in spec.lines if not ln.faint][0]
        assert smooth.x.max() == 199
        # x axis: step → wall time → active time (the hour in the queue left out)
        await pilot.press("x")
        await settle(pilot)
        (spec,) = plot_specs(app)
        assert spec.axis == "wall" and spec.lines[0].x.max() > WALL0 + 3600
        await pilot.press("x")
        await settle(pilot)
        (spec,) = plot_specs(app)
        assert spec.axis == "active" and spec.lines[0].x.max() < 1000
        # smoothing up, down to raw
        await pilot.press("s")
        assert screen.smoothing == 0.8
        for _ in range(6):
            await pilot.press("S")
        await settle(pilot)
        assert screen.smoothing == 0.0
        (spec,) = plot_specs(app)
        assert not any(ln.faint for ln in spec.lines)
        await pilot.press("l")
        await settle(pilot)
        assert plot_specs(app)[0].logy
        # ranks: step with ] and [, type one with r
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert screen.rank == 1 and "rank 1 · ranks 0–3" in header_text(app)
        await pilot.press("left_square_bracket")
        assert screen.rank == 0
        await pilot.press("r")
        await pilot.press("3", "enter")  # the current rank is selected: typing replaces it
        await settle(pilot)
        assert screen.rank == 3
        # views
        for key, view in (("2", "timers"), ("3", "system"), ("4", "text"), ("1", "scalars")):
            await pilot.press(key)
            await settle(pilot)
            assert screen.query_one(TabbedContent).active == view == screen.view


@aio
async def test_views_show_data(demo_run):
    app = NbTui(runs=[demo_run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        table = app.screen.query_one("#timer-table", DataTable)
        assert table.row_count == 8
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        slow = {(r[0], r[1].split()[0]) for r in rows if "◀" in r[1]}
        # the stragglers by nb timers' rule: rank 2 in data (1.6x the median); fwd's
        # slowest rank 3 is 1.03x the median, no straggler, so not marked
        assert slow == {("data", "2")}
        band = app.screen.query_one("#band", BraillePlot).spec
        assert band.fills and any("slowest rank 2" in ln.label for ln in band.lines)
        await pilot.press("3")
        await settle(pilot)
        grid = str(app.screen.query_one("#gpus").render())
        assert "node-a" in grid and "node-b" in grid and "  3" in grid
        await pilot.press("m")
        await settle(pilot)
        titles = [p.spec.title for p in app.screen.query_one("#sys-plots", PlotGrid).query(BraillePlot)]
        assert titles[0].startswith("node-a") and "GPU power W" in titles
        await pilot.press("4")
        await settle(pilot)
        log = app.screen.query_one("#text-log", RichLog)
        text = "\n".join(strip.text for strip in log.lines)
        assert "[red]not markup[/red]" in text and "\\x07" in text


@aio
async def test_literal_tags_and_palette(demo_run):
    app = NbTui(runs=[demo_run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(TagTree)
        tree.set_tags(tree.tags, "odd")
        labels = [str(n.label) for n in tree._tree_lines and [line.node for line in tree._tree_lines]]
        assert any("[bold]x[" in lab for lab in labels)
        assert any("\\x1b" in lab for lab in labels) and not any("\x1b" in lab for lab in labels)
        tree.toggle(ODD_TAG)
        await settle(pilot)
        assert "\x1b" not in "".join(s.text for s in app.screen._compositor.render_strips())
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"log scale")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen.logy


@aio
async def test_tag_filter_5000_tags(tmp_path):
    run_dir = tmp_path / "p" / "big-00000001"
    run_dir.mkdir(parents=True)
    ef = EventFile(str(run_dir / "events.r0.s0.log"), header(0, 0, 0, "h", WALL0))
    tags = many_tags(5000)
    for tag in tags:
        ef.tag(F.KIND_SCALAR, tag)
    rec = np.zeros(5000, F.NUMPY_POINT_DTYPE)
    rec["tag"] = np.arange(5000)
    rec["value"] = 1.0
    ef._append(F.frame(F.FRAME_POINTS, rec.tobytes()))
    app = NbTui(runs=[str(run_dir)], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        tree = app.screen.query_one(TagTree)
        assert len(tree.tags) == 5000
        await pilot.press("slash")
        t0 = time.perf_counter()
        await pilot.press(*"block3/w7")
        per_key = (time.perf_counter() - t0) / 9
        shown = [line.node.data for line in tree._tree_lines if isinstance(line.node.data, str)]
        assert shown and all("block3/w7" in t for t in shown) and len(shown) == 50
        assert per_key < 0.5, f"{per_key:.3f}s per key"


def _append_loss(path: str, tid: int, steps, ms0: int = 0) -> None:
    rec = np.zeros(len(steps), F.NUMPY_POINT_DTYPE)
    rec["step"] = steps
    rec["value"] = 1.0 / (1 + np.asarray(steps))
    rec["tag"] = tid
    rec["ms"] = ms0 + np.arange(len(steps)) * 100
    with open(path, "ab") as f:
        f.write(F.frame(F.FRAME_POINTS, rec.tobytes()))


@aio
async def test_live_new_points_new_session_and_deleted_folder(tmp_path):
    run_dir = tmp_path / "p" / "live-00000001"
    run_dir.mkdir(parents=True)
    ef = EventFile(str(run_dir / "events.r0.s0.log"), header(0, 0, 0, "h", WALL0))
    tid = ef.tag(F.KIND_SCALAR, "loss")
    _append_loss(ef.path, tid, range(0, 50))
    app = NbTui(runs=[str(run_dir)], poll_s=0.1)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: "step 49" in header_text(app))
        _append_loss(ef.path, tid, range(50, 60), 5000)
        await wait_for(pilot, lambda: "step 59" in header_text(app))
        await wait_for(pilot, lambda: plot_specs(app) and plot_specs(app)[0].lines[-1].x.max() == 59)
        # a new session resumes from step 40: steps >= 40 of session 0 are hidden
        ef2 = EventFile(str(run_dir / "events.r0.s1.log"), header(0, 0, 1, "h", WALL0 + 600))
        tid2 = ef2.tag(F.KIND_SCALAR, "loss")
        _append_loss(ef2.path, tid2, range(40, 45))
        await wait_for(pilot, lambda: "sessions 2" in header_text(app))
        await wait_for(pilot, lambda: plot_specs(app)[0].vlines == [40.0])
        raw = plot_specs(app)[0].lines[0]
        assert raw.x.max() == 44 and len(raw.x) == 45
        shutil.rmtree(run_dir)
        await wait_for(pilot, lambda: "run folder deleted" in header_text(app))
        assert plot_specs(app)[0].lines  # what was read stays on screen
        await pilot.press("x")  # and the screen still works
        await settle(pilot)
        assert plot_specs(app)[0].axis == "wall"


@aio
async def test_run_still_being_created(tmp_path):
    run_dir = tmp_path / "p" / "new-00000001"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text('{"project": "p", "id": "new-00000001", "status": "running"}')
    app = NbTui(runs=[str(run_dir)], poll_s=0.1)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "waiting for the run" in header_text(app))
        path = os.path.join(run_dir, "events.r0.s0.log")
        with open(path, "wb") as f:  # a header only, the rest not written yet
            f.write(F.file_header())
        await pilot.pause(0.3)
        ef = EventFile(path, header(0, 0, 0, "h", WALL0))
        _append_loss(ef.path, ef.tag(F.KIND_SCALAR, "loss"), range(10))
        await wait_for(pilot, lambda: app.screen.query_one(TagTree).tags == ["loss"])
        await wait_for(pilot, lambda: plot_specs(app) and plot_specs(app)[0].lines)


@pytest.mark.parametrize("cols", [80, 100, 120])
@aio
async def test_run_footer_shows_help_and_quit(demo_run, cols):
    app = NbTui(runs=[demo_run], poll_s=0)
    async with app.run_test(size=(cols, 24)) as pilot:
        await settle(pilot)
        for view in ("1", "2", "5"):
            await pilot.press(view)
            await settle(pilot)
            footer = app.screen.query_one(Footer)
            keys = [k for k in footer.query(FooterKey) if "-command-palette" not in k.classes]
            palette = footer.query_one(".-command-palette", FooterKey)
            shown = {k.key: k.description for k in keys}
            assert shown["question_mark"] == "help" and shown["q"] == "quit"
            assert len(shown) == len(keys)  # no key twice
            # every key fits left of the palette key (nothing cut off or covered)
            assert all(k.region.right <= palette.region.x for k in keys), [(k.key, k.region) for k in keys]
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "q")
        await pilot.pause()
    assert app.return_code == 0


@aio
async def test_timers_of_a_run_without_timers_say_so(demo_root):
    app = NbTui(runs=[os.path.join(demo_root, "demo", "demo-1111beef")], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        msg = app.screen.query_one("#timer-msg", Static)
        assert msg.display and "rank 0 logged no timers (yet)" in str(msg.render())
        assert not app.screen.query_one("#timer-table", DataTable).display
