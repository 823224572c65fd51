"""The timers view's rank heat map (issue 18): ranks × steps coloured against the median
rank, the slowest ranks and machines named, rows grouped by machine with ``g``,
scrolling through every rank. A synthetic run of 48 ranks on 6 machines: machine
node-3's ranks are 1.4× slower throughout, rank 41 (node-5) turns 2× slower half way."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from nbtui_helpers import aio, settle
from nbtui_synth import WALL0, EventFile, header
from textual.widgets import DataTable

from nbcli.tui.app import NbTui
from nbcli.tui.widgets.heatmap import HeatRowsView, RankHeatMap, heat_data
from nblog.format import _format as F

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

RID = "heat-0000beef"
WORLD, PER_HOST, STEPS = 48, 8, 60


def write_heat_run(root: str, world: int = WORLD) -> str:
    run_dir = os.path.join(root, "heat", RID)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"format_version": F.FORMAT_VERSION, "project": "heat", "id": RID, "name": "heat",
                   "created": WALL0, "world_size": world, "status": "finished",
                   "sessions": [{"session": 0, "start": WALL0, "end": WALL0 + 60.0}]}, f)
    st = np.arange(STEPS, dtype=np.int64)
    for rank in range(world):
        host = f"node-{rank // PER_HOST}"
        head = header(rank, rank % PER_HOST, 0, host, WALL0)
        head.update(project="heat", run_id=RID, world_size=world)
        ef = EventFile(os.path.join(run_dir, f"events.r{rank}.s0.log"), head)
        base = 0.100 + 0.001 * np.sin(st + rank)  # fixed values: the picture never changes
        if rank // PER_HOST == 3:
            base = base * 1.4
        if rank == 41:
            base = np.where(st >= STEPS // 2, base * 2.0, base)
        ef.points(F.KIND_TIMER, "step", st, base, st * 100)
        ef.end(STEPS * 100)
    return run_dir


@pytest.fixture
def heat_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return write_heat_run("runs")


def test_heat_data_names_the_slowest_ranks_and_machines_and_groups_by_machine():
    st = np.arange(10)
    series = {r: (st, np.full(10, 0.1 * (1.5 if r == 5 else 1.0))) for r in range(12)}
    hosts = {r: ("b" if r < 6 else "a") for r in range(12)}
    d = heat_data("t", series, hosts, columns=5)
    assert d.ranks is not None and d.machines is not None
    assert d.ranks.labels[0].split() == ["6", "a"]  # machines in name order, ranks ascending in each
    assert d.ranks.cells.shape == (12, 5) and d.machines.cells.shape == (2, 5)
    assert d.slowest[0][:2] == (5, "b") and d.slowest[0][3] == pytest.approx(1.5)
    assert d.slow_machines[0][:2] == ("b", 6)
    assert d.median_s == pytest.approx(0.1)
    assert heat_data(None, {}, {}).message and heat_data("t", {}, {}).message


@aio
async def test_heat_map_shows_every_rank_scrolls_and_groups_by_machine(heat_run):
    app = NbTui(runs=[heat_run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        heat = app.screen.query_one(RankHeatMap)
        assert heat.display and not app.screen.query_one("#band").display
        assert heat.has_data and heat.data is not None
        assert [r for r, *_x in heat.data.slowest[:1]] == [41]
        head = str(heat.query_one(".heat-head").render())
        assert "41 (node-5)" in head and "slowest machines: node-3" in head
        rows = heat.query_one(HeatRowsView)
        assert rows.virtual_size.height == WORLD
        rows.focus()
        await pilot.press("end")
        await settle(pilot)
        assert rows.scroll_offset.y > 0  # the last ranks are reachable
        await pilot.press("g")
        await settle(pilot)
        assert heat.by_machine and rows.virtual_size.height == WORLD // PER_HOST
        assert "node-3 (8 ranks)" in rows.rows.labels


def test_heat_map_snapshot(snap_compare, heat_run):
    async def go(pilot):
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)

    app = NbTui(runs=[heat_run], poll_s=0)
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=(100, 30), run_before=go)


@aio
async def test_with_many_ranks_the_table_keeps_each_timers_slowest_ranks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from nbcli.tui.model import TABLE_MAX_ROWS, TABLE_RANKS

    world = TABLE_MAX_ROWS + 8  # one timer: one row per rank, more than the table holds
    app = NbTui(runs=[write_heat_run("runs", world)], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        table = app.screen.query_one("#timer-table", DataTable)
        ranks = [int(str(table.get_row_at(i)[1]).split()[0]) for i in range(table.row_count)]
        assert len(ranks) == TABLE_RANKS and ranks == sorted(ranks)
        assert {41, *range(24, 32)} <= set(ranks)  # the slowest: rank 41 and node-3's ranks
        heat = app.screen.query_one(RankHeatMap)
        assert heat.data is not None and heat.data.ranks is not None and len(heat.data.ranks.labels) == world
