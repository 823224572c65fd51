"""Media is encoded apart from points and text: a backlog of slow media never delays
points past the flush interval; ``flush(timeout)`` leaves what it had no time for
queued (nothing dropped); ``finish(timeout)`` writes points first, encodes while time
is left and counts the rest as ``media_timeout``. Encoding is slowed by a sleep (a
floor, so the timings asserted hold on any machine)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from _media_helpers import dropped

import nblog as nb
from nblog.media import _media_encode

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

SLOW_S = 0.2


@pytest.fixture
def slow_encode(monkeypatch):
    real = _media_encode.encode

    def slow(job):
        time.sleep(SLOW_S)
        return real(job)

    monkeypatch.setattr(_media_encode, "encode", slow)


def live(run) -> nb.RunReader:
    return nb.RunReader(run.dir)


def test_points_are_written_every_flush_interval_while_a_media_backlog_is_encoded(make_run, slow_encode):
    run = make_run(flush_interval=0.2)
    for i in range(30):  # 6 s of encoding
        run.add_image("img", np.zeros((8, 8), np.uint8), step=i)
    time.sleep(0.5)  # the backlog is being encoded
    run.add_scalar("x", 1.0, step=0)
    run.add_text("t", "hello", step=0)
    time.sleep(1.5)  # several flush intervals, far less than the backlog
    r = live(run)
    assert r.scalars("x")["value"].to_list() == [1.0]
    assert r.text("t")["text"].to_list() == ["hello"]
    assert 0 < r.media("img").height < 30  # encoded one after another, still going
    run.finish(timeout=0.5)


def test_flush_with_a_timeout_leaves_media_queued_and_drops_nothing(make_run, slow_encode):
    run = make_run(flush_interval=60)
    for i in range(10):  # 2 s of encoding
        run.add_image("img", np.zeros((8, 8), np.uint8), step=i)
    run.add_scalar("x", 1.0, step=0)
    t = time.monotonic()
    assert run._writer.flush(timeout=0.5) is False
    assert time.monotonic() - t < 0.5 + SLOW_S + 1.0  # no item started past the deadline (+ slack)
    r = live(run)
    assert r.scalars("x")["value"].to_list() == [1.0]  # points first
    assert r.media("img").height < 10
    assert run._writer.flush() is True  # no timeout: everything
    assert live(run).media("img").height == 10
    run.finish()
    assert dropped(run) == {}


def test_finish_with_a_timeout_writes_points_first_and_counts_media_left(make_run, slow_encode):
    run = make_run(flush_interval=60)
    n = 30  # 6 s of encoding
    for i in range(n):
        run.add_image("img", np.zeros((8, 8), np.uint8), step=i)
    run.add_scalar("x", 1.0, step=0)
    t = time.monotonic()
    run.finish(timeout=1.0)
    assert time.monotonic() - t < 1.0 + SLOW_S + 1.0  # generous: 6 s without the bound
    r = live(run)
    assert r.scalars("x")["value"].to_list() == [1.0]
    left = dropped(run)["media_timeout"]
    assert left > 0 and r.media("img").height + left == n
    assert r.sessions()[0]["end"]["status"] == "finished"


def test_finish_without_a_hurry_encodes_everything(make_run, monkeypatch):
    run = make_run(flush_interval=0.1)
    for i in range(20):
        run.add_histogram("h", np.arange(100.0) + i, step=i)
    run.finish()
    assert live(run).media("h").height == 20 and dropped(run) == {}


def test_no_media_thread_without_media(make_run):
    run = make_run(flush_interval=0.05)
    run.add_scalar("x", 1.0, step=0)
    time.sleep(0.2)
    assert not [t for t in threading.enumerate() if t.name == "nblog-media" and t.is_alive()
                and getattr(run._writer, "_media_thread", None) is t]
    run.finish()
