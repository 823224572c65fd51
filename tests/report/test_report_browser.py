"""``nb report`` opened from disk in a real headless Chromium with no network.

The runs are written by real rank processes (conftest.py). Each test writes the report
with the ``nb`` command, opens it as a file: URL, and reads what the page holds and
draws: console errors, requests, canvas pixels, the legend under the mouse.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from report_helpers import SPIKE_STEP, SPIKE_VALUE

pytestmark = [pytest.mark.timeout(300), pytest.mark.timing]

NB = [sys.executable, "-c", "import sys; from nbcli.app import main; sys.argv[0] = 'nb'; main()"]


def nb_report(root: Path, out: Path, *runs: str) -> subprocess.CompletedProcess:
    return subprocess.run([*NB, "report", *runs, "-o", str(out), "--root", str(root)],
                          capture_output=True, text=True, timeout=120)


def open_page(browser, path: Path) -> None:
    """Open ``path``; the logs read afterwards hold only what this page did."""
    browser.get_log("performance")  # drop the start page's entries
    browser.get_log("browser")
    browser.get(path.resolve().as_uri())
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:  # polls the condition (implicitly_wait only sets how long element lookups wait)
        WebDriverWait(browser, 120, poll_frequency=0.1).until(
            lambda b: b.execute_script("return document.readyState === 'complete' && window.nbReady === true"))
    except TimeoutException:
        raise AssertionError("the page's script did not finish in 120 s") from None


def console_errors(browser) -> list[dict]:
    return [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def requests(browser, page: str) -> list[str]:
    """The URLs the document ``page`` (its file: URL) requested, itself included. Only the
    page's own: Chromium loads its new-tab page in the same tab on a first start and that
    page keeps fetching chrome:// resources (icons, modules) after the report opened; they
    are not the report's and never left the machine."""
    urls = []
    for entry in browser.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent" and msg["params"].get("documentURL", "").split("#")[0] == page:
            urls.append(msg["params"]["request"]["url"])
    return urls


CANVAS_PIXELS = """
const out = [];
for (const c of window.nbCharts) {
  const cv = c.u ? c.u.ctx.canvas : c.canvas;
  const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
  let drawn = 0, colours = new Set();
  for (let i = 0; i < d.length; i += 4) {
    if (d[i + 3] > 0 && !(d[i] > 250 && d[i + 1] > 250 && d[i + 2] > 250)) {
      drawn++; if (colours.size < 50) colours.add(d[i] + ',' + d[i + 1] + ',' + d[i + 2]);
    }
  }
  out.push({tag: c.tag, kind: c.kind, drawn: drawn, colours: colours.size, w: cv.width, h: cv.height});
}
return out;
"""


@pytest.fixture(scope="module")
def report_file(report_runs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report.html"
    res = nb_report(report_runs, out, "spike-00000001", "other-00000002")
    assert res.returncode == 0, res.stderr
    assert "wrote" in res.stderr
    return out


def test_loads_offline_without_errors_or_requests(browser, report_file, artifacts):
    open_page(browser, report_file)
    assert console_errors(browser) == []
    page = report_file.resolve().as_uri()
    urls = requests(browser, page)
    assert page in urls
    leaving = [u for u in urls if u != page and not u.startswith("data:")]
    assert leaving == [], f"requests left the file: {leaving}"
    shot = artifacts / "nb-report.png"
    browser.set_window_size(1400, 1000)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, min(int(height) + 40, 6000))
    assert browser.get_screenshot_as_file(str(shot))
    print(f"\nscreenshot of the report: {shot}")
    assert shot.stat().st_size > 10_000


def test_the_request_oracle_sees_a_page_that_reaches_out(browser, tmp_path):
    """The check above counts the page's own requests: one to another host is among them
    (blocked, so nothing leaves), the browser's own chrome:// pages are not."""
    page = tmp_path / "out.html"
    page.write_text('<html><body><img src="https://example.invalid/x.png">'
                    "<script>window.nbReady = true</script></body></html>")
    open_page(browser, page)
    urls = requests(browser, page.resolve().as_uri())
    assert "https://example.invalid/x.png" in urls
    assert not [u for u in urls if u.startswith("chrome")]


def test_every_chart_canvas_is_drawn(browser, report_file):
    open_page(browser, report_file)
    charts = browser.execute_script(CANVAS_PIXELS)
    kinds = {c["kind"] for c in charts}
    assert {"scalar", "heat"} <= kinds
    assert {c["tag"] for c in charts if c["kind"] == "scalar"} == {"train/loss", "train/lr"}
    for c in charts:
        assert c["drawn"] > 500, c
        assert c["colours"] >= 2, c


