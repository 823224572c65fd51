"""The TUI's first plot of a long run comes from the writer's envelope sidecars (issue 18):
drawn before the full series is read, then replaced by it; a run without sidecars (an
older one) or a small one plots from the full series as before."""

from __future__ import annotations

import os

import numpy as np
import pytest
from nbtui_helpers import aio, settle, wait_for

import nblog as nb
from nbcli.tui import model as tui_model
from nbcli.tui.app import NbTui
from nbcli.tui.model import Request, RunModel
from nbcli.tui.plotdata import PREVIEW_NOTE
from nbcli.tui.screens.run import PlotGrid, RunScreen
from nbcli.tui.widgets.plot import BraillePlot
from nbcli.tui.widgets.tagtree import TagTree
from nblog.reader import RunReader

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

TAGS = [f"m/{k}" for k in range(10)]


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    """A finished run of 10 tags x 40,000 steps (4.8 MB of event log, with a sidecar)."""
    root = tmp_path_factory.mktemp("envtui")
    run = nb.init("env", root=str(root), run_name="long", system=False)
    for i in range(40_000):
        run.add_scalar({t: ((i * 2654435761 + k) % 1000003) / 1000.0 for k, t in enumerate(TAGS)}, step=i)
    run.finish()
    assert os.path.exists(os.path.join(run.dir, "envelope.r0.s0.bin"))
    return run.dir


def plot_specs(app) -> list:
    return [p.spec for p in app.screen.query_one("#plots", PlotGrid).query(BraillePlot)]


def full_notes(app) -> list[str]:
    return [s.note for s in plot_specs(app) if s.lines]


def test_preview_is_the_envelope_of_the_first_tag(big_run, monkeypatch):
    monkeypatch.setattr(tui_model, "PREVIEW_MIN_BYTES", 0)
    status, specs = RunModel([big_run]).preview(Request(seq=1))
    assert status.tags == TAGS and status.last_step == 39_999 and status.ranks == [0]
    (spec,) = specs
    assert spec.title == "m/0" and spec.note == PREVIEW_NOTE.format(points="40k")
    band, last = spec.lines
    data = RunReader(big_run).scalars("m/0")
    assert band.faint and band.y.min() == data["value"].min() and band.y.max() == data["value"].max()
    assert last.x.max() == 39_999 and np.isin(last.y, data["value"].to_numpy()).all()
    assert RunModel([big_run], preview_min_bytes=1 << 40).preview(Request(seq=1)) is None  # small: no preview


@aio
async def test_first_plot_drawn_from_the_envelope_then_the_full_series(big_run, monkeypatch):
    monkeypatch.setattr(tui_model, "PREVIEW_MIN_BYTES", 0)
    app = NbTui(runs=[big_run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and full_notes(app))
        await settle(pilot)
        assert app.screen.previewed >= 1
        assert full_notes(app) == ["min/max of 40k pts, display only · ema 0.6"]  # then the full series
        assert app.screen.query_one(TagTree).tags == TAGS


@aio
async def test_old_run_without_sidecar_plots_from_the_log(big_run, tmp_path, monkeypatch):
    monkeypatch.setattr(tui_model, "PREVIEW_MIN_BYTES", 0)
    old = tmp_path / "env" / os.path.basename(big_run)
    old.mkdir(parents=True)
    for name in ("run.json", "events.r0.s0.log"):  # as an nb release before the sidecar left it
        (old / name).write_bytes(open(os.path.join(big_run, name), "rb").read())
    app = NbTui(runs=[str(old)], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and full_notes(app))
        await settle(pilot)
        assert app.screen.previewed == 0
        assert full_notes(app) == ["min/max of 40k pts, display only · ema 0.6"]


def test_a_previewable_run_is_not_read_before_the_screen_draws(big_run, monkeypatch):
    """Reading a long run while Textual starts only slows the start down when the first
    plot comes from its sidecars: the screen reads it right after drawing that plot."""
    from nbcli.tui import preload

    assert RunModel([big_run], preview_min_bytes=0).preload_in_background() is None
    assert preload.previewable([big_run], min_bytes=0)
    monkeypatch.setattr(preload, "PREVIEW_MIN_BYTES", 0)
    lives = preload.start([big_run])
    assert lives[0].loaded_ranks() == []  # no thread reads it
    thread = RunModel([big_run], preview_min_bytes=1 << 40).preload_in_background()  # too small: read now
    assert thread is not None
    thread.join()
    assert not preload.previewable([big_run, big_run], min_bytes=0)  # overlays plot the full series
