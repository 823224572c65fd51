"""``nb serve``'s page in a real headless Chromium that may reach 127.0.0.1 and nothing
else (tests/report/browser_helpers.py: a fresh profile and home each test).

The server is the real ``nb serve --port 0`` process (serve_helpers.served); the runs are
written by real rank processes (conftest.py), and for the live test by a real
``torchrun --standalone --nproc-per-node 2`` job (live_ddp.py, gloo, in a loopback-only
network namespace: scripts/loopback.sh) that waits for a file this test writes before it
logs its later steps. Every wait polls a condition of the page under a deadline (the
page's own flags: ``window.nbServeReady``, ``window.nbRunsReady``, ``window.nbCharts``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser_helpers import LOOPBACK_ONLY, chromium, console_errors, network_events
from report_helpers import SPIKE_STEP, SPIKE_VALUE
from serve_helpers import Server, served

pytestmark = [pytest.mark.timeout(300), pytest.mark.timing]

REPO = Path(__file__).resolve().parents[2]
LOOPBACK = ["env", "NB_LOOPBACK=require", "bash", str(REPO / "scripts" / "loopback.sh")]
LIVE_SCRIPT = Path(__file__).with_name("live_ddp.py")
#: The longest any condition of a page is waited for (a first start on a loaded machine).
WAIT_S = 120.0
_DROP = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
         "OMPI_", "SLURM_", "TORCHELASTIC_", "NB_", "PMI_")


# -- the browser and the page -----------------------------------------------------------

@pytest.fixture()
def browser(tmp_path):
    """A fresh headless Chromium that reaches plain http on 127.0.0.1 only."""
    with chromium(tmp_path / "chromium", LOOPBACK_ONLY, "nb serve") as driver:
        yield driver


@pytest.fixture(scope="module")
def server(serve_runs) -> Server:
    """``nb serve`` of every run of the conftest's root."""
    with served(serve_runs) as s:
        yield s


def wait_until(browser, script: str, what: str, timeout: float = WAIT_S):
    """Poll ``script`` (JavaScript returning a value) until it is truthy; that value."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(browser, timeout, poll_frequency=0.1).until(lambda b: b.execute_script(script))
    except TimeoutException:
        raise AssertionError(f"{what}: not within {timeout:g} s") from None


def open_page(browser, url: str, ready: str = "window.nbServeReady === true") -> None:
    """Open ``url`` and wait for ``ready``; the logs read afterwards hold only what this
    page did."""
    browser.get_log("performance")
    browser.get_log("browser")
    browser.get(url)
    wait_until(browser, f"return document.readyState === 'complete' && {ready}", f"the page {url}")


def chart_when_drawn(browser, tag: str, extra: str = "true") -> dict:
    """The scalar chart of ``tag`` once drawn and ``extra`` (JavaScript over ``c``, the
    chart) holds: its step axis, its series' labels and data, its notes."""
    return wait_until(browser, f"""
        const c = (window.nbCharts || []).find(c => c.kind === 'scalar' && c.tag === {json.dumps(tag)} && c.u);
        if (!c || !({extra})) return null;
        return {{x: Array.from(c.u.data[0]), labels: c.u.series.map(s => s.label),
                 data: c.u.data.map(a => Array.from(a)), bucketed: !!c.def.bucketed,
                 notes: c.notes ? Array.from(c.notes.children).map(n => n.textContent) : []}};""", f"the chart of {tag}")


def requested_urls(browser) -> list[str]:
    """Every URL Chromium requested since the log was last read, but its own pages'
    (chrome://, devtools://: on a first start the new-tab page fetches its icons; they
    never leave the machine) and ``data:`` URLs (inline, no request)."""
    own = ("chrome://", "chrome-untrusted://", "devtools://", "data:", "about:")
    return [e["params"]["request"]["url"] for e in network_events(browser)
            if e["method"] == "Network.requestWillBeSent"
            and not e["params"]["request"]["url"].startswith(own)
            and not e["params"].get("documentURL", "").startswith(own)]


