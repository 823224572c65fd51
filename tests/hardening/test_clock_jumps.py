"""The wall clock jumping (NTP step, a VM restored, a wrong clock on the next node of
a requeued job) breaks neither ordering, active time nor the hiding rule: nb records
milliseconds of a monotonic clock since the session's start, and steps decide what
is hidden (man 5 nb-format: a wall clock that jumps during a run moves no point).

The children replace ``time.time`` before importing nblog (no root clock change):
session 0 starts at the true time and its clock goes back a day halfway through;
session 1 (a resume from step 60) starts two days in the past, then its clock
jumps a year ahead.
"""

from __future__ import annotations

import json
import textwrap

import numpy as np
from hardkit import clean_env, communicate, start_child
from typer.testing import CliRunner

import nblog as nb
from nbcli.app import app
from nblog.reader._runs.catalog import list_runs
from nblog.reader._views.live import LiveRun

DAY = 86400.0
CHILD = textwrap.dedent("""
    import sys, time
    _real = time.time
    offset = [float(sys.argv[3])]
    time.time = lambda: _real() + offset[0]   # the wall clock every module sees
    import nblog as nb

    start, stop, jump_at, jump = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[4]), float(sys.argv[5])
    run = nb.init("clk", run_id="clk-00000000", resume="auto", system=False, flush_interval=60)
    for step in range(start, stop):
        if step == jump_at:
            run.flush()
            offset[0] += jump
        run.add_scalar("x", float(step), step=step)
        with run.timer("t"):
            time.sleep(0.002)  # monotonic time passes
        if step % 10 == 0:
            run.add_text("note", f"at {step}", step=step)
    run.finish()
""")


def session(root, start, stop, offset, jump_at, jump):
    rc, _out, err = communicate(start_child(CHILD, [str(start), str(stop), str(offset), str(jump_at), str(jump)],
                                            clean_env(NB_DIR=str(root))))
    assert rc == 0, err


def test_wall_clock_jumps_move_no_point_and_hide_by_steps(tmp_path):
    root = tmp_path / "runs"
    session(root, 0, 100, 0.0, 50, -DAY)  # back a day at step 50
    session(root, 60, 120, -2 * DAY, 90, 365 * DAY)  # starts in the past, then a year ahead
    r = nb.RunReader("clk-00000000", root=str(root))

    df = r.scalars("x")
    assert df["step"].to_list() == list(range(120))  # steps decide: s0's 60..99 hidden
    assert df["session"].to_list() == [0] * 60 + [1] * 60
    assert df["value"].to_list() == [float(s) for s in range(120)]
    assert r.timers("t")["step"].to_list() == list(range(120))
    assert r.text()["step"].to_list() == list(range(0, 120, 10))
    full = r.scalars("x", include_hidden=True)
    assert full.filter(full["hidden"])["step"].to_list() == list(range(60, 100))

    for s in (0, 1):  # within a session, wall time follows the monotonic clock
        wall = df.filter(df["session"] == s)["wall_time"].to_numpy()
        assert (np.diff(wall) >= 0).all() and wall[-1] - wall[0] < 60
    active = df["active_time"].to_numpy()
    assert (np.diff(active) >= 0).all()  # one axis across sessions, whatever the clock did
    s0, s1 = r.sessions()
    assert s1["first_step"] == 60 and s0["hidden_points"] == 84  # 40 scalars, 40 timers, 4 texts
    assert active[60] >= s0["duration_s"] and s0["duration_s"] < 60 and s1["duration_s"] < 60
    assert s1["wall_start"] < s0["wall_start"]  # the clock really went back

    series = LiveRun(r.dir).series(0, ["x"])["x"]  # the TUI's reader
    assert series.step.tolist() == list(range(120))
    assert (np.diff(series.x("active")) >= 0).all()

    meta = json.loads((root / "clk" / "clk-00000000" / "run.json").read_text())
    assert [s["first_step"] for s in meta["sessions"]] == [0, 60] and meta["status"] == "finished"
    (row,) = list_runs(root)
    assert row["status"] == "finished"
    assert 0 <= row["duration_s"] < 60, row  # nb ls: active time too, not wall-clock differences
    res = CliRunner().invoke(app, ["show", "clk-00000000", "--root", str(root), "--json"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["ls", "--root", str(root), "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)[0]["duration_s"] >= 0
