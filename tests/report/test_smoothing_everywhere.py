"""One smoothing rule in every viewer (nbcli.series): the TUI, ``nb plot`` and the
report's page draw the same smoothed values of one run with NaN, +inf and -inf in it,
the values of TensorBoard's slider (a non-finite point does not move the average), and
each marks the three non-finite points where they are.

The run is written by a real rank process; the TUI is driven with Textual's Pilot, nb
plot writes an SVG that is read back (the line's vertices in data units, from the tick
labels), the report is opened in a real headless Chromium.
"""

from __future__ import annotations

import math
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from report_helpers import write_run
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tui"))
from nbtui_helpers import aio, settle  # noqa: E402

from nbcli.app import app  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.timing]

RUN, TAG, STEPS = "smooth-00000001", "train/loss", 300
NAN, INF, NEGINF, SPIKE = 60, 120, 240, 150
W = 0.6  # the TUI's default smoothing; nb plot --smooth and the page's slider are set to it
MARKS = {(NAN, "nan"), (INF, "+inf"), (NEGINF, "-inf")}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("smooth") / "runs"
    write_run(root, RUN, steps=STEPS, spike_step=SPIKE, spike_value=5.0, nan=[NAN], inf=[INF], neginf=[NEGINF],
              timed_steps=0)
    return root


def tensorboard(values: list[float], w: float) -> list[float]:
    """TensorBoard's smoothing loop, written out: a non-finite point keeps its value and
    does not count."""
    out, last, count = [], 0.0, 0
    for v in values:
        if not math.isfinite(v):
            out.append(v)
            continue
        last = last * w + (1 - w) * v
        count += 1
        out.append(last / (1 - w**count))
    return out


@pytest.fixture(scope="module")
def expected(root) -> dict[int, float]:
    """step → smoothed value, from the points as the reader gives them."""
    from nblog import RunReader

    df = RunReader(root / "plots" / RUN).scalars(TAG).sort("step")
    steps, values = df["step"].to_list(), df["value"].to_list()
    assert steps == list(range(STEPS))
    assert math.isnan(values[NAN]) and values[INF] == math.inf and values[NEGINF] == -math.inf
    return dict(zip(steps, tensorboard(values, W), strict=True))


def check(steps, values, expected: dict[int, float]) -> None:
    """Every drawn point is the smoothed value at its step; none is at a non-finite step."""
    steps = [int(round(float(s))) for s in steps]
    assert len(steps) > 50 and not {NAN, INF, NEGINF} & set(steps)
    np.testing.assert_allclose(values, [expected[s] for s in steps], rtol=1e-6)
    assert {SPIKE, SPIKE + 1} <= set(steps)  # where the spike moves the average most


@aio
async def test_the_tui_draws_the_smoothed_values_and_marks_the_nonfinite(root, expected):
    from nbcli.tui.app import NbTui
    from nbcli.tui.screens.run import PlotGrid
    from nbcli.tui.widgets.plot import BraillePlot
    from nbcli.tui.widgets.tagtree import TagTree

    tui = NbTui(runs=[str(root / "plots" / RUN)], poll_s=0)
    async with tui.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        assert tui.screen.smoothing == W
        tui.screen.query_one(TagTree).toggle(TAG)
        await settle(pilot)
        (spec,) = [p.spec for p in tui.screen.query_one("#plots", PlotGrid).query(BraillePlot)]
    (line,) = [ln for ln in spec.lines if not ln.faint]
    check(line.x, line.y, expected)
    assert {(int(x), kind) for x, kind in spec.markers} == MARKS


def _svg_axes(path: Path) -> tuple[ET.Element, callable, callable]:
    """The axes group of a one-panel SVG of matplotlib, and its maps from SVG
    coordinates to data units (from two tick marks and their labels on each axis)."""
    ns = {"s": "http://www.w3.org/2000/svg", "x": "http://www.w3.org/1999/xlink"}
    axes = ET.parse(path).getroot().find(".//s:g[@id='axes_1']", ns)
    assert axes is not None

    def scale(prefix: str, coord: str):
        ticks = []
        for g in axes.iter("{http://www.w3.org/2000/svg}g"):
            if g.get("id", "").startswith(prefix):
                use = g.find(".//s:use", ns)
                text = "".join(g.find(".//s:text", ns).itertext()).replace("\u2212", "-")
                ticks.append((float(use.get(coord)), float(text)))
        (p0, v0), (p1, v1) = ticks[0], ticks[-1]
        return lambda p: v0 + (float(p) - p0) * (v1 - v0) / (p1 - p0)

    return axes, scale("xtick_", "x"), scale("ytick_", "y")


