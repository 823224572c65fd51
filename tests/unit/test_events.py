"""Failures, alerts and provenance helpers in one process (the real-process tests are
tests/integration/test_failures.py, test_failure_ranks.py and test_provenance.py)."""

from __future__ import annotations

import json
import logging
import os

import pytest

import nblog as nb
from nblog.format import _format as F
from nblog.format._filenames import parse_provenance_file_name, provenance_file_name
from nblog.reader._file.logfile import LogFile
from nblog.write import _provenance as P
from nblog.write import _run
from nblog.write._writer import Writer


def test_alert_levels_rate_limit_and_bad_input(make_run, caplog) -> None:
    run = make_run()
    run.add_scalar("x", 1.0, step=3)
    run.alert("spike", "loss 9.1", level="error")
    run.alert("spike", "again")  # within the minute: counted, not recorded
    run.alert("spike", "and again")
    run.alert("other", 12345, level="loud")  # text made a str; a bad level warns and is "warn"
    run.alert("", "no title")  # warned, ignored
    with caplog.at_level(logging.WARNING, logger="nblog"):
        run.alert(None, object())  # never raises
    run.finish()
    r = nb.RunReader(run.dir)
    rows = r.alerts().select("step", "level", "title", "text", "suppressed").rows()
    assert rows[:2] == [(3, "error", "spike", "loss 9.1", 0), (3, "warn", "other", "12345", 0)]
    assert rows[2][2] == "None" and len(rows) == 3
    (lf,) = r.files(0)
    assert lf.end["dropped"] == {"alert_rate_limited": 2}


def test_suppressed_alerts_are_counted_in_the_next_one(make_run, monkeypatch) -> None:
    run = make_run()
    run.alert("a", "1")
    run.alert("a", "2")
    monkeypatch.setattr(_run, "ALERT_INTERVAL_S", 0.0)  # the minute has passed
    run.alert("a", "3")
    run.finish()
    assert nb.RunReader(run.dir).alerts().select("text", "suppressed").rows() == [("1", 0), ("3", 1)]


def test_alert_after_finish_warns_once(make_run, caplog) -> None:
    run = make_run()
    run.finish()
    with caplog.at_level(logging.WARNING, logger="nblog"):
        run.alert("late")
        run.alert("later")
    assert sum("run.alert() called after run.finish()" in m for m in caplog.messages) == 1


def test_rank_0_failure_in_a_with_block_reaches_run_json(root) -> None:
    with pytest.raises(KeyError):
        with nb.init("p", root=root, _environ={}, system=False, provenance=False) as run:
            run.add_scalar("x", 1.0, step=7)
            raise KeyError("missing column")
    meta = json.loads(open(os.path.join(run.dir, "run.json")).read())
    assert meta["status"] == "failed"
    fail = meta["sessions"][0]["failure"]
    assert (fail["rank"], fail["type"], fail["message"], fail["step"]) == (0, "KeyError", "'missing column'", 7)
    (f,) = nb.RunReader(run.dir).failures().to_dicts()
    assert f["type"] == "KeyError" and "raise KeyError" in f["traceback"]
    from nblog.reader._runs.catalog import run_row

    row = run_row(run.dir)  # nb ls reads run.json only
    assert row["status"] == "failed" and row["failure"]["type"] == "KeyError"


def test_sys_exit_0_in_a_with_block_is_no_failure(root) -> None:
    with pytest.raises(SystemExit):
        with nb.init("p", root=root, _environ={}, system=False, provenance=False) as run:
            raise SystemExit(0)
    assert nb.RunReader(run.dir).failures().is_empty()


def test_hostile_event_fields_read_as_null(tmp_path) -> None:
    path = tmp_path / "p" / "r-1"
    path.mkdir(parents=True)
    w = Writer(str(path / "events.r0.s0.log"), {"rank": 0, "session": 0, "host": 7})
    w.events.append({"kind": "alert", "title": 5, "text": None, "level": "warn", "step": "x", "wall": "y",
                     "suppressed": True})
    w.events.append({"kind": "failure", "type": ["no"], "message": "m", "traceback": 1, "step": 1 << 70})
    w.events.append({"kind": 3})  # not an event kind: ignored
    w.close({"status": "finished"})
    (path / "run.json").write_text("{}")
    r = nb.RunReader(str(path))
    a = r.alerts().row(0, named=True)
    assert (a["title"], a["text"], a["step"], a["wall_time"], a["suppressed"], a["host"]) == (None,) * 6
    f = r.failures().row(0, named=True)
    assert (f["type"], f["message"], f["traceback"], f["step"]) == (None, "m", None, None)


