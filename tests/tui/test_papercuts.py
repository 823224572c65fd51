"""Papercuts a new user met in the TUI (issue 12): overlaid runs of one name told apart
(by id, and without colour), a rank that logs only timers, a machine without GPUs, a
tag whose every point was rejected, and how old a running run's last step is."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from nbtui_helpers import aio, settle, wait_for
from nbtui_synth import WALL0, EventFile, header
from textual.widgets import DataTable, Static

from nbcli.tui.app import NbTui
from nbcli.tui.screens.run import PlotGrid
from nbcli.tui.widgets.plot import BraillePlot, Line, PlotSpec, render_spec
from nbcli.tui.widgets.tagtree import TagTree
from nblog.format import _format as F

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


def write(root, project: str, run_id: str, name: str, *, ranks=None, meta=None) -> str:
    """A small finished run: ``ranks`` maps rank → {"scalar"/"timer"/"system": {tag: values}}."""
    run_dir = os.path.join(root, project, run_id)
    os.makedirs(run_dir, exist_ok=True)
    data = {"project": project, "id": run_id, "name": name, "created": WALL0, "status": "finished",
            "sessions": [{"session": 0, "start": WALL0, "last_step": 49}]}
    data.update(meta or {})
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump(data, f)
    kinds = {"scalar": F.KIND_SCALAR, "timer": F.KIND_TIMER, "system": F.KIND_SYSTEM}
    for rank, logged in (ranks or {0: {"scalar": {"loss": np.linspace(1, 0, 50)}}}).items():
        ef = EventFile(os.path.join(run_dir, f"events.r{rank}.s0.log"), header(rank, 0 if rank % 2 == 0 else 1, 0,
                                                                                 f"host{rank // 2}", WALL0))
        for kind, tags in logged.items():
            for tag, values in tags.items():
                st = np.arange(len(values))
                ef.points(kinds[kind], tag, st, values, st * 1000)
        ef.end(49_000)
    return run_dir


def plot_specs(app, grid: str = "#plots") -> list[PlotSpec]:
    return [p.spec for p in app.screen.query_one(grid, PlotGrid).query(BraillePlot)]


def plain_rows(spec: PlotSpec, width: int = 80, height: int = 16) -> list[str]:
    """The plot as a monochrome terminal shows it: characters only, no colour."""
    return ["".join(seg.text for seg in row) for row in render_spec(spec, width, height)]


# -- 1. overlay legend ---------------------------------------------------------------------


@aio
async def test_overlay_of_two_runs_of_one_name_names_them_by_id(tmp_path):
    a = write(tmp_path, "p", "toy-0000000a", "toy")
    b = write(tmp_path, "p", "toy-0000000b", "toy",
              ranks={0: {"scalar": {"loss": np.linspace(1, 0, 50) ** 2}}})
    app = NbTui(runs=[a, b], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        (spec,) = plot_specs(app)
        labelled = [ln for ln in spec.lines if ln.label]
        assert [ln.label for ln in labelled] == ["toy-0000000a", "toy-0000000b"]
        head = plain_rows(spec, 100)[0]
        assert "toy-0000000a" in head and "toy-0000000b" in head
        # each run's legend entry shows its own line pattern, not only a colour
        assert labelled[0].dash != labelled[1].dash
        glyph_a = head[: head.index("toy-0000000a")].split()[-1]
        glyph_b = head[: head.index("toy-0000000b")].split()[-1]
        assert glyph_a != glyph_b


def test_two_lines_differ_without_colour():
    x = np.arange(100, dtype=np.float64)
    line = dict(x=x, y=np.sin(x / 10))
    one = PlotSpec(lines=[Line(**line, color="#ff0000", label="a", dash=0)])
    other = PlotSpec(lines=[Line(**line, color="#00ff00", label="a", dash=1)])
    # same data, different colour: a monochrome terminal must still see two kinds of line
    assert plain_rows(one)[1:] != plain_rows(other)[1:]
    assert plain_rows(one)[0] != plain_rows(other)[0]  # and two legend pictures


# -- 2. a rank that logs only timers -------------------------------------------------------


@aio
async def test_rank_with_timers_only_says_what_it_logs(tmp_path):
    run = write(tmp_path, "p", "ddp-00000001", "ddp", ranks={
        0: {"scalar": {"loss": np.linspace(1, 0, 50)}, "timer": {"step": np.full(50, 0.1)}},
        3: {"timer": {"step": np.full(50, 0.2), "data": np.full(50, 0.01)}},
    })
    app = NbTui(runs=[run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert plot_specs(app)[0].lines
        await pilot.press("right_square_bracket")  # next rank: 3
        await settle(pilot)
        assert app.screen.rank == 3
        (spec,) = plot_specs(app)
        # its timers are plotted here, and the plot says what the rank logs and where to look
        assert not spec.message
        assert spec.title.startswith("rank 3 logs timers only (2: timers view)")
        assert sorted(ln.label for ln in spec.lines if ln.label) == ["data", "step"]
        assert app.screen.query_one(TagTree).tags == []
        await pilot.press("left_square_bracket")  # back on rank 0: its scalar again
        await settle(pilot)
        (spec,) = plot_specs(app)
        assert spec.title == "loss" and spec.lines
        await pilot.press("2")
        await settle(pilot)
        assert app.screen.query_one("#timer-table", DataTable).row_count == 3


@aio
async def test_rank_with_text_only_names_the_text_view(tmp_path):
    run = write(tmp_path, "p", "txt-00000001", "txt")
    ef = EventFile(os.path.join(run, "events.r1.s0.log"), header(1, 1, 0, "host0", WALL0))
    ef.text("notes", 0, "hello", 0)
    app = NbTui(runs=[run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("right_square_bracket")
        await settle(pilot)
        (spec,) = plot_specs(app)
        assert spec.message == "rank 1 logs text only: press 4 for text"


# -- 3. a machine without GPUs --------------------------------------------------------------


@aio
async def test_system_view_of_a_machine_without_gpus_says_so(tmp_path):
    run = write(tmp_path, "p", "cpu-00000001", "cpu", ranks={0: {
        "scalar": {"loss": np.linspace(1, 0, 50)},
        "system": {"system/cpu_percent": np.full(50, 40.0), "system/memory_percent": np.full(50, 20.0)},
    }})
    app = NbTui(runs=[run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        grid = str(app.screen.query_one("#gpus", Static).render())
        assert "no GPUs recorded" in grid and "host0" in grid
        assert "GPU utilization %" not in grid
        await pilot.press("m")  # the one machine: no empty GPU plots
        await settle(pilot)
        titles = [s.title for s in plot_specs(app, "#sys-plots")]
        assert titles == ["host0  cpu / memory %"]


# -- 4. a tag whose every point was rejected --------------------------------------------------


@aio
async def test_tag_without_points_is_not_in_the_tree(tmp_path):
    import nblog as nb

    run = nb.init("p", run_id="bad-00000001", root=str(tmp_path), system=False, _environ={})
    for step in range(5):  # "bad" is rejected every time (a warning in the log)
        run.add_scalar("good", float(step), step=step)
        run.add_scalar("bad", "not a number", step=step)
    run.finish()
    app = NbTui(runs=[os.path.join(tmp_path, "p", "bad-00000001")], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert app.screen.query_one(TagTree).tags == ["good"]


def test_gpu_grid_row_of_a_machine_without_gpus():
    from nbcli.tui.widgets.gpugrid import grid_text

    lines = str(grid_text([("gpu-node", [90.0, 85.0]), ("cpu-node", [])])).splitlines()
    assert "GPU utilization %" in lines[0]
    assert lines[2].startswith("cpu-node") and "no GPUs recorded" in lines[2]


# -- 5. how old a running run's last step is ------------------------------------------------


def running_run(root, last_step: int = 70, updated: float = WALL0 + 100.0) -> str:
    """A run in progress: rank 0 recorded ``last_step`` in run.json at ``updated``."""
    return write(root, "live", "train-0000beef", "train", meta={
        "status": "running", "sessions": [{"session": 0, "start": WALL0, "last_step": last_step,
                                           "updated": updated}]})


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def last_step_cell(app) -> str:
    table = app.screen.query_one(DataTable)
    return str(table.get_cell_at((0, list(table.columns).index("last step"))))


@aio
async def test_runs_list_says_how_old_a_running_runs_last_step_is(tmp_path):
    running_run(tmp_path)
    write(tmp_path, "live", "done-00000001", "done")  # finished: no age
    clock = Clock(WALL0 + 104.0)
    app = NbTui(root=str(tmp_path), poll_s=0.05, clock=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        cells = {str(table.get_row_at(i)[1]): str(table.get_row_at(i)[7]) for i in range(table.row_count)}
        assert cells == {"train-0000beef": "70 4s ago", "done-00000001": "49"}
        clock.now = WALL0 + 164.0  # nothing changed on disk: the next poll counts the age on
        await wait_for(pilot, lambda: str(table.get_row_at(0)[7]) == "70 1m04s ago")


def test_runs_list_snapshot_with_a_running_run(snap_compare, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    running_run("runs")
    app = NbTui(root="runs", poll_s=0, clock=Clock(WALL0 + 104.0))
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=(100, 30), run_before=settle)


def test_a_constant_series_with_float_noise_is_drawn_flat():
    """The smoothed line of a constant (1.0, and 1.0000000000000002 from the EMA's
    rounding) filled the plot's height as a zigzag under a single '1' label."""
    y = np.where(np.arange(40) % 2 == 0, 1.0, 1.0 + 2.220446049250313e-16)
    rows = plain_rows(PlotSpec(lines=[Line(x=np.arange(40.0), y=y)]), width=60, height=14)
    drawn = [i for i, row in enumerate(rows) if any("\u2801" <= ch <= "\u28ff" for ch in row)]
    assert len(drawn) == 1, rows
    assert sum("┤" in row for row in rows) >= 2  # ticks around the value, not one '1'
