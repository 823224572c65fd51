"""A step that add_scalar refuses (past int64) changes nothing: not the session's last
step in run.json, not a tag's highest step, not where a resumed counter starts."""

from __future__ import annotations

import json
import logging

import nblog as nb


def test_a_refused_step_is_not_the_last_step_and_a_resume_continues_after_the_stored_one(tmp_path, caplog):
    kw = dict(run_id="big-00000001", root=str(tmp_path), system=False, provenance=False, _environ={})
    run = nb.init("p", **kw)
    run.add_scalar("x", 1.0, step=5)
    with caplog.at_level(logging.WARNING, logger="nblog"):
        run.add_scalar("x", 2.0, step=2**64)
        run.add_scalar({"y": 2.0}, step=2**63)
        run.add_scalar("x", 0.5, step=6)  # not "lower than its step 2**64 earlier"
    assert "step must be in [0, 2**63)" in caplog.text and "lower than" not in caplog.text
    run.finish()
    with open(tmp_path / "p" / "big-00000001" / "run.json") as f:
        assert json.load(f)["sessions"][0]["last_step"] == 6
    again = nb.init("p", resume="must", **kw)
    again.add_scalar("x", 3.0)
    again.finish()
    frame = nb.RunReader(again.dir).scalars()
    assert frame["step"].to_list() == [5, 6, 7] and frame["value"].to_list() == [1.0, 0.5, 3.0]
