"""Per-rank scalars: ``add_scalar(..., all_ranks=True)`` and ``init(scalars_all_ranks=True)``
(or ``NB_SCALARS_ALL_RANKS=1``) make every rank of a real multi-process job write its own
values into its own event log; a plain add_scalar on a non-zero rank still logs nothing.
Readers (RunReader rank=K and all_ranks=True), nb export and nb tail --rank K return them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import polars as pl
import pytest
from _nbproc import base_env, start_code, torchrun_env, wait

import nblog as nb

NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
WORLD = 3
N = 20

CODE = textwrap.dedent("""
    import json, sys
    import nblog as nb
    mode, N = sys.argv[1], int(sys.argv[2])
    kw = {"scalars_all_ranks": True} if mode == "init" else {}
    run = nb.init("pr", run_id="job", system=False, **kw)
    every = None if mode in ("init", "env") else True
    for i in range(N):
        run.add_scalar("loss", 100.0 * run.rank + i, step=i, all_ranks=every)
        run.add_scalar({"acc": float(run.rank), "lr": 1e-3}, step=i, all_ranks=every)
        run.add_scalar("rank0/only", float(i), step=i, all_ranks=False if every is None else None)
    run.finish()
""")


def _job(tmp_path, mode: str) -> str:
    """Run a WORLD-rank job; returns its run folder."""
    procs = []
    for rank in range(WORLD):
        env = base_env(NB_DIR=str(tmp_path), **torchrun_env(rank, WORLD, run_id="same"),
                       **({"NB_SCALARS_ALL_RANKS": "1"} if mode == "env" else {}))
        procs.append(subprocess.Popen([sys.executable, "-c", CODE, mode, str(N)], env=env, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    return str(tmp_path / "pr" / "job")


@pytest.mark.parametrize("mode", ["call", "init", "env"])
def test_every_rank_writes_its_own_scalars(tmp_path, mode):
    run_dir = _job(tmp_path, mode)
    reader = nb.RunReader(run_dir)
    for rank in range(WORLD):
        frame = reader.scalars(rank=rank)
        loss = frame.filter(pl.col("tag") == "loss").sort("step")
        assert loss["value"].to_list() == [100.0 * rank + i for i in range(N)]
        assert frame.filter(pl.col("tag") == "acc")["value"].to_list() == [float(rank)] * N
        only = frame.filter(pl.col("tag") == "rank0/only")
        assert len(only) == (N if rank == 0 else 0)  # plain add_scalar: rank 0 alone
    merged = reader.scalars("loss", all_ranks=True)
    assert merged.group_by("rank").len().sort("rank")["len"].to_list() == [N] * WORLD
    assert sorted(merged["rank"].unique().to_list()) == list(range(WORLD))
    # run.json's summary stays rank 0's
    meta = json.loads((tmp_path / "pr" / "job" / "run.json").read_text())
    assert meta["summary"]["loss"]["max"] == N - 1


def test_tail_and_export_return_the_rank_asked_for(tmp_path):
    run_dir = _job(tmp_path, "call")
    env = base_env()
    for rank in range(WORLD):
        proc = subprocess.run([*NB, "tail", run_dir, "--rank", str(rank), "-n", "3", "--tag", "loss", "--json"],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        rows = [json.loads(line) for line in proc.stdout.splitlines()]
        assert [(r["rank"], r["step"], r["value"]) for r in rows] == [
            (rank, s, 100.0 * rank + s) for s in range(N - 3, N)]
    out = tmp_path / "all.csv"
    proc = subprocess.run([*NB, "export", run_dir, "--all-ranks", "-o", str(out)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    frame = pl.read_csv(out).filter(pl.col("tag") == "loss")
    for rank in range(WORLD):
        got = frame.filter(pl.col("rank") == rank).sort("step")["value"].to_list()
        assert got == [100.0 * rank + i for i in range(N)]


def test_non_logging_rank_without_all_ranks_makes_no_event_log(tmp_path):
    """A plain add_scalar on rank 1 keeps its old cost: no writer, no file."""
    done = []
    for rank in range(2):
        env = base_env(NB_DIR=str(tmp_path), **torchrun_env(rank, 2, run_id="same"))
        done.append(start_code(
            "import nblog as nb\n"
            "run = nb.init('pr', run_id='plain', system=False)\n"
            "for i in range(5): run.add_scalar('loss', 1.0, step=i)\n"
            "print('RESULT', 'null' if run._writer is None else '1')\n"
            "run.finish()\n", env, tmp_path))
    results = [wait(p).result for p in done]
    assert results == [1, None]
    assert not list((tmp_path / "pr" / "plain").glob("events.r1.*"))
