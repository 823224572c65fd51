"""``nb report`` of short series in a real headless Chromium (issue 22): a metric logged
once, a run of one step and a machine sampled once are drawn and labelled sanely, the
captions count in the singular, and a long config value neither widens the page nor
hides: it is folded, the whole of it one click away.

The runs are written by real rank processes (``spike_writer.py``); the pages are opened
with a fresh browser profile each (conftest's ``browser``), and what they draw is read
from uPlot's own state and the canvas pixels.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from report_helpers import write_run
from test_report_browser import console_errors, nb_report, open_page

pytestmark = [pytest.mark.timeout(300), pytest.mark.timing]

BLUE, ORANGE = (0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E)  # the first and the second run's colours
LONG_SPACED = "a long description of the data mix " * 14  # 490 characters with spaces
LONG_DIGEST = "sha256=" + "9f86d081884c7d65" * 28  # 455 characters with no place to break a line


@pytest.fixture(scope="module")
def short_runs(tmp_path_factory) -> Path:
    """``plots/once-00000001``: steps 0-4, eval/acc logged once at step 4, one system
    sample, two long config values; ``plots/first-00000002``: one step (step 0,
    train/loss = 3 there)."""
    root = tmp_path_factory.mktemp("short") / "runs"
    write_run(root, "once-00000001", steps=5, final={"eval/acc": 0.93}, system="once",
              config={"lr": 0.001, "note": LONG_SPACED, "digest": LONG_DIGEST})
    write_run(root, "first-00000002", steps=1, spike_step=0, spike_value=3.0)
    return root


@pytest.fixture(scope="module")
def pages(short_runs, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("short-html")
    made = {}
    for name, runs in (("once", ["once-00000001"]), ("first", ["first-00000002"]),
                       ("both", ["once-00000001", "first-00000002"])):
        made[name] = out / f"{name}.html"
        res = nb_report(short_runs, made[name], *runs)
        assert res.returncode == 0, res.stderr
    return made


# the run's colour at the point (x, y) of a chart, in a 9x9 square of canvas pixels
COLOUR_AT = """
const [tag, kind, x, y, rgb] = arguments;
const u = window.nbCharts.find(c => c.tag === tag && c.kind === kind).u;
const px = Math.round(u.valToPos(x, 'x', true)), py = Math.round(u.valToPos(y, 'y', true));
const d = u.ctx.getImageData(px - 4, py - 4, 9, 9).data;
let n = 0;
for (let i = 0; i < d.length; i += 4)
  if (d[i + 3] > 200 && Math.abs(d[i] - rgb[0]) < 40 && Math.abs(d[i + 1] - rgb[1]) < 40 && Math.abs(d[i + 2] - rgb[2]) < 40) n++;
