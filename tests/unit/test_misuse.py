"""Misuse is said, never silent (issue 12, item 4), and never raises unless strict.

- logging calls after ``finish()`` warn once per run, naming the call, and do
  nothing; with ``strict`` (``NB_STRICT=1``) each raises ``StrictModeError``;
- a tag logged at a step below its highest in the session is stored and warned once
  per tag (strict: raises); a new session (resume) starts its own record;
- a second ``init`` in one process while a run of the same rank is active warns and
  finishes that run first.
"""

from __future__ import annotations

import json
import logging
import os
import tracemalloc

import numpy as np
import pytest

import nblog as nb


def messages(caplog, text):
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def run_json(run):
    with open(f"{run.dir}/run.json") as f:
        return json.load(f)


CALLS = {
    "add_scalar": lambda run: run.add_scalar("loss", 1.0, step=5),
    "add_text": lambda run: run.add_text("note", "hello", step=5),
    "timer": lambda run: run.timer("time").__enter__(),
    "add_image": lambda run: run.add_image("img", np.zeros((4, 4), np.uint8), step=5),
    "add_histogram": lambda run: run.add_histogram("hist", [1.0, 2.0], step=5),
    "add_audio": lambda run: run.add_audio("audio", np.zeros(100, np.float32), step=5, sample_rate=8000),
}


@pytest.mark.parametrize("first", list(CALLS))
def test_calls_after_finish_warn_once_naming_the_first_and_write_nothing(make_run, caplog, first):
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()
    run.add_scalar("loss", 0.5, step=0)
    run.finish()
    size = os.path.getsize(f"{run.dir}/events.r0.s0.log")
    CALLS[first](run)
    for call in CALLS.values():
        call(run)
        call(run)
    run.finish()  # idempotent, and not a misuse
    warned = messages(caplog, "after run.finish()")
    assert warned == [warned[0]] and f"run.{first}()" in warned[0] and run.id in warned[0]
    assert os.path.getsize(f"{run.dir}/events.r0.s0.log") == size
    assert nb.RunReader(run.dir).scalars()["step"].to_list() == [0]


@pytest.mark.parametrize("name", list(CALLS))
def test_calls_after_finish_raise_in_strict_mode(make_run, name):
    run = make_run(strict=True)
    run.finish()
    for _ in range(2):  # every call, not only the first
        with pytest.raises(nb.StrictModeError, match=f"run.{name}\\(\\) called after run.finish"):
            CALLS[name](run)


def test_strict_from_the_environment_raises_after_finish_too(make_run):
    run = make_run(env={"NB_STRICT": "1"})
    run.finish()
    with pytest.raises(nb.StrictModeError):
        run.add_scalar({"a": 1.0})


