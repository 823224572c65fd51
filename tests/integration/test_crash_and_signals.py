"""What reaches the disk when a process dies: kill -9, SIGTERM, an uncaught exception.

The children log with a long flush interval, so anything found on disk after a
SIGTERM or an exception was written by nblog's handlers, not by the writer thread's
periodic flush.
"""

from __future__ import annotations

import json
import signal
import textwrap

import pytest
from _nbproc import base_env, read_line, start_code, wait

import nblog as nb

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

N = 5000


def child(body: str) -> str:
    return "import os, signal, sys\nimport nblog as nb\n" + textwrap.dedent(body)


def reader(root, run_id):
    return nb.RunReader(run_id, root=str(root))


def test_kill_9_leaves_a_clean_prefix_and_a_later_session_appends(tmp_path):
    root = tmp_path / "runs"
    env = base_env(NB_DIR=str(root))
    proc = start_code(child("""
        run = nb.init("crash", run_id="k9-00000000", system=False, flush_interval=0.01)
        step = 0
        while True:  # the writer thread drains concurrently; flush() is a barrier
            run.add_scalar("x", float(step), step=step)
            step += 1
            if step % 2000 == 0:
                run.flush()
                print(step, flush=True)
    """), env, tmp_path)
    reported = 0
    while reported < 5 * 2000:
        line = read_line(proc)
        assert line, wait(proc, expect_rc=None)
        reported = int(line)
    proc.send_signal(signal.SIGKILL)
    assert wait(proc, expect_rc=None).rc == -signal.SIGKILL

    r = reader(root, "k9-00000000")
    df = r.scalars()
    n = len(df)
    assert n >= reported  # everything up to the last flush the child reported
    assert df["step"].to_list() == list(range(n))  # exactly a prefix, in order
    assert df["value"].to_list() == [float(s) for s in range(n)]
    (s0,) = r.sessions()
    assert s0["skipped_bytes"] == 0 and s0["end"] is None
    log0 = root / "crash" / "k9-00000000" / "events.r0.s0.log"
    killed_bytes = log0.read_bytes()

    restart = reported // 2  # resume from an older checkpoint
    wait(start_code(child(f"""
        run = nb.init("crash", run_id="k9-00000000", resume="auto", system=False)
        assert run.session == 1
        for step in range({restart}, {restart} + 100):
            run.add_scalar("x", -float(step), step=step)
        run.finish()
    """), env, tmp_path))
    assert log0.read_bytes() == killed_bytes  # the killed session's file is never touched
    r = reader(root, "k9-00000000")
    df = r.scalars()
    assert df["step"].to_list() == list(range(restart + 100))
    assert df["value"].to_list() == [float(s) for s in range(restart)] + [-float(s) for s in range(restart, restart + 100)]
    assert len(r.scalars(include_hidden=True)) == n + 100
    meta = json.loads((root / "crash" / "k9-00000000" / "run.json").read_text())
    assert [s["end"] is None for s in meta["sessions"]] == [True, False]
    assert meta["status"] == "finished"


LOG_N_AND_WAIT = f"""
    run = nb.init("sig", run_id="t-00000000", system=False, flush_interval=60)
    for step in range({N}):
        run.add_scalar("x", float(step), step=step)
    run.add_text("t", "last words", step={N} - 1)
    print("READY", flush=True)
    # Wait for nb's SIGTERM handler to have flushed (the writer alone would not for a
    # minute). Not signal.pause(): a signal landing just before it would leave the
    # process paused forever once the handler returns (SIGTERM ignored).
    import time
    log = os.path.join(run.dir, "events.r0.s0.log")
    deadline = time.monotonic() + 30
    def flushed():  # the text, logged after every point, is on disk (any frame encoding)
        with open(log, "rb") as f:
            return b"last words" in f.read()
    while not flushed() and time.monotonic() < deadline:
        time.sleep(0.01)
    print("ALIVE", flush=True)
    os._exit(0)  # no finish, no atexit: only a SIGTERM handler can have flushed
"""


def start_and_wait_ready(tmp_path, prelude=""):
    root = tmp_path / "runs"
    proc = start_code(child(prelude + LOG_N_AND_WAIT), base_env(NB_DIR=str(root)), tmp_path)
    assert read_line(proc) == "READY", wait(proc, expect_rc=None)
    # nothing is on disk yet: the writer thread would not flush for a minute
    assert len(reader(root, "t-00000000").scalars()) == 0
    return root, proc


def test_sigterm_flushes_everything_then_dies_of_sigterm(tmp_path):
    root, proc = start_and_wait_ready(tmp_path)
    proc.send_signal(signal.SIGTERM)
    done = wait(proc, expect_rc=-signal.SIGTERM)
    assert "ALIVE" not in done.out
    r = reader(root, "t-00000000")
    assert r.scalars()["step"].to_list() == list(range(N))
    assert r.text()["text"].to_list() == ["last words"]
    (s0,) = r.sessions()
    assert s0["end"]["reason"] == "SIGTERM"
    meta = json.loads((root / "sig" / "t-00000000" / "run.json").read_text())
    assert meta["sessions"][0]["end_reason"] == "SIGTERM"


