"""``nb serve`` beside TensorBoard and trackio, on the same points, in the same headless
Chromium, in one run (issue 24); prints a Markdown table with the ratio peer / nb (above 1:
nb is faster, or cheaper).

    .venv/bin/python scripts/bench_serve.py --quick              # ~3 min: 100k points, 200 runs
    .venv/bin/python scripts/bench_serve.py                      # 1M points, 2,000 runs
    .venv/bin/python scripts/bench_serve.py --nb-points 100000000 --nb-runs 20000   # + nb alone

Who runs where: this script, nb and TensorBoard run from the development venv (the one
running this script: nblog, the ``serve`` extra, tensorboard, torch, selenium, psutil);
trackio runs from the peers' venv of scripts/bench_peers.py (``--peers-python``, default
/tmp/venv-peers/bin/python; made with ``pip install torch==2.13.0`` first, then the
project's ``[bench]`` extra constrained to that torch, so nothing pulls a CUDA torch). A
peer whose tool is missing is skipped, named in the table with the reason.

The same points for every tool:
- one run of ``--points`` points of one tag (``train/loss``, step 0..P-1), written with
  nblog's own writer (``nb.init`` / ``add_scalar``: event log and envelope sidecar);
  TensorBoard's logdir is ``nb export RUN --format tfevents`` of it
  (``nblog.tensorboard.export_tfevents``); trackio logs the same values with
  ``trackio.log`` (system metrics off on both sides);
- ``--runs`` small runs written with real nblog (the sweep driver of
  scripts/bench_ls_query.py: config, 5 points of train/loss, 1 of val/acc); TensorBoard's
  logdir is the export of each; trackio logs each run's points and config, read back
  from the nb run;
- ``--nb-points`` / ``--nb-runs``: larger sizes for nb alone (the peers do not cope): a
  long run written in the writer's frames with its envelope sidecar
  (scripts/bench_scale.py ``write_long``), a root of that many runs.
The data is kept in ``--dir`` (reused at the same sizes) or a temporary folder.

Figures (each in a fresh Chromium with an empty profile; the tools' measurements
interleaved nb, TensorBoard, trackio, nb, ...; medians of ``--repeat``, min-max shown):
1. server ready: seconds from starting the server until it answers with the data
   (nb: the URL line printed and ``GET /api/runs`` answered; TensorBoard: the tag listed
   and its last step served, i.e. the logdir loaded; trackio: its page answered).
2. first chart: ms from ``driver.get(URL)`` until a chart of the tag is drawn. nb: the
   compare view ``/?runs=ID`` until ``window.nbServeReady`` and an ``nbCharts`` entry of
   the tag has data; TensorBoard: its Time Series page until the tag's scalar card has
   axis ticks and its data-table row (the lines themselves are drawn on an
   OffscreenCanvas in a worker, which a page cannot observe); trackio: its metrics page
   until the tag's Vega plot holds its canvas/svg.
3. runs table: ms from ``driver.get`` until the runs table is drawn (nb: ``/?token=``
   until ``window.nbRunsReady``; TensorBoard: the run selector's first rows;
   trackio: its Runs page's first table rows); rows drawn are noted.
4. live: a writer process appends one point (its value a unique marker) and flushes
   (nb: ``run.flush()``; TensorBoard: torch's ``SummaryWriter.flush()``; trackio: after
   ``trackio.log`` returns: it has no flush, its own thread sends within a second);
   ms from the flush's return to the point being in the page. nb: the tag's ``nbCharts``
   data holds the new step (polled in the page every 5 ms); peers: a response carrying
   the marker reaches the page (fetch and XHR bodies read as they arrive: before the
   chart redraws, so this favours the peers). TensorBoard's page reloads only when its
   "Reload data" setting is on (it was off by default here): it is set on, at its
   shortest period (30 s), in its stored settings; its server reloads the logdir every
   5 s (default). trackio's page polls every second (default).
5. idle CPU: CPU seconds of the server's process tree over ``--idle-s`` with 50 runs open
   in the page and nothing changing (nb: compare view of 50 runs, scrolled to its
   Scalars section, whose charts are fetched when in view; TensorBoard: a logdir of those
   50 runs; trackio: a project of those 50 runs), after 3 s to settle.
7. nb serve's exit status on SIGTERM (noted when not 0 within 10 s).
6. peak RSS of the server's process tree (psutil, sampled every 0.2 s) while serving the
   big run (figure 2) and the runs table (figure 3).

Network: Chromium runs with tests/report's flags (fresh profile, headless, no sandbox,
a proxy at 127.0.0.1:9 that is closed) except that loopback bypasses the proxy (the
servers are on 127.0.0.1), and https, wss, ftp and extensions are blocked with CDP; every
server gets the offline environment of scripts/bench_peers.py (homes in the temp
folder, proxies closed, telemetry off). Requests a page tried outside 127.0.0.1 are
counted and shown.

TensorBoard runs with ``--load_fast=false``: its default Rust loader lists no tag of
``nb export --format tfevents`` files (float64 tensors), the Python loader does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "report"))

from bench_ls_query import write_root  # noqa: E402
from bench_peers import child_env  # noqa: E402

TOOLS = ("nb", "tensorboard", "trackio")
TITLE = {"nb": "nb", "tensorboard": "TensorBoard", "trackio": "trackio"}
TAG = "train/loss"
BIG_ID = "big-00000001"
LIVE_ID = "live-00000001"
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
# https, secure websockets, ftp and extensions: never needed; plain http off loopback goes
# to the closed proxy (tests/report blocks http too: its pages are files)
BLOCKED = ["https://*", "wss://*", "ftp://*", "chrome-extension://*"]


def value_at(i: int) -> float:
    """The big run's value at step ``i`` (the same formula in every writer)."""
    return 1.0 / (1.0 + i * 1e-5) + 0.01 * math.sin(i / 50.0)


