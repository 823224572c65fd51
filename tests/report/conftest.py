"""Fixtures of the report tests: runs written by real rank processes, and a real
headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by Selenium)
that may not reach any network.

Without Chromium the browser tests fail when ``CI=true`` (scripts/browser_up.sh
installs it) and are skipped, with a banner, elsewhere.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from report_helpers import SPIKE_STEP, SPIKE_VALUE, write_run  # noqa: E402

CHROMIUM = os.environ.get("NB_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("NB_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--no-default-browser-check", "--disable-default-apps", "--disable-extensions",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000", "--hide-scrollbars",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
# every scheme that leaves the file; file: (the page) stays allowed
BLOCKED = ["http://*", "https://*", "ws://*", "wss://*", "ftp://*", "chrome-extension://*"]



@pytest.fixture(scope="session")
def report_runs(tmp_path_factory) -> Path:
    """``plots/spike-00000001``: 4 ranks, 3,000 steps of train/loss on rank 0 with a
    spike of 50 at step 1,950, NaN at 500, +inf at 700, every rank timing time/step
    (rank 2 sleeps: a straggler), a text with HTML in it, an image and system metrics
    of its machine;
    ``plots/other-00000002``: 1 rank, 2,500 steps, another config;
    ``plots/gpus-00000003``: 3 ranks on two machines (node-a: ranks 0-1, node-b: rank 2),
    each with 4 fake GPUs sampled by its local rank 0."""
    root = tmp_path_factory.mktemp("report") / "runs"
    write_run(root, "spike-00000001", world=4, spike_step=SPIKE_STEP, spike_value=SPIKE_VALUE, nan=[500], inf=[700],
              slow_rank=2, image=True, system=True, config={"lr": 0.001, "model": {"width": 64}})
    write_run(root, "other-00000002", world=1, steps=2500, spike_step=100, spike_value=3.0,
              config={"lr": 0.003, "model": {"width": 64}})
    write_run(root, "gpus-00000003", world=3, hosts=["node-a", "node-a", "node-b"], gpus=4, steps=300,
              system="gpu", slow_rank=1, timed_steps=50)
    return root


def _missing(what: str) -> None:
    banner = "=" * 70
    msg = (f"\n{banner}\n{what}: the real-browser tests of nb report cannot run.\n"
           f"Install them with: bash scripts/browser_up.sh\n{banner}")
    if os.environ.get("CI") == "true":
        pytest.fail(msg, pytrace=False)
    print(msg, file=sys.stderr)
    pytest.skip(what + " (run scripts/browser_up.sh)")


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory) -> Path:
    """Where screenshots go: $NB_TEST_ARTIFACTS, else a pytest temporary folder."""
    where = os.environ.get("NB_TEST_ARTIFACTS")
    path = Path(where) if where else tmp_path_factory.mktemp("artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture()
def browser(tmp_path):
    """A fresh headless Chromium with an empty profile, network requests blocked, and
    the browser and performance logs recorded. Every test is Chromium's first start on a
    new machine: its home, config and cache folders are new and empty (a machine where it
    ran before gives the same answer), first-run pages off."""
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        _missing(f"{CHROMIUM} or {CHROMEDRIVER} is not installed")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium is not installed (.venv/bin/pip install selenium)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    fresh = {name: str(tmp_path / folder) for name, folder in
             (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache"))}
    for folder in fresh.values():
        os.makedirs(folder, exist_ok=True)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, env={**os.environ, **fresh}), options=opts)
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": BLOCKED})
        yield driver
    finally:
        driver.quit()
