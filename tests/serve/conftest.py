"""Fixtures of the ``nb serve`` tests: runs written by real rank processes (the report
tests' writer), served by a real ``nb serve`` process (``serve_helpers``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
from report_helpers import SPIKE_STEP, SPIKE_VALUE, write_run  # noqa: E402


@pytest.fixture(scope="session")
def serve_runs(tmp_path_factory) -> Path:
    """``plots/spike-00000001``: 4 ranks, 3,000 steps of train/loss with a spike of 50 at
    step 1,950 on rank 0, NaN at 500 and +inf at 700, time/step on every rank with rank 2
    slow (a straggler), config lr 0.001; ``plots/other-00000002``: 1 rank, 2,500 steps,
    lr 0.003."""
    root = tmp_path_factory.mktemp("serve") / "runs"
    write_run(root, "spike-00000001", world=4, spike_step=SPIKE_STEP, spike_value=SPIKE_VALUE, nan=[500], inf=[700],
              slow_rank=2, system=True, config={"lr": 0.001, "model": {"width": 64}})
    write_run(root, "other-00000002", world=1, steps=2500, spike_step=100, spike_value=3.0,
              config={"lr": 0.003, "model": {"width": 64}})
    return root
