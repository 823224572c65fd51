"""Fixtures of the report tests: runs written by real rank processes, and a real
headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by Selenium)
that may not reach any network.

Without Chromium the browser tests fail when ``CI=true`` (scripts/browser_up.sh
installs it) and are skipped, with a banner, elsewhere (browser_helpers.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from browser_helpers import NO_NETWORK, chromium  # noqa: E402
from report_helpers import SPIKE_STEP, SPIKE_VALUE, write_run  # noqa: E402


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


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory) -> Path:
    """Where screenshots go: $NB_TEST_ARTIFACTS, else a pytest temporary folder."""
    where = os.environ.get("NB_TEST_ARTIFACTS")
    path = Path(where) if where else tmp_path_factory.mktemp("artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture()
def browser(tmp_path):
    """A fresh headless Chromium with an empty profile, every network request blocked
    (loopback too), and the browser and performance logs recorded. Every test is
    Chromium's first start on a new machine: its home, config and cache folders are new
    and empty (a machine where it ran before gives the same answer), first-run pages off
    (browser_helpers.chromium)."""
    with chromium(tmp_path, NO_NETWORK) as driver:
        yield driver