def test_nb_plot_draws_the_smoothed_values_and_marks_the_nonfinite(root, expected, tmp_path):
    import matplotlib

    out = tmp_path / "f.svg"
    # every vertex of the line kept (a user's matplotlibrc may say so): the drawn points, all of them
    with matplotlib.rc_context({"path.simplify": False}):
        res = CliRunner().invoke(app, ["plot", RUN, "--root", str(root), "--tag", TAG, "--smooth", str(W),
                                       "-o", str(out)], env={"COLUMNS": "200", "NB_DIR": None})
    assert res.exit_code == 0, res.output
    axes, to_x, to_y = _svg_axes(out)
    ns = {"s": "http://www.w3.org/2000/svg"}
    lines = [g.find("s:path", ns) for g in axes.findall("s:g", ns) if g.get("id", "").startswith("line2d_")]
    drawn = [p.get("d") for p in lines if p is not None and "#1f77b4" in p.get("style", "")]
    (d,) = [d for d in drawn if d.count("L") > 10]  # the run's line (the legend's sample is apart)
    xy = np.array(re.findall(r"[ML] ([-\d.]+) ([-\d.]+)", d), dtype=float)
    check([to_x(x) for x in xy[:, 0]], [to_y(y) for y in xy[:, 1]], expected)
    # the non-finite points: at the top edge (NaN, +inf) and the bottom edge (-inf)
    marks = []
    for g in axes.findall("s:g", ns):
        for use in g.findall(".//s:use", ns) if g.get("id", "").startswith("line2d_") else ():
            marks.append(int(round(to_x(use.get("x")))))
    assert sorted(marks) == [NAN, INF, NEGINF]
    assert f"{RUN}: 3 non-finite (+inf, -inf, NaN) at the edge" in out.read_text()


def test_the_report_draws_the_smoothed_values_and_marks_the_nonfinite(root, expected, browser, tmp_path):
    from test_report_browser import open_page

    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", RUN, "--root", str(root), "-o", str(out)],
                             env={"COLUMNS": "200", "NB_DIR": None})
    assert res.exit_code == 0, res.output
    open_page(browser, out)
    browser.execute_script(f"const s = document.getElementById('smooth'); s.value = '{W}';"
                           " s.dispatchEvent(new Event('input'))")
    x, line, marks = browser.execute_script(
        "const c = window.nbCharts.find(c => c.kind === 'scalar' && c.tag === arguments[0]);"
        "const sr = window.nbData.charts.find(ch => ch.tag === arguments[0]).series[0];"
        "return [c.u.data[0], c.u.data[1], sr.nonfinite];", TAG)
    drawn = [(s, v) for s, v in zip(x, line, strict=True) if v is not None]
    check([s for s, _v in drawn], [v for _s, v in drawn], expected)
    kinds = {"nan": "nan", "inf": "+inf", "-inf": "-inf"}
    assert {(m["x"], kinds[m["value"]]) for m in marks} == MARKS


def test_the_pages_smoothing_is_the_same_function(root, browser, tmp_path):
    """The page's own EMA (report.js) on values a browser can hold (NaN, ±Infinity, null):
    the values of nbcli.series.ema, non-finite ones kept, null (an empty bucket) kept."""
    from test_report_browser import open_page

    from nbcli.series import ema

    page = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", RUN, "--root", str(root), "-o", str(page)],
                             env={"COLUMNS": "200", "NB_DIR": None})
    assert res.exit_code == 0, res.output
    open_page(browser, page)
    values = [3.0, math.nan, 1.0, math.inf, -2.0, None, -math.inf, 5.0, 4.0]
    js = [v if v is None or math.isfinite(v) else str(v).replace("inf", "Infinity").replace("nan", "NaN")
          for v in values]
    got = browser.execute_script(
        "const a = arguments[0].map(v => typeof v === 'string' ? Number(v) : v);"
        "return window.nbSmooth(a, arguments[1]).map(v => v === null ? null : isFinite(v) ? v : String(v));",
        js, W)
    want, _ = ema(np.array([math.nan if v is None else v for v in values]), W)
    for g, v, w in zip(got, values, want.tolist(), strict=True):
        if v is None:
            assert g is None
        elif not math.isfinite(v):
            assert g == {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[str(v)]
        else:
            assert g == pytest.approx(w, rel=1e-12)
