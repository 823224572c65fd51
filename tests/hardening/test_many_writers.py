"""256 processes logging into one run at once (SPEC §3: no locks and no shared file
between ranks; each writing rank owns its files).

Each process gets torchrun's variables for one machine of 256 ranks (RANK,
WORLD_SIZE=256, LOCAL_RANK, ...), a shared NB_RUN_ID and ``timing_all_ranks=True``,
and all of them are alive at once: each one waits at a barrier after init, logs when
every one of them is up, flushes, and waits again until every one has logged before
it finishes. Then every point of every rank must be there, and each process held
exactly its own event log open.

By default the 256 processes are forked from one interpreter that imported nblog
(``_many_forkserver.py``: seconds on 2 cores); ``NB_HARDENING_FULL=1`` also starts
256 separate interpreters, in batches (a minute or more on 2 cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import polars as pl
import pytest
from hardkit import FULL, HERE, clean_env, torchrun_env

import nblog as nb

WORLD = 256
STEPS = 20 if not FULL else 200
BATCH = 32
CHILD = textwrap.dedent(f"""
    import sys
    import nblog as nb
    run = nb.init("many", timing_all_ranks=True, system=False, flush_interval=60)
    print("READY", run.rank, flush=True)
    sys.stdin.readline()  # every rank is up
    for step in range({STEPS}):
        run.add_scalar("loss", step + run.rank / 1000, step=step)  # kept on rank 0 only
        with run.timer("step", step=step):
            pass
        with run.timer("data", step=step):
            pass
    run.flush()
    print("LOGGED", flush=True)
    sys.stdin.readline()  # every rank has logged: all alive, files open
    run.finish()
    print("DONE", flush=True)
""")


@pytest.mark.skipif(not FULL, reason="256 separate interpreters: NB_HARDENING_FULL=1")
def test_256_interpreters_log_into_one_run_at_once(tmp_path, capsys):
    root = tmp_path / "runs"
    errlog = open(tmp_path / "stderr.log", "w")  # noqa: SIM115
    procs: list[subprocess.Popen] = []
    t0 = time.monotonic()
    try:
        for first in range(0, WORLD, BATCH):
            batch = []
            for rank in range(first, first + BATCH):
                env = torchrun_env(rank, WORLD, NB_DIR=str(root), NB_RUN_ID="many-00000000", NB_WAIT_S="300")
                batch.append(subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=errlog, text=True))
            for p in batch:
                line = p.stdout.readline().split()
                assert line[:1] == ["READY"], (line, (tmp_path / "stderr.log").read_text()[-3000:])
            procs += batch
        started = time.monotonic() - t0
        assert all(p.poll() is None for p in procs)  # 256 alive
        for p in procs:
            p.stdin.write("\n")
            p.stdin.flush()
        for p in procs:
            assert p.stdout.readline().strip() == "LOGGED", (tmp_path / "stderr.log").read_text()[-3000:]
        assert all(p.poll() is None for p in procs)  # all logged, all still alive
        fds = sum(1 for p in procs for f in os.listdir(f"/proc/{p.pid}/fd")
                  if os.path.basename(os.readlink(f"/proc/{p.pid}/fd/{f}")).startswith("events."))
        assert fds == WORLD  # each rank holds exactly its own event log open
        for p in procs:
            p.stdin.write("\n")
            p.stdin.flush()
        for p in procs:
            out, _ = p.communicate(timeout=300)
            assert p.returncode == 0 and out.strip() == "DONE", (tmp_path / "stderr.log").read_text()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        errlog.close()
    elapsed = time.monotonic() - t0

    timers = check_run(root)
    with capsys.disabled():
        print(f"\n{WORLD} interpreters: all alive after {started:.1f} s, {len(timers)} timer points, {elapsed:.1f} s")


def check_run(root) -> pl.DataFrame:
    """Every point of every rank, once; every session ended cleanly."""
    r = nb.RunReader("many-00000000", root=str(root))
    assert r.ranks() == list(range(WORLD))
    timers = r.timers(all_ranks=True)
    assert len(timers) == WORLD * STEPS * 2
    counts = timers.group_by("rank", "tag").agg(pl.col("step").sort().alias("steps"))
    assert len(counts) == WORLD * 2
    assert all(steps == list(range(STEPS)) for steps in counts["steps"].to_list())
    assert r.scalars()[["step", "value"]].rows() == [(s, float(s)) for s in range(STEPS)]
    for rank in (0, 1, 127, 255):
        (s,) = r.sessions(rank)
        assert s["end"]["status"] == "finished" and s["skipped_bytes"] == 0 and s["pending_bytes"] == 0
    stats = r.timer_stats(all_ranks=True)
    assert len(stats) == WORLD * 2 and set(stats["count"].to_list()) == {STEPS}
    files = sorted(f.name for f in (root / "many" / "many-00000000").iterdir()
                   if not f.name.startswith("provenance."))  # rank 0's, a thread of its own
    assert files == sorted(["run.json"] + [f"events.r{k}.s0.log" for k in range(WORLD)])
    return timers


def test_256_forked_processes_log_into_one_run_at_once(tmp_path, capsys):
    root = tmp_path / "runs"
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, str(HERE / "_many_forkserver.py"), str(WORLD), str(STEPS)],
                         env=clean_env(NB_DIR=str(root), NB_RUN_ID="many-00000000", NB_WAIT_S="300"),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().split()
        assert line[:1] == ["PIDS"] and len(line) == WORLD + 1, (line, p.stderr.read() if p.poll() is not None else "")
        pids = [int(x) for x in line[1:]]
        alive = time.monotonic() - t0
        held = []
        for pid in pids:  # all alive at once, each holding exactly its own event log
            names = [os.path.basename(os.readlink(f"/proc/{pid}/fd/{f}")) for f in os.listdir(f"/proc/{pid}/fd")]
            held.append([n for n in names if n.startswith("events.")])
        assert held == [[f"events.r{k}.s0.log"] for k in range(WORLD)]
        out, err = p.communicate("\n", timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0 and out.split() == ["EXIT"] + ["0"] * WORLD, err
    timers = check_run(root)
    with capsys.disabled():
        print(f"\n{WORLD} forked writers: all alive and logged after {alive:.1f} s, {len(timers)} timer points, "
              f"{time.monotonic() - t0:.1f} s")
