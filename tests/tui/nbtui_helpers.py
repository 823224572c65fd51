"""Helpers for the TUI tests (a module with a unique name: ``conftest`` is ambiguous
when several test folders are collected together)."""

from __future__ import annotations

import asyncio
import functools
import time


async def settle(pilot, rounds: int = 3) -> None:
    """Wait until workers finished and their messages were handled."""
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()


def aio(fn):
    """Run an async test with asyncio (no asyncio plugin needed)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


async def wait_for(pilot, cond, timeout: float = 10.0) -> None:
    """Wait until ``cond()`` is true (a live poll delivered), failing after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await pilot.pause(0.05)