def test_hover_shows_the_value_under_the_mouse(browser, report_file):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    open_page(browser, report_file)
    i = browser.execute_script("return window.nbCharts.findIndex(c => c.tag === 'train/lr')")
    over = browser.execute_script(f"return window.nbCharts[{i}].u.over")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", over)
    width = over.size["width"]
    # a point a third of the way in (move_to_element_with_offset counts from the centre)
    ActionChains(browser).move_to_element_with_offset(over, -width // 6, 0).perform()
    idx = browser.execute_script(f"return window.nbCharts[{i}].u.cursor.idx")
    assert idx is not None and idx > 0
    chart = browser.execute_script("return window.nbData.charts.find(c => c.tag === 'train/lr')")
    legend = browser.execute_script(f"return window.nbCharts[{i}].u.root").find_elements(By.CSS_SELECTOR, ".u-legend .u-series")
    step_text = legend[0].find_element(By.CSS_SELECTOR, ".u-value").text
    value_text = legend[1].find_element(By.CSS_SELECTOR, ".u-value").text
    assert step_text == f"{int(chart['x'][idx]):,}"
    expected = chart["series"][0]["line"][idx]
    assert math.isclose(float(value_text), expected, rel_tol=1e-5), (value_text, expected)
    # the same, computed from the logged formula: lr = 1e-3 / sqrt(1 + step), a bucket's mean
    lo_step = int(chart["x"][idx])
    width_steps = int(chart["x"][1] - chart["x"][0])
    truth = np.mean([1e-3 * (1 + s) ** -0.5 for s in range(lo_step, lo_step + width_steps)])
    assert math.isclose(float(value_text), truth, rel_tol=1e-4)


def test_planted_spike_is_held_and_drawn(browser, report_file):
    open_page(browser, report_file)
    chart = browser.execute_script("return window.nbData.charts.find(c => c.tag === 'train/loss')")
    assert chart["bucketed"] and len(chart["x"]) <= 2000
    spike = next(s for s in chart["series"] if s["run"] == "spike-00000001")
    hi = [v for v in spike["hi"] if v is not None]
    assert max(hi) == SPIKE_VALUE
    b = spike["hi"].index(SPIKE_VALUE)
    assert chart["x"][b] <= SPIKE_STEP < chart["x"][b + 1]
    # drawn: pixels of the run's colour at the spike's column and height, none 400 steps away
    found = browser.execute_script(
        """
        const c = window.nbCharts.find(c => c.tag === 'train/loss'), u = c.u;
        const x = Math.round(u.valToPos(arguments[0], 'x', true)), y = Math.round(u.valToPos(arguments[1], 'y', true));
        const d = u.ctx.getImageData(x - 3, y - 1, 7, 4).data;
        const blue = (p, i) => p[i + 3] > 0 && p[i + 2] > p[i] + 40;  // the run's colour, not grey grid lines
        let n = 0; for (let i = 0; i < d.length; i += 4) if (blue(d, i)) n++;
        const away = u.ctx.getImageData(Math.round(u.valToPos(arguments[0] - 400, 'x', true)), y - 1, 7, 4).data;
        let m = 0; for (let i = 0; i < away.length; i += 4) if (blue(away, i)) m++;
        return [n, m, y, u.bbox.top];
        """, chart["x"][b], SPIKE_VALUE)
    drawn_at_spike, drawn_elsewhere, y, top = found
    assert drawn_at_spike > 0 and drawn_elsewhere == 0, found
    assert y - top < 0.1 * browser.execute_script(
        "return window.nbCharts.find(c => c.tag === 'train/loss').u.bbox.height"), "the spike should reach the top"
    # the non-finite points are listed and noted on the page
    assert spike["nonfinite_total"] == 2
    assert [(p["x"], p["value"]) for p in spike["nonfinite"]] == [(500, "nan"), (700, "inf")]
    body = browser.find_element("tag name", "body").text
    assert "2 non-finite values" in body


def test_timers_heat_map_names_the_straggler(browser, report_file):
    open_page(browser, report_file)
    run = browser.execute_script("return window.nbData.runs.find(r => r.id === 'spike-00000001')")
    (heat,) = run["timers"]
    assert heat["tag"] == "time/step" and heat["ranks"] == [0, 1, 2, 3]
    assert heat["stragglers"] == [2] and heat["slowest_rank"] == 2
    rows = [np.nanmean([v for v in row if v is not None]) for row in heat["cells"]]
    assert int(np.argmax(rows)) == 2
    assert "stragglers: rank 2" in browser.find_element("tag name", "body").text


def test_text_is_shown_as_text_and_images_as_thumbnails(browser, report_file):
    from selenium.webdriver.common.by import By

    open_page(browser, report_file)
    cells = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#text pre")]
    assert "<script>alert(1)</script> & done" in cells
    imgs = browser.find_elements(By.CSS_SELECTOR, "#images img")
    assert len(imgs) == 1
    assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", imgs[0]) == 8
    # the config of both runs, the differing key marked
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tr.differs")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == ["lr"]


def test_log_y_and_smoothing_redraw_without_errors(browser, report_file):
    from selenium.webdriver.common.by import By

    open_page(browser, report_file)
    before = browser.execute_script("return window.nbCharts.find(c => c.tag === 'train/loss').u.data[1].slice(0, 50)")
    browser.find_element(By.ID, "logy").click()
    assert browser.execute_script("return window.nbCharts.find(c => c.tag === 'train/loss').u.scales.y.distr") == 3
    browser.find_element(By.ID, "logy").click()
    browser.execute_script("const s = document.getElementById('smooth'); s.value = '0.9'; s.dispatchEvent(new Event('input'))")
    after = browser.execute_script("return window.nbCharts.find(c => c.tag === 'train/loss').u.data[1].slice(0, 50)")
    assert after != before and after[0] == before[0]  # debiased: the first point is kept
    assert browser.find_element(By.ID, "smooth-value").text == "0.90"
    assert console_errors(browser) == []
    assert browser.execute_script(CANVAS_PIXELS)[0]["drawn"] > 500


def test_band_across_ranks_is_drawn(browser, tmp_path):
    """8 ranks of one tag where rank 5 diverges (synthetic frames through the same
    data and HTML code: per-rank scalars are not logged by nblog yet)."""
    from nbcli.report import _data, _html

    steps = np.arange(5000)
    frames = []
    for r in range(8):
        v = 2.0 - steps / 5000 + 0.01 * r + (steps / 2500.0 if r == 5 else 0.0)
        frames.append(pl.DataFrame({"rank": np.full(len(steps), r, np.int32), "x": steps, "value": v}))
    chart = _data.scalar_chart("train/loss", [("sweep-0001", pl.concat(frames))])
    page = tmp_path / "band.html"
    data = {"nb_version": "test", "max_buckets": 2000, "runs": [], "charts": [chart]}
    page.write_text(_html.render(data, "band"), encoding="utf-8")
    open_page(browser, page)
    assert console_errors(browser) == []
    text = browser.find_element("tag name", "body").text
    assert "farthest from the median: rank 5" in text
    assert "median of 8 ranks" in text
    # band fill (the run's colour at 22 % alpha) between the median and rank 5 at the end
    n = browser.execute_script(
        """
        const u = window.nbCharts[0].u, x = Math.round(u.valToPos(4800, 'x', true));
        const y = Math.round(u.valToPos(2.2, 'y', true));
        const d = u.ctx.getImageData(x, y, 1, 1).data;
        return [d[0], d[1], d[2], d[3]];
        """)
    assert 40 <= n[3] <= 90 and n[2] > n[0], n  # translucent blue: the band, not a line


def test_machines_and_gpus_are_drawn(browser, report_runs, tmp_path, artifacts):
    out = tmp_path / "gpus.html"
    res = nb_report(report_runs, out, "gpus-00000003")
    assert res.returncode == 0, res.stderr
    open_page(browser, out)
    assert console_errors(browser) == []
    charts = browser.execute_script(CANVAS_PIXELS)
    system = [c for c in charts if c["kind"] == "system"]
    assert len(system) >= 2 * 6  # two machines, a chart per metric
    for c in charts:
        assert c["drawn"] > 200, c
    body = browser.find_element("tag name", "body").text
    assert "node-a (sampled by rank 0, 4 GPUs)" in body and "node-b (sampled by rank 2, 4 GPUs)" in body
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, min(int(height) + 40, 6000))
    shot = artifacts / "nb-report-gpus.png"
    assert browser.get_screenshot_as_file(str(shot))
    print(f"\nscreenshot of the GPU report: {shot}")


def test_dragging_zooms_and_a_double_click_zooms_out(browser, report_file):
    from selenium.webdriver.common.action_chains import ActionChains

    open_page(browser, report_file)
    i = browser.execute_script("return window.nbCharts.findIndex(c => c.tag === 'train/loss')")
    over = browser.execute_script(f"return window.nbCharts[{i}].u.over")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", over)
    full = browser.execute_script(f"const s = window.nbCharts[{i}].u.scales.x; return [s.min, s.max]")
    w = over.size["width"]
    (ActionChains(browser).move_to_element_with_offset(over, -w // 4, 0).click_and_hold()
     .move_by_offset(w // 4, 0).release().perform())
    zoomed = browser.execute_script(f"const s = window.nbCharts[{i}].u.scales.x; return [s.min, s.max]")
    assert full[0] < zoomed[0] < zoomed[1] < full[1]
    assert (zoomed[1] - zoomed[0]) < 0.4 * (full[1] - full[0])
    ActionChains(browser).double_click(over).perform()
    assert browser.execute_script(f"const s = window.nbCharts[{i}].u.scales.x; return [s.min, s.max]") == full
    assert console_errors(browser) == []
