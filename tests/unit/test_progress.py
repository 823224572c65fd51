"""Rank 0's progress in run.json (issue 12, item 5, writer side).

``nb ls`` and the TUI read a running run's last step from run.json, never from event
logs. It used to be rewritten every 30 s (``-`` for the first 30 s of a run, then a
figure up to 30 s old). Now: the first step's drain records it, then at most every
``NB_PROGRESS_S`` seconds (5), and only when the step moved, with the session's
``updated`` (unix seconds) saying how old it is. Waiting here is polling for a file
to change, with a deadline; nothing sleeps for a flush.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

import nblog as nb
from nblog.write._writer import Writer

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

DEADLINE_S = 20.0


def until(predicate, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def session_entry(run):
    with open(os.path.join(run.dir, "run.json")) as f:
        return json.load(f)["sessions"][-1]


def test_the_writer_asks_for_progress_at_its_first_drain_and_again_while_nothing_moved(tmp_path):
    calls = []
    third = threading.Event()

    def on_progress():
        calls.append(time.monotonic())
        if len(calls) >= 3:
            third.set()
        return False  # nothing new: ask again at the next drain

    w = Writer(str(tmp_path / "a.log"), {}, flush_interval=0.01, progress_interval=3600,
               on_progress=on_progress)
    try:
        assert third.wait(DEADLINE_S)  # not after 3600 s: at the drains, one after another
    finally:
        w.close({})


def test_the_writer_waits_an_interval_after_progress_was_written(tmp_path):
    calls = []
    path = tmp_path / "b.log"
    w = Writer(str(path), {}, flush_interval=0.01, heartbeat_interval=0, progress_interval=3600,
               on_progress=lambda: calls.append(1) or True)
    try:
        until(lambda: calls, "the first progress")
        size = path.stat().st_size
        until(lambda: path.stat().st_size > size + 2000, "more drains (heartbeats)")
        assert calls == [1]
    finally:
        w.close({})


def test_run_json_has_the_last_step_soon_after_the_first_step(root):
    run = nb.init("p", root=root, system=False, flush_interval=0.05, _environ={"NB_PROGRESS_S": "3600"})
    try:
        assert session_entry(run)["last_step"] is None
        for step in range(10):
            run.add_scalar("loss", 1.0, step=step)
        until(lambda: session_entry(run)["last_step"] == 9, "last_step 9 in run.json")
        entry = session_entry(run)
        assert entry["first_step"] == 0 and abs(entry["updated"] - time.time()) < DEADLINE_S
    finally:
        run.finish()


def test_run_json_follows_the_step_and_is_not_rewritten_while_it_stands_still(root):
    env = {"NB_PROGRESS_S": "0.05", "NB_HEARTBEAT_S": "0"}
    run = nb.init("p", root=root, system=False, flush_interval=0.02, _environ=env)
    path = os.path.join(run.dir, "run.json")
    log = os.path.join(run.dir, "events.r0.s0.log")
    try:
        for step in range(10):
            run.add_scalar("loss", 1.0, step=step)
        until(lambda: session_entry(run)["last_step"] == 9, "last_step 9")
        written = os.stat(path)
        updated = session_entry(run)["updated"]
        size = os.path.getsize(log)
        # many drains (one heartbeat each) and progress intervals with the step standing still
        until(lambda: os.path.getsize(log) > size + 3000, "more drains")
        now = os.stat(path)
        assert (now.st_ino, now.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
        run.add_scalar("loss", 1.0, step=10)
        until(lambda: session_entry(run)["last_step"] == 10, "last_step 10")
        assert session_entry(run)["updated"] >= updated
    finally:
        run.finish()
    assert session_entry(run)["last_step"] == 10


@pytest.mark.parametrize("bad", ["0", "-1", "soon"])
def test_a_bad_nb_progress_s_is_refused_naming_it(root, bad):
    with pytest.raises(ValueError, match="NB_PROGRESS_S"):
        nb.init("p", root=root, system=False, _environ={"NB_PROGRESS_S": bad})


def test_last_step_is_the_highest_step_logged_not_the_last_one(root):
    """Steps 0, 10, 3, 2: the session's last_step is 10 (as the tag table and a
    resume say), while running (progress updates) and at the end."""
    env = {"NB_PROGRESS_S": "0.05"}
    run = nb.init("p", root=root, system=False, flush_interval=0.02, _environ=env)
    try:
        run.add_scalar("loss", 1.0, step=0)
        until(lambda: session_entry(run)["last_step"] == 0, "last_step 0")
        for step in (10, 3, 2):
            run.add_scalar("loss", 1.0, step=step)
        run.add_text("note", "late", step=1)
        until(lambda: session_entry(run)["last_step"] == 10, "last_step 10 while running")
    finally:
        run.finish()
    assert session_entry(run)["last_step"] == 10