CANVAS_DRAWN = """
return window.nbCharts.filter(c => c.u || c.canvas).map(c => {
  const cv = c.u ? c.u.ctx.canvas : c.canvas, d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
  let drawn = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && !(d[i] > 250 && d[i + 1] > 250 && d[i + 2] > 250)) drawn++;
  const finite = c.u ? c.u.data.slice(1).reduce((n, a) => n + a.filter(v => v != null && isFinite(v)).length, 0) : null;
  return {tag: c.tag, kind: c.kind, drawn: drawn, finite: finite};
});
"""


# -- runs written for one test ----------------------------------------------------------

BAND_CODE = """
import math
import nblog as nb
run = nb.init("band", system=False, scalars_all_ranks=True, config={"lr": 0.001})
for step in range(400):
    off = 3.0 if run.rank == 2 else 0.0
    run.add_scalar("train/loss", 1.0 + 0.2 * math.sin(step / 20.0 + run.rank) + off, step=step)
run.finish()
"""


def _rank_env(root: Path, run_id: str, rank: int, world: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP)}
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
               GROUP_RANK="0", NB_DIR=str(root), NB_RUN_ID=run_id, NB_PROVENANCE="0", PYTHONPATH=str(REPO))
    return env


@pytest.fixture(scope="module")
def band_root(tmp_path_factory) -> Path:
    """``band/band-00000004``: 4 rank processes logging train/loss on every rank, rank 2
    offset by +3 (the outlying rank: neither the first nor the last)."""
    root = tmp_path_factory.mktemp("band") / "runs"
    procs = [subprocess.Popen([sys.executable, "-c", BAND_CODE], env=_rank_env(root, "band-00000004", r, 4),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(4)]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    return root


# -- the tests --------------------------------------------------------------------------

def test_the_browser_reaches_the_server_and_nothing_else(browser, server):
    """The network rule the page tests rely on, and the request oracle: a page of another
    host, or of this machine under another name, is requested (so the oracle sees it)
    and refused by the dead proxy; the server on 127.0.0.1 answers."""
    from selenium.common.exceptions import WebDriverException

    for url in ("http://192.0.2.1/x", f"http://localhost:{server.port}/?token={server.token}"):
        browser.get_log("performance")
        with pytest.raises(WebDriverException, match="ERR_PROXY_CONNECTION_FAILED"):
            browser.get(url)
        assert url in requested_urls(browser)
    open_page(browser, server.url, "window.nbRunsReady === true")
    assert browser.title == "nb serve"


def test_page_loads_from_its_origin_only_without_errors_and_draws(browser, server):
    open_page(browser, server.url + "&runs=spike-00000001,other-00000002")
    for tag in ("train/loss", "train/lr"):
        chart_when_drawn(browser, tag)
    wait_until(browser, "return window.nbDetailsReady === true", "the timers, system metrics and text")
    assert browser.current_url == server.base + "/?runs=spike-00000001%2Cother-00000002"  # the token left the address
    assert console_errors(browser) == []
    urls = requested_urls(browser)
    assert any(u.startswith(server.base + "/api/chart?") for u in urls), urls
    leaving = [u for u in urls if not u.startswith(server.base + "/")]
    assert leaving == [], f"requests left the server's origin: {leaving}"
    charts = browser.execute_script(CANVAS_DRAWN)
    assert {c["tag"] for c in charts if c["kind"] == "scalar"} >= {"train/loss", "train/lr"}
    assert {"heat", "system"} <= {c["kind"] for c in charts}  # the timers' heat map, the machine's metrics
    for c in charts:
        assert c["finite"] is None or c["finite"] > 0, c  # the data has values (a heat map: its canvas only)
        assert c["drawn"] > 500, c  # and the canvas shows them


def test_a_one_step_spike_is_visible_at_full_width(browser, server):
    open_page(browser, server.url + "&runs=spike-00000001")
    ch = chart_when_drawn(browser, "train/loss")
    assert ch["bucketed"] and 50 <= len(ch["x"]) < 3000 / 2, len(ch["x"])  # buckets, not every point
    assert ch["x"][0] <= 3000 / len(ch["x"]) and ch["x"][-1] >= 2999 - 3000 / len(ch["x"]), ch["x"][::100]  # full width
    maxes = [i for i, label in enumerate(ch["labels"]) if label and label.endswith(" max")]
    assert maxes, ch["labels"]
    top = max(v for i in maxes for v in ch["data"][i] if v is not None and math.isfinite(v))
    assert top == SPIKE_VALUE
    at = next(j for j, x in enumerate(ch["x"]) if x >= SPIKE_STEP)  # the bucket holding the spike's step
    assert any(ch["data"][i][j] == SPIKE_VALUE for i in maxes for j in (at - 1, at, at + 1) if 0 <= j < len(ch["x"]))
    # the line (bucket means) never reaches it: only the band shows a one-step spike
    assert max(v for v in ch["data"][1] if v is not None and math.isfinite(v)) < SPIKE_VALUE / 2


def test_a_drag_zooms_in_with_finer_buckets_from_the_server_and_a_double_click_resets(browser, server):
    from selenium.webdriver.common.action_chains import ActionChains

    open_page(browser, server.url + "&runs=spike-00000001")
    full = chart_when_drawn(browser, "train/loss")
    assert full["bucketed"]
    find = "window.nbCharts.find(c => c.kind === 'scalar' && c.tag === 'train/loss')"
    over = browser.execute_script(f"return {find}.u.over")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", over)
    lo, hi = SPIKE_STEP - 60, SPIKE_STEP + 60  # drag over these steps: every point fits the width
    px = browser.execute_script(f"const u = {find}.u; return [u.valToPos({lo}, 'x'), u.valToPos({hi}, 'x')]")
    width = over.size["width"]  # offsets count from the element's centre
    (ActionChains(browser).move_to_element_with_offset(over, int(px[0] - width / 2), 0).click_and_hold()
     .move_by_offset(int(px[1] - px[0]), 0).release().perform())
    zoomed = chart_when_drawn(browser, "train/loss", "!c.def.bucketed")
    x = zoomed["x"]
    slack = 3 * 3000 / width  # a few pixels of the full chart, in steps
    assert abs(x[0] - lo) <= slack and abs(x[-1] - hi) <= slack, (x[0], x[-1])
    assert x == list(range(x[0], x[-1] + 1))  # every step: exact, no buckets
    assert zoomed["data"][1][x.index(SPIKE_STEP)] == SPIKE_VALUE  # the line itself has the spike now
    over = browser.execute_script(f"return {find}.u.over")  # the chart was drawn again
    ActionChains(browser).double_click(over).perform()
    reset = chart_when_drawn(browser, "train/loss", "c.def.bucketed")
    assert reset["x"] == full["x"]


def test_the_rank_band_names_the_outlying_rank_and_a_rank_can_be_picked(browser, band_root):
    from selenium.webdriver.support.ui import Select

    with served(band_root) as s:
        open_page(browser, s.url + "&runs=band-00000004")
        ch = chart_when_drawn(browser, "train/loss")
        Select(browser.find_element("id", "rank")).select_by_visible_text("rank 1")
        one = chart_when_drawn(browser, "train/loss", "c.u.series.length === 2")  # step and one line
    assert one["labels"][1] == "band-00000004", one["labels"]
    assert one["x"] == list(range(400))
    for step, v in enumerate(one["data"][1]):  # rank 1's own values (stored as float32)
        assert math.isclose(v, 1.0 + 0.2 * math.sin(step / 20.0 + 1), rel_tol=1e-6), (step, v)
    assert "band-00000004: 4 ranks; farthest from the median: rank 2" in ch["notes"], ch["notes"]
    named = [i for i, label in enumerate(ch["labels"]) if label and "(farthest from the median)" in label]
    assert [ch["labels"][i] for i in named] == ["band-00000004 rank 2 (farthest from the median)"], ch["labels"]
    outlier = [v for v in ch["data"][named[0]] if v is not None]
    median = [v for v in ch["data"][1] if v is not None]
    assert min(outlier) > 3.0 and max(median) < 1.5  # the line drawn is rank 2's (offset by 3), not the median


def test_the_runs_filter_keeps_the_matching_rows_and_shows_errors(browser, server):
    from selenium.webdriver.common.by import By

    open_page(browser, server.url, "window.nbRunsReady === true")
    rows = "return Array.from(document.querySelectorAll('#runs-table tr.run')).map(r => r.dataset.id).sort().join(',')"
    assert browser.execute_script(rows) == "other-00000002,spike-00000001"
    box = browser.find_element(By.ID, "where")
    box.send_keys("lr > 0.002")
    wait_until(browser, rows.replace("return ", "return (") + ") === 'other-00000002'", "the filtered rows")
    assert browser.execute_script("return document.getElementById('runs-error').hidden") is True
    box.clear()
    box.send_keys("lr >>> 2 and (")
    error = wait_until(browser, "const e = document.getElementById('runs-error'); return !e.hidden && e.textContent",
                       "the filter's error")
    assert error.startswith("filter: ") and len(error) > len("filter: "), error
    assert "Traceback" not in error and 'File "' not in error and "\n" not in error, error
    box.clear()
    box.send_keys(" ")  # an empty filter: every run again, the error gone
    wait_until(browser, rows.replace("return ", "return (") + ") === 'other-00000002,spike-00000001' && "
               "document.getElementById('runs-error').hidden", "every row back")


def test_without_the_token_the_page_gets_401_and_no_data(browser, server):
    from selenium.webdriver.common.by import By

    for path, why in (("/", "a token is required"), ("/api/runs", "a token is required"),
                      ("/?token=wrong-token-of-32-characters", "wrong token"),
                      ("/api/runs?token=" + "x" * 32, "wrong token")):
        browser.get_log("performance")
        browser.get(server.base + path)
        body = browser.find_element(By.TAG_NAME, "body").text
        assert json.loads(body)["error"].startswith(why), body
        assert "spike-00000001" not in browser.page_source and "other-00000002" not in browser.page_source
        statuses = [e["params"]["response"]["status"] for e in network_events(browser)
                    if e["method"] == "Network.responseReceived" and e["params"]["response"]["url"] == server.base + path]
        assert statuses == [401], statuses
        assert browser.get_cookies() == []  # no cookie was set
    # the same browser with the token: the cookie, then the runs (the 401s were the token's)
    open_page(browser, server.url, "window.nbRunsReady === true")
    assert [c["name"] for c in browser.get_cookies()] == [f"nb_serve_{server.port}"]
    assert browser.find_elements(By.CSS_SELECTOR, "tr.run[data-id='spike-00000001']")


# -- live --------------------------------------------------------------------------------

class LiveJob:
    """``torchrun --standalone --nproc-per-node 2 live_ddp.py`` writing ``live/live-00000005``."""

    RUN_ID = "live-00000005"

    def __init__(self, tmp_path: Path, first: int, more: int):
        self.root, self.flags = tmp_path / "runs", tmp_path / "flags"
        self.flags.mkdir()
        self.first, self.more = first, more
        env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP)}
        env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), NB_PROVENANCE="0", NB_RUN_ID=self.RUN_ID,
                   NO_COLOR="1")
        cmd = [*LOOPBACK, sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "--monitor-interval", "0.1", str(LIVE_SCRIPT), "--root", str(self.root), "--flags", str(self.flags),
               "--first", str(first), "--more", str(more)]
        self.proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)

    def wait_flags(self, name: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while len(list(self.flags.glob(f"{name}.r*"))) < 2:
            if self.proc.poll() is not None:
                _out, err = self.proc.communicate()
                raise AssertionError(f"the job ended (exit {self.proc.returncode}) before {name}:\n{err[-3000:]}")
            assert time.monotonic() < deadline, f"the ranks did not write {name} within {WAIT_S:g} s"
            time.sleep(0.05)  # waiting for the job, not timing it

    def write(self, name: str) -> None:
        (self.flags / name).write_text("")

    def finish(self) -> None:
        self.write("stop")
        try:
            _out, err = self.proc.communicate(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("the job did not end after stop") from None
        assert self.proc.returncode == 0, err[-3000:]

    def kill(self) -> None:
        """End the job whatever state it is in: let the ranks leave their waits, then
        SIGKILL what is left (torchrun's process group, and each rank by the pid it wrote)."""
        if self.proc.poll() is not None:
            return
        self.write("go")
        self.write("stop")
        try:
            self.proc.communicate(timeout=30)
            return
        except subprocess.TimeoutExpired:
            pass
        pids = [int(f.read_text()) for f in self.flags.glob("*.r*") if f.read_text().isdigit()]
        for pid in [-self.proc.pid, *pids]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.communicate()


def test_a_point_logged_after_the_page_opened_appears_live(browser, tmp_path):
    job = LiveJob(tmp_path, first=30, more=20)
    try:
        job.wait_flags("ready")  # steps 0..29 flushed on both ranks; the job waits for go
        with served(job.root) as s:
            open_page(browser, s.url + f"&runs={job.RUN_ID}")
            ch = chart_when_drawn(browser, "train/loss")
            assert ch["x"][-1] == job.first - 1, ch["x"]  # what was flushed before the page opened
            assert browser.execute_script("return document.getElementById('live').textContent") == "live"
            updates = browser.execute_script("window.nbSamePage = true; return window.nbUpdates")
            job.write("go")  # only now does the job log steps 30..49
            job.wait_flags("more")
            last = job.first + job.more - 1
            ch = chart_when_drawn(browser, "train/loss", f"c.u.data[0][c.u.data[0].length - 1] === {last}")
            assert ch["x"] == list(range(last + 1))  # every step, in order, none twice
            got = browser.execute_script("return [window.nbUpdates, window.nbLastEvent]")
            assert got[0] > updates  # drawn again with the new points, not reloaded
            assert got[1]["run"] == job.RUN_ID and got[1]["tag"] == "train/loss", got[1]
            assert browser.execute_script("return window.nbSamePage") is True  # not reloaded
            assert console_errors(browser) == []
            job.finish()
    finally:
        job.kill()


WRITER_CODE = """
import os, sys, time
import nblog as nb
flags = sys.argv[1]
run = nb.init("again", run_id="again-00000006", system=False, flush_interval=0.2)

def wait_for(name):
    deadline = time.monotonic() + 240
    while not os.path.exists(os.path.join(flags, name)):
        if time.monotonic() > deadline:
            os._exit(3)
        time.sleep(0.05)  # waiting for the test, not timing anything

def steps(lo, hi, flag):
    for step in range(lo, hi):
        run.add_scalar("train/loss", 1.0 / (1 + step), step=step)
    run.flush()
    open(os.path.join(flags, flag), "w").close()

steps(0, 10, "ready")
wait_for("go")
steps(10, 20, "more")
wait_for("stop")
run.finish()
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_file(path: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"no {path.name} within {WAIT_S:g} s"
        time.sleep(0.05)  # waiting for the writer, not timing it


def test_points_flushed_while_the_stream_was_down_appear_when_it_reconnects(browser, tmp_path):
    """``nb serve`` restarted on the same port with the same token (or an ``ssh -L``
    tunnel that dropped): the page's event stream reconnects by itself, and a new stream
    only carries what is flushed from then on, so the page fetches its charts again."""
    from serve_helpers import start_server

    root, flags = tmp_path / "runs", tmp_path / "flags"
    flags.mkdir()
    writer = subprocess.Popen([sys.executable, "-c", WRITER_CODE, str(flags)], env=_rank_env(root, "again-00000006", 0, 1),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_file(flags / "ready", writer)
        same = {"env": {"NB_SERVE_TOKEN": "a-token-of-32-characters-0123456"}, "args": ("--port", str(_free_port()))}
        first = start_server(root, **same)
        try:
            open_page(browser, first.url + "&runs=again-00000006")
            assert chart_when_drawn(browser, "train/loss")["x"] == list(range(10))
            wait_until(browser, "return document.getElementById('live').textContent === 'live'", "the stream")
        finally:
            assert first.stop() == 0
        wait_until(browser, "return document.getElementById('live').textContent === 'reconnecting'", "the stream's loss")
        (flags / "go").write_text("")  # steps 10..19 are flushed while no server runs
        _wait_file(flags / "more", writer)
        second = start_server(root, **same)
        try:
            wait_until(browser, "return document.getElementById('live').textContent === 'live'", "the stream again")
            ch = chart_when_drawn(browser, "train/loss", "c.u.data[0][c.u.data[0].length - 1] === 19")
            assert ch["x"] == list(range(20))
        finally:
            assert second.stop() == 0
        (flags / "stop").write_text("")
        assert writer.wait(WAIT_S) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.communicate()
