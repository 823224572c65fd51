"""A timer or text before a session's first step waits for that step.

A resumed session starts with no current step. Before this rule a timer around data
loading, run before the first add_scalar, was logged at step 0: the session's first
step became 0 and every earlier point of that rank was hidden.
"""

from __future__ import annotations

import nblog as nb


def _env(root):
    return {"NB_DIR": str(root)}


def test_timer_before_first_add_scalar_takes_that_step_and_hides_nothing_early(tmp_path):
    run = nb.init("p", run_id="d-1", system=False, _environ=_env(tmp_path))
    for step in range(10):
        run.add_scalar("loss", float(step), step=step)
    run.finish()

    resumed = nb.init("p", run_id="d-1", resume="auto", system=False, _environ=_env(tmp_path))
    with resumed.timer("time/data"):  # before any step is known in this session
        pass
    resumed.add_text("note", "resumed")  # also before any step
    resumed.add_scalar("loss", 50.0, step=6)
    resumed.finish()

    r = nb.RunReader(resumed.dir)
    assert r.scalars("loss")["step"].to_list() == [0, 1, 2, 3, 4, 5, 6]
    assert r.timers("time/data")["step"].to_list() == [6]
    assert r.text("note")["step"].to_list() == [6]
    assert [s["first_step"] for s in r.sessions()] == [0, 6]


def test_waiting_timer_is_written_at_finish_when_no_step_comes(tmp_path):
    run = nb.init("p", run_id="d-2", system=False, _environ=_env(tmp_path))
    with run.timer("setup"):
        pass
    run.finish()
    assert nb.RunReader(run.dir).timers("setup")["step"].to_list() == [0]


def test_add_scalar_is_the_plain_method_again_once_the_step_is_known(tmp_path):
    run = nb.init("p", run_id="d-3", system=False, _environ=_env(tmp_path))
    with run.timer("t"):
        pass
    assert "add_scalar" in run.__dict__  # waiting: add_scalar is wrapped
    run.add_scalar("x", 1.0, step=3)
    assert "add_scalar" not in run.__dict__  # the hot path is the class method again
    run.add_scalar("x", 2.0, step=4)
    run.finish()
    r = nb.RunReader(run.dir)
    assert r.timers("t")["step"].to_list() == [3]
    assert r.scalars("x")["step"].to_list() == [3, 4]
