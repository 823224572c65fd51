"""A real headless Chromium for the browser tests of ``nb report`` and ``nb serve``:
Debian's ``chromium`` and ``chromium-driver``, driven by Selenium.

:func:`chromium` starts one as on a new machine (its profile, home, config and cache
folders new and empty, first-run pages off) with the browser and performance logs
recorded, and lets it reach only what the caller allows: :data:`NO_NETWORK` (a page
opened from a file) or :data:`LOOPBACK_ONLY` (a page served on 127.0.0.1). Without
Chromium the tests fail when ``CI=true`` (scripts/browser_up.sh installs it) and are
skipped, with a banner, elsewhere (:func:`missing`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("NB_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("NB_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--no-default-browser-check", "--disable-default-apps", "--disable-extensions",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000", "--hide-scrollbars"]


@dataclass(frozen=True)
class Network:
    """What a browser may reach: its proxy flags (every http request not bypassed goes to
    port 9 of loopback, where nothing listens) and the URL patterns Chromium's DevTools
    blocks before any request is made."""
    flags: tuple[str, ...]
    blocked: tuple[str, ...]


#: Nothing at all, loopback included; file: (the page) stays allowed.
NO_NETWORK = Network(("--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"),
                     ("http://*", "https://*", "ws://*", "wss://*", "ftp://*", "chrome-extension://*"))
#: Plain http to 127.0.0.1 (any port) and nothing else: not even ``localhost`` or ``[::1]``
#: (``<-loopback>`` first: after ``127.0.0.1`` it takes that rule away too).
LOOPBACK_ONLY = Network(("--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>;127.0.0.1"),
                        ("https://*", "ws://*", "wss://*", "ftp://*", "chrome-extension://*"))


def missing(what: str, tests: str = "nb report") -> None:
    """Fail (``CI=true``) or skip the test: ``what`` is missing to run the browser tests."""
    banner = "=" * 70
    msg = (f"\n{banner}\n{what}: the real-browser tests of {tests} cannot run.\n"
           f"Install them with: bash scripts/browser_up.sh\n{banner}")
    if os.environ.get("CI") == "true":
        pytest.fail(msg, pytrace=False)
    print(msg, file=sys.stderr)
    pytest.skip(what + " (run scripts/browser_up.sh)")


@contextlib.contextmanager
def chromium(folder: Path, network: Network, tests: str = "nb report") -> Iterator[Any]:
    """A fresh headless Chromium (a Selenium ``WebDriver``) whose profile and home are new
    folders under ``folder``, reaching only what ``network`` allows, with the browser
    (console) and performance (DevTools network events) logs recorded; quit at the end."""
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        missing(f"{CHROMIUM} or {CHROMEDRIVER} is not installed", tests)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing("selenium is not installed (.venv/bin/pip install selenium)", tests)
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*FLAGS, *network.flags):
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={folder / 'profile'}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    fresh = {name: str(folder / sub) for name, sub in
             (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache"))}
    for sub in fresh.values():
        os.makedirs(sub, exist_ok=True)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, env={**os.environ, **fresh}), options=opts)
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": list(network.blocked)})
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[dict]:
    """The console's error entries (level SEVERE) since the log was last read."""
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def network_events(driver: Any) -> list[dict]:
    """The DevTools ``Network.*`` events (each ``{"method", "params"}``) since the
    performance log was last read."""
    out = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method", "").startswith("Network."):
            out.append(msg)
    return out
