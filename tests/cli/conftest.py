"""Fixtures for the ``nb`` command tests: runs written by real processes.

Each rank is a real Python process started with the variables torchrun sets (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK), NB_RUN_ID and NB_DIR, running
``_writer.py``. The session-wide root ``runs`` holds:

- ``vision/ddp-00000001``: 3 ranks on two simulated machines (ranks 0-1 on node-a,
  rank 2 on node-b: local rank 0 of each samples system metrics), step timers on every
  rank (rank 2 is slow: a straggler), NaN at step 5 and +inf at step 7, a text with an
  ESC sequence and a bidi override, a tag ``[bold red]x[/]``; then resumed at step 10 in
  a second session (steps 10-24), so session 0's steps 10-19 are hidden on every rank.
- ``nlp/solo-00000002``: one process that raised: status "failed".
- ``nlp/dup-aaaa0001`` and ``nlp/dup-aaaa0002``: an ambiguous prefix ``dup-aaaa``.
- ``nlp/stale-00000003``: a writer killed with SIGKILL, files an hour old: "stale".

Tests must not modify it; tests that write use ``tmp_path``.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from cli_helpers import LAUNCHER_PREFIXES, TEXT, run_ranks, start, torchrun_env, wait_all
from typer.testing import CliRunner

from nbcli.app import app


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli") / "runs"
    hosts = ["node-a", "node-a", "node-b"]
    first = {"project": "vision", "name": "ddp", "stop": 20, "nan": [5], "inf": [7], "slow_rank": 2,
             "text": TEXT, "system": True,
             "config": {"lr": 0.1, "model": {"layers": [64, 64]}, "note": "[bold]x[/] \x1b[2J"}}
    procs = [start({"project": "nlp", "name": "solo", "stop": 5, "fail": True},
                   torchrun_env(0, 1, NB_DIR=str(root), NB_RUN_ID="solo-00000002"))]
    procs += [start({"project": "nlp", "name": "dup", "stop": 3},
                    torchrun_env(0, 1, NB_DIR=str(root), NB_RUN_ID=f"dup-aaaa000{i}")) for i in (1, 2)]
    stale = start({"project": "nlp", "name": "stale", "stop": 10_000, "sleep": 0.01},
                  torchrun_env(0, 1, NB_DIR=str(root), NB_RUN_ID="stale-00000003"))
    run_ranks(root, first, 3, "ddp-00000001", hosts)
    run_ranks(root, {**first, "start": 10, "stop": 25, "resume": "auto", "text": "resumed"}, 3,
              "ddp-00000001", hosts)
    for p in procs[:1]:
        p.communicate(timeout=60)
        assert p.returncode == 1
    wait_all(procs[1:])
    stale_dir = root / "nlp" / "stale-00000003"
    deadline = time.monotonic() + 30
    while not any(f.stat().st_size > 200 for f in stale_dir.glob("events.*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    stale.send_signal(signal.SIGKILL)
    stale.communicate()
    old = time.time() - 3600
    for f in stale_dir.iterdir():
        os.utime(f, (old, old))
    return root


@pytest.fixture
def cli():
    """``cli(*args, env=None)`` → the CliRunner result of ``nb *args`` with a clean environment."""
    runner = CliRunner()

    def invoke(*args: str, env: dict | None = None, **kwargs):
        base = {k: None for k in os.environ if k.startswith(LAUNCHER_PREFIXES)}
        base.update({"COLUMNS": "200"})
        base.update(env or {})
        return runner.invoke(app, list(args), env=base, **kwargs)

    return invoke
