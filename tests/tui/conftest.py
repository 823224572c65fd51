"""Fixtures for the TUI tests: a synthetic run with fixed values and times, UTC clock
formatting, and a helper that waits until the reading workers have delivered."""

from __future__ import annotations

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import synth  # noqa: E402


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


async def settle(pilot, rounds: int = 3) -> None:
    """Wait until workers finished and their messages were handled."""
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()


def aio(fn):
    """Run an async test with asyncio (no asyncio plugin needed)."""
    import asyncio
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper
