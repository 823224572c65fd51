"""The Plots view's "all ranks" band (key a): median, min–max band, outlying rank."""

from __future__ import annotations

import os

import numpy as np
import pytest
from nbtui_bands import DIVERGES, RANKS_ID, write_ranks, write_sweep
from nbtui_helpers import aio, settle

from nbcli.tui.app import NbTui
from nbcli.tui.screens.run import PlotGrid
from nbcli.tui.widgets.plot import BraillePlot

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


@pytest.fixture
def ranks_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_ranks("runs")
    return "runs"


def _app(root: str) -> NbTui:
    app = NbTui(root=root, runs=[os.path.join(root, "bands", RANKS_ID)], poll_s=0)
    app.animation_level = "none"
    return app


def _specs(app: NbTui) -> list:
    return [p.spec for p in app.screen.query_one("#plots", PlotGrid).query(BraillePlot)]


@aio
async def test_all_ranks_band_names_the_diverging_rank(ranks_root):
    app = _app(ranks_root)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        (one,) = _specs(app)
        assert not one.fills and "outlier" not in one.title  # rank 0's line
        await pilot.press("a")
        await settle(pilot)
        (spec,) = _specs(app)
        assert spec.title == f"train/loss · median of 8 ranks · band min–max · outlier rank {DIVERGES}"
        assert len(spec.fills) == 1
        fill = spec.fills[0]
        last = np.argmax(fill.x)
        # the band's top at the last step is the diverging rank's value; the bottom rank 0's
        assert fill.hi[last] > 2.0 + fill.lo[last]
        labels = [ln.label for ln in spec.lines]
        assert labels == ["median", f"rank {DIVERGES}"]
        median = spec.lines[0]
        assert median.y[np.argmax(median.x)] < fill.lo[last] + 0.2  # the median stays with the 7 others
        assert "all ranks (0–7)" in str(app.screen.query_one("#run-header").render())
        await pilot.press("a")
        await settle(pilot)
        (back,) = _specs(app)
        assert not back.fills and "outlier" not in back.title


@aio
async def test_all_ranks_with_one_rank_says_how_to_get_a_band(demo_root):
    from nbtui_synth import RUN_ID

    app = NbTui(root=demo_root, runs=[f"{demo_root}/demo/{RUN_ID}"], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        (spec,) = _specs(app)
        assert "1 rank logged it" in spec.title and not spec.fills
        assert spec.lines


def test_all_ranks_snapshot(snap_compare, ranks_root):
    async def band(pilot):
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)

    assert snap_compare(_app(ranks_root), terminal_size=(100, 30), run_before=band)


@pytest.fixture
def sweep_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return "runs", write_sweep("runs")


def _check_groups(spec) -> None:
    assert spec.title == "train/loss by optim.lr"
    assert spec.note == "mean, min–max of runs"
    means = [ln for ln in spec.lines if ln.label]
    assert [ln.label for ln in means] == ["0.001 ×2", "0.003 ×2", "0.01 ×2"]
    faint = [ln for ln in spec.lines if ln.faint]
    assert len(faint) == 6  # min and max of each group
    # each mean lies between its group's min and max, and the two seeds are 0.15 apart
    for k, mean in enumerate(means):
        lo, hi = faint[2 * k], faint[2 * k + 1]
        assert np.all(lo.y <= mean.y + 1e-12) and np.all(mean.y <= hi.y + 1e-12)
        assert np.allclose(hi.y - lo.y, 0.15)


@aio
async def test_group_option_draws_each_groups_mean_and_band(sweep_root):
    root, dirs = sweep_root
    app = NbTui(root=root, runs=dirs, poll_s=0, group="optim.lr")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        (spec,) = _specs(app)
        _check_groups(spec)
        assert "+5 grouped by optim.lr" in str(app.screen.query_one("#run-header").render())


@aio
async def test_ctrl_g_in_the_runs_screen_groups_the_selected_runs(sweep_root):
    root, _dirs = sweep_root
    app = NbTui(root=root, poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+g")
        await settle(pilot)
        await pilot.press(*"optim.lr", "enter")
        await settle(pilot)
        assert "grouped by optim.lr" in str(app.screen.query_one("#runs-header").render())
        for _ in range(6):
            await pilot.press("space", "down")
        await pilot.press("enter")
        await settle(pilot)
        (spec,) = _specs(app)
        _check_groups(spec)


def test_groups_snapshot(snap_compare, sweep_root):
    root, dirs = sweep_root
    app = NbTui(root=root, runs=dirs, poll_s=0, group="optim.lr")
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=(100, 30), run_before=settle)