def test_after_a_with_block_the_run_warns_too(root, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    with nb.init("p", root=root, _environ={}, system=False) as run:
        run.add_scalar("loss", 1.0)
    run.add_scalar("loss", 2.0)
    assert len(messages(caplog, "run.add_scalar() called after run.finish()")) == 1


def test_a_decorated_timer_called_after_finish_warns_and_keeps_nothing(make_run, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()

    @run.timer("time/eval", step=1)
    def evaluate():
        return 42

    assert evaluate() == 42
    run.finish()
    assert evaluate() == 42  # still runs the function
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            evaluate()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 100_000  # 24 bytes a call would pile up in a buffer no writer drains
    assert len(messages(caplog, "run.timer() called after run.finish()")) == 1
    assert nb.RunReader(run.dir).timers()["step"].to_list() == [1]


def test_a_decorated_timer_after_finish_raises_in_strict_mode(make_run):
    run = make_run(strict=True)
    timed = run.timer("t", step=0)(lambda: None)
    run.finish()
    with pytest.raises(nb.StrictModeError, match="run.timer"):
        timed()


def test_a_step_going_back_is_stored_and_warned_once_per_tag(make_run, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()
    run.add_scalar("loss", 1.0, step=10)
    run.add_scalar("loss", 2.0, step=5)
    run.add_scalar("loss", 3.0, step=3)  # the same tag again: no second warning
    run.add_scalar({"acc": 0.1, "lr": 0.2}, step=7)
    run.add_scalar({"acc": 0.3, "lr": 0.4}, step=6)  # both tags go back: one warning each
    run.add_scalar("epoch", 1.0, step=1)  # its own tag: not lower than its own highest
    run.add_text("note", "a", step=8)
    run.add_text("note", "b", step=2)
    run.finish()
    warned = messages(caplog, "earlier in this session")
    assert len(warned) == 4
    assert [tag for tag in ("'loss'", "'acc'", "'lr'", "'note'") if any(tag in w for w in warned)] == [
        "'loss'", "'acc'", "'lr'", "'note'"]
    assert "step 5, lower than its step 10" in warned[0]
    r = nb.RunReader(run.dir)
    frame = r.scalars()
    assert frame.filter(frame["tag"] == "loss")["step"].to_list() == [10, 5, 3]
    assert frame.filter(frame["tag"] == "acc")["step"].to_list() == [7, 6]
    assert r.text()["step"].to_list() == [8, 2]


def test_a_step_going_back_raises_in_strict_mode(make_run):
    run = make_run(strict=True)
    run.add_scalar("loss", 1.0, step=10)
    with pytest.raises(nb.StrictModeError, match="lower than its step 10"):
        run.add_scalar("loss", 2.0, step=9)
    with pytest.raises(nb.StrictModeError):
        run.add_scalar({"loss": 2.0}, step=9)
    run.add_scalar("loss", 3.0, step=10)  # equal is not lower


def test_a_resumed_session_going_below_the_last_one_is_not_warned(root, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    env = {}
    for steps in (range(0, 100), range(50, 60)):
        run = nb.init("p", run_id="back-0001", resume="auto", root=root, _environ=env, system=False)
        for s in steps:
            run.add_scalar("loss", 1.0, step=s)
        run.finish()
    assert messages(caplog, "earlier in this session") == []


def test_a_second_init_warns_and_finishes_the_active_run(root, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    first = nb.init("p", run_name="one", root=root, _environ={}, system=False)
    first.add_scalar("loss", 1.0, step=0)
    second = nb.init("p", run_name="two", root=root, _environ={}, system=False)
    try:
        (warned,) = messages(caplog, "init() called while run")
        assert first.id in warned and "finishing it first" in warned
        meta = run_json(first)
        assert meta["status"] == "finished" and meta["sessions"][0]["end"] is not None
        assert nb.RunReader(first.dir).scalars()["value"].to_list() == [1.0]
        first.add_scalar("loss", 2.0, step=1)  # the old handle now says it is finished
        assert messages(caplog, "called after run.finish()")
        second.add_scalar("loss", 5.0, step=0)
        second.flush()
        assert nb.RunReader(second.dir).scalars()["value"].to_list() == [5.0]
        assert run_json(second)["status"] == "running"
    finally:
        second.finish()


def test_a_second_init_of_another_rank_leaves_the_active_run_alone(root, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    rank0 = nb.init("p", run_id="two-ranks", root=root, _environ={}, system=False)
    rank1 = nb.init("p", root=root, system=False, _environ={
        "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "NB_RUN_ID": "two-ranks", "NB_WAIT_S": "5"})
    try:
        assert messages(caplog, "init() called while run") == []
        assert run_json(rank0)["status"] == "running"
    finally:
        rank1.finish()
        rank0.finish()


def test_strict_mode_errors_say_they_raised_not_that_the_call_was_ignored(make_run):
    """Under NB_STRICT=1 nothing is "ignored" or "skipped": the text says it raised."""
    run = make_run(strict=True)
    run.add_scalar("loss", 1.0, step=10)
    texts = []
    for call in (lambda: run.add_scalar("loss", 2.0, step=9),  # a step going back
                 lambda: run.add_scalar("loss", "high", step=11),  # bad value
                 lambda: run.add_scalar("", 1.0, step=11)):  # bad tag
        with pytest.raises(nb.StrictModeError) as info:
            call()
        texts.append(str(info.value))
    run.finish()
    with pytest.raises(nb.StrictModeError) as info:
        run.add_scalar("loss", 1.0, step=12)
    texts.append(str(info.value))
    for text in texts:
        assert "raised (strict mode" in text, text
        assert not any(w in text for w in ("ignored", "skipped", "stored, and")), text