VALUE_SRC = "1.0 / (1.0 + i * 1e-5) + 0.01 * math.sin(i / 50.0)"


# ----------------------------------------------------------------------------- helpers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, token: str | None = None, timeout: float = 5.0) -> bytes | None:
    """The body of a 200 answer, else None (refused, error status, timeout)."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.read() if r.status == 200 else None
    except (OSError, urllib.error.URLError, ValueError):
        return None


def wait_for(pred: Callable[[], object], timeout: float, every: float = 0.1) -> object:
    end = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > end:
            return None
        time.sleep(every)


class Tree:
    """A server's process tree: CPU seconds and RSS (sampled every 0.2 s for the peak)."""

    def __init__(self, pid: int):
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._sample, daemon=True)
        self._t.start()

    def procs(self) -> list:
        import psutil

        try:
            return [self.proc] + self.proc.children(recursive=True)
        except psutil.Error:  # the server is gone: nothing to count
            return []

    def rss(self) -> int:
        import psutil

        total = 0
        for p in self.procs():
            with contextlib.suppress(psutil.Error):  # a child that ended meanwhile
                total += p.memory_info().rss
        return total

    def cpu(self) -> float:
        import psutil

        total = 0.0
        for p in self.procs():
            with contextlib.suppress(psutil.Error):  # a child that ended meanwhile
                t = p.cpu_times()
                total += t.user + t.system
        return total

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self.rss())

    def reset_peak(self) -> None:
        self.peak = self.rss()

    def stop(self) -> None:
        self._stop.set()