def test_a_run_stopped_by_sigterm_lists_as_preempted_not_running_or_stale(tmp_path):
    """run.json keeps status "running" (a requeue is expected), but its last session
    has ended: nb ls says "preempted", at once and long after (never "stale", which
    means killed without a word); a requeue's new session is "running" again."""
    import time

    from nblog.reader._runs.catalog import STALE_AFTER_S, run_row

    root, proc = start_and_wait_ready(tmp_path)
    proc.send_signal(signal.SIGTERM)
    wait(proc, expect_rc=-signal.SIGTERM)
    run_dir = root / "sig" / "t-00000000"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
    assert run_row(str(run_dir))["status"] == "preempted"
    assert run_row(str(run_dir), now=time.time() + 10 * STALE_AFTER_S)["status"] == "preempted"
    run = nb.init("sig", run_id="t-00000000", root=str(root), resume="auto", system=False, _environ={})
    assert run_row(str(run_dir))["status"] == "running"
    run.finish()
    assert run_row(str(run_dir))["status"] == "finished"


def test_sigterm_flushes_before_a_user_handler_installed_earlier_runs(tmp_path):
    prelude = """
    def on_term(signum, frame):  # a user's own handler: checkpoint and leave
        print("USER HANDLER", flush=True)
        os._exit(7)  # no atexit: what is on disk was flushed before this ran
    signal.signal(signal.SIGTERM, on_term)
    """
    root, proc = start_and_wait_ready(tmp_path, prelude)
    proc.send_signal(signal.SIGTERM)
    done = wait(proc, expect_rc=7)
    assert "USER HANDLER" in done.out
    r = reader(root, "t-00000000")
    assert r.scalars()["step"].to_list() == list(range(N))
    assert r.text()["text"].to_list() == ["last words"]


def test_sigterm_flushes_and_an_ignored_sigterm_stays_ignored(tmp_path):
    root, proc = start_and_wait_ready(tmp_path, "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n")
    proc.send_signal(signal.SIGTERM)
    assert read_line(proc) == "ALIVE"
    wait(proc)
    r = reader(root, "t-00000000")
    assert r.scalars()["step"].to_list() == list(range(N))


@pytest.mark.parametrize("where", ["main", "with block"])
def test_an_uncaught_exception_marks_the_run_failed_with_its_points_on_disk(tmp_path, where):
    root = tmp_path / "runs"
    body = f"""
        run = nb.init("exc", run_id="e-00000000", system=False, flush_interval=60)
        for step in range({N}):
            run.add_scalar("x", float(step), step=step)
        raise RuntimeError("boom")
    """
    if where == "with block":
        body = f"""
        with nb.init("exc", run_id="e-00000000", system=False, flush_interval=60) as run:
            for step in range({N}):
                run.add_scalar("x", float(step), step=step)
            raise RuntimeError("boom")
        """
    done = wait(start_code(child(body), base_env(NB_DIR=str(root)), tmp_path), expect_rc=1)
    assert "RuntimeError: boom" in done.err  # the previous excepthook still prints it
    r = reader(root, "e-00000000")
    assert r.scalars()["step"].to_list() == list(range(N))
    (s0,) = r.sessions()
    assert s0["end"]["status"] == "failed"
    meta = json.loads((root / "exc" / "e-00000000" / "run.json").read_text())
    assert meta["status"] == "failed"


def test_interpreter_exit_without_finish_flushes_and_finishes(tmp_path):
    root = tmp_path / "runs"
    wait(start_code(child(f"""
        run = nb.init("exit", run_id="x-00000000", system=False, flush_interval=60)
        for step in range({N}):
            run.add_scalar("x", float(step), step=step)
    """), base_env(NB_DIR=str(root)), tmp_path))
    r = reader(root, "x-00000000")
    assert r.scalars()["step"].to_list() == list(range(N))
    meta = json.loads((root / "exit" / "x-00000000" / "run.json").read_text())
    assert meta["status"] == "finished"


def test_after_kill_9_nb_show_takes_the_last_step_from_the_event_log(tmp_path):
    """run.json's last_step is a progress update every few seconds, which a kill -9
    can leave far behind; nb show reads the event logs anyway, so its Sessions table
    and run row say the log's last step, as its event-log table does."""
    from nblog.reader._answers.overview import overview

    root = tmp_path / "runs"
    proc = start_code(child("""
        # no periodic drain (so no progress update) before the kill: flush() drains
        run = nb.init("crash", run_id="k9-laststep", system=False, flush_interval=60)
        run.add_scalar("x", 0.0, step=0)
        run.flush()  # the first step's record in run.json
        for step in range(1, 728):
            run.add_scalar("x", float(step), step=step)
        run.flush()
        print("LOGGED", flush=True)
        import time
        time.sleep(120)
    """), base_env(NB_DIR=str(root), NB_PROGRESS_S="3600"), tmp_path)
    assert read_line(proc) == "LOGGED", wait(proc, expect_rc=None)
    proc.send_signal(signal.SIGKILL)
    wait(proc, expect_rc=None)
    meta = json.loads((root / "crash" / "k9-laststep" / "run.json").read_text())
    assert meta["sessions"][0]["last_step"] == 0  # the first step's record only
    o = overview(reader(root, "k9-laststep"))
    assert o["files"][0]["last_step"] == 727
    assert o["sessions"][0]["last_step"] == 727
    assert o["run"]["last_step"] == 727