return n;
"""

X_AXIS = """
const [tag, kind] = arguments;
const u = window.nbCharts.find(c => c.tag === tag && c.kind === kind).u;
return {min: u.scales.x.min, max: u.scales.x.max, labels: u.axes[0]._values, data: u.data[0]};
"""


def _caption(browser, tag: str) -> list[str]:
    """The notes under the scalar chart of ``tag``."""
    return browser.execute_script(
        """
        const card = [...document.querySelectorAll('#scalars .card')].find(c => c.querySelector('h3').textContent === arguments[0]);
        return [...card.querySelectorAll('.note')].map(n => n.textContent);
        """, tag)


def test_a_metric_logged_once_is_a_dot_on_a_sane_axis(browser, pages):
    open_page(browser, pages["once"])
    assert console_errors(browser) == []
    chart = browser.execute_script("return window.nbData.charts.find(c => c.tag === 'eval/acc')")
    assert chart["x"] == [4] and chart["series"][0]["line"] == [0.93]
    assert browser.execute_script(COLOUR_AT, "eval/acc", "scalar", 4, 0.93, BLUE) >= 9
    axis = browser.execute_script(X_AXIS, "eval/acc", "scalar")
    assert (axis["min"], axis["max"]) == (3, 5)  # the step +-1, not 0-20
    assert axis["labels"] == ["3", "4", "5"]
    assert _caption(browser, "eval/acc") == ["1 point"]
    assert _caption(browser, "train/loss") == ["5 points, every point shown"]


def test_a_step_axis_is_labelled_in_whole_steps(browser, pages):
    """Steps 0-4 were labelled 0 1 1 2 2 3 3 4 4 (ticks at half steps, rounded)."""
    open_page(browser, pages["once"])
    axis = browser.execute_script(X_AXIS, "train/loss", "scalar")
    assert len(axis["labels"]) >= 3
    assert len(set(axis["labels"])) == len(axis["labels"]), axis["labels"]
    assert all(float(v) == int(v) for v in axis["labels"]), axis["labels"]


def test_a_run_of_one_step_is_drawn_around_step_0(browser, pages):
    open_page(browser, pages["first"])
    assert console_errors(browser) == []
    for tag in ("train/loss", "train/lr"):
        axis = browser.execute_script(X_AXIS, tag, "scalar")
        assert axis["data"] == [0]
        assert (axis["min"], axis["max"]) == (-1, 1)
        assert [v.replace("\u2212", "-") for v in axis["labels"]] == ["-1", "0", "1"]
    assert browser.execute_script(COLOUR_AT, "train/loss", "scalar", 0, 3.0, BLUE) >= 9
    assert _caption(browser, "train/loss") == ["1 point"]


def test_a_lone_point_beside_a_longer_run_is_drawn(browser, pages):
    """first-00000002's one point of train/loss sits at step 0 of once-00000001's five:
    in uPlot's shared x it is one value among nulls, with no segment to draw."""
    open_page(browser, pages["both"])
    chart = browser.execute_script("return window.nbData.charts.find(c => c.tag === 'train/loss')")
    assert chart["x"] == [0, 1, 2, 3, 4]
    lone = next(s for s in chart["series"] if s["run"] == "first-00000002")
    assert lone["line"] == [3.0, None, None, None, None]
    assert browser.execute_script(COLOUR_AT, "train/loss", "scalar", 0, 3.0, ORANGE) >= 9
    # the other run's line is still a line: halfway between its points at steps 1 and 2
    # (train/loss = 1 + 0.5 cos(step / 300))
    mid = 1 + 0.5 * (math.cos(1 / 300) + math.cos(2 / 300)) / 2
    assert browser.execute_script(COLOUR_AT, "train/loss", "scalar", 1.5, mid, BLUE) >= 3
    assert _caption(browser, "train/loss") == ["6 points, every point shown"]


def test_one_system_sample_is_a_dot_within_two_minutes(browser, pages):
    """A machine sampled once: the time axis ran over years around an empty chart."""
    open_page(browser, pages["once"])
    run = browser.execute_script("return window.nbData.runs[0]")
    (machine,) = run["system"]
    assert machine["charts"], "the machine's metrics are in the page"
    for ch in machine["charts"]:
        (t,) = ch["x"]
        axis = browser.execute_script(X_AXIS, ch["metric"], "system")
        assert axis["min"] == t - 60 and axis["max"] == t + 60, (ch["metric"], axis)
        value = ch["series"][0]["line"][0]
        assert browser.execute_script(COLOUR_AT, ch["metric"], "system", t, value, BLUE) >= 9, ch["metric"]


def test_a_long_config_value_is_folded_not_wider_than_the_page(browser, pages):
    from selenium.webdriver.common.by import By

    open_page(browser, pages["once"])
    width = browser.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways: {width}"
    table = browser.execute_script("return [...document.querySelectorAll('#runs table')][1]")
    main = browser.find_element(By.ID, "main")
    assert table.rect["x"] + table.rect["width"] <= main.rect["x"] + main.rect["width"]
    rows = {r.find_elements(By.TAG_NAME, "td")[0].text: r for r in table.find_elements(By.TAG_NAME, "tr")[1:]}
    assert rows["lr"].find_elements(By.TAG_NAME, "td")[1].text == "0.001"
    for key, value in (("note", LONG_SPACED), ("digest", LONG_DIGEST)):
        cell = rows[key].find_elements(By.TAG_NAME, "td")[1]
        full = cell.find_element(By.CSS_SELECTOR, ".full")
        assert not full.is_displayed()
        shown = cell.text
        assert len(shown) < len(value) and f"{len(value) + 2} characters: show all" in shown
        summary = cell.find_element(By.TAG_NAME, "summary")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", summary)  # not under the header
        summary.click()
        assert full.is_displayed()
        assert full.text == json.dumps(value)
        cell_right = cell.rect["x"] + cell.rect["width"]
        assert cell_right <= main.rect["x"] + main.rect["width"], key
    width = browser.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"open, the value scrolls the page sideways: {width}"
