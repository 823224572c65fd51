"""SIGTERM / Slurm preemption: what tests/integration/test_crash_and_signals.py does not
already cover (default action, a user's handler installed before init that exits, an
ignored SIGTERM, an uncaught exception, interpreter exit).

Added here: a training loop that catches SIGTERM itself to checkpoint and goes on
logging; a handler installed *after* init that chains to the previous one (nb's); a
handler installed after init that replaces nb's and lets the loop end normally; and
three ranks preempted together with every rank's buffered timers on disk, then
requeued into the same run. The children flush every 60 s, so what is on disk right
after the signal was written by nb's handler.
"""

from __future__ import annotations

import json
import signal
import textwrap

import pytest
from hardkit import clean_env, communicate, start_child

import nblog as nb

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

N = 3000
PRELUDE = "import os, signal, sys, time\nimport nblog as nb\n"


def child(body: str) -> str:
    return PRELUDE + textwrap.dedent(body)


def readline(proc) -> str:
    return proc.stdout.readline().strip()


def steps(root, run_id, **kw) -> list[int]:
    return nb.RunReader(run_id, root=str(root)).scalars("x", **kw)["step"].to_list()


def test_a_loop_that_catches_sigterm_checkpoints_and_keeps_logging(tmp_path):
    root = tmp_path / "runs"
    proc = start_child(child(f"""
        stop = False
        def on_term(signum, frame):  # the training loop's own handler: checkpoint at the next step
            global stop
            stop = True
        signal.signal(signal.SIGTERM, on_term)
        run = nb.init("pre", run_id="ckpt-00000000", system=False, flush_interval=60)
        step = 0
        while not stop:
            run.add_scalar("x", float(step), step=step)
            step += 1
            if step == {N}:
                print("READY", flush=True)
        print("STOPPED", step, flush=True)
        sys.stdin.readline()
        run.add_text("ckpt", f"checkpoint at {{step}}", step=step - 1)
        for s in range(step, step + 10):
            run.add_scalar("x", float(s), step=s)
        run.finish()
    """), [], clean_env(NB_DIR=str(root)), stdin=-1)
    assert readline(proc) == "READY"
    proc.send_signal(signal.SIGTERM)
    line = readline(proc)
    assert line.startswith("STOPPED"), communicate(proc)
    n = int(line.split()[1])
    on_disk = steps(root, "ckpt-00000000")
    assert on_disk == list(range(len(on_disk))) and len(on_disk) >= n - 1  # the step in flight may follow
    proc.stdin.write("\n")
    proc.stdin.flush()
    rc, _out, err = communicate(proc)
    assert rc == 0, err
    r = nb.RunReader("ckpt-00000000", root=str(root))
    assert r.scalars("x")["step"].to_list() == list(range(n + 10))
    assert r.text()["text"].to_list() == [f"checkpoint at {n}"]
    (s0,) = r.sessions()
    assert s0["end"]["status"] == "finished" and s0["end"]["reason"] is None
    meta = json.loads((root / "pre" / "ckpt-00000000" / "run.json").read_text())
    assert meta["status"] == "finished"


def test_a_handler_installed_after_init_that_chains_runs_then_nb_flushes_and_the_process_dies(tmp_path):
    root = tmp_path / "runs"
    proc = start_child(child(f"""
        run = nb.init("pre", run_id="chain-00000000", system=False, flush_interval=60)
        previous = signal.getsignal(signal.SIGTERM)  # nb's
        def on_term(signum, frame):
            print("CHECKPOINT", flush=True)
            previous(signum, frame)
        signal.signal(signal.SIGTERM, on_term)
        for step in range({N}):
            run.add_scalar("x", float(step), step=step)
        print("READY", flush=True)
        signal.pause()
        print("ALIVE", flush=True)
    """), [], clean_env(NB_DIR=str(root)))
    assert readline(proc) == "READY"
    proc.send_signal(signal.SIGTERM)
    rc, out, err = communicate(proc)
    assert rc == -signal.SIGTERM, err
    assert "CHECKPOINT" in out and "ALIVE" not in out
    assert steps(root, "chain-00000000") == list(range(N))
    (s0,) = nb.RunReader("chain-00000000", root=str(root)).sessions()
    assert s0["end"]["reason"] == "SIGTERM"