def test_event_frames_are_stats_frames_that_older_readers_skip_silently(tmp_path) -> None:
    """An event is a STATS frame with its counters, so a reader that knows nothing of
    events (every earlier version) counts no unknown frame and keeps its counters."""
    path = str(tmp_path / "events.r0.s0.log")
    w = Writer(path, {"rank": 0})
    w.dropped["bad_value"] = 2
    w.events.append({"kind": "alert", "title": "t", "text": "", "level": "info"})
    w.flush()
    lf = LogFile(path)
    lf.poll()
    assert lf.unknown_frames == 0 and lf.skipped_bytes == 0
    (stats,) = lf.stats
    assert stats["dropped"] == {"bad_value": 2} and stats["event"]["title"] == "t"
    assert lf.events == [stats["event"]]
    with open(path, "rb") as f:
        data = f.read()
    assert data[8 + 3] == F.FRAME_SESSION and F.FRAME_STATS in data
    w.close({"status": "finished"})


def test_secret_names_and_url_userinfo() -> None:
    env = {"SLURM_JOB_ID": "1", "NCCL_DEBUG": "INFO", "MY_API_TOKEN": "t", "AWS_REGION": "r",
           "NCCL_IB_PASSWORD": "p", "TORCH_URL": "https://u:p@h/x?y=1", "HOME": "/root", "HF_TOKEN": "h",
           "SLURM_AUTH_X": "a", "CUDA_VISIBLE_DEVICES": "0", "WANDB_API_KEY": "w"}
    assert P.safe_env(env) == {"CUDA_VISIBLE_DEVICES": "0", "NCCL_DEBUG": "INFO", "SLURM_JOB_ID": "1",
                               "TORCH_URL": "https://h/x?y=1"}
    assert P.strip_userinfo("a postgres://u:pw@db:5432/x and git+ssh://me@h/r") == \
        "a postgres://db:5432/x and git+ssh://h/r"
    assert P.safe_argv(["t.py", "--lr", "3e-4", "--hf-token", "abc", "--api_key=xyz", "-k", "v",
                        "--data", "s3://ak:sk@bucket/p"]) == \
        ["t.py", "--lr", "3e-4", "--hf-token", "<redacted>", "--api_key=<redacted>", "-k", "v",
         "--data", "s3://bucket/p"]


def test_provenance_file_names_round_trip() -> None:
    assert parse_provenance_file_name(provenance_file_name(3, 12)) == (3, 12)
    assert parse_provenance_file_name("provenance.r3.s12.diff") is None
    assert parse_provenance_file_name("provenance.r-1.s0.json") is None


def test_nb_show_prints_hostile_failures_and_alerts_inert(make_run) -> None:
    import subprocess
    import sys

    run = make_run()
    run.add_scalar("x", 1.0, step=1)
    run.alert("\x1b[31mred\x1b[0m [bold]t[/bold]", "\x1b]0;title\x07 text", level="error")
    run._log_failure(RuntimeError, RuntimeError("\x1b[2J wiped \u202e"), None)
    run.finish("failed")
    out = subprocess.run([sys.executable, "-c", "from nbcli.app import main; main()", "show", run.dir],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(nb.__file__))})
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout and "\u202e" not in out.stdout
    assert "failed: rank 0" in out.stdout and "wiped" in out.stdout and "[bold]t[/bold]" in out.stdout


@pytest.mark.parametrize("alive", [True, False])
def test_an_open_session_of_a_live_process_here_is_not_called_ended(tmp_path, alive: bool) -> None:
    """Rank 0 ended; rank 1's session has no END record yet. When rank 1's process runs
    on this machine and is alive (blocked in a collective), it is not listed."""
    import subprocess
    import sys

    from nblog.format._host import hostname
    from nblog.reader._answers.overview import incidents

    run_dir = tmp_path / "p" / "r-1"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"status": "running", "sessions": [{"session": 0}]}))
    w0 = Writer(str(run_dir / "events.r0.s0.log"), {"rank": 0, "session": 0})
    w0.close({"status": "failed"})
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        if not alive:
            child.kill()
            child.wait()
        w1 = Writer(str(run_dir / "events.r1.s0.log"), {"rank": 1, "session": 0, "host": hostname(os.environ),
                                                         "pid": child.pid})
        w1.flush()
        unended = incidents(nb.RunReader(str(run_dir)), status="running")["unended"]
        assert [u["rank"] for u in unended] == ([] if alive else [1])
        w1.forget()
    finally:
        child.kill()
        child.wait()