class Server:
    """One tool's server process: started, waited for, watched, stopped."""

    def __init__(self, tool: str, cmd: list[str], env: dict, cwd: str, url: str | None = None):
        self.tool, self.url, self.token = tool, url, None
        self.log = open(os.path.join(cwd, f"{tool}-{time.monotonic_ns()}.log"), "w+")  # noqa: SIM115
        self.t0 = time.perf_counter()
        self.p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=self.log,
                                  text=True, start_new_session=True)
        self.tree = Tree(self.p.pid)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.ready_s: float | None = None

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.append(line)

    def ready(self, pred: Callable[[], object], timeout: float) -> bool:
        ok = wait_for(lambda: self.p.poll() is None and pred(), timeout, 0.05)
        if ok:
            self.ready_s = time.perf_counter() - self.t0
        return bool(ok)

    def why(self) -> str:
        self.log.flush()
        self.log.seek(0)
        tail = [ln.strip() for ln in self.log.read().splitlines() if ln.strip()][-2:]
        rc = self.p.poll()
        return (f"exit {rc}: " if rc is not None else "no answer: ") + " / ".join(tail)[-200:]

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after 10 s; the exit status (None: had to be killed)."""
        self.tree.stop()
        rc = None
        if self.p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.p.pid, signal.SIGTERM)
            try:
                rc = self.p.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
        else:
            rc = self.p.returncode
        self.log.close()
        return rc


# ----------------------------------------------------------------------------- browser


def browser(profile: str, hooks: list[str]):
    """A fresh headless Chromium as tests/report starts it, loopback allowed, ``hooks``
    evaluated in every new document before the page's own scripts."""
    from browser_helpers import CHROMEDRIVER, CHROMIUM, FLAGS, LOOPBACK_ONLY
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*FLAGS, *LOOPBACK_ONLY.flags):  # the tests' browser: http to 127.0.0.1 and nothing else
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile}/profile")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    fresh = {name: os.path.join(profile, folder) for name, folder in
             (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache"))}
    for folder in fresh.values():
        os.makedirs(folder, exist_ok=True)
    d = webdriver.Chrome(service=Service(CHROMEDRIVER, env={**os.environ, **fresh}), options=opts)
    d.set_script_timeout(30)
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": BLOCKED})
    for src in hooks:
        d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": src})
    return d


def outside_requests(d) -> int:
    """Requests the page tried to a host other than 127.0.0.1 (http, https, ws, wss)."""
    n = 0
    for ent in d.get_log("performance"):
        msg = json.loads(ent["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            url = msg["params"]["request"]["url"]
            if re.match(r"(https?|wss?)://", url) and not re.match(r"(https?|wss?)://127\.0\.0\.1[:/]", url):
                n += 1
    return n


def said(w: subprocess.Popen) -> str:
    """The next line a writer says that starts with "@" (tools print banners of their own)."""
    assert w.stdout is not None
    for line in w.stdout:
        if line.startswith("@"):
            return line.strip()
    return ""


def drawn_at(d, timeout: float) -> float | None:
    """``window.__benchReadyAt`` (ms since the epoch) once set by :func:`ready_hook`, or
    None after ``timeout`` seconds."""
    at = wait_for(lambda: d.execute_script("return window.__benchReadyAt"), timeout, 0.02)
    return float(at) if at else None  # type: ignore[arg-type]


def ready_hook(predicate: str) -> str:
    """Page script: from the document's start, every 5 ms, note Date.now() in
    ``window.__benchReadyAt`` the first time ``predicate`` (a JS expression) is true."""
    return ("(() => { window.__benchReadyAt = null; const id = setInterval(() => { let ok = false;"
            f" try {{ ok = !!({predicate}); }} catch (e) {{}}"
            " if (ok) { window.__benchReadyAt = Date.now(); clearInterval(id); } }, 5); })();")


# a response body (fetch, streamed as it arrives, or XHR) holding window.__benchWant: its
# arrival time in window.__benchSeen[want]
MARKER_HOOK = r"""
(() => {
  window.__benchSeen = {}; window.__benchWant = null;
  const note = (text) => { const w = window.__benchWant;
    if (w && text && text.indexOf(w) >= 0 && !(w in window.__benchSeen)) window.__benchSeen[w] = Date.now(); };
  const f = window.fetch;
  window.fetch = function (...args) {
    return f.apply(this, args).then((resp) => {
      try {
        const body = resp.clone().body;
        if (body) { const r = body.getReader(); const dec = new TextDecoder(); let tail = '';
          const pump = () => r.read().then(({done, value}) => { if (done) return;
            const s = tail + dec.decode(value, {stream: true}); note(s); tail = s.slice(-64); pump(); }).catch(() => {});
          pump(); }
      } catch (e) {}
      return resp;
    });
  };
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function (...a) {
    this.addEventListener('load', () => { try {
      const r = this.response; note(typeof r === 'string' ? r : JSON.stringify(r)); } catch (e) {} });
    return send.apply(this, a);
  };
})();
"""

# TensorBoard's page does not reload by itself unless its setting says so (off here by
# default): on, at its shortest period (30 s), as someone watching a run live sets it
TB_AUTO_RELOAD = ("try { localStorage.setItem('_tb_global_settings', JSON.stringify("
                  "{autoReload: true, autoReloadPeriodInMs: 30000})); } catch (e) {}")

# nb's compare view fetches a chart when its card comes into view; with many runs the
# comparison table above pushes the cards out of the first screen
SCROLL_TO_SCALARS = ("const s = document.getElementById('scalars');"
                     " if (s) { s.scrollIntoView(); return true; } return false;")

NB_CHART = ("window.nbServeReady === true && (window.nbCharts || []).some(c => c.tag === {tag} && c.u && c.u.data"
            " && c.u.data[0] && c.u.data[0].length > 0)")
TB_CHART = ("[...document.querySelectorAll('scalar-card')].some(card => {{"
            " const t = card.querySelector('tb-truncated-path');"
            " return t && t.getAttribute('title') === {tag}"
            " && card.querySelectorAll('.x-axis text').length >= 2"
            " && card.querySelectorAll('scalar-card-data-table tb-data-table-content-row').length >= 1; }})")
TRACKIO_CHART = ("[...document.querySelectorAll('.plot-container')].some(p => {{"
                 " const t = p.querySelector('.plot-title');"
                 " return t && t.textContent.trim() === {leaf}"
                 " && p.querySelector('.vega-embed canvas, .vega-embed svg.marks'); }})")
ROWS = {
    "nb": ("window.nbRunsReady === true", "document.querySelectorAll('table#runs-table tr.run').length"),
    "tensorboard": ("document.querySelectorAll('runs-table tb-data-table-content-row').length > 0",
                    "document.querySelectorAll('runs-table tb-data-table-content-row').length"),
    "trackio": ("document.querySelectorAll('table.runs-table tbody tr').length > 0",
                "document.querySelectorAll('table.runs-table tbody tr').length"),
}


def chart_predicate(tool: str, tag: str) -> str:
    if tool == "nb":
        return NB_CHART.format(tag=json.dumps(tag))
    if tool == "tensorboard":
        return TB_CHART.format(tag=json.dumps(tag))
    return TRACKIO_CHART.format(leaf=json.dumps(tag.split("/", 1)[-1]))


class Bench:
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp(prefix="bench-serve-")
        self.dir = os.path.abspath(a.dir) if a.dir else os.path.join(self.tmp, "data")
        os.makedirs(self.dir, exist_ok=True)
        self.cwd = os.path.join(self.tmp, "cwd")
        os.makedirs(self.cwd, exist_ok=True)
        self.env = child_env(os.path.join(self.tmp, "env"), str(REPO))
        self.skip: dict[str, str] = {}
        self.rows: list[tuple[str, dict[str, object], str]] = []  # figure, tool -> value, unit
        self.notes: dict[tuple[str, str], str] = {}
        self._profiles = 0

    # ------------------------------------------------------------------ tools present?

    def check_tools(self) -> None:
        py = self.a.peers_python
        for tool in self.a.tools:
            if tool == "tensorboard":
                r = subprocess.run([sys.executable, "-c", "import tensorboard, torch.utils.tensorboard"],
                                   capture_output=True, env=self.env)
                if r.returncode:
                    self.skip[tool] = "tensorboard or torch does not import in this venv"
            elif tool == "trackio":
                if not os.path.exists(py):
                    self.skip[tool] = f"{py} missing (make the peers' venv: see scripts/bench_peers.py)"
                    continue
                r = subprocess.run([py, "-c", "import trackio"], capture_output=True, env=self.env)
                if r.returncode:
                    self.skip[tool] = f"trackio does not import in {py}"
        r = subprocess.run(NB + ["serve", "--help"], capture_output=True, env=self.env)
        if r.returncode:
            self.skip["nb"] = "`nb serve` is not in this checkout"
        from browser_helpers import CHROMEDRIVER, CHROMIUM

        if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
            raise SystemExit(f"{CHROMIUM} or {CHROMEDRIVER} missing: bash scripts/browser_up.sh")

    def tools(self) -> list[str]:
        return [t for t in self.a.tools if t not in self.skip]

    # ------------------------------------------------------------------ data

    def _child(self, cmd: list[str], what: str, timeout: float = 3600, env: dict | None = None) -> None:
        t = time.perf_counter()
        r = subprocess.run(cmd, env=env or self.env, cwd=self.cwd, capture_output=True, text=True, timeout=timeout)
        if r.returncode:
            raise RuntimeError(f"{what} failed (exit {r.returncode}): {r.stderr.strip()[-600:]}")
        print(f"  {what}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)

    def _once(self, stamp: str, make: Callable[[], None]) -> None:
        if not os.path.exists(stamp):
            make()
            Path(stamp).write_text("done\n")

    def nb_big(self, points: int) -> str:
        root = os.path.join(self.dir, f"big{points}", "nb")
        code = ("import math, nblog as nb\n"
                f"run = nb.init('bench', run_id={BIG_ID!r}, system=False)\n"
                f"for i in range({points}):\n    run.add_scalar({TAG!r}, {VALUE_SRC}, step=i)\n"
                "run.finish()\n")
        self._once(root + ".done", lambda: self._child([sys.executable, "-c", code], f"nb: {points:,} points",
                                                       env=dict(self.env, NB_DIR=root)))
        return root

    def nb_long(self, points: int) -> str:
        """``points`` of ``train/m0`` in the writer's frames with its envelope sidecar."""
        import bench_scale

        root = os.path.join(self.dir, f"long{points}")

        def make() -> None:
            t = time.perf_counter()
            run_dir = bench_scale.write_long(root, 1, points, columns=True)
            bench_scale.write_long_envelope(run_dir, 1, points)
            print(f"  nb: {points:,} points in the writer's frames: {time.perf_counter() - t:.0f} s",
                  file=sys.stderr, flush=True)

        self._once(root + ".done", make)
        return root

    def tb_export(self, nb_root: str, runs: list[str], out: str, what: str) -> None:
        """``nb export --format tfevents`` of each run folder of ``runs`` into out/<run id>."""
        code = ("import os, sys\nfrom nblog.tensorboard import export_tfevents\n"
                "out = sys.argv[1]\nfor d in open(sys.argv[2]).read().split():\n"
                "    export_tfevents(d, os.path.join(out, os.path.basename(d)))\n")
        spec = os.path.join(self.tmp, "export-list")
        Path(spec).write_text("\n".join(runs))
        self._once(out + ".done", lambda: self._child([sys.executable, "-c", code, out, spec], what))

    def trackio_log(self, spec: str, store: str, what: str) -> None:
        """Log the runs of the JSON file ``spec`` with trackio into TRACKIO_DIR=store."""
        code = ("import json, math, sys, trackio\n"
                "spec = json.load(open(sys.argv[1]))\n"
                "for r in spec['runs']:\n"
                "    trackio.init(project=spec['project'], name=r['name'], config=r.get('config') or {},"
                " auto_log_gpu=False, auto_log_cpu=False)\n"
                "    if 'points' in r:\n"
                f"        for i in range(r['points']):\n            trackio.log({{{TAG!r}: {VALUE_SRC}}}, step=i)\n"
                "    for step, vals in r.get('steps', []):\n"
                "        trackio.log(vals, step=step)\n"
                "    trackio.finish()\n")
        self._once(store + f".{os.path.basename(spec)}.done",
                   lambda: self._child([self.a.peers_python, "-c", code, spec], what,
                                       env=dict(self.env, TRACKIO_DIR=store)))

    def many(self, n: int) -> tuple[str, list[str]]:
        """A root of ``n`` runs written with real nblog; their folders, newest first."""
        root = os.path.join(self.dir, f"runs{n}", "nb")

        def make() -> None:
            shutil.rmtree(root, ignore_errors=True)
            os.makedirs(os.path.dirname(root), exist_ok=True)  # write_root puts its specs beside root
            env_backup = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = str(REPO)  # the sweep writers import this checkout's nblog
            try:
                t = write_root(Path(root), n, procs=2)
            finally:
                if env_backup is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = env_backup
            print(f"  nb: {n:,} runs: {t:.0f} s", file=sys.stderr, flush=True)

        self._once(root + ".done", make)
        dirs = sorted(str(p.parent) for p in Path(root).glob("*/*/run.json"))
        return root, dirs

    def trackio_spec(self, dirs: list[str], project: str, path: str) -> str:
        """The points and config of nb runs, as trackio.log calls (read with nblog)."""
        if os.path.exists(path):
            return path
        from nblog import RunReader

        runs = []
        for d in dirs:
            r = RunReader(d)
            df = r.scalars()
            by_step: dict[int, dict[str, float]] = {}
            for step, tag, value in zip(df["step"].to_list(), df["tag"].to_list(), df["value"].to_list(), strict=True):
                by_step.setdefault(step, {})[tag] = value
            runs.append({"name": r.id, "config": r.config, "steps": sorted(by_step.items())})
        Path(path).write_text(json.dumps({"project": project, "runs": runs}))
        return path

    # ------------------------------------------------------------------ servers

    def start(self, tool: str, nb_root: str | None = None, tb_dir: str | None = None,
              trackio: tuple[str, str] | None = None, timeout: float = 600,
              tb_ready: Callable[[str], bool] | None = None) -> Server | None:
        """Start ``tool``'s server on its data and wait until it answers; None (noted) if it
        does not."""
        if tool == "nb":
            assert nb_root is not None
            s = Server(tool, NB + ["serve", "--root", nb_root, "--port", "0"], self.env, self.cwd)

            def nb_up() -> bool:
                for ln in s.lines:
                    m = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=(\S+)", ln)
                    if m:
                        s.url, s.token = m.group(1), m.group(2)
                        return http_get(s.url + "/api/runs", s.token) is not None
                return False

            ok = s.ready(nb_up, timeout)
        elif tool == "tensorboard":
            assert tb_dir is not None
            port = free_port()
            exe = shutil.which("tensorboard", path=os.path.dirname(sys.executable))
            cmd = [exe] if exe else [sys.executable, "-m", "tensorboard.main"]
            s = Server(tool, cmd + ["--logdir", tb_dir, "--port", str(port), "--host", "127.0.0.1",
                                    "--load_fast=false"], self.env, self.cwd, f"http://127.0.0.1:{port}")
            ok = s.ready(lambda: (tb_ready or (lambda u: http_get(u + "/data/runs") is not None))(s.url), timeout)
        else:
            assert trackio is not None
            store, project = trackio
            port = free_port()
            exe = os.path.join(os.path.dirname(self.a.peers_python), "trackio")
            s = Server(tool, [exe, "show", "--project", project],
                       dict(self.env, TRACKIO_DIR=store, GRADIO_SERVER_PORT=str(port)), self.cwd,
                       f"http://127.0.0.1:{port}")
            ok = s.ready(lambda: http_get(s.url + "/") is not None, timeout)
        if not ok:
            self.notes[("server", tool)] = s.why()
            print(f"  {tool} server did not answer: {s.why()}", file=sys.stderr, flush=True)
            s.stop()
            return None
        return s

    def stop(self, s: Server, what: str) -> None:
        """Stop a server; an nb serve that does not exit 0 on SIGTERM is noted (``what``:
        what it was serving)."""
        rc = s.stop()
        if s.tool == "nb" and rc != 0:
            why = "did not exit within 10 s (killed)" if rc is None else f"exited {rc}"
            self.notes[(f"SIGTERM, serving {what}", "nb")] = f"nb serve {why}, expected exit 0"
            print(f"  nb serve {why} on SIGTERM", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ page timings

    def page_ms(self, url: str, predicate: str, count: str | None = None, timeout: float = 120.0,
                ) -> tuple[float | None, int | None, int]:
        """(ms from driver.get until ``predicate`` holds, ``count`` evaluated then, requests
        that tried to leave 127.0.0.1) in a fresh Chromium."""
        self._profiles += 1
        prof = os.path.join(self.tmp, f"chromium{self._profiles}")
        d = browser(prof, [ready_hook(predicate)])
        try:
            t0 = time.time()
            d.get(url)
            at = drawn_at(d, timeout)
            n = d.execute_script(f"return {count}") if (count and at) else None
            return ((float(at) - t0 * 1000.0) if at else None), n, outside_requests(d)
        finally:
            d.quit()
            shutil.rmtree(prof, ignore_errors=True)

    def url(self, s: Server, kind: str, ids: list[str] | None = None, project: str = "") -> str:
        if s.tool == "nb":
            q = f"/?token={s.token}"
            return s.url + q + (f"&runs={','.join(ids)}" if ids else "")
        if s.tool == "tensorboard":
            return s.url + "/#timeseries"
        return s.url + ("/runs" if kind == "runs" else "/") + f"?project={project}"

    # ------------------------------------------------------------------ figures

    def add(self, figure: str, unit: str, values: dict[str, object]) -> None:
        self.rows.append((figure, values, unit))

    def fig_first_chart(self) -> None:
        p = self.a.points
        tools = self.tools()
        nb_root = self.nb_big(p) if "nb" in tools else None
        tb_dir = os.path.join(self.dir, f"big{p}", "tb")
        store = os.path.join(self.dir, f"big{p}", "trackio")
        if "tensorboard" in tools:
            nb_root = nb_root or self.nb_big(p)
            self.tb_export(nb_root, [os.path.join(nb_root, "bench", BIG_ID)], tb_dir, f"TensorBoard: export {p:,} points")
        if "trackio" in tools:
            spec = os.path.join(self.dir, f"big{p}", "trackio-spec.json")
            Path(spec).write_text(json.dumps({"project": "big", "runs": [{"name": BIG_ID, "points": p}]}))
            self.trackio_log(spec, store, f"trackio: log {p:,} points")

        def tb_loaded(u: str) -> bool:  # the tag listed and its last step served: the logdir is loaded
            body = http_get(u + "/data/plugin/scalars/scalars?run=" + f"{BIG_ID}/rank_0&tag={TAG}")
            try:
                return bool(body) and json.loads(body)[-1][1] == p - 1
            except (ValueError, IndexError, TypeError):
                return False

        servers = {}
        for tool in tools:
            servers[tool] = self.start(tool, nb_root=nb_root, tb_dir=tb_dir, trackio=(store, "big"), tb_ready=tb_loaded)
        label = f"{p / 1e6:g}M points"
        self._serve_figures(f"first chart, 1 run of {label}", servers, lambda s: self.url(s, "chart", [BIG_ID], "big"),
                            lambda t: chart_predicate(t, TAG), None)
        if self.a.nb_points and "nb" in tools:
            root = self.nb_long(self.a.nb_points)
            s = self.start("nb", nb_root=root)
            if s:
                self._serve_figures(f"first chart, 1 run of {self.a.nb_points / 1e6:g}M points (nb alone)",
                                    {"nb": s}, lambda s: self.url(s, "chart", [os.path.basename(
                                        next(Path(root).glob('*/*/run.json')).parent)]),
                                    lambda t: chart_predicate(t, "train/m0"), None)

    def _serve_figures(self, label: str, servers: dict[str, Server | None], url: Callable[[Server], str],
                       predicate: Callable[[str], str], count: Callable[[str], str] | None) -> None:
        ready = {t: (s.ready_s if s else None) for t, s in servers.items()}
        self.add(f"server ready, {label.split(', ', 1)[1]}", "s", ready)
        for s in servers.values():
            if s:
                s.tree.reset_peak()
        times: dict[str, list[float]] = {t: [] for t in servers}
        counts: dict[str, list] = {t: [] for t in servers}
        outside: dict[str, int] = {t: 0 for t in servers}
        for rep in range(self.a.repeat):
            for t, s in servers.items():
                if not s or (times[t] == [] and rep > 0):  # the first try failed: do not repeat
                    continue
                ms, n, out = self.page_ms(url(s), predicate(t), count(t) if count else None, self.a.page_timeout)
                outside[t] = max(outside[t], out)
                if ms is not None:
                    times[t].append(ms)
                    counts[t].append(n)
                else:
                    self.notes[(label, t)] = f"not drawn within {self.a.page_timeout:g} s"
                print(f"  {label}: {t} {ms if ms is None else round(ms)} ms", file=sys.stderr, flush=True)
        self.add(label, "ms", {t: (v or None) for t, v in times.items()})
        for t in servers:
            extra = []
            if count and counts[t]:
                extra.append(f"{counts[t][-1]:,} rows drawn")
            if outside[t]:
                extra.append(f"{outside[t]} requests tried off 127.0.0.1")
            if extra:
                self.notes[(label, t)] = "; ".join(extra)
        self.add(f"server peak RSS, {label.split(', ', 1)[1]}", "MiB",
                 {t: (s.tree.peak / 2**20 if s else None) for t, s in servers.items()})
        for s in servers.values():
            if s:
                self.stop(s, label.split(", ", 1)[1])

    def fig_runs_table(self) -> None:
        n = self.a.runs
        tools = self.tools()
        nb_root, dirs = self.many(n)
        tb_dir = os.path.join(self.dir, f"runs{n}", "tb")
        store = os.path.join(self.dir, f"runs{n}", "trackio")
        if "tensorboard" in tools:
            self.tb_export(nb_root, dirs, tb_dir, f"TensorBoard: export {n:,} runs")
        if "trackio" in tools:
            spec = self.trackio_spec(dirs, "many", os.path.join(self.dir, f"runs{n}", "trackio-spec.json"))
            self.trackio_log(spec, store, f"trackio: log {n:,} runs")

        def tb_all(u: str) -> bool:
            body = http_get(u + "/data/runs")
            return bool(body) and len(json.loads(body)) >= n

        servers = {t: self.start(t, nb_root=nb_root, tb_dir=tb_dir, trackio=(store, "many"), tb_ready=tb_all)
                   for t in tools}
        self._serve_figures(f"runs table, {n:,} runs", servers, lambda s: self.url(s, "runs", None, "many"),
                            lambda t: ROWS[t][0], lambda t: ROWS[t][1])
        if self.a.nb_runs and "nb" in tools:
            root, _ = self.many(self.a.nb_runs)
            s = self.start("nb", nb_root=root)
            if s:
                self._serve_figures(f"runs table, {self.a.nb_runs:,} runs (nb alone)", {"nb": s},
                                    lambda s: self.url(s, "runs"), lambda t: ROWS[t][0], lambda t: ROWS[t][1])
        self._idle(nb_root, dirs[:50], tb_dir)

    def _idle(self, nb_root: str, dirs: list[str], tb_all: str) -> None:
        """Figure 5: idle CPU with 50 runs open."""
        k = len(dirs)
        tools = self.tools()
        tb_dir = os.path.join(self.tmp, "tb-idle")
        store = os.path.join(self.dir, f"idle{k}-trackio")
        if "tensorboard" in tools:
            os.makedirs(tb_dir, exist_ok=True)
            for d in dirs:
                os.symlink(os.path.join(tb_all, os.path.basename(d)), os.path.join(tb_dir, os.path.basename(d)))
        if "trackio" in tools:
            spec = self.trackio_spec(dirs, "idle", os.path.join(self.dir, f"idle{k}-spec.json"))
            self.trackio_log(spec, store, f"trackio: log {k} runs")
        ids: list[str] = []
        if "nb" in tools:
            from nblog import RunReader

            ids = [RunReader(d).id for d in dirs]
        cpu: dict[str, object] = {}
        for t in tools:
            s = self.start(t, nb_root=nb_root, tb_dir=tb_dir, trackio=(store, "idle"),
                           tb_ready=lambda u: (b := http_get(u + "/data/runs")) is not None and len(json.loads(b)) >= k)
            if not s:
                cpu[t] = None
                continue
            self._profiles += 1
            prof = os.path.join(self.tmp, f"chromium{self._profiles}")
            d = browser(prof, [ready_hook(chart_predicate(t, TAG))])
            try:
                d.get(self.url(s, "chart", ids, "idle"))
                if t == "nb":  # 50 runs' config table comes first: charts are fetched once scrolled to
                    wait_for(lambda d=d: d.execute_script(SCROLL_TO_SCALARS), self.a.page_timeout, 0.05)
                    self.notes[("idle", t)] = "page scrolled to its Scalars section (charts load when in view)"
                if not drawn_at(d, self.a.page_timeout):
                    self.notes[("idle", t)] = "page not drawn; measured anyway"
                time.sleep(3)
                c0 = s.tree.cpu()
                time.sleep(self.a.idle_s)
                cpu[t] = s.tree.cpu() - c0
            finally:
                d.quit()
                shutil.rmtree(prof, ignore_errors=True)
                self.stop(s, f"{k} runs open")
            print(f"  idle: {t} {cpu[t]:.2f} s CPU", file=sys.stderr, flush=True)
        self.add(f"server CPU while idle, {k} runs open, {self.a.idle_s:g} s", "s", cpu)

    def fig_live(self) -> None:
        """Figure 4: a flushed point until it is in the page."""
        tools = self.tools()
        samples = self.a.live_samples
        lat: dict[str, object] = {}
        for t in tools:
            base = os.path.join(self.tmp, f"live-{t}")
            os.makedirs(base, exist_ok=True)
            if t == "nb":
                code = ("import sys, time, math, nblog as nb\n"
                        f"run = nb.init('live', run_id={LIVE_ID!r}, system=False)\n"
                        f"for i in range(100):\n    run.add_scalar({TAG!r}, {VALUE_SRC}, step=i)\n"
                        "run.flush()\nprint('@ready', flush=True)\n"
                        "for line in sys.stdin:\n    step, value = line.split()\n"
                        f"    run.add_scalar({TAG!r}, float(value), step=int(step)); run.flush()\n"
                        "    print('@', time.time(), flush=True)\n"
                        "run.finish()\n")
                w = subprocess.Popen([sys.executable, "-c", code], env=dict(self.env, NB_DIR=base), cwd=self.cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            elif t == "tensorboard":
                code = ("import sys, time, math\nfrom torch.utils.tensorboard import SummaryWriter\n"
                        f"w = SummaryWriter({os.path.join(base, 'live')!r})\n"
                        f"for i in range(100):\n    w.add_scalar({TAG!r}, {VALUE_SRC}, i)\n"
                        "w.flush()\nprint('@ready', flush=True)\n"
                        "for line in sys.stdin:\n    step, value = line.split()\n"
                        f"    w.add_scalar({TAG!r}, float(value), int(step)); w.flush()\n"
                        "    print('@', time.time(), flush=True)\n"
                        "w.close()\n")
                w = subprocess.Popen([sys.executable, "-c", code], env=self.env, cwd=self.cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            else:
                code = ("import sys, time, math, trackio\n"
                        "trackio.init(project='live', name='live', auto_log_gpu=False, auto_log_cpu=False)\n"
                        f"for i in range(100):\n    trackio.log({{{TAG!r}: {VALUE_SRC}}}, step=i)\n"
                        "time.sleep(2)\nprint('@ready', flush=True)\n"
                        "for line in sys.stdin:\n    step, value = line.split()\n"
                        f"    trackio.log({{{TAG!r}: float(value)}}, step=int(step))\n"
                        "    print('@', time.time(), flush=True)\n"
                        "trackio.finish()\n")
                w = subprocess.Popen([self.a.peers_python, "-c", code], env=dict(self.env, TRACKIO_DIR=base),
                                     cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert w.stdin is not None and w.stdout is not None
            s = None
            d = None
            prof = os.path.join(self.tmp, f"chromium-live-{t}")
            got: list[float] = []
            try:
                if said(w) != "@ready":
                    raise RuntimeError(f"{t}: live writer did not start")
                s = self.start(t, nb_root=base, tb_dir=base, trackio=(base, "live"),
                               tb_ready=lambda u: http_get(u + "/data/plugin/scalars/tags") not in (None, b"{}"))
                if not s:
                    lat[t] = None
                    continue
                hooks = [ready_hook(chart_predicate(t, TAG)), MARKER_HOOK]
                d = browser(prof, hooks + ([TB_AUTO_RELOAD] if t == "tensorboard" else []))
                d.get(self.url(s, "chart", [LIVE_ID], "live"))
                if not drawn_at(d, self.a.page_timeout):
                    self.notes[("live", t)] = "page not drawn"
                    lat[t] = None
                    continue
                time.sleep(1.0)
                limit = 90.0 if t == "tensorboard" else 30.0
                for k in range(samples):
                    step = 1000 + k
                    marker = f"{7001 + k}.125"
                    if t == "nb":
                        d.execute_script(
                            "const step = arguments[0], tag = arguments[1]; window.__benchSeen = window.__benchSeen || {};"
                            " const id = setInterval(() => { try { if ((window.nbCharts || []).some(c => c.tag === tag"
                            " && c.u && c.u.data && c.u.data[0] && Array.prototype.includes.call(c.u.data[0], step)))"
                            " { window.__benchSeen[String(step)] = Date.now(); clearInterval(id); } } catch (e) {} }, 5);",
                            step, TAG)
                        key = str(step)
                    else:
                        d.execute_script("window.__benchWant = arguments[0];", marker)
                        key = marker
                    w.stdin.write(f"{step} {marker}\n")
                    w.stdin.flush()
                    flushed = float(said(w).split()[1])
                    seen = wait_for(lambda d=d, key=key: d.execute_script("return window.__benchSeen[arguments[0]]", key),
                                    limit, 0.02)
                    if seen is None:
                        self.notes[("live", t)] = f"a point not seen within {limit:g} s"
                        break
                    got.append(float(seen) - flushed * 1000.0)
                    print(f"  live: {t} {got[-1]:.0f} ms", file=sys.stderr, flush=True)
                lat[t] = got or None
            finally:
                if d is not None:
                    d.quit()
                shutil.rmtree(prof, ignore_errors=True)
                if s is not None:
                    self.stop(s, "a live run")
                w.stdin.close()
                try:
                    w.wait(30)
                except subprocess.TimeoutExpired:
                    w.kill()
                    w.wait()
        self.add("live: flushed point in the page", "ms", lat)

    # ------------------------------------------------------------------ table

    def table(self) -> str:
        def stat(v: object, unit: str) -> tuple[str, float | None]:
            if v is None or v == []:
                return "—", None
            vals = v if isinstance(v, list) else [v]
            med = statistics.median(vals)  # type: ignore[arg-type]
            fmt = (lambda x: f"{x:,.0f}") if unit in ("ms", "MiB") else (lambda x: f"{x:.3g}")
            txt = f"{fmt(med)} {unit}"
            if len(vals) > 1:
                txt += f" ({fmt(min(vals))}–{fmt(max(vals))})"  # type: ignore[type-var]
            return txt, med

        peers = [t for t in self.a.tools if t != "nb"]
        head = ["figure", "nb"]
        for t in peers:
            head += [TITLE[t], f"{TITLE[t]} / nb"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for figure, values, unit in self.rows:
            nb_txt, nb_med = stat(values.get("nb"), unit)
            if "nb" in self.skip:
                nb_txt = "skipped"
            cells = [figure, nb_txt]
            for t in peers:
                if t in self.skip:
                    cells += ["skipped", "—"]
                    continue
                txt, med = stat(values.get(t), unit) if t in values else ("—", None)
                ratio = f"{med / nb_med:,.1f}×" if (med is not None and nb_med) else "—"
                cells += [txt, ratio]
            lines.append("| " + " | ".join(cells) + " |")
        out = "\n".join(lines)
        notes = [f"- {TITLE[t]} skipped: {why}" for t, why in self.skip.items()]
        notes += [f"- {fig}, {TITLE.get(t, t)}: {n}" for (fig, t), n in self.notes.items()]
        return out + ("\n\n" + "\n".join(notes) if notes else "")

    def close(self) -> None:
        if not self.a.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print(f"kept {self.tmp}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="a quick pass (~3 min): 100k points, 200 runs, 2 repeats, 2 live samples, 5 s idle")
    ap.add_argument("--points", type=int, default=1_000_000, help="points of the big run (every tool)")
    ap.add_argument("--runs", type=int, default=2000, help="runs of the runs table (every tool)")
    ap.add_argument("--nb-points", type=int, default=0, help="also a run of this many points for nb alone (100M: 1e8)")
    ap.add_argument("--nb-runs", type=int, default=0, help="also a runs table of this many runs for nb alone")
    ap.add_argument("--repeat", type=int, default=3, help="page loads per tool and figure (median shown)")
    ap.add_argument("--live-samples", type=int, default=3, help="points flushed per tool in the live figure")
    ap.add_argument("--idle-s", type=float, default=10.0, help="seconds of the idle CPU figure")
    ap.add_argument("--page-timeout", type=float, default=120.0, help="seconds a page may take to draw")
    ap.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset of nb,tensorboard,trackio")
    ap.add_argument("--figures", default="chart,runs,live", help="comma-separated subset of chart,runs,live "
                    "(runs includes the idle CPU figure)")
    ap.add_argument("--peers-python", default="/tmp/venv-peers/bin/python", help="the peers' venv python (trackio)")
    ap.add_argument("--dir", help="where the data is written and kept (reused at the same sizes)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (server logs)")
    a = ap.parse_args()
    if a.quick:  # the quick sizes, where no flag says otherwise
        for name, value in (("points", 100_000), ("runs", 200), ("repeat", 2), ("live_samples", 2), ("idle_s", 5.0)):
            if getattr(a, name) == ap.get_default(name):
                setattr(a, name, value)
    a.tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    bad = set(a.tools) - set(TOOLS)
    if bad:
        raise SystemExit(f"unknown tools: {', '.join(sorted(bad))}")
    b = Bench(a)
    t0 = time.perf_counter()
    try:
        b.check_tools()
        for t, why in b.skip.items():
            print(f"skipping {TITLE[t]}: {why}", file=sys.stderr, flush=True)
        figs = set(a.figures.split(","))
        if "chart" in figs:
            b.fig_first_chart()
        if "runs" in figs:
            b.fig_runs_table()
        if "live" in figs:
            b.fig_live()
    finally:
        b.close()
    load = os.getloadavg()
    print(f"\nnb serve beside its peers: {a.points:,} points, {a.runs:,} runs, {a.repeat} repeats, "
          f"{os.cpu_count()} CPUs, load {load[0]:.2f}, {time.perf_counter() - t0:.0f} s\n")
    print(b.table())


if __name__ == "__main__":
    main()
