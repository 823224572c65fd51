"""nblog.RunReader: the hiding rule across several sessions of one rank, in one process."""

from __future__ import annotations

import nblog as nb


def session(make_run, steps, **kwargs):
    run = make_run(run_id="hide-00000000", resume="auto", **kwargs)
    for step in steps:
        run.add_scalar("x", float(run.session), step=step)
    run.finish()
    return run


def test_the_earliest_later_restart_hides(make_run):
    session(make_run, range(0, 100))  # s0
    session(make_run, range(60, 70))  # s1: restart from 60
    session(make_run, range(30, 40))  # s2: restart from 30, before s1's first step
    run = session(make_run, [])  # s3: logs nothing, hides nothing
    r = nb.RunReader(run.dir)
    assert r.scalars()[["session", "step"]].rows() == [(0, s) for s in range(30)] + [(2, s) for s in range(30, 40)]
    full = r.scalars(include_hidden=True)
    assert len(full) == 120
    hidden = full.filter(full["hidden"])[["session", "step"]].rows()
    assert hidden == [(0, s) for s in range(30, 100)] + [(1, s) for s in range(60, 70)]
    assert [s["hidden_points"] for s in r.sessions()] == [70, 10, 0, 0]
    assert [s["first_step"] for s in r.sessions()] == [0, 60, 30, None]


def test_a_restart_at_a_later_step_hides_nothing(make_run):
    session(make_run, range(0, 10))
    run = session(make_run, range(10, 20))
    r = nb.RunReader(run.dir)
    assert r.scalars()["step"].to_list() == list(range(20))
    assert "hidden" not in r.scalars().columns


def test_a_reader_sees_a_new_session_after_refresh(make_run):
    first = session(make_run, range(0, 10))
    r = nb.RunReader(first.dir)
    assert len(r.scalars()) == 10
    session(make_run, range(5, 8))
    r.refresh()
    assert r.scalars()["step"].to_list() == list(range(8))
