"""Fixtures for the TUI tests: a synthetic run with fixed values and times, UTC clock
formatting, and a helper that waits until the reading workers have delivered."""

from __future__ import annotations

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import nbtui_synth as synth  # noqa: E402


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Times on screen are local times: make local time UTC for the test."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def demo_root(tmp_path, monkeypatch):
    """``runs/`` (relative: the runs screen shows the root as given) with the demo run
    and a second run of the same project."""
    monkeypatch.chdir(tmp_path)
    synth.write_run("runs")
    synth.write_other("runs")
    return "runs"


@pytest.fixture
def demo_run(demo_root):
    return os.path.join(demo_root, "demo", synth.RUN_ID)