def test_a_handler_that_replaces_nbs_after_init_still_gets_everything_on_disk_at_exit(tmp_path):
    """Some frameworks install their own SIGTERM handler after nb.init without chaining;
    nb's handler then never runs, but the loop ends normally and exit flushes."""
    root = tmp_path / "runs"
    proc = start_child(child(f"""
        run = nb.init("pre", run_id="repl-00000000", system=False, flush_interval=60)
        stop = False
        def on_term(signum, frame):
            global stop
            stop = True
        signal.signal(signal.SIGTERM, on_term)
        step = 0
        while not stop:
            run.add_scalar("x", float(step), step=step)
            step += 1
            if step == {N}:
                print("READY", flush=True)
        print("LOGGED", step, flush=True)
        sys.exit(0)  # no finish(): the exit hook flushes and finishes
    """), [], clean_env(NB_DIR=str(root)))
    assert readline(proc) == "READY"
    proc.send_signal(signal.SIGTERM)
    rc, out, err = communicate(proc)
    assert rc == 0, err
    n = int(out.split("LOGGED")[1].split()[0])
    assert steps(root, "repl-00000000") == list(range(n))
    meta = json.loads((root / "pre" / "repl-00000000" / "run.json").read_text())
    assert meta["status"] == "finished"


def slurm_env(procid: int, ntasks: int, job_id: str, restart: int | None = None, **extra) -> dict:
    env = clean_env(SLURM_PROCID=str(procid), SLURM_LOCALID=str(procid), SLURM_NTASKS=str(ntasks),
                    SLURM_NODEID="0", SLURM_NNODES="1", SLURM_JOB_ID=job_id, SLURM_JOBID=job_id,
                    SLURM_STEP_ID="0", SLURM_JOB_NODELIST="node1", **extra)
    if restart:
        env["SLURM_RESTART_COUNT"] = str(restart)
    return env


PREEMPTED = """
run = nb.init("pre", run_name="job", system=False, flush_interval=60, timing_all_ranks=True)
start, stop = int(sys.argv[1]), int(sys.argv[2])
for step in range(start, stop):
    run.add_scalar("x", float(step), step=step)
    with run.timer("step"):
        pass
print("READY", run.id, run.session, flush=True)
if sys.argv[3] == "wait":
    signal.pause()
    print("ALIVE", flush=True)
"""


def test_every_rank_preempted_together_keeps_its_buffered_timers_then_the_requeue_continues(tmp_path):
    world = 3
    root = tmp_path / "runs"
    procs = [start_child(child(PREEMPTED), ["0", "200", "wait"], slurm_env(r, world, "4242", NB_DIR=str(root)))
             for r in range(world)]
    ready = [readline(p).split() for p in procs]
    assert all(x[0] == "READY" for x in ready), [communicate(p) for p in procs]
    run_id = ready[0][1]
    assert {x[1] for x in ready} == {run_id}
    for p in procs:  # Slurm signals every task of the step
        p.send_signal(signal.SIGTERM)
    for p in procs:
        rc, out, err = communicate(p)
        assert rc == -signal.SIGTERM and "ALIVE" not in out, err
    r = nb.RunReader(run_id, root=str(root))
    for rank in range(world):
        assert r.timers("step", rank=rank)["step"].to_list() == list(range(200))
        (s0,) = r.sessions(rank)
        assert s0["end"]["reason"] == "SIGTERM"
    assert r.scalars("x")["step"].to_list() == list(range(200))

    procs = [start_child(child(PREEMPTED), ["150", "250", "finish"],
                         slurm_env(r, world, "4242", restart=1, NB_DIR=str(root))) for r in range(world)]
    for p in procs:
        rc, out, err = communicate(p)
        assert rc == 0, err
        assert out.split()[1:] == [run_id, "1"]
    r = nb.RunReader(run_id, root=str(root))
    for rank in range(world):
        rows = r.timers("step", rank=rank)[["session", "step"]].rows()
        assert rows == [(0, s) for s in range(150)] + [(1, s) for s in range(150, 250)]
        assert [s["restart_counts"] for s in r.sessions(rank)] == [{}, {"SLURM_RESTART_COUNT": "1"}]
    meta = json.loads((root / "pre" / run_id / "run.json").read_text())
    assert meta["status"] == "finished"
    assert [s["end_reason"] for s in meta["sessions"]] == ["SIGTERM", None]
